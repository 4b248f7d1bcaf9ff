"""One way out (:mod:`spark_gotchas.base.outward`): every line, JSON document and error message a door
prints or writes is masked and shown one line per string, whatever the string from outside holds.

The rule is read from the source: a module that prints or writes to stdout or stderr without the
boundary fails :func:`test_nothing_is_printed_past_the_boundary`. Then each door is tried with
the strings that got through before (a snapshot's escape sequences, line breaks and tokens in
``diff`` and ``diff --json``, a host name's token in ``fleet``, a package's name holding an escape
sequence, ``GIT_URL`` with a token in ``-v``'s header, a file name holding a line break in an
error message) and with others of each kind.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import FORGED, SECRETS, URL, problems
from user_env import user_env

from spark_gotchas.base import outward
from spark_gotchas.commands import diff, fleet, report_check

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
H200 = json.loads(FIXTURE.read_text())

# -- the rule, read from the source -----------------------------------------------------------------
BOUNDARIES = {"spark_gotchas/base/outward.py", "microbench/_cli.py"}  # the suite's way out, and the leaf's own
# Writes that never reach a person, each with why.
PRIVATE = {("spark_gotchas/runtime/worker_main.py", "print"):
           "the worker's stderr is a file its parent reads back (Worker.stderr_tail), shown only in a verdict"}
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
TERMINAL_WRITES = {"write_line", "write_sep", "write_raw", "rewrite", "section", "line"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def _fixed_text(call: ast.Call) -> bool:
    """Every argument a string literal: a fixed text holds nothing from outside."""
    args = [*call.args, *(k.value for k in call.keywords)]
    return all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args)


def writes_past_the_boundary(path: Path) -> list[str]:
    """``file:line what`` for each call in ``path`` that prints or writes to a terminal itself."""
    rel = path.relative_to(ROOT).as_posix()
    if rel in BOUNDARIES:
        return []
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
        if not isinstance(node, ast.Call) or _fixed_text(node):
            continue
        name = _dotted(node.func)
        what = None
        if name == "print" or name.startswith("traceback.print"):
            what = "print"
        elif name.rsplit(".", 1)[-1] in ("write", "writelines") and name.rsplit(".", 2)[-2:-1] and \
                name.rsplit(".", 2)[-2] in STREAMS:
            what = name
        elif name == "os.write" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in (1, 2):
            what = "os.write to fd 1 or 2"
        elif isinstance(node.func, ast.Attribute) and node.func.attr in TERMINAL_WRITES and \
                "reporter" in _dotted(node.func.value).lower():
            what = name
        elif name == "argparse.ArgumentParser":
            what = "argparse.ArgumentParser (its errors print past the boundary: use outward.ArgumentParser, _cli.ArgumentParser in microbench)"
        if what is not None and (rel, what) not in PRIVATE:
            found.append(f"{rel}:{node.lineno} {what}")
    return found


def test_nothing_is_printed_past_the_boundary():
    found = [hit for package in ("spark_gotchas", "microbench") for path in sorted((ROOT / package).rglob("*.py"))
             for hit in writes_past_the_boundary(path)]
    assert found == [], "printed without spark_gotchas.base.outward (or microbench._cli.say): " + "; ".join(found)


def test_the_rule_finds_each_way_of_printing(tmp_path):
    """The reader of the rule itself: each way to print past the boundary is found, a fixed text is not."""
    source = ROOT / "spark_gotchas" / "_probe_for_the_rule.py"
    source.write_text("import sys, os, argparse\n"
                      "def f(x, terminalreporter):\n"
                      "    print(x)\n    sys.stdout.write(x)\n    sys.stderr.write(x)\n    os.write(2, x)\n"
                      "    terminalreporter.write_line(x)\n    argparse.ArgumentParser(prog=x)\n"
                      "    print('a fixed text')\n    terminalreporter.write_sep('=', 'spark-gotchas')\n")
    try:
        found = writes_past_the_boundary(source)
    finally:
        source.unlink()
    assert [hit.split(" ", 1)[1].split(" (")[0] for hit in found] == [
        "print", "sys.stdout.write", "sys.stderr.write", "os.write to fd 1 or 2", "terminalreporter.write_line",
        "argparse.ArgumentParser"]


# -- the boundary's functions -------------------------------------------------------------------------
@pytest.mark.parametrize("text", [f"NVIDIA H200\n{FORGED}", f"x\r{FORGED}", f"x\u2028{FORGED}", f"x\x85{FORGED}",
                                  "\x1b]0;owned\x07\x1b[2J", f"clone {URL}", f"--api-key {SECRETS['sk-live']}",
                                  # a token glued to what comes before it: a colour, a word, a digit
                                  f"\x1b[32m{SECRETS['ghp']}", f"x\x1b[2J{SECRETS['sk-live']}", f"NVIDIA{SECRETS['hf']}",
                                  f"1{SECRETS['ghp']}", f"\x1b]0;t\x07{SECRETS['ghp']}"])
def test_a_line_is_one_line_masked(text):
    shown = outward.line(text)
    assert "\n" not in shown and problems(shown) == []


@pytest.mark.parametrize("at", [-30, -5, 0, 20])
def test_a_long_line_is_cut_and_a_credential_across_the_cut_stays_masked(at):
    """Past twice the line's length nothing is masked (it is not shown): a 24 MB reading prints at
    once, and a token that starts in the part shown is still masked whole."""
    head = "x" * (outward.LINE_CHARS + at)
    shown = outward.line(f"{head} {SECRETS['hf']} " + "y" * (5 * outward.LINE_CHARS))
    assert len(shown) < outward.LINE_CHARS + 40 and shown.endswith(" more characters)")
    assert "hf_" not in shown and problems(shown) == []


@pytest.mark.parametrize("sep", [" ", ",", ";"])
@pytest.mark.parametrize("masked_first", [0, 17_000])
def test_no_part_of_a_credential_at_the_window_s_edge_is_shown(monkeypatch, sep, masked_first):
    """A value masked early (``password=`` and 17,000 characters become ``***``) leaves room for
    more of the window to be shown: a credential cut by the window's edge is left out whole, never
    shown in part, and the count of what is not shown is never negative."""
    secret = "Zq9Kp2LmX7vB4nR8tY6wE3uA5sD1fG0hJ"
    monkeypatch.setenv("MY_PASSWORD", secret)
    for filler in range(outward.LINE_CHARS - 2000, 2 * outward.LINE_CHARS, 97):
        text = "password=" + "x" * masked_first + sep + "y" * filler + sep + secret + " tail"
        shown = outward.line(text)
        assert secret[:6] not in shown and "(-" not in shown, filler


def test_a_document_keeps_its_shape_and_cleans_keys_and_values():
    doc = {f"name\n{FORGED}": [SECRETS["hf"], 1, None, {"url": URL}], "n": 2.5}
    clean = outward.document(doc)
    assert list(clean) == ["name\\x0aG4 PASS: forged", "n"] and clean["n"] == 2.5
    assert clean["name\\x0aG4 PASS: forged"][1:3] == [1, None]
    assert problems(json.dumps(clean, ensure_ascii=False)) == []


def test_the_environments_secret_values_are_masked_wherever_they_appear(monkeypatch, capsys):
    monkeypatch.setenv("MY_DEPLOY_TOKEN", "plain-words-no-shape")
    outward.say("a path /srv/plain-words-no-shape/x")
    assert capsys.readouterr().out == "a path /srv/***/x\n"


def test_an_argument_argparse_echoes_is_masked_and_stays_on_its_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        diff.main(["a.json", "b.json", "--tolerance", f"{SECRETS['hf']}\n{FORGED}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and problems(err) == [] and len(err.splitlines()) == 1


def test_a_closed_pipe_is_not_a_traceback(tmp_path):
    """``… | head -1`` closes the pipe after one line: the command still ends with its status."""
    many = [str(FIXTURE)] * 2
    run = subprocess.run(f"{shlex.join([sys.executable, '-m', 'spark_gotchas', 'diff', *many, '--all'])} | head -1",
                         shell=True, capture_output=True, text=True, timeout=60, env=user_env())
    assert run.stdout == "spark-gotchas diff\n" and run.stderr == ""


# The checks' two front doors: the command, and pytest with the plugin in a checkout. Each with the
# default output (under 8 KiB: all of it waits in stdout's buffer until the end) and with -vv -rA
# (past it: pytest's terminal meets the closed pipe or the full disk while it reports).
RUNS = {"spark-gotchas": ["-m", "spark_gotchas", "-m", "fast"],
        "pytest": ["-m", "pytest", "-m", "fast", "-p", "no:randomly", str(ROOT / "tests_gotchas")]}
RUN_IDS = [f"{door}{' -vv -rA' if verbose else ''}" for door in RUNS for verbose in (False, True)]
RUN_ARGS = [[*RUNS[door], f"--spark-replay={FIXTURE}", *(["-vv", "-rA"] if verbose else [])]
            for door in RUNS for verbose in (False, True)]


@pytest.mark.parametrize("args", RUN_ARGS, ids=RUN_IDS)
def test_the_run_piped_into_head_ends_quietly_with_its_own_status(tmp_path, args):
    """pytest's terminal writes to the run's stdout too: ``spark-gotchas -m fast | head -1`` prints
    the first line and no traceback, and the run's status is the checks' (0 for this replay). Run
    as a user's shell runs it: no PYTHONUNBUFFERED, so stdout is buffered and its last flush is
    the interpreter's at exit unless the suite flushes it first."""
    command = " ".join(shlex.quote(a) for a in [sys.executable, *args])
    run = subprocess.run(f"{command} | head -1; exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash",
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=user_env())
    assert run.stdout.startswith("=") and run.stdout.count("\n") == 1
    assert (run.returncode, run.stderr) == (0, "")


