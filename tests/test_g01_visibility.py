"""G1's first question: can this environment use the NVIDIA GPU in this machine at all? The
``gpu.visibility`` reader on fake sysfs trees (``SPARK_GOTCHAS_SYS_ROOT``), the judge on each case a
user meets (a container without --gpus all, an empty CUDA_VISIBLE_DEVICES, a CPU machine running an
NGC image), and a live run -> snapshot -> replay through the plugin."""

from __future__ import annotations

import json
import os
from pathlib import Path

import no_nvml
import pytest
from gline_block import glines
from sysfs_fakes import GB10_PCI, HOST_BRIDGE, NVIDIA_AUDIO, make_root

from spark_gotchas.knowledge.judges import g01_visibility as g01v
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory, GpuVisibility, PciGpu
from spark_gotchas.knowledge.readings.torch import TorchBuild, TorchDevice
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers.gpu import read_visibility

ROOT = Path(__file__).resolve().parents[1]
NO_NVML = "NVML library not found (no NVIDIA driver on this machine)"
GB10 = GpuInventory(driver_version="580.173.02", cuda_driver_version=13000,
                    devices=[GpuDevice(index=0, name="NVIDIA GB10", capability=(12, 1))])
SPARK_PCI = [PciGpu("000f:01:00.0", "0x2e12", "0x030200")]
NODES = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]


def torch(devices: int = 1, version: str = "2.9.0+cu130", cuda: str | None = "13.0") -> TorchBuild:
    seen = [TorchDevice(i, "NVIDIA GB10", (12, 1), 130_663_821_312) for i in range(devices)]
    return TorchBuild(installed=True, version=version, cuda=cuda, compiled_with_cuda=cuda is not None,
                      cuda_available=bool(devices), device_count=devices, devices=seen)


# -- the reader ----------------------------------------------------------------------------------------
@pytest.fixture
def clean_env(monkeypatch):
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", *[k for k in os.environ if k.startswith("NVIDIA_")],
                 "CUDA_VERSION"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_reader_finds_an_nvidia_3d_controller_on_a_fake_bus_and_nothing_else(tmp_path, clean_env):
    root = make_root(tmp_path, pci=[HOST_BRIDGE, GB10_PCI, NVIDIA_AUDIO], container=True)
    clean_env.setenv("SPARK_GOTCHAS_SYS_ROOT", str(root))
    clean_env.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    clean_env.setenv("NVIDIA_PRODUCT_NAME", "PyTorch")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "")
    vis = read_visibility(None)
    assert vis.pci_gpus == [PciGpu("000f:01:00.0", "0x2e12", "0x030200")]  # the HDMI audio function is no GPU
    assert vis.bus_text == "10de:2e12 at 000f:01:00.0"
    assert vis.pci_error is None and vis.dev_nodes == [] and vis.container == "/.dockerenv"
    assert vis.nvidia_visible_devices == "all" and vis.gpu_requested
    assert vis.cuda_visible_devices == "" and vis.image_vars == {"NVIDIA_PRODUCT_NAME": "PyTorch"}


def test_the_reader_lists_device_nodes_and_says_why_the_bus_could_not_be_read(tmp_path, clean_env):
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "null"):
        (tmp_path / "dev" / name).write_text("")
    clean_env.setenv("SPARK_GOTCHAS_SYS_ROOT", str(tmp_path))
    vis = read_visibility(None)
    assert vis.dev_nodes == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
    assert vis.pci_error.startswith("cannot list ") and vis.pci_error.endswith("No such file or directory")
    assert vis.container is None and not vis.gpu_on_bus


def test_odd_sysfs_files_and_a_root_with_glob_characters_are_read_without_trouble(tmp_path, clean_env):
    root = tmp_path / "a [root] *"
    make_root(root, pci=[("0000:02:00.0", "0x10de", "\x00\xff junk", "0x0302ff"), ("0000:03:00.0", "", "", "")],
              dev=("nvidia0",))
    (root / "sys" / "bus" / "pci" / "devices" / "0000:04:00.0").mkdir()  # no files at all
    clean_env.setenv("SPARK_GOTCHAS_SYS_ROOT", str(root))
    vis = read_visibility(None)
    assert [g.address for g in vis.pci_gpus] == ["0000:02:00.0"] and vis.dev_nodes == ["/dev/nvidia0"]
    assert vis.bus_text == "10de at 0000:02:00.0"  # a device id that is not hex text is not shown
    v = g01v.judge_gpu_visible(vis, GpuInventory(nvml_error=NO_NVML), None)
    assert v.line == ("G1 FAIL: an NVIDIA GPU is in this machine (0000:02:00.0) but not visible in this system "
                      "(is the driver loaded?)")


