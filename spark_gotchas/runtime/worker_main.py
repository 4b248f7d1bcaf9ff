"""Child side of :mod:`spark_gotchas.runtime.worker`: import the preload modules, then serve tasks.

Tasks are plain functions ``def task(**args)`` that return a JSON value or a dataclass (sent as
:func:`spark_gotchas.base.serial.to_jsonable` writes it). A task that declares a ``progress`` or a
``should_stop`` parameter gets this module's: :func:`progress` streams intermediate results to the
parent, and :func:`should_stop` turns true on SIGINT and SIGTERM, so a soak stops cleanly and still
returns what it measured. That is how the measurements of :mod:`spark_gotchas.microbench`, which
import nothing of the suite, report from a worker; the suite's own tasks may call both directly.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.abc
import inspect
import json
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback
from typing import Any

from ..base.serial import to_jsonable
from . import headstart

_OUT: Any = None
_CURRENT_ID: int | None = None
_STOP = threading.Event()
_WRITE_LOCK = threading.Lock()
PRELOAD_SECONDS: dict[str, float] = {}
PRELOAD_ERRORS: dict[str, str] = {}
PRELOAD_ERROR_FILES: dict[str, str] = {}  # the file the import failed in (innermost frame)


def should_stop() -> bool:
    """True once the parent asked the running task to stop (SIGINT/SIGTERM)."""
    return _STOP.is_set()


def progress(value: Any) -> None:
    """Send an intermediate result of the running task to the parent (no-op outside a worker)."""
    if _OUT is None or _CURRENT_ID is None:
        return
    _send({"id": _CURRENT_ID, "progress": value})


def _send(message: dict) -> None:
    with _WRITE_LOCK:
        _OUT.write(json.dumps(message, default=str) + "\n")
        _OUT.flush()


def failing_file(exc: BaseException) -> str:
    """The innermost file outside Python's own library that an exception passed through ('' when
    none): for ``import torch`` that is torch's ``__init__.py`` when its ``ctypes.CDLL`` of a CUDA
    library fails, and ``pynvml.py`` when a broken pynvml raises on import."""
    paths = sysconfig.get_paths()
    stdlib = (paths["stdlib"], paths["platstdlib"])
    installed = (paths["purelib"], paths["platlib"])  # under stdlib with some layouts (pyenv)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        name = frame.filename
        if name.startswith("<") or (name.startswith(stdlib) and not name.startswith(installed)):
            continue
        return name
    return ""


def _pynvml_hangs(name: str) -> bool:
    """Import pynvml first, bounded (torch imports it during its own import): when that import
    hangs, record it as ``name``'s import error, in pynvml's file, and say so. torch is then not
    imported: its import would wait for ever on the stuck import of pynvml."""
    from ..machine import nvml

    imported = nvml.import_pynvml()
    if not imported.hung:  # imported, or raised: torch's own import then says how
        return False
    PRELOAD_ERRORS[name] = f"import pynvml (which {name} imports) hangs: {imported.reason}"
    PRELOAD_ERROR_FILES[name] = imported.path or ""
    sys.meta_path.insert(0, _Refuse(name, PRELOAD_ERRORS[name]))  # a task's import fails at once
    return True


class _Refuse(importlib.abc.MetaPathFinder):
    """Fails every import of one package at once, with the reason (instead of a wait for ever)."""

    def __init__(self, package: str, reason: str) -> None:
        self.package, self.reason = package, reason

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] == self.package:
            raise ImportError(f"{self.package} not imported: {self.reason}", name=fullname)
        return None


def _on_signal(signum: int, frame: Any) -> None:
    _STOP.set()


HOOKS = ("progress", "should_stop")  # what a task gets by declaring a parameter of that name


@functools.cache
def _hooks_declared(func: Any) -> tuple[str, ...]:
    """The HOOKS ``func`` names among its parameters (read once per function)."""
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return ()
    return tuple(name for name in HOOKS if name in parameters)


def _run(task: str, args: dict) -> Any:
    module_name, _, func_name = task.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    hooks = {"progress": progress, "should_stop": should_stop}
    value = func(**{**args, **{name: hooks[name] for name in _hooks_declared(func)}})
    # A dataclass goes as its fields; plain values as they are (a NaN stays a NaN, as before).
    return to_jsonable(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value


def main(argv: list[str]) -> int:
    global _OUT, _CURRENT_ID
    reply_fd = int(os.environ.pop("SPARK_GOTCHAS_REPLY_FD"))
    _OUT = os.fdopen(reply_fd, "w", buffering=1)
    sys.stdout = sys.stderr  # library prints must not reach the protocol pipe
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    warmup_fd = os.environ.pop("SPARK_GOTCHAS_WARMUP_FD", None)
    if warmup_fd is not None:  # the head-start parts the parent names, beside the imports
        threading.Thread(target=headstart.serve, args=(int(warmup_fd), _send), name="warmups",
                         daemon=True).start()
    for name in argv:
        t0 = time.perf_counter()
        if name == "torch" and _pynvml_hangs(name):
            PRELOAD_SECONDS[name] = time.perf_counter() - t0
            continue
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # a crash (segfault) ends the process: the parent reports it
            PRELOAD_ERRORS[name] = f"{type(exc).__name__}: {exc}"
            PRELOAD_ERROR_FILES[name] = failing_file(exc)
        PRELOAD_SECONDS[name] = time.perf_counter() - t0
    _send({"ready": PRELOAD_SECONDS, "t_epoch": time.time()})
    for raw in sys.stdin:
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            continue
        _CURRENT_ID = request.get("id")
        _STOP.clear()
        try:
            value = _run(request["task"], request.get("args") or {})
            reply = {"id": _CURRENT_ID, "ok": True, "value": value}
        except (Exception, SystemExit) as exc:  # a task's sys.exit() is its error, not the worker's end
            tb = traceback.format_exc(limit=3)
            print(tb, file=sys.stderr)
            reply = {"id": _CURRENT_ID, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        _send(reply)
        _CURRENT_ID = None
    # End of input: the parent is done. Leave at once: tearing down torch, CUDA and any background
    # thread at interpreter exit takes longer than the preflight's own checks, and the kernel
    # releases the GPU context either way.
    _OUT.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    # Run as ``python -m``, this module is ``__main__``; tasks import it by its real name to call
    # progress()/should_stop() and read PRELOAD_*: both names must be this one module.
    sys.modules.setdefault("spark_gotchas.runtime.worker_main", sys.modules[__name__])
    sys.exit(main(sys.argv[1:]))
