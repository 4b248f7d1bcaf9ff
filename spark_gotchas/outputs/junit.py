"""pytest's JUnit XML report (``--junitxml``) with each check's G-line where CI test views show it.

pytest writes a check that FAILs as ``<failure>`` (message ``Failed: `` and the line with its fix),
one that SKIPs as ``<skipped>`` (its text the plugin's file and line), and every other check as a
testcase with no text: a WARN or INFO was invisible in a CI test view. pytest writes its report
to a file of its own beside the one asked for; :class:`JunitHooks` reads it back and writes the
report whole (atomically: an old report stays as it was until then), changing only the checks'
testcases:

- FAIL (and a WARN under ``--spark-strict``): ``<failure message="G5 FAIL: …">`` with the line, its
  fix and its detail as text (what pytest wrote beyond them, such as a crash's location, after);
- SKIP: ``<skipped message="G4 SKIP: …">`` with the line and detail as text;
- WARN, PASS, INFO: ``<system-out>`` starting with the line (``G9 WARN: …``), its fix and detail;
- a soak or multinode check a replay left out whose recorded FAIL or WARN stands on its gotcha's
  line: a testcase of its own, so the report fails where the run does;
- the run: the testsuite's ``<properties>`` hold the platform line and each gotcha's G-line.

All of it is what junit_family xunit2 (pytest's default) allows: no ``<properties>`` in a testcase.
Where each CI shows what (their parsers, read 2026-12): GitLab shows a failure's or a skip's text,
with system-out after a failure's; Jenkins' JUnit plugin the failure message and text, the skip
message and every testcase's system-out; mikepenz/action-junit-report and dorny/test-reporter a
failure's message and text. docs/operations.md has the table.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import traceback
import xml.etree.ElementTree as ET
from typing import Any, Iterable, Optional

import pytest

from ..base import atomic, outward
from ..base.bounded_read import JUNIT_XML, Refused, read_bytes
from ..knowledge.verdict import Status, Verdict, summary_lines
from ..machine import platform
from .reports import interruption_line

HOOKS_NAME = "spark-gotchas-junit"


def case_name(nodeid: str, prefix: Optional[str] = None) -> tuple[str, str]:
    """The testcase's ``classname`` and ``name`` pytest gives a test id (``--junit-prefix`` first):
    ``tests_gotchas/test_g05_bandwidth.py::test_g5_bandwidth_budget`` ->
    (``tests_gotchas.test_g05_bandwidth``, ``test_g5_bandwidth_budget``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    classnames = ([prefix] if prefix else []) + names[:-1]
    return ".".join(classnames), names[-1]


def block(verdict: Verdict) -> list[str]:
    """The check's line, its fix (FAIL and WARN) and its detail, as the terminal shows them with -v."""
    lines = summary_lines([verdict])
    if verdict.detail:
        lines.append(f"    detail: {verdict.detail}")
    return [outward.line(line) for line in lines]


def _text(element: ET.Element) -> list[str]:
    return (element.text or "").splitlines()


def annotate_case(case: ET.Element, verdict: Verdict) -> None:
    """Put ``verdict``'s line, fix and detail where a CI shows this testcase's outcome."""
    lines = block(verdict)
    failure = case.find("failure")
    skipped = case.find("skipped")
    if failure is not None and verdict.status.needs_fix:
        failure.set("message", lines[0])
        failure.text = "\n".join(lines + [extra for extra in _text(failure) if extra not in lines])
    elif skipped is not None and verdict.status is Status.SKIP:
        skipped.set("message", lines[0])
        skipped.text = "\n".join(lines)
    elif failure is None and skipped is None and case.find("error") is None:
        out = case.find("system-out")
        if out is None:
            out = ET.SubElement(case, "system-out")
        out.text = "\n".join(lines + _text(out))


def recorded_case(classname: str, name: str, verdict: Verdict) -> ET.Element:
    """A testcase for a check a replay left out, its recorded FAIL or WARN on its gotcha's line."""
    case = ET.Element("testcase", classname=classname, name=name, time="0.000")
    lines = block(verdict)
    if verdict.status is Status.FAIL:
        ET.SubElement(case, "failure", message=lines[0]).text = "\n".join(lines)
    else:
        ET.SubElement(case, "system-out").text = "\n".join(lines)
    return case


def _count(suite: ET.Element, key: str, more: int) -> None:
    try:
        suite.set(key, str(int(suite.get(key, "0")) + more))
    except ValueError:
        pass


def annotate(root: ET.Element, verdicts: dict[tuple[str, str], Verdict], left_out: Iterable[tuple[tuple[str, str], Verdict]],
             properties: list[tuple[str, str]], interrupted: str = "") -> int:
    """Rewrite pytest's report ``root`` (its ``testsuites`` or ``testsuite``); ``verdicts`` by
    (classname, name). A run that ended early (``interrupted`` says how) gets an ``<error>``
    testcase of its own, so a CI view shows it red, not as the passes it judged before it ended.
    Returns how many testcases carry a verdict now."""
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if not suites:
        return 0
    done = 0
    for suite in suites:
        for case in suite.iter("testcase"):
            verdict = verdicts.get((case.get("classname", ""), case.get("name", "")))
            if verdict is not None:
                annotate_case(case, verdict)
                done += 1
    suite = suites[0]
    if interrupted:
        case = ET.SubElement(suite, "testcase", classname="spark_gotchas", name="run")
        ET.SubElement(case, "error", message=outward.line(f"INTERRUPTED: {interrupted}")).text = outward.line(
            f"INTERRUPTED: {interrupted}")
        _count(suite, "tests", 1)
        _count(suite, "errors", 1)
    for (classname, name), verdict in left_out:
        suite.append(recorded_case(classname, name, verdict))
        _count(suite, "tests", 1)
        _count(suite, "failures", 1 if verdict.status is Status.FAIL else 0)
        done += 1
    if properties:
        props = suite.find("properties")
        if props is None:
            props = ET.Element("properties")
            suite.insert(0, props)
        for name, value in properties:
            ET.SubElement(props, "property", name=name, value=outward.line(value))
    return done


def rewrite(path: str, verdicts: dict[tuple[str, str], Verdict], left_out: list[tuple[tuple[str, str], Verdict]],
            properties: list[tuple[str, str]], source: Optional[str] = None, interrupted: str = "") -> None:
    """Read pytest's report at ``source`` (``path`` itself by default), annotate it, and replace
    ``path`` whole. OSError or ValueError (the file is not pytest's XML) says why not."""
    try:
        data = read_bytes(source or path, JUNIT_XML)
    except Refused as exc:
        raise ValueError(str(exc)) from None
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"not XML ({exc})") from None
    annotate(root, verdicts, left_out, properties, interrupted)
    atomic.write_text(path, '<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root, encoding="unicode"))


def junit_unwritten(exc: OSError, path: Optional[str], private: Optional[str] = None) -> Optional[str]:
    """The line for pytest's failure to write its report at ``path`` (its file, a folder on its
    way, or a write that failed midway, such as a full disk), or at ``private``, the file beside it
    pytest was given to write; None when ``exc`` is about something else."""
    if not path:
        return None
    target = os.path.abspath(path)
    failed = os.path.abspath(os.fsdecode(exc.filename)) if exc.filename else None
    if failed is not None and private and failed == os.path.abspath(private):
        failed = target
    if failed is None or not (failed == target or target.startswith(failed.rstrip(os.sep) + os.sep)):
        frames = traceback.extract_tb(exc.__traceback__)
        if failed is not None or not any(f.filename.endswith(os.path.join("_pytest", "junitxml.py")) for f in frames):
            return None
        failed = target
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileExistsError) and failed != target:
        reason = f"{failed} is a file, not a folder"
    elif failed != target:
        reason = f"{reason}: {failed}"
    return outward.line(f"could not write the JUnit XML report {path}: {reason}")


