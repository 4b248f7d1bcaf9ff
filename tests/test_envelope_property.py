"""Every snapshot the tests build from a profile stays inside that profile's envelope, and one pushed
outside it never PASSes: the check whose reading was pushed says WARN, naming the reading that cannot
come from the platform (``beyond_envelope`` in its readings), and no check of the memory, clocks,
bandwidth or GEMM rates it spoils passes on it.

The snapshots: every snapshot file under tests/fixtures (the recorded H200 and H100 among them: real
machines, so an envelope they break is wrong, not they) but the envelope cases built to be outside;
the GB10, H200 and H100 builders of bench_fakes; and the profiles' own measured figures. The pushes
(generated): a bandwidth method, a GEMM or the G4 load's TFLOP/s, a power limit, a clock, NVML's device
memory or MemTotal past its ceiling, or a CPU architecture or capability the platform has none of.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import bench_fakes as fk
import pytest
from test_fuzz import CHECKS, FUZZ, ReplaySpark

from spark_gotchas.base.serial import to_jsonable
from spark_gotchas.knowledge import profiles
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine import platform
from spark_gotchas.machine.provider import ReadingUnavailable
from spark_gotchas.machine.snapshot import Snapshot
from spark_gotchas.machine.snapshot import load as load_snapshot

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
OUTSIDE = {"gb10-impossible.json", "x86-gb10.json", "gb10-with-h100-bandwidth.json", "gb10-nvfp4-sparse.json",
           "h100-pcie-sxm-power.json"}  # tests/fixtures/envelope: built to be outside
JUDGED = {"test_g3_page_cache", "test_g3_load_headroom", "test_g3_gpu_memory_view", "test_g4_clocks_at_rest",
          "test_g4_clocks_under_load", "test_g5_bandwidth_budget", "test_g5_decode_ceiling",
          "test_g7_nvfp4_vs_fp8_rate"}  # the checks of figures a platform bounds


def fixture_snapshots() -> list[Path]:
    found = []
    for path in sorted(FIXTURES.rglob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("format") == "spark-gotchas-snapshot" and path.name not in OUTSIDE:
            found.append(path)
    return found


def judged(readings: dict, profile: str = "auto", options: dict | None = None) -> tuple[ReplaySpark, list]:
    """Every G3, G4, G5 check and G7's rate check on ``readings``: (the spark, [(check, verdict)])."""
    spark = ReplaySpark(Snapshot(readings=readings, options=options or {}, path="pushed.json"), profile)
    out = []
    for check in CHECKS:
        if check.__name__ not in JUDGED:
            continue
        before = len(spark.verdicts)
        try:
            check(spark)
        except ReadingUnavailable:
            continue
        if len(spark.verdicts) > before:
            out.append((check.__name__, spark.verdicts[-1]))
    return spark, out


