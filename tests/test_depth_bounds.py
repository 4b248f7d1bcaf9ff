"""Every input is bounded in depth too, as in size: a JSON document nested more than 100 levels is
refused where it is read (bounded_read), every walk over readings is iterative or bounded (the
masker, the JSON door, serial's two walks), and the other shapes a document can take are each a
clear line: a key given twice, an integer of 10,000 digits (Python's int() stops at 4300), a
wrong type at any level of a snapshot, YAML aliases at scale, a launch config past its size bound."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_gotchas.base import bounded_read, outward, scrub, serial
from spark_gotchas.knowledge.readings.launch import to_int
from spark_gotchas.knowledge.readings.thermal import SpotCheck
from spark_gotchas.machine.readers import launch
from spark_gotchas.machine.snapshot import SnapshotError
from spark_gotchas.machine.snapshot import load as load_snapshot

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"


def nested(depth: int, leaf: object = "x") -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def planted(tmp_path: Path, edit) -> Path:
    doc = json.loads(H200.read_text())
    edit(doc)
    path = tmp_path / "planted.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


# -- the bound where a document is read ---------------------------------------------------------------------
@pytest.mark.parametrize("depth", [450, 600, 990])
def test_the_issues_replay_is_one_usage_line_not_3000_lines_of_recursion_error(tmp_path, depth):
    """A string field (``env.container.proc1_cgroup``) holding arrays nested 450-990 deep: the run
    with a snapshot and a report ended in 2,994 lines of traceback, no G-line and no file."""
    path = planted(tmp_path, lambda d: d["readings"]["env.container"].__setitem__("proc1_cgroup", "@DEEP@"))
    path.write_text(path.read_text().replace('"@DEEP@"', "[" * depth + '"x"' + "]" * depth))  # json.dumps would recurse
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-p", "no:randomly",
                          f"--spark-replay={path}", f"--spark-snapshot={tmp_path / 'out.json'}", "--json-report",
                          f"--json-report-file={tmp_path / 'report.json'}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 4 and "Traceback" not in run.stdout + run.stderr, out[-5:]
    assert out == [f"ERROR: spark-gotchas: snapshot {path} is nested too deeply to read (a snapshot is a few levels deep)"]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("depth, read", [(99, True), (100, True), (101, False), (5000, False), (200_000, False)])
def test_a_json_document_is_read_within_100_levels(tmp_path, depth, read):
    path = tmp_path / "doc.json"
    path.write_text("[" * depth + "]" * depth)
    if read:
        assert bounded_read.read_json(path, bounded_read.REPORT) is not None
    else:
        with pytest.raises(bounded_read.Refused, match="nested too deeply to read"):
            bounded_read.read_json(path, bounded_read.REPORT)


@pytest.mark.parametrize("text, why", [
    ('{"readings": {}, "readings": {"gpu.inventory": {}}}', "an object holds the key 'readings' twice"),
    ('{"a": [{"status": "PASS", "status": "FAIL"}]}', "an object holds the key 'status' twice"),
    ('{"n": ' + "9" * 10_000 + "}", "Exceeds the limit (4300 digits)"),
    ('{"n": -' + "9" * 5000 + "}", "Exceeds the limit (4300 digits)"),
])
def test_a_key_twice_and_an_integer_python_cannot_parse_are_refused_in_one_line(tmp_path, text, why):
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(bounded_read.Refused) as refused:
        bounded_read.read_json(path, bounded_read.SNAPSHOT)
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_a_snapshot_with_a_key_twice_is_refused_naming_it(tmp_path):
    text = H200.read_text()
    path = tmp_path / "twice.json"
    path.write_text(text.replace('"readings": {', '"readings": {}, "readings": {', 1))
    with pytest.raises(SnapshotError, match="holds the key 'readings' twice"):
        load_snapshot(path)


# -- every walk iterative or bounded --------------------------------------------------------------------------
def test_the_masker_and_the_json_door_copy_any_depth():
    deep = {"a": nested(5000, "token=hunter2 ghp_" + "A" * 36)}
    copied = scrub.scrub(deep)
    inner = copied["a"]
    for _ in range(5000):
        inner = inner[0]
    assert inner == "token=*** ***"
    assert outward.document(deep) is not deep and outward.record(deep) is not deep
    assert scrub.scrub_named({"k": nested(5000, {"password": "x"})})["k"] is not None


def test_serial_turns_any_depth_to_json_and_builds_a_bounded_one():
    inner = serial.to_jsonable({"a": nested(5000)})["a"]  # iterative: no RecursionError
    for _ in range(5000):
        inner = inner[0]
    assert inner == "x"
    recorded = json.loads(H200.read_text())["readings"]["thermal.spot_check"]
    spot = {**recorded, "again": None}
    for _ in range(150):  # a SpotCheck holds its re-run, which holds its own …
        spot = {**recorded, "again": spot}
    with pytest.raises(serial.Misfit, match="nested deeper than 100 levels"):
        serial.from_jsonable(SpotCheck, spot)
    with pytest.raises(serial.Misfit) as misfit:  # the message quotes two levels of the value, not 5000
        serial.from_jsonable(int, nested(5000))
    assert len(str(misfit.value)) < 120


def test_a_reading_is_built_with_its_strings_masked():
    """A judge never sees a credential, so what it cuts to fit a line holds no part of one."""
    from spark_gotchas.knowledge.readings.gpu import GpuVisibility

    vis = serial.from_jsonable(GpuVisibility, {"cuda_visible_devices": "0," + "x" * 20 + "ghp_" + "Q" * 36})
    assert vis.cuda_visible_devices == "0," + "x" * 20 + "***"


@pytest.mark.parametrize("command", [["diff", "{a}", "{b}"], ["fleet", "{b}"], ["check-report", "{b}"]])
def test_a_report_nested_past_the_bound_is_one_line_for_every_tool(tmp_path, command):
    a = tmp_path / "a.json"
    a.write_text(H200.read_text())
    b = planted(tmp_path, lambda d: d["readings"]["mem.meminfo"].__setitem__("note", "@DEEP@"))
    b.write_text(b.read_text().replace('"@DEEP@"', "[" * 300 + "]" * 300))
    args = [c.format(a=a, b=b) for c in command]
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", *args], capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert "Traceback" not in out and run.returncode in (1, 2), out[-2000:]
    assert "nested too deeply to read" in out


# -- integers of 10,000 digits -----------------------------------------------------------------------------------
REPORT = ROOT / "tests" / "fixtures" / "h100" / "doors-live" / "report.json"


@pytest.mark.parametrize("command", [["diff", "{a}", "{b}"], ["fleet", "{b}"], ["check-report", "{b}"],
                                     ["node-health", "--from-report", "{b}", "--dry-run", "--node", "n1"]])
def test_a_gotcha_id_of_10000_digits_is_no_crash_of_any_tool(tmp_path, command):
    """``int()`` of the digits after ``G`` raised ValueError past 4300 of them: diff's internal error, exit 3."""
    doc = json.loads(REPORT.read_text())
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    gotchas = doc["spark_gotchas"]["gotchas"]
    gotchas["G" + "9" * 10_000] = {**next(iter(gotchas.values())), "status": "FAIL"}
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", *[c.format(a=a, b=b) for c in command]],
                         capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode != 3 and "internal error" not in out and "Traceback" not in out, out[-2000:]
    assert max(len(line) for line in out.splitlines()) < 2000


