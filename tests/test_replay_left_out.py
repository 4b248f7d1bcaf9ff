"""A replay whose selection leaves out a soak or multinode check (``-m fast``, ``-k g4``) never
prints a PASS over that check's recorded FAIL or WARN: the gotcha's line takes the recorded
status and says so, in the terminal, the JSON report, the Markdown summary, the exit code, and
in what ``spark-gotchas diff`` and ``fleet`` read of the replay's report and snapshot.

Each snapshot is written by the real plugin: a GB10's readings (a healthy preflight, and the
soak or multinode reading of each case) replayed with the recorded run's selection and
``--spark-snapshot``, as a run on the Spark writes it."""

from __future__ import annotations

import json
from pathlib import Path

import bench_fakes as fk
import pytest
from g04_fakes import series, soak_reading
from gline_block import glines
from inner_runs import inner_runs, run_checks  # noqa: F401  inner_runs: a fixture

from spark_gotchas.base.serial import to_jsonable
from spark_gotchas.commands import diff, fleet
from spark_gotchas.knowledge.readings.bench import BandwidthReading, BandwidthSweepReading
from spark_gotchas.knowledge.readings.dist import BandwidthRow, CollectiveRun, LatencyRow, RankResult
from spark_gotchas.knowledge.readings.gpu import GpuProcesses
from spark_gotchas.knowledge.readings.thermal import ClockCounters, SpotCheck, ThermalSample, ThermalSnapshot
from spark_gotchas.machine.readers.mem import from_result, parse_meminfo
from spark_gotchas.machine.snapshot import Snapshot, save

CHECKS = ("test_g03_unified_memory.py", "test_g04_thermal.py", "test_g05_bandwidth.py", "test_g10_parallelism.py")

# a Spark at rest (unslothai/unsloth PR #10704): MemFree 103.25, MemAvailable 115.85, Cached 12.64 GiB
SPARK_AT_REST = ("MemTotal: 127600524 kB\nMemFree: 108265472 kB\nMemAvailable: 121477530 kB\nBuffers: 0 kB\n"
                 "Cached: 13254001 kB\nShmem: 0 kB\n")
THROTTLED_FAIL = "G4 FAIL: the recorded soak FAILs: throughput fell 40% from 0:00:15 on; replay with -m soak"
COOLING_FIX = ("    fix: improve cooling (clear intake and exhaust, cooler room, nothing stacked on or against the unit) "
               "or cap run length and checkpoint before throttling sets in (here: before 0:00:15)")
HEALTHY_G4 = "G4 PASS: 2450 MHz under load (floor 1400), 95 TFLOP/s, no throttling"


def run(pytester, *args):
    import pytest_jsonreport.plugin

    return run_checks(pytester, CHECKS, *args, plugins=(pytest_jsonreport.plugin,))


def healthy_spark() -> dict:
    """A GB10's preflight readings that all pass: clocks, memory, bandwidth, no launch config."""
    samples = [ThermalSample(t_s=0.1 * i, temperature_c=63.0, power_w=62.0, sm_clock_mhz=2450.0, utilization_pct=96.0,
                             reasons_mask=0) for i in range(31)]
    counters = ClockCounters(values_us={"sw_power_cap": 10_800.0}, sources={"sw_power_cap": "nvidia-smi"})
    return {
        "gpu.inventory": fk.gb10_inventory(),
        "mem.meminfo": parse_meminfo(SPARK_AT_REST),
        "gpu.processes": GpuProcesses(scanned=311),
        "thermal.snapshot": ThermalSnapshot(index=0, name="NVIDIA GB10", max_sm_clock_mhz=3003.0,
                                            sample=ThermalSample(t_s=0.0, temperature_c=45.0, power_w=11.0,
                                                                 sm_clock_mhz=208.0, reasons_mask=0),
                                            counters=counters, unavailable={"power_limit_w": "Not Supported"}),
        "thermal.spot_check": SpotCheck(attempted=True, device="NVIDIA GB10", size=8192, load_start_s=0.3,
                                        load_end_s=2.8, tflops=95.0, busy_fraction=0.97, samples=samples,
                                        max_sm_clock_mhz=3003.0, backend="torch", counters_before=counters,
                                        counters_after=counters),
        "bench.bandwidth": BandwidthReading(attempted=True, result=fk.gb10_bandwidth()),
        "launch.review": {"files": [], "environment": {}},
    }


