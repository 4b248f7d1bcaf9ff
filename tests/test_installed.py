"""The installed suite as a new user gets it: a wheel, no checkout, ``spark-gotchas`` from any folder.

The wheel is built from a copy of the checkout's sources (the checkout's ``build/`` is neither read
nor written) without build isolation, so no network is needed: this environment's setuptools (the
``test`` extra) builds it. It is installed into a fresh venv that sees this environment's
packages (pytest, the suite's dependencies, torch where there is one) through a ``.pth`` file;
``python -m venv --system-site-packages`` would show the base interpreter's packages instead,
not this environment's. The command then runs from a folder that holds someone else's failing
test.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from gline_block import glines
from packaging.version import Version
from user_env import user_env

from spark_gotchas import __version__

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "spark_gotchas", "microbench", "tests_gotchas")
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")
OTHER_TEST = "def test_someone_elses():\n    assert False, 'collected from the current folder'\n"


def setuptools_builds_wheels() -> bool:
    try:
        return Version(metadata.version("setuptools")) >= Version("70.1")
    except metadata.PackageNotFoundError:
        return False


pytestmark = pytest.mark.skipif(not setuptools_builds_wheels(),
                                reason="needs setuptools>=70.1 (the test extra) to build the wheel offline")


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    env: dict

    @property
    def site_packages(self) -> Path:
        return Path(sysconfig.get_path("purelib", vars={"base": str(self.venv), "platbase": str(self.venv)}))

    def run(self, *args: str, cwd: Path, timeout: float = 180, extra_env: dict | None = None) -> subprocess.CompletedProcess:
        env = dict(self.env, **(extra_env or {}))
        return subprocess.run(["spark-gotchas", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


def copy_sources(dest: Path) -> Path:
    dest.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def this_environments_paths() -> list[str]:
    """Where this environment's packages are: its site folders and whatever else is on sys.path
    (a .pth file may add folders), but not this checkout (its ``spark_gotchas/`` and top-level
    ``microbench/`` would stand in for what the wheel must hold) and not the standard library (the new
    venv has its own)."""
    base = Path(sys.base_prefix).resolve()
    out: list[str] = []
    for entry in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]:
        if not entry or entry in out or not os.path.isdir(entry):
            continue
        path = Path(entry).resolve()
        if path == ROOT:
            continue
        if (path == base or base in path.parents) and not {"site-packages", "dist-packages"} & set(path.parts):
            continue  # the standard library
        out.append(entry)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The wheel built from this checkout's sources, pip-installed into a fresh venv."""
    work = tmp_path_factory.mktemp("installed")
    src = copy_sources(work / "src")
    wheels = work / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = wheels.glob("spark_gotchas-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    result = Installed(venv, wheel, {})
    result.site_packages.mkdir(parents=True, exist_ok=True)
    (result.site_packages / "_this_environment.pth").write_text("\n".join(this_environments_paths()) + "\n")
    python = venv / "bin" / "python"
    # --ignore-installed: this environment's own spark-gotchas (seen through the .pth) is left alone
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    # as a user's shell starts it: no PYTHON* variable (PYTHONDONTWRITEBYTECODE would hide a write
    # into the install tree, PYTHONUNBUFFERED a flush that fails at exit)
    env = {k: v for k, v in user_env().items() if not k.startswith("PYTEST_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Installed(venv, wheel, env)


@pytest.fixture
def someone_elses_folder(tmp_path) -> Path:
    folder = tmp_path / "someone-else"
    folder.mkdir()
    (folder / "test_other.py").write_text(OTHER_TEST)
    return folder


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def assert_ten_lines(proc: subprocess.CompletedProcess) -> list[str]:
    out = proc.stdout + proc.stderr
    lines = [line for line in glines(proc.stdout) if GLINE.match(line)]
    assert [int(GLINE.match(line).group(1)) for line in lines] == list(range(1, 11)), out[-4000:]
    failed = any(" FAIL: " in line for line in lines)
    assert proc.returncode == (1 if failed else 0), out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    return glines(proc.stdout)


# -- the wheel ----------------------------------------------------------------------------------
def test_the_wheel_holds_the_checks_and_measurements_in_the_suites_namespace(installed):
    with zipfile.ZipFile(installed.wheel) as z:
        names = set(z.namelist())
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"spark_gotchas"}, f"the wheel takes other top-level names: {sorted(tops - {'spark_gotchas'})}"
    shipped = {"spark_gotchas": "spark_gotchas", "tests_gotchas": "spark_gotchas/checks",
               "microbench": "spark_gotchas/microbench"}
    for folder, inside in shipped.items():
        expected = {f"{inside}/{p.relative_to(ROOT / folder).as_posix()}" for p in (ROOT / folder).rglob("*.py")
                    if "__pycache__" not in p.parts}
        assert expected <= names, f"missing from the wheel: {sorted(expected - names)[:10]}"
    assert "spark_gotchas/pytest.ini" in names
    data = {f"spark_gotchas/microbench/{p.relative_to(ROOT / 'microbench').as_posix()}"
            for p in (ROOT / "microbench" / "ptx").glob("*.ptx")}
    assert len(data) == 5 and data <= names, f"G5's kernels missing from the wheel: {sorted(data - names)}"
    checks = {int(m.group(1)) for n in names if (m := re.match(r"spark_gotchas/checks/test_g(\d\d)_\w+\.py$", n))}
    assert checks == set(range(1, 11))


def test_the_installed_suite_reads_g5s_kernels_from_its_own_package_data(installed, tmp_path):
    """The PTX ships as data files: the installed module serves the checkout's files, byte for byte."""
    code = ("import json, spark_gotchas.microbench._stream_ptx as k; "
            "print(json.dumps({'file': k.__file__, 'helpers': k.HELPERS, 'ptx': k.PTX}))")
    proc = subprocess.run([str(installed.venv / "bin" / "python"), "-c", code], cwd=tmp_path, env=installed.env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout)
    assert served["file"].startswith(str(installed.site_packages))
    folder = ROOT / "microbench" / "ptx"
    assert served["helpers"] == (folder / "stream_helpers.ptx").read_text()
    assert {int(v): text for v, text in served["ptx"].items()} == {
        v: (folder / f"stream_v{v}.ptx").read_text() for v in (1, 2, 4, 8)}


def test_the_installed_ini_says_what_the_checkouts_pyproject_says():
    """One configuration: spark_gotchas/pytest.ini (what ``spark-gotchas`` uses) and pyproject.toml
    (what ``pytest -m fast`` in a checkout uses) hold the same settings."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "spark_gotchas" / "pytest.ini")
    installed = {key: value.split() if key == "addopts" else value.strip() for key, value in ini["pytest"].items()}
    checkout = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    checkout = {key: (value if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else str(value))
                for key, value in checkout.items() if key != "testpaths"}
    assert installed == checkout


# -- the command, from a folder that is not the checkout -----------------------------------------
def test_a_new_user_runs_the_installed_checks_from_any_folder(installed, someone_elses_folder):
    before = listing(someone_elses_folder)
    proc = installed.run("-m", "fast", "-rs", cwd=someone_elses_folder)
    assert_ten_lines(proc)
    assert "test_other" not in proc.stdout + proc.stderr, "a test of the current folder was collected"
    assert "configfile: " in proc.stdout and str(installed.site_packages / "spark_gotchas") in proc.stdout
    assert listing(someone_elses_folder) == before, "the run wrote into the current folder"


def test_a_replay_with_a_space_before_a_relative_path_writes_nothing_beside_the_snapshot(installed, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    live = installed.run("-m", "fast", "--spark-snapshot", "runs/x.json", cwd=tmp_path)
    recorded = assert_ten_lines(live)
    assert listing(runs) == ["x.json"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for words in (["--spark-replay", "../runs/x.json"], ["--spark-replay=../runs/x.json"]):
        replay = installed.run("-m", "fast", *words, cwd=elsewhere)
        assert assert_ten_lines(replay) == recorded, words
        assert listing(runs) == ["x.json"] and listing(elsewhere) == [], words


def test_the_report_the_command_wrote_passes_its_check(installed, tmp_path):
    proc = installed.run("-m", "fast", "-q", "--json-report", "--json-report-file", "report.json", cwd=tmp_path)
    assert_ten_lines(proc)
    check = installed.run("check-report", "report.json", cwd=tmp_path, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def install_tree(installed: Installed) -> dict[str, tuple[int, int]]:
    """Every file and folder of the installed package, with its size and modification time."""
    root = installed.site_packages / "spark_gotchas"
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in [root, *root.rglob("*")]}


def test_a_run_writes_nothing_into_its_own_install_tree(installed, tmp_path):
    """A live run and a replay leave the installed package as pip wrote it: pytest's assertion
    rewriting wrote ``judges/__pycache__/*-pytest-*.pyc`` and more (71 files) there, which pip's
    uninstall does not know, and the folders of them left behind shadowed an editable install."""
    before = install_tree(installed)
    snapshot = tmp_path / "snapshot.json"
    assert_ten_lines(installed.run("-m", "fast", f"--spark-snapshot={snapshot}", cwd=tmp_path))
    assert_ten_lines(installed.run("-m", "fast", f"--spark-replay={snapshot}", cwd=tmp_path))
    after = install_tree(installed)
    assert sorted(set(after) - set(before)) == [] and after == before


ANOTHER_USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                # read (never write) past folders closed to others, such as an interpreter under /root
                "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


def test_a_read_only_install_runs_as_another_user(installed, tmp_path):
    """The suite installed read-only (``chmod -R a-w``, a system image's site-packages) and run by a
    user who owns none of it, with a HOME that does not exist (as ``nobody``'s): the ten lines,
    the checks' status, no traceback."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no other user to run as")
    prefix = ANOTHER_USER if os.geteuid() == 0 else []
    root = installed.site_packages / "spark_gotchas"
    modes = {p: p.stat().st_mode for p in [root, *root.rglob("*")]}
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)
    try:
        for path, mode in modes.items():
            path.chmod(mode & ~0o222)
        env = dict(installed.env, HOME="/nonexistent")
        proc = subprocess.run([*prefix, "spark-gotchas", "-m", "fast", "-rs"], cwd=work, env=env, capture_output=True,
                              text=True, timeout=180, stdin=subprocess.DEVNULL)
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert_ten_lines(proc)
    assert proc.stderr == "", proc.stderr[-3000:]


@pytest.mark.parametrize("argv, code, text", [
    (["--help"], 0, "diff "),
    (["diff", "--help"], 0, "usage:"),
    (["check-report", "--help"], 0, "usage:"),
    (["--version"], 0, f"spark-gotchas {__version__}"),
    (["frobnicate"], 2, "unknown command 'frobnicate'"),
    (["microbench", "--help"], 0, "NAME is one of: attention, bandwidth, collective, gemm, safetensors_load, soak_load"),
    (["microbench", "soak_load", "--help"], 0, "usage: spark-gotchas microbench soak_load"),
])
def test_the_tools_are_subcommands_of_the_same_command(installed, tmp_path, argv, code, text):
    proc = installed.run(*argv, cwd=tmp_path, timeout=60)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert text in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


def test_the_command_knows_the_suites_dependencies():
    from spark_gotchas.commands.cli import REQUIRES

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert set(REQUIRES) == {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0] for d in declared}


def test_a_python_without_the_suites_dependencies_is_told_in_one_line(tmp_path):
    """As ``tox -e preflight`` meets a venv that has torch but not the suite."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(bare / "bin" / "python"), "-m", "spark_gotchas", "-m", "fast"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "lacks the suite's dependencies pytest, pytest-timeout" in proc.stderr
    assert "pip install -e . in a checkout" in proc.stderr
