"""The commands the README shows exist: its set-up, its subcommands, its tox environments, its options and
the choices they take, the head start's parts."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from spark_gotchas.commands.cli import COMMANDS
from spark_gotchas.knowledge import profiles
from spark_gotchas.machine.options import declared
from spark_gotchas.runtime import headstart

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


def code_block_after(heading: str) -> list[str]:
    """The first indented code block under ``heading``, its lines without the indent or a comment."""
    section = README.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"((?:^ {4}.*\n)+)", section, re.MULTILINE).group(1)
    return [line[4:].split("  #", 1)[0].strip() for line in block.splitlines()]


def test_the_set_up_makes_a_venv_first_and_installs_the_checkout_it_stands_in():
    # a stock Debian Python refuses pip install outside a venv (PEP 668), and a checkout may have any name
    setup, run = code_block_after("## Set up and run")
    steps = [step.strip() for step in setup.split("&&")]
    assert steps == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install ."]
    assert run == "spark-gotchas -m fast"
    assert "pip install ./" not in README and "cd spark-gotchas" not in README


def test_the_suites_own_tests_install_the_test_extra_and_name_their_time():
    install, run = code_block_after("## The suite's own tests")
    assert (install, run) == ('pip install -e ".[test]"', "python -m pytest tests")
    assert re.search(r"python -m pytest tests +# .*\d+ to \d+ minutes on 2 cores", README)


def test_every_choice_the_options_table_shows_is_the_codes():
    shown = dict(re.findall(r"^\| `(--[a-z-]+) \{([^}]*)\}`", README, re.MULTILINE))
    assert shown["--spark-profile"].split(",") == list(profiles.CHOICES)
    choices = {f.metadata["flag"]: list(f.metadata["choices"]) for f in declared() if f.metadata["choices"]}
    assert {flag: text.split(",") for flag, text in shown.items()} == choices


def test_the_head_start_parts_the_readme_lists_are_the_codes():
    row = next(line for line in README.splitlines() if line.startswith("| `SPARK_GOTCHAS_HEADSTART`"))
    listed = re.findall(r"`([a-z0-9_]+)`", row.split("(`none`: all)", 1)[1].split("(", 1)[0])
    assert listed == list(headstart.PARTS)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_the_readme_gives_leads_to_a_page_and_a_heading_there():
    for target in re.findall(r"\]\(([^)\s]+)\)", README):
        if target.startswith(("http://", "https://")):
            continue
        path, _, fragment = target.partition("#")
        page = ROOT / path if path else ROOT / "README.md"
        assert page.exists(), f"the README links to {path}, which does not exist"
        if fragment:
            headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
            assert fragment in {anchor(h) for h in headings}, f"no heading of {page.name} has the anchor #{fragment}"
