"""The GPU worker: a crash, a hang or an exception in a task is a result, never a dead pytest."""

import os
import threading
import time
from pathlib import Path

import pytest

from spark_gotchas.runtime.worker import TaskResult, Worker

HERE = Path(__file__).parent
ROOT = HERE.parent


@pytest.fixture
def worker():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    w = Worker(preload=(), env=env)  # no torch import: these tests are about the process plumbing
    yield w
    w.close()


def test_a_task_returns_its_json_value(worker):
    result = worker.call("worker_tasks:echo", {"size_mb": 512})
    assert result.ok and result.problem == ""
    assert result.value["args"] == {"size_mb": 512}
    assert result.value["pid"] != os.getpid()


def test_an_exception_is_an_error_and_the_worker_lives_on(worker):
    first = worker.call("worker_tasks:echo")
    result = worker.call("worker_tasks:boom")
    assert not result.ok and not result.crashed and not result.timed_out
    assert result.problem == "ValueError: boom"
    assert worker.call("worker_tasks:echo").value["pid"] == first.value["pid"]
    assert worker.starts == 1


def test_a_segfault_names_the_signal_and_the_next_call_gets_a_fresh_worker(worker):
    first = worker.call("worker_tasks:echo").value["pid"]
    result = worker.call("worker_tasks:segfault", timeout=20)
    assert not result.ok and result.crashed and result.signal == "SIGSEGV"
    assert result.problem.startswith("child process killed by SIGSEGV")
    assert not worker.alive
    again = worker.call("worker_tasks:echo")
    assert again.ok and again.value["pid"] != first and worker.starts == 2


def test_an_abort_carries_the_last_stderr_line(worker):
    result = worker.call("worker_tasks:abort_with_message", timeout=20)
    assert result.signal == "SIGABRT"
    assert result.problem == ("child process killed by SIGABRT: "
                              "CUDA error: an illegal memory access was encountered")


def test_an_exit_without_a_signal(worker):
    result = worker.call("worker_tasks:exit_quietly", timeout=20)
    assert result.crashed and result.signal == "" and result.error == "worker exited with code 3"
    assert result.problem.startswith("child process exited")


def test_a_hang_is_killed_at_the_timeout(worker):
    t0 = time.monotonic()
    result = worker.call("worker_tasks:hang", timeout=1.0)
    assert time.monotonic() - t0 < 8
    assert result.timed_out and not result.ok
    assert result.problem == "timed out after 1 s (killed)"
    assert not worker.alive
    assert worker.call("worker_tasks:echo").ok


@pytest.mark.parametrize("task", ["worker_tasks:count", "worker_tasks:count_by_parameter"])
def test_progress_messages_arrive_in_order(worker, task):
    """From worker_main.progress, or from the ``progress`` parameter the worker fills in."""
    seen = []
    result = worker.call(task, {"n": 3}, on_progress=seen.append)
    assert result.ok and result.value == 3
    assert seen == result.progress == [{"step": 0}, {"step": 1}, {"step": 2}]


@pytest.mark.parametrize("task", ["worker_tasks:until_stopped", "worker_tasks:until_asked"])
def test_interrupt_lets_a_long_task_stop_and_still_return(worker, task):
    worker.start()
    worker.call("worker_tasks:echo")  # the child is up and serving
    timer = threading.Timer(0.3, worker.interrupt)
    timer.start()
    try:
        result = worker.call(task, timeout=30)
    finally:
        timer.cancel()
    assert result.ok and result.value["stopped"] and result.value["steps"] < 1000


def test_a_dataclass_result_arrives_as_its_fields(worker):
    result = worker.call("worker_tasks:figures")
    assert result.ok and result.value == {"device": "cpu stand-in", "capability": [12, 1], "rates": [1.5, 2.0]}


def test_a_task_that_takes_any_keyword_gets_only_its_arguments(worker):
    assert worker.call("worker_tasks:echo", {"n": 1}).value["args"] == {"n": 1}


def test_unknown_task_is_an_error_not_a_crash(worker):
    result = worker.call("no_such_module_here:task")
    assert not result.ok and not result.crashed
    assert result.problem.startswith("ModuleNotFoundError")


def test_close_ends_the_child(worker):
    worker.start()
    assert worker.alive
    worker.close()
    assert not worker.alive
    worker.close()  # twice is fine


