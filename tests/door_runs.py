"""A replay through the real plugin with its doors open: the G-lines printed, the JUnit XML
(``--junitxml``), the Prometheus metrics (``--spark-prometheus``) and the JSON report, as a CI job
or a node's cron job writes them."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gline_block import GLINE, glines

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
VLLM = REPO / "tests" / "fixtures" / "live_state" / "spark-vllm-0.9-plan-40gb.json"  # G3 and G6 FAIL, G4 and G5 WARN
XSD = REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"


@dataclass
class Doors:
    returncode: int
    stdout: str
    stderr: str
    junit: Path
    metrics: Path
    report: dict[str, Any]

    @property
    def lines(self) -> list[str]:
        """The G-lines and fix lines printed under the spark-gotchas separator."""
        return glines(self.stdout)

    @property
    def statuses(self) -> dict[str, str]:
        """Each printed gotcha's status: {"G5": "PASS", …}."""
        return {m.group(0).split()[0]: m.group(2) for m in map(GLINE.match, self.lines) if m}


def replay(snapshot: Path, tmp_path: Path, *args: str, junit: bool = True, metrics: bool = True) -> Doors:
    """``pytest -m fast --spark-replay SNAPSHOT`` from the checkout with every door written under ``tmp_path``."""
    junit_path, metrics_path, report = tmp_path / "junit.xml", tmp_path / "spark.prom", tmp_path / "report.json"
    doors = ([f"--junitxml={junit_path}"] if junit else []) + ([f"--spark-prometheus={metrics_path}"] if metrics else [])
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider",
                          f"--spark-replay={snapshot}", "--json-report", f"--json-report-file={report}", *doors, *args],
                         cwd=REPO, capture_output=True, text=True, timeout=180)
    assert "Traceback" not in run.stdout + run.stderr, run.stdout[-3000:] + run.stderr[-2000:]
    data = json.loads(report.read_text()) if report.exists() else {}
    return Doors(run.returncode, run.stdout, run.stderr, junit_path, metrics_path, data)


def from_folder(folder: Path) -> Doors:
    """A run made elsewhere (devscripts/doors.sh on a GPU machine): its printed output in
    ``stdout.txt``, its exit status in ``exit.txt``, and the documents beside them."""
    report = folder / "report.json"
    return Doors(int((folder / "exit.txt").read_text()), (folder / "stdout.txt").read_text(), "",
                 folder / "junit.xml", folder / "spark.prom", json.loads(report.read_text()) if report.exists() else {})


@pytest.fixture(scope="module", name="h200")
def h200_doors(tmp_path_factory) -> Doors:
    """The recorded H200 preflight replayed with every door: all PASS and INFO but G9 WARN."""
    return replay(H200, tmp_path_factory.mktemp("h200"))


@pytest.fixture(scope="module", name="vllm")
def vllm_doors(tmp_path_factory) -> Doors:
    """A Spark with vLLM at its default 0.9 beside a 40 GB plan: G3 and G6 FAIL, G4 and G5 WARN."""
    return replay(VLLM, tmp_path_factory.mktemp("vllm"))
