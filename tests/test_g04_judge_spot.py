"""G4 at rest and under the 3 s load: verdicts on recorded GB10/H200 figures and their edge cases."""

import json
from dataclasses import replace
from pathlib import Path

from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.profiles import GB10, GENERIC, H200, Machine
from spark_gotchas.knowledge.readings.gpu import GpuProcess, GpuProcesses, MeasureWindow
from spark_gotchas.knowledge.readings.thermal import ClockCounters, SpotCheck, ThermalSample, ThermalSnapshot
from spark_gotchas.knowledge.verdict import Status

FIXTURES = Path(__file__).parent / "fixtures" / "g04"
H200_FACTS = json.loads((FIXTURES / "h200-nvml.json").read_text())


def spot(clock=1980.0, power=690.0, temp=62.0, util=100.0, mask=0, busy=0.99, before=None, after=None, **kw):
    samples = [ThermalSample(t_s=0.1 * i, temperature_c=temp, power_w=power, sm_clock_mhz=clock, utilization_pct=util,
                             reasons_mask=mask) for i in range(35)]
    base = dict(attempted=True, device="NVIDIA H200", size=8192, load_start_s=0.5, load_end_s=3.0, tflops=720.0,
                busy_fraction=busy, samples=samples, max_sm_clock_mhz=1980.0, power_limit_w=700.0,
                counters_before=ClockCounters(values_us=before or {}), counters_after=ClockCounters(values_us=after or {}))
    base.update(kw)
    return SpotCheck(**base)


def gb10_spot(clock=2450.0, power=62.0, **kw):
    """A GB10's load: its name, its 3003 MHz maximum, no power limit (NVML reports none), a BF16 rate it reaches."""
    return spot(clock=clock, power=power, **{"device": "NVIDIA GB10", "max_sm_clock_mhz": 3003.0, "power_limit_w": None,
                                             "tflops": 95.0, **kw})


def test_h200_at_rest_from_its_recorded_nvml_values_is_information():
    f = H200_FACTS
    snap = ThermalSnapshot(index=0, name=f["nvmlDeviceGetName"], power_limit_w=f["nvmlDeviceGetEnforcedPowerLimit_mw"] / 1000,
                           max_sm_clock_mhz=1980.0, slowdown_temp_c=f["nvmlDeviceGetTemperatureThreshold_c"],
                           sample=ThermalSample(t_s=0.0, temperature_c=f["nvmlDeviceGetTemperature_c"],
                                                power_w=f["nvmlDeviceGetPowerUsage_mw"] / 1000, sm_clock_mhz=1980.0,
                                                reasons_mask=f["nvmlDeviceGetCurrentClocksEventReasons"]),
                           counters=ClockCounters(values_us={"sw_power_cap": 0.0, "thermal": 0.0}))
    v = g04.judge_snapshot(snap, H200)
    assert v.line == "G4 INFO: at rest: 39 °C, 87.3 W of 700 W limit, SM 1980 MHz of 1980 max"
    assert v.detail == "since the driver loaded: SW power cap 0 s, thermal (NVML policy) 0 s"


def test_a_thermal_reason_active_at_rest_warns():
    snap = ThermalSnapshot(index=0, name="NVIDIA GB10", max_sm_clock_mhz=3003.0,
                           sample=ThermalSample(t_s=0.0, temperature_c=88.0, power_w=20.0, sm_clock_mhz=900.0,
                                                reasons_mask=0x1 | 0x40))
    v = g04.judge_snapshot(snap, GB10)
    assert v.status is Status.WARN
    assert v.line == "G4 WARN: throttling at rest: HW thermal slowdown active"
    assert v.detail == "88 °C, 20.0 W (no power limit reported), SM 900 MHz of 3003 max"
    assert v.fix.startswith("improve cooling")


def test_at_or_above_a_real_slowdown_threshold_warns_but_gb10s_negative_one_is_ignored():
    hot = ThermalSnapshot(index=0, slowdown_temp_c=89.0, sample=ThermalSample(t_s=0.0, temperature_c=90.0))
    assert g04.judge_snapshot(hot, H200).line.startswith("G4 WARN: throttling at rest: at or above the 89 °C slowdown")
    gb10 = ThermalSnapshot(index=0, slowdown_temp_c=-2.0, sample=ThermalSample(t_s=0.0, temperature_c=38.0))
    assert g04.judge_snapshot(gb10, GB10).status is Status.INFO


def test_healthy_h200_under_load_passes_against_half_its_max_clock():
    v = g04.judge_spot_check(spot(mask=0x4, before={"sw_power_cap": 0.0}, after={"sw_power_cap": 2e6}), H200)
    assert v.line == "G4 PASS: 1980 MHz under load (floor 990), 720 TFLOP/s, no throttling"
    assert v.detail == ("2.5 s of BF16 GEMM (8192^3): SM clock 1980 MHz, 690 W, 62 °C, 720.0 TFLOP/s, "
                        "floor 990 MHz; no thermal or power-brake event; SW power cap engaged (at its power limit)")


def test_gb10_power_brake_counter_growing_under_load_warns_even_with_a_zero_mask():
    v = g04.judge_spot_check(gb10_spot(clock=2450.0, power=98.0, before={"hw_power_brake": 0.0, "sw_power_cap": 1e6},
                                       after={"hw_power_brake": 12000.0, "sw_power_cap": 3e6}), GB10)
    assert v.status is Status.WARN
    assert v.line == "G4 WARN: throttling under load: HW power brake +12 ms"
    assert v.detail.startswith("2.5 s of BF16 GEMM (8192^3): SM clock 2450 MHz")


