"""Inputs that never end or explode, met for real: launch configs (G10) and snapshots
(``--spark-replay``, ``--spark-baseline``) that are ``/dev/zero``, a FIFO with no writer, a
200 MB file, YAML aliases that expand exponentially, JSON nested 100 000 levels deep. Each is one
line that names the file and the limit it passed: never a hang, a RecursionError or a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from gline_block import glines

from spark_gotchas.knowledge.judges import g10_parallelism as g10
from spark_gotchas.knowledge.profiles import GB10
from spark_gotchas.knowledge.readings.launch import LaunchReview
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers.launch import review_files

ROOT = Path(__file__).resolve().parents[1]
H200_SNAPSHOT = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
FIX_LIMIT = ("review it by hand, or pass the launcher's own command line or config (a regular file of at most 1 MiB, "
             "as the launch reads it)")

LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)) + "tensor_parallel_size: *i\n"
DOUBLING = "A=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n" + "".join(
    f"V{i}=${{{'A' if i == 0 else f'V{i - 1}'}}}${{{'A' if i == 0 else f'V{i - 1}'}}}\n" for i in range(40)) + \
    "torchrun --nnodes 2 $V39 train.py\n"


def hostile(tmp_path: Path, kind: str) -> str:
    """A real file (or device, or FIFO) of each kind that never ends or explodes."""
    if kind == "dev_zero":
        return "/dev/zero"
    path = tmp_path / {"laughs": "laughs.yaml", "recursive": "recursive.yaml", "deep_json": "deep.json",
                       "deep_yaml": "deep.yaml", "huge": "huge.yaml", "fifo": "launch.fifo", "folder": "configs",
                       "doubling": "launch.sh", "many": "many.yaml"}[kind]
    if kind == "laughs":
        path.write_text(LAUGHS)
    elif kind == "recursive":
        path.write_text("model: &m\n  layers: [1, *m]\n")
    elif kind == "deep_json":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "deep_yaml":
        path.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(200 * 10**6)  # 200 MB, sparse: no disk used
    elif kind == "fifo":
        os.mkfifo(path)  # nobody ever writes: an open for reading would wait for ever
    elif kind == "folder":
        path.mkdir()
    elif kind == "doubling":
        path.write_text(DOUBLING)
    elif kind == "many":
        path.write_text("".join(f"key_{i}: {i}\n" for i in range(60_000)))
    return str(path)


CASES = {
    "laughs": "too large to review: more than 100000 values once its aliases are expanded",
    "recursive": "too deeply nested to review: a recursive alias (an anchor used inside itself) at line 1",
    "deep_json": "too deeply nested to review: more than 100 levels",
    "deep_yaml": "too deeply nested to review: more than 100 levels",
    "huge": "too large to review: larger than 1 MiB",
    "dev_zero": "cannot review: not a regular file (a character device)",
    "fifo": "cannot review: not a regular file (a FIFO or pipe)",
    "folder": "cannot review: not a regular file (a directory)",
    "doubling": "too large to review: its $VARIABLES expand to more than 4 MiB",
    "many": "too large to review: more than 100000 values",
}


@pytest.mark.timeout(60)  # each takes well under a second: 60 s only proves it did not hang
@pytest.mark.parametrize("kind", CASES)
def test_a_launch_config_past_a_limit_is_a_g10_fail_naming_file_and_limit(tmp_path, kind):
    path = hostile(tmp_path, kind)
    v = g10.judge_launch(LaunchReview(files=review_files([path])), GB10)
    brief = f"{Path(path).name}: {CASES[kind]}"  # the line keeps 90 characters of it, the detail all
    assert v.line == "G10 FAIL: " + (brief if len(brief) <= 90 else brief[:89].rstrip() + "…")
    assert v.detail == f"{path}: {CASES[kind]}"
    assert v.fix == FIX_LIMIT


def test_configs_within_the_limits_are_still_reviewed(tmp_path):
    nested = tmp_path / "nested.json"  # 90 levels: deep, but inside the limit
    nested.write_text('{"a": ' * 89 + '{"tensor_parallel_size": 2}' + "}" * 89)
    anchors = tmp_path / "anchors.yaml"  # anchors and merge keys, as real configs use them
    anchors.write_text("base: &base\n  num_machines: 2\n  distributed_type: FSDP\nrun:\n  <<: *base\n"
                       "  other: *base\n")
    deep = g10.judge_launch(LaunchReview(files=review_files([str(nested)])), GB10)
    assert deep.status is Status.FAIL and deep.line == "G10 FAIL: nested.json: tensor parallel 2 spans nodes (a Spark has one GPU)"
    assert deep.detail.startswith(f"{nested}: tensor parallel 2 (a.a.")
    assert deep.detail.endswith("tensor_parallel_size, line 1) spans nodes (a Spark has one GPU)")
    assert "review it by hand" not in deep.fix
    merged = g10.judge_launch(LaunchReview(files=review_files([str(anchors)])), GB10)
    assert merged.line == "G10 PASS: anchors.yaml: FSDP across 2 nodes"


def test_a_limit_and_a_parse_error_each_get_their_fix(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    v = g10.judge_launch(LaunchReview(files=review_files([str(broken), "/dev/zero"])), GB10)
    assert v.fix.startswith("fix the file (the error names the line)") and v.fix.endswith(FIX_LIMIT)


# -- from outside: the commands a user types -----------------------------------------------------------------
def run_pytest(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["HOME"] = str(cwd)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def block(proc: subprocess.CompletedProcess, gotcha: int) -> list[str]:
    """The G-lines (and fix lines) of one gotcha in the block the run printed."""
    return glines(SimpleNamespace(stdout=SimpleNamespace(lines=proc.stdout.splitlines())), (gotcha,))


@pytest.mark.parametrize("kind", ["laughs", "fifo"])
def test_the_preflight_prints_the_g10_line_for_a_hostile_launch_config(tmp_path, kind):
    path = hostile(tmp_path, kind)
    proc = run_pytest("-m", "fast", "-k", "g10", str(ROOT / "tests_gotchas"), "--spark-launch-config", path,
                      cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert block(proc, 10) == [f"G10 FAIL: {Path(path).name}: {CASES[kind]}", f"    fix: {FIX_LIMIT}"]
    assert "Traceback" not in proc.stdout + proc.stderr and "RecursionError" not in proc.stdout + proc.stderr


def snapshot_input(tmp_path: Path, kind: str) -> tuple[str, str]:
    """(path, the reason the replay gives) for each kind of snapshot that must be refused."""
    if kind == "dev_zero":
        return "/dev/zero", "snapshot /dev/zero is not a regular file (a character device)"
    path = tmp_path / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
        return str(path), f"snapshot {path} is not a regular file (a FIFO or pipe)"
    if kind == "folder":
        path.mkdir()
        return str(path), f"snapshot {path} is not a regular file (a directory)"
    if kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(65 << 20)  # sparse
        return str(path), f"snapshot {path} is larger than 64 MiB, the most this suite reads as a snapshot"
    path.write_text('{"format": "spark-gotchas-snapshot", "version": 1, "readings": ' + "[" * 100_000 + "]" * 100_000
                    + "}")
    return str(path), f"snapshot {path} is nested too deeply to read (a snapshot is a few levels deep)"


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "folder", "huge", "deep"])
def test_a_replay_of_something_that_is_no_snapshot_is_one_usage_line(tmp_path, kind):
    path, reason = snapshot_input(tmp_path, kind)
    proc = run_pytest("-m", "fast", str(ROOT / "tests_gotchas"), "--spark-replay", path, cwd=tmp_path, timeout=120)
    assert proc.returncode == 4  # pytest's usage error
    assert proc.stderr.strip() == f"ERROR: spark-gotchas: {reason}"
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_baseline_that_is_no_snapshot_is_one_g9_line(tmp_path):
    path, reason = snapshot_input(tmp_path, "fifo")
    proc = run_pytest("-m", "fast", "-k", "g09", str(ROOT / "tests_gotchas"), "--spark-baseline", path, cwd=tmp_path)
    assert f"G9 FAIL: baseline unusable: {reason}" in block(proc, 9), proc.stdout[-3000:]


def test_a_replayed_reading_of_the_wrong_type_is_a_skip_naming_the_field(tmp_path):
    snap = json.loads(H200_SNAPSHOT.read_text())
    snap["readings"]["torch.build"]["device_count"] = True  # a boolean where an integer belongs
    snap["readings"]["bench.bandwidth"]["result"]["methods"] = ["read", "copy"]  # strings where results belong
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(snap))
    proc = run_pytest("-m", "fast", "-rs", "-v", "-k", "g01 or g05", str(ROOT / "tests_gotchas"), "--spark-replay",
                      str(path), cwd=tmp_path)
    out = proc.stdout
    # the line names the type and, where it fits, the field; the detail (-v) has the whole finding
    assert "G1 SKIP: could not read torch.build: recorded reading does not fit TorchBuild: device_count\n" in out
    assert "TorchBuild: device_count (needs int, got boolean True)" in out
    assert "G5 SKIP: could not read bench.bandwidth: recorded reading does not fit BandwidthReading" in out
    assert "BandwidthReading (result.methods[0]: MethodResult needs an object, got string 'read')" in out
    assert "Traceback" not in out + proc.stderr and "the check itself failed" not in out


def test_a_replay_given_a_baseline_compares_the_recorded_versions_with_it(tmp_path):
    """--spark-baseline on a replay is read (a file, not this machine): the recorded distributions
    are judged against it, never "no known-good baseline given"."""
    snap = json.loads(H200_SNAPSHOT.read_text())
    baseline = json.loads(H200_SNAPSHOT.read_text())
    baseline["readings"]["env.distributions"]["versions"]["torch"] = "2.10.0"
    path = tmp_path / "good.json"
    path.write_text(json.dumps(baseline))
    proc = run_pytest("-m", "fast", "-k", "g09", str(ROOT / "tests_gotchas"), "--spark-replay", str(H200_SNAPSHOT),
                      "--spark-baseline", str(path), cwd=tmp_path)
    torch_now = snap["readings"]["env.distributions"]["versions"]["torch"]
    assert f"G9 WARN: 1 distribution(s) differ from the baseline: changed torch 2.10.0 -> {torch_now}\n" in proc.stdout, \
        proc.stdout[-3000:]  # the check's own line (pytest's warnings summary); the block folds it into "+1 more"
    assert "no known-good baseline given" not in proc.stdout
