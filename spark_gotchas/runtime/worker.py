"""A child process that does every piece of GPU work, so a crash or hang cannot kill pytest.

The worker imports torch once (the import is the slow part of a preflight) and then runs
tasks named ``"module:function"`` with JSON arguments, one at a time, each under a timeout.
A task that segfaults, aborts or hangs ends the worker; the caller gets a :class:`TaskResult`
that says so (signal name, timeout) and the next call starts a fresh worker.

Protocol: JSON lines. The parent writes ``{"id", "task", "args"}`` to the child's stdin; the
child answers on a private pipe (its stdout proper is redirected to stderr so that library
prints cannot corrupt the protocol) with zero or more ``{"id", "progress"}`` lines and then
one ``{"id", "ok", "value" | "error"}`` line. Once its preload imports are done the child sends
one ``{"ready": {module: seconds}, "t_epoch"}`` line, which feeds :attr:`Worker.timeline`.
A second pipe carries the names of head-start parts (:meth:`Worker.head_start`) that the child starts at once,
even mid-import; each answers with a ``{"warmups": {name: {"result", "t_start_epoch", "t_end_epoch"}}}``
line when it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..base import scrub


@dataclass(frozen=True)
class TaskResult:
    """What one task gave back: a value, or why not (error text, crash signal, timeout)."""

    ok: bool
    value: Any = None
    error: str = ""
    crashed: bool = False
    signal: str = ""
    timed_out: bool = False
    seconds: float = 0.0
    stderr_tail: str = ""
    progress: list = field(default_factory=list)
    beside: tuple[str, ...] = ()  # head-start parts still running in the child when it died or was killed

    @property
    def problem(self) -> str:
        """One line saying what went wrong ('' when ok)."""
        if self.ok:
            return ""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s (killed)" + self._beside_text
        if self.crashed:
            how = f"killed by {self.signal}" if self.signal else "exited"
            tail = self.stderr_tail.strip().splitlines()[-1:] if self.stderr_tail else []
            return f"child process {how}" + (f": {scrub.clip(tail[0], 200, mark='')}" if tail else "") + self._beside_text
        return self.error

    @property
    def _beside_text(self) -> str:
        if not self.beside:
            return ""
        return (f" (the head start's {', '.join(self.beside)} was running beside it; "
                f"SPARK_GOTCHAS_HEADSTART={','.join('-' + b for b in self.beside)} runs without)")


def _warmup_json(entry: Any, rel: Callable[[float], float]) -> dict[str, Any]:
    """A head-start part's result, when it started (seconds from the origin) and how long it took."""
    if not isinstance(entry, dict):
        return {"result": entry}
    start, end = entry.get("t_start_epoch"), entry.get("t_end_epoch")
    timed = isinstance(start, (int, float)) and isinstance(end, (int, float))
    return {"result": entry.get("result"), "start_s": rel(start) if timed else None,
            "seconds": round(end - start, 3) if timed else None}


@dataclass
class Timeline:
    """When the worker started, finished its imports and ran each task: where a preflight's time goes.

    Times are ``time.time()`` epochs; :meth:`to_json` gives them as seconds after ``origin``.
    """

    starts: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    preload_seconds: dict[str, float] = field(default_factory=dict)
    warmups: dict[str, Any] = field(default_factory=dict)  # name -> "running" when asked, the child's entry when done
    tasks: list[dict] = field(default_factory=list)  # task, start, seconds, ok

    def to_json(self, origin: float) -> dict[str, Any]:
        def rel(t: float) -> float:
            return round(t - origin, 3)

        return {
            "worker_starts_s": [rel(t) for t in self.starts],
            "worker_ready_s": [rel(t) for t in self.ready],
            "preload_s": {k: round(v, 3) for k, v in self.preload_seconds.items()},
            "warmups": {name: _warmup_json(entry, rel) for name, entry in self.warmups.items()},
            "tasks": [{"task": t["task"], "start_s": rel(t["start"]), "seconds": round(t["seconds"], 3), "ok": t["ok"]}
                      for t in self.tasks],
        }


WARMUP_CUT_SHORT = "cut short: the worker died or was killed first"


class _StartFailed(OSError):
    """The child process could not be started at all."""


_CLOSED: dict = {"closed": True}  # _read_message's answer when the child is gone


def _signal_name(returncode: int | None) -> str:
    if returncode is None or returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


NO_GPU_TASKS = frozenset({"spark_gotchas.runtime.tasks:torch_build"})  # tasks that make no CUDA context (torch's facts only)


