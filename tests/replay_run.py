"""Replay a snapshot through the real plugin and checks, as a user would from the checkout
(``python -m pytest -m fast --spark-replay ...``), and read its lines, checks and details."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gline_block import glines

REPO = Path(__file__).resolve().parents[1]


class Replay:
    def __init__(self, stdout: str, report: dict):
        self.stdout = stdout
        self.lines = glines(stdout)
        self.platform = report["spark_gotchas"]["platform"]
        gotchas = [t["metadata"]["gotcha"] for t in report["tests"] if "gotcha" in t.get("metadata", {})]
        self.checks = [f"{g['id']} {g['status']}: {g['summary']}" for g in gotchas]
        # each check's line beside its detail (what -v shows after the line), for the facts the line leaves out
        self.details = [(line, g.get("detail", "")) for line, g in zip(self.checks, gotchas, strict=True)]

    def detail(self, line: str) -> str:
        """The detail of the one check whose line (without its tail) is ``line``."""
        found = [detail for check, detail in self.details if line.startswith(check)]
        assert len(found) == 1, (line, self.details)
        return found[0]

    def of(self, gotcha: int) -> list[str]:
        """The summary line of a gotcha and its fix lines."""
        out, keep = [], False
        for line in self.lines:
            if line.startswith("G"):
                keep = line.startswith(f"G{gotcha} ")
            if keep:
                out.append(line)
        return out


def replay(snapshot: Path, tmp_path: Path, *args: str) -> Replay:
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider", "--spark-replay",
                          str(snapshot), "--json-report", f"--json-report-file={report}", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in run.stdout + run.stderr, run.stdout[-3000:] + run.stderr[-2000:]
    return Replay(run.stdout, json.loads(report.read_text()))
