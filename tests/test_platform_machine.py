"""platform.machine: the one decision whether the machine read (or the snapshot's) is the profile's
platform; the profile ``auto`` picks; and the platform line a user reads above the G-lines."""

from __future__ import annotations

import pytest
from sysfs_fakes import H200_PCI, HOST_BRIDGE, make_root

from spark_gotchas import platform
from spark_gotchas.options import RunOptions
from spark_gotchas.profiles import GB10, SAME, Machine
from spark_gotchas.provider import Provider
from spark_gotchas.readings.gpu import GpuDevice, GpuInventory, GpuVisibility, PciGpu
from spark_gotchas.readings.torch import TorchBuild, TorchDevice
from spark_gotchas.serial import to_jsonable
from spark_gotchas.snapshot import Snapshot

NO_NVML = "NVML library not found (no NVIDIA driver on this machine)"
SPARK_PCI = [PciGpu("000f:01:00.0", "0x2e12", "0x030200")]


def inventory(name: str, capability=None) -> GpuInventory:
    return GpuInventory(driver_version="580.173.02", cuda_driver_version=13000,
                        devices=[GpuDevice(index=0, name=name, capability=capability)])


def torch_seeing(name: str | None, capability=(12, 1)) -> TorchBuild:
    devices = [TorchDevice(0, name, capability, 1 << 30)] if name else []
    return TorchBuild(installed=True, version="2.9.0+cu130", cuda="13.0", compiled_with_cuda=True,
                      cuda_available=bool(devices), device_count=len(devices), devices=devices)


def replayed(**readings) -> Provider:
    snap = Snapshot(readings={k.replace("_", "."): to_jsonable(v) for k, v in readings.items()}, path="snap.json")
    return Provider(RunOptions(), replay=snap)


@pytest.mark.parametrize("readings, asked, expected", [
    ({"gpu_inventory": inventory("NVIDIA GB10", (12, 1))}, "gb10", SAME),
    ({"gpu_inventory": inventory("NVIDIA H200", (9, 0))}, "gb10", Machine(False, "NVIDIA H200")),
    ({"gpu_inventory": inventory("NVIDIA GB10", (12, 1))}, "h200", Machine(False, "NVIDIA GB10")),
    ({"gpu_inventory": inventory("NVIDIA GH200 480GB", (9, 0))}, "h200", Machine(False, "NVIDIA GH200 480GB")),
    ({"gpu_inventory": inventory("NVIDIA H200", (9, 0))}, "generic", SAME),
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML), "gpu_visibility": GpuVisibility()}, "gb10",
     Machine(False, "no GPU")),
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML), "gpu_visibility": GpuVisibility()}, "generic",
     Machine(False, "no GPU")),
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML), "torch_build": torch_seeing("NVIDIA GB10")}, "gb10", SAME),
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML), "gpu_visibility": GpuVisibility(pci_gpus=SPARK_PCI)},
     "gb10", SAME),  # a Spark container without --gpus all: known by its PCI id (G1 fails it)
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML), "gpu_visibility": GpuVisibility(pci_gpus=SPARK_PCI)},
     "h200", Machine(False, "NVIDIA GB10 (DGX Spark), not visible here")),
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML),
      "gpu_visibility": GpuVisibility(pci_gpus=[PciGpu("0000:00:06.0", "0x2335", "0x030200")])},
     "gb10", Machine(False, "NVIDIA H200, not visible here")),  # the id the lent H200's sysfs shows
    ({"gpu_inventory": GpuInventory(nvml_error=NO_NVML),
      "gpu_visibility": GpuVisibility(pci_gpus=[PciGpu("0000:3b:00.0", "0x20b0", "0x030200")])},
     "gb10", SAME),  # an id no profile knows: taken at its word
    ({"gpu_inventory": inventory("NVIDIA H200", (9, 0))}, "auto", SAME),
    ({}, "auto", SAME),
])
def test_machine_matches_the_recorded_gpu_not_the_replaying_one(readings, asked, expected):
    assert platform.machine(replayed(**readings), asked) == expected


