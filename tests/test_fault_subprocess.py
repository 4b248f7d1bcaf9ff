"""Commands the suite starts die with their whole process group: a hung nvidia-smi whose grandchild
holds its output pipe open is cut at the budget, and nothing it started survives the reading."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from spark_gotchas.base.procs import run_bounded
from spark_gotchas.machine.readers.thermal import snapshot

BUDGET_S = 2.0
BOUND_S = 20.0  # "did not hang"


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def gone(pid: int) -> bool:
    """True when ``pid`` has ended (a zombie waiting for a reaper that is not ours counts as ended)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def grandchild_pid(pid_file: Path) -> int:
    assert pid_file.exists(), "the fake never started its grandchild"
    return int(pid_file.read_text().split()[0])


@pytest.fixture
def hung_nvidia_smi(tmp_path, monkeypatch):
    """An nvidia-smi first on PATH that starts a ``sleep 1000`` holding its stdout, then hangs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pid_file = tmp_path / "grandchild.pid"
    script(bindir / "nvidia-smi", f"sleep 1000 &\necho $! > {pid_file}\necho 'Clocks Event Reasons Counters'\n"
                                  f"exec sleep 1000\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(snapshot, "SMI_TIMEOUT_S", BUDGET_S)
    yield pid_file
    if pid_file.exists():  # never leave one behind, whatever the test found
        try:
            os.kill(grandchild_pid(pid_file), 9)
        except OSError:
            pass


def test_a_hung_nvidia_smi_is_a_reading_within_the_bound_and_leaves_no_process(hung_nvidia_smi):
    t0 = time.monotonic()
    counters, why = snapshot.smi_counters(0)
    seconds = time.monotonic() - t0
    assert counters == {}
    assert why == "nvidia-smi did not finish within 2 s (killed with its process group)"
    assert seconds < BOUND_S
    assert wait_gone(grandchild_pid(hung_nvidia_smi)), "the grandchild sleep outlived the reading"


def test_the_counters_say_why_nvidia_smi_gave_nothing(hung_nvidia_smi):
    counters = snapshot.read_counters(handle=None, index=0)
    assert counters.unavailable["nvidia-smi"].startswith("nvidia-smi did not finish within 2 s")


def test_a_command_that_exits_leaving_a_child_on_its_pipe_returns_at_once_and_the_child_dies(tmp_path):
    pid_file = tmp_path / "child.pid"
    cmd = script(tmp_path / "quick", f"sleep 1000 &\necho $! > {pid_file}\necho done\nexit 0\n")
    t0 = time.monotonic()
    run = run_bounded([str(cmd)], timeout=BOUND_S)
    assert time.monotonic() - t0 < BOUND_S / 2
    assert run.ok and run.stdout == "done\n" and run.problem == ""
    assert wait_gone(grandchild_pid(pid_file))


def test_exit_codes_and_output_tails_come_back(tmp_path):
    cmd = script(tmp_path / "fails", "echo partial\necho 'no devices were found' >&2\nexit 6\n")
    run = run_bounded([str(cmd)], timeout=BOUND_S)
    assert (run.returncode, run.stdout, run.timed_out) == (6, "partial\n", False)
    assert run.problem == "fails exited 6: no devices were found"
    merged = run_bounded([str(cmd)], timeout=BOUND_S, merge_stderr=True)
    assert merged.stdout == "partial\nno devices were found\n" and merged.stderr == ""


@pytest.mark.parametrize("cmd", [["/nonexistent/nvidia-smi"], [""]])
def test_a_command_that_cannot_start_is_a_reason_not_an_exception(cmd):
    run = run_bounded(cmd, timeout=BUDGET_S)
    assert not run.ok and run.returncode is None and run.error
    assert "could not start" in run.problem
