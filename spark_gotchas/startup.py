"""What the suite settles as pytest starts, before any check is configured (a ``pytest11`` plugin).

**An option's value taken for a path.** pytest chooses its rootdir and ini file from the words of
the command line that look like paths *before* any plugin's options are known: the ``pytest11``
entry points load after that choice, because the ini file may turn plugins off. So in
``pytest -m fast --spark-replay ~/runs/x.json`` or ``--json-report-file /tmp/r.json`` (a space
before a path that exists, as a report of the last run does) the value looks like a path to
collect: pytest roots the run in ``~/runs`` or ``/tmp``, finds no ini file there and drops the
suite's configuration (``addopts``, ``testpaths``), collects the wrong tests, writes a
``.pytest_cache`` beside the file and names the checks ``../../…/tests_gotchas/…``. Once every
plugin is registered, pytest's own parser knows which words are an option's value: when one of
them, given after a space to an option pytest does not define itself (the suite's, or any
plugin's: ``--json-report-file``, ``--cov-config``, ``--metadata-from-json-file``...), names an
existing path, the run starts again at once, in this process and before anything was configured,
with those options written ``--flag=VALUE`` (in ``PYTEST_ADDOPTS`` too), which pytest never takes
for a path. pytest's own options (``--junitxml``, ``--basetemp``, ``--log-file``, ``-c``...)
are known from the start and never mislead. (``spark-gotchas`` gives pytest its ini file and
rootdir, so no value can move them.)

**pytest-xdist's ``-n``** (say from a ``PYTEST_ADDOPTS`` meant for other projects) would split the
checks over worker processes, each with a GPU worker of its own and none printing the G-lines:
the checks run in one process instead, and a line on stderr says so.
"""

from __future__ import annotations

import argparse
import os
import shlex
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import pytest

from .base import outward

PLUGIN = "spark_gotchas.plugin"


def option_actions(config: pytest.Config) -> dict[str, argparse.Action]:
    """Every option string pytest's parser knows by now (``--json-report-file``, ``-c``), with how
    many words it takes."""
    parser = config._parser
    optparser = getattr(parser, "optparser", None) or parser._getparser()  # pytest 9, pytest 8
    return dict(optparser._option_string_actions)


def pytests_own_options(args: list[str]) -> set[str]:
    """The option strings pytest knows before it chooses its rootdir: those of its built-in plugins
    (less any turned off with ``-p no:NAME``), not those of the plugins loaded after."""
    from _pytest.config import get_config

    return set(option_actions(get_config(args)))


def values_given_apart(words: list[str], actions: dict[str, argparse.Action]) -> list[int]:
    """Where an option's one value follows it as a word of its own (``--flag VALUE``), read as
    pytest's full parser reads them: an option that takes no value leaves the next word a path,
    ``--flag=VALUE`` and a value starting with ``-`` are never taken for one."""
    found, i = [], 0
    while i < len(words) - 1:
        word, i = words[i], i + 1
        if word == "--":
            break
        action = actions.get(word)
        if action is not None and action.nargs in (None, "?", 1) and not words[i].startswith("-"):
            found.append(i)
            i += 1
    return found


def names_a_path(word: str) -> bool:
    """As pytest's first look decides (a node id's file, ``safe_exists``)."""
    try:
        return Path(word.split("::")[0]).exists()
    except (OSError, ValueError):
        return False


def taken_for_paths(words: list[str], actions: dict[str, argparse.Action], own: set[str]) -> list[int]:
    """The values of ``values_given_apart`` that pytest's first look took for paths."""
    return [i for i in values_given_apart(words, actions) if words[i - 1] not in own and names_a_path(words[i])]


def joined(words: list[str], where: list[int]) -> list[str]:
    """``--flag VALUE`` written ``--flag=VALUE`` at each value's index (``-n=auto`` for a short one)."""
    out = list(words)
    for i in sorted(where, reverse=True):
        out[i - 1: i + 1] = [f"{words[i - 1]}={words[i]}"]
    return out


@contextmanager
def environ(name: str, value: Optional[str]):
    """``os.environ[name]`` set to ``value`` (unchanged for None), as it was afterwards."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    """Run again with every option's value joined to it when pytest rooted the run in the folder
    of such a value (see the module docstring); None lets the run go on."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    if plugin is None or plugin in (config.invocation_params.plugins or ()):
        return None  # the suite is turned off, or this is the run started again (or spark-gotchas)
    if getattr(config.option, "inifilename", None):
        return None  # -c FILE: the ini file and rootdir do not come from the paths
    args = [str(a) for a in config.invocation_params.args]
    try:
        addopts = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:
        addopts = []
    try:  # pytest's parser internals: should they move, the run goes on as pytest chose
        actions = option_actions(config)
        if not any(names_a_path(w[i]) for w in (args, addopts) for i in values_given_apart(w, actions)):
            return None  # the common case: no second look at pytest's own options needed
        own = pytests_own_options(args)
    except Exception:  # noqa: BLE001
        return None
    in_args, in_addopts = taken_for_paths(args, actions, own), taken_for_paths(addopts, actions, own)
    if not in_args and not in_addopts:
        return None
    with environ("PYTEST_ADDOPTS", shlex.join(joined(addopts, in_addopts)) if in_addopts else None):
        return pytest.main(joined(args, in_args), plugins=[*(config.invocation_params.plugins or ()), plugin])


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
    outward.say(f"spark-gotchas: {what} ignored: the checks run in one process "
                "(one GPU worker, their own order, one G-line summary)", err=True)
    option.dist, option.tx, option.numprocesses = "no", [], 0
