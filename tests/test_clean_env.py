"""The preflight as tox, cron, a runner service or another user starts it: an environment of PATH and
HOME only, and each of the ways such a start differs from a developer's shell.

Such environments hold no credential-like variable, no locale, no virtualenv marker, no TERM or
COLUMNS; the suite's own tests otherwise run inside the developer's full shell environment. Each
case here either works (the ten G-lines, a whole report) or says why in one line: a locale that
is C, POSIX or missing, an ASCII-only stdout, a dumb or 20-column terminal, NO_COLOR, a HOME, cache
or temporary folder that cannot be made, no PATH, ``umask 077``, another user in a folder it
cannot write, a current folder that was removed. The output's own doors (a closed pipe, a full
disk, a closed stdin, stdout or stderr) are in tests/test_outward.py.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import gline_block
import pytest

ROOT = Path(__file__).resolve().parents[1]
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")


@pytest.fixture
def bare_environment(monkeypatch, tmp_path):
    """os.environ emptied of everything but PATH, with a fresh HOME (pytester.run inherits it)."""
    keep = os.environ.get("PATH", "/usr/bin:/bin")
    for name in list(os.environ):
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", keep)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def test_the_preflight_report_is_whole_in_a_bare_environment(pytester, bare_environment):
    report = pytester.path / "report.json"
    snapshot = pytester.path / "snapshot.json"
    result = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", str(ROOT / "tests_gotchas"),
                          "--json-report", f"--json-report-file={report}", f"--spark-snapshot={snapshot}",
                          timeout=240)
    assert result.ret in (0, 1), result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    data = json.loads(report.read_text())
    assert len(data["tests"]) >= 10, f"the report holds {len(data.get('tests', []))} tests"
    lines = [line for line in data["spark_gotchas"]["lines"] if GLINE.match(line)]
    assert [int(GLINE.match(line).group(1)) for line in lines] == list(range(1, 11))
    assert all(t["metadata"]["gotcha"]["status"] for t in data["tests"] if t.get("outcome") != "deselected")
    printed = [line for line in result.stdout.lines if GLINE.match(line)]
    assert printed == lines
    # exit 1 only for a FAIL: a GPU machine whose NVML the bare environment cannot load FAILs G1 there
    assert (result.ret == 1) == any(GLINE.match(line).group(2) == "FAIL" for line in lines), lines
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert json.loads(snapshot.read_text())["readings"], "the snapshot holds no reading"


# -- the rest of the class: what a shell, cron, a service or another user starts the run with ---------
FIXTURE = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"


def bare(home: Path, **extra: str) -> dict[str, str]:
    """PATH and a HOME only, as ``env -i PATH=… HOME=…`` starts a command (no LANG, LC_*, TERM,
    COLUMNS, PYTHON* but a PYTHONPATH that says where the code is), and ``extra``; a value of None
    leaves that variable out."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}
    if "PYTHONPATH" in os.environ and "PYTHONPATH" not in extra:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {k: v for k, v in env.items() if v is not None}


def glines_of(text: str) -> list[str]:
    """The G-lines of the block under the spark-gotchas separator (a FAIL is repeated above it, in
    pytest's failure report: a live run beside a GPU server FAILs G6)."""
    return [line for line in gline_block.glines(text) if GLINE.match(line)]