def test_a_huge_variable_is_kept_short(tmp_path, clean_env):
    clean_env.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path)))
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "7," * 100_000)
    vis = read_visibility(None)
    assert len(vis.cuda_visible_devices) == 200
    v = g01v.judge_gpu_visible(vis, GB10, torch(devices=0))
    assert len(v.line) < 200 and "CUDA_VISIBLE_DEVICES='7,7," in v.line


# -- the judge ------------------------------------------------------------------------------------------
def test_an_ngc_container_started_without_gpus_fails_with_the_docker_flag():
    vis = GpuVisibility(pci_gpus=SPARK_PCI, nvidia_visible_devices="all", image_vars={"NVIDIA_PRODUCT_NAME": "PyTorch"},
                        container="/.dockerenv")
    v = g01v.judge_gpu_visible(vis, GpuInventory(nvml_error=NO_NVML), torch(devices=0, version="2.9.0a0+145a3a7bda.nv25.10"))
    assert v.line == "G1 FAIL: an NVIDIA GPU is in this machine (000f:01:00.0) but not visible in this environment"
    assert v.fix.startswith("start the container with --gpus all (or --runtime nvidia)")
    assert v.readings["pci_gpus"] == [{"address": "000f:01:00.0", "device_id": "0x2e12", "class": "0x030200"}]
    assert v.readings["nvml_error"] == NO_NVML and v.readings["torch_devices"] == 0


def test_a_host_whose_driver_is_not_loaded_fails_with_the_driver_fix():
    v = g01v.judge_gpu_visible(GpuVisibility(pci_gpus=SPARK_PCI), GpuInventory(nvml_error=NO_NVML), None)
    assert v.line == ("G1 FAIL: an NVIDIA GPU is in this machine (000f:01:00.0) but not visible in this system "
                      "(is the driver loaded?)")
    assert v.fix == ("load the NVIDIA driver (sudo modprobe nvidia), or reinstall the driver package and reboot, "
                     "until nvidia-smi lists the GPU")


@pytest.mark.parametrize("value, named", [("", True), ("-1", True), ("7", True), ("GPU-00000000-dead-beef", False)])
def test_nvml_sees_the_gpu_but_cuda_visible_devices_hides_it_from_torch(value, named):
    """The GPU's name while the line fits in 100 columns; the value, which is what to change, always."""
    v = g01v.judge_gpu_visible(GpuVisibility(pci_gpus=SPARK_PCI, dev_nodes=NODES, cuda_visible_devices=value),
                               GB10, torch(devices=0))
    gpus = "1 GPU(s) (NVIDIA GB10)" if named else "1 GPU(s)"
    assert v.line == f"G1 FAIL: NVML sees {gpus} but torch sees none: CUDA_VISIBLE_DEVICES='{value}' hides it"
    assert v.detail == ("" if named else "NVML's GPU 0: NVIDIA GB10")
    assert v.fix.startswith("unset CUDA_VISIBLE_DEVICES")


def test_device_files_hidden_by_a_cgroup_are_named():
    v = g01v.judge_gpu_visible(GpuVisibility(pci_gpus=SPARK_PCI), GB10, torch(devices=0))
    assert v.status is Status.FAIL and "no /dev/nvidia* here" in v.summary and "--gpus all" in v.fix


def test_torch_failing_for_its_own_reason_is_quoted():
    build = torch(devices=0)
    build.cuda_error = "RuntimeError: CUDA driver initialization failed"
    v = g01v.judge_gpu_visible(GpuVisibility(pci_gpus=SPARK_PCI, dev_nodes=NODES), GB10, build)
    assert v.status is Status.FAIL and v.summary.endswith("torch sees none: RuntimeError: CUDA driver initialization failed")
    assert v.detail == "NVML's GPU 0: NVIDIA GB10"  # the error whole on the line, the name here


@pytest.mark.parametrize("name, error, line", [
    ("NVIDIA H100 80GB HBM3", "RuntimeError: CUDA driver initialization failed",
     "G1 FAIL: NVML sees 1 GPU(s) but torch sees none: RuntimeError: CUDA driver initialization failed"),
    ("NVIDIA GB10", "RuntimeError: CUDA error: no CUDA-capable device is detected",
     "G1 FAIL: NVML sees 1 GPU(s) but torch sees none: CUDA error: no CUDA-capable device is detected"),
    ("NVIDIA GB10", "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. "
                    "changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero.",
     "G1 FAIL: NVML sees 1 GPU(s) but torch sees none: CUDA unknown error - this may be due to an…"),
])
def test_a_long_name_or_error_gives_way_before_the_line_runs_past_100_columns(name, error, line):
    """The name first, then the error's class, then the error's end: the detail keeps them whole."""
    build = torch(devices=0)
    build.cuda_error = error
    inventory = GpuInventory(driver_version="580.159.04", cuda_driver_version=13000, devices=[GpuDevice(0, name)])
    v = g01v.judge_gpu_visible(GpuVisibility(pci_gpus=SPARK_PCI, dev_nodes=NODES), inventory, build)
    whole = f"NVML's GPU 0: {name}" + ("" if v.line.endswith(error) else f"; torch: {error}")
    assert (v.line, len(v.line) <= 100, v.detail) == (line, True, whole)


