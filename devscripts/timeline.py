"""Print a run's timeline (checks and the workers) from its JSON report, in start order.

What for: where a preflight's time went, from the ``timing`` section of the JSON report
(seconds after pytest_configure): each check, the GPU worker's start, torch import, warm-ups
and tasks, the load and build workers' tasks.

    python -m pytest -m fast --json-report --json-report-file=/tmp/r.json
    python devscripts/timeline.py /tmp/r.json

Runs anywhere in well under a second; TIMELINE=1 bash devscripts/timing.sh prints it after each
of the suite's runs. Writes nothing.
"""
import json
import sys

report = json.load(open(sys.argv[1]))
timing = (report.get("spark_gotchas") or {}).get("timing") or {}
print(f"   pytest duration {report.get('duration', 0):.2f} s")
floor = timing.get("torch")
if floor:
    print(f"   torch ready {floor['ready_s']} (import {floor['import_s']} s); checks end {floor['checks_end_s']}: "
          f"{floor['after_ready_s']} s after torch, {floor['tasks_after_ready_s']} s of worker tasks")
rows = [(c["start_s"], c["seconds"], "check  " + c["nodeid"].split("::")[-1]) for c in timing.get("checks", [])]
worker = timing.get("worker")
if worker:
    print(f"   worker start {worker['worker_starts_s']} ready {worker['worker_ready_s']} preload {worker['preload_s']}")
    rows += [(w.get("start_s") or 0, w.get("seconds") or 0, f"warmup {name}: {w.get('result')}")
             for name, w in worker.get("warmups", {}).items()]
    rows += [(t["start_s"], t["seconds"], "worker " + t["task"] + ("" if t["ok"] else " (failed)")) for t in worker["tasks"]]
for name in ("load_worker", "build_worker"):  # build_worker: reports before 2026-12-04 18:00
    other = timing.get(name)
    if other:
        rows += [(t["start_s"], t["seconds"], f"{name} {t['task']}" + ("" if t["ok"] else " (failed)"))
                 for t in other["tasks"]]
for start, seconds, what in sorted(rows):
    if seconds >= 0.02 or what.startswith(("worker", "warmup", "load_worker", "build_worker")):
        print(f"   {start:7.2f} +{seconds:5.2f}  {what}")
