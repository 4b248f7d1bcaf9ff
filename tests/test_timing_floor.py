"""The JSON report's timing.torch: when torch was ready and what the checks took after it."""

from types import SimpleNamespace

from spark_gotchas.run.session import after_torch
from spark_gotchas.runtime.worker import Timeline


def test_the_floor_figures_count_only_what_ran_after_torch_was_ready():
    origin = 1000.0
    timeline = Timeline(ready=[1008.0], preload_seconds={"torch": 7.9},
                        tasks=[{"task": "tasks:torch_build", "start": 1005.0, "seconds": 3.1, "ok": True},  # waited
                               {"task": "attention:sdpa_backends", "start": 1008.2, "seconds": 1.3, "ok": True},
                               {"task": "tasks:queued", "start": 1004.0, "seconds": 0.0, "ok": True}])
    checks = [("g3", 1000.3, 0.5), ("g1", 1005.0, 3.1), ("g5", 1009.5, 0.3)]
    floor = after_torch(SimpleNamespace(timeline=timeline), checks, origin)
    assert floor == {"ready_s": 8.0, "import_s": 7.9, "checks_end_s": 9.8, "after_ready_s": 1.8,
                     "tasks_after_ready_s": 1.4}


def test_no_worker_or_no_import_gives_no_floor():
    assert after_torch(None, [], 0.0) is None
    assert after_torch(SimpleNamespace(timeline=Timeline()), [("g1", 1.0, 1.0)], 0.0) is None
