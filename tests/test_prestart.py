"""The spark-gotchas command starts the GPU worker's torch import before pytest itself is imported,
and the run takes that worker over: one worker, started before the run was configured."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_gotchas.commands import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args, early", [
    (["-m", "fast"], True),
    (["-m", "fast", "--spark-replay", "x.json"], False),
    (["-m", "fast", "--spark-replay=x.json"], False),
    (["--collect-only", "-q"], False),
    (["-m", "fast", "--help"], False),
])
def test_the_command_starts_torch_early_only_for_a_live_run(args, early, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "torch" else None)
    assert cli.needs_torch_early(args) is early


def test_the_head_start_part_early_import_turns_it_off(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "torch" else None)
    monkeypatch.setenv("SPARK_GOTCHAS_HEADSTART", "-early_import")
    assert cli.needs_torch_early(["-m", "fast"]) is False


def test_no_torch_no_early_worker(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert cli.needs_torch_early(["-m", "fast"]) is False


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (the worker imports it)")
def test_the_run_adopts_the_worker_the_command_started(tmp_path):
    report = tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-k", "g01 or g02", "-q",
                          "--json-report", f"--json-report-file={report}"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode in (0, 1) and "Traceback" not in run.stdout + run.stderr, run.stdout + run.stderr
    worker = json.loads(report.read_text())["spark_gotchas"]["timing"]["worker"]
    assert len(worker["worker_starts_s"]) == 1 and worker["worker_starts_s"][0] < 0  # before pytest configured
    assert worker["preload_s"].get("torch") is not None