def test_problem_texts():
    assert TaskResult(ok=True).problem == ""
    assert TaskResult(ok=False, timed_out=True, seconds=60.2).problem == "timed out after 60 s (killed)"
    assert TaskResult(ok=False, crashed=True, signal="SIGBUS").problem == "child process killed by SIGBUS"


def test_the_timeline_records_starts_imports_and_every_task(worker):
    origin = time.time()
    worker.call("worker_tasks:echo")
    worker.call("worker_tasks:boom")
    worker.call("worker_tasks:segfault", timeout=20)
    worker.call("worker_tasks:echo")
    timeline = worker.timeline.to_json(origin)
    assert len(timeline["worker_starts_s"]) == 2  # the segfault's successor is a fresh worker
    assert len(timeline["worker_ready_s"]) == 2 and timeline["preload_s"] == {}
    assert [(t["task"], t["ok"]) for t in timeline["tasks"]] == [
        ("worker_tasks:echo", True), ("worker_tasks:boom", False), ("worker_tasks:segfault", False),
        ("worker_tasks:echo", True)]
    starts = [t["start_s"] for t in timeline["tasks"]]
    assert starts == sorted(starts) and starts[0] >= 0 and all(t["seconds"] >= 0 for t in timeline["tasks"])


def test_a_submitted_task_runs_first_and_its_reply_never_answers_a_call(worker):
    assert worker.submit("worker_tasks:slow_echo", {"seconds": 0.3, "from": "submit"})
    result = worker.call("worker_tasks:echo", {"from": "call"})
    assert result.ok and result.value["args"] == {"from": "call"}
    assert result.seconds >= 0.25  # the worker ran the submitted task first, one at a time
    assert [t["task"] for t in worker.timeline.tasks] == ["worker_tasks:slow_echo", "worker_tasks:echo"]


def test_a_late_submit_never_starts_a_worker_the_run_has_closed(worker):
    assert not worker.submit("worker_tasks:echo", {"x": 1}, start=False)
    assert not worker.alive and worker.starts == 0 and worker.timeline.tasks == []
    worker.start()
    assert worker.submit("worker_tasks:echo", {"x": 1}, start=False) and worker.starts == 1
    worker.close()
    assert not worker.submit("worker_tasks:echo", {"x": 1}, start=False) and worker.starts == 1


def test_calls_from_two_threads_take_turns(worker):
    results = {}

    def call(name):
        results[name] = worker.call("worker_tasks:slow_echo", {"seconds": 0.1, "name": name})

    threads = [threading.Thread(target=call, args=(n,)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: r.value["args"]["name"] for n, r in results.items()} == {"a": "a", "b": "b", "c": "c"}


def test_an_idle_worker_leaves_at_once_when_closed(worker):
    worker.call("worker_tasks:echo")
    proc = worker._proc
    started = time.monotonic()
    worker.close()
    assert proc.wait(timeout=5) == 0  # it exited by itself: not killed
    assert time.monotonic() - started < 5


def test_what_a_worker_started_leaves_with_it(worker):
    import psutil

    result = worker.call("worker_tasks:leave_a_grandchild", timeout=30)
    assert result.ok, result.problem
    grandchild = psutil.Process(result.value)
    worker.close()
    try:
        grandchild.wait(timeout=5)
    except psutil.TimeoutExpired:
        grandchild.kill()
        raise AssertionError("the worker's grandchild outlived it") from None


def test_a_worker_may_hold_a_gpu_context_once_asked_for_gpu_work_and_only_while_that_child_lives(worker):
    """What G6's at-rest reading counts as this run's own on the GPU (``SessionState.own_on_gpu``)."""
    worker.start()
    assert not worker.on_gpu  # started, imported nothing, asked for nothing
    assert worker.call("spark_gotchas.runtime.tasks:torch_build").ok is not None and not worker.on_gpu  # torch's facts only
    worker.call("worker_tasks:echo")
    assert worker.on_gpu
    worker.call("worker_tasks:segfault")  # the child died: what it held went with it
    assert not worker.on_gpu
    worker.call("worker_tasks:echo")  # a fresh child, asked for work again
    assert worker.on_gpu and worker.starts == 2
