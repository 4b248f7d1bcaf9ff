"""The watch's rules on made-up runs (pure: samples in, lines out): what a user reads as the run goes and
at its end when the GPU throttles, another process joins it, memory runs out, a clock sticks low, and
that a flapping sign is one line, not a storm."""

from __future__ import annotations

from dataclasses import replace

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.profiles import GB10, H100, Machine
from spark_gotchas.knowledge.readings.gpu import DeviceProcessLists, DeviceUse, GpuProcess, GpuProcesses
from spark_gotchas.knowledge.readings.watch import WatchReading, WatchSample
from spark_gotchas.knowledge.verdict import summary_lines
from spark_gotchas.knowledge.watch_judge import Context, Tracker, judge_run

GB = 10**9


def sample(t: float, rate: float | None = 400.0, clock: float = 1980.0, mask: int = 0, util: float = 99.0,
           avail: float = 60 * GB, total: float = 128 * GB, **more) -> WatchSample:
    return WatchSample(t_s=t, epoch_s=1.8e9 + t, sm_clock_mhz=clock, utilization_pct=util, reasons_mask=mask,
                       temperature_c=70.0, power_w=650.0, mem_total_bytes=int(total), mem_available_bytes=int(avail),
                       mem_free_bytes=int(avail), page_cache_bytes=int(2 * GB), swap_used_bytes=0, rate=rate, **more)


def others(*procs: GpuProcess) -> GpuProcesses:
    use = DeviceUse(memory_total_bytes=80 * GB, memory_used_bytes=40 * GB, memory_reserved_bytes=0,
                    listed=len(procs) + 1, listed_bytes=40 * GB)
    return GpuProcesses(devices=[DeviceProcessLists(index=0, use=use)], processes=list(procs), own_on_gpu=1)


INTRUDER = GpuProcess(pid=5123, name="python3", cmdline=["python3", "gemm.py"], gpu_memory_bytes=30 * GB,
                      gpu_devices=[0], nvml_lists=["compute"], username="other")


def play(ctx: Context, samples, gpu=lambda t: others()) -> tuple[Tracker, WatchReading, list[str]]:
    tracker = Tracker(ctx)
    said: list[str] = []
    for s in samples:
        said += tracker.add(s, gpu(s.t_s))
    last = samples[-1]
    reading = WatchReading(mode="child", command=["python", "train.py"], elapsed_s=last.t_s, samples=len(samples),
                           every_s=ctx.every_s, events=tracker.finish(), others=list(tracker.others.values()),
                           rate_values=tracker.rate_values, rate_reference=tracker.rate_reference,
                           rate_last=tracker.rate_now, rate_regex="([0-9.]+) it/s", rate_unit="it/s",
                           mem_total_bytes=last.mem_total_bytes, lowest_available_bytes=last.mem_available_bytes,
                           lowest_available_s=last.t_s, sm_clock_busy_min_mhz=1500.0, sm_clock_busy_max_mhz=1980.0,
                           temperature_max_c=83.0, max_sm_clock_mhz=1980.0)
    return tracker, reading, said


def ctx(profile=H100, **more) -> Context:
    return Context(profile=profile, rate_read=True, rate_unit="it/s", max_sm_clock_mhz=1980.0, **more)


def test_throttling_that_slows_the_job_is_said_as_it_starts_and_blamed_on_cooling_at_the_end():
    run = [sample(t) for t in range(300)] + \
        [sample(t, rate=300.0, clock=1500.0, mask=0x20) for t in range(300, 600)]
    _, reading, said = play(ctx(), run)
    assert said == [
        "G4 WARN 0:05:00 SM clock 1980 -> 1500 MHz, SW thermal slowdown active",
        "G4 FAIL 0:05:00 rate 400 -> 300 it/s (-25%) with SM clock 1980 -> 1500 MHz, SW thermal slowdown active",
    ]
    lines = summary_lines(judge_run(reading, H100))
    g4 = lines.index(next(line for line in lines if line.startswith("G4 ")))
    assert lines[g4] == "G4 FAIL: the rate fell 25% (400 -> 300 it/s) from 0:05:00 for 50% of the run: SW thermal slowdown"
    assert lines[g4 + 1] == ("    fix: improve cooling (clear intake and exhaust, cooler room, nothing stacked on or against "
                        "the unit) or cap run length and checkpoint before throttling sets in (here: before 0:05:00)")
    assert all(len(line) <= 100 for line in lines if not line.startswith("    "))


def test_another_process_joining_takes_the_blame_for_the_fall_not_the_cooling():
    run = [sample(t) for t in range(300)] + [sample(t, rate=200.0) for t in range(300, 600)]
    _, reading, said = play(ctx(), run, gpu=lambda t: others(INTRUDER) if t >= 300 else others())
    assert said[0] == "G6 WARN 0:05:00 pid 5123 python3 joined the GPU (no memory cap, holds 30.0 GB)"
    assert said[1] == "G6 WARN 0:05:00 rate 400 -> 200 it/s (-50%) since pid 5123 python3 joined the GPU"
    assert len(said) == 2
    lines = summary_lines(judge_run(reading, H100))
    g4 = next(line for line in lines if line.startswith("G4 "))
    g6 = next(line for line in lines if line.startswith("G6 "))
    assert g4.startswith("G4 PASS: no throttling over 0:09:59") and "with another process on the GPU (G6)" in g4
    assert g6.startswith("G6 WARN: pid 5123 python3 on the GPU from 0:05:00 for 50% of the run: the rate fell 50%")
    fix = lines[lines.index(g6) + 1]
    assert fix.startswith("    fix: ") and "kill 5123" in fix and "not the cooling" in fix


