"""``spark-gotchas node-health`` as slurmd runs it, against a stand-in scontrol (tests/node_health_fakes.py)
that keeps the nodes in a file: what it prints, its exit status, and the scontrol calls it made.
Slurm itself runs it in tests/test_node_health_slurm.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import node_health_fakes as fakes
import pytest

G4_FAIL = "G4 FAIL: SM clock 600 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state"
OURS = f"spark-gotchas: {G4_FAIL}"
HANG_GUARD_S = 60  # a run that has not ended by then hangs: the test fails instead of waiting


@pytest.fixture(scope="module")
def snaps(tmp_path_factory) -> dict[str, Path]:
    return fakes.write_snapshots(tmp_path_factory.mktemp("snapshots"))


def scontrol(tmp_path: Path, **nodes) -> Path:
    return fakes.fake_scontrol(tmp_path / "slurm", nodes)


def node_health(exe: Path | str, *args: str, node: str = "fleet2", prolog: bool = False, lock_dir: Path | None = None,
                **env: str) -> subprocess.CompletedProcess:
    """One pass, its lock in the test's own folder (next to the stand-in scontrol), not the machine's:
    tests on other workers run passes for the same node name at the same time."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    environ.update(SLURMD_NODENAME=node, **env)
    if prolog:
        environ["SLURM_SCRIPT_CONTEXT"] = "prolog_slurmd"
    lock_dir = lock_dir or next(folder for folder in Path(exe).parents if folder.is_absolute() and folder.is_dir())
    return subprocess.run([sys.executable, "-m", "spark_gotchas", "node-health", "--scontrol", str(exe),
                           "--lock-dir", str(lock_dir), *args], capture_output=True, text=True, env=environ, timeout=HANG_GUARD_S)


def said(run: subprocess.CompletedProcess) -> list[str]:
    """What node-health said of the node (its own lines, not the G-lines it passes on)."""
    return [line for line in run.stdout.splitlines() if line.startswith("node-health: ") and " checks took " not in line]


def updates(exe: Path) -> list[list[str]]:
    return [call for call in fakes.calls_of(exe) if call[0] == "update"]