@pytest.mark.parametrize("args", RUN_ARGS, ids=RUN_IDS)
def test_a_pipe_closed_before_the_first_line_ends_the_run_quietly(tmp_path, args):
    """The reader gone before anything was written (``| true``, a pager quit at once): every write
    of the run meets the closed pipe, the first as the last, and the status is still the checks'."""
    read, write = os.pipe()
    os.close(read)
    try:
        run = subprocess.run([sys.executable, *args], cwd=tmp_path, stdout=write, stderr=subprocess.PIPE, text=True,
                             timeout=120, env=user_env())
    finally:
        os.close(write)
    assert (run.returncode, run.stderr) == (0, "")


NO_SPACE = "spark-gotchas: could not write its output: No space left on device\n"
COMMANDS = [["diff", str(FIXTURE), str(FIXTURE)], ["diff", str(FIXTURE), str(FIXTURE), "--json"],
            ["fleet", str(FIXTURE)], ["--help"], ["--version"], ["-m", "fast", f"--spark-replay={FIXTURE}"],
            ["-m", "fast", "-vv", "-rA", f"--spark-replay={FIXTURE}"],
            ["microbench", "gemm", "--backend", "cublas", "--help"], ["check-report", "--help"],
            ["node-health", "--help"], ["soak-record", "--help"], ["soak-cost", "--help"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c).replace(str(FIXTURE), "SNAPSHOT"))
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(command):
    """stdout on a full disk (``/dev/full``): one line on stderr, exit status 2, never a traceback
    (and never 1, which says a status got worse or a report is not whole). Without PYTHONUNBUFFERED,
    as a user's shell starts it: the output waits in stdout's buffer, and its last flush is the
    suite's, not the interpreter's."""
    with open("/dev/full", "w") as full:
        run = subprocess.run([sys.executable, "-m", "spark_gotchas", *command], stdout=full, stderr=subprocess.PIPE,
                             text=True, timeout=60, env=user_env())
    assert (run.returncode, run.stderr) == (2, NO_SPACE)


