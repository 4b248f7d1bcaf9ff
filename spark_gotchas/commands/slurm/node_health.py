"""``spark-gotchas node-health``: Slurm's HealthCheckProgram and a job prolog. A FAIL drains this
node; a later pass undrains what it drained, never an operator's drain (docs/node-health.md).

One pass: ask slurmctld for the node (``scontrol show node``: jobs on it, its GPUs), run the
preflight (``-m fast``, or ``--spark-replay SNAPSHOT``) in a child process with a hard deadline,
read its JSON report's verdicts, ask for the node again (an operator may have drained it while
the checks ran), decide (:mod:`spark_gotchas.commands.slurm.drain`) and carry it out (``scontrol update``). The
whole pass ends within ``--timeout`` (50 s: slurmd kills a HealthCheckProgram after 60 s): the
checks get what is left after three scontrol calls of at most ``--scontrol-timeout`` each.

Exit status, as each caller reads it:

- as a HealthCheckProgram (slurmd only logs it): 0 healthy, or nothing to do; 1 the node is
  unfit for jobs (drained by this pass, kept drained, or left in someone else's drain); 2
  node-health could not do its work (bad usage, scontrol missing, slurmctld unreachable: nothing
  was checked, a later pass tries again);
- as a prolog (``SLURM_SCRIPT_CONTEXT=prolog_slurmd``, or ``--mode prolog``): 0 the job may
  start, 1 it must not (Slurm then drains the node itself, keeping the reason set here, and
  requeues the job). Slurm being unreachable does not decide it: the checks do.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from ...base import bounded_read, outward, scrub
from ...base.procs import run_bounded
from ...microbench._cli import in_span
from . import drain, scontrol
from .drain import Do, Node, Outcome

PROG = "spark-gotchas node-health"
TIMEOUT_S = 50.0  # the whole pass; slurmd kills its HealthCheckProgram at 60 s
MIN_CHECKS_S = 5.0  # the least --timeout must leave for the checks
MARGIN_S = 1.0  # for reading the report and deciding
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # one node: no list, range or glob
PROLOG_CONTEXT = "prolog_slurmd"  # SLURM_SCRIPT_CONTEXT in a slurmd prolog
ROOT_LOCK_DIR = "/run/spark-gotchas"  # root's: a folder only root may write to
EXIT_OK, EXIT_UNHEALTHY, EXIT_CANNOT = 0, 1, 2


class Usage(Exception):
    """A bad argument or setting; the message is one line."""


_seconds = in_span(0.1, 86400, "seconds")  # a deadline: above nothing, below a day


def _folder(text: str) -> str:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{scrub.clip(text, 200, mark='')} is not a folder")
    return text


def parser() -> argparse.ArgumentParser:
    p = outward.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                epilog="Arguments after -- go to the preflight (e.g. -- --spark-profile h200).")
    p.add_argument("--node", help="the node's Slurm name (default: $SLURMD_NODENAME, else the short host name)")
    p.add_argument("--mode", choices=("auto", "check", "prolog"), default="auto",
                   help="check: a HealthCheckProgram; prolog: a job's prolog; auto (default): prolog where "
                        f"SLURM_SCRIPT_CONTEXT={PROLOG_CONTEXT}")
    p.add_argument("--on-error", choices=drain.ON_ERROR, default="drain",
                   help="when the checks cannot run or judge (deadline, crash, no GPU): drain (default) or ignore")
    p.add_argument("--timeout", type=_seconds, default=TIMEOUT_S, metavar="S",
                   help=f"the whole pass, scontrol calls included (default {TIMEOUT_S:g})")
    p.add_argument("--scontrol", default="scontrol", metavar="PATH", help="the scontrol to run (default: on PATH)")
    p.add_argument("--scontrol-timeout", type=_seconds, default=scontrol.TIMEOUT_S, metavar="S",
                   help=f"each scontrol call (default {scontrol.TIMEOUT_S:g})")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--require-gpu", dest="require_gpu", action="store_true", default=None,
                     help="no GPU visible is an error (default: when Slurm's Gres gives the node a gpu)")
    gpu.add_argument("--no-require-gpu", dest="require_gpu", action="store_false")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--spark-replay", metavar="SNAPSHOT", help="judge a recorded snapshot instead of this machine")
    source.add_argument("--from-report", metavar="REPORT",
                        help="act on the JSON report of a run already made instead of running the checks")
    p.add_argument("--dry-run", action="store_true", help="say what would be done; change nothing in Slurm")
    p.add_argument("--lock-dir", type=_folder, metavar="DIR",
                   help="the folder of the node's pass lock; every pass on a node must use the same "
                        f"(default: {ROOT_LOCK_DIR} as root, else $XDG_RUNTIME_DIR; then /run/lock and the "
                        "temporary folder)")
    return p


def node_name(given: Optional[str]) -> str:
    name = given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not NODE_NAME.fullmatch(name):
        raise Usage(f"'{outward.line(name)[:80]}' is not one node's name (letters, digits, '.', '_', '-'; no list or range)")
    return name


def _last_error(text: str) -> str:
    """The line of a run's output that says what went wrong: the last that names an error, else the
    last (pytest ends a usage error with its rootdir, not the error)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return outward.line((errors or lines or ["no output"])[-1])[:200]


