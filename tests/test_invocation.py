"""How the preflight is started from a checkout: an option's path with a space, other plugins.

Each run is a real ``python -m pytest -m fast`` in a subprocess, judged by what a user sees: the
rootdir and config file pytest names, the test ids, the G-lines, the exit code, the files left
behind.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gline_block import glines

ROOT = Path(__file__).resolve().parents[1]
H200_SNAPSHOT = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")


def run_pytest(*args: str, cwd: Path, extra_env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def ten_lines(proc: subprocess.CompletedProcess) -> list[str]:
    out = proc.stdout + proc.stderr
    lines = [line for line in glines(proc.stdout) if GLINE.match(line)]
    assert [int(GLINE.match(line).group(1)) for line in lines] == list(range(1, 11)), out[-4000:]
    assert proc.returncode == (1 if any(" FAIL: " in line for line in lines) else 0), out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    return glines(proc.stdout)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def runs(tmp_path) -> Path:
    """A folder outside the checkout holding a recorded snapshot, as ~/runs would."""
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(H200_SNAPSHOT, folder / "spark1.json")
    return folder


@pytest.mark.parametrize("how", ["space", "equals", "PYTEST_ADDOPTS"])
def test_a_replay_outside_the_checkout_keeps_the_suites_configuration(runs, how):
    snapshot = str(runs / "spark1.json")
    words = {"space": ["--spark-replay", snapshot], "equals": [f"--spark-replay={snapshot}"], "PYTEST_ADDOPTS": []}[how]
    env = {"PYTEST_ADDOPTS": f"--spark-replay {snapshot}"} if how == "PYTEST_ADDOPTS" else None
    proc = run_pytest("-m", "fast", "-v", *words, cwd=ROOT, extra_env=env)
    assert f"rootdir: {ROOT}\n" in proc.stdout and "configfile: pyproject.toml" in proc.stdout, proc.stdout[:2000]
    ids = [line.split(" ")[0] for line in proc.stdout.splitlines() if "::test_g" in line and line.startswith(("t", "."))]
    assert ids and all(i.startswith("tests_gotchas/test_g") for i in ids), ids
    assert ten_lines(proc)[0].startswith("G1 ")
    assert listing(runs) == ["spark1.json"], "the run wrote beside the snapshot (a .pytest_cache?)"


def test_a_launch_config_given_with_a_space_outside_the_checkout(tmp_path):
    """Any option's value that names an existing file, not only the snapshot's."""
    config = tmp_path / "launch" / "accelerate.yaml"
    config.parent.mkdir()
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    proc = run_pytest("-m", "fast", "-k", "g10", "--spark-launch-config", str(config), cwd=ROOT)
    assert f"rootdir: {ROOT}\n" in proc.stdout, proc.stdout[:2000]
    assert "accelerate.yaml" in "\n".join(glines(proc.stdout, (10,)))
    assert listing(config.parent) == ["accelerate.yaml"]


needs_cov = pytest.mark.skipif(importlib.util.find_spec("pytest_cov") is None, reason="needs pytest-cov (the test extra)")
needs_xdist = pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="needs pytest-xdist (the test extra)")


@needs_cov
def test_a_users_coverage_options_do_not_break_the_preflight(tmp_path, runs):
    proc = run_pytest("-m", "fast", "--spark-replay", str(runs / "spark1.json"), cwd=ROOT,
                      extra_env={"PYTEST_ADDOPTS": "--cov=spark_gotchas --cov-report=term",
                                 "COVERAGE_FILE": str(tmp_path / ".coverage")})
    ten_lines(proc)
    assert re.search(r"^TOTAL\s+\d+", proc.stdout, re.MULTILINE), proc.stdout[-3000:]


@needs_xdist
@pytest.mark.parametrize("words", [["-n", "2"], ["-p", "xdist"]])
def test_xdist_leaves_the_checks_in_one_process(runs, words):
    proc = run_pytest("-m", "fast", *words, "--spark-replay", str(runs / "spark1.json"), cwd=ROOT)
    ten_lines(proc)
    if "-n" in words:
        assert "spark-gotchas: -n 2 ignored: the checks run in one process" in proc.stderr
