"""The G4 soak engine, end to end with a fake GPU here and a fake load in a real worker.

What a user must be able to trust: every sample is on disk at once, Ctrl-C/SIGTERM stop the
load and still judge, a crash of the load is a verdict, a SIGKILL leaves a whole CSV, the
CSV alone gives back the run's verdict, and the plot is there (or the run says why not).
"""

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from g04_fakes import FakeGpu, FakeNvml, install, ramp, series, soak_reading
from needs import requires_matplotlib, requires_torch

from spark_gotchas.commands import cli
from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.profiles import GB10, Profile
from spark_gotchas.knowledge.readings.torch import TorchBuild
from spark_gotchas.machine import nvml
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.provider import Provider
from spark_gotchas.machine.readers import ReadContext
from spark_gotchas.machine.readers.thermal import snapshot
from spark_gotchas.machine.readers.thermal.reboot import HEARTBEAT_NAME, check_heartbeat, load_heartbeat
from spark_gotchas.outputs.soak_finish import finish
from spark_gotchas.runtime.soak import engine
from spark_gotchas.runtime.soak.plot import NO_MATPLOTLIB, plot_soak
from spark_gotchas.runtime.soak.record import COLUMNS, NO_END, read_csv
from spark_gotchas.runtime.worker import Worker

HERE = Path(__file__).parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
CUDA_TORCH = TorchBuild(installed=True, version="2.11.0+cu130", cuda="13.0", compiled_with_cuda=True,
                        cuda_available=True, device_count=1)


@pytest.fixture
def gpu(monkeypatch):
    """A fake GB10 warming up: temperature and the power-cap counter grow as they are read."""
    monkeypatch.setattr(nvml, "_STATE", dict(nvml._STATE))
    monkeypatch.setattr(snapshot, "smi_counters", lambda index: ({}, "nvidia-smi not found"))
    fake = FakeNvml(FakeGpu(temperature_c=ramp(55, 0.05), power_cap_ns=ramp(0, 2e7)))
    install(fake)
    return fake.gpus[0]


@pytest.fixture
def worker():
    w = Worker(preload=(), env=ENV)
    w.call("worker_tasks:count", {"n": 0})  # up and serving before any signal is sent
    yield w
    w.close()


def plan(tmp_path, duration_s, **load_args):
    return engine.SoakPlan(duration_s=duration_s, soak_dir=tmp_path, stem="g4-soak-test", window_s=0.25,
                         sample_interval_s=0.05, progress_every_s=0.5, load_task="g04_fakes:fake_load",
                         load_args={"dtype": "bf16", **load_args})


def run(worker, gpu, p, said):
    t0 = time.time()
    source = engine.SampleSource(gpu, 0, t0, smi=None)
    return engine.run_soak(worker, p, source, t0, said.append,
                         {"device": "NVIDIA GB10", "max_sm_clock_mhz": 3003.0, "power_limit_w": None})


def test_a_soak_records_samples_and_windows_and_its_csv_gives_back_the_verdict(tmp_path, gpu, worker):
    said = []
    reading = run(worker, gpu, plan(tmp_path, 1.2), said)
    assert reading.end_reason == "completed" and not reading.interrupted and reading.attempted
    # 1.2 s of 0.25 s windows makes five, but a busy machine's late windows may leave room for four
    assert len(reading.windows) >= 4 and reading.samples >= 20 and reading.sampler_errors == 0
    w = reading.windows[2]
    assert w.samples >= 3 and w.temperature_max_c > 55 and w.sm_clock_median_mhz == 2450.0
    assert w.counter_deltas_us["sw_power_cap"] > 0 and w.worker_rss_bytes == 1_000_000
    assert re.fullmatch(r"G4 soak 0:00:00 / 0:00:01: first window 5\d °C, 98 W, SM 2450 MHz, 95.0 TFLOP/s "
                        r"\(drift is measured against it\)", said[0]), said[0]
    assert any("left): " in line and "(+0.0% vs first window)" in line for line in said[1:])
    record = read_csv(reading.csv_path)
    assert record.torn_lines == 0 and record.reading.end_reason == "completed"
    assert record.reading.samples == reading.samples
    assert [x.tflops for x in record.reading.windows] == [x.tflops for x in reading.windows]
    assert [x.counter_deltas_us for x in record.reading.windows] == [x.counter_deltas_us for x in reading.windows]
    live, replayed = g04.judge_soak(reading, GB10), g04.judge_soak(record.reading, GB10)
    assert live.line == replayed.line and live.status.value == "PASS"
    beat, error = load_heartbeat(tmp_path / HEARTBEAT_NAME)
    assert error is None and beat.end_reason == "completed" and beat.samples == reading.samples
    assert beat.csv_path == reading.csv_path