def test_both_see_the_gpu_or_cuda_visible_devices_chooses_some():
    vis = GpuVisibility(pci_gpus=SPARK_PCI, dev_nodes=NODES)
    assert g01v.judge_gpu_visible(vis, GB10, torch()).line == "G1 PASS: NVML sees 1 GPU(s) (NVIDIA GB10); torch sees 1"
    eight = GpuInventory(devices=[GpuDevice(index=i, name="NVIDIA H200") for i in range(8)])
    chosen = GpuVisibility(dev_nodes=NODES, cuda_visible_devices="3")
    assert g01v.judge_gpu_visible(chosen, eight, torch()).line == \
        "G1 PASS: NVML sees 8 GPU(s) (NVIDIA H200); torch sees 1 (CUDA_VISIBLE_DEVICES='3' chooses)"


def test_a_cpu_torch_or_none_leaves_the_question_to_g1s_torch_line():
    vis = GpuVisibility(pci_gpus=SPARK_PCI, dev_nodes=NODES)
    cpu = g01v.judge_gpu_visible(vis, GB10, torch(devices=0, version="2.13.0+cpu", cuda=None))
    assert cpu.status is Status.INFO and "torch 2.13.0+cpu is a CPU build (see G1's torch line)" in cpu.summary
    absent = g01v.judge_gpu_visible(vis, GB10, TorchBuild(installed=False))
    assert absent.line == "G1 INFO: NVML sees 1 GPU(s) (NVIDIA GB10); torch is not installed"


def test_a_reading_that_could_not_be_had_is_unread_not_absent():
    """spark.try_read gives None for a reading refused in a replay (or not in the snapshot): torch
    may be installed and NVML may list a GPU; the line says the reading could not be read."""
    vis = GpuVisibility(pci_gpus=SPARK_PCI, dev_nodes=NODES)
    unread_torch = g01v.judge_gpu_visible(vis, GB10, None)
    assert unread_torch.line == ("G1 INFO: NVML sees 1 GPU(s) (NVIDIA GB10); torch's reading could not be read "
                                 "(see G1's torch line)")
    assert unread_torch.readings["torch_devices"] is None
    unread_nvml = g01v.judge_gpu_visible(vis, None, torch())
    assert unread_nvml.line == "G1 PASS: torch sees NVIDIA GB10; NVML's reading could not be read"
    neither = g01v.judge_gpu_visible(GpuVisibility(pci_error="cannot list /sys/bus/pci/devices"), None, None)
    assert neither.line == "G1 INFO: no GPU visible here, and the PCI bus cannot be read"
    assert neither.detail == "NVML: its reading could not be read; PCI bus: cannot list /sys/bus/pci/devices"


def test_torch_sees_the_gpu_without_nvml_a_compute_only_container():
    v = g01v.judge_gpu_visible(GpuVisibility(dev_nodes=NODES), GpuInventory(nvml_error=NO_NVML), torch())
    assert v.line == f"G1 PASS: torch sees NVIDIA GB10; NVML does not ({NO_NVML})"


def test_an_ngc_image_on_a_machine_without_a_gpu_is_information():
    vis = GpuVisibility(pci_gpus=[], nvidia_visible_devices="all", image_vars={"NVIDIA_PRODUCT_NAME": "PyTorch"},
                        container="/.dockerenv")
    v = g01v.judge_gpu_visible(vis, GpuInventory(nvml_error=NO_NVML), torch(devices=0))
    assert v.line == ("G1 INFO: no NVIDIA GPU in this machine (none on the PCI bus); NVIDIA_VISIBLE_DEVICES='all' is "
                      "the image's setting, not a GPU")
    plain = g01v.judge_gpu_visible(GpuVisibility(), GpuInventory(nvml_error=NO_NVML), None)
    assert plain.line == "G1 INFO: no NVIDIA GPU in this machine (none on the PCI bus)"


def test_a_gpu_asked_for_where_the_bus_cannot_be_read_warns():
    vis = GpuVisibility(pci_error="cannot list /sys/bus/pci/devices: No such file or directory",
                        nvidia_visible_devices="all")
    v = g01v.judge_gpu_visible(vis, GpuInventory(nvml_error=NO_NVML), None)
    assert v.status is Status.WARN and v.summary.startswith("NVIDIA_VISIBLE_DEVICES='all' asks for a GPU")
    assert "--gpus all" in v.fix and "unset NVIDIA_VISIBLE_DEVICES" in v.fix
    for hidden in ("void", "none", ""):
        vis.nvidia_visible_devices = hidden
        assert g01v.judge_gpu_visible(vis, GpuInventory(nvml_error=NO_NVML), None).status is Status.INFO