@pytest.mark.parametrize("raw", ["9" * 10_000, "9" * 4000, 10 ** 400, "3:" + "9" * 5000, 10 ** 19])
def test_a_launch_setting_of_any_number_of_digits_is_no_number_here_not_a_crash(raw):
    assert to_int(raw) is None


@pytest.mark.parametrize("name, text, expect", [
    ("c.json", '{"tensor_parallel_size": ' + "9" * 10_000 + "}", "too large to review: a number of more digits than Python reads (4300)"),
    ("c.json", '{"tensor_parallel_size": "' + "9" * 10_000 + '"}', None),
    ("c.yaml", "tensor_parallel_size: " + "9" * 10_000 + "\n", None),
    ("c.json", '{"a": "' + "x" * (2 << 20) + '"}', "too large to review: larger than 1 MiB"),
    ("c.toml", "[parallelism]\n" + "tensor_parallel_degree = 8\n" * 60_000, "too large to review: larger than 1 MiB"),
    ("c.yaml", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)),
     "too large to review: more than 100000 values once its aliases are expanded"),
])
def test_a_launch_config_past_a_bound_is_a_reason_never_a_traceback(tmp_path, name, text, expect):
    path = tmp_path / name
    path.write_text(text)
    parsed, _ = launch.parse_file(str(path))
    assert (parsed.error or None) == expect if expect is None else (parsed.error or "").startswith(expect), parsed.error


