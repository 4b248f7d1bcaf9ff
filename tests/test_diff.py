"""``python -m spark_gotchas diff``: on real snapshots and reports of this machine, and edited copies.

A is the workflow's preflight run here (live); B is that snapshot replayed as if on a Spark about
to load 400 GB of weights (``--spark-profile=gb10 --spark-model-gb=400``), a second real run that
judges worse on any machine. Edited copies add the
readings a GPU run has (figures from the one H200 measured for the project, spark-facts.md).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ci_preflight import ROOT, preflight, replayed_as_gb10

from spark_gotchas import __version__
from spark_gotchas.commands import diff as sgdiff
from spark_gotchas.knowledge.verdict import Status


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = sgdiff.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage error
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def worst_by_gotcha(snapshot: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in snapshot["verdicts"]:
        if v["id"] not in out or Status(v["status"]).rank > Status(out[v["id"]]).rank:
            out[v["id"]] = v["status"]
    return out


# -- real runs -------------------------------------------------------------------------------------
def test_a_snapshot_against_itself_changes_nothing(capsys):
    snap = preflight().snapshot
    code, out, err = run(capsys, snap, snap)
    assert code == 0 and err == ""
    assert "Statuses (0 worse, 0 better)" in out
    assert "no key reading changed" in out
    assert "Distributions (0 changed, 0 added, 0 removed," in out
    assert out.rstrip().endswith("No status got worse (exit 0)")
    for gid in worst_by_gotcha(load(snap)):
        assert f"\n  {gid} " in out  # every gotcha has its line


def test_judged_as_a_spark_the_same_machine_is_worse(capsys):
    a, b = preflight().snapshot, replayed_as_gb10()
    expected_worse = [gid for gid, status in worst_by_gotcha(load(b)).items()
                      if sgdiff.SEVERITY.get(status, 0) > sgdiff.SEVERITY.get(worst_by_gotcha(load(a)).get(gid), 0)]
    assert expected_worse, "400 GB of weights judged as a GB10 should FAIL somewhere (G3: no headroom)"
    code, out, _ = run(capsys, a, b)
    assert code == 1
    assert f"Worse in B: {', '.join(expected_worse)} (exit 1)" in out
    for gid in expected_worse:
        line = next(x for x in out.splitlines() if x.startswith(f"  {gid} "))
        assert line.endswith("WORSE") and "-> FAIL" in line or "-> WARN" in line
    assert f"  profile  {load(a)['platform']['profile']} -> gb10" in out  # none here, h200 on the H200
    # and the other way round those are better; worse only where this machine's own run judged worse
    # than the replay (a live G4 or G5 under other GPU work, judged against another profile's floor)
    worse_here = [gid for gid, status in worst_by_gotcha(load(a)).items()
                  if sgdiff.SEVERITY.get(status, 0) > sgdiff.SEVERITY.get(worst_by_gotcha(load(b)).get(gid), 0)]
    code, out, _ = run(capsys, b, a)
    assert (code, f"Statuses ({len(worse_here)} worse, {len(expected_worse)} better)" in out) == (int(bool(worse_here)), True)


def test_a_report_and_the_snapshot_of_one_run_agree(capsys):
    code, out, _ = run(capsys, preflight().report, preflight().snapshot)
    assert code == 0
    assert "(report, 20" in out and "(snapshot, 20" in out  # both kinds recognised, dates readable
    assert "Statuses (0 worse, 0 better)" in out
    assert "Distributions: not in A: a JSON report carries no distribution list" in out


def test_the_module_command_dispatches_and_keeps_the_exit_status():
    result = subprocess.run([sys.executable, "-m", "spark_gotchas", "diff", str(preflight().snapshot),
                             str(replayed_as_gb10()), "--json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["exit_code"] == 1 and data["worse"]
    assert {s["gotcha"] for s in data["statuses"]} >= set(data["worse"])


@pytest.mark.parametrize("argv, code, text", [
    ([], 2, "usage: python -m spark_gotchas COMMAND"),
    (["--help"], 0, "diff          what changed between two runs or machines"),
    (["frobnicate"], 2, "unknown command 'frobnicate'"),
])
def test_the_module_command_line(argv, code, text):
    result = subprocess.run([sys.executable, "-m", "spark_gotchas", *argv], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == code
    assert text in result.stdout + result.stderr and "Traceback" not in result.stderr


# -- edited copies -----------------------------------------------------------------------------------
def gpu_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two nights of one GPU box: bandwidth fell, a clock is stuck, torch and a driver moved."""
    a = load(preflight().snapshot)
    a["platform"].update(gpu="NVIDIA H200", capability=[9, 0], driver="580.159.04", cuda_driver="13.0",
                         torch="2.11.0+cu130", torch_cuda="13.0", profile="h200")
    a["readings"]["gpu.bandwidth"] = {"copy_gbps": 4275.0, "read_gbps": 4337.0, "method": "torch ops"}
    a["readings"]["thermal.snapshot"] = {"sample": {"power_w": 87.0, "sm_clock_mhz": 1980.0,
                                                    "temperature_c": 39.0, "thermal_us": 5.0}}
    a["readings"]["gpu.inventory"] = {"driver_version": "580.159.04", "cuda_driver_version": 13000,
                                      "devices": [{"index": 0, "memory_total_bytes": 150_754_820_096,
                                                   "power_limit_mw": 700_000}]}
    a["verdicts"] = [{"id": "G4", "status": "PASS", "summary": "SM clock 1980 MHz under load"},
                     {"id": "G5", "status": "WARN", "summary": "copy 3700 GB/s", "fix": "look at G6"},
                     {"id": "G9", "status": "PASS", "summary": "container"}]
    a["readings"]["env.distributions"]["versions"].update({"torch": "2.11.0+cu130", "xformers": "0.0.30"})
    b = copy.deepcopy(a)
    b["readings"]["gpu.bandwidth"] = {"copy_gbps": 3650.0, "method": "torch ops"}  # read not measured
    b["readings"]["thermal.snapshot"]["sample"].update(power_w=88.5, sm_clock_mhz=702.0)
    b["readings"]["gpu.inventory"]["cuda_driver_version"] = 12080
    b["verdicts"] = [{"id": "G4", "status": "FAIL", "summary": "SM clock 702 MHz under load",
                      "fix": "remove AC power for 60 s"},
                     {"id": "G5", "status": "PASS", "summary": "copy 4275 GB/s"},
                     {"id": "G9", "status": "PASS", "summary": "container"},
                     {"id": "G7", "status": "WARN", "summary": "no sm_121a kernels", "fix": "stay on FP8"}]
    versions = b["readings"]["env.distributions"]["versions"]
    versions["torch"] = "2.10.0+cu130"
    versions["flash-attn"] = "2.7.4"
    del versions["xformers"]
    return write(tmp_path, "night1.json", a), write(tmp_path, "night2.json", b)


