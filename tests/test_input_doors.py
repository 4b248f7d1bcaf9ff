"""Every file a command reads goes through one reader (spark_gotchas.base.bounded_read): a regular file,
within its kind's size bound and a time bound. Met the way a user meets them: the preflight's soak
heartbeat in the working folder, soak-record's CSV, G8's cache, a rank's result, a launch config.

The examples that were found: a heartbeat that is a link to /dev/zero (it grew to 23.9 GB), a
heartbeat that is a FIFO (120 s of hanging while G4 said SKIP), a 2 GB heartbeat (4.2 GB of
memory), soak-record on the same and on a 2 GB sparse CSV (a traceback). Then the same class on
doors that were not the examples: G8's cache, a rank's result, a read that stalls in the kernel.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spark_gotchas.base import bounded_read
from spark_gotchas.machine.readers.thermal.reboot import HEARTBEAT_NAME, check_heartbeat, new_heartbeat, write_heartbeat
from spark_gotchas.runtime.soak.record import Recorder, main, read_csv

ROOT = Path(__file__).resolve().parents[1]
TWO_GB = 2 << 30


def sparse(path: Path, size: int = TWO_GB) -> Path:
    """A file of ``size`` bytes that takes no disk (and would take ``size`` of memory to read whole)."""
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


HOSTILE = {  # what a file the suite reads turns out to be -> how the reason reads
    "a link to /dev/zero": ("not a regular file (a character device)", lambda p: p.symlink_to("/dev/zero")),
    "a FIFO": ("not a regular file (a FIFO or pipe)", lambda p: os.mkfifo(p)),
    "a directory": ("not a regular file (a directory)", lambda p: p.mkdir()),
    "a 2 GB sparse file": ("larger than", sparse),
}


# -- the reader itself ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.timeout(30)
def test_every_kind_refuses_what_is_no_regular_file_or_too_large_before_reading_it(tmp_path, case):
    reason, make = HOSTILE[case]
    for kind in bounded_read.KINDS:
        path = tmp_path / f"{kind.what.replace(' ', '-')}.json"
        make(path)
        t0 = time.monotonic()
        with pytest.raises(bounded_read.Refused, match=re.escape(reason)):
            bounded_read.read_bytes(path, kind)
        assert time.monotonic() - t0 < 10  # refused at open, not after reading (a hang would be 120 s)


def test_a_file_at_its_bound_is_read_and_one_byte_more_is_refused(tmp_path):
    kind = bounded_read.Kind("test file", 1000)
    (tmp_path / "ok").write_bytes(b"x" * 1000)
    (tmp_path / "over").write_bytes(b"x" * 1001)
    assert bounded_read.read_bytes(tmp_path / "ok", kind) == b"x" * 1000
    with pytest.raises(bounded_read.Refused, match="larger than 1000 bytes"):
        bounded_read.read_bytes(tmp_path / "over", kind)


def test_a_read_that_stalls_in_the_kernel_is_given_up_within_the_kinds_seconds(tmp_path, monkeypatch):
    """A file on a stalled network file system blocks read() in the kernel: the reader stops waiting
    (the stuck thread finishes on its own later) and says so in a line."""
    path = tmp_path / "on-a-stalled-nfs.json"
    path.write_text("{}")
    release = threading.Event()
    real_read = os.read

    def stalled(fd: int, n: int) -> bytes:
        release.wait(60)
        return real_read(fd, n)

    monkeypatch.setattr(bounded_read.os, "read", stalled)
    kind = bounded_read.Kind("snapshot", 1 << 20, seconds=0.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(bounded_read.Refused, match=r"^not read within 0\.5 s \(a stalled file system or device\?\)$"):
            bounded_read.read_bytes(path, kind)
        assert time.monotonic() - t0 < 30
    finally:
        release.set()


def test_json_with_a_number_python_will_not_parse_is_refused_in_a_line(tmp_path):
    path = tmp_path / "digits.json"
    path.write_text('{"gbps": ' + "9" * 5000 + "}")
    with pytest.raises(bounded_read.Refused, match="^not JSON this suite reads: Exceeds the limit"):
        bounded_read.read_json(path, bounded_read.SNAPSHOT)


def test_the_launch_config_bound_is_the_one_the_g10_fix_names():
    from spark_gotchas.knowledge.readings.launch import MAX_FILE_BYTES

    assert bounded_read.LAUNCH_CONFIG.limit == MAX_FILE_BYTES


# -- the soak heartbeat the preflight reads from the working folder (G4's last-soak check) -----------
@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.timeout(30)
def test_a_hostile_heartbeat_is_a_reason_not_a_hang_or_a_full_memory(tmp_path, case):
    reason, make = HOSTILE[case]
    path = tmp_path / HEARTBEAT_NAME
    make(path)
    check = check_heartbeat(path)
    assert check.found and check.heartbeat is None
    assert check.error.startswith(f"{path} is {reason}")


def test_a_heartbeat_with_numbers_no_clock_gives_names_the_field(tmp_path):
    path = tmp_path / HEARTBEAT_NAME
    write_heartbeat(path, new_heartbeat(1800.0, "soak.csv"))
    for field, value, why in (("started_epoch", "-1e300", "started_epoch: -1e+300 s is below 0 s"),
                              ("planned_s", "NaN", "planned_s: NaN is not a finite number"),
                              ("pid", "9" * 30, "pid: 30 digits, beyond 64 bits")):
        data = json.loads(path.read_text())
        path.write_text(json.dumps(data).replace(f'"{field}": {json.dumps(data[field])}', f'"{field}": {value}'))
        check = check_heartbeat(path)
        assert check.heartbeat is None and check.error == f"{path}: {why}"
        write_heartbeat(path, new_heartbeat(1800.0, "soak.csv"))


@pytest.mark.timeout(120)
def test_the_preflight_says_so_for_a_heartbeat_linked_to_dev_zero_and_a_fifo(tmp_path):
    """The examples, end to end: G4's last-soak line within seconds, its memory bounded."""
    for name, make in (("zero", lambda p: p.symlink_to("/dev/zero")), ("fifo", os.mkfifo)):
        soak_dir = tmp_path / name
        soak_dir.mkdir()
        make(soak_dir / HEARTBEAT_NAME)
        proc = subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-q", "-k", "g4_last_soak",
                               "--soak-dir", str(soak_dir), "-p", "no:randomly"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=100)
        kind = "a character device" if name == "zero" else "a FIFO or pipe"
        assert f"G4 SKIP: the last soak's heartbeat cannot be used: {soak_dir / HEARTBEAT_NAME} is not a regular file " \
               f"({kind})" in proc.stdout, proc.stdout[-2000:]
        assert "Traceback" not in proc.stdout + proc.stderr


