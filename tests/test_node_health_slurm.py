"""``spark-gotchas node-health`` run by Slurm's own daemons (Debian's slurm-wlm and munge): the scenes of
devscripts/slurm_health.sh on a throwaway loopback cluster, read from its transcript. Skipped where
the daemons are not installed or cannot be started (not root, no UTS namespaces): CI has neither."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "devscripts" / "slurm_health.sh"
TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "squeue", "scancel", "unshare", "flock")
G4 = "spark-gotchas: G4 FAIL: SM clock 600 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state"


def _why_not() -> str:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"needs Slurm's daemons and munge (apt-get install slurm-wlm munge): {', '.join(missing)} not found"
    if os.geteuid() != 0:
        return "needs root: the throwaway slurmctld, slurmd and munged run as root"
    if subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0:
        return "needs UTS namespaces (unshare --uts): each slurmd gets its node's host name"
    return ""


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "runs")


def free_ports(count: int = 8) -> int:
    """A first port with ``count`` free ports after it (slurmctld, and slurmd from the first + 4)."""
    for base in range(21000 + os.getpid() % 2000 * 8, 60000, 97):
        try:
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("slurm-health")
    env = {**os.environ, "SLURM_HEALTH_DIR": str(folder / "run"), "SLURM_CTLD_PORT": str(free_ports()),
           "INTERVAL": "2", "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    parts = re.split(r"^\+ scene (\d): ", run.stdout, flags=re.M)
    return {number: text for number, text in zip(parts[1::2], parts[2::2], strict=True)}


def test_a_failing_node_is_drained_with_its_line_and_the_others_stay_up(scenes):
    one = scenes["1"]
    assert "spark-gotchas: G4 FA root " in one  # sinfo -R: its first 20 characters
    assert "spark-gotchas: G4 FAIL: SM clock 600 MHz under load, below t root      fleet2" in one
    assert "fleet1 idle\nfleet2 drained\nfleet3 idle\n" in one
    assert f"node-health: fleet2: drained: {G4}\nexit 1" in one
    assert "node-health: fleet1: healthy: no FAIL\nexit 0" in one  # its G9 WARN never drains


def test_an_operators_drain_is_left_as_it_is(scenes):
    two = scenes["2"]
    assert "operator: replace the fan                                    root      fleet3" in two
    assert ("node-health: fleet3: left as it is (IDLE+DRAIN): its reason is not ours: operator: replace the fan; "
            f"found: {G4}\nexit 1") in two


def test_the_node_comes_back_once_healthy(scenes):
    three = scenes["3"]
    assert f"node-health: fleet2: undrained: no FAIL now (was: {G4})\nexit 0" in three
    assert "fleet1 idle\nfleet2 idle\nfleet3 drained\n" in three
    assert "fleet2" not in three.split("+ sinfo -R -o")[1].split("+ ")[0]  # no longer in sinfo -R


def test_a_prolog_that_fails_drains_with_its_own_reason_and_the_job_waits(scenes):
    four = scenes["4"]
    assert "spark-gotchas: G4 FAIL: SM clock 600 MHz under load, below t root      fleet1" in four
    assert "Prolog error" not in four  # Slurm's own drain after the failed prolog keeps the reason set first
    assert re.search(r"^ +\d+ +prolog-fails +PENDING launch failed requeued held$", four, re.M)
    prolog = four.split("+ fleet1's last prolog_slurmd pass")[1].split("\n+ ")[0]
    assert "\n== prolog_slurmd fail.json\n" in prolog and prolog.endswith(f"node-health: fleet1: drained: {G4}\nexit 1")
    assert f"node-health: fleet1: undrained: no FAIL now (was: {G4})\nexit 0" in four  # its next health check


def test_a_node_with_a_job_is_left_unchecked(scenes):
    assert ("node-health: fleet1: not checked: jobs on the node (ALLOCATED); the checks would load the GPU under "
            "them and judge their processes as contention\nexit 0") in scenes["5"]


def test_by_hand_wrong_inputs(scenes):
    six = scenes["6"]
    assert ("Reason=spark-gotchas: G1 FAIL: NVML sees 1 GPU(s) but torch sees none: "
            "CUDA_VISIBLE_DEVICES='GPU-\\x1b[2J\\x0d\\x07\"; State=RESUME' hides it [root@") in six
    assert "\x1b" not in six and "ghp_" not in six
    unreachable = "node-health: fleet1: cannot read the node from slurmctld: scontrol show did not answer within 5 s " \
                  "(killed): is slurmctld up?; "
    assert re.search(re.escape(unreachable + "the checks still decide whether the job starts") + r"\n.*\n"
                     + re.escape(f"node-health: fleet1: unhealthy: {G4}") + r"\n\+ exit 1 after [\d.]+ s", six)
    assert re.search(re.escape(unreachable + "nothing checked") + r"\n\+ exit 2 after [\d.]+ s", six)
    assert ("node-health: fleet1: cannot read the node from slurmctld: scontrol not found (give its path with "
            "--scontrol, or set PATH); nothing checked\n+ exit 2") in six
    assert "spark-gotchas node-health: 'fleet[1-3]' is not one node's name (letters, digits, '.', '_', '-'; no list " \
           "or range)\n+ exit 2" in six
    assert re.search(r"node-health: fleet1: drained: spark-gotchas: no verdict: the checks did not finish within \d+ s "
                     r"\(killed with all they started\)\n\+ exit 1 after [\d.]+ s\n\+ the sleeper \d+ \(a session of "
                     r"its own under the checks\) is gone", six)
    assert six.rstrip().endswith("+ done")
