"""Numbers are readings a machine can give: finite, within 64 bits, and in the physical range the
reading type declares with its field (microbench/quantities.py). One place checks them, where
every typed reading is built from JSON (spark_gotchas.base.serial), live and replayed alike; the tools
that read documents by name (diff, fleet) use the same rules and name what they leave out.

The examples that were found: ``G5 PASS: read nan``, ``G4 PASS: inf TFLOP/s``, a negative
bandwidth judged as measured, a 400-digit integer that crashed fleet (judging none of the other
files) and diff, reports that standard JSON parsers reject. Then the class: a temperature of
5000 °C, a negative memory size, a clock of a billion MHz, -Infinity, a huge integer in an
untyped field, a NaN in a live reading.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Optional

import pytest

from spark_gotchas.base import serial
from spark_gotchas.commands import diff as sgdiff
from spark_gotchas.commands import fleet
from spark_gotchas.knowledge.readings.mem import MemInfo
from spark_gotchas.knowledge.readings.thermal import SoakWindow, ThermalSample
from spark_gotchas.machine import readers
from spark_gotchas.microbench.quantities import BY_SUFFIX, Bound, bound_of_name

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"


# -- the rules, on typed readings -----------------------------------------------------------------
@pytest.mark.parametrize("value, why", [
    (math.nan, "NaN is not a finite number"), (math.inf, "Infinity is not a finite number"),
    (-math.inf, "-Infinity is not a finite number"), (10 ** 400, "401 digits, beyond 64 bits"),
    (-40.0, None), (5000.0, "5000 °C is above 300 °C"), (-500.0, "-500 °C is below -100 °C"),
])
def test_a_temperature_is_a_finite_number_in_its_range(value, why):
    if why is None:
        assert serial.from_jsonable(ThermalSample, {"t_s": 1.0, "temperature_c": value}).temperature_c == value
        return
    with pytest.raises(serial.OutOfRange) as info:
        serial.from_jsonable(ThermalSample, {"t_s": 1.0, "temperature_c": value})
    assert str(info.value) == f"temperature_c: {why}"


@pytest.mark.parametrize("data, message", [
    ({"mem_total_bytes": -1}, "mem_total_bytes: -1 bytes is below 0 bytes"),
    ({"mem_total_bytes": 2 ** 70}, "mem_total_bytes: 22 digits, beyond 64 bits"),
    ({"cached_bytes": 1.5e12}, "cached_bytes: needs int, got number 1500000000000.0"),  # the type rule, as before
])
def test_a_memory_size_is_a_whole_non_negative_number_of_bytes(data, message):
    with pytest.raises(serial.Misfit) as info:
        serial.from_jsonable(MemInfo, {"source": "/proc/meminfo", **data})
    assert str(info.value) == message


def test_a_clock_of_a_billion_mhz_and_a_negative_throughput_name_their_window():
    window = {"index": 0, "t_end_s": 15.0, "seconds": 15.0}
    with pytest.raises(serial.OutOfRange, match=r"^sm_clock_median_mhz: 1e\+09 MHz is above 100000 MHz$"):
        serial.from_jsonable(SoakWindow, {**window, "sm_clock_median_mhz": 1e9})
    with pytest.raises(serial.OutOfRange, match=r"^counter_deltas_us\.thermal: -5 µs is below 0 µs$"):
        serial.from_jsonable(SoakWindow, {**window, "counter_deltas_us": {"thermal": -5.0}})


def test_numbers_in_untyped_fields_are_finite_and_within_64_bits_too():
    @dataclasses.dataclass
    class Loose:
        raw: Any = None

    assert serial.from_jsonable(Loose, {"raw": {"a": [1, 2.5, "x", None]}}).raw == {"a": [1, 2.5, "x", None]}
    for bad, why in ((math.nan, "raw.a[1]: NaN is not a finite number"), (-(10 ** 30), "raw.a[1]: 31 digits, beyond 64 bits")):
        with pytest.raises(serial.OutOfRange) as info:
            serial.from_jsonable(Loose, {"raw": {"a": [1, bad]}})
        assert str(info.value) == why


def test_a_live_nan_or_infinity_is_recorded_as_null_and_written_as_standard_json():
    sample = ThermalSample(t_s=1.0, temperature_c=math.nan, power_w=math.inf)
    assert serial.to_jsonable(sample)["temperature_c"] is None and serial.to_jsonable(sample)["power_w"] is None
    text = serial.dumps({"x": [math.nan, -math.inf, 1.5], "s": sample})
    assert "NaN" not in text and "Infinity" not in text and json.loads(text)["x"] == [None, None, 1.5]


def _reading_types() -> dict[str, type]:
    """Every dataclass a reader returns, and every dataclass nested in one."""
    todo = [spec.returns for spec in readers.load_all().values() if dataclasses.is_dataclass(spec.returns)]
    seen: dict[str, type] = {}
    while todo:
        tp = todo.pop()
        if tp.__qualname__ in seen:
            continue
        seen[tp.__qualname__] = tp
        hints = typing.get_type_hints(tp, include_extras=True)
        for hint in hints.values():
            stack = [hint]
            while stack:
                h = stack.pop()
                if dataclasses.is_dataclass(h):
                    todo.append(h)
                stack.extend(a for a in typing.get_args(h) if not isinstance(a, Bound))
    return seen


def _declared(hint: Any) -> Optional[Bound]:
    """The Bound a field's type declares (through Optional, list and dict values), if any."""
    stack = [hint]
    while stack:
        h = stack.pop()
        if typing.get_origin(h) is typing.Annotated:
            return next((m for m in h.__metadata__ if isinstance(m, Bound)), None)
        stack.extend(a for a in typing.get_args(h) if not isinstance(a, Bound))
    return None