def test_a_throttling_soak_fails_live_and_from_its_csv(tmp_path, gpu, worker):
    gpu.values["sm_clock_mhz"] = ramp(2500, -20)  # the clock sags as the run goes on
    falling = [95.0 - 3 * i for i in range(40)]
    reading = run(worker, gpu, plan(tmp_path, 1.2, tflops=falling), [])
    v = g04.judge_soak(reading, GB10)
    assert v.status.value == "FAIL" and "throughput fell" in v.line and "SM clock" in v.line
    assert g04.judge_soak(read_csv(reading.csv_path).reading, GB10).line == v.line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_load_closes_the_csv_and_the_run_is_judged(tmp_path, gpu, worker, sig):
    before = signal.getsignal(sig)
    timer = threading.Timer(0.8, os.kill, (os.getpid(), sig))
    timer.start()
    t = time.monotonic()
    try:
        reading = run(worker, gpu, plan(tmp_path, 60.0), [])
    finally:
        timer.cancel()
    assert time.monotonic() - t < 15  # not the 60 s planned
    name = signal.Signals(sig).name
    assert reading.end_reason == f"cut short by {name}" and reading.interrupted
    assert signal.getsignal(sig) is before  # the handler is given back
    last = Path(reading.csv_path).read_text().splitlines()[-1]
    assert last.startswith("end,") and f"cut short by {name}" in last
    v = g04.judge_soak(reading, GB10)
    assert v.line.startswith(f"G4 WARN: cut short by {name} after 0:00:01 of 0:01:00; ")
    assert load_heartbeat(tmp_path / HEARTBEAT_NAME)[0].end_reason == f"cut short by {name}"


def test_a_load_that_crashes_mid_soak_is_a_fail_with_the_data_kept(tmp_path, gpu, worker):
    reading = run(worker, gpu, plan(tmp_path, 30.0, crash_after=3), [])
    assert reading.end_reason == "load failed: child process killed by SIGSEGV"
    assert len(reading.windows) == 3
    v = g04.judge_soak(reading, GB10)
    assert v.line.startswith("G4 FAIL: the soak's load failed after 0:00:0") and v.line.endswith("killed by SIGSEGV")
    assert read_csv(reading.csv_path).reading.end_reason == reading.end_reason


