"""G4 through the plugin: readings survive JSON, a GB10 snapshot replays, and this machine live -> replay."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from g04_fakes import series, soak_reading
from gline_block import glines
from needs import requires_torch

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.profiles import GB10
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.knowledge.readings.thermal import (
    ClockCounters,
    Heartbeat,
    RebootCheck,
    SoakReading,
    SpotCheck,
    ThermalSample,
    ThermalSnapshot,
)
from spark_gotchas.machine.readers.thermal.reboot import HEARTBEAT_NAME, write_heartbeat
from spark_gotchas.machine.readers.thermal.snapshot import parse_smi_counters
from spark_gotchas.machine.snapshot import Snapshot, save

try:  # load numpy/matplotlib before any in-process run: pytester drops modules a run imported, and
    import matplotlib.figure  # noqa: F401  numpy cannot be loaded twice in one process
except ImportError:
    pass

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "g04"
GLINE = re.compile(r"^(G4 (FAIL|WARN|PASS|INFO|SKIP): |    fix: )")


@pytest.fixture(autouse=True)
def inner_runs(monkeypatch):
    """In-process runs load only the plugins under test and a worker without torch."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: False)


def run(pytester, *args):
    import pytest_timeout

    import spark_gotchas.plugin

    pytester.makepyfile(test_g04_thermal_here=(ROOT / "tests_gotchas" / "test_g04_thermal.py").read_text())
    return pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[spark_gotchas.plugin, pytest_timeout])


def gb10_readings() -> dict:
    """A Spark at rest with real counters, stuck at 695 MHz under load, after a completed soak."""
    counters = parse_smi_counters((FIXTURES / "nvidia-smi-q-performance-gb10-ollama13552.txt").read_text())
    facts = json.loads((FIXTURES / "gb10-readings.json").read_text())
    idle = facts["idle"]
    snapshot = ThermalSnapshot(index=0, selected_by="index 0", name="NVIDIA GB10",
                               sample=ThermalSample(t_s=0.0, temperature_c=idle["temperature_c"], power_w=idle["power_w"],
                                                    sm_clock_mhz=idle["sm_clock_mhz"], reasons_mask=0),
                               max_sm_clock_mhz=facts["max_sm_clock_mhz"],
                               counters=ClockCounters(values_us=counters, sources={k: "nvidia-smi" for k in counters}),
                               unavailable={"power_limit_w": "Not Supported"})
    stuck = facts["stuck_under_load"][1]
    samples = [ThermalSample(t_s=0.1 * i, temperature_c=61.0, power_w=13.0, sm_clock_mhz=stuck["sm_clock_mhz"],
                             utilization_pct=stuck["utilization_pct"], reasons_mask=0) for i in range(35)]
    spot = SpotCheck(attempted=True, device="NVIDIA GB10", size=8192, load_start_s=0.5, load_end_s=3.0, tflops=26.1,
                     busy_fraction=0.99, samples=samples, max_sm_clock_mhz=3003.0)
    beat = Heartbeat(boot_id="a", btime_s=1, pid=4242, host="spark", started_epoch=1_780_000_000.0, planned_s=28800.0,
                     last_sample_epoch=1_780_028_800.0, ended_epoch=1_780_028_801.0, end_reason="completed")
    reboot = RebootCheck(heartbeat_path="/home/me/reports/g4-soak.heartbeat.json", found=True, heartbeat=beat,
                         boot_id="a", btime_s=1, now_epoch=1_780_100_000.0)
    soak = soak_reading(series(n=480, window_s=60.0, temp=lambda i: min(72.0, 50.0 + i)), window_s=60.0)
    inventory = GpuInventory(driver_version="580.95.05", cuda_driver_version=13000,
                             devices=[GpuDevice(index=0, name="NVIDIA GB10", capability=(12, 1))])
    return {"thermal.snapshot": snapshot, "thermal.spot_check": spot, "thermal.reboot": reboot, "thermal.soak": soak,
            "gpu.inventory": inventory}