def _numeric(hint: Any) -> bool:
    stack = [hint]
    while stack:
        h = stack.pop()
        if h in (int, float):
            return True
        stack.extend(typing.get_args(h))
    return False


def test_every_field_whose_name_carries_a_unit_declares_that_quantity():
    """``*_gbps``, ``*_mhz``, ``*_c``, ``*_bytes``, ``*_s`` … : the name says the unit, the type says
    the range, and the two agree in every reading type (a field added without its quantity fails)."""
    types = _reading_types()
    assert len(types) > 40
    wrong = []
    for name, tp in sorted(types.items()):
        for field, hint in typing.get_type_hints(tp, include_extras=True).items():
            named = bound_of_name(field)
            if named is None or not _numeric(hint):
                continue
            declared = _declared(hint)
            if declared is None or declared.unit != named.unit:
                wrong.append(f"{name}.{field}: named {named.unit}, declared {declared}")
    assert wrong == []
    assert set(BY_SUFFIX) >= {"_gbps", "_tflops", "_mhz", "_c", "_w", "_bytes", "_s"}


# -- the examples, replayed -----------------------------------------------------------------------
def edited(tmp_path: Path, name: str, edit) -> Path:
    snap = json.loads(H200.read_text())
    edit(snap["readings"])
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(snap))  # json.dumps writes NaN and Infinity as Python's reader accepts them
    return path


def replay_lines(*paths: Path, extra: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    out = {}
    for path in paths:
        proc = subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-p", "no:randomly", "-v",
                               f"--spark-replay={path}", *extra], capture_output=True, text=True, timeout=300,
                              cwd=path.parent)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
        out[path.stem] = {line[:3].strip(): line for line in proc.stdout.splitlines() if re.match(r"^G\d+ ", line)}
        out[path.stem]["all"] = proc.stdout
    return out


def _methods(readings: dict, value: Any, field: str = "gbps", every: bool = False) -> None:
    for method in readings["bench.bandwidth"]["result"]["methods"][: None if every else 1]:
        method[field] = value


@pytest.mark.timeout(600)
def test_numbers_no_machine_gives_make_their_reading_unavailable_naming_the_field(tmp_path):
    cases = {
        "nan": lambda r: _methods(r, math.nan),
        "inf": lambda r: r["thermal.spot_check"].update(tflops=math.inf),
        "negative": lambda r: _methods(r, -4600.0, every=True),
        "digits": lambda r: _methods(r, 10 ** 400),
        "hot": lambda r: r["thermal.snapshot"]["sample"].update(temperature_c=5000.0),
        "memory": lambda r: r["mem.meminfo"].update(mem_available_bytes=-1),
    }
    lines = replay_lines(*(edited(tmp_path, name, edit) for name, edit in cases.items()))
    g5 = "G5 SKIP: could not read bench.bandwidth: result.methods[0].gbps: "
    assert lines["nan"]["G5"] == g5 + "NaN is not a finite number"
    assert lines["negative"]["G5"] == g5 + "-4600 GB/s is below 0 GB/s"
    assert lines["digits"]["G5"] == g5 + "401 digits, beyond 64 bits"
    assert "inf TFLOP/s" not in lines["inf"]["all"] and "read nan" not in lines["nan"]["all"]
    assert "could not read thermal.spot_check: tflops: Infinity is not a finite number" in lines["inf"]["all"]
    assert "could not read thermal.snapshot: sample.temperature_c: 5000 °C is above 300 °C" in lines["hot"]["all"]
    assert lines["memory"]["G3"].startswith(
        "G3 SKIP: could not read mem.meminfo: mem_available_bytes: -1 bytes is below 0 bytes")