@pytest.mark.parametrize("path", fixture_snapshots(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_snapshot_stays_inside_its_profiles_envelope(path):
    snap = load_snapshot(path)
    spark, verdicts = judged(snap.readings, snap.options.get("spark_profile") or "auto", snap.options)
    assert spark.here.beyond is None, spark.here.beyond
    assert [(name, v.line) for name, v in verdicts if "beyond_envelope" in v.readings] == []


def test_the_builders_and_the_profiles_own_figures_stay_inside():
    for result, profile in ((fk.gb10_bandwidth(), profiles.GB10), (fk.h200_bandwidth(), profiles.H200),
                            (fk.h200_bandwidth("4GiB"), profiles.H200)):
        assert profiles.beyond(profile, bandwidth={m.method: m.gbps for m in result.methods}) is None
        assert profiles.beyond(profile, bandwidth={m.method: m.gbps_best for m in result.methods}) is None
    for result, profile in ((fk.gb10_gemm(None), profiles.GB10), (fk.h200_gemm(), profiles.H200)):
        assert profiles.beyond(profile, tflops={r.precision: r.tflops for r in result.results if r.ok}) is None
    for profile in profiles.PROFILES.values():
        for variant in (profile, *(profile.for_device(f"NVIDIA {v.short}") for v in profile.variants)):
            env = variant.envelope
            assert profiles.beyond(variant, bandwidth={m: r.hi for m, r in variant.bandwidth_gbps.items()},
                                   tflops={p: r.hi for p, r in variant.gemm_tflops.items()},
                                   memory={"total": variant.memory_total_bytes},
                                   clocks={"max": variant.max_sm_clock_mhz}) is None, variant.title
            if env.bandwidth_gbps and variant.datasheet_bandwidth_gbps:
                assert variant.datasheet_bandwidth_gbps <= env.bandwidth_gbps, variant.title


# -- pushed outside -------------------------------------------------------------------------------------
def gb10_healthy() -> dict:
    """A Spark's whole set (memory, clocks at rest and under load, bandwidth, GEMM rates), aarch64."""
    doc = json.loads((FIXTURES / "envelope" / "x86-gb10.json").read_text())
    doc["readings"]["host.platform"]["machine"] = "aarch64"
    return doc["readings"]


def h100_pcie_healthy() -> dict:
    doc = json.loads((FIXTURES / "envelope" / "h100-pcie-sxm-power.json").read_text())
    doc["readings"]["thermal.snapshot"]["power_limit_w"] = 350.0
    doc["readings"]["gpu.inventory"]["devices"][0]["power_limit_mw"] = 350_000
    return doc["readings"]


BASES = {
    "gb10": gb10_healthy,
    "h200": lambda: json.loads((FIXTURES / "h200" / "preflight-snapshot.json").read_text())["readings"],
    "h100": lambda: json.loads((FIXTURES / "h100" / "doors-live" / "snapshot.json").read_text())["readings"],
    "h100 pcie": h100_pcie_healthy,
    "gb10 vllm": lambda: json.loads((FIXTURES / "live_state" / "spark-vllm-0.9-plan-40gb.json").read_text())["readings"],
}


def _profile_of(readings: dict) -> profiles.Profile:
    device = readings["gpu.inventory"]["devices"][0]
    return profiles.match(device["name"], tuple(device["capability"]))


def _push(readings: dict, what: str, factor: float, pick: int) -> list[str]:
    """Push one reading past the envelope of the snapshot's profile; the checks it spoils (None: not held)."""
    env = _profile_of(readings).envelope
    r = readings
    if what == "bandwidth" and r.get("bench.bandwidth", {}).get("result"):
        methods = r["bench.bandwidth"]["result"]["methods"]
        method = methods[pick % len(methods)]
        method["gbps"] = env.bandwidth_gbps * factor
        return ["test_g5_bandwidth_budget"]
    if what == "gemm" and r.get("bench.gemm", {}).get("result"):
        ran = [x for x in r["bench.gemm"]["result"]["results"] if x.get("tflops")]
        if ran:
            one = ran[pick % len(ran)]
            if env.peak_tflops.get(one["precision"]):
                one["tflops"] = env.peak_tflops[one["precision"]] * factor
                return ["test_g7_nvfp4_vs_fp8_rate"]
    if what == "load" and r.get("thermal.spot_check", {}).get("tflops"):
        spot = r["thermal.spot_check"]
        spot["tflops"] = env.peak_tflops[spot.get("dtype", "bf16")] * factor
        spot["again"] = None
        return ["test_g4_clocks_under_load"]
    if what == "power" and r.get("thermal.snapshot", {}).get("sample"):
        bound = env.power_limit_w or env.power_draw_w
        r["thermal.snapshot"]["power_limit_w"] = bound * factor
        return ["test_g4_clocks_at_rest"]
    if what == "clock" and r.get("thermal.snapshot", {}).get("sample"):
        r["thermal.snapshot"]["max_sm_clock_mhz"] = env.max_sm_clock_mhz * factor
        return ["test_g4_clocks_at_rest"]
    if what == "device memory":
        device = r["gpu.inventory"]["devices"][0]
        device["memory_total_bytes"] = int(env.device_memory_bytes * factor)
        device["memory_free_bytes"] = int(env.device_memory_bytes * factor * 0.9)
        device["memory_used_bytes"] = int(env.device_memory_bytes * factor * 0.1)
        device.get("unavailable", {}).pop("memory_total_bytes", None)
        return ["test_g3_gpu_memory_view"]
    if what == "MemTotal" and env.host_memory_bytes and r.get("mem.meminfo"):
        r["mem.meminfo"]["mem_total_bytes"] = int(env.host_memory_bytes * factor)
        return ["test_g3_page_cache", "test_g3_load_headroom", "test_g3_gpu_memory_view"]
    if what == "arch":
        other = [a for a in ("x86_64", "aarch64", "ppc64le") if a not in env.arch]
        r["host.platform"] = {"machine": other[pick % len(other)], "source": "uname"}
        return ["test_g3_page_cache", "test_g3_load_headroom", "test_g4_clocks_at_rest", "test_g5_bandwidth_budget"]
    if what == "capability":
        device = r["gpu.inventory"]["devices"][0]
        device["capability"] = [[9, 0], [10, 0], [12, 0], [12, 1]][pick % 4]
        if tuple(device["capability"]) == env.capability:
            device["capability"] = [8, 0]
        return ["test_g3_page_cache", "test_g3_load_headroom", "test_g4_clocks_at_rest", "test_g5_bandwidth_budget"]
    return []


@FUZZ
@given(st.sampled_from(sorted(BASES)),
       st.sampled_from(["bandwidth", "gemm", "load", "power", "clock", "device memory", "MemTotal", "arch",
                        "capability"]),
       st.floats(1.2, 15.0), st.integers(0, 7))
def test_a_reading_pushed_outside_its_envelope_never_passes(base, what, factor, pick):
    readings = copy.deepcopy(BASES[base]())
    spoiled = _push(readings, what, factor, pick)
    hypothesis.assume(spoiled)
    spark, verdicts = judged(readings)
    by_check = dict(verdicts)
    for name in spoiled:
        if name not in by_check:  # the reading this check needs is not in the snapshot
            continue
        verdict = by_check[name]
        assert verdict.status is Status.WARN, (name, verdict.line)
        assert "beyond_envelope" in verdict.readings, (name, verdict.line)
        assert " not a" in verdict.line, verdict.line  # "not a GB10 reading", "not an H100 PCIe's"
    assert [n for n, v in verdicts if n in spoiled and v.status is Status.PASS] == []


def test_the_recorded_machine_stays_when_replayed_on_another():
    snap = load_snapshot(FIXTURES / "h200" / "preflight-snapshot.json")  # recorded before host.platform existed
    spark = ReplaySpark(snap)
    assert spark.provider.read("host.platform").machine == "x86_64"
    assert platform.describe(spark.provider)["machine"] == "x86_64"
    arm = copy.deepcopy(snap.readings)
    arm["host.platform"] = to_jsonable(profiles_host("aarch64"))
    assert platform.describe(ReplaySpark(Snapshot(readings=arm)).provider)["machine"] == "aarch64"


def profiles_host(machine: str):
    from spark_gotchas.knowledge.readings.host import HostPlatform

    return HostPlatform(machine=machine, kernel="6.17.0-1031-nvidia")
