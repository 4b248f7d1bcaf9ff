"""``python -m spark_gotchas check-report REPORT``: is a run's JSON report a whole artifact?

A CI job keeps the JSON report as its record of the run. A report that exists but says nothing
(``{}``, no tests, no G-lines) is worse than none: it looks like a record. This command fails
unless the report holds the tests and one G-line for every gotcha asked for (all ten by
default), and every skipped check says why. Exit 0 when whole, 1 when not, 2 on bad usage, 3 when
the command itself fails (``spark-gotchas check-report``: one line).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ..base import bounded_read, outward

GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): \S")


def problems(report: Any, gotchas: list[int]) -> list[str]:
    """What makes ``report`` (a parsed JSON report) less than whole; empty when it is whole."""
    if not isinstance(report, dict):
        return [f"the report is a JSON {type(report).__name__}, not an object"]
    out: list[str] = []
    tests = report.get("tests")
    if not isinstance(tests, list) or not tests:
        out.append("the report holds no tests")
        tests = []
    section = report.get("spark_gotchas")
    lines = section.get("lines") if isinstance(section, dict) else None
    if not isinstance(lines, list) or not lines:
        out.append("the report has no spark_gotchas lines")
        lines = []
    seen = {int(m.group(1)) for m in (GLINE.match(str(line)) for line in lines) if m}
    missing = [g for g in gotchas if g not in seen]
    if lines and missing:
        out.append("no G-line for " + ", ".join(f"G{g}" for g in missing))
    for test in tests:
        meta = test.get("metadata") if isinstance(test, dict) else None
        gotcha = meta.get("gotcha") if isinstance(meta, dict) else None
        if isinstance(gotcha, dict) and gotcha.get("status") == "SKIP" and not str(gotcha.get("summary", "")).strip():
            out.append(f"{test.get('nodeid')} skipped without a reason")
    return out


def _gotchas(text: str) -> list[int]:
    """``1-10``, ``1,9`` -> gotcha numbers."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        first, last = _gotcha(low), _gotcha(high or low)  # each end checked before a range is made of them
        out.extend(range(first, last + 1))
    if not out:
        raise ValueError(text)
    return out


def _gotcha(text: str) -> int:
    if not text.strip().isdigit() or len(text.strip()) > 2 or int(text) not in range(1, 11):
        raise ValueError(text)
    return int(text)


def main(argv: Optional[list[str]] = None) -> int:
    parser = outward.ArgumentParser(prog="python -m spark_gotchas check-report", description=__doc__.split("\n\n")[0],
                                    epilog="exit 0: the report is whole; 1: it is not (missing, unreadable, not "
                                           "JSON, no tests, a gotcha without a line); 2: a usage error")
    parser.add_argument("report", help="the JSON report (pytest --json-report-file=PATH)")
    parser.add_argument("--gotchas", default="1-10", help="gotchas that must each have a line, e.g. 1-10 or 1,9")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing when the report is whole")
    args = parser.parse_args(argv)
    try:
        wanted = _gotchas(args.gotchas)
    except ValueError:
        parser.error(f"--gotchas {args.gotchas!r}: give gotcha numbers 1-10, e.g. 1-10 or 1,9")
    try:
        report = bounded_read.read_json(args.report, bounded_read.REPORT)
    except (OSError, bounded_read.Refused) as exc:
        why = f"is {exc}" if isinstance(exc, bounded_read.Refused) else f"cannot be read: {exc.strerror or exc}"
        outward.say(f"check-report: {args.report} {why}: no JSON report to check", err=True)
        return 1
    found = problems(report, wanted)
    outward.say(*(f"check-report: {args.report}: {problem}" for problem in found), err=True)
    if not found and not args.quiet:
        tests = len(report["tests"])
        outward.say(f"{args.report}: {tests} tests, a G-line for each of " + ", ".join(f"G{g}" for g in wanted))
    return 1 if found else 0
