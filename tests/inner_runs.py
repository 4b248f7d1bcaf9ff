"""The suite's own checks run in-process under the real plugin (pytester), as a user runs them:
only the plugins under test load, and the worker is one without torch."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def inner_runs(monkeypatch):
    """In-process runs load only the plugins under test and a worker without torch."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: False)


def run_checks(pytester, checks: tuple[str, ...], *args: str, plugins: tuple = ()):
    """Run the ``tests_gotchas`` files ``checks`` with ``args``; ``plugins`` beside the suite's."""
    import pytest_timeout

    import spark_gotchas.plugin

    for name in checks:
        pytester.makepyfile(**{name[:-3] + "_here": (ROOT / "tests_gotchas" / name).read_text()})  # unique module name
    return pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[spark_gotchas.plugin, pytest_timeout, *plugins])
