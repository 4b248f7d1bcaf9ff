"""The checks run in their own order, whatever a plugin that reorders tests does (pytest-randomly
shuffles them): the head start is planned for that order, and which of a gotcha's lines heads its
G-line follows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from inner_runs import inner_runs, run_checks  # noqa: F401  inner_runs: a fixture

from spark_gotchas.machine.readers import load_all

H200 = Path(__file__).parent / "fixtures" / "h200" / "preflight-snapshot.json"
CHECKS = ("test_g01_cuda_abi.py", "test_g04_thermal.py", "test_g06_contention.py", "test_g09_container.py")
load_all()  # every reader imported before the in-process runs, which drop what they import


class Reverse:
    """Reverses the collected tests before the suite's plugin sees them, as a shuffle may."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items):
        items.reverse()


def ran(result) -> list[str]:
    return [line.split(" ")[0] for line in result.outlines if "_here.py::test_" in line and " " in line]


def test_a_plugin_that_shuffles_tests_leaves_the_checks_and_their_lines_as_they_were(pytester):
    plain = run_checks(pytester, CHECKS, "-m", "fast", "-v", "--spark-replay", str(H200))
    shuffled = run_checks(pytester, CHECKS, "-m", "fast", "-v", "--spark-replay", str(H200), plugins=(Reverse(),))
    assert len(ran(plain)) >= 8 and ran(shuffled) == ran(plain)
    lines = [line for line in plain.outlines if line[:1] == "G" and ": " in line]
    assert lines and [line for line in shuffled.outlines if line[:1] == "G" and ": " in line] == lines


def test_other_tests_keep_the_order_they_were_given(pytester):
    """Only the checks are put back: a user's own tests in the same run stay as the plugin left them."""
    pytester.makepyfile(test_zz_own="def test_a(): pass\ndef test_b(): pass\n")
    result = run_checks(pytester, ("test_g09_container.py",), "-v", "--spark-replay", str(H200), plugins=(Reverse(),))
    own = [line.split(" ")[0] for line in result.outlines if line.startswith("test_zz_own.py::")]
    assert own == ["test_zz_own.py::test_b", "test_zz_own.py::test_a"]
    assert any(line.startswith("G9 ") for line in result.outlines)
