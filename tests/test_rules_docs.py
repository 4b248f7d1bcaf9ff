"""Each gotcha's rules are written once, in its judge's docstring; docs/checks/gNN.md shows them
word for word (devscripts/rules_docs.py --write puts them there)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("rules_docs", ROOT / "devscripts" / "rules_docs.py")
rules_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rules_docs)


@pytest.mark.parametrize("gotcha", range(1, 11))
def test_the_page_shows_the_judges_rules(gotcha):
    page, shown = rules_docs.page_rules(gotcha)
    assert shown is not None, f"{page.name} has no rules block"
    assert shown == rules_docs.judge_rules(gotcha), (
        f"{page.name} and its judge's docstring differ: edit the docstring, then python devscripts/rules_docs.py --write")


def test_every_rule_block_has_rules():
    for gotcha in range(1, 11):
        assert rules_docs.judge_rules(gotcha).count("\n- ") >= 2
