"""``spark-gotchas watch``: judge the user's own training run while it runs (G3, G4, G6), then for the whole run.

    spark-gotchas watch [OPTIONS] -- python train.py ...     run the job as a child and watch it
    spark-gotchas watch --pid N                               watch a job already running
    spark-gotchas watch --spark-replay DIR                    judge a recorded watch again

While the job runs, each state (memory running low, throttling, the rate falling, another process
joining the GPU) is one line on stderr when it begins and one when it ends, prefixed
``spark-gotchas watch:``; at the end the G3, G4 and G6 lines for the whole run, each FAIL and WARN
with its fix, and the files: ``watch.csv``, ``watch.png`` and ``report.json`` in ``--out``. The job's
stdin, stdout and stderr are its own (:mod:`.stream` says how its rate is read without changing a
byte); its exit status is the watch's (:mod:`.child`). Exit 2 for a usage error, before anything runs.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any, Optional

from ..base import atomic, bounded_read, outward, scrub
from ..base.serial import dumps
from ..base.units import hms, utc
from ..knowledge.judges import g03_unified_memory_log as g03_log
from ..knowledge.judges import g04_thermal as g04
from ..knowledge.profiles import PROFILES, SAME, Machine, match
from ..knowledge.readings.thermal import DEFAULT_MAX_DROP
from ..knowledge.readings.watch import EarlierWatch, EarlierWatches
from ..knowledge.verdict import Status, summary_lines
from ..knowledge.watch_judge import Context, judge_run
from ..machine import platform
from ..machine.options import PROFILE_CHOICES, RunOptions
from ..machine.provider import Provider
from ..microbench._cli import in_span
from ..outputs.watch_report import document, metrics, reading_of
from ..runtime.soak.record import drop_fraction
from ..runtime.watch import record
from ..runtime.watch.child import Job
from ..runtime.watch.engine import Engine, WatchPlan
from ..runtime.watch.stream import Copier, RateScanner, Route, child_fds, open_routes, plan

PREFIX = "spark-gotchas watch: "
PROMETHEUS_MISSING = ("--prometheus-textfile needs the prometheus_client package in this environment: pip install "
                      "prometheus-client (or the suite's prometheus extra)")
TEXTFILE_EVERY_S = 5.0


def say(text: str) -> None:
    outward.say(PREFIX + text, err=True)


def _regex(text: str) -> re.Pattern[str]:
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None
    if pattern.groups != 1:
        raise argparse.ArgumentTypeError(f"{text!r} has {pattern.groups} groups: give exactly one, around the rate "
                                         r"(e.g. '([0-9.]+) it/s')")
    return pattern


def _drop(text: str) -> float:
    try:
        return drop_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = outward.ArgumentParser(
        prog="spark-gotchas watch",
        usage="spark-gotchas watch [OPTIONS] -- COMMAND [ARGS...]\n       spark-gotchas watch [OPTIONS] --pid N\n"
              "       spark-gotchas watch --spark-replay DIR",
        description="Watch a training run as it runs and judge G3 (memory), G4 (clocks, throttling) and G6 (other GPU "
                    "processes) for it: a line per state on stderr as it begins and ends, the G-lines at the end, "
                    "and watch.csv, watch.png and report.json in --out. The job's output and exit status are its own.",
        epilog="docs/watch.md describes every rule, file and column.")
    p.add_argument("--every", type=in_span(0.1, 3600, "seconds"), default=1.0, metavar="SECONDS",
                   help="seconds between samples (default 1)")
    p.add_argument("--out", metavar="DIR", help="where watch.csv, watch.png and report.json go (default: a new folder "
                                                "spark-gotchas-watch-<UTC time> here); an existing folder must be empty")
    p.add_argument("--rate-regex", type=_regex, metavar="RE",
                   help=r"a regular expression with one group, the rate the job's log prints (e.g. '([0-9.]+) it/s', "
                        r"'tokens/s: ([0-9.]+)'); read from a copy of its output, which reaches you unchanged")
    p.add_argument("--max-drop", type=_drop, default=DEFAULT_MAX_DROP, metavar="FRACTION",
                   help=f"a rate this far below its best is a fall (0.1 or 10%%; default {DEFAULT_MAX_DROP:.0%})")
    p.add_argument("--prometheus-textfile", metavar="PATH",
                   help="rewrite PATH (a .prom file in node_exporter's --collector.textfile.directory) every few "
                        "samples with the run's state")
    p.add_argument("--spark-profile", choices=PROFILE_CHOICES, default="auto",
                   help="platform profile to judge against; auto picks it from the device")
    p.add_argument("--pid", type=int, metavar="N", help="watch the running process N (and its children) instead")
    p.add_argument("--spark-replay", metavar="PATH", help="judge a recorded watch again (its folder or report.json)")
    return p


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the watch's own arguments, the job's command): the command follows ``--``."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, command = split_command(argv)
    parser = build_parser()
    args = parser.parse_args(own)
    if args.spark_replay:
        if command or args.pid is not None:
            parser.error("--spark-replay judges a recorded watch: give no command and no --pid with it")
        return replay(args.spark_replay, args.spark_profile)
    if bool(command) == (args.pid is not None):
        parser.error("give the command to watch after -- (spark-gotchas watch -- python train.py), or --pid N")
    if args.prometheus_textfile and importlib.util.find_spec("prometheus_client") is None:
        parser.error(PROMETHEUS_MISSING)
    if args.prometheus_textfile and os.path.exists(args.prometheus_textfile) and \
            not os.path.isfile(args.prometheus_textfile):
        parser.error(f"--prometheus-textfile {args.prometheus_textfile}: not a regular file (node_exporter's textfile "
                     "collector reads *.prom files)")
    if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
        parser.error(f"--pid {args.pid}: no such process")
    out_dir, why = make_out_dir(args.out)
    if why:
        parser.error(why)
    for line in tell_previous():
        say(line)
    return Watch(args, command, out_dir).run()


def short_command(argv: list[str], room: int = 100) -> str:
    """A command as a line names it: its program's and scripts' file names (``python train.py``) and the
    other arguments, cut with … past ``room`` (report.json and the CSV keep it whole)."""
    if not argv:
        return ""
    text = " ".join(os.path.basename(a) or a if i == 0 or (a.startswith("/") and " " not in a) else a
                    for i, a in enumerate(argv))
    return text if len(text) <= room else text[:room - 1] + "…"


def make_out_dir(given: Optional[str]) -> tuple[Path, str]:
    """The --out folder, made now (a folder that exists must be empty: the watch overwrites nothing)."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    path = Path(given).expanduser() if given else Path.cwd() / f"spark-gotchas-watch-{stamp}"
    try:
        if path.exists():
            if not path.is_dir():
                return path, f"--out {path}: exists and is not a folder"
            if any(path.iterdir()):
                return path, f"--out {path}: the folder holds files already (the watch overwrites nothing): give a new one"
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return path, f"--out {path}: {exc.strerror or exc}"
    return path.resolve(), ""


