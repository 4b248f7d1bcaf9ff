"""The worker's warm-ups beside the torch import: asked for by name, best effort, and reported."""

import ctypes.util
import os
import time
from pathlib import Path

import pytest

from spark_gotchas import warmup
from spark_gotchas.session import SessionState
from spark_gotchas.worker import Worker

HERE = Path(__file__).parent
ROOT = HERE.parent


def test_without_a_driver_the_cuda_context_says_why(monkeypatch):
    def no_driver(name):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(warmup.ctypes, "CDLL", no_driver)
    assert warmup.cuda_context().startswith("not available: libcuda.so.1: cannot open shared object file")


@pytest.mark.skipif(ctypes.util.find_library("cuda") is None, reason="needs the CUDA driver (a GPU machine)")
def test_with_a_driver_the_cuda_context_takes_seconds():
    assert isinstance(warmup.cuda_context(), float)


def test_asked_for_a_warm_up_the_report_says_running_until_the_answer():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    worker = Worker(preload=(), env=env)
    try:
        worker.start()
        assert worker.warm_up("no_such_warm_up")
        assert worker.timeline.to_json(0.0)["warmups"] == {"no_such_warm_up": {"result": "running"}}
    finally:
        worker.close()


@pytest.mark.parametrize("value, names", [(None, warmup.DEFAULT), ("none", ()), ("", ()),
                                          ("cuda_context, other", ("cuda_context", "other"))])
def test_the_environment_chooses_the_warm_ups(value, names):
    assert warmup.chosen({} if value is None else {warmup.ENV: value}) == names


def test_a_warm_up_runs_while_the_worker_still_imports_and_reaches_the_timeline():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    worker = Worker(preload=("worker_slow_import",), env=env)  # an import of 1 s
    try:
        worker.start()
        started = time.monotonic()
        assert worker.warm_up("no_such_warm_up")
        result = worker.call("worker_tasks:echo")
        assert result.ok and time.monotonic() - started >= 0.9
        timeline = worker.timeline.to_json(worker.timeline.starts[0])
    finally:
        worker.close()
    entry = timeline["warmups"]["no_such_warm_up"]
    assert entry["result"] == "no such warm-up"
    assert entry["start_s"] < timeline["worker_ready_s"][0] - 0.5  # during the import, not after it
    assert not worker.warm_up("no_such_warm_up")  # no child: nothing to ask


def test_a_crash_names_the_warm_up_that_was_running_beside_it_and_only_once():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    worker = Worker(preload=("worker_slow_warmup",), env=env)
    try:
        assert worker.call("worker_tasks:echo").ok  # imported: the slow warm-up is registered
        assert worker.warm_up("slow")
        crashed = worker.call("worker_tasks:segfault")
        again = worker.call("worker_tasks:segfault")  # a fresh child, with no warm-up asked of it
    finally:
        worker.close()
    assert crashed.crashed and crashed.beside == ("slow",)
    assert crashed.problem.startswith("child process killed by SIGSEGV")
    assert crashed.problem.endswith("(the warm-up slow was running beside it; SPARK_GOTCHAS_WARMUPS=none runs without)")
    assert again.crashed and again.beside == () and "warm-up" not in again.problem
    assert worker.timeline.to_json(0.0)["warmups"]["slow"]["result"].startswith("cut short")


class FakeWorker:
    def __init__(self, preload):
        self.preload = preload
        self.asked: list[str] = []

    def start(self):
        pass

    def warm_up(self, name):
        self.asked.append(name)
        return True


def test_the_cuda_context_is_asked_for_once(monkeypatch):
    monkeypatch.delenv(warmup.ENV, raising=False)
    state = SessionState(config=None, options=None)
    state._worker = FakeWorker(("torch",))
    state.warm_up()
    state.warm_up()
    assert state._worker.asked == ["cuda_context"]


def test_without_torch_there_is_nothing_to_warm_up(monkeypatch):
    monkeypatch.delenv(warmup.ENV, raising=False)
    state = SessionState(config=None, options=None)
    state._worker = FakeWorker(())
    state.warm_up()
    assert state._worker.asked == []
