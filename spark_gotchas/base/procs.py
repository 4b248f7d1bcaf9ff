"""Run a command so that it and everything it starts are gone when the call returns.

``subprocess.run(cmd, capture_output=True, timeout=…)`` reads the command's pipes to their end,
and a grandchild that inherited them (a helper daemon, a ``sleep``) keeps them open: a command that
exits at once is then reported as timed out and its output lost, without a timeout the call waits
for the grandchild, and either way the grandchild survives. :func:`run_bounded` starts the command
in its own session (its own process group), writes its output to files rather than pipes, and once
the child has exited or the budget is spent kills the whole group with SIGKILL, so no grandchild
survives it. With ``tree``, a child still running at the deadline has its descendants that started
sessions of their own (the suite's GPU workers do) killed with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Optional, Sequence

from . import scrub

OUTPUT_LIMIT = 1 << 20  # bytes kept of each stream (the end of it)
KILL_WAIT_S = 2.0  # after SIGKILL; a process in uninterruptible sleep (a wedged driver) takes longer


@dataclass(frozen=True)
class BoundedRun:
    """What :func:`run_bounded` saw. ``returncode`` as Popen gives it (-9 when killed at the
    deadline); None when it did not start or could not be reaped."""

    command: tuple[str, ...]
    returncode: Optional[int] = None
    stdout: str = ""
    stderr: str = ""  # empty with ``merge_stderr``
    timed_out: bool = False
    error: str = ""  # why it could not start
    seconds: float = 0.0
    limit_s: float = 0.0  # the budget it ran under
    unkillable: bool = False  # still there after SIGKILL (uninterruptible sleep in the kernel)
    cut: bool = False  # stdout (or stderr) was longer than OUTPUT_LIMIT: only its end is kept

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.error

    @property
    def problem(self) -> str:
        """One line saying what went wrong ('' when it exited 0)."""
        name = os.path.basename(self.command[0]) if self.command else "the command"
        if self.error:
            return f"{name} could not start: {self.error}"
        if self.timed_out:
            if self.unkillable:
                return (f"{name} did not finish within {self.limit_s:g} s and survived SIGKILL "
                        f"(stuck in the kernel: a wedged driver?)")
            return f"{name} did not finish within {self.limit_s:g} s (killed with its process group)"
        if self.returncode != 0:
            tail = (self.stdout + "\n" + self.stderr).strip().splitlines()[-1:] or [""]
            return f"{name} exited {self.returncode}: {scrub.clip(tail[0], 160, mark='')}".rstrip(": ")
        return ""


def _read_tail(fh: IO[bytes]) -> str:
    fh.seek(max(0, _size(fh) - OUTPUT_LIMIT))
    return fh.read().decode(errors="replace")


def _size(fh: IO[bytes]) -> int:
    fh.seek(0, os.SEEK_END)
    return fh.tell()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_descendants(pid: int) -> None:
    """SIGKILL every descendant of ``pid`` and its process group: those that left its session too."""
    import psutil  # the suite's dependency; imported here, where a tree is asked for

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except (psutil.Error, OSError):
        return
    for proc in descendants:
        try:
            _kill_group(os.getpgid(proc.pid))
            proc.kill()
        except (psutil.Error, OSError):
            pass


def _libc_prctl():
    """libc's prctl, looked up once here in the parent (never in a forked child), or None off Linux."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()
_PR_SET_PDEATHSIG = 1


def _killed_with_parent(parent: int):
    """A ``preexec_fn``: the child gets SIGKILL when its parent dies, even by SIGKILL (slurmd ends a
    health check with SIGTERM, then SIGKILL): it runs in a session of its own, so no signal to the
    parent's group reaches it. A parent already gone by then ends it at once."""

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)

    return preexec


_CLEANUP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _exited(pid: int) -> bool:
    """True once ``pid`` has exited; it is left a zombie, so its process group id stays its own."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def run_bounded(cmd: Sequence[str], timeout: float, *, env: Optional[dict[str, str]] = None,
                cwd: Optional[str] = None, merge_stderr: bool = False, tree: bool = False,
                die_with_parent: bool = False) -> BoundedRun:
    """Run ``cmd`` for at most ``timeout`` seconds; never raises for the command's own failures.

    The command runs in a new session. When it exits, or when the budget is spent, its process
    group is killed (SIGKILL) before the child is reaped, so nothing it started outlives the call;
    with ``tree``, at the deadline its descendants in other sessions are killed first. SIGTERM,
    SIGINT and SIGHUP wait while that is done (a second SIGTERM would cut it short), and with
    ``die_with_parent`` the child is killed by the kernel if this process dies first (SIGKILL
    included). Not for a thread that may end before the call returns: the kernel ties the child
    to the thread that started it.
    """
    command = tuple(str(part) for part in cmd)
    t0 = time.monotonic()
    if tree:
        import psutil  # noqa: F401  imported now, not in the cleanup a signal may be waiting on
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=out if merge_stderr else err, env=env, cwd=cwd,
                                    start_new_session=True,
                                    preexec_fn=_killed_with_parent(os.getpid()) if die_with_parent else None)
        except (OSError, ValueError) as exc:
            return BoundedRun(command, error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - t0,
                              limit_s=timeout)
        deadline = t0 + timeout
        delay = 0.0005
        timed_out = False
        try:
            while not _exited(proc.pid):
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.05)
        finally:  # an interrupt while waiting must not leave the group running either
            held = signal.pthread_sigmask(signal.SIG_BLOCK, _CLEANUP_SIGNALS)
            try:
                if tree and (timed_out or not _exited(proc.pid)):
                    _kill_descendants(proc.pid)
                _kill_group(proc.pid)
                try:
                    returncode: Optional[int] = proc.wait(timeout=KILL_WAIT_S)
                except subprocess.TimeoutExpired:  # stuck in the kernel (a wedged driver): not waited for
                    returncode = None
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        seconds = time.monotonic() - t0
        return BoundedRun(command, returncode=returncode, stdout=_read_tail(out),
                          stderr="" if merge_stderr else _read_tail(err), timed_out=timed_out,
                          seconds=seconds, limit_s=timeout, unkillable=returncode is None,
                          cut=max(_size(out), _size(err)) > OUTPUT_LIMIT)