class Worker:
    """Parent side of the worker: one task at a time (calls from several threads take turns)."""

    def __init__(self, preload: tuple[str, ...] = ("torch",), env: dict[str, str] | None = None):
        self.preload = preload
        self.env = env
        self._proc: subprocess.Popen | None = None
        self._reply_fd: int | None = None
        self._warmup_fd: int | None = None  # the write end of the child's head-start pipe
        self._stderr: Any = None
        self._buffer = b""
        self._next_id = 0
        self.starts = 0
        self.timeline = Timeline()
        self._turn = threading.RLock()  # one call at a time
        self._write = threading.Lock()  # one request written at a time (calls and submits)
        self._pauses = 0  # see paused()
        self._pause_change = threading.Condition()
        self._gpu_start = -1  # the start (see ``starts``) of the child last asked for work that may use the GPU

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the child now (it begins importing the preload modules at once)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self.close()
        read_fd, write_fd = os.pipe()
        warmup_read, warmup_write = os.pipe()
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ if self.env is None else self.env)
        env["SPARK_GOTCHAS_REPLY_FD"] = str(write_fd)
        env["SPARK_GOTCHAS_WARMUP_FD"] = str(warmup_read)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "spark_gotchas.runtime.worker_main", *self.preload],
            stdin=subprocess.PIPE,
            stdout=self._stderr,
            stderr=self._stderr,
            pass_fds=(write_fd, warmup_read),
            env=env,
            start_new_session=True,
        )
        os.close(write_fd)
        os.close(warmup_read)
        self._warmup_fd = warmup_write
        self._reply_fd = read_fd
        self._buffer = b""
        self.starts += 1
        self.timeline.starts.append(time.time())

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def on_gpu(self) -> bool:
        """Whether the child may hold a CUDA context: it runs, and since it started it was asked for a
        task or head-start part that may create one (anything but :data:`NO_GPU_TASKS`)."""
        return self.alive and self._gpu_start == self.starts

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs (the process a measurement in it runs in), else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.poll() is None and proc.stdin:
                    proc.stdin.close()
                    try:
                        proc.wait(timeout=0.5)  # an idle worker exits at once on EOF
                    except subprocess.TimeoutExpired:
                        self._kill(proc)
            except OSError:
                self._kill(proc)
            with contextlib.suppress(OSError):  # whatever the worker started leaves with it
                os.killpg(proc.pid, signal.SIGKILL)
        if self._reply_fd is not None:
            os.close(self._reply_fd)
            self._reply_fd = None
        if self._warmup_fd is not None:
            os.close(self._warmup_fd)
            self._warmup_fd = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def end_input(self) -> None:
        """Close the child's stdin: an idle worker leaves at once (``close`` then waits for it)."""
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    def head_start(self, name: str) -> bool:
        """Have the child start the head-start part ``name`` (:mod:`spark_gotchas.runtime.headstart`) in a thread now,
        even while it still imports. False when there is no child to ask (nothing is started)."""
        fd = self._warmup_fd
        if fd is None or not self.alive:
            return False
        try:
            os.write(fd, name.encode() + b"\n")
        except OSError:
            return False
        self.timeline.warmups.setdefault(name, "running")  # until the child's answer replaces it
        self._gpu_start = self.starts
        return True

    def interrupt(self) -> None:
        """Ask the running task to stop early (SIGINT to the child; tasks poll should_stop())."""
        if self.alive:
            try:
                os.kill(self._proc.pid, signal.SIGINT)  # type: ignore[union-attr]
            except OSError:
                pass

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def _stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    # -- calls ---------------------------------------------------------------------------
    def call(
        self,
        task: str,
        args: dict[str, Any] | None = None,
        timeout: float = 60.0,
        on_progress: Callable[[Any], None] | None = None,
    ) -> TaskResult:
        """Run ``task`` ("package.module:function") in the child; never raises for its failures."""
        with self._pause_change:
            self._pause_change.wait_for(lambda: self._pauses == 0)
        with self._turn:
            began = time.time()
            result = self._call(task, args, timeout, on_progress)
            self.timeline.tasks.append({"task": task, "start": began,
                                        "seconds": result.seconds or time.time() - began, "ok": result.ok})
        return result

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No task starts in this worker while this is held (from any thread; it nests). For work
        elsewhere that must have the GPU to itself: the G4 spot check's load in another worker."""
        with self._pause_change:
            self._pauses += 1
        try:
            yield
        finally:
            with self._pause_change:
                self._pauses -= 1
                self._pause_change.notify_all()

    def submit(self, task: str, args: dict[str, Any] | None = None, start: bool = True) -> bool:
        """Queue ``task`` without waiting for it; its reply is dropped. For tasks that only start
        background work in the child (compiling kernels) and return at once. False if it could not
        be sent (the next call starts a fresh worker as usual). ``start=False``: only to a child
        that is running now (a late head start must not start a worker the run has closed)."""
        if not start and not self.alive:
            return False
        try:
            self._send(task, args)  # no call waits for its id: the reply is skipped like any other
        except OSError:
            return False
        self.timeline.tasks.append({"task": task, "start": time.time(), "seconds": 0.0, "ok": True})
        return True

    def _send(self, task: str, args: dict[str, Any] | None) -> int:
        """Write one request (starting the child if needed); its id. Raises OSError."""
        with self._write:
            try:
                self.start()
            except OSError as exc:
                raise _StartFailed(str(exc)) from exc
            assert self._proc is not None and self._proc.stdin is not None
            if task not in NO_GPU_TASKS:
                self._gpu_start = self.starts
            self._next_id += 1
            request = {"id": self._next_id, "task": task, "args": args or {}}
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
            return self._next_id

    def _call(self, task: str, args: dict[str, Any] | None, timeout: float,
              on_progress: Callable[[Any], None] | None) -> TaskResult:
        """One request and its reply; :meth:`call` adds the pause, the turn and the timeline."""
        start = time.monotonic()
        try:
            request_id = self._send(task, args)
        except _StartFailed as exc:
            return TaskResult(ok=False, error=f"could not start the worker: {exc}")
        except OSError:
            return self._dead(start, [])
        progress: list = []
        deadline = start + timeout
        while True:
            message = self._read_message(deadline)
            if message is _CLOSED:  # the child closed the pipe: it died (do not race its reaping)
                return self._dead(start, progress)
            if message is None:  # the deadline passed
                if self.alive:
                    seconds = time.monotonic() - start
                    tail = self._stderr_tail()
                    self._kill(self._proc)
                    self.close()
                    return TaskResult(ok=False, timed_out=True, seconds=seconds, stderr_tail=tail,
                                      progress=progress, beside=self._warmups_cut_short())
                return self._dead(start, progress)
            if "ready" in message or ("warmups" in message and "id" not in message):
                self._note_ready(message)
                continue
            if message.get("id") != request_id:
                continue
            if "progress" in message:
                progress.append(message["progress"])
                if on_progress is not None:
                    on_progress(message["progress"])
                continue
            return TaskResult(
                ok=bool(message.get("ok")),
                value=message.get("value"),
                error=message.get("error", ""),
                seconds=time.monotonic() - start,
                progress=progress,
            )

    def _note_ready(self, message: dict) -> None:
        if isinstance(message.get("ready"), dict):
            self.timeline.preload_seconds.update(
                {str(k): float(v) for k, v in message["ready"].items() if isinstance(v, (int, float))})
        if isinstance(message.get("warmups"), dict):
            self.timeline.warmups.update(message["warmups"])
        if "ready" in message and isinstance(message.get("t_epoch"), (int, float)):
            self.timeline.ready.append(float(message["t_epoch"]))

    def _dead(self, start: float, progress: list) -> TaskResult:
        proc = self._proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill(proc)
                rc = proc.returncode
        tail = self._stderr_tail()
        self.close()
        return TaskResult(
            ok=False,
            crashed=True,
            signal=_signal_name(rc),
            error=f"worker exited with code {rc}",
            seconds=time.monotonic() - start,
            stderr_tail=tail,
            progress=progress,
            beside=self._warmups_cut_short(),
        )

    def _warmups_cut_short(self) -> tuple[str, ...]:
        """The head-start parts the ended child was still running (a crash may have been theirs); each is
        marked as cut short, so a later child's failure does not name it again."""
        names = tuple(n for n, entry in self.timeline.warmups.items() if entry == "running")
        for name in names:
            self.timeline.warmups[name] = WARMUP_CUT_SHORT
        return names

    def _read_message(self, deadline: float) -> dict | None:
        assert self._reply_fd is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._reply_fd], [], [], min(remaining, 1.0))
            if not ready:
                if not self.alive:
                    return _CLOSED
                continue
            chunk = os.read(self._reply_fd, 1 << 16)
            if not chunk:
                return _CLOSED
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {}


# -- a worker started before pytest is imported (the spark-gotchas command) -------------------------
_PRESTARTED: list[Worker] = []


def prestart(preload: tuple[str, ...]) -> Worker:
    """Start a worker now, before pytest and its plugins are imported (tenths of a second the torch
    import would otherwise wait); the run's :func:`adopt` takes it over."""
    worker = Worker(preload=preload)
    worker.start()
    _PRESTARTED.append(worker)
    return worker


def adopt(preload: tuple[str, ...]) -> Worker | None:
    """The worker :func:`prestart` started with these preload modules, once (None if there is none)."""
    for worker in _PRESTARTED:
        if worker.preload == preload:
            _PRESTARTED.remove(worker)
            return worker
    return None


def close_unadopted() -> None:
    """Close what was started early and never taken over (a run that needed no GPU worker)."""
    while _PRESTARTED:
        _PRESTARTED.pop().close()
