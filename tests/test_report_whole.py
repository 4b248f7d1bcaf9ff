"""Outputs are whole or untouched, the JSON report included, and an interrupted run says so.

pytest-json-report builds the report and saved it with a plain ``open(path, "w")``: on a full disk
that left half a file where the last report was (and the run exited 0), and two runs writing one
path left it corrupt in 2 of 45 pairs. The suite now saves it as it saves its own files
(spark_gotchas.outputs.report_file: a temporary file in the same folder, then a rename), whatever plugin
filled it. Ctrl-C left a partial snapshot and a summary reading INFO; now every output written
after it carries the interruption.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
OLD = '{"old": "report"}\n'


def preflight(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m spark_gotchas -m fast`` replaying the H200 snapshot (seconds, no GPU needed)."""
    return subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-q", "-p", "no:randomly",
                           f"--spark-replay={H200}", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB file system holding an old report and filled to the last byte (root: a tmpfs)."""
    folder = tmp_path / "full"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full file system needs root here (mount -t tmpfs)")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)]).returncode != 0:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        (folder / "report.json").write_text(OLD)
        with open(folder / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:  # ENOSPC: the file system is full
                pass
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)])


@pytest.mark.timeout(300)
def test_a_full_disk_keeps_the_old_report_and_fails_the_run_naming_it(full_disk, tmp_path):
    report = full_disk / "report.json"
    proc = preflight(tmp_path, "--json-report", f"--json-report-file={report}")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert f"could not write the JSON report {report}: No space left on device (the run fails: an output it was " \
           "asked for is missing)" in proc.stdout
    assert report.read_text() == OLD  # not a byte of it replaced
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler", "report.json"]  # no temporary file left


@pytest.mark.timeout(300)
def test_a_report_folder_that_cannot_be_made_fails_the_run_naming_it(tmp_path):
    (tmp_path / "a-file").write_text("")
    report = tmp_path / "a-file" / "report.json"  # its folder would have to be a file's child
    proc = preflight(tmp_path, "--json-report", f"--json-report-file={report}")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert f"could not write the JSON report {report}: File exists (the run fails" in proc.stdout


@pytest.mark.timeout(600)
def test_runs_writing_one_report_at_once_never_leave_it_torn(tmp_path):
    """Pairs of runs write one path while a reader reads it without pause: every read is a whole
    report (a plain open(path, "w") truncates first: a reader finds it empty or cut within a pair)."""
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"spark_gotchas": {"lines": ["first"]}}))
    torn: list[str] = []
    stop = threading.Event()

    def read_all_the_time() -> None:
        while not stop.is_set():
            text = report.read_text(errors="replace")
            try:
                json.loads(text)["spark_gotchas"]["lines"]
            except (ValueError, KeyError, TypeError):
                torn.append(text[:80])

    reader = threading.Thread(target=read_all_the_time, daemon=True)
    reader.start()
    try:
        for _ in range(4):
            runs = [subprocess.Popen([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-q", "-p", "no:randomly",
                                      f"--spark-replay={H200}", "--json-report", f"--json-report-file={report}",
                                      "--json-report-indent=1"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL) for _ in range(2)]
            assert [run.wait(timeout=300) for run in runs] == [0, 0]
    finally:
        stop.set()
        reader.join(10)
    assert torn == []
    assert json.loads(report.read_text())["spark_gotchas"]["lines"][0].startswith("G1 PASS")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


PLUGIN_FILLS_THE_REPORT = """
def pytest_json_modifyreport(json_report):
    json_report["from_another_plugin"] = {"kept": True}
"""


@pytest.mark.timeout(300)
def test_content_from_any_plugin_is_saved_whole_with_pytest_json_reports_indent(tmp_path):
    (tmp_path / "other_plugin.py").write_text(PLUGIN_FILLS_THE_REPORT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = preflight(tmp_path, "-p", "other_plugin", "--json-report", "--json-report-file=out/report.json",
                     "--json-report-indent=3", env=env)
    assert proc.returncode == 0, proc.stdout[-2000:]
    text = (tmp_path / "out" / "report.json").read_text()
    assert text.startswith('{\n   "created"')  # the folder made, the indent kept
    assert json.loads(text)["from_another_plugin"] == {"kept": True}


CTRL_C = """
import os, signal

