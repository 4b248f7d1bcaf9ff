"""A real H200 preflight, recorded with --spark-snapshot, replays here to the lines it printed there."""

import json
import subprocess
import sys
from pathlib import Path

from spark_gotchas.verdict import Status, Verdict, summary_lines

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"


def recorded_lines() -> list[str]:
    data = json.loads(SNAPSHOT.read_text())
    verdicts = [Verdict(int(v["id"][1:]), Status(v["status"]), v["summary"], v["fix"], check=v.get("check", ""))
                for v in data["verdicts"]]
    return [line for line in summary_lines(verdicts) if line.startswith("G")]


def finding(line: str) -> str:
    """A G-line without its "; not checked: …" tail (this snapshot predates the checks' names)."""
    return line.split("; not checked: ")[0]


def test_h200_snapshot_replays_to_the_lines_of_the_live_run():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider", "--spark-replay", str(SNAPSHOT)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    printed = [line for line in run.stdout.splitlines() if line[:1] == "G" and ": " in line]
    assert [finding(line) for line in printed] == [finding(line) for line in recorded_lines()], run.stdout[-3000:]
    assert printed[3].endswith("; not checked: last soak ended (nothing to check for a reboot)")
    assert [line.split(":")[0] for line in printed] == [
        "G1 PASS", "G2 PASS", "G3 PASS", "G4 PASS", "G5 PASS", "G6 PASS", "G7 INFO", "G8 INFO", "G9 PASS", "G10 INFO"]
    assert "Traceback" not in run.stdout + run.stderr
    assert run.returncode == 0
