"""The commands the README shows exist: its subcommands, its tox environments, its options."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from spark_gotchas.commands.cli import COMMANDS
from spark_gotchas.machine.options import declared

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_subcommand_the_readme_shows_is_one():
    shown = set(re.findall(r"(?:^ {4}|`)(?:spark-gotchas|python -m spark_gotchas) ([a-z][\w-]*)", README, re.MULTILINE))
    assert {"diff", "check-report", "microbench"} <= shown
    assert shown <= set(COMMANDS), f"the README shows subcommands that do not exist: {sorted(shown - set(COMMANDS))}"


def test_every_tox_environment_the_readme_shows_is_one():
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    envs = {section.split(":", 1)[1] for section in ini.sections() if section.startswith("testenv:")}
    shown = set(re.findall(r"tox -e (\w+)", README))
    assert shown == {"tests", "lint", "preflight"} and shown <= envs


def test_every_option_the_readme_names_is_declared():
    flags = {f.metadata["flag"] for f in declared()}
    shown = set(re.findall(r"--(?:spark|soak)-[a-z-]+[a-z]", README))
    assert shown <= flags, f"the README names options that do not exist: {sorted(shown - flags)}"