@pytest.mark.timeout(300)
def test_the_snapshot_and_report_of_a_replay_are_standard_json(tmp_path):
    """Python's json accepts NaN; a replay of such a snapshot writes documents any parser reads."""
    path = edited(tmp_path, "nan", lambda r: _methods(r, math.nan))
    proc = subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-q", "-p", "no:randomly",
                           f"--spark-replay={path}", "--spark-snapshot=out.json", "--json-report",
                           "--json-report-file=report.json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]

    def strict(name: str) -> Any:
        return json.loads((tmp_path / name).read_text(), parse_constant=lambda c: pytest.fail(f"{name} holds {c}"))

    assert strict("out.json")["format"] == "spark-gotchas-snapshot" and strict("report.json")["spark_gotchas"]["lines"]


def test_every_json_the_suite_writes_is_standard():
    """json.dumps without allow_nan=False writes NaN and Infinity, which standard parsers refuse: the
    suite writes JSON through serial.dumps (or microbench's json_text), the worker's pipe aside (it
    is read back by the suite's own json.loads, never by anyone else)."""
    found = []
    for path in sorted([*(ROOT / "spark_gotchas").rglob("*.py"), *(ROOT / "microbench").rglob("*.py")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bjson\.dumps?\(", line) and "allow_nan=False" not in line \
                    and path.name not in ("worker.py", "worker_main.py") and not line.lstrip().startswith(("#", '"""')):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


# -- fleet and diff: one bad file or value never stops the rest ------------------------------------
def node_files(tmp_path: Path, n: int = 3) -> list[Path]:
    out = []
    for i in range(n):
        snap = json.loads(H200.read_text())
        snap["readings"]["host.identity"] = {"hostname": f"node-{i}", "boot_id": f"b{i}"}
        path = tmp_path / f"node-{i}.json"
        path.write_text(json.dumps(snap))
        out.append(path)
    return out


def test_fleet_names_a_400_digit_bandwidth_and_judges_the_other_files(tmp_path, capsys):
    paths = node_files(tmp_path)
    snap = json.loads(paths[1].read_text())
    _methods(snap["readings"], 10 ** 400)
    paths[1].write_text(json.dumps(snap))
    assert fleet.main([str(p) for p in paths]) == 0
    out = capsys.readouterr().out
    assert f"spark-gotchas fleet: {paths[1]}: G5 read bandwidth: 401 digits, beyond 64 bits: left out of the " \
           "comparison" in out
    assert "3 node(s); 0 with a FAIL of its own; 0 finding(s) across the group" in out


@pytest.mark.parametrize("value, why", [(math.nan, "NaN is not a finite number"),
                                        (-4600.0, "-4600 GB/s is below 0 GB/s"),
                                        (math.inf, "Infinity is not a finite number")])
def test_fleet_leaves_a_figure_no_machine_gives_out_of_the_median(tmp_path, capsys, value, why):
    paths = node_files(tmp_path, 4)
    for i, path in enumerate(paths):
        snap = json.loads(path.read_text())
        _methods(snap["readings"], value if i == 0 else 4600.0 - i)
        path.write_text(json.dumps(snap))
    assert fleet.main([*(str(p) for p in paths), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"--json printed {c}"))
    assert f"{paths[0]}: G5 read bandwidth: {why}: left out of the comparison" in doc["notes"]
    assert doc["findings"] == []


def test_fleet_that_judged_nothing_exits_2_and_a_file_it_cannot_read_is_named(tmp_path, capsys):
    (tmp_path / "empty.json").write_text("{}")
    (tmp_path / "report.json").write_text(json.dumps({"tests": [], "spark_gotchas": {}}))
    assert fleet.main([str(tmp_path / "empty.json"), str(tmp_path / "report.json")]) == 2
    out = capsys.readouterr().out
    assert "report.json holds no verdict, measured figure or version to compare: left out" in out


def test_fleet_goes_on_past_a_file_its_reading_does_not_foresee(tmp_path, capsys, monkeypatch):
    paths = node_files(tmp_path)
    real = fleet.read_node

    def sometimes_broken(path, name_by="host"):
        if path.endswith("node-1.json"):
            raise ZeroDivisionError("a case nobody wrote down")
        return real(path, name_by)

    monkeypatch.setattr(fleet, "read_node", sometimes_broken)
    assert fleet.main([str(p) for p in paths]) == 0
    out = capsys.readouterr().out
    assert f"{paths[1]} could not be read (ZeroDivisionError: a case nobody wrote down): left out" in out
    assert "2 node(s)" in out


def test_diff_names_values_it_cannot_compare_and_compares_the_rest(tmp_path, capsys):
    a, b = node_files(tmp_path, 2)
    snap = json.loads(b.read_text())
    snap["readings"]["mem.meminfo"]["mem_total_bytes"] = 10 ** 400
    snap["readings"]["mem.meminfo"]["mem_available_bytes"] = -5
    snap["readings"]["thermal.snapshot"]["power_limit_w"] = math.nan
    b.write_text(json.dumps(snap))
    assert sgdiff.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Unusable readings in B (not compared)\n" in out
    for why in ("mem.meminfo.mem_total_bytes: 401 digits, beyond 64 bits",
                "mem.meminfo.mem_available_bytes: -5 bytes is below 0 bytes",
                "thermal.snapshot.power_limit_w: NaN is not a finite number"):
        assert f"  {why}\n" in out
    assert sgdiff.main([str(a), str(b), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"--json printed {c}"))
    assert len(doc["unusable"]["B"]) == 3 and "A" not in doc["unusable"]


@pytest.mark.parametrize("command, args, broken", [
    ("diff", [str(H200), str(H200)], "loads"), ("check-report", [str(H200)], "loads"),
    ("fleet", [str(H200), "--json"], "dumps"),  # fleet reads each file under its own guard: it breaks at printing
])
def test_a_tool_that_crashes_says_so_in_one_line_and_exits_3_never_1(tmp_path, command, args, broken):
    """Exit 1 is each tool's finding (a status got worse, a group finding, an incomplete report): a
    crash must never read as one. The crash is forced in a child process by a module that breaks
    json.loads or json.dumps, something no input of the tool's own can do."""
    (tmp_path / "sitecustomize.py").write_text(
        f"import json\n\ndef broken(*a, **k):\n    raise MemoryError('forced for the test')\n\njson.{broken} = broken\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "spark_gotchas", command, *args], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        f"python -m spark_gotchas {command}: internal error (please report it): MemoryError: forced for the test"
    assert "Traceback" not in proc.stdout + proc.stderr


REPORT = Path(__file__).resolve().parent / "fixtures" / "h100" / "doors-live" / "report.json"
ODD = [7, "ab", None, [1, 2, 3], {"a": 1}, True, -1.5]  # a value of each JSON type, none of them the field's


@pytest.mark.parametrize("odd", ODD, ids=repr)
def test_a_document_of_unforeseen_types_is_read_or_named_never_an_internal_error(tmp_path, odd):
    """``diff``, ``fleet`` and ``check-report`` read documents someone else may have written: every
    platform field, a test's metadata and its verdict, of another JSON type than the suite writes,
    gives the tool's own answer (exit 0, 1 or 2), never an internal error (exit 3)."""
    snap = json.loads(H200.read_text())
    snap["platform"] = {key: odd for key in snap["platform"]}
    report = json.loads(REPORT.read_text())
    report["tests"][0]["metadata"] = odd
    report["tests"][1]["metadata"] = {"gotcha": odd}
    report["spark_gotchas"]["platform"] = {key: odd for key in report["spark_gotchas"]["platform"]}
    (tmp_path / "snap.json").write_text(json.dumps(snap))
    (tmp_path / "report.json").write_text(json.dumps(report))
    for command in (["diff", str(H200), "snap.json"], ["diff", "report.json", "snap.json", "--json"],
                    ["diff", str(REPORT), "report.json"], ["fleet", "snap.json", "report.json"],
                    ["check-report", "report.json"]):
        proc = subprocess.run([sys.executable, "-m", "spark_gotchas", *command], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode in (0, 1, 2) and "internal error" not in proc.stderr, (command, proc.stderr[-1500:])


@pytest.mark.parametrize("gotchas", ["1-99999999999999999999", "1-3000000", "3-1", "0", "11", "x", "", "-5"])
def test_check_report_refuses_gotchas_outside_1_to_10_before_counting_them(gotchas):
    """A range is checked at its ends: ``1-3000000`` took 133 MB before it was refused, a 20-digit end
    ended in an OverflowError."""
    proc = subprocess.run([sys.executable, "-m", "spark_gotchas", "check-report", "--gotchas", gotchas, str(REPORT)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("give gotcha numbers 1-10, e.g. 1-10 or 1,9")


@pytest.mark.parametrize("gotchas", ["1-10", "1,9", " 2 - 4,7"])
def test_check_report_takes_gotcha_numbers_and_ranges(gotchas):
    proc = subprocess.run([sys.executable, "-m", "spark_gotchas", "check-report", "-q", "--gotchas", gotchas,
                           str(REPORT)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