@pytest.mark.parametrize("key, judge", [
    ("thermal.snapshot", g04.judge_snapshot),
    ("thermal.spot_check", g04.judge_spot_check),
    ("thermal.reboot", lambda r, p: g04.judge_reboot(r)),
    ("thermal.soak", g04.judge_soak),
])
def test_every_g4_reading_round_trips_through_json_to_the_same_line(key, judge):
    reading = gb10_readings()[key]
    again = from_jsonable(type(reading), json.loads(json.dumps(to_jsonable(reading))))
    assert again == reading
    assert judge(again, GB10).line == judge(reading, GB10).line


def test_a_soak_reading_with_nothing_measured_round_trips():
    empty = SoakReading(attempted=False, reason="torch is not installed")
    assert from_jsonable(SoakReading, json.loads(json.dumps(to_jsonable(empty)))) == empty


def test_a_gb10_snapshot_replays_to_the_lines_a_spark_user_needs(pytester):
    snap = save(Snapshot(readings={k: to_jsonable(v) for k, v in gb10_readings().items()},
                         options={"spark_profile": "auto", "soak_duration": "8h"}), pytester.path / "gb10.json")
    fast = run(pytester, "-m", "fast", "-v", "--spark-replay", str(snap))  # -v: each check's line with its detail
    fast.assert_outcomes(passed=2, failed=1)
    assert glines(fast) == [
        "G4 FAIL: SM clock 695 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state",
        "    fix: " + g04.FIX_STUCK_GB10,
    ]
    out = fast.stdout.str()
    assert "Traceback" not in out and "NVIDIA GB10 (cc 12.1), driver 580.95.05 / CUDA 13.0" in out
    assert ("    fail: SM clock 695 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state (SM clock "
            "695 MHz under 2.5 s of BF16 GEMM (8192^3), below the 1400 MHz floor (gb10 profile))") in fast.stdout.lines
    soak = run(pytester, "-m", "soak", "-v", "--spark-replay", str(snap))
    soak.assert_outcomes(passed=1)
    assert glines(soak) == ["G4 PASS: 8:00:00 of BF16 GEMM held its throughput: 95.0 -> 95.0 TFLOP/s (+0.0%)"]
    assert ("    pass: 8:00:00 of BF16 GEMM held its throughput: 95.0 -> 95.0 TFLOP/s (+0.0%) (sustained 98 W vs the "
            "240 W brick (a Spark's GPU rail settles near 100 W); max 72 °C; SM clock 2435-2465 MHz)") in soak.stdout.lines


def test_this_machine_live_then_replayed_gives_the_same_lines(pytester):
    reports = pytester.path / "reports"
    reports.mkdir()
    write_heartbeat(reports / HEARTBEAT_NAME, Heartbeat(
        boot_id="an-earlier-boot", btime_s=1, pid=1, host="here", started_epoch=1_700_000_000.0, planned_s=3600.0,
        last_sample_epoch=1_700_001_234.0))
    snap = pytester.path / "here.json"
    live = run(pytester, "-m", "fast", "-v", "--spark-snapshot", str(snap))
    live_lines = glines(live)
    assert live_lines[0] == "G4 FAIL: the last soak ended in a reboot/power loss at about 2023-11-14 22:33:54 UTC"
    assert ("    fail: the last soak ended in a reboot/power loss at about 2023-11-14 22:33:54 UTC (it started "
            "2023-11-14 22:13:20 UTC; boot id changed; this boot began ") in live.stdout.str()
    assert "Traceback" not in live.stdout.str()
    recorded = json.loads(snap.read_text())["readings"]
    assert {"thermal.snapshot", "thermal.spot_check", "thermal.reboot"} <= set(recorded)
    (reports / HEARTBEAT_NAME).unlink()  # the replay must not need the machine
    replay = run(pytester, "-m", "fast", "--spark-replay", str(snap))
    assert glines(replay) == live_lines



