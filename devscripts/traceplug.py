"""Print when pytest reaches each stage of a run, in seconds after $T0 (devscripts: -p traceplug)."""
import atexit
import os
import sys
import time

import pytest

T0 = float(os.environ.get("T0", time.time()))
def mark(what):
    print(f"[trace] {time.time()-T0:6.2f} {what}", file=sys.__stderr__, flush=True)
mark("traceplug imported")
atexit.register(mark, "atexit")
def _around(name):
    mark(name + " begin")
    try:
        yield
    finally:
        mark(name + " end")
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config): mark("configure begin")
@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session): mark("configure done; sessionstart")
@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session): yield from _around("collection")
@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session): yield from _around("runtestloop")
@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus): yield from _around("sessionfinish")
@pytest.hookimpl(hookwrapper=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config): yield from _around("terminal_summary")
@pytest.hookimpl(hookwrapper=True)
def pytest_unconfigure(config): yield from _around("unconfigure")