@pytest.mark.parametrize("args", RUN_ARGS[2:], ids=RUN_IDS[2:])
def test_the_checks_under_pytest_on_a_full_disk_are_one_line_and_exit_2(tmp_path, args):
    """``pytest -m fast > out.txt`` on a full disk, as the command: one line, exit 2 (pytest's own
    flush would end in a traceback and the interpreter's in exit status 120)."""
    with open("/dev/full", "w") as full:
        run = subprocess.run([sys.executable, *args], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True,
                             timeout=120, env=user_env())
    assert (run.returncode, run.stderr) == (2, NO_SPACE)


@pytest.mark.parametrize("closed", ["<&-", ">&-", "2>&-", "<&- >&- 2>&-"])
def test_a_run_started_with_a_standard_stream_closed_still_runs(tmp_path, closed):
    """A run started with stdin, stdout or stderr closed (a service manager's start, ``>&-``):
    pytest needs all three and ended in an internal error (exit 3, or 1 without a word with stderr
    closed); the suite gives a closed one /dev/null, and the run writes its report and ends with the
    checks' status."""
    report = tmp_path / "report.json"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "spark_gotchas", "-m", "fast",
                                                f"--spark-replay={FIXTURE}", "--json-report",
                                                f"--json-report-file={report}"])
    run = subprocess.run(f"exec {command} {closed}", shell=True, executable="/bin/bash", cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=user_env())
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr and "INTERNALERROR" not in run.stdout + run.stderr
    assert json.loads(report.read_text())["spark_gotchas"]["lines"]
    if ">&-" not in closed:
        assert "G10 INFO: " in run.stdout