def test_a_json_launch_config_with_a_key_twice_shows_both_values_as_yaml_does(tmp_path):
    (tmp_path / "c.json").write_text('{"tensor_parallel_size": 2, "tensor_parallel_size": 8}')
    (tmp_path / "c.yaml").write_text("tensor_parallel_size: 2\ntensor_parallel_size: 8\n")
    as_json = [s.value for s in launch.parse_file(str(tmp_path / "c.json"))[0].settings]
    as_yaml = [s.value for s in launch.parse_file(str(tmp_path / "c.yaml"))[0].settings]
    assert as_json == as_yaml == [2, 8]


# -- a wrong type at every level of a snapshot -------------------------------------------------------------------
WRONG = ["x", 7, [1], {"a": 1}, None, True, -1, 1e308, "9" * 10_000]


def _paths(node, at=()):
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, at + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node[:2]):
            yield from _paths(value, at + (i,))


@pytest.mark.timeout(600)
def test_a_wrong_type_at_every_level_of_a_snapshot_gives_a_line_per_check_and_no_crash():
    """Every value of the recorded H200 snapshot's readings in turn, replaced by a value of another
    kind (rotating through :data:`WRONG`), judged by every check: no check raises (a reading that
    does not fit is unavailable, a SKIP line that names it), every line is one line."""
    import test_fuzz as fuzz

    from spark_gotchas.knowledge.verdict import summary_lines
    from spark_gotchas.machine.provider import ReadingUnavailable
    from spark_gotchas.machine.snapshot import Snapshot

    recorded = json.loads(H200.read_text())["readings"]
    paths = [p for key in recorded for p in _paths(recorded[key], (key,)) if len(p) > 1]
    assert len(paths) > 300
    untouched = fuzz.ReplaySpark(Snapshot(readings=recorded, options={}, path="recorded.json"), "auto")
    checks = []
    for check in fuzz.CHECKS:  # a check that cannot run on the recorded snapshot itself is not this test's
        try:
            check(untouched)
            checks.append(check)
        except ReadingUnavailable as exc:
            if not exc.bug:
                checks.append(check)
        except Exception:  # noqa: BLE001
            continue
    assert len(checks) >= 20
    crashed = []
    for n, path in enumerate(paths):
        readings = copy.deepcopy(recorded)
        node = readings
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = WRONG[n % len(WRONG)]
        spark = fuzz.ReplaySpark(Snapshot(readings=readings, options={}, path="wrong.json"), "auto")
        for check in checks:
            try:
                check(spark)
            except ReadingUnavailable as exc:
                if exc.bug:
                    crashed.append((path, check.__name__, exc.reason[:120]))
            except Exception as exc:  # noqa: BLE001 (what is being looked for)
                crashed.append((path, check.__name__, f"{type(exc).__name__}: {str(exc)[:120]}"))
        assert all("\n" not in line and len(line) < 1000 for line in summary_lines(spark.verdicts))
    assert crashed == [], crashed[:10]


@pytest.mark.parametrize("key", ["format", "version", "readings", "options", "platform", "verdicts", "created", "markers"])
def test_a_wrong_type_at_the_top_of_a_snapshot_loads_or_is_refused_in_one_line(tmp_path, key):
    for value in WRONG:
        path = planted(tmp_path, lambda d, v=value: d.__setitem__(key, v))
        try:
            load_snapshot(path)
        except SnapshotError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)


def test_g6_reads_a_cuda_visible_devices_of_10000_digits_as_naming_no_index():
    """``int()`` of the digits raised past 4300 of them: G6's check ended in a ValueError."""
    import test_fuzz as fuzz

    from spark_gotchas.machine.snapshot import Snapshot

    readings = json.loads(H200.read_text())["readings"]
    readings["gpu.processes"]["cuda_visible_devices"] = "9" * 10_000
    spark = fuzz.ReplaySpark(Snapshot(readings=readings, options={}, path="cvd.json"), "auto")
    (check,) = [c for c in fuzz.CHECKS if c.__name__ == "test_g6_other_gpu_workloads"]
    check(spark)
    assert spark.verdicts[-1].gotcha == 6 and len(spark.verdicts[-1].line) < 600

