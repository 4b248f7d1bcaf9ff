"""How the preflight is started from a checkout: an option's path with a space, other plugins.

Each run is a real ``python -m pytest -m fast`` in a subprocess, judged by what a user sees: the
rootdir and config file pytest names, the test ids, the G-lines, the exit code, the files left
behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gline_block import glines

ROOT = Path(__file__).resolve().parents[1]
H200_SNAPSHOT = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")


def run_pytest(*args: str, cwd: Path, extra_env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def ten_lines(proc: subprocess.CompletedProcess) -> list[str]:
    out = proc.stdout + proc.stderr
    lines = [line for line in glines(proc.stdout) if GLINE.match(line)]
    assert [int(GLINE.match(line).group(1)) for line in lines] == list(range(1, 11)), out[-4000:]
    assert proc.returncode == (1 if any(" FAIL: " in line for line in lines) else 0), out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    return glines(proc.stdout)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def runs(tmp_path) -> Path:
    """A folder outside the checkout holding a recorded snapshot, as ~/runs would."""
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(H200_SNAPSHOT, folder / "spark1.json")
    return folder


@pytest.mark.parametrize("how", ["space", "equals", "PYTEST_ADDOPTS"])
def test_a_replay_outside_the_checkout_keeps_the_suites_configuration(runs, how):
    snapshot = str(runs / "spark1.json")
    words = {"space": ["--spark-replay", snapshot], "equals": [f"--spark-replay={snapshot}"], "PYTEST_ADDOPTS": []}[how]
    env = {"PYTEST_ADDOPTS": f"--spark-replay {snapshot}"} if how == "PYTEST_ADDOPTS" else None
    proc = run_pytest("-m", "fast", "-v", *words, cwd=ROOT, extra_env=env)
    assert f"rootdir: {ROOT}\n" in proc.stdout and "configfile: pyproject.toml" in proc.stdout, proc.stdout[:2000]
    ids = [line.split(" ")[0] for line in proc.stdout.splitlines() if "::test_g" in line and line.startswith(("t", "."))]
    assert ids and all(i.startswith("tests_gotchas/test_g") for i in ids), ids
    assert ten_lines(proc)[0].startswith("G1 ")
    assert listing(runs) == ["spark1.json"], "the run wrote beside the snapshot (a .pytest_cache?)"


def test_a_launch_config_given_with_a_space_outside_the_checkout(tmp_path):
    """Any option's value that names an existing file, not only the snapshot's."""
    config = tmp_path / "launch" / "accelerate.yaml"
    config.parent.mkdir()
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    proc = run_pytest("-m", "fast", "-k", "g10", "--spark-launch-config", str(config), cwd=ROOT)
    assert f"rootdir: {ROOT}\n" in proc.stdout, proc.stdout[:2000]
    assert "accelerate.yaml" in "\n".join(glines(proc.stdout, (10,)))
    assert listing(config.parent) == ["accelerate.yaml"]


needs_cov = pytest.mark.skipif(importlib.util.find_spec("pytest_cov") is None, reason="needs pytest-cov (the test extra)")
needs_xdist = pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="needs pytest-xdist (the test extra)")


@needs_cov
def test_a_users_coverage_options_do_not_break_the_preflight(tmp_path, runs):
    proc = run_pytest("-m", "fast", "--spark-replay", str(runs / "spark1.json"), cwd=ROOT,
                      extra_env={"PYTEST_ADDOPTS": "--cov=spark_gotchas --cov-report=term",
                                 "COVERAGE_FILE": str(tmp_path / ".coverage")})
    ten_lines(proc)
    assert re.search(r"^TOTAL\s+\d+", proc.stdout, re.MULTILINE), proc.stdout[-3000:]


@needs_xdist
@pytest.mark.parametrize("words", [["-n", "2"], ["-p", "xdist"]])
def test_xdist_leaves_the_checks_in_one_process(runs, words):
    proc = run_pytest("-m", "fast", *words, "--spark-replay", str(runs / "spark1.json"), cwd=ROOT)
    ten_lines(proc)
    if "-n" in words:
        assert "spark-gotchas: -n 2 ignored: the checks run in one process" in proc.stderr


# Any option's value given after a space, not only the suite's: pytest takes the value for a path to
# root the run in whenever the option is a plugin's (unknown when pytest picks its rootdir) and the
# path exists, as the report of the last run does. The same run, space or '=', and only the file
# named is written in its folder.

def the_checkouts_run(proc: subprocess.CompletedProcess) -> None:
    """The run kept the checkout's configuration and ran the ten checks, and only them."""
    assert f"rootdir: {ROOT}\n" in proc.stdout and "configfile: pyproject.toml" in proc.stdout, proc.stdout[:2000]
    assert "import file mismatch" not in proc.stdout, proc.stdout[:2000]
    ten_lines(proc)


@pytest.mark.parametrize("how", ["space", "equals", "PYTEST_ADDOPTS"])
def test_a_json_report_file_given_with_a_space_is_written_again_by_the_next_run(tmp_path, how):
    report = tmp_path / "out" / "r.json"
    report.parent.mkdir()
    words = {"space": ["--json-report-file", str(report)], "equals": [f"--json-report-file={report}"],
             "PYTEST_ADDOPTS": []}[how]
    env = {"PYTEST_ADDOPTS": f"--json-report-file {report}"} if how == "PYTEST_ADDOPTS" else None
    for run in ("first", "second"):  # the second finds the first one's report where it writes its own
        if run == "second":
            assert report.exists()
        proc = run_pytest("-m", "fast", "--json-report", *words, "--spark-replay", str(H200_SNAPSHOT), cwd=ROOT,
                          extra_env=env)
        the_checkouts_run(proc)
        written = json.loads(report.read_text())
        assert written["root"] == str(ROOT) and written["exitcode"] == proc.returncode, (run, written.get("root"))
        ids = [test["nodeid"] for test in written["tests"]]
        assert ids and all(i.startswith("tests_gotchas/test_g") for i in ids), (run, ids)
        assert listing(report.parent) == ["r.json"], (run, "the run wrote beside the report (a .pytest_cache?)")


