"""The one place that talks to NVML and turns its errors into "not available".

Every NVML call in the suite goes through :func:`query`. A failure never raises: it returns a
:class:`NotAvailable` that carries the reason (``Not Supported`` on GB10's memory call is a
normal platform state, not an error). Judges must test ``is_na(value)`` before any threshold.

Every call is bounded. ``import pynvml``, ``nvmlInit`` and each query run in one daemon thread
(ctypes releases the GIL during the C call) and the caller waits at most
``SPARK_GOTCHAS_NVML_TIMEOUT`` seconds (default 5). A call that does not return in time — a
wedged driver, or a module named ``pynvml`` that blocks — makes NVML unavailable for the rest of
the process: every later call returns the same :class:`NotAvailable` at once, and the stuck
thread cannot keep the process from exiting. A binding that raises anything at import, even
``SystemExit``, is a reason too; where ``pynvml`` is not nvidia-ml-py's file (a ``pynvml.py`` in
the current folder or on ``PYTHONPATH``) the reason names that file.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.metadata
import importlib.util
import os
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..base import scrub
from .options import env_number

TIMEOUT_ENV = "SPARK_GOTCHAS_NVML_TIMEOUT"
DEFAULT_TIMEOUT_S = 5.0
OFFICIAL = "nvidia-ml-py"

_LOCK = threading.Lock()
# "shadow": the path of a pynvml that is not nvidia-ml-py's, once it is what made NVML unavailable
_STATE: dict[str, Any] = {"tried": False, "error": None, "module": None, "shadow": None}


@dataclass(frozen=True)
class NotAvailable:
    """An NVML value that could not be read, with the reason (e.g. ``Not Supported``)."""

    reason: str

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"N/A ({self.reason})"


def is_na(value: Any) -> bool:
    return value is None or isinstance(value, NotAvailable)


def timeout_s() -> float:
    """The per-call budget: ``SPARK_GOTCHAS_NVML_TIMEOUT`` seconds when it is in its span
    (:data:`options.ENVIRONMENT`; a pytest run refuses any other value), else 5."""
    try:
        value = env_number(TIMEOUT_ENV)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return DEFAULT_TIMEOUT_S if value is None else value


def describe_error(exc: BaseException) -> str:
    """A short human reason for an NVML error or an import failure."""
    name = type(exc).__name__
    text = str(exc).strip() or name
    if name == "NVMLError_LibraryNotFound":
        return "NVML library not found (no NVIDIA driver on this machine)"
    if name == "NVMLError_DriverNotLoaded":
        return "NVIDIA driver not loaded"
    if name == "NVMLError_NoPermission":
        return "no permission"
    if name == "NVMLError_FunctionNotFound":
        return "function not in this driver's NVML"
    if isinstance(exc, ImportError):
        return "pynvml not importable (install nvidia-ml-py)"
    if isinstance(exc, AttributeError):
        return "function not in this nvidia-ml-py"
    if isinstance(exc, SystemExit):
        return repr(exc)
    return text


# -- which pynvml --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Binding:
    """Where ``import pynvml`` resolves, and whether that file is nvidia-ml-py's.

    Read only when something failed: it reads package metadata, which costs milliseconds.
    """

    path: Optional[str]  # the module's file; None when there is no module named pynvml
    owner: Optional[str]  # the installed distribution that ships that file (None: none does, or unknown)
    official_path: Optional[str]  # where nvidia-ml-py's own pynvml is, when it is installed
    known: bool = True  # False when the package records cannot tell whose file it is

    @property
    def foreign(self) -> bool:
        """True when the module is surely not nvidia-ml-py's."""
        return self.path is not None and self.known and self.owner != OFFICIAL

    @property
    def note(self) -> str:
        """Why the module is the culprit ('' when it is nvidia-ml-py's, or unknown)."""
        if not self.foreign:
            return ""
        if self.owner:
            return f"it comes from the {self.owner} package, not {OFFICIAL}"
        if self.official_path:
            return f"a module named pynvml shadows {OFFICIAL}"
        return f"it is not {OFFICIAL}'s (that is not installed)"


def _module_file(name: str, path: Any) -> bool:
    text = str(path).replace("\\", "/")
    return text in (f"{name}.py", f"{name}/__init__.py")