def test_what_changed_between_two_nights(capsys, tmp_path):
    code, out, _ = run(capsys, *gpu_pair(tmp_path))
    assert code == 1
    lines = out.splitlines()
    assert "Statuses (2 worse, 1 better), as each document recorded them" in lines
    v = __version__  # the pair was written by this version
    assert (f"  (judged by spark-gotchas {v} in A, {v} in B; spark-gotchas -m fast --spark-replay FILE judges a "
            f"snapshot again with {v}'s rules)") in lines  # the statuses are the files' own, and say whose
    assert any(x.startswith("  G4   thermal throttling") and x.endswith("PASS -> FAIL         WORSE") for x in lines)
    assert "         fix: remove AC power for 60 s" in lines
    assert any(x.startswith("  G5 ") and "WARN -> PASS" in x and x.endswith("better") for x in lines)
    assert any(x.startswith("  G7 ") and "not in A -> WARN" in x and x.endswith("WORSE") for x in lines)
    text = "\n".join(lines)
    assert "gpu.bandwidth.copy_gbps" in text and "4,275.0 GB/s -> 3,650.0 GB/s (-14.6%)" in text
    assert "4,337.0 GB/s -> not in B" in text
    assert "1,980.0 MHz -> 702.0 MHz (-64.5%)" in text
    assert "gpu.inventory.cuda_driver_version" in text and "13000 -> 12080" in text
    assert "power_w" not in text  # 87 -> 88.5 W is within the 5% tolerance
    assert "thermal_us" not in text  # cumulative counters are not key readings
    assert "  ~ torch 2.11.0+cu130 -> 2.10.0+cu130" in lines
    assert "  + flash-attn 2.7.4" in lines and "  - xformers 0.0.30" in lines
    assert text.endswith("Worse in B: G4, G7 (exit 1)")