# -- diff (the issue's first door) --------------------------------------------------------------------
def hostile_snapshot(tmp_path: Path, name: str, worse: bool = False) -> Path:
    """The recorded H200 snapshot with the issue's strings in a verdict, its fix, the GPU name, the
    driver and a package's name and version."""
    doc = copy.deepcopy(H200)
    doc["platform"]["gpu"] = f"NVIDIA H200\n{FORGED} by the GPU name\x1b[2J"
    doc["platform"]["driver"] = f"580.159.04\r{FORGED} by the driver\x1b[5m"
    versions = doc["readings"]["env.distributions"]["versions"]
    versions[f"evil\x1b]0;owned\x07pkg\n{FORGED} by a package"] = f"1.0\u2028{FORGED} {SECRETS['hf']}"
    for verdict in doc["verdicts"]:
        if verdict["id"] == "G6":
            verdict["status"] = "FAIL" if worse else verdict["status"]
            verdict["summary"] = f"pid 7 vllm\n{FORGED} {SECRETS['sk-live']}\r"
            verdict["fix"] = f"kill 7; clone {URL}\x85{FORGED}"
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_diff_shows_a_snapshots_strings_escaped_and_masked(tmp_path, capsys):
    a, b = hostile_snapshot(tmp_path, "a.json"), hostile_snapshot(tmp_path, "b.json", worse=True)
    assert diff.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert problems(out) == [], out
    assert "G4 PASS\\x3a forged by the GPU name" in out  # shown, escaped inside its own line (its head too)
    assert "fix: kill 7; clone https://user:***@host.example/repo.git\\x85G4 PASS\\x3a forged" in out


def test_diff_json_is_masked_and_each_string_one_line(tmp_path, capsys):
    a, b = hostile_snapshot(tmp_path, "a.json"), hostile_snapshot(tmp_path, "b.json", worse=True)
    assert diff.main([str(a), str(b), "--json"]) == 1
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert problems(out) == [] and problems(json.dumps(doc, ensure_ascii=False)) == []
    (g6,) = [s for s in doc["statuses"] if s["gotcha"] == "G6"]
    assert g6["summary_b"] == "pid 7 vllm\\x0aG4 PASS: forged ***\\x0d"


def test_a_package_name_from_a_snapshot_the_suite_wrote_stays_on_its_line(tmp_path, capsys):
    """A distribution whose metadata Name holds an escape sequence and a line break, recorded by the
    suite itself (its snapshot masks, never escapes), reaches the terminal through ``diff``."""
    a = tmp_path / "a.json"
    a.write_text(json.dumps(H200))
    doc = copy.deepcopy(H200)
    doc["readings"]["env.distributions"]["versions"]["torch\x1b[2J\nG4 PASS: all good"] = "9.9"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    diff.main([str(a), str(b)])
    out = capsys.readouterr().out
    assert "  + torch\\x1b[2J\\x0aG4 PASS\\x3a all good 9.9" in out.splitlines()
    assert problems(out.replace("G4 PASS: all good", FORGED)) == []


@pytest.mark.parametrize("name", [f"missing\n{FORGED}.json", f"gone\r{FORGED}\x1b[2J.json",
                                  f"{SECRETS['hf']}\u2028{FORGED}.json"])
def test_a_path_in_an_error_message_is_one_line(tmp_path, capsys, name):
    """The issue's example (a file name with a line break) and two more of its kind, in every
    command that names a file it cannot read."""
    missing = str(tmp_path / name)
    assert diff.main([missing, str(FIXTURE)]) == 2
    assert report_check.main([missing]) == 1
    assert fleet.main([missing]) == 2
    out, err = capsys.readouterr()
    soak = subprocess.run([sys.executable, "-m", "spark_gotchas", "soak-record", missing], capture_output=True, text=True,
                          timeout=60)  # a child: importing the soak here would change what later in-process runs import
    assert soak.returncode == 2
    out, err = out + soak.stdout, err + soak.stderr
    assert problems(out + err) == [], out + err
    assert len([line for line in (out + err).splitlines() if "G4 PASS: forged" in line]) == 4, out + err  # one each


