"""Run the workflow's own preflight step here, once per test session, and keep what it wrote.

The step's shell text is taken from .github/workflows/spark-preflight.yml and run as the
runner would run it (GitHub's bash options, the job's variables set, ``$GITHUB_STEP_SUMMARY`` a file), so
the tests check the commands the workflow really runs. Its report and snapshot are real
documents of this machine, which the diff and summary tests reuse.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "spark-preflight.yml"
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)


def workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    if True in data and "on" not in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def job() -> dict[str, Any]:
    (only,) = workflow()["jobs"].values()
    return only


def step(name_prefix: str) -> dict[str, Any]:
    (found,) = [s for s in job()["steps"] if str(s.get("name", "")).startswith(name_prefix)]
    return found


def shell_text(script: str) -> str:
    """A step's script with ``${{ … }}`` expressions replaced by a plain word, for bash."""
    return EXPRESSION.sub("EXPR", script)


@dataclass
class CiRun:
    returncode: int
    output: str
    reports: Path
    summary: Path

    @property
    def report(self) -> Path:
        return self.reports / "report.json"

    @property
    def snapshot(self) -> Path:
        return self.reports / "snapshot.json"


def plain_job_env() -> dict[str, str]:
    """The job's variables that hold no ``${{ … }}`` expression, as the runner sets them (SOAK_MAX_MINUTES …)."""
    return {k: str(v) for k, v in job()["env"].items() if not EXPRESSION.search(str(v))}


BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]  # GitHub's default shell on Linux


def run_step(name_prefix: str, base: Path, cwd: Path = ROOT, environ: dict[str, str] | None = None,
             **env_overrides: str) -> CiRun:
    """Run one step of the job as the runner would: its shell, the job's variables, a summary file.
    ``environ``: the runner's own environment (default: this process's)."""
    bindir = base / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    if not (bindir / "python3").exists():  # this interpreter by its own path: a venv's finds its pyvenv.cfg
        (bindir / "python3").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        (bindir / "python3").chmod(0o755)
    reports = base / "reports"
    reports.mkdir(exist_ok=True)
    summary = base / "step_summary.md"
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if not k.startswith("PYTEST_")}
    env.update(plain_job_env())
    env.update({
        "PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}",
        "MODE": "preflight", "REPORTS": str(reports), "GITHUB_STEP_SUMMARY": str(summary), "STRICT_FLAG": "",
        "EXTRA_ARGS": "-p no:hypothesispytest", "SOAK_DURATION": "20s", "PYTHONUNBUFFERED": "1",
    })
    env.update(env_overrides)
    proc = subprocess.run([*BASH, shell_text(step(name_prefix)["run"])], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    return CiRun(proc.returncode, proc.stdout + proc.stderr, reports, summary)


def fresh_dir() -> Path:
    base = Path(tempfile.mkdtemp(prefix="spark-ci-"))
    atexit.register(shutil.rmtree, base, True)
    return base


@functools.cache
def preflight() -> CiRun:
    """The workflow's preflight step on this machine (live), once per session."""
    return run_step("Preflight (", fresh_dir())


@functools.cache
def replayed_as_gb10() -> Path:
    """That snapshot replayed as if on a Spark (--spark-profile=gb10) about to load 400 GB of weights: a
    second real run that judges worse on any machine (G3's headroom, whatever else the Spark profile finds)."""
    out = fresh_dir() / "gb10.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "fast", "-q", "-p", "no:hypothesispytest",
         f"--spark-replay={preflight().snapshot}", "--spark-profile=gb10", "--spark-model-gb=400",
         f"--spark-snapshot={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return out
