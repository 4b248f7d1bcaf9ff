"""One contract for every door: a recorded snapshot replayed once, with the JUnit XML and the
Prometheus metrics written beside the ten lines printed, and each door says what the lines say.
The statuses, fixes and readings come from the same verdicts (the JSON report's ``metadata.gotcha``
of each check), never from a judgement of a door's own.

A door is a function from the replay to each gotcha's status; add one to ``DOORS``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

import pytest
from door_runs import Doors, from_folder, h200_doors, vllm_doors  # noqa: F401  the h200 and vllm fixtures
from gline_block import GLINE
from junitparser import Failure, JUnitXml, Skipped
from prometheus_client.parser import text_string_to_metric_families

from spark_gotchas.commands.slurm import drain
from spark_gotchas.knowledge.verdict import Status, Verdict, worst
from spark_gotchas.outputs import prometheus


def printed(doors: Doors) -> dict[str, list[str]]:
    """Each gotcha's printed line and fix lines: {"G6": ["G6 FAIL: …", "    fix: …"]}."""
    out: dict[str, list[str]] = {}
    for line in doors.lines:
        if GLINE.match(line):
            out[line.split()[0]] = [line]
        else:
            out[list(out)[-1]].append(line)
    return out


def junit_cases(doors: Doors) -> list[tuple[str, list[str]]]:
    """Each testcase's status (from its element) and the lines it shows (message text or system-out)."""
    (suite,) = list(JUnitXml.fromfile(str(doors.junit)))
    out = []
    for case in suite:
        (result,) = case.result or [None]
        if isinstance(result, Failure):
            out.append(("failure", result.text.splitlines()))
        elif isinstance(result, Skipped):
            out.append(("skipped", result.text.splitlines()))
        else:
            out.append(("passed", case.system_out.splitlines()))
    return out


def junit_statuses(doors: Doors) -> dict[str, str]:
    """The worst status among each gotcha's testcases, read from the lines they carry."""
    verdicts = []
    for outcome, lines in junit_cases(doors):
        match = GLINE.match(lines[0])
        status = Status(match.group(2))
        expected = {"failure": (Status.FAIL, Status.WARN), "skipped": (Status.SKIP,)}.get(outcome)
        assert status in (expected or (Status.WARN, Status.PASS, Status.INFO)), (outcome, lines[0])
        verdicts.append(Verdict(int(match.group(1)), status, "x", fix="x" if status.needs_fix else ""))
    by_gotcha: dict[int, list[Verdict]] = {}
    for v in verdicts:
        by_gotcha.setdefault(v.gotcha, []).append(v)
    return {f"G{g}": worst(vs).status.value for g, vs in sorted(by_gotcha.items())}


def junit_properties(doors: Doors) -> dict[str, str]:
    (suite,) = list(JUnitXml.fromfile(str(doors.junit)))
    return {p.name: p.value.split(":")[0].split()[1] for p in suite.properties() if GLINE.match(p.value)}


def prometheus_statuses(doors: Doors) -> dict[str, str]:
    """The status whose series is 1, per gotcha."""
    ones = {}
    for family in text_string_to_metric_families(doors.metrics.read_text()):
        for sample in family.samples:
            if sample.name == "spark_gotchas_status" and sample.value == 1:
                assert sample.labels["gotcha"] not in ones
                ones[sample.labels["gotcha"]] = sample.labels["status"]
    return ones


def slurm_statuses(doors: Doors) -> dict[str, str]:
    """What node-health does with the run's JSON report on an idle node: the gotchas its drain reason
    names are FAIL; a pass that drains nothing leaves every gotcha "not FAIL". Compared with the
    printed lines reduced the same way."""
    action = drain.decide(drain.outcome(doors.report), drain.Node("node1", "IDLE"))
    assert (action.do is drain.Do.DRAIN) == any(s == "FAIL" for s in doors.statuses.values()), action
    named = {m.group(1) for m in re.finditer(r"(?:^spark-gotchas: |; )(G\d+) FAIL: ", action.reason)}
    return {g: "FAIL" if g in named else "not FAIL" for g in doors.statuses}


