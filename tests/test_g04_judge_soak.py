"""G4 soak verdicts on synthetic series: what a user reads after an hour-long run."""

import pytest
from g04_fakes import series, soak_reading

from spark_gotchas.base.units import hms
from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.profiles import GB10, GENERIC, H200
from spark_gotchas.knowledge.readings.thermal import SoakReading
from spark_gotchas.knowledge.verdict import Status


def test_healthy_gb10_passes_with_power_vs_the_brick_max_temperature_and_clock_range():
    v = g04.judge_soak(soak_reading(series()), GB10)
    assert v.status is Status.PASS
    assert v.line == "G4 PASS: 0:03:00 of BF16 GEMM held its throughput: 95.0 -> 95.0 TFLOP/s (+0.0%)"
    assert v.detail == ("sustained 98 W vs the 240 W brick (a Spark's GPU rail settles near 100 W); max 70 °C; "
                        "SM clock 2435-2465 MHz")
    assert v.readings["sustained_power_w"] == 98.0 and v.readings["rated_power_w"] == 240.0


def test_gb10_stuck_at_700_mhz_fails_with_the_ac_power_cycle_fix():
    v = g04.judge_soak(soak_reading(series(clock=lambda i: 700.0, tflops=lambda i: 27.0)), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: SM clock 700 MHz over the soak, below the 1400 MHz floor: GPU stuck in its low-power state"
    assert v.detail == "SM clock 700 MHz over 0:03:00 of sustained load, below the 1400 MHz floor (gb10 profile)"
    assert "unplug AC power for about 60 s" in v.fix


def test_slow_thermal_throttle_fails_naming_the_counter_the_clock_and_when_it_began():
    windows = series(tflops=lambda i: 95.0 if i < 12 else 95.0 - (i - 12) * 0.8,
                     clock=lambda i: 2450.0 if i < 12 else 2450.0 - (i - 12) * 20,
                     deltas=lambda i: {"sw_thermal": 0.0 if i < 12 else 2e6, "sw_power_cap": 4e6})
    v = g04.judge_soak(soak_reading(windows), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: throughput fell 19% from 0:01:30 on: SW thermal slowdown counter +48.0 s from 0:01:00"
    assert v.detail.startswith("throughput fell 19% (95.0 -> 76.6 TFLOP/s, more than 10%), from 0:01:30 on; "
                               "cause: SW thermal slowdown counter +48.0 s from 0:01:00; SM clock 2450 -> 1990 MHz")
    assert v.fix.startswith("improve cooling") and "cap run length" in v.fix


def test_power_plateau_and_rising_temperature_alone_do_not_fail_a_healthy_spark():
    v = g04.judge_soak(soak_reading(series(temp=lambda i: 55.0 + i * 0.8)), GB10)
    assert v.status is Status.PASS
    assert "temperature still rising at the end" in v.detail


def test_power_plateau_and_rising_temperature_count_when_throughput_falls_with_them():
    windows = series(temp=lambda i: 55.0 + i * 0.8, tflops=lambda i: 95.0 - i * 0.5)
    v = g04.judge_soak(soak_reading(windows), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: throughput fell 18% from 0:00:50 on: power flat at 98 W, temperature up 55 -> 83 °C"
    assert "cause: power flat at 98 W (41% of the 240 W brick) while the temperature kept rising (55 -> 83 °C)" in v.detail


def test_a_fall_without_any_throttle_evidence_is_a_warning_not_a_thermal_fail():
    windows = series(tflops=lambda i: 700.0 - i * 4, clock=lambda i: 1900.0, power=lambda i: 690.0)
    v = g04.judge_soak(soak_reading(windows, device="NVIDIA H200", power_limit_w=700.0, max_sm_clock_mhz=1980.0), H200)
    assert v.status is Status.WARN
    assert v.line == "G4 WARN: throughput fell 20% from 0:00:45 on, with no sign of throttling"
    assert v.detail.endswith("with no clock fall or throttle reason/counter: something else slowed the load")
    assert v.fix == ("look for other GPU or CPU jobs that ran during the soak (G6, nvidia-smi, top), stop them, then "
                     "run the soak again")


def test_a_rising_power_cap_share_is_throttle_evidence():
    windows = series(tflops=lambda i: 95.0 - i * 0.5,
                     deltas=lambda i: {"sw_power_cap": 1e6 if i < 12 else 4.5e6}, temp=lambda i: 60.0)
    v = g04.judge_soak(soak_reading(windows), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: throughput fell 18% from 0:00:50 on: SW power cap engaged 20% -> 90% of the time"
    assert "cause: SW power cap engaged 90% of the time at the end vs 20% at first" in v.detail


def test_an_active_hw_thermal_reason_is_named_with_its_onset():
    windows = series(tflops=lambda i: 95.0 if i < 20 else 80.0, mask=lambda i: 0x40 if i >= 20 else 0,
                     temp=lambda i: 60.0)
    v = g04.judge_soak(soak_reading(windows), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: throughput fell 16% from 0:01:40 on: HW thermal slowdown active from 0:01:40"
    assert "from 0:01:40 on; cause: HW thermal slowdown active from 0:01:40" in v.detail


def test_throttle_events_without_a_fall_are_mentioned_in_the_pass():
    windows = series(deltas=lambda i: {"hw_thermal": 4e5} if i == 30 else {}, temp=lambda i: 60.0)
    v = g04.judge_soak(soak_reading(windows), GB10)
    assert v.status is Status.PASS
    assert "without a throughput fall: HW thermal slowdown counter +400 ms from 0:02:30" in v.detail


def test_a_load_too_light_is_inconclusive_not_pass():
    v = g04.judge_soak(soak_reading(series(busy=0.4)), GB10)
    assert v.status is Status.INFO
    assert v.line == "G4 INFO: inconclusive: the load kept the GPU busy only 40% of the soak (needs 80%)"
    assert v.detail == "95.0 -> 95.0 TFLOP/s"


def test_nvml_utilization_can_show_the_load_too_light():
    windows = series()
    for w in windows:
        w.utilization_mean_pct = 55.0
    assert g04.judge_soak(soak_reading(windows), GB10).line.startswith("G4 INFO: inconclusive: the load kept the GPU busy only 55%")


def test_an_interrupted_run_is_judged_on_what_it_measured_and_cannot_pass():
    reading = soak_reading(series(n=150), end_reason="cut short by SIGINT", interrupted=True, elapsed_s=754.0,
                           planned_s=10800.0)
    v = g04.judge_soak(reading, GB10)
    assert v.status is Status.WARN
    assert v.line == "G4 WARN: cut short by SIGINT after 0:12:34 of 3:00:00; 0:12:34 of BF16 GEMM held over what ran"
    assert v.detail.startswith("95.0 -> 95.0 TFLOP/s (+0.0%); sustained 98 W vs the 240 W brick")
    assert v.fix == ("run the soak again for its whole planned length (spark-gotchas -m soak --soak-duration 3h) "
                     "before trusting a long run to this machine")


@pytest.mark.parametrize("elapsed_s", [30.0, 32.0, 3600.0])
def test_a_soak_that_ran_its_whole_duration_is_not_cut_short_whenever_the_signal_came(elapsed_s):
    """A loaded box finishes its last window late and a Ctrl-C lands then: 0:00:32 of 0:00:30 ran, so
    nothing was cut short and the line says what held, as for a completed soak."""
    reading = soak_reading(series(n=6), end_reason="cut short by SIGINT", interrupted=True, elapsed_s=elapsed_s,
                           planned_s=30.0)
    v = g04.judge_soak(reading, GB10)
    assert not reading.cut_short and reading.completed
    assert v.status is Status.PASS and "cut short" not in v.line
    assert v.line == f"G4 PASS: {hms(elapsed_s)} of BF16 GEMM held its throughput: 95.0 -> 95.0 TFLOP/s (+0.0%)"


def test_the_engine_calls_a_late_signal_no_cut():
    from types import SimpleNamespace

    from spark_gotchas.runtime.soak.engine import how_it_ended

    whole = SimpleNamespace(ok=True, value={"stopped_early": False}, problem="")
    stopped = SimpleNamespace(ok=True, value={"stopped_early": True}, problem="")
    failed = SimpleNamespace(ok=False, value=None, problem="worker crashed (SIGSEGV)")
    assert how_it_ended(whole, "SIGINT") == "completed"
    assert how_it_ended(stopped, "SIGINT") == "cut short by SIGINT"
    assert how_it_ended(whole, None) == how_it_ended(stopped, None) == "completed"
    assert how_it_ended(failed, "SIGTERM") == "load failed: worker crashed (SIGSEGV)"


def test_an_interrupted_run_still_fails_on_a_fall():
    reading = soak_reading(series(n=20, tflops=lambda i: 95.0 - i, clock=lambda i: 2450.0 - 40 * i),
                           end_reason="cut short by SIGTERM", interrupted=True, elapsed_s=100.0, planned_s=28800.0)
    v = g04.judge_soak(reading, GB10)
    assert v.status is Status.FAIL and v.line.startswith("G4 FAIL: cut short by SIGTERM after 0:01:40 of 8:00:00; throughput fell")


def test_a_run_cut_short_before_a_full_window_is_too_short_to_judge():
    reading = soak_reading(series(n=1, window_s=5.0), end_reason="cut short by SIGINT", interrupted=True,
                           elapsed_s=3.0, planned_s=1800.0)
    reading.windows[0].seconds = 1.0
    v = g04.judge_soak(reading, GB10)
    assert v.line == ("G4 INFO: cut short by SIGINT after 0:00:03 of 0:30:00; too short to judge: "
                      "no full 5 s load window measured")


def test_a_record_without_end_marker_says_so():
    reading = soak_reading(series(n=10), end_reason="no end marker: the run was killed or the machine lost power")
    v = g04.judge_soak(reading, GB10)
    assert v.line == "G4 PASS: no end marker (after 0:00:50); 0:00:50 of BF16 GEMM held its throughput"
    assert v.detail.startswith("no end marker: the run was killed or the machine lost power; 95.0 -> 95.0 TFLOP/s "
                               "(+0.0%); sustained 98 W")


def test_load_failures():
    early = soak_reading([], end_reason="load failed: CUDA out of memory", load_problem="CUDA out of memory")
    assert g04.judge_soak(early, GB10).line == "G4 SKIP: the soak's load could not start: CUDA out of memory"
    late = soak_reading(series(n=6), end_reason="load failed: child process killed by SIGSEGV",
                        load_problem="child process killed by SIGSEGV", elapsed_s=31.0)
    v = g04.judge_soak(late, GB10)
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: the soak's load failed after 0:00:31: child process killed by SIGSEGV"
    assert "xid" in v.fix


def test_not_run_is_a_skip_with_the_reason():
    v = g04.judge_soak(SoakReading(attempted=False, reason="torch 2.13.0+cpu is a CPU build"), GB10)
    assert v.line == "G4 SKIP: soak not run: torch 2.13.0+cpu is a CPU build"


def test_the_fraction_is_configurable_and_recorded_in_the_reading():
    windows = series(tflops=lambda i: 95.0 - i * 0.2, clock=lambda i: 2450.0 - 4 * i)  # 7% fall
    assert g04.judge_soak(soak_reading(windows), GB10).status is Status.PASS
    assert g04.judge_soak(soak_reading(windows, max_drop_fraction=0.05), GB10).status is Status.FAIL
    assert g04.judge_soak(soak_reading(windows), GB10, max_drop=0.05).status is Status.FAIL


@pytest.mark.parametrize("profile, max_clock, expected", [
    (GB10, 3003.0, (1400.0, "gb10 profile")),
    (H200, 1980.0, (990.0, "half the 1980 MHz max")),
    (GENERIC, 2100.0, (1050.0, "half the 2100 MHz max")),
    (GENERIC, None, (None, "no max clock known")),
])
def test_clock_floor_per_profile(profile, max_clock, expected):
    assert g04.clock_floor(profile, max_clock) == expected


def test_h200_below_half_its_max_clock_fails_without_the_spark_fix():
    windows = series(clock=lambda i: 900.0, tflops=lambda i: 300.0, power=lambda i: 300.0)
    v = g04.judge_soak(soak_reading(windows, device="NVIDIA H200", max_sm_clock_mhz=1980.0), H200)
    assert v.line == "G4 FAIL: SM clock 900 MHz over the soak, below the 990 MHz floor: clocks held far below max"
    assert v.status is Status.FAIL and v.detail == ("SM clock 900 MHz over 0:03:00 of sustained load, below the 990 MHz "
                                                    "floor (half the 1980 MHz max)")
    assert "AC power" not in v.fix and "nvidia-smi -q -d CLOCK,POWER" in v.fix


def test_long_runs_report_hours():
    assert hms(28800) == "8:00:00" and hms(754) == "0:12:34" and hms(None) == "0:00:00"