def preflight(env: dict[str, str], cwd: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spark_gotchas", "-m", "fast", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL, **kwargs)


def non_ascii_snapshot(tmp_path: Path) -> Path:
    """The recorded H200 with a GPU name that no ASCII terminal can show as it is."""
    doc = json.loads(FIXTURE.read_text())
    for device in doc["readings"]["gpu.inventory"]["devices"]:
        device["name"] = "NVIDIA H200 (Größe ≥ 141 GB)"
    doc["platform"]["gpu"] = "NVIDIA H200 (Größe ≥ 141 GB)"
    path = tmp_path / "h200-named.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


# Each works: the same ten G-lines as with nothing set, nothing on stderr, no traceback.
LOCALES_AND_TERMINALS = {
    "nothing set: no LANG, LC_*, TERM, COLUMNS": {},
    "LC_ALL=C": {"LC_ALL": "C"},
    "LC_ALL=POSIX, LANG=POSIX": {"LC_ALL": "POSIX", "LANG": "POSIX"},
    "a locale this machine lacks": {"LC_ALL": "xx_XX.ISO-8859-1", "LANG": "xx_XX.ISO-8859-1"},
    "an ASCII-only stdout (PYTHONIOENCODING=ascii)": {"PYTHONIOENCODING": "ascii"},
    "TERM=dumb": {"TERM": "dumb"},
    "COLUMNS=20": {"COLUMNS": "20"},
    "COLUMNS=20 LINES=5 TERM=xterm": {"COLUMNS": "20", "LINES": "5", "TERM": "xterm"},
    "NO_COLOR=1": {"NO_COLOR": "1"},
}


@pytest.mark.parametrize("extra", LOCALES_AND_TERMINALS.values(), ids=LOCALES_AND_TERMINALS)
def test_the_same_lines_in_any_locale_and_terminal(tmp_path, extra):
    """A replay whose GPU name holds ``ö`` and ``≥``: each environment prints the ten G-lines and the
    platform line of a bare one, a character its stdout cannot encode escaped (``\\u2265``), never a
    UnicodeEncodeError. pytest folds at its own floor of 80 columns below 40, so COLUMNS=20 changes no line."""
    snapshot = non_ascii_snapshot(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    reference = preflight(bare(home), tmp_path, f"--spark-replay={snapshot}")
    run = preflight(bare(home, **extra), tmp_path, f"--spark-replay={snapshot}")
    assert (run.returncode, run.stderr) == (0, ""), run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stdout and len(glines_of(run.stdout)) == 10
    shown = run.stdout if "PYTHONIOENCODING" not in extra else run.stdout.encode().decode("unicode_escape")
    assert glines_of(shown) == glines_of(reference.stdout)
    assert "NVIDIA H200 (Größe ≥ 141 GB)" in shown


def on_a_terminal(env: dict[str, str], cwd: Path, *args: str) -> str:
    """What the run prints on a pseudo-terminal (stdout and stderr, as a user's terminal shows them)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "spark_gotchas", "-m", "fast", *args], cwd=cwd, env=env,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    try:
        while select.select([master], [], [], 120)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the run closed the terminal's other side: all of it is read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


@pytest.mark.parametrize("extra, coloured", [({"TERM": "xterm"}, True), ({}, True), ({"TERM": "xterm", "NO_COLOR": "1"}, False),
                                             ({"TERM": "dumb"}, False)],
                         ids=["TERM=xterm", "TERM unset", "NO_COLOR=1", "TERM=dumb"])
def test_colours_on_a_terminal_only_where_it_wants_them(tmp_path, extra, coloured):
    """On a terminal the G-lines are coloured, but not with NO_COLOR set (no-color.org) or on a dumb
    terminal: then the lines are plain text a screen reader or a log reads as they are."""
    out = on_a_terminal(bare(tmp_path, **extra), tmp_path, f"--spark-replay={FIXTURE}")
    assert ("\x1b[" in out) == coloured
    if not coloured:
        assert len(glines_of(out.replace("\r\n", "\n"))) == 10


# The live preflight (this machine, no replay), where a run reads and writes most: the worker's
# temporary files, G8's cache under $XDG_CACHE_HOME or ~/.cache, the outputs asked for.
def _under_a_file(tmp_path: Path, name: str) -> str:
    (tmp_path / "a-file").write_text("")
    return str(tmp_path / "a-file" / name)  # nothing can be made there, not even by root


LIVE = {
    "HOME under a file (nothing can be made there)": lambda t: {"HOME": _under_a_file(t, "home")},
    "HOME unset": lambda t: {"HOME": None},
    "XDG_CACHE_HOME under a file": lambda t: {"XDG_CACHE_HOME": _under_a_file(t, "cache")},
    "TMPDIR under a file": lambda t: {"TMPDIR": _under_a_file(t, "tmp")},
    "no PATH at all": lambda t: {"PATH": None},
}


def assert_a_whole_run(run: subprocess.CompletedProcess, report: Path) -> None:
    text = run.stdout + run.stderr
    lines = glines_of(run.stdout)
    assert [int(GLINE.match(line).group(1)) for line in lines] == list(range(1, 11)), text[-3000:]
    assert run.returncode == (1 if any(" FAIL: " in line for line in lines) else 0), text[-3000:]
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]
    assert json.loads(report.read_text())["spark_gotchas"]["lines"]


@pytest.mark.parametrize("change", LIVE.values(), ids=LIVE)
def test_the_live_preflight_runs_where_home_temp_or_path_cannot_be_used(tmp_path, change):
    """Each works: the ten G-lines and a whole report. G8 asked for a playbook writes its cache under
    HOME or XDG_CACHE_HOME; where it cannot, the listing is still read (or 'no network' said)."""
    home = tmp_path / "home"
    home.mkdir()
    report = tmp_path / "report.json"
    run = preflight(bare(home, **change(tmp_path)), tmp_path, "--spark-playbook=vllm", "--json-report",
                    f"--json-report-file={report}")
    assert_a_whole_run(run, report)
    assert run.stderr == "", run.stderr[-3000:]


def test_umask_077_writes_every_output_for_its_owner_only(tmp_path):
    """``umask 077`` (a hardened account): the run works and each file it writes is the owner's
    only, as a plain write would make it (the outputs are written beside and renamed over)."""
    outputs = {name: tmp_path / name for name in ("report.json", "snapshot.json", "summary.md", "junit.xml")}
    run = preflight(bare(tmp_path), tmp_path, "--json-report", f"--json-report-file={outputs['report.json']}",
                    f"--spark-snapshot={outputs['snapshot.json']}", f"--spark-summary-md={outputs['summary.md']}",
                    f"--junitxml={outputs['junit.xml']}", umask=0o077)
    assert_a_whole_run(run, outputs["report.json"])
    assert {name: oct(path.stat().st_mode & 0o777) for name, path in outputs.items()} == dict.fromkeys(outputs, "0o600")


ANOTHER_USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                # read (never write) past folders closed to others, such as an interpreter under /root
                "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


def test_another_user_runs_it_from_a_folder_it_cannot_write(tmp_path):
    """A user who is not root, owns none of the suite and cannot write where it stands (``/``), with a
    HOME that does not exist (as ``nobody``'s): the ten lines; an output asked for in that folder
    is one line naming why it is missing, and fails the run."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no other user to run as")
    prefix = ANOTHER_USER if os.geteuid() == 0 else []
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    env = bare(Path("/nonexistent"))
    report = out / "report.json"
    run = subprocess.run([*prefix, sys.executable, "-m", "spark_gotchas", "-m", "fast", "--json-report",
                          f"--json-report-file={report}"], cwd="/", env=env, capture_output=True, text=True,
                         timeout=240, stdin=subprocess.DEVNULL)
    assert_a_whole_run(run, report)
    assert run.stderr == "", run.stderr[-3000:]
    refused = subprocess.run([*prefix, sys.executable, "-m", "spark_gotchas", "-m", "fast", "--spark-replay", str(FIXTURE),
                              "--spark-snapshot=here.json"], cwd="/", env=env, capture_output=True, text=True,
                             timeout=240, stdin=subprocess.DEVNULL)
    said = [line for line in refused.stdout.splitlines() if "here.json" in line]
    assert refused.returncode == 1 and said == [
        "could not write the snapshot here.json: Permission denied (cannot create a file in /) "
        "(the run fails: an output it was asked for is missing)"], refused.stdout[-3000:]


def test_a_current_folder_that_was_removed_is_one_line(tmp_path):
    """``cd runs; rm -r ../runs; spark-gotchas -m fast``: every path is read against the current
    folder, and pytest asks for it first (a traceback, exit 1): one line, exit 2, nothing run."""
    gone = tmp_path / "gone"
    gone.mkdir()
    run = subprocess.run(f'cd {shlex.quote(str(gone))} && rmdir "$PWD" && exec {shlex.quote(sys.executable)} '
                         f"-m spark_gotchas -m fast --spark-replay={shlex.quote(str(FIXTURE))}", shell=True,
                         executable="/bin/bash", env=bare(tmp_path), capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == ("python -m spark_gotchas: the current folder cannot be used (No such file or directory: removed while "
                          "the shell was in it?): cd into a folder that exists and run again\n")