DOORS: dict[str, Callable[[Doors], dict[str, str]]] = {
    "junit testcases": junit_statuses,
    "junit properties": junit_properties,
    "prometheus": prometheus_statuses,
    "slurm": slurm_statuses,
}


H100_LIVE = Path(__file__).resolve().parent / "fixtures" / "h100" / "doors-live"


@pytest.fixture(params=["h200", "vllm", "live"])
def doors(request) -> Doors:
    """Two recorded snapshots replayed here; ``live``: a live preflight's folder with every door
    written (devscripts/doors.sh): the one SPARK_DOORS_LIVE names, else the one recorded on an H100
    on 2026-12-05 (tests/fixtures/h100/doors-live)."""
    if request.param == "live":
        return from_folder(Path(os.environ.get("SPARK_DOORS_LIVE") or H100_LIVE))
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("door", list(DOORS))
def test_each_door_gives_each_gotcha_the_status_of_its_printed_line(doors, door):
    assert len(doors.statuses) == 10
    expected = doors.statuses if door != "slurm" else {
        g: "FAIL" if s == "FAIL" else "not FAIL" for g, s in doors.statuses.items()}
    assert DOORS[door](doors) == expected


def test_the_slurm_drain_reason_is_the_printed_fail_lines(doors):
    """The reason ``sinfo -R`` shows starts with the first FAIL line as printed (cut to the 255 bytes
    slurmdbd keeps)."""
    action = drain.decide(drain.outcome(doors.report), drain.Node("node1", "IDLE"))
    fails = [line for line in doors.lines if GLINE.match(line) and GLINE.match(line).group(2) == "FAIL"]
    if not fails:
        assert action.do is drain.Do.NOTHING and action.says == "healthy: no FAIL"
        return
    assert action.reason.startswith("spark-gotchas: ")
    text = action.reason[len("spark-gotchas: "):]
    assert ("; ".join(fails)).startswith(text.removesuffix("…")), (text, fails)


def test_every_fix_printed_is_in_the_junit_report_under_a_line_of_its_status(doors):
    for gotcha, (line, *fixes) in printed(doors).items():
        status = GLINE.match(line).group(2)
        shown = [lines for _, lines in junit_cases(doors) if lines[0].startswith(f"{gotcha} {status}: ")]
        assert shown, line
        for fix in fixes:
            assert any(fix in lines for lines in shown), (gotcha, fix)


def test_the_metrics_readings_are_the_json_report_s_verdict_readings(doors):
    """The figures in the metrics file are those of the verdicts the JSON report holds, scaled."""
    verdicts = [Verdict(int(g["id"][1:]), Status(g["status"]), g["summary"], g["fix"], readings=g["readings"],
                        check=g.get("check", ""))
                for t in doors.report["tests"] if (g := t.get("metadata", {}).get("gotcha"))]
    expected = {(f"spark_gotchas_{metric}", tuple(sorted(labels))): value
                for metric, series in prometheus.figures(verdicts).items() for labels, value in series.items()}
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(doors.metrics.read_text()) for s in family.samples
             if s.name.startswith("spark_gotchas_") and s.name not in (
                 "spark_gotchas_status", "spark_gotchas_info", "spark_gotchas_run_timestamp_seconds")}
    assert found == pytest.approx(expected)
    assert any(name == "spark_gotchas_bandwidth_bytes_per_second" for name, _ in found)
    # and by hand, without the suite's table: each method's GB/s of G5's first measuring verdict, in bytes/s
    first = next(v for v in verdicts if v.gotcha == 5 and isinstance(v.readings.get("gbps"), dict))
    shown = {dict(labels)["method"]: value for (name, labels), value in found.items()
             if name == "spark_gotchas_bandwidth_bytes_per_second"}
    assert shown == pytest.approx({method: gbps * 1e9 for method, gbps in first.readings["gbps"].items()})
