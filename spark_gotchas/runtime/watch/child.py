"""The watched job: started as a child the watch forwards signals to, or a running process it attaches to.

``watch -- CMD``: CMD runs in its own process group with the watch's stdin and environment, and,
where the watch is the terminal's foreground job, that group is made the terminal's foreground: Ctrl-C,
Ctrl-\\ and Ctrl-Z reach the job first and only it, as they would without the watch (the watch is
told by the job's stop or end). A signal sent to the watch itself (``kill PID``, ``kill %1``, a
scheduler's SIGTERM to the watch alone) is forwarded to the job's process group once, and the watch
goes on until the job ends. A signal the watch was started with ignored (``nohup``) stays ignored
for the job. Ctrl-Z stops the job, then the watch, so the shell shows the job stopped; ``fg`` gives the
terminal back to the job. The job's exit status is the watch's: its code, or 128 + the signal that
killed it (SIGKILL: 137), as a shell reports it.

``watch --pid N``: the watch attaches to N; N's exit status is its parent's to read, and Ctrl-C ends
the watching (N goes on).

A signal sent to every process of the job's cgroup (systemd's control-group kill, Slurm's scancel)
reaches the job itself as well as the watch: the job then sees it twice (documented in docs/watch.md).
"""

from __future__ import annotations

import errno
import os
import select
import signal
import time
from dataclasses import dataclass
from typing import Any, Optional

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH)
STOPS = (signal.SIGTSTP, signal.SIGSTOP, signal.SIGTTIN, signal.SIGTTOU)
ENDS_ATTACH = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # --pid: these end the watching
NOT_FOUND = 127  # as a shell says a command it cannot find
NOT_RUN = 126


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class Ended:
    """How the job ended: an exit code, or the signal that killed it; ``status`` is the watch's exit."""

    code: Optional[int] = None
    signal: Optional[int] = None
    t: float = 0.0  # time.time() when it was seen

    @property
    def status(self) -> int:
        return 128 + self.signal if self.signal is not None else (self.code or 0)

    @property
    def how(self) -> str:
        if self.signal is not None:
            return f"killed by {signal_name(self.signal)}"
        return f"exited {self.code}"


def _controlling_tty() -> Optional[int]:
    """One of fds 0-2 that is this process's controlling terminal (tcgetpgrp works on it only then)."""
    for fd in (0, 2, 1):
        try:
            if os.isatty(fd):
                os.tcgetpgrp(fd)
                return fd
        except OSError:
            continue
    return None