def test_a_snapshot_from_before_the_reading_is_judged_from_nvml_and_torch():
    assert g01v.judge_gpu_visible(None, GB10, torch()).status is Status.PASS
    assert g01v.judge_gpu_visible(None, GpuInventory(nvml_error=NO_NVML), None).status is Status.INFO


# -- through the plugin ---------------------------------------------------------------------------------
def run(pytester, *args):
    import pytest_timeout

    import spark_gotchas.plugin

    pytester.makepyfile(test_g01_here=(ROOT / "tests_gotchas" / "test_g01_cuda_abi.py").read_text())
    return pytester.runpytest("-p", "no:cacheprovider", "-m", "fast", "-k", "visible", *args,
                              plugins=[spark_gotchas.plugin, pytest_timeout])


def test_a_container_without_gpus_live_then_replayed_gives_the_same_fail(pytester, tmp_path, clean_env):
    clean_env.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    clean_env.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: False)
    no_nvml.pin(clean_env)  # the container sees no driver, whatever this machine has
    clean_env.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path / "root", pci=[HOST_BRIDGE, GB10_PCI],
                                                             container=True)))
    clean_env.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    live = run(pytester, "--spark-snapshot", "snap.json")
    live.assert_outcomes(failed=1)
    expected = ["G1 FAIL: an NVIDIA GPU is in this machine (000f:01:00.0) but not visible in this environment",
                "    fix: start the container with --gpus all (or --runtime nvidia), e.g. docker run --gpus all --ipc=host "
                "IMAGE; in Kubernetes request nvidia.com/gpu with runtimeClassName: nvidia"]
    assert glines(live) == expected
    live.stdout.fnmatch_lines(["NVIDIA GPU present but not visible here (10de:2e12 at 000f:01:00.0)*profile none"])
    recorded = json.loads((pytester.path / "snap.json").read_text())["readings"]["gpu.visibility"]
    assert recorded["pci_gpus"][0]["address"] == "000f:01:00.0" and recorded["nvidia_visible_devices"] == "all"

    clean_env.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path / "empty")))  # the replaying machine has none
    clean_env.delenv("NVIDIA_VISIBLE_DEVICES")
    replay = run(pytester, "--spark-replay", "snap.json")
    assert glines(replay) == expected


def test_hostile_variable_values_stay_on_one_line():
    forged = "\x1b[2J\nG1 PASS: all good\r"
    v = g01v.judge_gpu_visible(GpuVisibility(dev_nodes=NODES, cuda_visible_devices=forged), GB10, torch(devices=0))
    assert "\n" not in v.line and "\r" not in v.line and "\x1b" not in v.line
    assert v.line.startswith("G1 FAIL: NVML sees 1 GPU(s) but torch sees none: CUDA_VISIBLE_DEVICES='\\x1b[2J\\x0aG1 PASS")


def test_a_replayed_torch_reading_that_is_refused_is_not_called_torch_not_installed(pytester, tmp_path, clean_env):
    """The H200 snapshot with a device's capability recorded as "12.1" (not [12, 1]): the torch reading
    is refused, so G1's torch build check skips with the reason; the visibility check says the
    reading could not be read, and the extensions line that stands for G1 fits 100 columns."""
    clean_env.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    snap = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())
    snap["readings"]["torch.build"]["devices"][0]["capability"] = "12.1"
    (tmp_path / "refused.json").write_text(json.dumps(snap))
    import pytest_timeout

    import spark_gotchas.plugin

    pytester.makepyfile(test_g01_here=(ROOT / "tests_gotchas" / "test_g01_cuda_abi.py").read_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "fast", "-v", "--spark-replay",
                                str(tmp_path / "refused.json"), plugins=[spark_gotchas.plugin, pytest_timeout])
    assert glines(result) == ["G1 PASS: 7 packages use CUDA 13 (the driver supports CUDA 13.0); not checked: torch build"]
    result.stdout.fnmatch_lines([
        "    skip: could not read torch.build: recorded reading does not fit TorchBuild: devices[0].capability "
        "(needs tuple[int, int], got string '12.1')",
        "    pass: 7 packages use CUDA 13 (the driver supports CUDA 13.0) (cupy-cuda13x; nvidia-cublas; "
        "nvidia-cusolver; nvidia-cusparse; torch; torchaudio; torchvision)",
        "    info: NVML sees 1 GPU(s) (NVIDIA H200); torch's reading could not be read (see G1's torch line)"])
    assert "torch is not installed" not in result.stdout.str()