def test_a_hostile_replay_path_is_one_usage_line(pytester):
    """The run's own error for a snapshot it cannot read names the path on its one line."""
    missing = pytester.path / f"gone\n{FORGED}\x1b[2J-{SECRETS['hf']}.json"
    run = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:randomly", str(ROOT / "tests_gotchas"),
                       f"--spark-replay={missing}", timeout=120)
    text = run.stdout.str() + run.stderr.str()
    assert run.ret == pytest.ExitCode.USAGE_ERROR and problems(text) == [], text
    assert [line for line in text.splitlines() if "gone" in line] == [
        line for line in text.splitlines() if line.startswith("ERROR: spark-gotchas: ")]


def test_the_soaks_files_are_masked(tmp_path):
    """The heartbeat and the CSV's notes are records (read back by the next run and by
    soak-record): masked, strings kept as read, each encoded so that no control is raw."""
    from spark_gotchas.machine.readers.thermal.reboot import new_heartbeat, write_heartbeat
    from spark_gotchas.runtime.soak.record import format_meta

    beat = new_heartbeat(60.0, f"/runs/{SECRETS['hf']}/soak.csv")
    beat.end_reason = f"load failed: curl {URL}\n{FORGED}"
    write_heartbeat(tmp_path / "hb.json", beat)
    note = format_meta({"device": "H200\x1b[2J", "load": f"--api-key {SECRETS['sk-live']}"})
    assert problems((tmp_path / "hb.json").read_text()) == [] and problems(note.replace("\x1b", "")) == []
    assert json.loads((tmp_path / "hb.json").read_text())["end_reason"] == f"load failed: curl https://user:***@host.example/repo.git\n{FORGED}"


# -- fleet --------------------------------------------------------------------------------------------
def fleet_node(tmp_path: Path, host: str, file: str, **platform: str) -> Path:
    doc = copy.deepcopy(H200)
    doc["readings"]["host.identity"] = {"hostname": host, "boot_id": f"boot-{file}"}
    doc["platform"].update(platform)
    path = tmp_path / file
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def hostile_fleet(tmp_path):
    """Three nodes: a host name holding a token (the issue's example), one holding a line break and
    an escape sequence, one whose driver forges a line in a drift finding."""
    return [fleet_node(tmp_path, f"node-{SECRETS['ghp']}", "a.json"),
            fleet_node(tmp_path, f"node-b\n{FORGED}\x1b[2J", "b.json"),
            fleet_node(tmp_path, "node-c", "c.json", driver=f"999\r{FORGED} {URL}")]


def test_fleet_text_json_and_markdown_mask_and_keep_each_string_on_its_line(hostile_fleet, tmp_path, capsys):
    summary = tmp_path / "fleet.md"
    fleet.main([str(p) for p in hostile_fleet] + ["--summary-md", str(summary)])
    text = capsys.readouterr().out
    fleet.main([str(p) for p in hostile_fleet] + ["--json"])
    out = capsys.readouterr().out
    doc = json.loads(out)
    markdown = summary.read_text()
    for where, shown in {"terminal": text, "--json": out, "--json's values": json.dumps(doc, ensure_ascii=False),
                         "--summary-md": markdown}.items():
        assert problems(shown, where) == []
    assert "node-***" in text and any(n["name"] == "node-***" for n in doc["nodes"])
    assert "<script" not in markdown and "</details>" not in markdown


# -- the other commands -------------------------------------------------------------------------------
def test_check_report_names_a_hostile_path_on_one_line(tmp_path, capsys):
    report = tmp_path / f"r\n{FORGED}-{SECRETS['hf']}.json"
    report.write_text(json.dumps({"tests": [{"nodeid": f"t\n{FORGED}", "metadata": {"gotcha": {"status": "SKIP"}}}],
                                  "spark_gotchas": {"lines": ["G1 PASS: ok"]}}))
    assert report_check.main([str(report)]) == 1
    out, err = capsys.readouterr()
    assert problems(out + err) == [] and len(err.splitlines()) == 2, err