def read_report(path: str, require_gpu: bool) -> Outcome:
    try:
        report = bounded_read.read_json(path, bounded_read.REPORT)
    except bounded_read.Refused as exc:
        return drain.error(f"the report {outward.line(path)} is {exc}")
    except OSError as exc:
        return drain.error(f"the report {outward.line(path)} cannot be read: {exc.strerror or exc}")
    return drain.outcome(report, require_gpu=require_gpu)


def run_checks(deadline: float, replay: Optional[str], extra: list[str], require_gpu: bool) -> tuple[Outcome, str]:
    """The preflight in a child process, killed with everything it started at ``deadline`` seconds;
    its verdicts, and a line on how long it took."""
    try:
        return _run_checks(deadline, replay, extra, require_gpu)
    except OSError as exc:  # no temporary folder or file for the run (every candidate full or unwritable)
        return drain.error(f"no room for the run's report: {exc.strerror or exc}"), "checks not run"


def _run_checks(deadline: float, replay: Optional[str], extra: list[str], require_gpu: bool) -> tuple[Outcome, str]:
    with tempfile.TemporaryDirectory(prefix="spark-gotchas-node-health-") as folder:
        report = str(Path(folder) / "report.json")
        cmd = [sys.executable, "-m", "spark_gotchas", "-m", "fast", "--json-report", f"--json-report-file={report}",
               *([f"--spark-replay={replay}"] if replay else []), *extra]
        run = run_bounded(cmd, deadline, merge_stderr=True, tree=True, die_with_parent=True)
        took = f"checks took {run.seconds:.1f} s of {deadline:.0f}"
        if run.timed_out:
            return drain.error(f"the checks did not finish within {deadline:.0f} s (killed with all they started)"), took
        if run.error:
            return drain.error(f"the checks could not start: {outward.line(run.error)}"), took
        if not os.path.exists(report):
            return drain.error(f"pytest exited {run.returncode} without a report: {_last_error(run.stdout)}"), took
        return read_report(report, require_gpu), took


HELD = -1  # hold_lock: another pass holds it


def _private(folder: str, create: bool) -> bool:
    """Whether ``folder`` is a real folder of this user's that no one else may write to (made so
    where ``create``)."""
    try:
        if create:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def lock_folders() -> list[str]:
    """Where the pass lock is looked for, in order: a folder of this user's that no one else may write
    to (root: /run/spark-gotchas, else $XDG_RUNTIME_DIR), then /run/lock and the temporary folder,
    which everyone may write to: another user can keep the lock from being had there, never take it."""
    root = os.geteuid() == 0
    own = ROOT_LOCK_DIR if root else os.environ.get("XDG_RUNTIME_DIR", "")
    folders = [own] if own and _private(own, create=root) else []
    folders.append("/run/lock")
    try:
        folders.append(tempfile.gettempdir())
    except (OSError, FileNotFoundError):  # no usable temporary folder at all
        pass
    return folders


def hold_lock(name: str, folders: Sequence[str]) -> Optional[int]:
    """Take this node's pass lock (an flock, released when its file closes, with this process at the
    latest): the open file when taken, HELD when another pass holds it, None when no lock file can be
    had. The file is opened read-only, never through a symlink, without waiting (a FIFO planted in
    its place would block a plain open for ever), and used only if it is a regular file of this
    user's: a folder anyone may write to (/run/lock is) cannot turn it into another file."""
    for folder in folders:
        try:
            fd = os.open(os.path.join(folder, f"spark-gotchas-node-health-{name}.lock"),
                         os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY, 0o600)
        except OSError:
            continue
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return HELD
        return fd
    return None