def probe(path: str) -> Optional[str]:
    """Why pytest will not be able to write its report at ``path``, asked before it tries (so the
    run's other reports record the failure too); None when a file can be made there. A file is
    made and removed in the folder (or the nearest one that exists: pytest creates the rest)."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        return f"could not write the JUnit XML report {path}: it is a directory"
    if atomic.is_stream(target):  # /dev/stdout, a FIFO: written through, no file made beside it (/dev: root's)
        return None
    folder = os.path.dirname(target)
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        return f"could not write the JUnit XML report {path}: {folder} is a file, not a folder"
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".junit-probe.", suffix=".tmp")
    except OSError as exc:
        return f"could not write the JUnit XML report {path}: {exc.strerror or exc} (cannot create a file in {folder})"
    os.close(fd)
    os.unlink(tmp)
    return None


class JunitHooks:
    """Registered per run beside pytest's own junitxml plugin; acts only when ``--junitxml`` is given."""

    def __init__(self, state: Any):
        self.state = state
        self.refused: Optional[str] = None  # why the report cannot be written, found before pytest tried
        self.private: Optional[str] = None  # the file beside the report pytest writes, read back and removed
        self.logxml: Any = None
        self.stream: Optional[int] = None  # a FIFO held open while pytest writes into it
        given = getattr(state.config.option, "xmlpath", None)
        # where pytest's junitxml writes it: $VARIABLES and ~ expanded, from the folder pytest started in
        self.file = os.path.normpath(os.path.abspath(os.path.expanduser(os.path.expandvars(given)))) if given else None

    def _shown_path(self) -> None:
        """pytest's own line (``generated xml file: …``) names the report, as every line of the run
        shows a path: masked and escaped."""
        if self.logxml is not None:
            self.logxml.logfile = outward.line(self.file)

    def _drop_private(self) -> None:
        if self.private:
            try:
                os.unlink(self.private)
            except OSError:
                pass

    def path(self) -> Optional[str]:
        """The report's file when this run writes one of checks (not an xdist worker's run)."""
        config = self.state.config
        worker = getattr(config, "workerinput", None) is not None
        return self.file if self.state.active and self.file and not worker else None

    def before_write(self, session: pytest.Session) -> None:
        """Ask before pytest tries whether it can write the report (:func:`probe`): where it
        cannot, the run fails with that line now, so the JSON report records it too, and the
        rewrite is not tried."""
        path = self.path()
        self.refused = probe(path) if path else None
        if self.refused:
            self._fail(session, self.refused)
        elif path is not None:
            self._own_file_for_pytest(session, path)

    def _own_file_for_pytest(self, session: pytest.Session, path: str) -> None:
        """pytest writes its report with a plain open for writing: a full disk leaves half of it
        where the last whole one was, and two runs writing one path interleave. It is given a
        file of its own beside the report instead; the report itself is written once, whole
        (:func:`rewrite`), or left as it was."""
        from _pytest.junitxml import xml_key

        logxml = session.config.stash.get(xml_key, None)
        if logxml is None:
            return
        if atomic.is_stream(path):
            self._reader_for_pytest(session, logxml, path)
            return
        folder, name = os.path.split(path)
        self.private = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        logxml.logfile = self.private
        self.logxml = logxml

    def _reader_for_pytest(self, session: pytest.Session, logxml: Any, path: str) -> None:
        """pytest's plain open of a FIFO waits for ever for a reader: the FIFO is opened here first,
        waiting as long as the suite's own outputs do, and held open until pytest has written (its
        reader sees the report whole, then the end). With no reader by then, pytest writes nowhere
        and the run fails with one line."""
        try:
            self.stream = atomic.open_for_writing(path)
        except OSError as exc:
            logxml.logfile = os.devnull
            why = f"a FIFO that nothing read within {atomic.FIFO_WAIT_S:g} s" if exc.errno == errno.ENXIO else \
                exc.strerror or exc
            self.refused = f"could not write the JUnit XML report {path}: {why}"
            self._fail(session, self.refused)

    def failed_write(self, exc: OSError, session: pytest.Session) -> bool:
        """pytest's junitxml writes with ``open()`` and raises where it cannot: True (the run fails
        with one line) when ``exc`` is that, False for any other OSError."""
        line = junit_unwritten(exc, self.path(), self.private)
        if line is None:
            return False
        self._drop_private()
        self._shown_path()
        if not self.refused:  # its line is already there
            self._fail(session, line)
        return True

    def _fail(self, session: pytest.Session, line: str) -> None:
        self.state.output_errors.append(outward.line(line))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)  # after pytest's junitxml has written its file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state, config = self.state, session.config
        if self.stream is not None:  # pytest has written to the FIFO: its reader may see the end now
            os.close(self.stream)
            self.stream = None
        path = self.path()
        if path is None or self.refused:
            self._drop_private()
            return
        if atomic.is_stream(path):  # /dev/stdout, a FIFO: what pytest wrote there has gone by
            state.notes.append(f"JUnit XML report {path} is not a file of its own: written as pytest writes it, "
                               "without the checks' lines")
            return
        prefix = getattr(config.option, "junitprefix", None)
        reported = [r for r in state.reported if r.nodeid]
        verdicts = {case_name(r.nodeid, prefix): r.verdict for r in reported if r.nodeid not in state.left_out}
        left_out = [(case_name(r.nodeid, prefix), r.verdict) for r in reported
                    if r.nodeid in state.left_out and r.verdict.status.needs_fix]
        desc = platform.describe(state.provider, state.options.spark_profile)
        properties = [("spark_gotchas.machine.platform", platform.one_line(desc, state.replay.path if state.replay else None))]
        properties += [(line.split(" ", 1)[0], line) for line in summary_lines(state.verdicts) if line[:1] == "G"]
        try:
            rewrite(path, verdicts, left_out, properties, self.private, interruption_line(state))
        except (OSError, ValueError) as exc:
            self._fail(session, f"could not write the JUnit XML report {path}: {getattr(exc, 'strerror', None) or exc}")
        finally:
            self._drop_private()
            self._shown_path()
