"""A real H200 preflight, recorded with --spark-snapshot, replays here to the lines it printed there."""

import json
import subprocess
import sys
from pathlib import Path

from gline_block import glines

from spark_gotchas.knowledge.verdict import Status, Verdict, summary_lines

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"


def recorded_lines() -> list[str]:
    data = json.loads(SNAPSHOT.read_text())
    verdicts = [Verdict(int(v["id"][1:]), Status(v["status"]), v["summary"], v["fix"], check=v.get("check", ""))
                for v in data["verdicts"]]
    # a check added since the recording, judged from the recorded NVML and torch readings
    verdicts.insert(3, Verdict(1, Status.PASS, "NVML sees 1 GPU(s) (NVIDIA H200); torch sees 1"))
    return [line for line in summary_lines(verdicts) if line.startswith("G")]


# Judged anew since that run: the machine's image is nvidia/cuda 13.0.2 (NVIDIA_PRODUCT_NAME=CUDA) with torch
# from pip, bare pip inside a container, where G9 said "PASS: container (NVIDIA image variables …)".
G9_NOW = ["G9 WARN: not an NGC or Unsloth container (nvidia/cuda 13.0.2); bare pip: torch 2.11.0",
          "    fix: run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container (unsloth/unsloth); "
          "if bare pip is unavoidable, follow NVIDIA's install order and install Unsloth with --no-deps"]


def expected_lines() -> list[str]:
    return [new for line in recorded_lines() for new in (G9_NOW if line.startswith("G9 ") else [line])]


def finding(line: str) -> str:
    """A G-line without its "; not checked: …" tail (this snapshot predates the checks' names)."""
    return line.split("; not checked: ")[0]


# The lines this snapshot replays to now: each finding in 100 columns, the rest in its detail.
H200_LINES = [
    "G1 PASS: torch 2.11.0+cu130 (CUDA 13.0) matches the driver's CUDA 13.0 (+3 more PASS)",
    "G2 PASS: flash-attn is not installed: attention uses torch SDPA, the right choice on bare pip",
    "G3 PASS: page cache 3.1 GB is host memory only: the NVIDIA H200 has its own (+1 more PASS)",
    "G4 PASS: 1515 MHz under load (floor 990), 667 TFLOP/s, no throttling; not checked: last soak",
    "G5 PASS: read 4614, copy 4230 GB/s: at or above H200's measured range; not checked: decode ceiling",
    "G6 PASS: no other GPU workload among NVML's processes and 177 command lines",
    "G7 INFO: SM90 (NVIDIA H200), not SM121: no FP4 kernel library installed (+1 more INFO)",
    "G8 INFO: no playbook named (--spark-playbook NAME lists its open issues)",
    *G9_NOW,
    "G10 INFO: no launch config given (--spark-launch-config PATH)",
]


def test_h200_snapshot_replays_to_the_lines_of_the_live_run():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider", "--spark-replay", str(SNAPSHOT)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    printed = glines(run.stdout)  # the block under the spark-gotchas separator, not the warnings above it
    assert printed == H200_LINES, run.stdout[-3000:]
    assert [line.split(":")[0] for line in printed if line[:1] == "G"] == [
        "G1 PASS", "G2 PASS", "G3 PASS", "G4 PASS", "G5 PASS", "G6 PASS", "G7 INFO", "G8 INFO", "G9 WARN", "G10 INFO"]
    assert "Traceback" not in run.stdout + run.stderr
    assert run.returncode == 0