def load_is_running(soak_dir: Path) -> bool:
    """The soak's CSV holds a measured window: its load is in its loop, where a stop is seen."""
    return any(line.startswith("window,") for csv in soak_dir.glob("g4-soak-*.csv")
               for line in csv.read_text(errors="replace").splitlines())


def fake_soak_machine(monkeypatch) -> None:
    """The real soak path with a fake GB10 (NVML) and a fake load in a real worker."""
    import functools
    import importlib
    import os

    from g04_fakes import FakeGpu, FakeNvml, install, ramp

    from spark_gotchas.machine import nvml
    from spark_gotchas.machine.readers.thermal import snapshot

    # the engine the run will import: an earlier in-process run may have dropped it from sys.modules
    # while the package still names the old one (`from spark_gotchas.runtime.soak import engine` would patch that)
    engine = importlib.import_module("spark_gotchas.runtime.soak.engine")

    here = Path(__file__).parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(here), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(nvml, "_STATE", dict(nvml._STATE))
    monkeypatch.setattr(snapshot, "smi_counters", lambda index: ({}, "nvidia-smi not found"))
    install(FakeNvml(FakeGpu(temperature_c=ramp(55, 0.05))))
    monkeypatch.setattr(engine, "no_cuda_reason", lambda ctx: None)
    monkeypatch.setattr(engine, "run_soak_check", functools.partial(
        engine.run_soak_check, load_task="g04_fakes:fake_load", window_s=0.25, sample_interval_s=0.05,
        progress_every_s=0.5))

@requires_torch
def test_a_soak_through_pytest_shows_progress_and_replays(pytester, monkeypatch):
    """The real soak path (plugin, provider, worker, sampler, CSV, plot) with a fake GPU and a fake load."""


    fake_soak_machine(monkeypatch)
    snap = pytester.path / "soak.json"
    live = run(pytester, "-m", "soak", "--soak-duration", "1.5s", "--spark-snapshot", str(snap))
    live.assert_outcomes(passed=1)
    out = live.stdout.str()
    assert "G4 soak: BF16 GEMM load for 0:00:02 on NVIDIA GB10, sampling every 0.05 s into " in out
    live.stdout.fnmatch_lines(["G4 soak 0:00:0? / 0:00:02: first window * (drift is measured against it)",
                               "G4 soak 0:00:0? / 0:00:02 (0:00:0? left): *TFLOP/s (+0.0% vs first window)",
                               "G4 soak finished (completed): G4 PASS: 0:00:0? of BF16 GEMM held its throughput*",
                               "G4 soak files: *reports/g4-soak-*.csv, *reports/g4-soak-*.png"
                               if importlib.util.find_spec("matplotlib") is not None else
                               "G4 soak files: *reports/g4-soak-*.csv (matplotlib not installed*"])
    line = glines(live)
    assert len(line) == 1 and line[0].startswith("G4 PASS: 0:00:0")
    recorded = json.loads(snap.read_text())["readings"]["thermal.soak"]
    assert len(recorded["windows"]) >= 4
    if importlib.util.find_spec("matplotlib") is not None:  # drawn after the verdict, named in the snapshot
        assert recorded["png_path"] == recorded["csv_path"][:-len(".csv")] + ".png" and recorded["plot_note"] == ""
    else:
        assert recorded["png_path"] == "" and recorded["plot_note"].startswith("matplotlib not installed")
    replay = run(pytester, "-m", "soak", "--spark-replay", str(snap))
    assert glines(replay) == line and "G4 soak" not in replay.stdout.str()


