"""Readings survive JSON: what a live run judged is what a replay judges."""

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Optional

import pytest

from spark_gotchas import readers
from spark_gotchas.readers.environment import Baseline, ContainerEvidence, Distributions, RequirementProblem
from spark_gotchas.readers.extensions import ExtensionScan, LinkedExtension
from spark_gotchas.readers.gpu import GpuDevice, GpuInventory
from spark_gotchas.readers.torchinfo import FirstLaunch, TorchBuild, TorchDevice
from spark_gotchas.serial import from_jsonable, to_jsonable


class Mode(enum.Enum):
    COPY = "copy"
    TRIAD = "triad"


@dataclass
class Inner:
    name: str
    capability: Optional[tuple[int, int]] = None


@dataclass
class Outer:
    mode: Mode
    inner: Inner
    items: list[Inner] = field(default_factory=list)
    by_name: dict[str, Inner] = field(default_factory=dict)
    sizes_bytes: tuple[int, ...] = ()
    seconds: float = 0.0
    maybe: Optional[Inner] = None
    either: "int | str | None" = None


def through_json(tp, value):
    return from_jsonable(tp, json.loads(json.dumps(to_jsonable(value))))


def test_nested_dataclasses_round_trip():
    value = Outer(
        mode=Mode.TRIAD,
        inner=Inner("GB10", (12, 1)),
        items=[Inner("a"), Inner("b", (9, 0))],
        by_name={"x": Inner("x", (8, 6))},
        sizes_bytes=(1, 2, 3),
        seconds=1.5,
        maybe=None,
        either="text",
    )
    back = through_json(Outer, value)
    assert back == value
    assert isinstance(back.inner.capability, tuple) and isinstance(back.sizes_bytes, tuple)
    assert back.mode is Mode.TRIAD


def test_json_shape_is_plain():
    assert to_jsonable(Inner("GB10", (12, 1))) == {"name": "GB10", "capability": [12, 1]}
    assert to_jsonable({1: {2}}) == {"1": [2]}
    assert to_jsonable(float("nan")) is None  # NaN is not JSON
    assert to_jsonable(Mode.COPY) == "copy"
    assert to_jsonable(object.__new__(type("Odd", (), {"__str__": lambda self: "odd"}))) == "odd"


def test_lenient_reading_of_older_or_newer_snapshots():
    # a field added later is missing (default used); a field removed since is ignored
    assert from_jsonable(Inner, {"name": "H200", "gone": 1}) == Inner("H200")
    # an integer where a float is declared stays a float
    assert from_jsonable(Outer, {"mode": "copy", "inner": {"name": "x"}, "seconds": 2}).seconds == 2.0


def test_wrong_shapes_raise_typed_errors():
    with pytest.raises(TypeError, match="Inner needs an object"):
        from_jsonable(Inner, ["not", "an", "object"])
    with pytest.raises(TypeError):
        from_jsonable(Inner, {})  # the required name is missing
    with pytest.raises(ValueError):
        from_jsonable(Mode, "fill")


REAL_READINGS = [
    GpuInventory(driver_version="580.95.05", cuda_driver_version=13000, devices=[
        GpuDevice(index=0, name="NVIDIA GB10", capability=(12, 1), max_sm_clock_mhz=3003,
                  unavailable={"memory_total_bytes": "Not Supported", "power_limit_mw": "Not Supported"}),
    ]),
    GpuInventory(nvml_error="NVML library not found (no NVIDIA driver on this machine)"),
    TorchBuild(installed=True, version="2.10.0a0+b558c986e8.nv25.11", cuda="13.0", compiled_with_cuda=True,
               arch_list=["sm_80", "sm_120"], cuda_available=True, device_count=1,
               devices=[TorchDevice(0, "NVIDIA GB10", (12, 1), 130663821312, 48)]),
    FirstLaunch(attempted=True, ok=False, reason="child process killed by SIGSEGV", signal="SIGSEGV",
                mem_get_info=None),
    FirstLaunch(attempted=True, ok=True, seconds=0.2, mem_get_info=(149458911232, 150109880320)),
    ExtensionScan(site_dirs=["/venv/lib/python3.12/site-packages"], shared_objects=847, seconds=0.31,
                  linked=[LinkedExtension("/venv/x/_C.so", "vllm", {"libcudart.so.12": 12})]),
    ContainerEvidence(dockerenv=True, proc1_cgroup=["0::/"], root_fstype="overlay",
                      ngc_vars={"NVIDIA_PYTORCH_VERSION": "25.10"}),
    Distributions(versions={"torch": "2.9.0"}, problems=[
        RequirementProblem("torchvision", "0.24.0", "torch==2.9.0", "torch", "2.8.0")]),
    Baseline(path="/runs/good.json", created="2026-01-01T00:00:00+00:00", versions={"torch": "2.9.0"}),
]


@pytest.mark.parametrize("reading", REAL_READINGS, ids=lambda r: type(r).__name__)
def test_the_suites_readings_round_trip(reading):
    assert through_json(type(reading), reading) == reading


def test_every_registered_reader_returns_a_dataclass():
    specs = readers.load_all()
    assert {"gpu.inventory", "torch.build", "torch.first_launch", "env.cuda_extensions", "env.container",
            "env.distributions", "env.baseline"} <= set(specs)
    not_dataclasses = [key for key, spec in specs.items() if not dataclasses.is_dataclass(spec.returns)]
    assert not not_dataclasses, f"readers must return dataclasses (replay needs the type): {not_dataclasses}"