def test_a_fall_with_no_clock_or_throttle_sign_is_the_jobs_own_never_the_coolings():
    run = [sample(t) for t in range(300)] + [sample(t, rate=250.0) for t in range(300, 400)]
    _, reading, said = play(ctx(), run)
    assert said == ["G4 WARN 0:05:00 rate 400 -> 250 it/s (-38%) with no clock or throttle sign: not the cooling"]
    lines = summary_lines(judge_run(reading, H100))
    g4 = lines.index(next(line for line in lines if line.startswith("G4 ")))
    assert lines[g4].startswith("G4 WARN: the rate fell 38%") and lines[g4].endswith("not the cooling")
    assert "improve cooling" not in lines[g4 + 1]


def test_a_flapping_sign_is_one_line_and_its_end_says_how_long_it_lasted():
    run = [sample(t, mask=0x40 if t % 2 else 0) for t in range(100)] + [sample(t) for t in range(100, 200)]
    _, _, said = play(Context(profile=H100), run)
    assert said == ["G4 WARN 0:00:01 SM clock 1980 MHz, HW thermal slowdown active",
                    "G4 ended 0:02:09 after 0:01:39: no thermal or power-brake event"]


def test_memory_running_out_is_a_g3_warn_with_when_it_was_lowest():
    run = [sample(t, avail=(60 - t * 0.5) * GB, rate=None) for t in range(120)]
    _, reading, said = play(Context(profile=GB10), run)
    assert said == ["G3 WARN 0:01:48 MemAvailable 4.0 GB (3%): the next allocation may be killed"]
    reading = replace(reading, lowest_available_bytes=int(0.5 * GB), lowest_available_s=119.0)
    lines = summary_lines(judge_run(reading, GB10))
    assert lines[:2] == ["G3 WARN: MemAvailable ran low from 0:01:48 for 9% of the run; lowest 0.50 GB at 0:01:59",
                         "    fix: free memory for the job: stop what else holds it (G6 names GPU processes; top -o RES "
                         "the rest), lower the batch size or sequence length, or add swap as a cushion; spark-gotchas "
                         "-m fast --spark-model-gb N checks a plan before the run"]


def test_a_busy_gpu_under_the_floor_is_a_gb10_stuck_in_its_low_power_state():
    run = [sample(t, clock=700.0, rate=None) for t in range(30)]
    _, reading, said = play(Context(profile=GB10, max_sm_clock_mhz=3003.0), run)
    assert said == ["G4 FAIL 0:00:00 SM clock 700 MHz at 99% busy, below the 1400 MHz floor: GPU stuck in its "
                    "low-power state"]
    verdict = judge_run(reading, GB10)[1]
    assert verdict.status.value == "FAIL" and verdict.fix.startswith("power-cycle the Spark fully")


def test_a_profile_asked_for_on_another_machine_judges_nothing_of_its_live_state():
    elsewhere = Machine(is_profile=False, device="NVIDIA H100 80GB HBM3")
    run = [sample(t, mask=0x20, avail=GB) for t in range(30)]
    _, reading, said = play(Context(profile=GB10, here=elsewhere), run)
    assert said == []
    assert summary_lines(judge_run(reading, GB10, elsewhere)) == [
        "G3 INFO: not a GB10 (NVIDIA H100 80GB HBM3): memory not judged",
        "G4 INFO: not a GB10 (NVIDIA H100 80GB HBM3): clocks not judged",
        "G6 INFO: not a GB10 (NVIDIA H100 80GB HBM3): processes not judged"]


def test_a_replayed_reading_gives_the_lines_the_run_gave():
    run = [sample(t) for t in range(300)] + [sample(t, rate=200.0) for t in range(300, 600)]
    _, reading, _ = play(ctx(), run, gpu=lambda t: others(INTRUDER) if t >= 300 else others())
    again = from_jsonable(WatchReading, to_jsonable(reading))
    assert summary_lines(judge_run(again, H100)) == summary_lines(judge_run(reading, H100))


def test_a_clock_that_falls_with_another_processs_load_is_its_doing_not_throttling():
    """Two loads meet the power cap sooner: the SM clock falls with the SW power cap active (no
    thermal reason), and the rate with it; the process that joined takes the blame, not the cooling."""
    run = [sample(t) for t in range(300)] + [sample(t, rate=220.0, clock=1700.0, mask=0x4) for t in range(300, 600)]
    _, reading, said = play(ctx(), run, gpu=lambda t: others(INTRUDER) if t >= 300 else others())
    assert said == ["G6 WARN 0:05:00 pid 5123 python3 joined the GPU (no memory cap, holds 30.0 GB)",
                    "G6 WARN 0:05:00 rate 400 -> 220 it/s (-45%) since pid 5123 python3 joined the GPU"]
    verdicts = {v.gotcha: v for v in judge_run(reading, H100)}
    assert verdicts[4].status.value == "PASS" and verdicts[6].status.value == "WARN"
    assert "cooling" not in verdicts[4].summary + verdicts[6].fix.replace("not the cooling", "")


def test_a_fall_the_job_recovered_from_shortly_before_the_end_ends_where_the_rate_came_back():
    """On the H100: a GEMM joined at 1:23 and left at 2:14, the run ended at 2:49, before the rate had been
    back for the 30 samples a state needs to be said ended. Its span ends where the rate came back (as
    the plot shades it), not at the end of the run."""
    run = [sample(t) for t in range(80)] + [sample(t, rate=150.0) for t in range(80, 130)] + \
        [sample(t) for t in range(130, 170)]
    tracker, reading, _ = play(ctx(), run, gpu=lambda t: others(INTRUDER) if 80 <= t < 130 else others())
    drop = next(e for e in reading.events if e.kind == "rate_drop")
    assert drop.end_s is not None and 130 <= drop.end_s < 160