def test_an_active_thermal_reason_under_load_warns():
    v = g04.judge_spot_check(gb10_spot(clock=2300.0, power=98.0, mask=0x20), GB10)
    assert v.line == "G4 WARN: throttling under load: SW thermal slowdown active"
    assert v.detail.startswith("2.5 s of BF16 GEMM (8192^3): SM clock 2300 MHz")


def test_a_load_too_light_is_inconclusive():
    v = g04.judge_spot_check(gb10_spot(clock=700.0, busy=0.35), GB10)
    assert v.status is Status.INFO
    assert v.line == "G4 INFO: inconclusive: the load kept the GPU busy only 35% (needs 80%)"
    assert v.detail.startswith("2.5 s of BF16 GEMM (8192^3): SM clock 700 MHz")


def test_without_clock_readings_the_spot_check_skips_with_the_reason():
    reading = gb10_spot(samples=[ThermalSample(t_s=1.0)], unavailable={"sm_clock_mhz": "Not Supported"})
    v = g04.judge_spot_check(reading, GB10)
    assert v.line == "G4 SKIP: no SM clock read under load (Not Supported)"
    assert v.detail == "2.5 s of BF16 GEMM (8192^3) ran at 95.0 TFLOP/s"


def test_a_gpu_without_profile_or_max_clock_is_not_held_to_a_floor():
    assert g04.judge_spot_check(spot(clock=300.0, max_sm_clock_mhz=None), GENERIC).status is Status.PASS


# -- measured rate against the profile, and a profile that is not this machine ---------------------------
ENGINE = GpuProcess(pid=6008, name="VLLM::EngineCore", cmdline=["VLLM::EngineCore"], gpu_memory_bytes=56501 << 20,
                    gpu_devices=[0], nvml_lists=["compute"])


def test_a_gb10_rate_far_below_its_figure_with_healthy_clocks_names_the_busy_server():
    v = g04.judge_spot_check(gb10_spot(clock=2450.0, power=62.0, temp=63.0, tflops=52.4), GB10,
                             GpuProcesses(processes=[ENGINE]))
    assert v.line == ("G4 WARN: 52.4 TFLOP/s at 2450 MHz, far below GB10's 94-98: pid 6008 VLLM::EngineCore busy "
                      "(see G6)")
    assert v.detail == "2.5 s of BF16 GEMM (8192^3): SM clock 2450 MHz, 62 W, 63 °C, 52.4 TFLOP/s"
    assert v.fix == "stop or pause pid 6008 VLLM::EngineCore (G6 says how), then re-run spark-gotchas -m fast -k g04"
    assert v.readings["expected_tflops"] == [94.0, 98.0] and v.readings["busy_pids"] == [6008]


def test_a_gb10_rate_far_below_with_nothing_else_running_twice_points_at_the_driver_or_hardware():
    nobody = MeasureWindow(what="G4 spot check's load", t_start_epoch=1.0, t_end_epoch=3.0, samples=20)
    slow = replace(gb10_spot(clock=2450.0, power=62.0, tflops=40.0), window=nobody)
    v = g04.judge_spot_check(replace(slow, again=replace(slow, tflops=41.0)), GB10, GpuProcesses(scanned=300))
    assert v.line == "G4 WARN: 41.0 TFLOP/s at 2450 MHz, far below GB10's 94-98; nothing else on the GPU, twice"
    assert v.fix == ("update or reinstall the NVIDIA driver and re-run (nothing else ran on the GPU during either load); "
                     "if the rate stays low with healthy clocks, contact NVIDIA support: the GPU or its cooling needs "
                     "service")
    assert v.detail.endswith("; measured twice: the first load ran at 40.0 TFLOP/s")
    once = g04.judge_spot_check(slow, GB10)
    assert once.line == "G4 WARN: 40.0 TFLOP/s at 2450 MHz, far below GB10's 94-98; nothing else on the GPU, measured once"
    assert once.fix == ("re-run spark-gotchas -m fast -k g04: this rate was measured once; if it stays far below with "
                        "healthy clocks and nothing else on the GPU, update or reinstall the NVIDIA driver")
    unread = g04.judge_spot_check(gb10_spot(clock=2450.0, power=62.0, tflops=40.0), GB10, GpuProcesses(scanned=300))
    assert unread.summary.endswith("other GPU work unknown, measured once") and unread.status is Status.WARN
    assert "NVIDIA support" not in unread.fix


def test_a_rate_within_reach_of_the_figure_passes_and_a_profile_without_one_is_not_judged():
    assert g04.judge_spot_check(gb10_spot(clock=2450.0, power=62.0, tflops=70.0), GB10, GpuProcesses()).status is Status.PASS
    assert g04.judge_spot_check(spot(clock=1900.0, tflops=10.0), GENERIC, GpuProcesses()).status is Status.PASS


def test_a_clock_stuck_low_is_still_the_finding_before_the_rate():
    v = g04.judge_spot_check(gb10_spot(clock=600.0, power=13.0, tflops=23.2), GB10, GpuProcesses(processes=[ENGINE]))
    assert v.status is Status.FAIL and "GPU stuck in its low-power state" in v.summary


def test_an_h200_judged_as_a_gb10_says_its_clocks_stand_for_nothing():
    v = g04.judge_spot_check(spot(), GB10, GpuProcesses(), Machine(is_profile=False, device="NVIDIA H200"))
    assert v.line == "G4 INFO: not a GB10 (NVIDIA H200): clocks not judged"
    assert v.detail == "this machine is not a GB10 (NVIDIA H200): its clocks under load cannot stand for a Spark's"
    nothing = SpotCheck(attempted=False, reason="torch 2.13.0+cpu is a CPU build")
    assert g04.judge_spot_check(nothing, GB10, None, Machine(False, "no GPU")).status is Status.INFO
