"""Who else is on the GPU while a measurement runs: NVML's compute processes before, during and after
it, NVML's per-process utilization over it, and the device memory no listed process holds
(:class:`spark_gotchas.knowledge.readings.gpu.MeasureWindow`).

Why: a figure far below the profile's (G4's load, G5's bandwidth, G7's GEMM rates) is the GPU's own
fault only when nothing else used the GPU meanwhile. A process list read at another moment of the
run cannot tell: two preflights started together each see the other only while both measure. In
a container without ``--pid=host`` NVML lists another pid namespace's job under a pid that cannot
be mapped here, or not at all: its memory still shows in the device's own figure.

Usage, around the call that measures (it runs in another process of this run)::

    with watch("G5 bandwidth probe", measuring_pid=lambda: worker.pid) as w:
        result = worker.call(...)
    reading.window = w.window

This run's own processes (this pytest, its workers, their children and the launchers above it) are
left out by pid. Every NVML call goes through :mod:`spark_gotchas.machine.nvml` (bounded, errors become
reasons). Check by hand: ``nvidia-smi pmon -s u`` in another shell while the check runs.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Optional

from ..base import scrub
from ..knowledge.readings.gpu import SUITE_WORKER_MODULE, MeasureWindow, WindowProcess
from . import nvml
from .readers.gpu import in_this_namespace, memory_figures

INTERVAL_S = 0.1  # process lists during the window (each read costs well under a millisecond on an H200)


def _own_pids(psutil: Any) -> set[int]:
    """This process, every descendant (workers, their children) and every ancestor."""
    if psutil is None:
        return {os.getpid()}
    pids = {os.getpid()}
    try:
        me = psutil.Process()
        pids.update(p.pid for p in me.children(recursive=True))
        pids.update(p.pid for p in me.parents())
    except (psutil.Error, OSError):
        pass
    return pids


def _describe(psutil: Any, pid: int) -> dict[str, Any]:
    """What an NVML pid is, read when it is first listed (it may be gone by the window's end):
    ``visible`` here, its ``program``, whether it is another spark-gotchas run's worker and that
    run's pid (the worker's parent: one run has a GPU worker and a load worker)."""
    out: dict[str, Any] = {"visible": True, "program": "", "suite_run": False, "run_pid": None}
    if psutil is None:
        return out
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        name = proc.name()
    except psutil.NoSuchProcess:
        return {**out, "visible": in_this_namespace(pid)}  # /proc may hide another user's process (hidepid)
    except (psutil.Error, OSError):
        return out
    argv = scrub.mask_argv(argv or [])
    out["program"] = (os.path.basename(argv[0]) if argv else "") or name or ""
    out["suite_run"] = SUITE_WORKER_MODULE in argv
    if out["suite_run"]:
        try:
            out["run_pid"] = int(proc.ppid())
        except (psutil.Error, OSError, TypeError, ValueError):
            pass
    return out


def _own_workers(psutil: Any) -> int:
    """How many of this process's children are the suite's workers (each may hold a CUDA context)."""
    if psutil is None:
        return 1
    try:
        children = psutil.Process().children(recursive=True)
    except (psutil.Error, OSError):
        return 1
    count = 0
    for child in children:
        try:
            count += SUITE_WORKER_MODULE in child.cmdline()
        except (psutil.Error, OSError):
            continue
    return count


class Watch:
    """Samples the compute processes of one NVML device in a thread while a measurement runs."""

    def __init__(self, what: str, handle: Any, measuring_pid: Callable[[], Optional[int]] = lambda: None,
                 interval_s: float = INTERVAL_S, psutil: Any = None):
        self.window = MeasureWindow(what=what)
        self._handle = handle
        self._measuring_pid = measuring_pid
        self._interval_s = interval_s
        self._psutil = psutil
        self._seen: dict[int, dict] = {}  # pid -> {"phases": set, "memory": int | None}
        self._measurer_listed = False
        self._own: set[int] = set()  # this run's processes, read again only when NVML lists a pid not seen yet
        self._unlisted: list[Optional[int]] = []  # per sample: device memory no listed process held (None: not comparable)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- sampling ---------------------------------------------------------------------------------
    def _sample(self, phase: str) -> None:
        memory = memory_figures(self._handle)  # before the lists: a process allocating meanwhile errs low, not high
        procs = nvml.query("nvmlDeviceGetComputeRunningProcesses", self._handle)
        if isinstance(procs, nvml.NotAvailable):
            self.window.lists_error = self.window.lists_error or procs.reason
            return
        self.window.samples += 1
        measurer = self._measuring_pid()
        listed = [int(proc.pid) for proc in procs or []]
        if any(pid not in self._own and pid not in self._seen for pid in listed):
            self._own = _own_pids(self._psutil)  # a pid not known yet: is it a new child of this run's?
        for proc, pid in zip(procs or [], listed, strict=True):
            if pid == measurer:
                self._measurer_listed = True
            if pid in self._own:
                continue
            row = self._seen.get(pid)
            if row is None:
                row = self._seen[pid] = {"phases": set(), "memory": None, "about": _describe(self._psutil, pid)}
            row["phases"].add(phase)
            used = getattr(proc, "usedGpuMemory", None)
            if used is not None:
                row["memory"] = max(row["memory"] or 0, int(used))
        self._unlisted.append(self._unlisted_now(memory, procs or [], listed))

    def _unlisted_now(self, memory: dict[str, Any], compute: list, listed: list[int]) -> Optional[int]:
        """Device memory in use that no listed process (compute or graphics) holds; None where that
        cannot be told: no device figure, a process without its memory, or none of this run's own
        processes listed (NVML may not list them: their memory would count as someone else's)."""
        used = memory.get("memory_used_bytes")
        if nvml.is_na(used):
            return None
        self.window.reserve_split = not nvml.is_na(memory.get("memory_reserved_bytes"))
        graphics = nvml.query("nvmlDeviceGetGraphicsRunningProcesses", self._handle)
        if nvml.is_na(graphics):  # a list not read: its processes' memory would look like someone else's
            return None
        held: dict[int, Optional[int]] = {}
        for proc in [*compute, *(graphics or [])]:
            value = getattr(proc, "usedGpuMemory", None)
            held[int(proc.pid)] = None if value is None else max(held.get(int(proc.pid)) or 0, int(value))
        ours = any(pid in self._own for pid in listed) or any(
            not self._seen[pid]["about"]["visible"] for pid in listed if pid in self._seen)
        if not ours or None in held.values():
            return None
        return max(0, int(used) - sum(v or 0 for v in held.values()))

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample("during")

    def __enter__(self) -> Watch:
        self._sample("before")
        self.window.t_start_epoch = time.time()
        self._thread = threading.Thread(target=self._loop, name="gpu-window", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._sample("during")  # what the measurement's last moments left listed
        self.window.t_end_epoch = time.time()
        self._sample("after")
        self._finish()

    # -- the reading --------------------------------------------------------------------------------
    def _utilization(self) -> dict[int, int]:
        """pid -> the most SM utilization NVML reported for it since the window began (µs stamps)."""
        start_us = int((self.window.t_start_epoch or time.time()) * 1e6)
        samples = nvml.query("nvmlDeviceGetProcessUtilization", self._handle, start_us)
        if isinstance(samples, nvml.NotAvailable):
            if any(word in samples.reason for word in ("Not Found", "NotFound", "Success")):
                return {}  # no process was active since then (older bindings raise "Success" for none)
            self.window.utilization_error = samples.reason
            return {}
        out: dict[int, int] = {}
        for s in samples or []:
            if int(getattr(s, "timeStamp", 0)) >= start_us:
                out[int(s.pid)] = max(out.get(int(s.pid), 0), int(s.smUtil))
        return out

    def _finish(self) -> None:
        pairs = [min(a, b) for a, b in zip(self._unlisted, self._unlisted[1:], strict=False)
                 if a is not None and b is not None]
        self.window.unlisted_bytes = max(pairs) if pairs else None  # seen twice in a row, not a moment's skew
        util = self._utilization() if self.window.samples else {}
        hidden = 0
        for pid, row in sorted(self._seen.items()):
            about = row["about"]
            hidden += not about["visible"]
            sm = util.get(pid, 0) if self.window.utilization_error is None else None
            self.window.others.append(WindowProcess(pid=pid, **about,
                                                    phases=[p for p in ("before", "during", "after")
                                                            if p in row["phases"]],
                                                    sm_util_max_pct=sm, gpu_memory_bytes=row["memory"]))
        if hidden and self._measuring_pid() is not None and not self._measurer_listed:
            # NVML lists host pids: this run's processes are among the hidden ones. With per-process
            # utilization only the measuring one is busy; without it every worker of this run that
            # may hold a context is listed, so all of them are discounted.
            own = 1 if self.window.utilization_error is None else max(1, _own_workers(self._psutil))
            self.window.own_hidden = min(hidden, own)


class _NoWatch:
    """Where no NVML device can be read: the window says why, and nothing is sampled."""

    def __init__(self, what: str, reason: str):
        self.window = MeasureWindow(what=what, lists_error=reason)

    def __enter__(self) -> _NoWatch:
        self.window.t_start_epoch = time.time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.window.t_end_epoch = time.time()


def watch(what: str, handle: Any = None, measuring_pid: Callable[[], Optional[int]] = lambda: None) -> Any:
    """A context manager whose ``.window`` says who else was on the GPU while its body ran.

    ``handle``: the NVML device measured (default: the one torch calls cuda:0, found as the G4
    readers find it)."""
    reason = nvml.init()
    if reason is not None:
        return _NoWatch(what, reason.reason)
    if handle is None:
        from .readers.thermal.snapshot import cuda0_handle

        handle, _index, how = cuda0_handle()
        if handle is None:
            return _NoWatch(what, f"no NVML device for cuda:0 ({how})")
    try:
        import psutil
    except ImportError:
        psutil = None
    return Watch(what, handle, measuring_pid, psutil=psutil)