def test_all_lists_unchanged_readings_with_units(capsys, tmp_path):
    _, out, _ = run(capsys, *gpu_pair(tmp_path), "--all")
    assert "140.4 GiB" in out  # memory_total_bytes, shown as GiB
    assert "700.0 W" in out  # power_limit_mw, shown as W
    assert "compute capability" in out and "(9, 0)" in out


def test_json_form(capsys, tmp_path):
    code, out, _ = run(capsys, *gpu_pair(tmp_path), "--json")
    data = json.loads(out)
    assert code == data["exit_code"] == 1
    assert data["worse"] == ["G4", "G7"] and data["better"] == ["G5"]
    copy_bw = next(r for r in data["readings"] if r["name"] == "gpu.bandwidth.copy_gbps")
    assert copy_bw["category"] == "bandwidth" and copy_bw["change"] == "changed"
    assert copy_bw["a"] == 4275.0 and copy_bw["b"] == 3650.0 and round(copy_bw["delta_pct"], 1) == -14.6
    assert data["distributions"]["changed"]["torch"] == ["2.11.0+cu130", "2.10.0+cu130"]
    assert data["a"]["kind"] == "snapshot" and data["tolerance_pct"] == 5.0


def test_tolerance(capsys, tmp_path):
    _, out, _ = run(capsys, *gpu_pair(tmp_path), "--tolerance", "20")
    assert "copy_gbps" not in out and "702.0 MHz" in out
    for bad in ("-1", "nan", "inf", "1e400", "5000"):
        code, _, err = run(capsys, *gpu_pair(tmp_path), "--tolerance", bad)
        assert code == 2 and f"argument --tolerance: {bad!r} is not a number of percent from 0 to 1000" in err


def test_readings_that_changed_shape_or_are_odd_do_not_break_it(capsys, tmp_path):
    a_path, b_path = gpu_pair(tmp_path)
    b = load(b_path)
    b["readings"]["gpu.bandwidth"] = "measured elsewhere"  # a reading that is now a string
    b["readings"]["thermal.snapshot"] = {"sample": [{"sm_clock_mhz": 700.0}] * 100}  # a long series
    b["readings"]["mem.meminfo"] = None
    b["verdicts"] += [{"id": "G3", "status": "MAYBE"}, "not a verdict", {"status": "FAIL"}]
    b["platform"] = ["not", "a", "dict"]
    code, out, err = run(capsys, a_path, write(tmp_path, "odd.json", b))
    assert code == 1 and err == ""
    assert "4,275.0 GB/s -> not in B" in out
    assert "1,980.0 MHz -> not in B" in out
    assert "  G3 " not in out  # an unknown status is not a verdict


# -- bad input ---------------------------------------------------------------------------------------
def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    snap = load(preflight().snapshot)
    newer = dict(snap, version=99)
    no_readings = {k: v for k, v in snap.items() if k != "readings"}
    report = load(preflight().report)
    report.pop("spark_gotchas")
    (tmp / "dir").mkdir()
    cases = {
        "missing": (tmp / "nope.json", "no such file"),
        "directory": (tmp / "dir", "is not a regular file (a directory)"),
        "not json": (tmp / "notes.txt", "is not JSON"),
        "json list": (tmp / "list.json", "not a JSON object"),
        "other json": (tmp / "other.json", "neither a pytest JSON report nor a spark-gotchas snapshot"),
        "report without gotchas": (tmp / "plain.json", "without a spark_gotchas object"),
        "newer snapshot": (tmp / "v99.json", "has version 99"),
        "snapshot without readings": (tmp / "noread.json", "has no readings object"),
    }
    (tmp / "notes.txt").write_text("G1 PASS: hello\n")
    write(tmp, "list.json", [])  # type: ignore[arg-type]
    write(tmp, "other.json", {"name": "package.json"})
    write(tmp, "plain.json", report)
    write(tmp, "v99.json", newer)
    write(tmp, "noread.json", no_readings)
    return cases


