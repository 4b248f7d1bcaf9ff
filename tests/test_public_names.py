"""The names users and tools type stay as they are, wherever the modules behind them live: the pytest11
entry points (``-p no:spark_gotchas.plugin``), ``python -m spark_gotchas``, the ``spark-gotchas``
command, ``spark_gotchas.microbench`` and ``from spark_gotchas.fixes import force_sdpa``."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_pytest11_entry_points_keep_their_names_and_load_as_the_checkout_registers_them():
    points = PROJECT["entry-points"]["pytest11"]
    assert points == {"spark_gotchas.plugin": "spark_gotchas.plugin", "spark_gotchas.startup": "spark_gotchas.startup"}
    conftest = (ROOT / "conftest.py").read_text()
    assert 'pytest_plugins = ["spark_gotchas.plugin", "spark_gotchas.startup"]' in conftest  # the same names: never twice
    for module in points.values():
        assert any(name.startswith("pytest_") for name in dir(importlib.import_module(module)))


def test_the_command_and_python_m_are_one_command():
    assert PROJECT["scripts"] == {"spark-gotchas": "spark_gotchas.commands.cli:main"}
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "spark-gotchas" in run.stdout
    for sub in ("diff", "fleet", "check-report", "node-health", "watch", "microbench", "soak-record"):
        assert sub in run.stdout, sub


def test_the_shipped_packages_and_the_users_fixes_import_by_their_names():
    assert callable(importlib.import_module("spark_gotchas.fixes").force_sdpa)
    assert importlib.import_module("spark_gotchas.microbench.bandwidth").__name__ == "spark_gotchas.microbench.bandwidth"
    assert importlib.import_module("spark_gotchas").__version__


def test_a_profile_is_named_in_lines_by_its_short_name_or_title_never_its_key():
    """A new profile added without a short name says its title ("NVIDIA RTX PRO 6000's range"), not
    "RTXPRO6000's range"; the profiles with a GPU of their own each carry one."""
    from dataclasses import replace

    from spark_gotchas.knowledge import profiles

    for profile in profiles.PROFILES.values():
        if profile.key not in ("generic", "none"):
            assert profile.short and profile.short in profile.title, profile.key
    new = replace(profiles.H100, key="rtxpro6000", title="NVIDIA RTX PRO 6000 Blackwell", short="")
    assert new.name == "NVIDIA RTX PRO 6000 Blackwell"