def _terminated(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)  # unwinds: the checks' child and what it started are killed on the way


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        name = node_name(args.node)
        checks_s = args.timeout - 3 * args.scontrol_timeout - MARGIN_S
        if checks_s < MIN_CHECKS_S and not args.from_report:
            raise Usage(f"--timeout {args.timeout:g} leaves {max(checks_s, 0):.0f} s for the checks after three "
                        f"scontrol calls of up to {args.scontrol_timeout:g} s: give at least "
                        f"{3 * args.scontrol_timeout + MARGIN_S + MIN_CHECKS_S:g}")
    except Usage as exc:
        outward.say(f"{PROG}: {exc}", err=True)
        return EXIT_CANNOT
    for signum in (signal.SIGTERM, signal.SIGHUP):  # slurmd's end of a pass; a closed terminal
        signal.signal(signum, _terminated)
    return Pass(args, name, extra).run()


class Pass:
    """One health pass over this node; every line it prints names the node."""

    def __init__(self, args: argparse.Namespace, name: str, extra: list[str]) -> None:
        self.args, self.name, self.extra = args, name, extra
        self.start = time.monotonic()
        self.prolog = args.mode == "prolog" or (args.mode == "auto"
                                                and os.environ.get("SLURM_SCRIPT_CONTEXT") == PROLOG_CONTEXT)
        self.slurm_trouble = False
        self.output_failed = False

    def say(self, *lines: str, prefixed: bool = True) -> None:
        """Print; an output that cannot be written (a full disk, a closed pipe) never stops the pass
        from draining or undraining: it changes only the exit status (WRITE_FAILED where all is well)."""
        try:
            outward.say(*(f"node-health: {self.name}: {text}" if prefixed else text for text in lines))
        except SystemExit:
            self.output_failed = True

    def left(self) -> float:
        return self.args.timeout - (time.monotonic() - self.start)

    def call_timeout(self) -> float:
        return max(0.1, min(self.args.scontrol_timeout, self.left() - MARGIN_S))

    def read_node(self, then: str) -> Optional[Node]:
        try:
            return scontrol.show_node(scontrol.find(self.args.scontrol), self.name, self.call_timeout())
        except scontrol.SlurmError as exc:
            self.say(f"cannot read the node from slurmctld: {outward.line(exc)}; {then}")
            self.slurm_trouble = True
            return None

    def checks(self, node: Optional[Node]) -> Outcome:
        args = self.args
        require_gpu = args.require_gpu if args.require_gpu is not None else bool(node and node.has_gpu)
        if args.from_report:
            return read_report(args.from_report, require_gpu)
        deadline = self.left() - MARGIN_S - (2 * args.scontrol_timeout if node is not None else 0.0)
        found, took = run_checks(deadline, args.spark_replay, self.extra, require_gpu)
        self.say(took)
        return found

    def act(self, action: drain.Action) -> None:
        verb = {Do.DRAIN: "drain", Do.UNDRAIN: "undrain"}.get(action.do)
        if verb is None:
            self.say(action.says)
            return
        if self.args.dry_run:
            self.say(f"would {verb} (--dry-run): {action.says}")
            return
        try:
            exe = scontrol.find(self.args.scontrol)
            if action.do is Do.DRAIN:
                scontrol.update(exe, self.name, "DRAIN", action.reason, timeout=self.call_timeout())
            else:
                scontrol.update(exe, self.name, "UNDRAIN", timeout=self.call_timeout())
            self.say(f"{verb}ed: {action.says}")
        except scontrol.SlurmError as exc:
            self.slurm_trouble = True
            self.say(f"could not {verb}: {outward.line(exc)}; it would have been: {action.says}")

    def run(self) -> int:
        folders = [self.args.lock_dir] if self.args.lock_dir else lock_folders()
        lock = hold_lock(self.name, folders)  # a pass that got it keeps it open to its end
        if lock == HELD and not self.prolog:
            self.say("not checked: another node-health pass is running on this node")
            return EXIT_OK
        if lock is None and not self.prolog:
            self.say(f"no lock could be had in {', '.join(folders)} (each a file of another user's, a link "
                     "or not writable): checking without one")
        node = self.read_node("the checks still decide whether the job starts" if self.prolog else "nothing checked")
        if node is None and not self.prolog and not self.args.dry_run:
            return EXIT_CANNOT
        if node is not None and not self.prolog:
            busy = drain.not_checked(node)
            if busy:
                self.say(busy)
                return EXIT_OK
        found = self.checks(node)
        self.say(*found.lines, prefixed=False)
        if node is not None:  # as it is now: an operator may have drained it while the checks ran
            node = self.read_node("nothing changed in Slurm")
        action = drain.decide(found, node, self.args.on_error)
        self.act(action)
        if self.slurm_trouble and not (self.prolog or self.args.dry_run):
            return EXIT_CANNOT
        if action.unhealthy:
            return EXIT_UNHEALTHY
        return outward.WRITE_FAILED if self.output_failed else EXIT_OK