def binding() -> Binding:
    """Where ``import pynvml`` leads without importing it (safe while an import of it hangs)."""
    try:
        spec = importlib.util.find_spec("pynvml")
    except (ImportError, ValueError, AttributeError):
        spec = None
    path = spec.origin if spec is not None and spec.origin not in (None, "built-in", "frozen") else None
    if path is None:
        return Binding(path=None, owner=None, official_path=None)
    real = os.path.realpath(path)
    owner = official = None
    known = True
    for dist_name in (OFFICIAL, "pynvml"):
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        files = dist.files
        if files is None:  # no record of its files: cannot tell
            known = known and dist_name != OFFICIAL
            continue
        for file in files:
            if _module_file("pynvml", file):
                located = os.path.realpath(str(dist.locate_file(file)))
                if dist_name == OFFICIAL:
                    official = located
                if located == real and owner is None:
                    owner = dist_name
    return Binding(path=path, owner=owner, official_path=official, known=known)


def shadow() -> Optional[str]:
    """The path of a pynvml that is not nvidia-ml-py's, when it is what made NVML unavailable."""
    return _STATE.get("shadow")




def _blame(head: str, found: Binding, driver_hint: str = "") -> str:
    """``head`` with the culprit: the foreign file when there is one, else the driver hint."""
    if found.foreign:
        _STATE["shadow"] = found.path
        where = "" if str(found.path) in head else f" in pynvml at {found.path}"
        return f"{head}{where}: {found.note}"
    return head + driver_hint


# -- the bounded call ------------------------------------------------------------------------------
class _Call:
    __slots__ = ("name", "func", "args", "value", "error", "done")

    def __init__(self, name: str, func: Callable[..., Any], args: tuple) -> None:
        self.name, self.func, self.args = name, func, args
        self.value: Any = None
        self.error: Optional[BaseException] = None
        self.done = _thread.allocate_lock()
        self.done.acquire()  # released by the NVML thread when the call returns


