"""``spark-gotchas watch`` around real jobs: what a user sees (the job's output, byte for byte; its exit
status; the watch's lines; the files), with real child processes, in a bare environment (PATH and a
fresh HOME, no PYTHONUNBUFFERED: the job buffers as it would for a user)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import no_nvml
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")
RATE = r"([0-9.]+) it/s"
PLOT = importlib.util.find_spec("matplotlib") is not None  # the plot extra

# The job: a training loop's shape. Arguments: steps, seconds a step, then words: "slow" halves its speed
# halfway, "binary" writes raw bytes and a 1 MB line, "progress" redraws with \r as tqdm does, "exit=N",
# "kill" (SIGKILL itself at the end), "signals" (count SIGINT and SIGTERM, exit 130 once one came).
JOB = r'''
import os, signal, sys, time
steps, pause = int(sys.argv[1]), float(sys.argv[2])
words = sys.argv[3:]
got = []
if "signals" in words:
    def note(sig, frame):
        got.append(sig)
        print(f"got {signal.Signals(sig).name} #{len(got)}", flush=True)
    signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)
hold = []
out = sys.stdout
for i in range(steps):
    d = pause * (2 if "slow" in words and i >= steps // 2 else 1)
    time.sleep(d)
    hold.append(bytearray(1 << 20))
    if "progress" in words:
        out.write(f"\r{i}/{steps} [{1 / d:.2f} it/s]")
    else:
        out.write(f"step {i}: loss {1.0 / (i + 1):.4f}, {1 / d:.2f} it/s\n")
    if i % 7 == 3:
        print(f"warn at step {i}", file=sys.stderr)
    if "binary" in words and i == 1:
        out.flush()
        os.write(1, bytes(range(256)) * 3 + b"\x00\r\x1b[2K" + b"x" * (1 << 20) + b"\n")
    if got and "signals" in words:
        break
out.write("\n")
out.flush()
if "kill" in words:
    os.kill(os.getpid(), signal.SIGKILL)
code = next((int(w.split("=")[1]) for w in words if w.startswith("exit=")), 0)
sys.exit(130 if got else code)
'''


def bare_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "SPARK_GOTCHAS_STATE_DIR": str(tmp_path / "state")}


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return path


def watch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "spark_gotchas", "watch", *args]


def run(cmd: list[str], tmp_path: Path, stdout=subprocess.PIPE, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=bare_env(tmp_path), stdout=stdout, stderr=subprocess.PIPE, timeout=timeout,
                          cwd=tmp_path, **kw)


def watch_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode("utf-8", "replace").splitlines() if line.startswith("spark-gotchas watch: ")]


def g_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode("utf-8", "replace").splitlines() if GLINE.match(line)]


# -- the job's output and status ----------------------------------------------------------------------
@pytest.mark.parametrize("into", ["file", "pipe"])
def test_the_jobs_output_is_byte_identical_binary_long_lines_and_progress_included(job, tmp_path, into):
    args = [sys.executable, str(job), "6", "0.02", "binary", "progress"]
    if into == "file":
        with open(tmp_path / "alone.out", "wb") as fh:
            alone = run(args, tmp_path, stdout=fh)
        with open(tmp_path / "watched.out", "wb") as fh:
            watched = run(watch_cmd("--every", "0.1", "--out", "w", "--rate-regex", RATE, "--", *args), tmp_path,
                          stdout=fh)
        a, b = (tmp_path / "alone.out").read_bytes(), (tmp_path / "watched.out").read_bytes()
    else:
        alone = run(args, tmp_path)
        watched = run(watch_cmd("--every", "0.1", "--out", "w", "--rate-regex", RATE, "--", *args), tmp_path)
        a, b = alone.stdout, watched.stdout
    assert a == b and len(a) > 1 << 20
    assert watched.returncode == alone.returncode == 0
    job_stderr = [line for line in watched.stderr.decode().splitlines()
                  if not line.startswith("spark-gotchas watch: ") and not GLINE.match(line) and
                  not line.startswith("    fix: ")]
    assert job_stderr == alone.stderr.decode().splitlines()  # the job's own stderr lines, in their order


def test_stdout_and_stderr_into_one_pipe_keep_their_order(job, tmp_path):
    args = [sys.executable, "-u", str(job), "12", "0.01"]
    alone = subprocess.run(args, env=bare_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    watched = subprocess.run(watch_cmd("--every", "0.1", "--out", str(tmp_path / "w"), "--rate-regex", RATE, "--", *args),
                             env=bare_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    mine = [line for line in watched.stdout.decode().splitlines()
            if not line.startswith(("spark-gotchas watch: ", "    fix: ")) and not GLINE.match(line)]
    assert mine == alone.stdout.decode().splitlines()


@pytest.mark.parametrize("words, status", [([], 0), (["exit=3"], 3), (["kill"], 128 + signal.SIGKILL)])
def test_the_jobs_exit_status_is_the_watchs(job, tmp_path, words, status):
    watched = run(watch_cmd("--every", "0.1", "--out", "w", "--", sys.executable, str(job), "3", "0.02", *words),
                  tmp_path)
    assert watched.returncode == status
    said = watch_lines(watched.stderr)
    how = "killed by SIGKILL" if "kill" in words else f"exited {status}"
    assert any(how in line for line in said), said
    assert [GLINE.match(line).group(1) for line in g_lines(watched.stderr)] == ["3", "4", "6"]


def test_a_command_that_cannot_run_is_127_and_one_line(tmp_path):
    watched = run(watch_cmd("--out", "w", "--", "no-such-program-here", "--lr", "1"), tmp_path)
    assert watched.returncode == 127
    assert watch_lines(watched.stderr) == [
        "spark-gotchas watch: cannot run the command: no-such-program-here: No such file or directory"]


def test_a_folder_that_holds_files_is_refused_before_anything_runs(job, tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "watch.csv").write_text("an earlier run\n")
    marker = tmp_path / "ran"
    watched = run(watch_cmd("--out", "w", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"), tmp_path)
    assert watched.returncode == 2
    assert "holds files already" in watched.stderr.decode()
    assert not marker.exists() and (tmp_path / "w" / "watch.csv").read_text() == "an earlier run\n"


@pytest.mark.parametrize("args, says", [
    (["--rate-regex", "[0-9.]+ it/s"], "has 0 groups"),
    (["--rate-regex", "(a)(b)"], "has 2 groups"),
    (["--every", "0"], "--every"),
    ([], "give the command to watch after --"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, args, says):
    watched = run(watch_cmd(*args, *([] if not args or args[0] != "--every" else ["--", "true"])), tmp_path)
    assert watched.returncode == 2 and says in watched.stderr.decode()
    assert "Traceback" not in watched.stderr.decode()


# -- signals ---------------------------------------------------------------------------------------------
def test_a_signal_sent_to_the_watch_reaches_the_job_once(job, tmp_path):
    proc = subprocess.Popen(watch_cmd("--every", "0.1", "--out", "w", "--", sys.executable, "-u", str(job), "200",
                                      "0.02", "signals"),
                            env=bare_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130  # the job's own status for it
    assert out.decode().count("got SIGTERM") == 1 and "got SIGTERM #1" in out.decode()


def test_ctrl_c_at_the_terminal_reaches_the_job_first_and_once(job, tmp_path):
    """The watch under a real terminal (a pty it has as controlling terminal): Ctrl-C goes to the job's
    process group, the terminal's foreground; the watch tells the end and exits with the job's status."""
    env = bare_env(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its controlling terminal
        os.chdir(tmp_path)
        os.execve(sys.executable, watch_cmd("--out", "w", "--rate-regex", RATE, "--", sys.executable, str(job),
                                            "200", "0.02", "signals"), env)
    seen = b""
    deadline = time.time() + 30
    sent = False
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            seen += data
        if not sent and b"step 10:" in seen:
            os.write(fd, b"\x03")
            sent = True
    _, status = os.waitpid(pid, 0)
    text = seen.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 130, text[-2000:]
    assert text.count("got SIGINT") == 1, text[-2000:]
    assert "exited 130" in text and "G3 " in text


# -- what it says and writes ------------------------------------------------------------------------------
def test_the_rate_falling_halfway_is_said_once_and_judged_not_the_cooling(job, tmp_path):
    # no NVML of this machine's: on a GPU machine other tests' GPU processes would join its GPU and
    # take the blame (G6), rightly; this test is of a fall nothing on the machine explains
    env = {**bare_env(tmp_path), "PYTHONPATH": str(no_nvml.folder(tmp_path))}
    watched = subprocess.run(watch_cmd("--every", "0.1", "--out", "w", "--rate-regex", RATE, "--",
                                       sys.executable, "-u", str(job), "120", "0.04", "slow"),
                             env=env, capture_output=True, timeout=60, cwd=tmp_path)
    said = watch_lines(watched.stderr)
    falls = [line for line in said if " rate " in line and "->" in line]
    nvml = json.loads((tmp_path / "w" / "report.json").read_text())["spark_gotchas"]["watch"]["nvml_error"]
    why = r"\(GPU clocks not read\)" if nvml else "with no clock or throttle sign: not the cooling"
    assert len(falls) == 1, said
    assert re.fullmatch(r"spark-gotchas watch: G4 WARN \d:\d\d:\d\d rate 2[0-9.]* -> 1[0-9.]* it/s \(-[3-6]\d%\) "
                        + why, falls[0]), falls
    lines = g_lines(watched.stderr)
    g4 = next(line for line in lines if line.startswith("G4 "))
    tail = "GPU clocks not read (NVML unavailable)" if nvml else "no clock or throttle sign: not the cooling"
    # the figures where the line has room for them (verdict.fitting keeps it within 100 columns)
    assert re.fullmatch(r"G4 WARN: the rate fell [3-6]\d%( \(2[0-9.]* -> 1[0-9.]* it/s\))? from 0:00:0\d for \d+% of "
                        r"the run, " + re.escape(tail), g4), g4
    assert len(g4) <= 100
    fix = watched.stderr.decode().split(g4, 1)[1].splitlines()[1]
    assert fix.startswith("    fix: ") and "improve cooling" not in fix


def test_the_files_are_written_and_the_suites_tools_read_the_report(job, tmp_path):
    watched = run(watch_cmd("--every", "0.1", "--out", "w", "--rate-regex", RATE, "--",
                            sys.executable, "-u", str(job), "40", "0.05"), tmp_path)
    out = tmp_path / "w"
    plotted = ["watch.png"] if PLOT else []  # the plot extra: without it the watch says so (below) and keeps the rest
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "watch.csv", *plotted]
    rows = (out / "watch.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert header[:3] == ["event", "t_s", "epoch_s"] and "rate" in header and "mem_available_mb" in header
    events = [r.split(",", 1)[0] for r in rows[1:]]
    assert events[0] == "start" and events[-1] == "end" and events.count("sample") >= 3
    rates = [r.split(",")[header.index("rate")] for r in rows[1:] if r.startswith("sample,")]
    assert any(float(x) > 10 for x in rates if x)
    assert not PLOT or (out / "watch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "report.json").read_text())
    lines = g_lines(watched.stderr)
    assert report["spark_gotchas"]["lines"][0] == lines[0] and report["spark_gotchas"]["mode"] == "watch"
    check = run([sys.executable, "-m", "spark_gotchas", "check-report", "--gotchas", "3,4,6", str(out / "report.json")],
                tmp_path)
    assert check.returncode == 0, check.stderr.decode()
    diff = run([sys.executable, "-m", "spark_gotchas", "diff", str(out / "report.json"), str(out / "report.json")],
               tmp_path)
    assert diff.returncode == 0 and b"No status got worse" in diff.stdout
    fleet = run([sys.executable, "-m", "spark_gotchas", "fleet", str(out / "report.json")], tmp_path)
    assert fleet.returncode in (0, 1) and b"G3" in fleet.stdout, fleet.stderr.decode()
    again = run(watch_cmd("--spark-replay", str(out)), tmp_path)
    assert [line for line in again.stdout.decode().splitlines() if GLINE.match(line)] == lines


def test_watch_without_matplotlib_says_so_in_one_line(job, tmp_path):
    blocker = tmp_path / "nomatplotlib"
    blocker.mkdir()
    (blocker / "matplotlib").mkdir()
    (blocker / "matplotlib" / "__init__.py").write_text("raise ModuleNotFoundError(name='matplotlib')\n")
    env = {**bare_env(tmp_path), "PYTHONPATH": str(blocker)}
    watched = subprocess.run(watch_cmd("--every", "0.1", "--out", "w", "--", sys.executable, str(job), "3", "0.02"),
                             env=env, cwd=tmp_path, capture_output=True, timeout=60)
    assert watched.returncode == 0
    last = watch_lines(watched.stderr)[-1]
    assert last.endswith("(matplotlib not installed (pip install 'spark-gotchas[plot]'): no watch.png; "
                         "watch.csv has every sample)")
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["report.json", "watch.csv"]


# -- attaching ---------------------------------------------------------------------------------------------
def test_attach_to_a_running_job_reads_its_log_file_and_ends_with_it(job, tmp_path):
    log = open(tmp_path / "train.log", "wb")
    running = subprocess.Popen([sys.executable, "-u", str(job), "60", "0.05"], stdout=log, stderr=subprocess.DEVNULL,
                               env=bare_env(tmp_path))
    try:
        watched = run(watch_cmd("--every", "0.1", "--out", "w", "--rate-regex", RATE, "--pid", str(running.pid)),
                      tmp_path)
    finally:
        running.wait(timeout=30)
        log.close()
    assert watched.returncode == 0
    said = watch_lines(watched.stderr)
    assert any(f"(pid {running.pid})" in line for line in said) and any("ended" in line for line in said), said
    reading = json.loads((tmp_path / "w" / "report.json").read_text())["spark_gotchas"]["watch"]
    assert reading["mode"] == "attach" and reading["rate_values"] > 5 and reading["rate_unit"] == "it/s"


def test_ctrl_c_ends_the_watching_and_the_job_goes_on(job, tmp_path):
    running = subprocess.Popen([sys.executable, str(job), "400", "0.05"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=bare_env(tmp_path))
    try:
        proc = subprocess.Popen(watch_cmd("--every", "0.1", "--out", "w", "--pid", str(running.pid)),
                                env=bare_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130
        assert running.poll() is None, "the job was stopped with the watching"
        assert any("still running (the watching ended by SIGINT)" in line for line in watch_lines(err))
        assert len(g_lines(err)) == 3
    finally:
        running.kill()
        running.wait()


# -- an earlier run ------------------------------------------------------------------------------------------
def test_the_next_watch_says_an_earlier_one_was_killed_or_rebooted(job, tmp_path):
    proc = subprocess.Popen(watch_cmd("--every", "0.1", "--out", "w1", "--", sys.executable, str(job), "400", "0.05"),
                            env=bare_env(tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    proc.kill()  # the watch dies without an end marker (its job goes on: kill it too)
    proc.wait()
    for orphan in psutil.process_iter(["cmdline"]):  # no pgrep: a minimal system has no procps
        if str(job) in (orphan.info["cmdline"] or []):
            with contextlib.suppress(psutil.NoSuchProcess):
                orphan.kill()
    state = tmp_path / "state"
    beats = list(state.glob("watch-*.json"))
    assert len(beats) == 1
    rebooted = json.loads(beats[0].read_text())
    rebooted.update(boot_id="an-earlier-boot", watch_pid=rebooted["watch_pid"], started_epoch=rebooted["started_epoch"] - 1)
    (state / "watch-1-1.json").write_text(json.dumps(rebooted))
    again = run(watch_cmd("--out", "w2", "--", sys.executable, str(job), "1", "0.01"), tmp_path)
    said = watch_lines(again.stderr)
    assert any(re.search(r"G4 INFO (watched|a watched run) .*was killed with its watch at about .* UTC \(no reboot\); "
                         r"files in .*w1", line) for line in said), said
    assert any(re.search(r"G4 FAIL (watched|a watched run) .*ended in a reboot/power loss at about", line)
               for line in said), said
    assert not list(state.glob("watch-*.json")), "the heartbeats told are removed"
    third = run(watch_cmd("--out", "w3", "--", sys.executable, str(job), "1", "0.01"), tmp_path)
    assert not any("the watched run" in line for line in watch_lines(third.stderr))


# -- strings and doors from outside ------------------------------------------------------------------------
def test_a_token_and_an_escape_in_the_jobs_arguments_are_masked_in_every_line_and_file(tmp_path):
    token, escape = "hf_abcdefghijklmnopqrstuvwxyz0123", "\x1b[2J\x07"
    watched = run(watch_cmd("--every", "0.1", "--out", "w", "--rate-regex", RATE, "--", sys.executable, "-c",
                            "import sys; print(len(sys.argv))", f"--hf-token={token}", escape), tmp_path)
    assert watched.stdout == b"3\n"  # the job's own output and arguments are its own
    err = watched.stderr.decode()
    assert token not in err and "\x1b" not in err and "\x07" not in err
    assert "--hf-token=*** \\x1b[2J\\x07" in watch_lines(watched.stderr)[0]
    for name in ("report.json", "watch.csv"):
        assert token not in (tmp_path / "w" / name).read_text()


def test_output_piped_into_head_ends_the_job_as_it_would_without_the_watch(tmp_path):
    pipeline = f"{shlex.join(watch_cmd('--out', 'w', '--rate-regex', RATE, '--', 'yes', '1.0 it/s'))} | head -2; " \
               "echo status=${PIPESTATUS[0]}"
    done = subprocess.run(["bash", "-c", pipeline], env=bare_env(tmp_path), cwd=tmp_path, capture_output=True,
                          timeout=60)
    assert done.stdout.decode().splitlines() == ["1.0 it/s", "1.0 it/s", f"status={128 + signal.SIGPIPE}"]
    assert any("killed by SIGPIPE" in line for line in watch_lines(done.stderr))


def test_a_metrics_file_that_is_no_regular_file_is_refused_before_anything_runs(tmp_path):
    fifo = tmp_path / "watch.prom"
    os.mkfifo(fifo)
    watched = run(watch_cmd("--out", "w", "--prometheus-textfile", str(fifo), "--", "true"), tmp_path)
    assert watched.returncode == 2 and "not a regular file" in watched.stderr.decode()
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())

