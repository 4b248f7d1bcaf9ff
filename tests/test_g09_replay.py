"""G9 end to end: recorded containers (tests/fixtures/g09/*.json snapshots) replayed through the real
plugin and checks give the lines a user of that container needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gline_block import glines

ROOT = Path(__file__).resolve().parents[1]
G09 = Path(__file__).parent / "fixtures" / "g09"
H200 = Path(__file__).parent / "fixtures" / "h200" / "preflight-snapshot.json"
NGC_RUN = "docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864"
NO_BASELINE = "; not checked: baseline"  # its reason does not fit in the line: -rs and the report give it


def replay(tmp_path: Path, snapshot: Path) -> tuple[list[str], dict[str, dict]]:
    """The G9 lines a replay prints, and each check's verdict from the JSON report."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider", "--spark-replay", str(snapshot),
         "--json-report", f"--json-report-file={report}", "tests_gotchas/test_g09_container.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    checks = {t["nodeid"].split("::")[-1]: t["metadata"]["gotcha"]
              for t in json.loads(report.read_text())["tests"] if "gotcha" in t.get("metadata", {})}
    return glines(proc.stdout, (9,)), checks


def line(check: dict) -> str:
    return f"G9 {check['status']}: {check['summary']}"


def test_a_python_image_with_pip_torch_is_bare_pip_in_a_container(tmp_path):
    lines, checks = replay(tmp_path, G09 / "python312_pip_torch.json")
    assert line(checks["test_g9_container_and_consistency"]) == (
        "G9 WARN: not an NGC or Unsloth container (/.dockerenv); bare pip: torch 2.9.1")
    assert checks["test_g9_container_and_consistency"]["detail"] == "a container: /.dockerenv, overlay root filesystem"
    assert checks["test_g9_container_and_consistency"]["fix"].startswith(
        "run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container (unsloth/unsloth)")
    assert line(checks["test_g9_shm_and_ulimits"]) == (
        "G9 WARN: container started without NGC's flags: /dev/shm 64 MiB, memlock 8 MiB, stack 8 MiB")
    assert lines[0] == "G9 WARN: not an NGC or Unsloth container (/.dockerenv); bare pip: torch 2.9.1 (+1 more WARN)"
    assert len(lines[0]) <= 120 and [x[:9] for x in lines[1:]] == ["    fix: "] * 2


def test_ngc_started_without_its_flags_passes_the_image_and_warns_with_the_flags(tmp_path):
    lines, checks = replay(tmp_path, G09 / "ngc_pytorch_default_flags.json")
    assert line(checks["test_g9_container_and_consistency"]) == "G9 PASS: NGC PyTorch 25.10: every requirement met"
    assert checks["test_g9_container_and_consistency"]["detail"] == (
        "NGC PyTorch 25.10 (build 222161059); 4 distributions, every declared requirement met")
    start = checks["test_g9_shm_and_ulimits"]
    assert line(start) == "G9 WARN: container started without NGC's flags: /dev/shm 64 MiB, memlock 8 MiB, stack 8 MiB"
    assert start["fix"] == (
        f"start the container with {NGC_RUN} IMAGE (missing here: --ipc=host (or --shm-size=16g), "
        "--ulimit memlock=-1, --ulimit stack=67108864): a 64 MiB /dev/shm makes DataLoader workers die with a bus "
        "error; a capped memlock makes NCCL over RDMA (two Sparks, G10) fail in ibv_reg_mr")
    assert lines == [line(start), f"    fix: {start['fix']}"]


def test_ngc_started_right_passes(tmp_path):
    lines, checks = replay(tmp_path, G09 / "ngc_pytorch_started_right.json")
    assert line(checks["test_g9_shm_and_ulimits"]) == (
        "G9 PASS: container started with room: /dev/shm 60.8 GiB, memlock unlimited, stack 64 MiB")
    assert lines == ["G9 PASS: NGC PyTorch 25.10: every requirement met (+1 more PASS)" + NO_BASELINE]
    assert checks["test_g9_container_and_consistency"]["detail"] == (
        "NGC PyTorch 25.10 (build 222161059); 4 distributions, every declared requirement met")


def test_unsloths_image_passes_by_name(tmp_path):
    lines, checks = replay(tmp_path, G09 / "unsloth_image.json")
    assert line(checks["test_g9_container_and_consistency"]) == "G9 PASS: Unsloth 2026.5.1 image: every requirement met"
    assert checks["test_g9_container_and_consistency"]["detail"] == (
        "Unsloth image (unsloth 2026.5.1); 5 distributions, every declared requirement met")
    assert line(checks["test_g9_shm_and_ulimits"]) == (
        "G9 PASS: container started with room: /dev/shm 60.8 GiB, memlock unlimited, stack 64 MiB")
    assert lines[0].startswith("G9 PASS: Unsloth 2026.5.1 image: every requirement met (+1 more PASS)")


def test_the_h200_machines_cuda_base_image_is_bare_pip_and_its_old_snapshot_did_not_record_the_limits(tmp_path):
    """The lent H200 machine runs nvidia/cuda 13.0.2 (NVIDIA_PRODUCT_NAME=CUDA) with torch from pip: bare pip
    inside a container. Its snapshot predates the /dev/shm and ulimit fields: the start check says so."""
    lines, checks = replay(tmp_path, H200)
    assert line(checks["test_g9_container_and_consistency"]) == (
        "G9 WARN: not an NGC or Unsloth container (nvidia/cuda 13.0.2); bare pip: torch 2.11.0")
    assert checks["test_g9_container_and_consistency"]["detail"] == (
        "a container: NVIDIA image variables (NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME), /.dockerenv")
    assert line(checks["test_g9_shm_and_ulimits"]) == (
        "G9 SKIP: /dev/shm and ulimits not recorded (a snapshot of an older suite)")
    assert lines[0] == line(checks["test_g9_container_and_consistency"])


@pytest.mark.parametrize("name", ["python312_pip_torch.json", "ngc_pytorch_default_flags.json",
                                  "ngc_pytorch_started_right.json", "unsloth_image.json"])
def test_each_fixture_is_a_snapshot_with_the_readings_g9_needs(name):
    from spark_gotchas.base.serial import from_jsonable
    from spark_gotchas.knowledge.readings.env import ContainerEvidence, Distributions
    from spark_gotchas.machine.snapshot import load

    snap = load(G09 / name)
    ev = from_jsonable(ContainerEvidence, snap.readings["env.container"])
    assert ev.shm_bytes and ev.memlock and ev.stack and ev.python_prefix
    assert from_jsonable(Distributions, snap.readings["env.distributions"]).versions["torch"]