class _Runner:
    """One daemon thread that makes every NVML call, so a caller can stop waiting for a stuck one."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._start = threading.Lock()

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            try:
                call.value = call.func(*call.args)
            except BaseException as exc:  # SystemExit from a foreign import ends no thread here
                call.error = exc
            call.done.release()

    def run(self, name: str, func: Callable[..., Any], args: tuple, budget: float) -> Optional[_Call]:
        """The finished call (value or error), or None when it did not return within ``budget``."""
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    thread = threading.Thread(target=self._serve, name="nvml-calls", daemon=True)
                    thread.start()
                    self._thread = thread
        call = _Call(name, func, args)
        self._calls.put(call)
        return call if call.done.acquire(timeout=budget) else None


    def forget(self) -> None:
        """In a forked child: the thread did not come along, so the next call starts one."""
        self._calls = queue.SimpleQueue()
        self._thread = None
        self._start = threading.Lock()


_RUNNER = _Runner()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_RUNNER.forget)


def _late(what: str, budget: float) -> str:
    return f"{what} did not return within {budget:g} s"


@dataclass(frozen=True)
class Imported:
    """What a bounded ``import pynvml`` gave: the module, or why not (``hung``: it never returned)."""

    module: Any = None
    reason: Optional[str] = None
    hung: bool = False
    path: Optional[str] = None  # the module's file, read when the import failed


def import_pynvml(budget: Optional[float] = None) -> Imported:
    """``import pynvml`` in the NVML thread, bounded.

    ``SystemExit`` and every other exception at import is a reason; a hang is one after ``budget``
    seconds (the import then goes on in a daemon thread, holding the module's import lock).
    """
    budget = timeout_s() if budget is None else budget
    call = _RUNNER.run("import pynvml", importlib.import_module, ("pynvml",), budget)
    if call is None:
        found = binding()
        where = f"pynvml at {found.path}" if found.path else "import pynvml"
        return Imported(reason=_blame(f"{where} did not finish importing within {budget:g} s", found),
                        hung=True, path=found.path)
    exc = call.error
    if exc is None:
        return Imported(module=call.value)
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    if isinstance(exc, ModuleNotFoundError) and exc.name == "pynvml":
        return Imported(reason=describe_error(exc))
    found = binding()
    where = f"pynvml at {found.path}" if found.path else "pynvml"
    return Imported(reason=_blame(f"{where} raised {scrub.clip(repr(exc), 200, mark='')} at import", found), path=found.path)


def init() -> NotAvailable | None:
    """Initialise NVML once per process; return why it is unavailable, or None when it works."""
    with _LOCK:
        if not _STATE["tried"]:
            _STATE["tried"] = True
            _STATE["error"] = _first_init()
        return _STATE["error"]


def _first_init() -> NotAvailable | None:
    imported = import_pynvml()
    if imported.reason is not None:
        return NotAvailable(imported.reason)
    budget = timeout_s()
    nvml_init = getattr(imported.module, "nvmlInit", None)
    if nvml_init is None:
        return NotAvailable(_blame("pynvml has no nvmlInit", binding()))
    call = _RUNNER.run("nvmlInit", nvml_init, (), budget)
    if call is None:
        return NotAvailable(_blame(f"NVML call {_late('nvmlInit', budget)}", binding(), " (a wedged driver?)"))
    if call.error is not None:
        if isinstance(call.error, KeyboardInterrupt):
            raise call.error
        if type(call.error).__name__.startswith("NVMLError"):  # the driver's own answer
            return NotAvailable(describe_error(call.error))
        return NotAvailable(_blame(f"nvmlInit raised {scrub.clip(repr(call.error), 200, mark='')}", binding()))
    _STATE["module"] = imported.module
    return None


def module() -> Any:
    """The pynvml module after a successful :func:`init` (None otherwise, or once NVML is wedged)."""
    init()
    return _STATE["module"]


def const(name: str) -> Any:
    """A constant of pynvml (``NVML_CLOCK_SM``…), or :class:`NotAvailable` when the binding lacks it.

    A query given a NotAvailable argument returns it without calling NVML.
    """
    found = getattr(module(), name, None)
    return NotAvailable(f"{name} not in this pynvml") if found is None else found


def query(func: str, *args: Any, ignore_errors: bool = True) -> Any:
    """Call ``pynvml.<func>(*args)``; NVML failure -> :class:`NotAvailable` (or raise if asked).

    Command line equivalent: most values have an ``nvidia-smi --query-gpu=…`` field; readers
    name it in their docstrings so an operator can re-check a value by hand.
    """
    reason = init()
    if reason is None:
        reason = next((a for a in args if isinstance(a, NotAvailable)), None)
    if reason is not None:
        if ignore_errors:
            return reason
        raise RuntimeError(reason.reason)
    target = getattr(_STATE["module"], func, None)
    if target is None:
        if not ignore_errors:
            raise AttributeError(f"pynvml has no {func}")
        return NotAvailable("function not in this nvidia-ml-py")
    budget = timeout_s()
    call = _RUNNER.run(func, target, args, budget)
    if call is None:
        return _wedged(func, budget, ignore_errors)
    exc = call.error
    if exc is not None:
        if not ignore_errors or isinstance(exc, KeyboardInterrupt):
            raise exc
        return NotAvailable(describe_error(exc))
    value = call.value
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value


def _wedged(func: str, budget: float, ignore_errors: bool) -> NotAvailable:
    """NVML is unavailable from now on: this and every later call returns the same reason at once."""
    with _LOCK:
        current = _STATE.get("error")
        if current is None:
            current = NotAvailable(_blame(f"NVML call {_late(func, budget)}", binding(), " (a wedged driver?)"))
            _STATE.update({"error": current, "module": None, "tried": True})
    if not ignore_errors:
        raise RuntimeError(current.reason)
    return current


def device_handles() -> list[Any]:
    """Handles of every GPU NVML sees (empty when NVML is unavailable)."""
    count = query("nvmlDeviceGetCount")
    if is_na(count):
        return []
    handles = []
    for index in range(count):
        handle = query("nvmlDeviceGetHandleByIndex", index)
        if not is_na(handle):
            handles.append(handle)
    return handles


def split(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Turn ``{field: value-or-NotAvailable}`` into JSON-ready values (None) plus reasons."""
    clean: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, NotAvailable):
            clean[key] = None
            reasons[key] = value.reason
        else:
            clean[key] = value
    return clean, reasons