def throttled_soak():
    """8 hours planned and run; throughput 95 -> 57 TFLOP/s as the SM clock falls 2450 -> 1310 MHz."""
    return soak_reading(series(n=20, tflops=lambda i: 95.0 - 2 * i, clock=lambda i: 2450.0 - 60 * i),
                        planned_s=28800.0, elapsed_s=28800.0)


def collective(busbw: float) -> CollectiveRun:
    rank = RankResult(rank=0, world_size=2, local_world_size=1, backend="nccl", device="NVIDIA GB10",
                      large=[BandwidthRow(64 << 20, 0.01, busbw * 0.8, busbw * 0.8, 5),
                             BandwidthRow(1 << 30, 0.1, busbw, busbw, 5)],
                      small=[LatencyRow(8, 27.8, 20), LatencyRow(1024, 31.9, 20)])
    return CollectiveRun(attempted=True, mode="multinode", nnodes=2, nproc_per_node=1, returncode=0, ranks=[rank])


def recorded(pytester, name: str, markers: str, **readings) -> tuple[Path, list[str]]:
    """The snapshot a ``-m MARKERS`` run on a Spark writes (written here by the plugin from the
    readings), and the G-lines that run printed."""
    composed = pytester.path / f"{name}-readings.json"
    save(Snapshot(readings={k: to_jsonable(v) for k, v in {**healthy_spark(), **readings}.items()},
                  options={"spark_profile": "auto", "spark_model_gb": None, "spark_load_factor": 2.0}), composed)
    path = pytester.path / f"{name}.json"
    result = run(pytester, "-m", markers, "--spark-replay", str(composed), "--spark-snapshot", str(path))
    assert json.loads(path.read_text())["markers"] == markers
    return path, glines(result)


def of(lines: list[str], gotcha: int) -> list[str]:
    """A gotcha's line and its fix lines."""
    out, keep = [], False
    for line in lines:
        if not line.startswith(" "):
            keep = line.startswith(f"G{gotcha} ")
        if keep:
            out.append(line)
    return out


def replay(pytester, path: Path, *args: str):
    """Replay ``path``: the run, its JSON report, its Markdown summary."""
    report, md = pytester.path / "replay-report.json", pytester.path / "replay.md"
    md.unlink(missing_ok=True)
    result = run(pytester, "--spark-replay", str(path), "--json-report", f"--json-report-file={report}",
                 "--spark-summary-md", str(md), *args)
    assert "Traceback" not in result.stdout.str()
    return result, json.loads(report.read_text()), md.read_text()


def test_the_overnight_soak_that_throttled_replayed_with_m_fast_fails_g4_and_names_the_soak(pytester):
    night, printed = recorded(pytester, "night", "fast or soak", **{"thermal.soak": throttled_soak()})
    assert of(printed, 4)[0] == ("G4 FAIL: throughput fell 40% from 0:00:15 on: SM clock 2450 -> 1310 MHz "
                                 "from 0:00:15")
    result, report, md = replay(pytester, night, "-m", "fast")
    assert of(glines(result), 4) == [THROTTLED_FAIL, COOLING_FIX]
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # as the soak's FAIL fails a run that judges it
    result.assert_outcomes(passed=7, skipped=2, deselected=5)  # no soak check; no "last watch" (not recorded)
    section = report["spark_gotchas"]
    assert of(section["lines"], 4) == [THROTTLED_FAIL, COOLING_FIX]  # the fix whole
    assert section["gotchas"]["G4"]["status"] == "FAIL"
    assert section["gotchas"]["G4"]["summary"] == THROTTLED_FAIL[len("G4 FAIL: "):]
    assert report["exitcode"] == 1
    soak = next(entry for entry in section["left_out"] if entry["nodeid"].endswith("::test_g4_soak"))
    assert soak["gotcha"]["status"] == "FAIL" and soak["gotcha"]["check"] == "soak"
    assert soak["gotcha"]["detail"].startswith("throughput fell 40% from 0:00:15 on: SM clock 2450 -> 1310 MHz from "
                                               "0:00:15 (throughput fell 40% (95.0 -> 57.0 TFLOP/s")
    assert f"- ❌ **G4 FAIL** (thermal throttling): {THROTTLED_FAIL[9:]}" in md
    assert HEALTHY_G4 in md  # the checks that ran are still listed under the recorded soak's line


