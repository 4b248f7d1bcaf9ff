"""The preflight in a pid namespace of its own (``unshare --pid --fork --mount-proc``, as a container
started without ``--pid=host``), beside a process outside it, on an NVML stood in for by a fake
``pynvml`` (this machine has no GPU): a fake H100 that lists the outside process under its pid
from the host's side, or lists no pid while its own figures say busy. What is real here is the
namespace: the outside pid is not in the namespace's /proc, and psutil, the reader and the judges
meet it as they would in a container. Then the same snapshot replayed outside the namespace, with
no fake, gives the same lines.

Needs root and util-linux's unshare; skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gline_block import glines

ROOT = Path(__file__).resolve().parents[1]
UNSHARE = shutil.which("unshare")


def _namespaces_work() -> bool:
    if UNSHARE is None or os.geteuid() != 0:
        return False
    run = subprocess.run([UNSHARE, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30)
    return run.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="needs root and unshare --pid --fork --mount-proc")

FAKE_PYNVML = textwrap.dedent('''
    """A fake H100 for the pid-namespace test: its process list and figures come from the environment."""
    import json
    import os
    from types import SimpleNamespace


    class NVMLError(Exception):
        pass


    class NVMLError_NotSupported(NVMLError):
        def __init__(self):
            super().__init__("Not Supported")


    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1
    DEVICE = json.loads(os.environ["FAKE_NVML_DEVICE"])
    TOTAL = 85_520_809_984


    def nvmlInit():
        pass


    def nvmlSystemGetDriverVersion():
        return "580.95.05"


    def nvmlSystemGetCudaDriverVersion():
        return 13000


    def nvmlDeviceGetCount():
        return 1


    def nvmlDeviceGetHandleByIndex(index):
        return "h0"


    def nvmlDeviceGetIndex(handle):
        return 0


    def nvmlDeviceGetName(handle):
        return "NVIDIA H100 80GB HBM3"


    def nvmlDeviceGetUUID(handle):
        return "GPU-6b1a3f0e-0000-0000-0000-000000000000"


    def nvmlDeviceGetCudaComputeCapability(handle):
        return (9, 0)


    def nvmlDeviceGetComputeRunningProcesses(handle):
        listed = [item.split(":") for item in os.environ.get("FAKE_NVML_PROCS", "").split(",") if item]
        return [SimpleNamespace(pid=int(pid), usedGpuMemory=int(held)) for pid, held in listed]


    def nvmlDeviceGetGraphicsRunningProcesses(handle):
        return []


    def nvmlDeviceGetMemoryInfo(handle, version=None):
        used, reserved = DEVICE["used"], 567_279_616
        if version:
            return SimpleNamespace(total=TOTAL, reserved=reserved, used=used, free=TOTAL - used - reserved)
        return SimpleNamespace(total=TOTAL, used=used + reserved, free=TOTAL - used - reserved)


    def nvmlDeviceGetUtilizationRates(handle):
        return SimpleNamespace(gpu=DEVICE["util"], memory=0)


    def nvmlDeviceGetPowerUsage(handle):
        return DEVICE["power_mw"]


    def nvmlDeviceGetEnforcedPowerLimit(handle):
        return 700_000


    def nvmlDeviceGetClockInfo(handle, kind):
        return DEVICE["sm_mhz"] if kind == NVML_CLOCK_SM else 2619


    def nvmlDeviceGetMaxClockInfo(handle, kind):
        return 1980 if kind == NVML_CLOCK_SM else 2619


    def nvmlDeviceGetMemoryBusWidth(handle):
        return 5120


    def nvmlDeviceGetTemperature(handle, kind):
        return DEVICE["temp_c"]


    def nvmlDeviceGetTemperatureThreshold(handle, kind):
        return 87 if kind == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN else 92


    def nvmlDeviceGetCurrentClocksEventReasons(handle):
        return 0x4 if DEVICE["util"] else 0x1


    def nvmlDeviceGetViolationStatus(handle, policy):
        return SimpleNamespace(referenceTime=0, violationTime=0)


    def __getattr__(name):
        if name.startswith("nvml"):
            def not_supported(*args):
                raise NVMLError_NotSupported()
            return not_supported
        raise AttributeError(name)
''')
BUSY = {"util": 100, "power_mw": 700_800, "sm_mhz": 1395, "temp_c": 76, "used": 935_329_792}  # a bf16 GEMM loop
HOLDING = {"util": 0, "power_mw": 72_400, "sm_mhz": 345, "temp_c": 33, "used": 22_532_676_608}  # an idle 22 GB holder
CHECKS = "g6 or clocks_at_rest"  # the checks of the machine at rest: no GPU work is needed


@pytest.fixture
def fake_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "fake"
    folder.mkdir()
    (folder / "pynvml.py").write_text(FAKE_PYNVML)
    return folder


def in_namespace(tmp_path: Path, fake_dir: Path, device: dict, script: str) -> tuple[list[str], dict]:
    """Run ``script`` (sh) as pid 1 of a new pid namespace with its own /proc; ``$PREFLIGHT`` in it is
    the preflight's command. Returns its G4 and G6 lines and its JSON report."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_", "FAKE_NVML"))}
    env.update(PYTHONPATH=str(fake_dir), FAKE_NVML_DEVICE=json.dumps(device), HOME=str(tmp_path),
               PREFLIGHT=shlex.join([sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider", "-k", CHECKS,
                                     "--json-report", f"--json-report-file={report}",
                                     f"--spark-snapshot={tmp_path / 'snap.json'}"]))
    run = subprocess.run([UNSHARE, "--pid", "--fork", "--mount-proc", "sh", "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=180)
    out = run.stdout + run.stderr
    assert "Traceback" not in out and run.returncode in (0, 1), out[-3000:]
    return glines(run.stdout, (4, 6)), json.loads(report.read_text())


def replayed(tmp_path: Path) -> list[str]:
    """The namespace run's snapshot judged again here: no namespace, no fake NVML."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider", "-k", CHECKS,
                          "--spark-replay", str(tmp_path / "snap.json")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    return glines(run.stdout, (4, 6))


@pytest.fixture
def outside():
    """A process outside the namespace the preflight will run in (its pid is the host's)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_process_nvml_lists_under_a_pid_this_namespace_cannot_map_is_named_outside_the_container(
        tmp_path, fake_dir, outside):
    lines, report = in_namespace(tmp_path, fake_dir, HOLDING, f"export FAKE_NVML_PROCS={outside}:22532676608; eval exec \"$PREFLIGHT\"")
    assert "G6 WARN: another process outside this container uses the GPU: 1 pid NVML lists is not visible here" \
        in lines
    g6 = next(t["metadata"]["gotcha"] for t in report["tests"] if t["metadata"].get("gotcha", {}).get("id") == "G6")
    assert g6["detail"].startswith(f"pid {outside} outside this container (0% busy, 72.4 W of 700 W at rest; holds "
                                   "22.5 GB)")
    assert replayed(tmp_path) == lines


def test_the_same_process_inside_the_namespace_is_named_by_its_pid_and_program(tmp_path, fake_dir):
    lines, _ = in_namespace(tmp_path, fake_dir, HOLDING,
                            'sleep 300 & export FAKE_NVML_PROCS="$!:22532676608"; eval "$PREFLIGHT"; status=$?; kill $!; exit $status')
    g6 = [line for line in lines if line.startswith("G6 ")]
    assert len(g6) == 1 and g6[0].startswith("G6 WARN: pid ") and g6[0].endswith(
        " sleep (holds 22.5 GB, no memory cap, leaves 63.0 GB)")
    assert "outside this container" not in " ".join(lines)


def test_a_busy_gpu_whose_process_nvml_does_not_list_is_named_and_not_put_on_cooling(tmp_path, fake_dir, outside):
    lines, _ = in_namespace(tmp_path, fake_dir, BUSY, 'eval exec "$PREFLIGHT"')
    assert lines == ["G4 INFO: not at rest: a process outside this container uses the GPU (100% busy, 700.8 W)",
                     "G6 WARN: another process outside this container uses the GPU: NVML lists no pid for it",
                     "    fix: find it from the host, where nvidia-smi names its pid and program (or start this "
                     "container with --pid=host), and stop it or let it finish before training"]
    assert replayed(tmp_path) == lines


SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(SETPRIV is None, reason="needs setpriv (util-linux)")
def test_under_hidepid_another_users_process_is_hidden_here_not_outside_the_container(outside):
    """/proc mounted with hidepid=2 (in a mount namespace of its own) hides root's processes from
    nobody: psutil finds no such pid, yet it is this namespace's, not another container's."""
    probe = textwrap.dedent(f"""
        import psutil
        from spark_gotchas.machine.readers.gpu import describe
        hidden, gone = describe(psutil, {outside}), describe(psutil, 4194000)
        print(hidden.visible, hidden.problem)
        print(gone.visible, gone.problem)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_"))}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run([shutil.which("unshare"), "--mount", "sh", "-c",
                          'mount -t proc -o hidepid=2 proc /proc && exec "$@"', "sh", SETPRIV, "--reuid=65534",
                          "--regid=65534", "--clear-groups", sys.executable, "-c", probe],
                         cwd="/", env=env, capture_output=True, text=True, timeout=60)
    if any(why in run.stderr for why in ("Permission denied", "No module named", "cannot open shared object file")):
        pytest.skip(f"the checkout or this Python is not readable by nobody: {run.stderr.strip()[-200:]}")
    assert run.stdout.splitlines() == [
        "True no permission to see it (/proc is mounted with hidepid: another user's process)",
        "False pid not visible here (exited, or in another container's pid namespace)"], run.stdout + run.stderr
