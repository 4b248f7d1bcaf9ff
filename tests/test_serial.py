"""Readings survive JSON: what a live run judged is what a replay judges."""

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Optional

import pytest

from spark_gotchas.base.serial import Misfit, from_jsonable, to_jsonable
from spark_gotchas.knowledge.readings.env import (
    Baseline,
    ContainerEvidence,
    Distributions,
    ExtensionScan,
    LinkedExtension,
    RequirementProblem,
)
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.knowledge.readings.torch import FirstLaunch, TorchBuild, TorchDevice
from spark_gotchas.machine import readers


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


# -- every value is checked against its declared type ------------------------------------------------
def misfit(tp, data) -> str:
    with pytest.raises(Misfit) as info:
        from_jsonable(tp, data)
    return str(info.value)


@pytest.mark.parametrize("data, message", [
    ({"driver_version": "580", "cuda_driver_version": "13000"}, "cuda_driver_version: needs int, got string '13000'"),
    ({"devices": [{"index": 0, "capability": "12.1"}]},
     "devices[0].capability: needs tuple[int, int], got string '12.1'"),
    ({"devices": [{"index": 0, "capability": [12, 1, 0]}]},
     "devices[0].capability: needs tuple[int, int] (2 items), got array [12, 1, 0]"),
    ({"devices": [{"index": 0, "capability": [12.0, 1]}]}, "devices[0].capability[0]: needs int, got number 12.0"),
    ({"devices": [{"index": True}]}, "devices[0].index: needs int, got boolean True"),
    ({"devices": [{"index": 0.0}]}, "devices[0].index: needs int, got number 0.0"),
    ({"devices": {"0": {"index": 0}}}, "devices: needs list[GpuDevice], got object {'0': {'index': 0}}"),
    ({"devices": ["NVIDIA GB10"]}, "devices[0]: GpuDevice needs an object, got string 'NVIDIA GB10'"),
    ({"devices": [{"name": "NVIDIA GB10"}]}, "devices[0].index: missing (a GpuDevice always has it)"),
    ({"devices": [{"index": 0, "unavailable": {"power_limit_mw": 5}}]},
     "devices[0].unavailable.power_limit_mw: needs str, got integer 5"),
    ({"nvml_error": ["not", "a", "string"]}, "nvml_error: needs str, got array ['not', 'a', 'string']"),
])
def test_a_value_that_does_not_fit_its_type_is_refused_naming_the_field(data, message):
    assert misfit(GpuInventory, data) == message


def test_numbers_booleans_and_strings_stay_apart():
    def build(**fields):
        return from_jsonable(TorchBuild, {"installed": True, **fields})

    def refused(**fields):
        return misfit(TorchBuild, {"installed": True, **fields})

    # an integer where a float is declared is read as a float; nothing else crosses over
    assert build(import_seconds=3).import_seconds == 3.0 and isinstance(build(import_seconds=3).import_seconds, float)
    assert refused(import_seconds=True) == "import_seconds: needs float, got boolean True"
    assert refused(import_seconds="2.6") == "import_seconds: needs float, got string '2.6'"
    assert misfit(TorchBuild, {"installed": 1}) == "installed: needs bool, got integer 1"
    assert refused(arch_list="sm_90") == "arch_list: needs list[str], got string 'sm_90'"
    assert refused(device_count=1.5) == "device_count: needs int, got number 1.5"


def test_null_fits_optional_and_float_fields_only_and_unknown_keys_are_still_ignored():
    back = from_jsonable(GpuInventory, {"driver_version": None, "devices": [], "added_later": {"x": [1]}})
    assert back.driver_version is None and back.devices == []
    assert misfit(GpuInventory, {"devices": None}) == "devices: needs list[GpuDevice], got null"


def test_a_union_takes_the_first_arm_that_fits_and_refuses_when_none_does():
    base = {"mode": "copy", "inner": {"name": "x"}}
    assert from_jsonable(Outer, {**base, "either": 5}).either == 5
    assert from_jsonable(Outer, {**base, "either": "five"}).either == "five"
    assert misfit(Outer, {**base, "either": [5]}) == "either: needs int | str | null, got array [5]"
    assert misfit(Outer, {**base, "either": True}) == "either: needs int | str | null, got boolean True"
    # Optional[Inner]: the message names the field inside, not just "does not fit"
    assert misfit(Outer, {**base, "maybe": {"name": 5}}) == "maybe.name: needs str, got integer 5"


def test_enums_take_their_own_values_only():
    assert misfit(Outer, {"mode": "fill", "inner": {"name": "x"}}) == "mode: string 'fill' is not one of 'copy', 'triad'"
    assert misfit(Outer, {"mode": ["copy"], "inner": {"name": "x"}}).startswith("mode: array ['copy'] is not one of")


def test_long_or_hostile_values_are_shown_short_and_escaped():
    text = misfit(GpuInventory, {"cuda_driver_version": "\x1b[2J" + "x" * 500})
    assert "\x1b" not in text and "\\x1b[2J" in text and len(text) < 120


def test_numpy_numbers_are_recorded_as_numbers():
    numpy = pytest.importorskip("numpy")
    assert to_jsonable({"n": numpy.int64(7), "x": numpy.float32(0.5), "ok": numpy.bool_(True)}) == \
        {"n": 7, "x": 0.5, "ok": True}
    assert from_jsonable(GpuDevice, json.loads(json.dumps(to_jsonable(GpuDevice(index=numpy.int64(3)))))).index == 3
