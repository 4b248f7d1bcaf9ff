"""Skip marks for tests that exercise real torch or matplotlib code (a CPU torch is enough).

The suite never depends on torch; its own tests run without it too, and say what they skipped.
"""

import importlib.util

import pytest


def _missing(name: str) -> bool:
    return importlib.util.find_spec(name) is None


requires_torch = pytest.mark.skipif(_missing("torch"), reason="needs torch (a CPU build is enough)")
requires_matplotlib = pytest.mark.skipif(_missing("matplotlib"), reason="needs matplotlib (the plot extra)")