# -- earlier runs -----------------------------------------------------------------------------------
def tell_previous() -> list[str]:
    """What the heartbeats earlier watches left say, judged as the preflight's G3 and G4 "last watch"
    checks judge them (a reboot, a kill, an OOM kill); each is said once, then removed."""
    from ..machine.readers.thermal.reboot import boot_id, boot_time_s, pid_alive
    from ..machine.readers.watch import state_dir

    lines = []
    now_boot, now_btime = boot_id(), boot_time_s()
    for path, beat, why in record.left_behind():
        if beat is None:
            lines.append(f"an earlier watch's heartbeat {path} cannot be read ({why}); left as it is")
            continue
        alive = beat.end_reason is None and beat.boot_id is not None and beat.boot_id == now_boot \
            and pid_alive(beat.watch_pid, beat.started_epoch)
        if alive:
            continue  # another watch, running now
        one = EarlierWatches(state_dir=str(state_dir()), boot_id=now_boot, btime_s=now_btime,
                             watches=[EarlierWatch(path=str(path), heartbeat=beat)])
        for verdict in (g04.judge_earlier_watches(one), g03_log.judge_watched_oom(one)):
            if verdict.status in (Status.FAIL, Status.WARN, Status.INFO):
                files = f"; files in {beat.out_dir}" if beat.out_dir else ""
                lines.append(f"G{verdict.gotcha} {verdict.status.value} {verdict.summary}{files}")
        record.remove_heartbeat_file(path)
    return lines