def test_a_snapshot_older_than_the_recorded_selection_shows_the_soak_fail_too(pytester):
    night, _ = recorded(pytester, "night", "fast or soak", **{"thermal.soak": throttled_soak()})
    doc = json.loads(night.read_text())
    del doc["markers"]  # a suite before the markers field: the soak's reading tells
    night.write_text(json.dumps(doc))
    result, report, md = replay(pytester, night, "-m", "fast")
    assert of(glines(result), 4) == [THROTTLED_FAIL, COOLING_FIX]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert of(report["spark_gotchas"]["lines"], 4) == [THROTTLED_FAIL, COOLING_FIX]
    assert report["spark_gotchas"]["gotchas"]["G4"]["status"] == "FAIL"
    assert f"- ❌ **G4 FAIL** (thermal throttling): {THROTTLED_FAIL[9:]}" in md


def test_k_g4_without_m_shows_the_recorded_soak_fail_and_leaves_the_other_gotchas_out(pytester):
    night, _ = recorded(pytester, "night", "fast or soak", **{"thermal.soak": throttled_soak()})
    result, report, _ = replay(pytester, night, "-k", "g4")
    assert glines(result) == [THROTTLED_FAIL, COOLING_FIX]
    assert [entry["nodeid"].split("::")[1] for entry in report["spark_gotchas"]["left_out"]] == ["test_g4_soak"]


def test_m_not_soak_leaves_the_soak_out_and_still_shows_its_fail(pytester):
    night, _ = recorded(pytester, "night", "fast or soak", **{"thermal.soak": throttled_soak()})
    result, _, _ = replay(pytester, night, "-m", "not soak and not multinode")
    assert of(glines(result), 4) == [THROTTLED_FAIL, COOLING_FIX]


