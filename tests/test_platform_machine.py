"""platform.machine: the one decision whether the machine read (or the snapshot's) is the profile's
platform; the profile ``auto`` picks; and the platform line a user reads above the G-lines."""

from __future__ import annotations

import pytest
from sysfs_fakes import H200_PCI, HOST_BRIDGE, make_root

from spark_gotchas.base.serial import to_jsonable
from spark_gotchas.knowledge.profiles import GB10, SAME, Machine
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory, GpuVisibility, PciGpu
from spark_gotchas.knowledge.readings.torch import TorchBuild, TorchDevice
from spark_gotchas.machine import platform
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.provider import Provider
from spark_gotchas.machine.snapshot import Snapshot

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
    monkeypatch.setattr("spark_gotchas.machine.nvml.init", lambda: type("R", (), {"reason": NO_NVML})())
    provider = Provider(RunOptions(), worker_factory=NoWorker())
    assert platform.machine(provider, "gb10") == Machine(False, "no GPU")
    assert platform.profile(provider).key == "none"


def test_live_with_device_files_torch_is_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path, pci=[H200_PCI], dev=("nvidia0",))))
    monkeypatch.setattr("spark_gotchas.machine.nvml.init", lambda: type("R", (), {"reason": NO_NVML})())
    # torch is installed (the worker would import it), here or not: without it no worker is asked
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: True)
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


# -- the recorded machine, and a machine no platform of its profile is ------------------------------------
def test_the_recorded_machine_is_a_reading_a_replay_keeps():
    from spark_gotchas.knowledge.readings.host import HostPlatform

    arm = replayed(gpu_inventory=inventory("NVIDIA GB10", (12, 1)),
                   host_platform=HostPlatform(machine="aarch64", kernel="6.17.0-1031-nvidia"))
    desc = platform.describe(arm)
    assert (desc["machine"], desc["kernel"], desc["beyond_envelope"]) == ("aarch64", "6.17.0-1031-nvidia", None)
    older = platform.describe(replayed(gpu_inventory=inventory("NVIDIA GB10", (12, 1))))
    assert (older["machine"], older["kernel"], older["python"]) == ("not recorded", "not recorded", "not recorded")


def test_an_older_snapshots_platform_section_stands_for_its_machine(tmp_path):
    import json

    from spark_gotchas.machine.snapshot import load

    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "spark-gotchas-snapshot", "version": 1, "readings": {},
                                "platform": {"machine": "arm64", "python": "3.12.3"}}))
    snap = load(path)
    assert snap.readings["host.platform"] == {"machine": "aarch64", "python": "3.12.3",
                                              "source": "the snapshot's platform section"}
    assert platform.describe(Provider(RunOptions(), replay=snap))["kernel"] == "not recorded"


def test_the_host_platform_reader_asks_the_kernel_under_the_sys_root(tmp_path, monkeypatch):
    from spark_gotchas.machine.readers.host import read_host_platform

    root = make_root(tmp_path, arch="arm64")
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text("6.17.0-1031-nvidia\n")
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(root))
    seen = read_host_platform(None)
    assert (seen.machine, seen.kernel, seen.source) == ("aarch64", "6.17.0-1031-nvidia", "uname")
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(tmp_path / "empty"))
    import os

    assert read_host_platform(None).machine == os.uname().machine.replace("arm64", "aarch64")


@pytest.mark.parametrize("readings, asked, beyond", [
    ({"gpu_inventory": inventory("NVIDIA GB10", (12, 1)), "host_platform": ("x86_64",)}, "auto",
     "machine x86_64 is no GB10's (aarch64)"),
    ({"gpu_inventory": inventory("NVIDIA GB10", (12, 0)), "host_platform": ("aarch64",)}, "auto",
     "capability 12.0 is no GB10's (12.1)"),
    ({"gpu_inventory": inventory("NVIDIA GB10", (12, 1)), "host_platform": ("x86_64",)}, "gb10",
     "machine x86_64 is no GB10's (aarch64)"),
    ({"gpu_inventory": inventory("NVIDIA GH200 480GB", (9, 0)), "host_platform": ("x86_64",)}, "auto",
     "machine x86_64 is no GH200's (aarch64)"),
    ({"gpu_inventory": inventory("NVIDIA H200", (9, 0)), "host_platform": ("aarch64",)}, "auto", None),
    ({"gpu_inventory": inventory("NVIDIA H100 PCIe", (9, 0)), "host_platform": ("aarch64",)}, "auto", None),
    ({"gpu_inventory": inventory("NVIDIA H200", (9, 0)), "host_platform": ("x86_64",)}, "gb10", None),  # not it
])
def test_a_machine_taken_for_the_profile_but_no_such_machine_carries_why(readings, asked, beyond):
    from spark_gotchas.knowledge.readings.host import HostPlatform

    readings = {k: HostPlatform(machine=v[0]) if k == "host_platform" else v for k, v in readings.items()}
    here = platform.machine(replayed(**readings), asked)
    assert (f"{here.beyond.what} is {here.beyond.how}" if here.beyond else None) == beyond
    assert here.is_profile is (asked == "auto" or readings["gpu_inventory"].first.name.endswith("GB10"))


def test_live_a_gpu_the_name_takes_for_a_gb10_with_another_capability_is_caught():
    """The wrong profile choice, live: NVML's name says GB10, its capability says otherwise."""
    from spark_gotchas.knowledge.readings.host import HostPlatform

    provider = Provider(RunOptions())
    provider._cache["gpu.inventory"] = inventory("NVIDIA GB10", (10, 0))
    provider._cache["host.platform"] = HostPlatform(machine="aarch64")
    assert platform.profile(provider).key == "gb10"
    here = platform.machine(provider)
    assert here.beyond is not None and here.beyond.verdict(5, "bandwidth").line == (
        "G5 WARN: capability 10.0 is no GB10's (12.1): not a GB10's; bandwidth not judged")


@pytest.mark.parametrize("name, key, title", [
    ("NVIDIA GB10", "gb10", "NVIDIA GB10 (DGX Spark)"), ("NVIDIA-GB10", "gb10", "NVIDIA GB10 (DGX Spark)"),
    ("NVIDIA GB100", "generic", None), ("NVIDIA GH200 480GB", "gh200", "NVIDIA GH200 Grace Hopper"),
    ("NVIDIA GH200 144G HBM3e", "gh200", "NVIDIA GH200 144GB HBM3e"), ("NVIDIA H200", "h200", "NVIDIA H200"),
    ("NVIDIA H200 NVL", "h200", "NVIDIA H200 NVL"), ("NVIDIA H100 80GB HBM3", "h100", "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", "h100", "NVIDIA H100 PCIe"), ("NVIDIA H100 NVL", "h100", "NVIDIA H100 NVL"),
    ("NVIDIA H20", "generic", None), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "generic", None),
])
def test_a_gpu_name_picks_its_profile_and_variant_by_whole_tokens(name, key, title):
    from spark_gotchas.knowledge.profiles import match, resolve

    picked = match(name, None)
    assert picked.key == key and (title is None or picked.title == title)
    if key == "h100":
        assert resolve("h100", name).title == title  # asked for by name, still narrowed to the variant