def cov_config(folder: Path) -> tuple[Path, list[str]]:
    (folder / "covrc").write_text("[report]\nshow_missing = True\n")
    return folder / "covrc", ["--cov=spark_gotchas", "--cov-report=term"]


def cov_source(folder: Path) -> tuple[Path, list[str]]:
    (folder / "src").mkdir()
    (folder / "src" / "elsewhere_module.py").write_text("VALUE = 1\n")
    return folder / "src", ["--cov-report=term"]


# option, what the folder holds before the run (the path given, words before it), what shows it was read
PATH_OPTIONS = {
    "--metadata-from-json-file": (lambda f: (f / "meta.json", ["-v"]), "'site': 'spark1'"),  # pytest-metadata
    "--cov-config": (cov_config, "Missing"),  # pytest-cov: show_missing adds the column
    "--cov": (cov_source, "elsewhere_module.py"),  # pytest-cov's optional value: a source folder
    "--junitxml": (lambda f: (f / "j.xml", []), None),  # pytest's own options are known from the start
    "--log-file": (lambda f: (f / "l.log", []), None),
}


@pytest.mark.parametrize("option", list(PATH_OPTIONS))
def test_a_plugins_path_given_with_a_space_outside_the_checkout(tmp_path, option):
    if option.startswith("--cov") and importlib.util.find_spec("pytest_cov") is None:
        pytest.skip("needs pytest-cov (the test extra)")
    folder, out = tmp_path / "given", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    prepare, shown = PATH_OPTIONS[option]
    path, before = prepare(folder)
    if not path.exists():
        path.write_text('{"site": "spark1"}\n' if path.suffix == ".json" else "from the last run\n")
    held = listing(folder)
    proc = run_pytest("-m", "fast", "--spark-replay", str(H200_SNAPSHOT), "--json-report",
                      f"--json-report-file={out / 'r.json'}", *before, option, str(path), cwd=ROOT,
                      extra_env={"COVERAGE_FILE": str(out / ".coverage")})
    the_checkouts_run(proc)
    assert listing(folder) == held, "the run wrote beside the path given (a .pytest_cache?)"
    if shown is not None:
        assert shown in proc.stdout, proc.stdout[-3000:]
    elif option == "--junitxml":
        assert 'name="pytest" errors="0"' in path.read_text(), path.read_text()[:500]


def test_a_flag_that_takes_no_value_leaves_the_path_after_it_a_path(tmp_path):
    """Only an option's value is joined to it: after --json-report (no value) a check's file is
    still the one file collected."""
    proc = run_pytest("-m", "fast", "-v", "--spark-replay", str(H200_SNAPSHOT), f"--json-report-file={tmp_path / 'r.json'}",
                      "--json-report", "tests_gotchas/test_g10_parallelism.py", cwd=ROOT)
    assert f"rootdir: {ROOT}\n" in proc.stdout and proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = {line.split(" ")[0].split("::")[0] for line in proc.stdout.splitlines() if "::test_g" in line}
    assert ids == {"tests_gotchas/test_g10_parallelism.py"}, ids
    assert [line[:4] for line in glines(proc.stdout) if GLINE.match(line)] == ["G10 "]


def test_the_installed_command_writes_a_json_report_given_with_a_space_from_another_folder(tmp_path):
    command = Path(sys.executable).parent / "spark-gotchas"
    argv = [str(command)] if command.exists() else [sys.executable, "-m", "spark_gotchas"]
    here, report = tmp_path / "project", tmp_path / "out" / "r.json"
    here.mkdir()
    report.parent.mkdir()
    (here / "test_someone_elses.py").write_text("def test_someone_elses():\n    assert False\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    where = subprocess.run([sys.executable, "-c", "from spark_gotchas.commands.cli import INI, checks_dir; "  # the command's copy:
                            "print(checks_dir().parent); print(INI)"],  # the checkout's, or an installed one (tox)
                           cwd=here, env=env, capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    root, ini = where[0], Path(where[1])
    for run in ("first", "second"):
        proc = subprocess.run([*argv, "-m", "fast", "--json-report", "--json-report-file", str(report),
                               "--spark-replay", str(H200_SNAPSHOT)], cwd=here, env=env, capture_output=True,
                              text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert f"rootdir: {root}\n" in proc.stdout, (run, proc.stdout[:2000])
        assert f"configfile: {os.path.relpath(ini, root)}" in proc.stdout, (run, proc.stdout[:2000])
        ten_lines(proc)
        assert json.loads(report.read_text())["exitcode"] == proc.returncode, run
        assert listing(report.parent) == ["r.json"] and listing(here) == ["test_someone_elses.py"], run


@pytest.mark.parametrize("last", [["--json-report", "--json-report-omit", "log"], ["--debug"]])
def test_the_installed_command_keeps_its_checks_whatever_option_ends_the_command(tmp_path, last):
    """An option that takes a list or an optional value, last on the command line, cannot take the
    checks for its own (it once collected nothing, or opened the checks' folder as a file)."""
    command = Path(sys.executable).parent / "spark-gotchas"
    argv = [str(command)] if command.exists() else [sys.executable, "-m", "spark_gotchas"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    proc = subprocess.run([*argv, "-m", "fast", "--spark-replay", str(H200_SNAPSHOT), *last], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    ten_lines(proc)