def test_a_load_probe_warn_recorded_under_m_soak_is_the_g3_line_of_a_fast_replay(pytester):
    probe = from_result({"attempted": True, "ok": True, "size_bytes": 8_000_000_000, "cold": True, "integrated": True,
                         "load_seconds": 21.5, "peak_extra_ratio": 2.61, "cache_ratio": 1.0, "rss_ratio": 0.02,
                         "cuda_ratio": 1.0})
    night, printed = recorded(pytester, "probe", "fast or soak", **{"mem.load_probe": probe})
    assert of(printed, 3)[0] == ("G3 WARN: an 8.0 GB cold safetensors load peaked at 2.61x the file, above the x2 "
                                 "G3 assumes")
    result, report, _ = replay(pytester, night, "-m", "fast")
    assert of(glines(result), 3) == [
        "G3 WARN: the recorded load double count WARNs: replay with -m soak",  # the finding: no room, in the detail
        "    fix: judge plans on this machine with --spark-load-factor 2.7, and drop the page cache between runs as "
        "root (sync; echo 3 > /proc/sys/vm/drop_caches), never in the middle of training"]
    assert result.ret == pytest.ExitCode.OK  # a WARN passes, as it would judged
    probe_entry = next(e for e in report["spark_gotchas"]["left_out"] if e["gotcha"]["id"] == "G3")
    assert probe_entry["gotcha"]["detail"] == ("an 8.0 GB cold safetensors load peaked at 2.61x the file, above the "
                                               "x2 G3 assumes (page cache 1.00x, process RSS 0.02x, CUDA 1.00x; 21.5 s)")
    strict, _, _ = replay(pytester, night, "-m", "fast", "--spark-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED  # as a WARN fails under --spark-strict


def test_a_bandwidth_sweep_warn_recorded_under_m_soak_is_the_g5_line_of_a_fast_replay(pytester):
    sizes = [12 << 20, 96 << 20, 768 << 20, 3 << 30]
    points = []
    for size in sizes:
        factor = 4.0 if size < (24 << 20) else (0.6 if size == sizes[-1] else 1.0)  # L2-resident; the largest drops
        points += fk.method_results({m: (a * factor, b * factor) for m, (a, b) in fk.gb10_figures().items()}, size)
    from spark_gotchas.microbench.bandwidth import BandwidthSweep

    sweep = BandwidthSweepReading(attempted=True, csv_path="reports/g5_bandwidth_sweep.csv",
                                  result=BandwidthSweep(device="NVIDIA GB10", l2_bytes=24 << 20, unified_memory=True,
                                                        points=points, sizes_bytes=sizes, backend="triton 3.6.0"))
    night, _ = recorded(pytester, "sweep", "fast or soak", **{"bench.bandwidth_sweep": sweep})
    result, report, _ = replay(pytester, night, "-m", "fast")
    lines = of(glines(result), 5)
    assert lines[0] == "G5 WARN: the recorded bandwidth sweep WARNs: replay with -m soak"  # the finding: in the detail
    sweep_entry = next(e for e in report["spark_gotchas"]["left_out"] if e["gotcha"]["id"] == "G5")
    assert sweep_entry["gotcha"]["detail"].startswith("bandwidth drops at the largest size (3 GiB): copy 120, read 140")
    assert report["spark_gotchas"]["gotchas"]["G5"]["status"] == "WARN"


def test_a_collective_fail_recorded_under_m_multinode_is_the_g10_line_of_a_fast_replay(pytester):
    pair, printed = recorded(pytester, "pair", "fast or multinode", **{"dist.collective": collective(3.04)})
    assert of(printed, 10)[0] == ("G10 FAIL: 2 nodes, nccl: 3.04 GB/s all-reduce bus bandwidth: far below the 20-24 "
                                  "GB/s expected")
    result, report, md = replay(pytester, pair, "-m", "fast")
    lines = of(glines(result), 10)
    assert lines[0] == "G10 FAIL: the recorded collective probe FAILs: 2 nodes, nccl; replay with -m multinode"
    assert lines[1].startswith("    fix: ")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert report["spark_gotchas"]["gotchas"]["G10"]["status"] == "FAIL"
    assert "**G10 FAIL**" in md


def test_a_recorded_soak_that_passed_keeps_the_fast_pass_line(pytester):
    healthy = soak_reading(series(n=20), planned_s=28800.0, elapsed_s=28800.0)
    night, printed = recorded(pytester, "calm", "fast or soak", **{"thermal.soak": healthy})
    assert of(printed, 4)[0].startswith("G4 PASS: ")
    result, report, _ = replay(pytester, night, "-m", "fast")
    assert of(glines(result), 4) == [f"{HEALTHY_G4}; not checked: last soak, soak"]
    assert result.ret == pytest.ExitCode.OK
    soak = next(e for e in report["spark_gotchas"]["left_out"] if e["gotcha"]["id"] == "G4")
    assert soak["gotcha"]["summary"] == "soak check not judged: judged only with -m soak"


def test_diff_and_fleet_read_the_recorded_fail_from_a_replay_s_report_and_snapshot(pytester, capsys):
    calm, _ = recorded(pytester, "calm", "fast or soak",
                       **{"thermal.soak": soak_reading(series(n=20), planned_s=28800.0, elapsed_s=28800.0)})
    night, _ = recorded(pytester, "night", "fast or soak", **{"thermal.soak": throttled_soak()})
    docs = {}
    for name, path in (("calm", calm), ("night", night)):
        _, report, _ = replay(pytester, path, "-m", "fast", "--spark-snapshot", str(pytester.path / f"{name}-again.json"))
        docs[name] = pytester.path / f"{name}-report.json"
        docs[name].write_text(json.dumps(report))
    for a, b in ((docs["calm"], docs["night"]), (pytester.path / "calm-again.json", pytester.path / "night-again.json")):
        assert diff.main([str(a), str(b)]) == 1  # G4 got worse
        assert "G4" in capsys.readouterr().out.split("No status got worse")[0]
        assert fleet.read_node(str(b)).statuses["G4"] == "FAIL"


def test_the_recorded_soak_fail_is_a_failing_testcase_of_the_replay_s_junit_report(pytester):
    import xmlschema
    from door_runs import XSD
    from junitparser import Failure, JUnitXml

    night, _ = recorded(pytester, "night", "fast or soak", **{"thermal.soak": throttled_soak()})
    junit = pytester.path / "junit.xml"
    result, _, _ = replay(pytester, night, "-m", "fast", f"--junitxml={junit}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    soak = next(case for case in suite if case.name == "test_g4_soak")  # pytest did not run it: the replay judged it
    (failure,) = soak.result
    assert isinstance(failure, Failure) and failure.message == THROTTLED_FAIL
    assert failure.text.splitlines()[:2] == [THROTTLED_FAIL, COOLING_FIX]
    assert (suite.tests, suite.failures) == (10, 1)  # the 9 checks pytest ran, and the soak
    assert {p.name: p.value for p in suite.properties()}["G4"] == THROTTLED_FAIL
    xmlschema.XMLSchema(str(XSD)).validate(str(junit))