def test_the_line_a_judge_writes_elsewhere():
    assert Machine(False, "no GPU").not_profile(GB10, "memory") == \
        "this machine is not a GB10 (no GPU): its memory cannot stand for a Spark's"


def test_auto_takes_torchs_gpu_when_nvml_is_missing_but_cuda_works():
    """A container given the compute capability only has no libnvidia-ml, yet torch sees the GB10."""
    provider = replayed(gpu_inventory=GpuInventory(nvml_error=NO_NVML), torch_build=torch_seeing("NVIDIA GB10"))
    assert platform.profile(provider).key == "gb10"
    assert platform.profile(replayed(gpu_inventory=GpuInventory(nvml_error=NO_NVML))).key == "none"


class NoWorker:
    def __call__(self):
        raise AssertionError("torch was asked although nothing here could be a GPU")


def test_live_without_device_files_or_a_gpu_on_the_bus_torch_is_never_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path, pci=[HOST_BRIDGE])))
    monkeypatch.setattr("spark_gotchas.nvml.init", lambda: type("R", (), {"reason": NO_NVML})())
    provider = Provider(RunOptions(), worker_factory=NoWorker())
    assert platform.machine(provider, "gb10") == Machine(False, "no GPU")
    assert platform.profile(provider).key == "none"


def test_live_with_device_files_torch_is_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path, pci=[H200_PCI], dev=("nvidia0",))))
    monkeypatch.setattr("spark_gotchas.nvml.init", lambda: type("R", (), {"reason": NO_NVML})())
    asked = []
    provider = Provider(RunOptions(), worker_factory=lambda: asked.append(1) or (_ for _ in ()).throw(
        RuntimeError("no worker here")))
    # torch could not answer: the GPU on the bus is known by its PCI id
    assert platform.machine(provider, "gb10") == Machine(False, "NVIDIA H200, not visible here")
    assert asked


def test_platform_line_says_a_hidden_gpu_and_a_profile_that_is_not_this_machine():
    hidden = replayed(gpu_inventory=GpuInventory(nvml_error=NO_NVML), gpu_visibility=GpuVisibility(pci_gpus=SPARK_PCI),
                      torch_build=torch_seeing(None))
    desc = platform.describe(hidden, "auto")
    assert desc["gpu_hidden"] == "10de:2e12 at 000f:01:00.0" and desc["profile"] == "none"
    assert platform.one_line(desc) == ("NVIDIA GPU present but not visible here (10de:2e12 at 000f:01:00.0), "
                                       "torch 2.9.0+cu130, profile none")
    elsewhere = replayed(gpu_inventory=inventory("NVIDIA H200", (9, 0)))
    line = platform.one_line(platform.describe(elsewhere, "gb10"), replayed_from="h200.json")
    assert line == ("replayed h200.json: NVIDIA H200 (cc 9.0), driver 580.173.02 / CUDA 13.0, not a GB10: its live state not "
                    "judged, profile gb10")
    # a description written before these fields existed still prints
    assert platform.one_line({"profile": "none", "gpu": None, "nvml_error": NO_NVML}).startswith("no GPU (")


def test_platform_line_names_the_gpu_torch_sees_where_nvml_is_missing():
    """A container given the compute capability only: no libnvidia-ml, yet CUDA works. The line
    names torch's GPU and says why NVML is not there, never "no GPU"."""
    provider = replayed(gpu_inventory=GpuInventory(nvml_error=NO_NVML), torch_build=torch_seeing("NVIDIA GB10"))
    desc = platform.describe(provider, "auto")
    assert (desc["gpu"], desc["capability"], desc["gpu_count"], desc["gpu_hidden"]) == ("NVIDIA GB10", [12, 1], 1, None)
    assert platform.one_line(desc) == (f"NVIDIA GB10 (cc 12.1), NVML unavailable: {NO_NVML}, torch 2.9.0+cu130, "
                                       "profile gb10")
    both = platform.describe(replayed(gpu_inventory=inventory("NVIDIA H200", (9, 0)),
                                      torch_build=torch_seeing("NVIDIA H200", (9, 0))), "auto")
    assert platform.one_line(both).startswith("NVIDIA H200 (cc 9.0), driver 580.173.02 / CUDA 13.0, torch")