# -- a live watch -------------------------------------------------------------------------------------
class Watch:
    def __init__(self, args: argparse.Namespace, command: list[str], out_dir: Path):
        self.args, self.command, self.out_dir = args, command, out_dir
        self.pattern: Optional[re.Pattern[str]] = args.rate_regex
        self.scanner = RateScanner(self.pattern) if self.pattern is not None else None
        self.job = Job()
        self.routes: list[Route] = []
        self.notes: list[str] = []
        self._textfile_next = 0.0
        self._textfile_failed = False

    def _problem(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def run(self) -> int:
        args = self.args
        shown: list[str]
        if args.pid is None:
            self.routes = plan(read=self.scanner is not None)
            self.notes += open_routes(self.routes)
            why = self.job.spawn(self.command, child_fds(self.routes))
            if why:
                for route in self.routes:
                    for fd in (route.read_end, route.child_end):
                        if fd is not None:
                            os.close(fd)
                say(f"cannot run the command: {why}")
                return Job.start_error_status(why)
            shown = scrub.mask_argv(self.command)
            cuda = None
        else:
            shown, cuda = attach_facts(args.pid)
            if self.scanner is not None:
                self.routes = log_files(args.pid)
                if not self.routes:
                    self._problem(f"pid {args.pid} writes its output to no regular file: no rate read "
                                  "(watch -- CMD reads it as the job runs)")
            self.job.attach(args.pid)
        copier = Copier(self.routes, self.scanner, self._problem).after_spawn()
        engine = None
        try:
            engine = self._engine(shown, cuda)
            say(self._first_line(engine))
            for note in engine.reading.notes:
                say(note)
            engine.start()
        except Exception as exc:  # the job runs on: the watch waits for it and passes its status on
            say(f"internal error (please report it), the job goes on unwatched: {type(exc).__name__}: {exc}")
            engine = None
        try:
            ended = self.job.wait()
        finally:
            copier.finish()
        if engine is None:
            self.job.restore()
            return ended.status if ended is not None else 0
        reading = engine.stop(ended)
        self.job.restore()
        for note in self.notes:
            if note not in reading.notes:
                reading.notes.append(note)
        self._finish(engine, reading)
        if ended is None:
            return 130 if self.job.interrupted == "SIGINT" else 0
        return ended.status if not self.job.attached else 0

    def _engine(self, shown: list[str], cuda: Optional[str]) -> Engine:
        args = self.args
        self.provider = Provider(RunOptions(spark_profile=args.spark_profile))
        profile = platform.profile(self.provider, args.spark_profile)
        here = platform.machine(self.provider, args.spark_profile, ask_torch=False)
        ctx = Context(profile=profile, here=here, max_drop=args.max_drop, every_s=args.every,
                      rate_read=self.scanner is not None)
        watch_plan = WatchPlan(every_s=args.every, out_dir=self.out_dir, command=shown,
                               rate_regex=self.pattern.pattern if self.pattern is not None else "",
                               attach_pid=args.pid, cuda_visible_devices=cuda, notes=list(self.notes))
        on_tick = self._textfile if args.prometheus_textfile else None
        return Engine(watch_plan, self.job, ctx, self.scanner, say, on_tick)

    def _first_line(self, engine: Engine) -> str:
        what = short_command(engine.reading.command) or f"pid {self.job.pid}"
        gpu = engine.reading.device or f"no GPU read: {engine.reading.nvml_error}"
        rate = f", rate from {engine.reading.rate_regex!r}" if engine.reading.rate_regex else ", no rate (--rate-regex)"
        return (f"watching {what} (pid {self.job.pid}) since {utc(engine.t0)}: {gpu}, profile {engine.ctx.profile.key}, "
                f"every {self.args.every:g} s{rate}; files in {self.out_dir}")

    # -- the metrics file ---------------------------------------------------------------------------
    def _worst(self, engine: Engine) -> dict[int, str]:
        rank = {"FAIL": 3, "WARN": 2, "INFO": 1, "PASS": 0}
        out: dict[int, str] = {}
        for event in engine.tracker.events:
            if rank.get(event.status, 0) > rank.get(out.get(event.gotcha, "PASS"), 0):
                out[event.gotcha] = event.status
        return out

    def _textfile(self, engine: Engine, running: bool = True, exit_status: Optional[int] = None) -> None:
        import time

        if running and time.monotonic() < self._textfile_next:
            return
        self._textfile_next = time.monotonic() + max(TEXTFILE_EVERY_S, self.args.every)
        engine.reading.elapsed_s = engine.last.t_s if engine.last is not None else 0.0
        open_events = [e for e in engine.tracker.events if e.end_s is None and e.kind != "oom_kill"]
        text = metrics(engine.reading, engine.last, open_events, self._worst(engine), running, exit_status)
        try:
            atomic.write_text(self.args.prometheus_textfile, text, parents=True, fsync=False)
        except OSError as exc:
            if not self._textfile_failed:
                self._textfile_failed = True
                say(f"cannot write the metrics file {self.args.prometheus_textfile}: {exc.strerror or exc}")

    # -- the end ------------------------------------------------------------------------------------
    def _finish(self, engine: Engine, reading: Any) -> None:
        args = self.args
        profile, here = engine.ctx.profile, engine.ctx.here
        verdicts = judge_run(reading, profile, here)
        lines = summary_lines(verdicts)
        png = self.out_dir / "watch.png"
        from ..runtime.watch.plot import plot_watch

        reading.png_path, reading.plot_note = plot_watch(reading, lines, png)
        report = self.out_dir / "report.json"
        artifacts = {"watch_csv": reading.csv_path, "report": str(report)}
        if reading.png_path:
            artifacts["watch_png"] = reading.png_path
        options = {"spark_profile": args.spark_profile, "every_s": args.every, "rate_regex": reading.rate_regex,
                   "max_drop_fraction": args.max_drop, "prometheus_textfile": args.prometheus_textfile,
                   "pid": args.pid}
        wrote = ""
        try:
            doc = document(reading, verdicts, platform.describe(self.provider, args.spark_profile),
                           platform.versions(self.provider), options, artifacts)
            atomic.write_text(report, dumps(doc, indent=1) + "\n")
        except OSError as exc:
            wrote = f"; could not write {report}: {exc.strerror or exc}"
        if args.prometheus_textfile:
            self._textfile(engine, running=False,
                           exit_status=reading.end.signal + 128 if reading.end.signal is not None else reading.end.exit_code)
        what = short_command(reading.command) or f"pid {reading.job_pid}"
        say(f"{what} {reading.end.how} after {hms(reading.elapsed_s)} ({reading.samples} samples)")
        outward.say(*lines, err=True)
        files = ", ".join(Path(p).name for p in (reading.csv_path, reading.png_path) if p) + ", report.json"
        plot = f" ({reading.plot_note})" if reading.plot_note else ""
        say(f"{files} in {self.out_dir}{plot}{wrote}")


def attach_facts(pid: int) -> tuple[list[str], Optional[str]]:
    """(the process's command line, masked; its CUDA_VISIBLE_DEVICES, None when unset or unreadable)."""
    argv: list[str] = []
    try:
        raw = bounded_read.read_bytes(f"/proc/{pid}/cmdline", bounded_read.Kind("command line", 1 << 20, 2.0))
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    except (OSError, ValueError):
        pass
    cuda = None
    try:
        raw = bounded_read.read_bytes(f"/proc/{pid}/environ", bounded_read.Kind("environment", 4 << 20, 2.0))
        for item in raw.split(b"\0"):
            if item.startswith(b"CUDA_VISIBLE_DEVICES="):
                cuda = item.split(b"=", 1)[1].decode("utf-8", "replace")
    except (OSError, ValueError):
        pass
    return scrub.mask_argv(argv), cuda


def log_files(pid: int) -> list[Route]:
    """Routes that read the regular files a running process writes its stdout and stderr to."""
    routes, seen = [], set()
    for fd in (1, 2):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            info = os.stat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        try:
            read_end = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        routes.append(Route((fd,), "file", -1, read_end=read_end, offset=os.fstat(read_end).st_size))
    return routes


# -- judging a recorded watch again --------------------------------------------------------------------
def replay(path_text: str, requested: str) -> int:
    """The G-lines of a recorded watch (its report.json), judged again; exit 1 on a FAIL, 2 when unreadable."""
    path = Path(path_text)
    if path.is_dir():
        path = path / "report.json"
    try:
        doc = bounded_read.read_json(path, bounded_read.REPORT)
        reading = reading_of(doc)
    except (OSError, bounded_read.Refused) as exc:
        outward.say(f"spark-gotchas watch: cannot read {path}: {getattr(exc, 'strerror', None) or exc}", err=True)
        return 2
    except (TypeError, ValueError, KeyError) as exc:
        outward.say(f"spark-gotchas watch: {path} holds no usable watch reading: {exc}", err=True)
        return 2
    if reading is None:
        outward.say(f"spark-gotchas watch: {path} is not a watch's report (no spark_gotchas.runtime.watch reading)", err=True)
        return 2
    recorded = doc["spark_gotchas"].get("platform") if isinstance(doc["spark_gotchas"].get("platform"), dict) else {}
    if requested in (None, "", "auto"):
        requested = str(recorded.get("profile_requested") or "auto")
    if requested == "auto":
        profile, here = PROFILES.get(str(recorded.get("profile")), PROFILES["none"]), SAME
    else:
        profile = PROFILES[requested]
        gpu = recorded.get("gpu")
        here = SAME if profile.key == "generic" or (gpu and match(str(gpu)).key == profile.key) else \
            Machine(is_profile=False, device=str(gpu) if gpu else "no GPU")
    verdicts = judge_run(reading, profile, here)
    outward.say(f"replayed {path}: {short_command(reading.command) or reading.job_pid} {reading.end.how} after "
                f"{hms(reading.elapsed_s)}, profile {profile.key}")
    outward.say(*summary_lines(verdicts))
    return 1 if any(v.status is Status.FAIL for v in verdicts) else 0

