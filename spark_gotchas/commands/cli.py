"""``spark-gotchas``: the suite's one command (``python -m spark_gotchas`` is the same).

    spark-gotchas -m fast [pytest options]     the checks, with the suite's own configuration
    spark-gotchas diff A.json B.json           the tools, one subcommand each

The checks run from any folder: pytest gets the installed suite's ini file (``-c``), its folder as
the rootdir and the checks' folder as the only path, so nothing of the current folder is collected
and nothing is written there unless asked for (no ``.pytest_cache``). Paths in options (``--spark-
replay runs/x.json``) are read against the current folder: pytest runs in this process, from here.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Optional

from .. import __version__
from ..base import outward

SUITE = Path(__file__).resolve().parents[1]  # the package: commands/ is one of its folders
INI = SUITE / "pytest.ini"  # package data; a checkout's pyproject.toml says the same

# name -> (module with main(argv) -> int, or None for the checks; one line of help)
COMMANDS: dict[str, tuple[Optional[str], str]] = {
    "run": (None, "the checks under pytest (the default: spark-gotchas -m fast [pytest options])"),
    "diff": ("spark_gotchas.commands.diff", "what changed between two runs or machines (JSON reports or snapshots)"),
    "check-report": ("spark_gotchas.commands.report_check", "fail unless a JSON report holds its tests and a G-line per gotcha"),
    "fleet": ("spark_gotchas.commands.fleet", "many nodes' reports or snapshots as one group: outliers and stack drift"),
    "node-health": ("spark_gotchas.commands.slurm.node_health", "Slurm health check or prolog: drain this node on a FAIL, undrain "
                    "what it drained"),
    "microbench": ("spark_gotchas.microbench.__main__", "one GPU measurement alone: bandwidth, gemm, soak_load, ..."),
    "soak-record": ("spark_gotchas.runtime.soak.record", "judge a recorded G4 soak CSV again (also a killed run's)"),
    "soak-cost": ("spark_gotchas.commands.soak_cost", "what the G4 soak's sampler costs the load it watches (≤ 1 % budget)"),
    "watch": ("spark_gotchas.commands.watch", "watch your own training run: G3, G4, G6 as it runs "
              "(spark-gotchas watch -- python train.py)"),
}


def prog() -> str:
    """How the user called us, for the usage line."""
    return "python -m spark_gotchas" if Path(sys.argv[0]).name == "__main__.py" else "spark-gotchas"


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"usage: {prog()} COMMAND [ARGS]", f"       {prog()} -m fast [pytest options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_module, text) in COMMANDS.items()]
    lines += ["", f"{prog()} COMMAND --help shows a command's arguments ({prog()} run --help: pytest's and the",
              "suite's options); arguments that start with '-' run the checks, as after 'run'"]
    return "\n".join(lines) + "\n"


# The suite's dependencies (pyproject.toml's [project] dependencies) and the module each provides:
# a Python without one is told so in a line, not by a traceback from deep inside pytest.
REQUIRES = {"pytest": "pytest", "pytest-timeout": "pytest_timeout", "pytest-json-report": "pytest_jsonreport",
            "nvidia-ml-py": "pynvml", "pyelftools": "elftools", "psutil": "psutil", "packaging": "packaging",
            "PyYAML": "yaml"}


def missing_requirements() -> list[str]:
    return [dist for dist, module in REQUIRES.items() if importlib.util.find_spec(module) is None]


def checks_dir() -> Path:
    """Where the checks are: ``spark_gotchas/checks`` installed, ``tests_gotchas/`` in a checkout."""
    spec = importlib.util.find_spec("spark_gotchas.checks")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return SUITE.parent / "tests_gotchas"  # an uninstalled checkout


def pytest_args(user_args: list[str]) -> list[str]:
    """The installed suite's configuration, then the checks, then the user's arguments: an option
    of the user's that takes a list or an optional value (``--json-report-omit log``, ``--cov``)
    ends the command and cannot swallow the checks. The rootdir is the checks' parent, so test ids
    read ``checks/test_g05_…`` installed and ``tests_gotchas/test_g05_…`` from a checkout, as
    ``pytest -m fast`` names them there.

    ``--assert=plain``: a run never writes into the suite's own install tree. pytest's assertion
    rewriting (the checks hold no ``assert``: a check reports a verdict) caches every module of a
    plugin's distribution it imports as ``__pycache__/*-pytest-*.pyc`` beside it; pip's uninstall
    knows nothing of those, and the ``spark_gotchas/`` of bare ``__pycache__`` folders it leaves
    shadows an editable install made next (a namespace package: ``cannot import name
    '__version__'``). A read-only install (a system image) runs the same."""
    checks = checks_dir()
    return ["-c", str(INI), "--rootdir", str(checks.parent), "-p", "no:cacheprovider", "--assert=plain", str(checks),
            *user_args]


def run_checks(user_args: list[str]) -> int:
    """pytest in this process, with the plugin registered before pytest parses the command line:
    its options are known from the start, so ``--spark-replay PATH`` with a space is an option's
    value, never a path pytest would collect or root the run in."""
    missing = missing_requirements()
    if missing:
        outward.say(f"{prog()}: {sys.executable} lacks the suite's dependencies {', '.join(missing)}: install the "
                    "suite into this environment (pip install -e . in a checkout, or pip install its wheel)", err=True)
        return 2
    from ..runtime import worker

    if needs_torch_early(user_args):
        worker.prestart(("torch",))  # torch imports while pytest and the plugins do
    try:
        import pytest

        from .. import plugin, startup

        stdout = sys.stdout = outward.Guarded(sys.stdout)  # pytest's own terminal writes there too
        try:
            code = int(pytest.main(pytest_args(user_args), plugins=[plugin, startup, ShortPaths()]))
        finally:
            sys.stdout = stdout.stream
        return outward.WRITE_FAILED if stdout.failed else code
    finally:
        worker.close_unadopted()


NO_WORKER = ("--spark-replay", "--help", "-h", "--collect-only", "--co", "--version", "-V", "--fixtures",
             "--markers", "--setup-plan")


def needs_torch_early(user_args: list[str]) -> bool:
    """Whether the run will want the GPU worker's torch: a live run of the checks where torch is
    installed (a replay runs nothing, and pytest's informational options run no check). A worker
    started for a run that ends up needing none is closed unused."""
    from ..runtime.headstart import enabled

    if not enabled("early_import") or any(a == flag or a.startswith(flag + "=") for a in user_args
                                          for flag in NO_WORKER):
        return False
    return importlib.util.find_spec("torch") is not None  # as readers.torch.torch_installed asks


class ShortPaths:
    """Test files named from the suite's folder in pytest's progress lines (``checks/test_g05_…``),
    as a checkout shows ``tests_gotchas/test_g05_…``, not as ``../../lib/python3.11/site-packages/…``."""

    def pytest_sessionstart(self, session) -> None:
        config = session.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and hasattr(reporter, "startpath"):
            reporter.startpath = config.rootpath


def main(argv: Optional[list[str]] = None) -> int:
    """The command's exit status, once its output is flushed (:func:`spark_gotchas.base.outward.finish`):
    a stdout that a pipe or a file holds back in its buffer is written here, where a closed pipe or
    a full disk is handled, not in the interpreter's flush at exit (``Exception ignored``, 120)."""
    outward.standard_streams()
    try:
        code = dispatch(argv)
    except SystemExit as exc:  # argparse's usage errors and --help, a write that failed
        if exc.code is not None and not isinstance(exc.code, int):
            outward.finish(1)
            raise
        code = exc.code or 0
    return outward.finish(code)


def dispatch(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        outward.say(*usage().splitlines(), err=not argv)
        return 0 if argv else 2
    if argv[0] == "--version":
        outward.say(f"spark-gotchas {__version__}")
        return 0
    gone = folder_gone()
    if gone:
        outward.say(f"{prog()}: {gone}", err=True)
        return NO_FOLDER
    if argv[0].startswith("-"):
        return run_checks(argv)
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        outward.say(f"{prog()}: unknown command {name!r} (commands: {', '.join(COMMANDS)}; checks: {prog()} -m fast)",
                    err=True)
        return 2
    module = COMMANDS[name][0]
    if module is None:
        return run_checks(rest)
    if name == "microbench":  # the leaf imports nothing of the suite: its lines get the suite's way out here
        from ..microbench import _cli

        _cli.LINE = outward.line
    return run_tool(name, module, rest)


NO_FOLDER = 2  # as a usage error: started where it cannot run


def folder_gone() -> str:
    """Why the current folder cannot be used (it was removed under the shell, or cannot be
    searched), or "": every path given is read against it, and pytest itself asks for it first
    (a traceback and exit 1 without this line)."""
    try:
        os.getcwd()
    except OSError as exc:
        return (f"the current folder cannot be used ({exc.strerror or exc}: removed while the shell was in it?): "
                "cd into a folder that exists and run again")
    return ""


INTERNAL_ERROR = 3  # as pytest's: never 1, which the tools keep for a finding ("worse", a FAIL)
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended


def run_tool(name: str, module: str, argv: list[str]) -> int:
    """A subcommand's ``main``; a crash in it is one line and exit 3, never a traceback whose exit
    status 1 a CI job would read as the tool's finding."""
    try:
        return int(importlib.import_module(module).main(argv) or 0)
    except KeyboardInterrupt:  # Ctrl-C: said in a line, the shell's status for it
        outward.say(f"{prog()} {name}: interrupted", err=True)
        return INTERRUPTED
    except Exception as exc:
        outward.say(f"{prog()} {name}: internal error (please report it): {type(exc).__name__}: {exc}", err=True)
        return INTERNAL_ERROR