def pytest_runtest_call(item):
    if "g05" in item.nodeid:  # a user's Ctrl-C while G5's check runs
        os.kill(os.getpid(), signal.SIGINT)
"""


@pytest.mark.timeout(300)
def test_ctrl_c_marks_the_summary_the_markdown_the_snapshot_and_the_report(tmp_path):
    (tmp_path / "ctrl_c.py").write_text(CTRL_C)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = preflight(tmp_path, "-p", "ctrl_c", "--spark-snapshot=snap.json", "--spark-summary-md=summary.md",
                     "--json-report", "--json-report-file=report.json", env=env)
    assert proc.returncode == 2, proc.stdout[-3000:]  # pytest's "interrupted"
    block = proc.stdout.split("spark-gotchas ====")[-1].splitlines()
    assert block[2].startswith("INTERRUPTED: the run was interrupted (Ctrl-C) after ")
    assert block[2].endswith(" checks: gotchas without a line were not judged, the others only in part")
    snapshot = json.loads((tmp_path / "snap.json").read_text())
    report = json.loads((tmp_path / "report.json").read_text())["spark_gotchas"]
    assert snapshot["interrupted"].startswith("interrupted (Ctrl-C) after ")
    assert report["interrupted"] is True and report["interruption"] == snapshot["interrupted"]
    summary = (tmp_path / "summary.md").read_text()
    assert "**Interrupted**: the run was interrupted (Ctrl-C) after " in summary
    assert summary.startswith("## ⏹️ spark-gotchas: INTERRUPTED")  # never the ✅ of the checks it judged before
    replayed = preflight(tmp_path, f"--spark-replay={tmp_path / 'snap.json'}")
    assert "INTERRUPTED: the replayed snapshot's run was interrupted (Ctrl-C) after " in replayed.stdout


SIGTERM = """
import os, signal

def pytest_runtest_call(item):
    if "g05" in item.nodeid:  # a batch system's time limit while G5's check runs
        os.kill(os.getpid(), signal.SIGTERM)
"""

TWICE = """
import os, signal

def pytest_runtest_call(item):
    if "g05" in item.nodeid:
        os.kill(os.getpid(), signal.SIGINT)

def pytest_keyboard_interrupt(excinfo):  # a second Ctrl-C while pytest handles the first
    os.kill(os.getpid(), signal.SIGINT)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("plugin, how", [(SIGTERM, "SIGTERM"), (TWICE, "Ctrl-C")])
def test_sigterm_and_a_second_ctrl_c_mark_what_is_written_too(tmp_path, plugin, how):
    """SIGTERM ended the run with nothing written and nothing marked; a second Ctrl-C inside pytest's
    handling of the first left its exit status 0, and the report and JUnit XML were written as a
    whole run's. Both now end as Ctrl-C does: every output says the run was interrupted."""
    (tmp_path / "ending.py").write_text(plugin)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = preflight(tmp_path, "-p", "ending", "--spark-snapshot=snap.json", "--json-report",
                     "--json-report-file=report.json", env=env)
    assert proc.returncode != 0, proc.stdout[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["exitcode"] == 2 and report["spark_gotchas"]["interrupted"] is True
    assert json.loads((tmp_path / "snap.json").read_text())["interrupted"].startswith(f"interrupted ({how}) after ")


@pytest.mark.timeout(300)
def test_a_whole_run_says_nothing_of_an_interruption(tmp_path):
    proc = preflight(tmp_path, "--spark-snapshot=snap.json", "--json-report", "--json-report-file=report.json")
    assert proc.returncode == 0 and "INTERRUPTED" not in proc.stdout
    assert json.loads((tmp_path / "snap.json").read_text())["interrupted"] == ""
    report = json.loads((tmp_path / "report.json").read_text())["spark_gotchas"]
    assert report["interrupted"] is False and report["interruption"] is None


def test_the_save_is_taken_over_only_where_a_report_is_written():
    """report_file finds pytest-json-report's plugin through pytest's plugin manager, never by a
    private attribute; without --json-report there is none to take over."""
    from spark_gotchas.outputs import report_file

    class Manager:
        def get_plugins(self):
            return [object()]

    class Config:
        pluginmanager = Manager()
        option = type("O", (), {"json_report_indent": None})()

    assert report_file.json_report_plugin(Config()) is None
    assert report_file.take_over(Config(), lambda path, why: None) is False