def test_a_microbench_line_with_a_hostile_device_name(capsys):
    """``spark-gotchas microbench``: a device name from the driver is one line, masked too."""
    from spark_gotchas.commands import cli
    from spark_gotchas.microbench import _cli

    try:
        _cli.LINE = outward.line  # what cli.main sets for the microbench command
        _cli.say(f"GEMM on NVIDIA H200\n{FORGED}\x1b[2J {SECRETS['hf']}", err=True)
        _cli.print_json({"device": f"H200\r{FORGED}", "note": URL})
    finally:
        _cli.LINE = _cli.shown
    out, err = capsys.readouterr()
    assert problems(out + err) == [] and len(err.splitlines()) == 1
    assert cli.main(["microbench", f"no-such\n{FORGED}"]) == 2
    assert problems(capsys.readouterr().err) == []


def test_an_unknown_command_is_one_masked_line(capsys):
    from spark_gotchas.commands import cli

    assert cli.main([f"diff\n{FORGED}-{SECRETS['sk-live']}"]) == 2
    err = capsys.readouterr().err
    assert problems(err) == [] and len(err.splitlines()) == 1


# -- pytest's header and the JSON report's metadata -----------------------------------------------------
def test_the_verbose_header_and_the_reports_metadata_are_masked(pytester, monkeypatch):
    """``-v`` prints pytest-metadata's CI variables (``GIT_URL`` with a token, the issue's example),
    a runner description with an escape sequence and a forged line, a build URL with a token in its
    query, and a value given with ``--metadata``; the G-line block goes through the same boundary."""
    monkeypatch.setenv("GIT_URL", URL)
    monkeypatch.setenv("CI_RUNNER_DESCRIPTION", f"gpu-runner\x1b[2J\n{FORGED}")
    monkeypatch.setenv("BUILD_URL", f"https://ci.example/job/1?token={SECRETS['ghp']}")
    report = pytester.path / "report.json"
    run = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-v", "-p", "no:randomly", str(ROOT / "tests_gotchas"),
                       f"--spark-replay={FIXTURE}", "--metadata", "note", f"{SECRETS['hf']}\r{FORGED}",
                       "--metadata", "password", "hunter2", "--metadata", "GITHUB_TOKEN", "hunter3",  # no shape: a name
                       "--json-report", f"--json-report-file={report}", timeout=240)
    text = run.stdout.str() + run.stderr.str()
    assert "metadata: {" in text, text[:2000]
    assert "'password': '***'" in text and "'GITHUB_TOKEN': '***'" in text and "hunter" not in text
    assert problems(text, "the terminal") == [], text[:3000]
    assert "https://user:***@host.example" in text and "gpu-runner\\\\x1b[2J\\\\x0aG4 PASS" in text
    doc = json.loads(report.read_text())
    assert problems(json.dumps(doc, ensure_ascii=False), "the JSON report") == []


def test_pytests_own_usage_errors_are_masked_and_an_argument_with_a_line_break_is_refused(tmp_path):
    """pytest quotes the command line in its usage errors: a token given by mistake is masked, and an
    argument holding a line break or an escape sequence (which would reach pytest's messages raw: a
    forged G-line, a retitled terminal) is refused in one escaped line."""
    def run(*args: str, module: str = "spark_gotchas") -> str:
        proc = subprocess.run([sys.executable, "-m", module, "-m", "fast", "-p", "no:cacheprovider", *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    unknown = run(f"--bogus={SECRETS['ghp']}")
    assert "unrecognized arguments: --bogus=***" in unknown and problems(unknown) == []
    forged = run(f"--bogus=\x1b]0;owned\x07\n{FORGED}")
    assert problems(forged) == [] and \
        "ERROR: spark-gotchas: an argument holds a control character or line break: --bogus=\\x1b]0;owned\\x07\\x0aG4" \
        in forged
    # plain pytest parses before the plugin is there: the path it cannot find is escaped when collected
    missing = run(str(ROOT / "tests_gotchas"), f"nothere\x1b]0;t\x07\n{FORGED}", module="pytest")
    assert problems(missing) == [] and "file or directory not found: nothere\\x1b]0;t\\x07\\x0aG4 PASS: forged" in missing