# -- soak-record's CSV ------------------------------------------------------------------------------
def soak_csv(path: Path, tflops: tuple[float, ...] = (95.0, 94.0, 95.0)) -> Path:
    """A soak's CSV as the soak's own recorder writes it: three 5 s windows, then the end line."""
    t0 = 1_760_000_000.0
    recorder = Recorder(path, None, None, t0, {"planned_s": 15.0, "window_s": 5.0, "sample_interval_s": 1.0,
                                                "max_drop_fraction": 0.1, "device": "NVIDIA GB10"})
    for i, rate in enumerate(tflops):
        recorder.window({"t_end_epoch": t0 + 5.0 * (i + 1), "seconds": 5.0, "tflops": rate, "busy_fraction": 0.99,
                         "rss_bytes": 1 << 30})
    recorder.finish("completed")
    return path


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.timeout(30)
def test_soak_record_refuses_a_hostile_csv_in_one_line(tmp_path, case, capsys):
    reason, make = HOSTILE[case]
    path = tmp_path / "g4-soak.csv"
    make(path)
    assert main([str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"G4 SKIP: cannot read the soak record {path}: {reason}") and out.count("\n") == 1


def test_soak_record_names_a_cell_that_is_no_finite_number(tmp_path, capsys):
    path = soak_csv(tmp_path / "g4-soak.csv")
    lines = path.read_text().splitlines()
    window = next(i for i, line in enumerate(lines) if line.startswith("window,"))
    path.write_text("\n".join(lines[:window] + [lines[window].replace(",95,", ",nan,")] + lines[window + 1:]) + "\n")
    assert main([str(path)]) == 2
    assert capsys.readouterr().out == (f"G4 SKIP: cannot read the soak record {path}: line {window + 1}: column tflops "
                                       "is 'nan', not a finite number\n")


def test_soak_record_names_a_row_the_csv_module_cannot_read(tmp_path, capsys):
    """A cell over the csv module's 128 KiB field limit is one line naming its line, not an internal error."""
    path = soak_csv(tmp_path / "g4-soak.csv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3] + ['note,"' + "x" * 200_000 + '"'] + lines[3:]) + "\n")
    assert main([str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"G4 SKIP: cannot read the soak record {path}: line ") and "field larger than" in out


def test_a_link_loop_as_the_soak_folder_is_the_last_soak_check_s_reason(tmp_path):
    """``--soak-dir`` (or ``reports`` in the working folder) that is a link loop: the G4 last-soak
    check says why it read nothing; the reader does not fail (a FAIL would drain a Slurm node)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-q", "-p", "no:cacheprovider", "-k", "last_soak",
                          f"--soak-dir={tmp_path / 'a'}", str(ROOT / "tests_gotchas")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "SPARK_GOTCHAS_HEADSTART": "none"})
    assert "Traceback" not in run.stdout + run.stderr and "G4 FAIL" not in run.stdout, run.stdout[-2000:]
    assert re.search(r"^G4 SKIP: the last soak's heartbeat cannot be used: cannot read .*/a/g4-soak.heartbeat.json: "
                     r"Too many levels of symbolic links", run.stdout, re.M), run.stdout[-2000:]


@pytest.mark.parametrize("rate, why", [(-95.0, "windows[1].tflops: -95 TFLOP/s is below 0 TFLOP/s"),
                                       (3e9, "windows[1].tflops: 3e+09 TFLOP/s is above 100000 TFLOP/s")])
def test_soak_record_refuses_a_throughput_no_gpu_gives_naming_the_window(tmp_path, capsys, rate, why):
    path = soak_csv(tmp_path / "g4-soak.csv", (95.0, rate, 95.0))
    assert main([str(path)]) == 2
    assert capsys.readouterr().out == f"G4 SKIP: cannot read the soak record {path}: {why}\n"


def test_a_whole_soak_csv_still_reads_back_as_the_soak_wrote_it(tmp_path):
    reading = read_csv(soak_csv(tmp_path / "g4-soak.csv")).reading
    assert [w.tflops for w in reading.windows] == [95.0, 94.0, 95.0] and reading.completed


# -- G8's cache and a rank's result: the same reader, other doors --------------------------------------
@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.timeout(30)
def test_a_hostile_g8_cache_is_fetched_afresh_not_read(tmp_path, monkeypatch, case):
    from spark_gotchas.machine.readers import github

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    api = "https://api.github.com"
    path = github._cache_path(api)
    path.parent.mkdir(parents=True)
    HOSTILE[case][1](path)
    assert github.load_cache(api, time.time()) is None


def test_a_g8_cache_written_at_no_real_time_is_not_used(tmp_path, monkeypatch):
    from spark_gotchas.machine.readers import github

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    api = "https://api.github.com"
    github.save_cache(api, {"issues": [], "folders": []}, time.time())
    assert github.load_cache(api, time.time()) is not None
    path = github._cache_path(api)
    for stamp in ("NaN", "Infinity", "9" * 400):
        data = json.loads(path.read_text())
        path.write_text(json.dumps(data).replace(f'"fetched_at": {data["fetched_at"]}', f'"fetched_at": {stamp}'))
        assert github.load_cache(api, time.time()) is None
        github.save_cache(api, {"issues": [], "folders": []}, time.time())
    assert "NaN" not in path.read_text()


def test_a_ranks_result_goes_through_the_reader():
    """G10's rank results are read as RANK_RESULT (the module reads no file any other way)."""
    source = (ROOT / "spark_gotchas" / "machine" / "readers" / "dist.py").read_text()
    assert "bounded_read.read_json(path, bounded_read.RANK_RESULT)" in source and "read_text(" not in source


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.timeout(60)
def test_node_health_refuses_a_hostile_report_in_one_line_and_drains_nothing(tmp_path, case):
    """``node-health --from-report R --dry-run``: a report that is no regular file or too large is
    the pass's "no verdict" (a drain under --on-error drain, said, not done with --dry-run)."""
    reason, make = HOSTILE[case]
    report = tmp_path / "report.json"
    make(report)
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", "node-health", "--node", "n1", "--from-report",
                          str(report), "--dry-run", "--scontrol", "/nonexistent/scontrol"],
                         cwd=ROOT, capture_output=True, text=True, timeout=50)
    out = run.stdout + run.stderr
    assert "Traceback" not in out
    assert f"the report {report} is {reason}" in out, out
    assert run.returncode != 0


def test_no_module_of_the_suite_opens_a_file_it_was_given_any_other_way():
    """The doors that read a file named by a user or left in a folder by a run call bounded_read:
    no json.load/loads on a file's text, no open() for reading in the modules that read them."""
    doors = ["machine/snapshot.py", "commands/diff.py", "commands/fleet.py", "commands/report_check.py",
             "machine/readers/launch.py", "machine/readers/thermal/reboot.py", "runtime/soak/record.py",
             "machine/readers/github.py", "machine/readers/dist.py", "machine/readers/watch.py",
             "commands/slurm/node_health.py", "outputs/junit.py"]
    for door in doors:
        source = "\n".join(line for line in (ROOT / "spark_gotchas" / door).read_text().splitlines()
                           if "/proc/" not in line)  # the kernel's own files are readings of the machine
        assert "bounded_read" in source, door
        assert ".read_text(" not in source.replace("bounded_read.read_text(", "") and "json.load(" not in source, door
        assert not any(f"open({arg}" in source for arg in ("path", "p,", "args.")), door


def variables_the_code_reads() -> set[str]:
    """Every environment variable named in the suite's code: read with os.environ/os.getenv/the
    span reader by a literal name, or a SPARK_GOTCHAS_* name held anywhere in the code."""
    import ast

    readers = ("os.environ.get", "os.getenv", "environ.get", "os.environ.pop", "env_number", "_env_first", "env.get",
               "_one_of", "_sizes", "_fault")
    names: set[str] = set()
    for package in ("spark_gotchas", "microbench"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and ast.unparse(node.func) in readers:
                    names |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                              and re.fullmatch(r"[A-Z][A-Z0-9_]+", a.value)}
                elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ", "env") \
                        and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    names.add(node.slice.value)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and re.fullmatch(r"SPARK_GOTCHAS_[A-Z0-9_]+", node.value):
                    names.add(node.value)
    return names


def test_every_variable_the_code_reads_is_in_this_inventory():
    """A variable read anywhere in the code and not named in docs/security.md's "Every door in" is
    a door without its guard written down."""
    section = (ROOT / "docs" / "security.md").read_text().split("## Every door in", 1)[1].split("\n## ", 1)[0]
    names = variables_the_code_reads()
    assert {"SPARK_GOTCHAS_GITHUB_API", "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES"} <= names
    assert sorted(n for n in names if f"`{n}`" not in section) == []


def test_docs_security_lists_every_input_door():
    """docs/security.md's inventory names every file kind, environment number and numeric option the
    code has, and every test it cites exists: a door added without its guard and proof shows here."""
    from spark_gotchas.machine import options

    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## Every door in", 1)[1].split("\n## ", 1)[0]
    kinds = [name for name, value in vars(bounded_read).items() if isinstance(value, bounded_read.Kind)]
    assert sorted(kinds) == sorted(k for k in kinds if f"`{k}`" in section)
    assert len(kinds) == len(bounded_read.KINDS)
    assert [e.name for e in options.ENVIRONMENT if f"`{e.name}`" not in section] == []
    numeric = [f.metadata["flag"] for f in options.declared() if f.metadata["span"] is not None]
    assert len(numeric) == 4 and [flag for flag in numeric if f"`{flag}`" not in section] == []
    cited = re.findall(r"`(test_\w+\.py)::(test_\w+)`", section)
    assert len(cited) > 20
    missing = [f"{file}::{name}" for file, name in cited
               if f"def {name}(" not in (ROOT / "tests" / file).read_text()]
    assert missing == []