def test_a_sigkilled_soak_leaves_a_whole_csv_and_the_next_run_knows(tmp_path):
    child = subprocess.Popen([sys.executable, str(HERE / "g04_fakes.py"), str(tmp_path)], env=ENV,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        csv_path = tmp_path / "g4-soak-kill.csv"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and csv_path.read_text().count("\n") < 60:
            time.sleep(0.05)
    finally:
        child.kill()  # SIGKILL: no handler, no end line
        child.wait(10)
    text = csv_path.read_text()
    lines = text.splitlines()
    assert len(lines) >= 60 and text.endswith("\n")
    assert all(len(line.split(",")) == len(COLUMNS) for line in lines)
    record = read_csv(csv_path)
    assert record.torn_lines == 0 and record.reading.end_reason == NO_END
    assert record.reading.samples >= 40 and len(record.reading.windows) >= 3
    judged = g04.judge_soak(record.reading, GB10)
    assert re.fullmatch(r"G4 PASS: no end marker \(after 0:00:0(\d)\); 0:00:0\1 of BF16 GEMM held its throughput",
                        judged.line)
    assert judged.detail.startswith(f"{NO_END}; 95.0 -> 95.0 TFLOP/s (+0.0%); ")
    check = check_heartbeat(tmp_path / HEARTBEAT_NAME)  # same boot, process gone
    assert check.heartbeat.end_reason is None and check.soak_pid_alive is False
    v = g04.judge_reboot(check)
    assert v.line.startswith("G4 INFO: the last soak was killed at about ")
    assert v.line.endswith(" UTC (no end marker, no reboot)")
    assert v.detail.endswith(f"; its CSV keeps what it measured ({csv_path})")


@dataclass
class LiveCheck:
    """What the soak's last step uses of the checks' ``spark`` fixture, in a live run."""

    provider: Provider
    say: Callable[[str], None]
    add_artifact: Callable[[str, str], None]
    live: bool = True
    profile: Profile = GB10


@requires_torch
@requires_matplotlib
def test_the_soak_check_judges_the_reading_then_plots_titled_with_the_verdict(tmp_path, gpu, worker, monkeypatch):
    """The reading as a run takes it (the provider calls the registered reader), the verdict, then the PNG."""
    said, artifacts = [], {}
    monkeypatch.setattr(engine, "no_cuda_reason", lambda ctx: None)
    monkeypatch.setattr(engine, "run_soak_check", functools.partial(
        engine.run_soak_check, load_task="g04_fakes:fake_load", window_s=0.25, sample_interval_s=0.05,
        progress_every_s=0.5, stem="g4-soak-reader"))
    provider = Provider(RunOptions(soak_duration="1.2s", soak_dir=str(tmp_path)), worker_factory=lambda: worker)
    provider.ctx.say, provider.ctx.add_artifact = said.append, artifacts.__setitem__
    reading = provider.read("thermal.soak")
    assert reading.end_reason == "completed" and reading.max_sm_clock_mhz == 3003.0 and reading.png_path == ""
    assert said[0].startswith("G4 soak: BF16 GEMM load for 0:00:01 on NVIDIA GB10, sampling every 0.05 s into ")
    assert not any(line.startswith("G4 soak finished") for line in said)  # the engine judges nothing
    verdict = g04.judge_soak(reading, GB10)
    reported = finish(LiveCheck(provider, said.append, artifacts.__setitem__), reading, verdict)
    assert artifacts == {"g4_soak_csv": str(tmp_path / "g4-soak-reader.csv"),
                         "g4_soak_heartbeat": str(tmp_path / "g4-soak.heartbeat.json"),
                         "g4_soak_png": str(tmp_path / "g4-soak-reader.png")}
    assert Path(reading.png_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert said[-2] == f"G4 soak finished (completed): {verdict.line}"
    assert verdict.line.startswith("G4 PASS: 0:00:01 of BF16 GEMM held its throughput")
    assert said[-1] == f"G4 soak files: {reading.csv_path}, {reading.png_path}"
    # the report's verdict and the snapshot's reading name the PNG, as when the reader drew it
    assert reported.line == verdict.line and reported.readings["png"] == reading.png_path
    assert provider.recorded["thermal.soak"]["png_path"] == reading.png_path


def test_a_replayed_soak_draws_and_says_nothing(tmp_path):
    reading = soak_reading(series(), csv_path=str(tmp_path / "g4-soak-then.csv"), png_path="/then/g4-soak-then.png")
    verdict = g04.judge_soak(reading, GB10)
    said = []
    replay = LiveCheck(Provider(RunOptions()), said.append, lambda name, path: said.append(name), live=False)
    assert finish(replay, reading, verdict) == verdict and said == [] and not list(tmp_path.iterdir())
    assert verdict.readings["png"] == "/then/g4-soak-then.png"


def test_the_soak_reader_skips_on_a_cpu_build(tmp_path):
    class Provider:
        def try_read(self, key):
            return TorchBuild(installed=True, version="2.13.0+cpu", compiled_with_cuda=False)

    ctx = ReadContext(options=RunOptions(soak_dir=str(tmp_path)), worker_factory=lambda: None, provider=Provider())
    reading = engine.run_soak_check(ctx)
    assert g04.judge_soak(reading, GB10).line == "G4 SKIP: soak not run: torch 2.13.0+cpu is a CPU build"
    assert not list(tmp_path.iterdir())  # nothing written


def test_without_matplotlib_the_soak_says_so_and_keeps_the_csv(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    path, note = plot_soak(soak_reading(series()), "G4 PASS: …", tmp_path / "x.png")
    assert path == "" and note == NO_MATPLOTLIB and not (tmp_path / "x.png").exists()


@requires_matplotlib
def test_the_plot_draws_from_windows_when_the_csv_is_gone(tmp_path):
    reading = soak_reading(series(tflops=lambda i: 95.0 - i, mask=lambda i: 0x20 if i > 20 else 0),
                           csv_path=str(tmp_path / "missing.csv"))
    path, note = plot_soak(reading, "G4 FAIL: throughput fell", tmp_path / "x.png", 1400.0, 240.0, "the 240 W brick")
    assert note == "" and Path(path).stat().st_size > 10_000


def test_duration_sets_window_length_and_the_drop_fraction_comes_from_the_environment():
    assert [engine.window_for(s) for s in (2, 20, 180, 1800, 28800)] == [0.5, 5.0, 5.0, 15.0, 60.0]
    assert engine.max_drop_fraction({}) == (0.10, "")
    assert engine.max_drop_fraction({engine.MAX_DROP_ENV: "5%"}) == (0.05, "")
    assert engine.max_drop_fraction({engine.MAX_DROP_ENV: "0.2"}) == (0.2, "")
    value, note = engine.max_drop_fraction({engine.MAX_DROP_ENV: "lots"})
    assert value == 0.10 and note == "SPARK_GOTCHAS_SOAK_MAX_DROP='lots' is not a fraction in (0, 1); using 10%"


def test_the_soak_record_cli_rejudges_a_csv(tmp_path, gpu, worker, capsys):
    from spark_gotchas.runtime.soak.record import main

    reading = run(worker, gpu, plan(tmp_path, 1.0), [])
    assert main([reading.csv_path, "--profile", "gb10"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == g04.judge_soak(reading, GB10).line
    assert "torn lines; memory first/last window: parent" in out[1]
    assert main([str(tmp_path / "nope.csv")]) == 2
    assert capsys.readouterr().out.startswith("G4 SKIP: cannot read the soak record")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    assert main([str(tmp_path / "bad.csv")]) == 2
    assert "is not a G4 soak CSV" in capsys.readouterr().out
    assert main([reading.csv_path, "--profile", "gb10", "--max-drop", "5%"]) == 0  # as the environment takes it
    assert capsys.readouterr().out.splitlines()[0] == out[0]
    with pytest.raises(SystemExit) as usage:  # 10 meant as 10%: a usage line, not a soak judged at 1000%
        main([reading.csv_path, "--max-drop", "10"])
    assert usage.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == ("python -m spark_gotchas soak-record: error: argument "
                                                        "--max-drop: '10' is not a fraction in (0, 1)")
    # the same tool as a subcommand of the suite's command, and as a module of its own
    assert cli.main(["soak-record", reading.csv_path, "--profile", "gb10"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == out[0]
    alone = subprocess.run([sys.executable, "-m", "spark_gotchas.runtime.soak.record", reading.csv_path, "--profile", "gb10"],
                           env=ENV, capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and alone.stdout.splitlines()[0] == out[0] and alone.stderr == ""


def test_the_sampler_cost_benchmark_compares_load_alone_with_load_and_sampler(gpu, worker):
    from spark_gotchas.commands.soak_cost import measure, report

    out = measure(seconds=1.0, interval_s=0.1, window_s=0.25, worker=worker, load_task="g04_fakes:fake_load")
    assert out["alone_1"]["tflops"] == out["alone_2"]["tflops"] == out["sampled"]["tflops"] == 95.0
    assert out["cost_fraction"] == 0.0 and out["noise_fraction"] == 0.0 and out["ok"]
    assert out["sampled"]["samples"] >= 8 and out["sampled"]["sampler_errors"] == 0
    lines = report(out)
    assert lines[3] == "sampler cost: +0.00% of throughput (noise between the two alone phases 0.00%; budget 1%): OK"
    assert lines[4].startswith("memory over the sampled phase: this process ")


def test_the_sampler_cost_command_refuses_a_bad_duration_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "spark_gotchas.commands.soak_cost", "--seconds", "banana"], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == ("python -m spark_gotchas soak-cost: error: argument --seconds: "
                                            "not a duration: 'banana' (use e.g. 20s, 30m, 8h)")


def test_a_soak_without_nvml_judges_throughput_only_and_says_so_live_and_from_its_csv(tmp_path, worker):
    t0 = time.time()
    reading = engine.run_soak(worker, plan(tmp_path, 1.0), engine.SampleSource(None, None, t0), t0, lambda _: None,
                            {"nvml_error": "NVML library not found"})
    v = g04.judge_soak(reading, GB10)
    assert v.status.value == "PASS"
    assert v.line.startswith("G4 PASS: 0:00:01 of BF16 GEMM held its throughput: ")
    assert v.detail.endswith("no temperature, power or clock read (NVML unavailable: NVML library not found)")
    again = g04.judge_soak(read_csv(reading.csv_path).reading, GB10)
    assert again.line == v.line and again.detail == v.detail


def test_an_unusable_soak_dir_is_a_skip_line_before_any_load(tmp_path, gpu):
    (tmp_path / "a-file").write_text("")

    class Provider:
        def try_read(self, key):
            return CUDA_TORCH

    bad = tmp_path / "a-file" / "reports"
    ctx = ReadContext(options=RunOptions(soak_dir=str(bad)), worker_factory=lambda: pytest.fail("no load may start"),
                      provider=Provider())
    line = g04.judge_soak(engine.run_soak_check(ctx), GB10).line
    assert line == f"G4 SKIP: soak not run: cannot write to --soak-dir {bad}: Not a directory"
