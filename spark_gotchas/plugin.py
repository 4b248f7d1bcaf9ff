"""The pytest plugin: options, markers, the ``spark`` fixture, verdicts, the G-line summary.

Loaded through the ``pytest11`` entry point, so its options are known before pytest parses
the command line (``--spark-replay ~/runs/spark1.json`` with a space works from anywhere) and
its markers and defaults do not depend on finding an ini file. It stays inert in other
projects' runs: nothing is read, imported or printed unless a gotcha check is collected.

A gotcha check is a test in a file named ``test_gNN_*.py`` that uses the ``spark`` fixture.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Optional

import pytest

from .base import atomic, outward, scrub
from .base.text import printable
from .knowledge.verdict import LINE_COLUMNS, GotchaWarning, Status, Verdict, format_line, recorded, summary_lines
from .machine import platform
from .machine.options import RunOptions, addoption_kwargs, declared, from_config, help_text, ini_type
from .machine.provider import Provider, ReadingUnavailable
from .machine.snapshot import SnapshotError
from .machine.snapshot import load as load_snapshot
from .machine.snapshot import save as save_snapshot
from .outputs import prometheus, report_file
from .outputs.junit import HOOKS_NAME as JUNIT_HOOKS_NAME
from .outputs.junit import JunitHooks
from .outputs.reports import markdown_summary, report_section, run_snapshot, terminal_block
from .run import interrupts
from .run.session import Reported, SessionState

SPEED_MARKERS = ("fast", "soak", "multinode")
GOTCHA_FILE = re.compile(r"^test_g(\d{2})_")
SOAK_TIMEOUT_MARGIN_S = 900.0
JSON_HOOKS_NAME = "spark-gotchas-json-report"


# -- options and markers -----------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("spark-gotchas", "DGX Spark gotchas (G1-G10)")
    for f in declared():
        group.addoption(f.metadata["flag"], dest=f.name, help=help_text(f), **addoption_kwargs(f))
        parser.addini(f.name, help=help_text(f, ini=True), type=ini_type(f), default=None)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_parse(pluginmanager: Any, args: list[str]):
    """pytest's own usage errors quote the command line (``unrecognized arguments: --x=ghp_…``):
    masked and escaped as every line the suite prints. Around the parse where the plugin is
    registered before it (``spark-gotchas``); :func:`pytest_collection` for paths not found."""
    odd = next((str(arg) for arg in args if printable(arg, limit=0) != str(arg)), None)
    if odd is not None:  # a line break or escape sequence in an argument would reach pytest's messages raw
        raise pytest.UsageError(f"spark-gotchas: an argument holds a control character or line break: "
                                f"{outward.line(odd)[:300]}")
    try:
        return (yield)
    except pytest.UsageError as exc:  # pytest's message has lines of its own: each masked
        raise pytest.UsageError(*("\n".join(outward.line(part) for part in str(arg).split("\n"))
                                  for arg in exc.args)) from None


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """A path pytest cannot find (``file or directory not found: ARG``) quoted escaped and masked:
    plain ``pytest`` parses its command line before the plugin is registered."""
    try:
        return (yield)
    except pytest.UsageError as exc:  # "file or directory not found: ARG"
        raise pytest.UsageError(*(outward.line(arg) for arg in exc.args)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fast: preflight check, seconds (pytest -m fast)")
    config.addinivalue_line("markers", "soak: sustained-load check, minutes to hours; runs only with -m soak")
    config.addinivalue_line("markers", "multinode: needs a multi-process/multi-node launch; runs only with -m multinode")
    config.addinivalue_line(
        "markers", "scan: CPU-only check of installed files or records, not of the machine's live state; runs after the "
                   "live checks, beside the head start (spark_gotchas/runtime/headstart.py)")
    config.addinivalue_line(
        "markers", "gpu: check that runs work in the GPU worker; runs after the CPU-only checks so the torch import "
                   "overlaps them")
    config.addinivalue_line(
        "markers", "reads(key, ...): the readings a check newer than some snapshots needs; a replay of a snapshot "
                   "that holds none of them (recorded before the check existed) leaves the check out")
    config.addinivalue_line("filterwarnings", "default::spark_gotchas.knowledge.verdict.GotchaWarning")
    try:
        options = from_config(config)
        if options.spark_strict:
            config.addinivalue_line("filterwarnings", "error::spark_gotchas.knowledge.verdict.GotchaWarning")
        replay = load_snapshot(options.spark_replay) if options.spark_replay else None
        if replay is not None:
            try:
                options = options.with_recorded(replay.options)
            except ValueError as exc:
                raise ValueError(f"snapshot {replay.path} records a bad option: {exc}") from None
        if options.spark_prometheus and importlib.util.find_spec(prometheus.REQUIREMENT) is None:
            raise ValueError(prometheus.MISSING)
    except (SnapshotError, ValueError) as exc:
        raise pytest.UsageError(f"spark-gotchas: {outward.line(exc)}") from None
    state = SessionState(config=config, options=options, replay=replay)
    if aims_at_checks(config):
        state.signals = interrupts.Watch().start()
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(JsonReportHooks(state), JSON_HOOKS_NAME)
    config.pluginmanager.register(JunitHooks(state), JUNIT_HOOKS_NAME)
    if replay is None and aims_at_checks(config):
        state.worker().start()  # torch imports (seconds, cold) while pytest collects


@pytest.hookimpl(trylast=True)  # after every other plugin's: nothing of this run prints after its last flush
def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        if state.signals is not None:
            state.signals.stop()
        state.close()
        del config.stash[STATE_KEY]
    for name in (JSON_HOOKS_NAME, JUNIT_HOOKS_NAME):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)
    output = config.stash.get(OUTPUT_KEY, None)
    if output is not None:
        del config.stash[OUTPUT_KEY]
        flush_at_exit(*output)


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter writes its header
def pytest_sessionstart(session: pytest.Session) -> None:
    """A run of the checks: pytest's terminal writes through :class:`outward.Guarded`, so a reader
    that closed the pipe (``pytest -m fast -v | head``) or a full disk ends the terminal's output,
    not the run (pytest itself would stop in the middle of its reports with an internal error);
    :func:`flush_at_exit` ends it."""
    config = session.config
    if not aims_at_checks(config):
        return
    writer = config.get_terminal_writer() if config.pluginmanager.has_plugin("terminalreporter") else None
    guard = None
    if writer is not None and hasattr(writer, "_file"):  # pytest's TerminalWriter keeps its stream there
        guard = writer._file if isinstance(writer._file, outward.Guarded) else outward.Guarded(writer._file)
        writer._file = guard
    config.stash[OUTPUT_KEY] = (session, guard)


def flush_at_exit(session: pytest.Session, guard: Optional[outward.Guarded]) -> None:
    """The run's stdout and stderr flushed before pytest returns, where a closed pipe or a full disk
    is handled as every command of the suite handles it (:func:`outward.finish`): the pipe quietly,
    the disk in one line and exit status 2. Without it, a stdout that is not a terminal keeps the G-lines in its
    buffer until the interpreter's own flush at exit, which fails with ``Exception ignored …``
    and exit status 120 (or pytest's own flush: a traceback)."""
    if guard is not None:
        guard.flush()
    code = outward.finish(int(session.exitstatus))
    if guard is not None and guard.failed:
        code = outward.WRITE_FAILED
    if code != int(session.exitstatus):
        session.exitstatus = code


STATE_KEY = pytest.StashKey[SessionState]()
OUTPUT_KEY = pytest.StashKey[tuple[pytest.Session, Optional[outward.Guarded]]]()  # see pytest_sessionstart
SPEED_CHECKS_KEY = pytest.StashKey[list[tuple[pytest.Item, str]]]()  # a replay's soak and multinode checks
VERDICT_KEY = pytest.StashKey[Verdict]()
ORDER_KEY = pytest.StashKey[int]()


def _state(config: pytest.Config) -> SessionState:
    return config.stash[STATE_KEY]


def aims_at_checks(config: pytest.Config) -> bool:
    """True when the run's paths are this suite's checks (``tests_gotchas`` or a folder holding it,
    or the installed ``spark_gotchas/checks`` that ``spark-gotchas`` runs)."""
    installed = Path(__file__).resolve().parent / "checks"
    for arg in getattr(config, "args", ()) or ():
        path = Path(str(arg).split("::")[0])
        if "tests_gotchas" in path.parts or (path.is_dir() and (path / "tests_gotchas").is_dir()):
            return True
        if installed == path.resolve() or installed in path.resolve().parents:
            return True
    return False


def run_phase(item: pytest.Item) -> int:
    """0: CPU-only check of the machine's live state, 1: a ``scan`` of files, 2: a ``gpu`` check.
    Other tests are phase 0: their order is left alone."""
    if gotcha_of(item) is None:
        return 0
    if item.get_closest_marker("gpu") is not None:
        return 2
    return 1 if item.get_closest_marker("scan") is not None else 0


def in_file_order(items: list[pytest.Item]) -> None:
    """The checks back in their files' order, in the places checks hold, whatever a plugin that
    reorders tests (pytest-randomly) did: the head start is planned for that order. Other tests
    keep their places and order."""
    places = [i for i, item in enumerate(items) if gotcha_of(item) is not None]
    ordered = sorted((items[i] for i in places), key=lambda item: (item.location[0], item.location[1] or 0))
    for place, item in zip(places, ordered, strict=True):
        items[place] = item


def gotcha_of(item: pytest.Item) -> Optional[int]:
    """The gotcha number of a check (from its file name ``test_gNN_…``), None for other tests."""
    path = getattr(item, "path", None)
    match = GOTCHA_FILE.match(path.name) if path is not None else None
    if match is None or "spark" not in getattr(item, "fixturenames", ()):
        return None
    return int(match.group(1))


# -- collection ------------------------------------------------------------------------------
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    markexpr = config.getoption("markexpr", default="") or ""
    state.markers = markexpr
    keep, drop = [], []
    for item in items:
        if gotcha_of(item) is None:
            keep.append(item)
            continue
        speeds = [m for m in SPEED_MARKERS if item.get_closest_marker(m) is not None]
        if len(speeds) != 1:
            raise pytest.UsageError(
                f"spark-gotchas: {item.nodeid} must carry exactly one of the markers "
                f"{', '.join(SPEED_MARKERS)} (has: {', '.join(speeds) or 'none'})"
            )
        speed = speeds[0]
        if speed in ("soak", "multinode") and state.replay is not None:
            config.stash.setdefault(SPEED_CHECKS_KEY, []).append((item, speed))  # see report_left_out
        if speed in ("soak", "multinode") and speed not in markexpr:
            drop.append(item)  # hours of load or a torchrun launch only when asked for by name
            continue
        newer = item.get_closest_marker("reads")
        if newer is not None and state.replay is not None and not any(k in state.replay.readings for k in newer.args):
            drop.append(item)  # the snapshot was recorded before this check: its lines stay the lines it had
            continue
        if item.get_closest_marker("timeout") is None:
            seconds = state.options.spark_fast_timeout
            if speed == "soak":
                seconds = state.options.soak_seconds + SOAK_TIMEOUT_MARGIN_S
            item.add_marker(pytest.mark.timeout(seconds))
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    in_file_order(items)
    for index, item in enumerate(items):
        item.stash[ORDER_KEY] = index
    # CPU-only checks first, while the worker imports torch (seconds, cold): those that read the
    # machine's live state, then the scans of files, during which the head start begins (G4's
    # load, G5's kernels); the GPU checks last.
    items.sort(key=run_phase)
    if any(gotcha_of(i) is not None for i in items):
        state.active = True
        if state.replay is None:
            state.worker().start()  # no-op when configure started it already


def pytest_collection_finish(session: pytest.Session) -> None:
    """Plan the head start for the GPU checks collected (live runs only). A replay reports the
    soak and multinode checks its selection left out, now that every plugin's selection (-k, -m)
    is applied (:func:`report_left_out`)."""
    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if state.replay is not None:
        report_left_out(session, state)
    if not state.active or state.head_start is None:
        return
    state.head_start.plan({gotcha_of(item) for item in session.items
                           if gotcha_of(item) is not None and item.get_closest_marker("gpu") is not None})


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Once the checks of the machine's live state are done (at the first scan or GPU check),
    begin the head start: its work overlaps the worker's torch import instead of following it."""
    state = item.config.stash.get(STATE_KEY, None)
    if state is None or run_phase(item) == 0 or state.head_start is None:
        return
    state.head_start.begin()  # once: later calls find nothing left to start


# -- the fixture ------------------------------------------------------------------------------
class Spark:
    """What a gotcha check sees: readings, the profile, the options, and ``report``."""

    def __init__(self, state: SessionState):
        self._state = state

    @property
    def options(self) -> RunOptions:
        return self._state.options

    @property
    def plan(self):
        """The planned run (weights, load factor, precision) the judges weigh."""
        return self._state.options.plan

    @property
    def here(self):
        """Whether this machine (or the replayed one) is the profile's platform: its live state
        (memory, clocks, bandwidth, processes) is judged only then (:func:`platform.machine`)."""
        return platform.machine(self._state.provider, self._state.options.spark_profile)

    @property
    def live(self) -> bool:
        return self._state.replay is None

    @property
    def provider(self) -> Provider:
        return self._state.provider

    def read(self, key: str) -> Any:
        """The reading ``key`` (taken once per run). Unavailable -> the check reports SKIP."""
        return self._state.provider.read(key)

    def try_read(self, key: str) -> Any:
        return self._state.provider.try_read(key)

    def say(self, text: str) -> None:
        """A progress line for the user, shown while the check runs."""
        self._state.say(text)

    def add_artifact(self, name: str, path: str) -> None:
        self._state.add_artifact(name, path)

    @property
    def profile(self):
        return platform.profile(self._state.provider, self._state.options.spark_profile)

    def stop_run(self, reason: str) -> None:
        """End the run after this check, as pytest ends an interrupted one (exit status 2): the
        summary, reports and snapshot are still written."""
        item = self._state.current_item
        if item is not None:
            item.session.shouldstop = reason

    def report(self, verdict: Verdict) -> Verdict:
        """Record the verdict and turn it into the pytest outcome (fail/skip/warn/pass)."""
        __tracebackhide__ = True
        item = self._state.current_item
        if item is not None:
            expected = gotcha_of(item)
            if expected is not None and expected != verdict.gotcha:
                raise ValueError(f"{item.nodeid} is a G{expected} check but reported G{verdict.gotcha}")
            if VERDICT_KEY in item.stash:
                raise ValueError(f"{item.nodeid} reported twice; one verdict per check")
            if not verdict.check:
                verdict = dataclasses.replace(verdict, check=check_label(item))
            item.stash[VERDICT_KEY] = verdict
        self._state.reported.append(Reported(item.nodeid if item is not None else "", verdict,
                                             item.stash.get(ORDER_KEY, 1 << 30) if item is not None else 1 << 30))
        _act(verdict, self._state.options.spark_strict)
        return verdict


READINGS_OF = {"soak": ("thermal.soak", "mem.load_probe", "bench.bandwidth_sweep"), "multinode": ("dist.collective",)}


class RecordedSpark(Spark):
    """The ``spark`` of a check a replay's selection left out, run on the snapshot's readings:
    its verdict is kept, not turned into a pytest outcome (pytest does not run the check)."""

    def __init__(self, state: SessionState):
        super().__init__(state)
        self.verdict: Optional[Verdict] = None

    def report(self, verdict: Verdict) -> Verdict:
        self.verdict = verdict
        return verdict

    def stop_run(self, reason: str) -> None:
        pass

    def judge(self, item: pytest.Item) -> Optional[Verdict]:
        """The verdict the check ``item`` reports on the recorded readings; None when it takes
        more than ``spark``, cannot read them or fails."""
        check = getattr(item, "obj", None)
        try:
            if not callable(check) or list(inspect.signature(check).parameters) != ["spark"]:
                return None
            check(spark=self)
        except (Exception, pytest.skip.Exception, pytest.fail.Exception):
            return None
        return self.verdict


def report_left_out(session: pytest.Session, state: SessionState) -> None:
    """A replay whose selection (``-m fast``, ``-k g04``, ``-m "not soak"``) leaves out a soak or
    multinode check of a gotcha it judges, when the snapshot's run selected that check: the check
    judges its recorded reading now (:class:`RecordedSpark`); a FAIL or WARN stands on the gotcha's
    line as recorded (:func:`verdict.recorded`): never a PASS over it, and ahead of a verdict of the
    same status that this run judged (counted as ``+1 more``, its fix listed); anything else is a
    note that the check was not judged, named in the line's ``not checked`` tail."""
    selected = set(session.items)
    judged = {gotcha_of(item) for item in session.items}
    for item, speed in session.config.stash.get(SPEED_CHECKS_KEY, []):
        if item in selected or gotcha_of(item) not in judged or not recorded_with(state.replay, speed):
            continue
        verdict = left_out_verdict(state, item, speed)
        state.left_out.add(item.nodeid)
        first = verdict.status.needs_fix  # a recorded FAIL or WARN speaks for a tie of statuses
        state.reported.append(Reported(item.nodeid, verdict, order=-1 if first else 1 << 30))


def left_out_verdict(state: SessionState, item: pytest.Item, speed: str) -> Verdict:
    """The verdict a replay reports for the left-out check ``item``: its recorded FAIL or WARN, or
    ``soak check not judged: judged only with -m soak``."""
    gid, label = gotcha_of(item), check_label(item)
    found = RecordedSpark(state).judge(item)
    if found is not None and found.gotcha == gid and found.status.needs_fix:
        return recorded(dataclasses.replace(found, check=label), speed)
    return Verdict(gid, Status.SKIP, f"{speed} check not judged: judged only with -m {speed}", check=label)


def fails_for_left_out(state: SessionState) -> bool:
    """Whether a left-out check's recorded verdict fails the run, as it would have judged:
    a FAIL, or a WARN under ``--spark-strict``."""
    failing = (Status.FAIL, Status.WARN) if state.options.spark_strict else (Status.FAIL,)
    return any(r.verdict.status in failing for r in state.reported if r.nodeid in state.left_out)


def recorded_with(replay: Any, speed: str) -> bool:
    """Whether a replayed snapshot's run selected the ``speed`` checks (its recorded -m, or, in a
    snapshot that predates it, the readings only those checks take)."""
    if replay.markers:
        return speed in replay.markers
    return any(key in replay.readings for key in READINGS_OF.get(speed, ()))


def check_label(item: pytest.Item) -> str:
    """What a check examines, in a few words, for the lines: its docstring's first line
    (``first launch``), or else its name (``test_g1_first_cuda_launch`` -> ``first cuda launch``)."""
    doc = (getattr(getattr(item, "obj", None), "__doc__", None) or "").strip()
    if doc:
        return doc.splitlines()[0].strip().rstrip(".")
    name = getattr(item, "originalname", None) or item.name
    return re.sub(r"^test_(g\d+_)?", "", name).replace("_", " ")


def unreadable(gid: int, key: str, reason: str) -> Verdict:
    """``could not read KEY: REASON``; a reason that would carry the line past 100 columns keeps as
    many of its leading clauses as fit, at least one (``recorded reading does not fit MemInfo:
    mem_total_bytes``), and the rest goes to the detail (``needs int, got string '126 GB'``)."""
    clauses = reason.split(": ")
    room = LINE_COLUMNS - len(format_line(gid, Status.SKIP, f"could not read {key}: "))
    n, used = 1, len(printable(clauses[0], limit=0))
    while n < len(clauses) and used + 2 + len(printable(clauses[n], limit=0)) <= room:  # each clause measured once
        used += 2 + len(printable(clauses[n], limit=0))
        n += 1
    return Verdict(gid, Status.SKIP, f"could not read {key}: {': '.join(clauses[:n])}", detail=": ".join(clauses[n:]))


BUG_FIX = "this is a bug in spark-gotchas: please report it with the snapshot (--spark-snapshot)"


def _act(verdict: Verdict, strict: bool) -> None:
    __tracebackhide__ = True
    text = "\n".join(summary_lines([verdict]))  # the line and, for FAIL and WARN, its fix
    if verdict.status is Status.FAIL:
        pytest.fail(text, pytrace=False)
    if verdict.status is Status.SKIP:
        pytest.skip(verdict.line)
    if verdict.status is Status.WARN:
        if strict:
            pytest.fail(text + "\n    (failed because of --spark-strict)", pytrace=False)
        warnings.warn(GotchaWarning(text), stacklevel=3)  # _act <- Spark.report <- the check: point at the check


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Spark:
    """The machine under test (or the replayed snapshot): ``spark.read``, ``spark.report``."""
    return Spark(_state(request.config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    gid = gotcha_of(item)
    if gid is None:
        return (yield)
    state = _state(item.config)
    state.current_item = item
    began = time.time()
    try:
        return (yield)
    except ReadingUnavailable as exc:
        if VERDICT_KEY in item.stash:
            raise
        if exc.bug:
            Spark(state).report(Verdict(
                gid, Status.FAIL, f"the check itself failed reading {exc.key}: {exc.reason}".replace("\n", " "),
                fix=BUG_FIX))
        Spark(state).report(unreadable(gid, exc.key, exc.reason))
    except (pytest.fail.Exception, pytest.skip.Exception, KeyboardInterrupt):
        raise
    except Exception as exc:
        if VERDICT_KEY in item.stash:
            raise
        verdict = Verdict(
            gid, Status.FAIL, f"the check itself failed: {type(exc).__name__}: {exc}".replace("\n", " "),
            fix=BUG_FIX,
        )
        item.stash[VERDICT_KEY] = verdict
        state.reported.append(Reported(item.nodeid, verdict, item.stash.get(ORDER_KEY, 1 << 30)))
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        pytest.fail("\n".join([*summary_lines([verdict]), f"    at {frame.filename}:{frame.lineno} in {frame.name}"]),
                    pytrace=False)
    finally:
        state.current_item = None
        state.check_times.append((item.nodeid, began, time.time() - began))


# -- reports -----------------------------------------------------------------------------------
@pytest.hookimpl(optionalhook=True)
def pytest_metadata(metadata: dict, config: pytest.Config) -> None:
    """pytest-metadata's values (CI variables such as ``GIT_URL=https://user:token@…``), shown by
    ``-v``'s header and kept as the JSON report's ``environment``: masked, one line each."""
    if aims_at_checks(config):
        cleaned = outward.document(scrub.scrub_named(metadata))
        metadata.clear()
        metadata.update(cleaned)  # the same dictionary: pytest-metadata and its readers hold it


class JsonReportHooks:
    """pytest-json-report hooks, registered per run so they can reach the run's state."""

    def __init__(self, state: SessionState):
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo) -> dict:
        if call.when != "call" or VERDICT_KEY not in item.stash:
            return {}
        return {"gotcha": item.stash[VERDICT_KEY].to_json()}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        if self.state.active:
            json_report["spark_gotchas"] = report_section(self.state)
            report_file.take_over(self.state.config, self._failed)  # the save that follows: whole or none
        cleaned = outward.record(json_report)  # a masked copy: no credential reaches the file
        json_report.clear()
        json_report.update(cleaned)

    def _failed(self, path: str, reason: str) -> None:
        self.state.output_errors.append(f"could not write the JSON report {path}: {reason}")

    @pytest.hookimpl(trylast=True)  # after pytest-json-report has written its file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """pytest-json-report only prints that it could not save its file (its save, taken over,
        said so in :meth:`_failed`): fail the run too."""
        if self.state.active and self.state.output_errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True)  # around every other plugin: pytest-json-report's exitcode counts a failed write
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    state = session.config.stash.get(STATE_KEY, None)
    signalled = state.signals.received if state is not None and state.signals is not None else ""
    if signalled and int(exitstatus) != int(pytest.ExitCode.INTERRUPTED):
        # a second Ctrl-C inside pytest's handling of the first left the status as it was
        exitstatus = session.exitstatus = pytest.ExitCode.INTERRUPTED
    if state is not None and int(exitstatus) == int(pytest.ExitCode.INTERRUPTED):
        # Ctrl-C, SIGTERM, or a check that ended the run (the soak cut short): what is written says so
        why = f"stopped early ({session.shouldstop})" if isinstance(session.shouldstop, str) else (
            "interrupted (SIGTERM)" if signalled == "SIGTERM" else "interrupted (Ctrl-C)")
        state.interrupted = f"{why} after {len(state.check_times)} of {session.testscollected} checks"
    if state is not None:
        state.release_workers()  # they exit while the reports are written, not after
    if state is not None and state.active:
        write_outputs(session, state)
        if fails_for_left_out(state) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    junit = session.config.pluginmanager.get_plugin(JUNIT_HOOKS_NAME)
    if junit is not None:
        junit.before_write(session)
    try:
        return (yield)
    except OSError as exc:  # pytest's junitxml could not write its report: one line, not a traceback
        if junit is None or not junit.failed_write(exc, session):
            raise
        return None

def write_outputs(session: pytest.Session, state: SessionState) -> None:
    """The snapshot and the Markdown summary, when asked for; a failed write fails the run."""
    opts = state.options
    if opts.spark_snapshot:
        write_output(state, "snapshot", opts.spark_snapshot, lambda: save_snapshot(run_snapshot(state), opts.spark_snapshot))
    if opts.spark_summary_md:
        write_output(state, "Markdown summary", opts.spark_summary_md,
                     lambda: atomic.write_text(opts.spark_summary_md, markdown_summary(state), append=True))
    if opts.spark_prometheus and session.exitstatus == pytest.ExitCode.INTERRUPTED:  # series of unrun gotchas would vanish
        state.notes.append(prometheus.INTERRUPTED.format(path=opts.spark_prometheus))
    elif opts.spark_prometheus:
        write_output(state, "Prometheus metrics", opts.spark_prometheus,
                     lambda: atomic.write_text(opts.spark_prometheus, prometheus.of_run(state), parents=True))
    if state.output_errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def write_output(state: SessionState, what: str, path: str, write: Any) -> None:
    """Write an output the user asked for; a note says where, or why not. A failed write fails
    the run: CI must not go green without its artifact."""
    try:
        write()
        state.notes.append(f"{what} written to {path}")
    except OSError as exc:
        state.output_errors.append(f"could not write the {what} {path}: {exc.strerror or exc}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.active or not state.reported:
        return
    terminalreporter.write_sep("=", "spark-gotchas")
    width = min(max(terminalreporter._tw.fullwidth, 60), 120) if hasattr(terminalreporter, "_tw") else 100
    for line, markup in terminal_block(state, width=width, verbose=config.getoption("verbose", 0) > 0):
        outward.terminal(terminalreporter, line, **markup)
