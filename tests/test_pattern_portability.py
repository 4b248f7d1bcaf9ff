"""The suite's regular expressions mean the same on every Python it runs on.

Python's ``re`` before 3.11.5 mis-matches a possessive repeat of a group (``(?:a|b)*+``; cpython#106052,
#100061): on Debian 12's Python 3.11.2 the masker's ``--api-key VALUE`` pattern matched nothing and the
value was shown in clear. A repeat of a group is written as an atomic group instead, ``(?>(?:a|b)*)``,
which every Python 3.11 reads right; a possessive repeat of one character or class (``[a-z]*+``) is safe.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import spark_gotchas
from spark_gotchas.base import scrub

# ")" closing a group (not an escaped one), then a repeat made possessive
GROUP_POSSESSIVE = re.compile(r"(?<!\\)\)(?:[*+?]|\{\d*(?:,\d*)?\})\+")


def patterns() -> dict[str, str]:
    """Every compiled pattern a module of the suite holds, and the token shapes the masker builds."""
    out = {"spark_gotchas.base.scrub.token_shapes()": scrub.token_shapes().pattern}
    for info in pkgutil.walk_packages(spark_gotchas.__path__, "spark_gotchas."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                out[f"{info.name}.{name}"] = value.pattern
    return out


def test_no_pattern_repeats_a_group_possessively():
    found = patterns()
    assert "spark_gotchas.base.scrub._FLAG_VALUE" in found and len(found) > 20
    bad = {name: GROUP_POSSESSIVE.search(p).group(0) for name, p in found.items() if GROUP_POSSESSIVE.search(p)}
    assert bad == {}, f"possessive repeats of a group, mis-matched before Python 3.11.5 (write (?>(?:...)*)): {bad}"


def test_the_check_finds_what_it_is_for():
    assert GROUP_POSSESSIVE.search(r"(?:a|b)*+") and GROUP_POSSESSIVE.search(r"x(?:\s|\\u00a0)++")
    assert GROUP_POSSESSIVE.search(r"(?:ab){2,}+")
    assert not GROUP_POSSESSIVE.search(r"[a-z)]*+\)++(?>(?:a|b)*)")


def test_a_flag_value_is_masked_whatever_it_starts_with():
    assert scrub.mask_text("--hf-token -v") == "--hf-token ***"
    assert scrub.mask_text("--api-key\u00a0Hunter2Pw") == "--api-key\u00a0***"
