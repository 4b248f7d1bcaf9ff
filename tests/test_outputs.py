"""Outputs a user asked for (JSON report, snapshot, Markdown summary): written, or the run fails
with one line that says which and why. CI must never go green without its artifact."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def preflight(pytester, *args):
    return pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:randomly", str(ROOT / "tests_gotchas"),
                        *args, timeout=240)


def test_outputs_that_cannot_be_written_fail_the_run_with_one_line_each(pytester):
    blocker = pytester.path / "a-file"
    blocker.write_text("not a folder")
    result = preflight(pytester, "--json-report", f"--json-report-file={blocker}/report.json",
                       f"--spark-snapshot={blocker}/snapshot.json", f"--spark-summary-md={blocker}/summary.md")
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]
    for what in ("snapshot", "Markdown summary", "JSON report"):
        (line,) = [line for line in result.stdout.lines if line.startswith(f"could not write the {what} ")]
        assert str(blocker) in line and line.endswith("is missing)")
    assert "Traceback" not in out + result.stderr.str()


def test_outputs_written_are_named_and_whole(pytester):
    report, snapshot, summary = (pytester.path / n for n in ("r.json", "s.json", "summary.md"))
    summary.write_text("# earlier job summary\n")
    result = preflight(pytester, "--json-report", f"--json-report-file={report}", f"--spark-snapshot={snapshot}",
                       f"--spark-summary-md={summary}")
    assert result.ret in (0, 1), result.stdout.str()[-3000:]  # 1: a finding of this machine, not of the outputs
    result.stdout.fnmatch_lines([f"snapshot written to {snapshot}", f"Markdown summary written to {summary}"])
    assert json.loads(report.read_text())["exitcode"] == result.ret
    assert json.loads(snapshot.read_text())["readings"]
    assert summary.read_text().startswith("# earlier job summary\n## ")  # appended, as a job summary is
    assert not [p.name for p in pytester.path.iterdir() if p.name.endswith(".tmp")]


def test_the_report_records_the_failed_run_when_the_snapshot_cannot_be_written(pytester):
    blocker = pytester.path / "a-file"
    blocker.write_text("not a folder")
    result = preflight(pytester, "--json-report", "--json-report-file=r.json", f"--spark-snapshot={blocker}/s.json")
    assert result.ret == 1
    assert json.loads((pytester.path / "r.json").read_text())["exitcode"] == 1
