"""The suite's own tests: judges on recorded readings, readers on fixture files, the plugin via pytester."""

import importlib.util

import pytest

pytest_plugins = ["pytester"]

# numpy cannot be imported twice in one process, and pytester removes the modules an in-process run
# imported: where an installed plugin first imports numpy inside such a run, the next run and every
# later numpy (or torch) import would fail. Imported here first, it stays.
if importlib.util.find_spec("numpy") is not None:
    import numpy  # noqa: F401

# hypothesis draws the same examples on every machine and every run (derandomized: from each test's
# own code), with no example database: a machine's .hypothesis folder would replay what it once
# found there and nowhere else, so a property would pass on one box and fail on another. A test's
# own settings (tests/test_fuzz.py) say the same; SPARK_GOTCHAS_FUZZ_RANDOM=1 draws new examples.
if importlib.util.find_spec("hypothesis") is not None:
    import os

    from hypothesis import settings

    settings.register_profile("spark-gotchas", derandomize=True, database=None, print_blob=True)
    settings.register_profile("spark-gotchas-random", database=None, print_blob=True)
    settings.load_profile("spark-gotchas-random" if os.environ.get("SPARK_GOTCHAS_FUZZ_RANDOM") else "spark-gotchas")


def pytest_configure(config):
    config.addinivalue_line("markers", "live_machine: the test is about this machine's own process table, which it "
                                       "then reads as it is (every other test sees only its run's own processes)")


@pytest.fixture(autouse=True)
def only_this_runs_processes(request, monkeypatch):
    """Tests read fakes, not the live machine: psutil lists only this run's own processes
    (tests/own_processes.py), so no check's line depends on what else the box runs."""
    if request.node.get_closest_marker("live_machine") is not None or importlib.util.find_spec("psutil") is None:
        return
    import psutil
    from own_processes import own_only

    monkeypatch.setattr(psutil, "process_iter", own_only(psutil.process_iter))


@pytest.fixture(autouse=True)
def own_state_folder(tmp_path_factory, monkeypatch):
    """Every test has its own state folder (``$SPARK_GOTCHAS_STATE_DIR``): the heartbeats a developer's
    own watches left in ~/.local/state never reach a check's line."""
    monkeypatch.setenv("SPARK_GOTCHAS_STATE_DIR", str(tmp_path_factory.mktemp("state")))
