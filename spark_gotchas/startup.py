"""What the suite settles as pytest starts, before any check is configured (a ``pytest11`` plugin).

**An option's value taken for a path.** pytest chooses its rootdir and ini file from the words of
the command line that look like paths *before* any plugin's options are known: the ``pytest11``
entry points load after that choice, because the ini file may turn plugins off. So in
``pytest -m fast --spark-replay ~/runs/x.json`` (a space before the path) the snapshot looks like a
path to collect: pytest roots the run in ``~/runs``, finds no ini file there and drops the
suite's configuration (``addopts``, ``testpaths``), writes a ``.pytest_cache`` beside the snapshot
and names the checks ``../../…/tests_gotchas/…``. When the command line holds such a value, the
run starts again at once, in this process and before anything was configured, with the suite's
plugin registered before pytest parses a word: then the path is known as the option's value.
(``spark-gotchas`` always registers it that way, and ``--spark-replay=PATH`` never misleads.)

**pytest-xdist's ``-n``** (say from a ``PYTEST_ADDOPTS`` meant for other projects) would split the
checks over worker processes, each with a GPU worker of its own and none printing the G-lines:
the checks run in one process instead, and a line on stderr says so.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from .options import declared, kind

PLUGIN = "spark_gotchas.plugin"


def value_flags() -> set[str]:
    """The suite's flags that take a value (``--spark-replay PATH``, not ``--spark-strict``)."""
    return {f.metadata["flag"] for f in declared() if kind(f) is not bool}


def values_taken_for_paths(args: list[str]) -> list[str]:
    """Values given to the suite's options with a space that pytest's first look took for paths
    (it roots the run in the folder of any that exists)."""
    flags = value_flags()
    taken = []
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--":
            break
        if flag in flags and not value.startswith("-") and Path(value.split("::")[0]).exists():
            taken.append(value)
    return taken


def invocation_words(config: pytest.Config) -> list[str]:
    """The words pytest chose its rootdir from: ``PYTEST_ADDOPTS``, then the command line."""
    try:
        addopts = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:
        addopts = []
    return addopts + [str(a) for a in config.invocation_params.args]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    """Run again with the suite's options known from the start when pytest rooted the run in the
    folder of an option's value (see the module docstring); None lets the run go on."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    if plugin is None or plugin in (config.invocation_params.plugins or ()):
        return None  # the suite is turned off, or was registered before parsing (no wrong guess)
    if getattr(config.option, "inifilename", None):
        return None  # -c FILE: the ini file and rootdir do not come from the paths
    if not values_taken_for_paths(invocation_words(config)):
        return None
    return pytest.main(list(config.invocation_params.args), plugins=[*(config.invocation_params.plugins or ()), plugin])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist's ``-n``: keep a run of the checks in this process. xdist's own
    ``pytest_cmdline_main`` has turned ``-n N`` into ``dist``/``tx`` by now, and its
    ``pytest_configure``, which starts the workers, runs after this one."""
    option = config.option
    if getattr(option, "dist", "no") == "no" and not getattr(option, "tx", None):
        return
    from .plugin import aims_at_checks

    if not aims_at_checks(config):
        return
    what = f"-n {option.numprocesses}" if getattr(option, "numprocesses", None) else f"--dist {option.dist}"
    sys.stderr.write(f"spark-gotchas: {what} ignored: the checks run in one process "
                     "(one GPU worker, their own order, one G-line summary)\n")
    option.dist, option.tx, option.numprocesses = "no", [], 0
