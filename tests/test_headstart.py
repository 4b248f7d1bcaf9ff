"""The head start (spark_gotchas/runtime/headstart.py): its parts, asked for by name, each one off by
SPARK_GOTCHAS_HEADSTART, best effort, and reported."""

import ctypes.util
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_gotchas.runtime import headstart
from spark_gotchas.runtime.headstart import HeadStart
from spark_gotchas.runtime.worker import Worker

HERE = Path(__file__).parent
ROOT = HERE.parent


def child_env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]))


def test_without_a_driver_the_cuda_context_says_why(monkeypatch):
    def no_driver(name):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(headstart.ctypes, "CDLL", no_driver)
    assert headstart.cuda_context().startswith("not available: libcuda.so.1: cannot open shared object file")


@pytest.mark.skipif(ctypes.util.find_library("cuda") is None, reason="needs the CUDA driver (a GPU machine)")
def test_with_a_driver_the_cuda_context_takes_seconds():
    assert isinstance(headstart.cuda_context(), float)


@pytest.mark.parametrize("value, off", [(None, ()), ("", ()), ("none", headstart.PARTS),
                                        ("-g5_probe, -cuda_context", ("g5_probe", "cuda_context"))])
def test_the_environment_turns_parts_off(value, off):
    environ = {} if value is None else {headstart.ENV: value}
    assert tuple(p for p in headstart.PARTS if not headstart.enabled(p, environ)) == tuple(
        p for p in headstart.PARTS if p in off)


def test_only_the_gpu_checks_collected_start_their_readings():
    assert headstart.early_readings({4}) == ["thermal.spot_check"]
    assert headstart.early_readings({5, 7}) == ["bench.bandwidth", "env.fp4_kernels", "bench.gemm"]
    assert headstart.early_readings({1, 9}) == []


def test_asked_for_a_part_the_report_says_running_until_the_answer():
    worker = Worker(preload=(), env=child_env())
    try:
        worker.start()
        assert worker.head_start("no_such_part")
        assert worker.timeline.to_json(0.0)["warmups"] == {"no_such_part": {"result": "running"}}
    finally:
        worker.close()


def test_a_part_runs_while_the_worker_still_imports_and_reaches_the_timeline():
    worker = Worker(preload=("worker_slow_import",), env=child_env())  # an import of 1 s
    try:
        worker.start()
        started = time.monotonic()
        assert worker.head_start("no_such_part")
        result = worker.call("worker_tasks:echo")
        assert result.ok and time.monotonic() - started >= 0.9
        timeline = worker.timeline.to_json(worker.timeline.starts[0])
    finally:
        worker.close()
    entry = timeline["warmups"]["no_such_part"]
    assert entry["result"] == "no such head start"
    assert entry["start_s"] < timeline["worker_ready_s"][0] - 0.5  # during the import, not after it
    assert not worker.head_start("no_such_part")  # no child: nothing to ask


def test_a_crash_names_the_part_that_was_running_beside_it_and_only_once():
    worker = Worker(preload=("worker_slow_headstart",), env=child_env())
    try:
        assert worker.call("worker_tasks:echo").ok  # imported: the slow part is registered
        assert worker.head_start("slow")
        crashed = worker.call("worker_tasks:segfault")
        again = worker.call("worker_tasks:segfault")  # a fresh child, with no part asked of it
    finally:
        worker.close()
    assert crashed.crashed and crashed.beside == ("slow",)
    assert crashed.problem.startswith("child process killed by SIGSEGV")
    assert crashed.problem.endswith("(the head start's slow was running beside it; "
                                    "SPARK_GOTCHAS_HEADSTART=-slow runs without)")
    assert again.crashed and again.beside == () and "head start" not in again.problem
    assert worker.timeline.to_json(0.0)["warmups"]["slow"]["result"].startswith("cut short")


class FakeWorker:
    def __init__(self, preload=("torch",)):
        self.preload = preload
        self.asked: list[str] = []
        self.submitted: list[str] = []

    def start(self):
        pass

    def head_start(self, name):
        self.asked.append(name)
        return True

    def submit(self, task, args=None, start=True):
        self.submitted.append(task)
        return True


class FakeProvider:
    def __init__(self):
        self.prefetched: list[str] = []
        self.ctx = SimpleNamespace(torch_free_worker=lambda part: None)  # no load worker

    def prefetch(self, key):
        self.prefetched.append(key)

    def try_read(self, key):
        return None


def test_begin_asks_the_cuda_context_once_and_starts_each_planned_reading_once(monkeypatch):
    monkeypatch.delenv(headstart.ENV, raising=False)
    worker, provider = FakeWorker(), FakeProvider()
    start = HeadStart(provider, lambda: worker)
    start.plan({4, 5, 7})
    start.begin()
    start.begin()
    assert worker.asked == ["cuda_context"]
    # no inventory: G5's probe and G7's rates cannot run without torch, so they wait for their checks
    assert provider.prefetched == ["thermal.spot_check", "env.fp4_kernels"]
    assert worker.submitted == []


def test_each_part_turned_off_starts_nothing_of_its_own(monkeypatch):
    monkeypatch.setenv(headstart.ENV, "-cuda_context,-g5_probe")
    worker, provider = FakeWorker(), FakeProvider()
    start = HeadStart(provider, lambda: worker)
    start.plan({5})
    start.begin()
    assert worker.asked == [] and worker.submitted == []


def test_without_torch_there_is_no_cuda_context_to_ask_for(monkeypatch):
    monkeypatch.delenv(headstart.ENV, raising=False)
    worker = FakeWorker(preload=())
    HeadStart(FakeProvider(), lambda: worker).begin()
    assert worker.asked == []