@pytest.mark.parametrize("case", ["missing", "directory", "not json", "json list", "other json",
                                  "report without gotchas", "newer snapshot", "snapshot without readings"])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, case):
    path, reason = _bad_inputs(tmp_path)[case]
    code, out, err = run(capsys, preflight().snapshot, path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("spark-gotchas diff: ") and reason in err, err


def test_a_missing_argument_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        sgdiff.main([str(preflight().snapshot)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "required: B.json" in err


def test_a_measured_bandwidth_and_gemm_rate_are_key_readings(tmp_path, capsys):
    """The bandwidth methods' ``gbps`` and the GEMM precisions' ``tflops`` (the names microbench
    gives them) are compared: a bandwidth cut to a third was "no key reading changed"."""
    h200 = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
    snap = json.loads(h200.read_text())
    for method in snap["readings"]["bench.bandwidth"]["result"]["methods"]:
        method["gbps"] /= 3
    for result in snap["readings"]["bench.gemm"]["result"]["results"]:
        if result.get("tflops"):
            result["tflops"] /= 2
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(snap))
    sgdiff.main([str(h200), str(slow)])
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert "bench.bandwidth.result.methods[0].gbps 4,613.9 GB/s -> 1,538.0 GB/s (-66.7%)" in lines
    assert "bench.gemm.result.results[0].tflops 688.0 TFLOP/s -> 344.0 TFLOP/s (-50.0%)" in lines


def test_a_snapshot_is_read_once_and_held_to_the_snapshot_bound(tmp_path, monkeypatch):
    """The file is read once (what is compared is what was checked), and a snapshot larger than
    the snapshot bound is refused though a report of that size would be read."""
    from spark_gotchas.base import bounded_read

    reads = []
    real = bounded_read.read_bytes
    monkeypatch.setattr(bounded_read, "read_bytes", lambda path, kind: reads.append(kind) or real(path, kind))
    h200 = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
    assert sgdiff.load(str(h200)).kind == "snapshot" and reads == [bounded_read.REPORT]
    monkeypatch.setattr(bounded_read, "SNAPSHOT", bounded_read.Kind("snapshot", 1 << 10))
    with pytest.raises(sgdiff.DiffInputError, match=r"is larger than 1 KiB, the most this suite reads as a snapshot"):
        sgdiff.load(str(h200))


@pytest.mark.parametrize("gotchas, why", [
    (["G1"], "its spark_gotchas object has no gotchas object (not a report of the checks)"),
    ({"G3": {"status": "GREAT"}}, "G3's entry in spark_gotchas.gotchas has no status (FAIL, WARN, PASS, INFO or SKIP)"),
    ({"G3": "PASS"}, "G3's entry in spark_gotchas.gotchas has no status (FAIL, WARN, PASS, INFO or SKIP)"),
])
def test_a_report_whose_verdicts_cannot_be_read_is_refused_not_read_as_unchanged(tmp_path, capsys, gotchas, why):
    """Read as "not in B", its gotchas compared as missing, never worse: the diff said "No status got
    worse (exit 0)" of a report that held none."""
    report = json.loads((ROOT / "tests" / "fixtures" / "h100" / "doors-live" / "report.json").read_text())
    bad = copy.deepcopy(report)
    bad["spark_gotchas"]["gotchas"] = gotchas
    path = write(tmp_path, "bad.json", bad)
    code, _, err = run(capsys, ROOT / "tests" / "fixtures" / "h100" / "doors-live" / "report.json", path)
    assert (code, err.strip()) == (2, f"spark-gotchas diff: {path}: {why}")


def test_a_recorded_snapshot_shows_its_recorded_statuses_and_says_whose(capsys):
    """The H200 snapshot recorded G9 PASS; this version's replay judges it WARN. diff shows the recorded
    status and names the version that judged it, so the two answers are one answer with a stated difference."""
    snap = str(ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json")
    code, out, _ = run(capsys, snap, snap)
    lines = out.splitlines()
    assert any(x.startswith("  G9 ") and x.rstrip().endswith("PASS") for x in lines)
    assert (f"  (judged by spark-gotchas 0.1.0 in A, 0.1.0 in B; spark-gotchas -m fast --spark-replay FILE judges a "
            f"snapshot again with {__version__}'s rules)") in lines