def test_a_fail_drains_the_node_and_a_later_pass_without_one_undrains_it(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    run = node_health(exe, "--spark-replay", str(snaps["fail"]))
    assert (run.returncode, said(run)) == (1, [f"node-health: fleet2: drained: {OURS}"])
    assert G4_FAIL in run.stdout.splitlines()  # the G-lines of the run, as printed
    assert updates(exe) == [["update", "NodeName=fleet2", "State=DRAIN", f'Reason="{OURS}"']]
    assert fakes.nodes_of(exe)["fleet2"] == {"state": "IDLE+DRAIN", "reason": OURS}

    again = node_health(exe, "--spark-replay", str(snaps["fail"]))
    assert (again.returncode, said(again)) == (1, [f"node-health: fleet2: still drained: {OURS}"])
    healed = node_health(exe, "--spark-replay", str(snaps["healthy"]))
    assert (healed.returncode, said(healed)) == (0, [f"node-health: fleet2: undrained: no FAIL now (was: {OURS})"])
    assert updates(exe)[-1] == ["update", "NodeName=fleet2", "State=UNDRAIN"]
    assert fakes.nodes_of(exe)["fleet2"] == {"state": "IDLE", "reason": ""}
    assert [call[:2] for call in fakes.calls_of(exe)].count(["show", "node"]) == 6  # before and after each run's checks


def test_a_warn_never_drains(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    run = node_health(exe, "--spark-replay", str(snaps["healthy"]))
    assert "G9 WARN: not an NGC or Unsloth container (nvidia/cuda 13.0.2); bare pip: torch 2.11.0" in run.stdout
    assert (run.returncode, said(run), updates(exe)) == (0, ["node-health: fleet2: healthy: no FAIL"], [])


def test_an_operators_drain_is_never_touched(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE+DRAIN", "reason": "operator: replace the fan"})
    failing = node_health(exe, "--spark-replay", str(snaps["fail"]))
    assert (failing.returncode, said(failing)) == (1, [
        "node-health: fleet2: left as it is (IDLE+DRAIN): its reason is not ours: operator: replace the fan; "
        f"found: {OURS}"])
    healthy = node_health(exe, "--spark-replay", str(snaps["healthy"]))
    assert (healthy.returncode, said(healthy)) == (0, [
        "node-health: fleet2: left as it is (IDLE+DRAIN): its reason is not ours: operator: replace the fan"])
    assert updates(exe) == []


def test_a_node_with_jobs_is_not_checked_but_a_prolog_checks(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "ALLOCATED"})
    busy = node_health(exe, "--spark-replay", str(snaps["fail"]))
    assert (busy.returncode, busy.stdout.splitlines()) == (0, [
        "node-health: fleet2: not checked: jobs on the node (ALLOCATED); the checks would load the GPU under them "
        "and judge their processes as contention"])
    prolog = node_health(exe, "--spark-replay", str(snaps["fail"]), prolog=True)
    assert (prolog.returncode, said(prolog)) == (1, [f"node-health: fleet2: drained: {OURS}"])
    assert fakes.nodes_of(exe)["fleet2"]["state"] == "ALLOCATED+DRAIN"


def test_a_health_check_leaves_a_node_to_the_pass_already_running_there(tmp_path, snaps):
    """Two passes at once would measure each other on the GPU: a health check that finds another
    pass running leaves at once; a prolog decides its job's start all the same."""
    from spark_gotchas.commands.slurm import node_health as nh

    exe = scontrol(tmp_path, fleet9={"state": "IDLE"})
    lock = nh.hold_lock("fleet9", [str(exe.parent)])
    assert isinstance(lock, int) and lock >= 0 and nh.hold_lock("fleet9", [str(exe.parent)]) == nh.HELD
    try:
        check = node_health(exe, "--spark-replay", str(snaps["fail"]), node="fleet9")
        assert (check.returncode, check.stdout.splitlines()) == (0, [
            "node-health: fleet9: not checked: another node-health pass is running on this node"])
        assert fakes.calls_of(exe) == []
        prolog = node_health(exe, "--spark-replay", str(snaps["fail"]), node="fleet9", prolog=True)
        assert (prolog.returncode, said(prolog)) == (1, [f"node-health: fleet9: drained: {OURS}"])
    finally:
        os.close(lock)
    assert node_health(exe, "--spark-replay", str(snaps["healthy"]), node="fleet9").returncode == 0


def test_the_lock_goes_first_where_no_one_else_may_write(tmp_path, monkeypatch):
    """/run/lock and /tmp are writable by everyone: another user could make the lock file first (its
    own) and so keep every pass from holding it. A folder of this user's that no one else may write
    to comes first; a shared or linked one is passed over."""
    from spark_gotchas.commands.slurm import node_health as nh

    made = tmp_path / "made"
    assert nh._private(str(made), create=True) and oct(made.stat().st_mode)[-3:] == "700"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)
    link = tmp_path / "link"
    link.symlink_to(made)
    assert (nh._private(str(shared), create=False), nh._private(str(link), create=False)) == (False, False)
    if os.geteuid() == 0:
        monkeypatch.setattr(nh, "ROOT_LOCK_DIR", str(tmp_path / "root-only"))
        assert nh.lock_folders()[:2] == [str(tmp_path / "root-only"), "/run/lock"]
        monkeypatch.setattr(nh, "ROOT_LOCK_DIR", str(shared))
    else:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    assert nh.lock_folders()[0] == "/run/lock"


@pytest.mark.parametrize("planted", ["fifo", "symlink", "folder"])
def test_a_file_planted_where_the_lock_goes_neither_hangs_nor_is_touched(tmp_path, snaps, planted):
    """/run/lock is writable by everyone: a FIFO there would hang a plain open for ever (slurmd's
    prolog with it), a symlink would lead the root pass to another file. The pass runs without the
    lock and leaves what it found as it was."""
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    locks = tmp_path / "locks"
    locks.mkdir()
    lock = locks / "spark-gotchas-node-health-fleet2.lock"
    target = tmp_path / "precious"
    target.write_text("keep\n")
    {"fifo": lambda: os.mkfifo(lock), "symlink": lambda: lock.symlink_to(target), "folder": lock.mkdir}[planted]()
    run = node_health(exe, "--spark-replay", str(snaps["healthy"]), lock_dir=locks)
    assert (run.returncode, said(run)) == (0, [
        f"node-health: fleet2: no lock could be had in {locks} (each a file of another user's, a link or not "
        "writable): checking without one", "node-health: fleet2: healthy: no FAIL"])
    assert target.read_text() == "keep\n" and oct(target.stat().st_mode)[-3:] != "600"
    assert (lock.is_fifo(), lock.is_symlink(), lock.is_dir()) == (planted == "fifo", planted == "symlink", planted == "folder")


@pytest.mark.parametrize("stdout", ["/dev/full", "closed", "ascii"])
def test_an_output_that_cannot_be_written_never_keeps_a_fail_from_draining(tmp_path, snaps, stdout):
    """A full disk under slurmd's log, stdout closed, a C locale that cannot show a character: the
    node is drained all the same, and exit 1 says so; no traceback."""
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    environ.update(SLURMD_NODENAME="fleet2", PYTHONIOENCODING="ascii" if stdout == "ascii" else "utf-8")
    snapshot = tmp_path / "échec.json"  # its name is on the SKIP lines of readings it does not hold
    snapshot.write_bytes(snaps["fail"].read_bytes())
    command = [sys.executable, "-m", "spark_gotchas", "node-health", "--scontrol", str(exe), "--lock-dir",
               str(tmp_path), "--spark-replay", str(snapshot)]
    with open(os.devnull if stdout == "closed" else "/dev/full" if stdout == "/dev/full" else tmp_path / "out",
              "w") as out:
        run = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, text=True, env=environ, timeout=HANG_GUARD_S,
                             preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert updates(exe) == [["update", "NodeName=fleet2", "State=DRAIN", f'Reason="{OURS}"']]
    if stdout == "ascii":  # what ASCII cannot hold is written as its escape
        printed = (tmp_path / "out").read_text(encoding="ascii")
        assert "not in the snapshot \\xe9chec.json" in printed and f"node-health: fleet2: drained: {OURS}" in printed


def test_a_node_record_too_long_to_read_whole_is_not_acted_on(tmp_path, snaps):
    """Only the end of a command's output is kept (1 MiB): a record whose start is lost cannot be
    read, and an operator's reason that ends in " State=IDLE" must not pass for the node's state."""
    exe = scontrol(tmp_path, fleet2={"state": "IDLE+DRAIN", "reason": "op " + "x" * (2 << 20) + " State=IDLE"})
    run = node_health(exe, "--spark-replay", str(snaps["fail"]))
    assert (run.returncode, said(run), updates(exe)) == (2, [
        "node-health: fleet2: cannot read the node from slurmctld: scontrol show printed more than 1 MiB: not a "
        "node's record; nothing checked"], [])


def test_slurmctld_unreachable(tmp_path, snaps):
    """A silent controller: each call is killed at --scontrol-timeout. A health check says so and
    checks nothing (exit 2); a prolog lets the checks decide whether the job starts."""
    exe = scontrol(tmp_path, _unreachable=HANG_GUARD_S * 2)
    gone = ("node-health: fleet2: cannot read the node from slurmctld: scontrol show did not answer within 1 s "
            "(killed): is slurmctld up?; ")
    check = node_health(exe, "--scontrol-timeout", "1", "--spark-replay", str(snaps["fail"]))
    assert (check.returncode, check.stdout.splitlines(), check.stderr) == (2, [gone + "nothing checked"], "")
    for snap, status, verdict in [("fail", 1, f"unhealthy: {OURS}"), ("healthy", 0, "healthy: no FAIL")]:
        prolog = node_health(exe, "--scontrol-timeout", "1", "--spark-replay", str(snaps[snap]), prolog=True)
        assert (prolog.returncode, said(prolog)) == (status, [
            gone + "the checks still decide whether the job starts", f"node-health: fleet2: {verdict}"])
    refused = scontrol(tmp_path / "refused", _unreachable=0.01)
    check = node_health(refused, "--spark-replay", str(snaps["fail"]))
    assert (check.returncode, said(check)) == (2, [
        "node-health: fleet2: cannot read the node from slurmctld: scontrol show failed: slurm_load_node error: "
        "Unable to contact slurm controller (connect failure); nothing checked"])


def test_no_scontrol(tmp_path, snaps):
    run = node_health(tmp_path / "nowhere" / "scontrol", "--spark-replay", str(snaps["fail"]))
    assert (run.returncode, said(run)) == (2, [
        f"node-health: fleet2: cannot read the node from slurmctld: {tmp_path}/nowhere/scontrol not found (give its "
        "path with --scontrol, or set PATH); nothing checked"])
    prolog = node_health("scontrol", "--spark-replay", str(snaps["fail"]), prolog=True, lock_dir=tmp_path,
                         PATH=str(tmp_path))
    assert prolog.returncode == 1 and said(prolog)[-1] == f"node-health: fleet2: unhealthy: {OURS}"


@pytest.mark.parametrize("name", ["fleet[1-3]", "fleet1,fleet2", "ALL", "-x", "fleet1\x1b[2J", "a" * 200])
def test_a_name_that_is_not_one_node_touches_nothing(tmp_path, snaps, name):
    exe = scontrol(tmp_path, fleet1={"state": "IDLE"})
    run = node_health(exe, "--spark-replay", str(snaps["fail"]), node=name)
    if name == "ALL":  # a valid name Slurm does not know: slurmctld says so
        assert run.returncode == 2 and said(run) == [
            "node-health: ALL: cannot read the node from slurmctld: scontrol show failed: Node ALL not found; "
            "nothing checked"]
    else:
        assert (run.returncode, run.stdout) == (2, "")
        assert run.stderr.startswith("spark-gotchas node-health: '") and "is not one node's name" in run.stderr
        assert len(run.stderr.splitlines()) == 1 and "\x1b" not in run.stderr
    assert updates(exe) == []


def test_hostile_strings_reach_the_reason_masked_and_escaped(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    run = node_health(exe, "--spark-replay", str(snaps["hostile"]))
    (call,) = updates(exe)
    reason = call[3]
    assert reason.startswith('Reason="spark-gotchas: G1 FAIL: NVML sees 1 GPU(s) but torch sees none: '
                             'CUDA_VISIBLE_DEVICES=\'GPU-\\x1b[2J\\x0d\\x07"; State=RESUME\' hides')
    assert reason.endswith('"') and len(reason.encode()) <= 255 + len('Reason=""')
    for bad in ("\x1b", "\r", "\x07", fakes.TOKEN):
        assert bad not in reason and bad not in run.stdout
    assert "\n" not in reason and not any(line.startswith("G4 PASS: all fine") for line in run.stdout.splitlines())
    stored = fakes.nodes_of(exe)["fleet2"]["reason"]
    assert f"Reason=\"{stored}\"" == reason  # scontrol strips the quotes it was given: nothing else is lost
    assert said(run) == [f"node-health: fleet2: drained: {stored}"]


def test_the_checks_past_their_deadline_are_killed_with_what_they_started(tmp_path):
    plugin = tmp_path / "plugins" / "sleepy_plugin.py"
    plugin.parent.mkdir()
    plugin.write_text("import os, subprocess, time\n"
                      "sleeper = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
                      "open(os.environ['SLEEPER_PIDFILE'], 'w').write(str(sleeper.pid))\n"
                      "time.sleep(600)\n")
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    pidfile = tmp_path / "sleeper.pid"
    run = node_health(exe, "--timeout", "9", "--scontrol-timeout", "1", "--", "-p", "sleepy_plugin",
                      PYTHONPATH=str(plugin.parent), SLEEPER_PIDFILE=str(pidfile))
    (line,) = said(run)
    assert run.returncode == 1 and line.startswith("node-health: fleet2: drained: spark-gotchas: no verdict: the checks "
                                                   "did not finish within ")
    assert line.endswith(" s (killed with all they started)")
    sleeper = int(pidfile.read_text())
    status = Path(f"/proc/{sleeper}/stat")
    assert not status.exists() or status.read_text().rsplit(")", 1)[1].split()[0] == "Z"  # gone, or dead unreaped


@pytest.mark.parametrize("ending", ["TERM then KILL 10 ms later", "KILL", "TERM twice", "HUP"])
def test_the_checks_end_with_a_pass_that_is_killed(tmp_path, ending):
    """slurmd ends a HealthCheckProgram or prolog past its time with SIGTERM and, 10 ms later if need
    be, SIGKILL to its process group: the checks run in a session of their own, out of its reach, so
    they must not outlive the pass (the kernel kills them with it), nor a second signal cut short the
    pass's own cleanup."""
    import signal
    import time

    import psutil

    plugin = tmp_path / "plugins" / "sleepy_plugin.py"
    plugin.parent.mkdir()
    plugin.write_text("import os, time\nopen(os.environ['STARTED'], 'w').write('1')\ntime.sleep(600)\n")
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    started = tmp_path / "started"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    environ.update(SLURMD_NODENAME="fleet2", PYTHONPATH=str(plugin.parent), STARTED=str(started))
    nh = subprocess.Popen([sys.executable, "-m", "spark_gotchas", "node-health", "--scontrol", str(exe),
                           "--lock-dir", str(tmp_path), "--", "-p", "sleepy_plugin"], env=environ,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if started.exists():
                break
            time.sleep(0.05)
        (checks,) = psutil.Process(nh.pid).children()
        signals = {"TERM then KILL 10 ms later": [signal.SIGTERM, signal.SIGKILL], "KILL": [signal.SIGKILL],
                   "TERM twice": [signal.SIGTERM, signal.SIGTERM], "HUP": [signal.SIGHUP]}[ending]
        for signum in signals:
            nh.send_signal(signum)
            time.sleep(0.01)
        nh.wait(timeout=HANG_GUARD_S)
        gone, alive = psutil.wait_procs([checks], timeout=10)
        assert alive == [], f"the checks (pid {checks.pid}) outlived the pass"
    finally:
        nh.kill()
        nh.wait()


def test_checks_that_cannot_run_drain_or_are_ignored_as_asked(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    ignored = node_health(exe, "--on-error", "ignore", "--spark-replay", str(snaps["fail"]), "--", "--no-such-flag")
    (line,) = said(ignored)
    assert ignored.returncode == 0
    # pytest names itself in its usage error as its version does ("pytest.main(): error", "__main__.py: error")
    assert line.startswith("node-health: fleet2: left as it is (--on-error ignore): no verdict: pytest exited 4 "
                           "without a report: ") and line.endswith(": error: unrecognized arguments: --no-such-flag")
    assert updates(exe) == []
    drained = node_health(exe, "--spark-replay", str(tmp_path / "missing.json"))
    assert (drained.returncode, said(drained)) == (1, [
        "node-health: fleet2: drained: spark-gotchas: no verdict: pytest exited 4 without a report: ERROR: "
        f"spark-gotchas: snapshot not found: {tmp_path}/missing.json"])


def test_no_gpu_where_slurm_gives_one(tmp_path):
    """A node whose Gres names a gpu, and a run that saw none and no FAIL (a GPU fallen off the bus
    leaves no trace on the PCI bus for G1 to see)."""
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"exitcode": 0, "spark_gotchas": {
        "lines": ["G1 INFO: no NVIDIA GPU in this machine (none on the PCI bus)"],
        "gotchas": {"G1": {"status": "INFO", "summary": "no NVIDIA GPU in this machine (none on the PCI bus)"}},
        "platform": {"gpu": None, "nvml_error": "NVML library not found (no NVIDIA driver on this machine)"}}}))
    exe = scontrol(tmp_path, fleet2={"state": "IDLE", "gres": "gpu:h200:8"}, fleet3={"state": "IDLE"})
    run = node_health(exe, "--from-report", str(report))
    assert (run.returncode, said(run)) == (1, [
        "node-health: fleet2: drained: spark-gotchas: no verdict: no GPU visible, where Slurm gives this node one: "
        "NVML library not found (no NVIDIA driver on this machine)"])
    assert said(node_health(exe, "--from-report", str(report), node="fleet3")) == ["node-health: fleet3: healthy: no FAIL"]
    assert said(node_health(exe, "--from-report", str(report), "--require-gpu", node="fleet3"))[0].startswith(
        "node-health: fleet3: drained: spark-gotchas: no verdict: no GPU visible")


def test_dry_run_changes_nothing(tmp_path, snaps):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    run = node_health(exe, "--dry-run", "--spark-replay", str(snaps["fail"]))
    assert (run.returncode, said(run), updates(exe)) == (1, [f"node-health: fleet2: would drain (--dry-run): {OURS}"], [])


def test_an_update_slurm_refuses(tmp_path, snaps):
    """As Slurm 22.05.8 refuses a user who is not SlurmUser or root (measured)."""
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"}, _update_fails=True)
    expected = [f"node-health: fleet2: could not drain: scontrol update failed: slurm_update error: Invalid user id; "
                f"it would have been: {OURS}"]
    check = node_health(exe, "--spark-replay", str(snaps["fail"]))
    assert (check.returncode, said(check)) == (2, expected)
    prolog = node_health(exe, "--spark-replay", str(snaps["fail"]), prolog=True)
    assert (prolog.returncode, said(prolog)) == (1, expected)


@pytest.mark.parametrize("args, message", [
    (["--timeout", "10"], "--timeout 10 leaves 0 s for the checks after three scontrol calls of up to 5 s: give at "
                          "least 21"),
    (["--timeout", "nan"], "argument --timeout: 'nan' is not a number of seconds from 0.1 to 86400"),
    (["--timeout=--"], "argument --timeout: '--' is not a number of seconds from 0.1 to 86400"),  # not a TypeError
    (["--on-error", "resume"], "argument --on-error: invalid choice: 'resume' (choose from 'drain', 'ignore')"),
    (["--lock-dir", "/nowhere\n G4 PASS"], "argument --lock-dir: /nowhere\\x0a G4 PASS is not a folder"),
])
def test_bad_usage_is_one_line_and_exit_2(tmp_path, args, message):
    exe = scontrol(tmp_path, fleet2={"state": "IDLE"})
    run = node_health(exe, *args)
    assert run.returncode == 2 and message in run.stderr.splitlines()[-1] and fakes.calls_of(exe) == []


def test_the_command_is_listed():
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", "--help"], capture_output=True, text=True, timeout=60)
    assert "  node-health   Slurm health check or prolog: drain this node on a FAIL, undrain what it drained" \
        in run.stdout.splitlines()


def test_no_room_for_the_report_is_a_line_not_a_traceback(tmp_path, monkeypatch):
    import tempfile

    from spark_gotchas.commands.slurm import node_health as nh

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))  # as if every candidate were full
    found, took = nh.run_checks(30.0, None, [], require_gpu=False)
    assert (found.error, took) == ("no room for the run's report: No such file or directory", "checks not run")


def test_the_page_names_only_options_that_exist_and_every_one_there_is():
    """docs/node-health.md against the command's parser (sbatch's and the preflight's own aside)."""
    import re

    from spark_gotchas.commands.slurm import node_health as nh

    page = (Path(__file__).resolve().parents[1] / "docs" / "node-health.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"--[a-z][a-z-]*[a-z]", page)) - {"--job-name", "--wrap", "--spark-profile"}
    flags = {flag for action in nh.parser()._actions for flag in action.option_strings if flag.startswith("--")}
    assert shown == flags


def test_the_cluster_script_is_valid_bash_and_refuses_a_bad_setting(tmp_path):
    script = Path(__file__).resolve().parents[1] / "devscripts" / "slurm_health.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    run = subprocess.run(["bash", str(script)], env={**os.environ, "INTERVAL": "0", "SLURM_HEALTH_DIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert (run.returncode, run.stderr.strip()) == (2, "slurm_health: INTERVAL is seconds from 1 to 99, not 0")