class Job:
    """The job, its process group and the terminal's foreground; :meth:`wait` runs in the main thread."""

    def __init__(self) -> None:
        self.pid: Optional[int] = None
        self.attached = False
        self.ended: Optional[Ended] = None
        self.stopped = False
        self.stopped_s = 0.0
        self._stopped_at: Optional[float] = None
        self.forwarded: list[str] = []  # signals the watch passed on (or, attached, that ended it)
        self.interrupted = ""  # attached: the signal that ended the watching
        self._tty = _controlling_tty()
        self._holding = False  # the job's group holds the terminal's foreground because we gave it
        self._job_control = False  # the watch was the terminal's foreground job at start
        self._previous: dict[int, Any] = {}
        self._initially_ignored: set[int] = set()
        self._wake_r = self._wake_w = -1
        self._pidfd: Optional[int] = None

    # -- starting --------------------------------------------------------------------------------
    def spawn(self, argv: list[str], fds: dict[int, int]) -> Optional[str]:
        """Start ``argv`` with ``fds`` (job fd -> watch fd) in place; None, or why it could not start."""
        self._install()
        for sig in (signal.SIGTTOU, signal.SIGTTIN):  # the watch may hand the terminal over from the background
            if signal.getsignal(sig) == signal.SIG_IGN:
                self._initially_ignored.add(sig)
            self._previous.setdefault(sig, signal.getsignal(sig))
            signal.signal(sig, signal.SIG_IGN)
        restore = {signal.SIGPIPE, signal.SIGXFSZ} | ({signal.SIGTTOU, signal.SIGTTIN} - self._initially_ignored)
        actions = [(os.POSIX_SPAWN_DUP2, src, dst) for dst, src in sorted(fds.items())]
        try:
            self.pid = os.posix_spawnp(argv[0], argv, dict(os.environ), file_actions=actions, setpgroup=0,
                                       setsigdef=sorted(restore))
        except OSError as exc:
            self.restore()
            return f"{argv[0]}: {exc.strerror or exc}"
        self._job_control = self._tty is not None and self._foreground() == os.getpgrp()
        if self._job_control:
            self._give_terminal()
        return None

    @staticmethod
    def start_error_status(why: str) -> int:
        return NOT_FOUND if "No such file" in why else NOT_RUN

    def attach(self, pid: int) -> None:
        self.pid = pid
        self.attached = True
        self._install()
        try:
            self._pidfd = os.pidfd_open(pid)  # readable once the process exits (Linux 5.3)
        except (AttributeError, OSError):
            self._pidfd = None

    def _install(self) -> None:
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        wanted = ENDS_ATTACH if self.attached else FORWARDED
        for sig in wanted:
            old = signal.getsignal(sig)
            if old == signal.SIG_IGN:  # nohup: ignored for the watch, and so for the job
                continue
            self._previous[sig] = old
            signal.signal(sig, self._on_signal)
        for sig in (signal.SIGCHLD, signal.SIGCONT):
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, lambda *_: None)  # only to wake the wait (set_wakeup_fd)

    def restore(self) -> None:
        """The watch's signal dispositions and the terminal back as they were."""
        if self._holding:
            self._take_terminal()
        for sig, old in self._previous.items():
            try:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
            except (OSError, ValueError, TypeError):
                pass
        self._previous.clear()
        if self._wake_w >= 0:
            signal.set_wakeup_fd(getattr(self, "_previous_wakeup", -1))
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            self._wake_r = self._wake_w = -1
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    # -- signals and the terminal -------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal_name(signum)
        if self.attached:
            self.interrupted = self.interrupted or name
            return
        if self.pid is None or self.ended is not None:
            return
        self.forwarded.append(name)
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError:
            try:
                os.kill(self.pid, signum)
            except OSError:
                pass

    def _foreground(self) -> Optional[int]:
        try:
            return os.tcgetpgrp(self._tty) if self._tty is not None else None
        except OSError:
            return None

    def _give_terminal(self) -> None:
        try:
            os.tcsetpgrp(self._tty, self.pid)
            self._holding = True
        except OSError:
            self._holding = False

    def _take_terminal(self) -> None:
        try:
            os.tcsetpgrp(self._tty, os.getpgrp())
        except OSError:
            pass
        self._holding = False

    def _on_stop(self, sig: int) -> None:
        if not self.stopped:
            self.stopped, self._stopped_at = True, time.monotonic()
        if not self._job_control:
            return  # stopped by someone else's SIGSTOP: the watch keeps watching
        if sig in (signal.SIGTTIN, signal.SIGTTOU) and self._foreground() == os.getpgrp():
            self._give_terminal()  # it started reading before it had the terminal: give it, go on
            self._continue()
            return
        self._take_terminal()
        os.kill(os.getpid(), signal.SIGSTOP)  # Ctrl-Z: the watch stops with its job, as the shell expects
        if self._foreground() == os.getpgrp():  # fg (bg leaves the terminal with the shell)
            self._give_terminal()
        self._continue()

    def _continue(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGCONT)
        except OSError:
            pass

    def _on_continue(self) -> None:
        if self.stopped and self._stopped_at is not None:
            self.stopped_s += time.monotonic() - self._stopped_at
        self.stopped, self._stopped_at = False, None

    # -- waiting ------------------------------------------------------------------------------------
    def _drain(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def wait(self, tick_s: float = 1.0) -> Optional[Ended]:
        """Until the job ends (or, attached, it ends or the watching is interrupted)."""
        while True:
            watch = [self._wake_r] + ([self._pidfd] if self._pidfd is not None else [])
            try:
                select.select(watch, [], [], tick_s)
            except InterruptedError:
                pass
            self._drain()
            if self.attached:
                if self.interrupted:
                    return None
                if not _alive(self.pid):
                    self.ended = Ended(t=time.time())
                    return self.ended
                continue
            if self._reap():
                return self.ended
            if self._job_control and not self._holding and not self.stopped \
                    and self._foreground() == os.getpgrp():
                self._give_terminal()  # ``fg`` of a watch started with ``&``

    def _reap(self) -> bool:
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
            except ChildProcessError:
                self.ended = self.ended or Ended(code=None, t=time.time())
                return True
            except InterruptedError:
                continue
            if pid == 0:
                return False
            if os.WIFSTOPPED(status):
                self._on_stop(os.WSTOPSIG(status))
                continue
            if os.WIFCONTINUED(status):
                self._on_continue()
                continue
            self._on_continue()
            if os.WIFSIGNALED(status):
                self.ended = Ended(signal=os.WTERMSIG(status), t=time.time())
            else:
                self.ended = Ended(code=os.WEXITSTATUS(status), t=time.time())
            if self._holding:
                self._take_terminal()
            return True


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie has ended: its parent just has not read its status)."""
    from ...machine.watch_host import read_proc

    try:
        state = read_proc(f"/proc/{pid}/stat").rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError as exc:
            return exc.errno == errno.EPERM
        return True