@requires_torch
def test_a_soak_cut_short_by_ctrl_c_warns_and_ends_the_run_as_interrupted(pytester, monkeypatch):
    """Ctrl-C (a real SIGINT to this process) once a 30 s soak's load has measured a window: the
    soak stops its load, the line says how far it got and cannot pass, and pytest's exit status says
    interrupted. However loaded the box, the cut comes while the load runs (never before it began
    nor after it ended), so the line is the same anywhere."""
    import os
    import signal
    import threading


    fake_soak_machine(monkeypatch)
    done = threading.Event()

    def ctrl_c_once_the_soak_records() -> None:  # as a user would: while the load runs
        while not done.wait(0.1):
            if load_is_running(pytester.path / "reports"):
                os.kill(os.getpid(), signal.SIGINT)
                return

    threading.Thread(target=ctrl_c_once_the_soak_records, daemon=True).start()
    try:
        result = run(pytester, "-m", "soak", "--soak-duration", "30s")
    finally:
        done.set()
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-3000:]  # what the soak said instead
    (line, fix) = glines(result)
    assert re.fullmatch(r"G4 WARN: cut short by SIGINT after 0:00:[0-2]\d of 0:00:30; 0:00:[0-2]\d of BF16 GEMM held over "
                        r"what ran", line)  # the throughput figures are in the detail
    assert fix == ("    fix: run the soak again for its whole planned length (spark-gotchas -m soak --soak-duration 30s) "
                   "before trusting a long run to this machine")
    assert "the soak was cut short by SIGINT" in result.stdout.str()


def ordinary_verdicts(result) -> list[dict]:
    """The verdicts a run recorded in its snapshot (again.json, in the run's folder)."""
    return json.loads((Path(str(result.stdout.str()).split("snapshot written to ")[1].split()[0])).read_text())["verdicts"]


def test_a_replay_says_what_the_snapshot_holds_that_it_does_not_judge(pytester):
    """A snapshot of a run with -m soak (an 8-hour soak ending in throttling) replayed the ordinary
    way: the G4 line is the recorded soak's FAIL, never the fast checks' PASS, and says how to judge
    it; with -m soak it is judged."""
    recorded = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())
    throttled = soak_reading(series(n=20, tflops=lambda i: 665.0 - 14 * i, clock=lambda i: 1980.0 - 40 * i),
                             planned_s=28800.0, elapsed_s=28800.0, device="NVIDIA H200", max_sm_clock_mhz=1980.0)
    # the snapshot's own H200 ran it: a GB10's soak spliced in would be no H200 reading
    recorded["readings"]["thermal.soak"] = to_jsonable(throttled)
    recorded["markers"] = "fast or soak"
    path = pytester.path / "night.json"
    path.write_text(json.dumps(recorded))
    fail = "G4 FAIL: the recorded soak FAILs: throughput fell 40% from 0:00:15 on; replay with -m soak"
    ordinary = run(pytester, "-m", "fast", "--spark-replay", str(path), "--spark-snapshot", "again.json")
    g4 = [line for line in glines(ordinary) if line.startswith("G4 ")]
    assert g4 == [fail]
    soak = [v for v in ordinary_verdicts(ordinary) if v.get("check") == "soak"]
    assert soak and soak[0]["status"] == "FAIL" and soak[0]["summary"] == fail[len("G4 FAIL: "):]
    only_g4 = run(pytester, "-m", "fast", "-k", "g4", "--spark-replay", str(path))  # -k leaves G3's and G5's out
    assert [line[:3] for line in glines(only_g4) if line.startswith("G")] == ["G4 "]
    assert glines(only_g4)[0] == fail
    soaked = run(pytester, "-m", "soak", "--spark-replay", str(path))
    assert glines(soaked)[0].startswith("G4 FAIL: throughput fell")
    del recorded["markers"]  # a snapshot that predates the recorded selection: its readings tell
    path.write_text(json.dumps(recorded))
    older = run(pytester, "-m", "fast", "--spark-replay", str(path))
    assert [line for line in glines(older) if line.startswith("G4 ")] == [fail]
