"""The watch's ``report.json``: the preflight's JSON report (docs/report.md), with the watch's reading.

One entry in ``tests`` per verdict (``watch::g3_memory`` …), its ``metadata.gotcha`` as a check's; the
``spark_gotchas`` section as the preflight writes it (``lines``, ``gotchas``, ``platform``,
``options``, ``versions``, ``artifacts``), ``mode`` ``"watch"``, plus ``watch``: the whole reading
(:class:`~spark_gotchas.knowledge.readings.watch.WatchReading`, typed JSON). ``spark-gotchas diff`` and
``fleet`` read it as any report, ``check-report --gotchas 3,4,6`` checks it whole, and ``spark-gotchas
watch --spark-replay`` judges it again. Written whole or not at all (:mod:`spark_gotchas.base.atomic`).

Its ``prometheus`` text (``--prometheus-textfile``) is the run as it stands, rewritten as it goes:
each gotcha's worst status so far, each state open now, the last sample's figures.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from .. import __version__
from ..base import outward
from ..base.serial import from_jsonable, to_jsonable
from ..knowledge.readings.watch import WatchReading
from ..knowledge.verdict import Status, Verdict, gotcha_line, summarize, summary_lines

OUTCOME = {Status.FAIL: "failed", Status.SKIP: "skipped"}
NAMES = {3: "g3_memory", 4: "g4_clocks", 6: "g6_other_gpu_processes"}


def _test(verdict: Verdict, seconds: float) -> dict[str, Any]:
    outcome = OUTCOME.get(verdict.status, "passed")
    call: dict[str, Any] = {"duration": seconds, "outcome": outcome}
    if verdict.status.needs_fix or verdict.status is Status.SKIP:
        call["longrepr"] = "\n".join(summary_lines([verdict]))
    return {"nodeid": f"watch::{NAMES.get(verdict.gotcha, f'g{verdict.gotcha}')}", "lineno": 0, "outcome": outcome,
            "keywords": ["watch", f"g{verdict.gotcha}"], "setup": {"duration": 0.0, "outcome": "passed"},
            "call": call, "teardown": {"duration": 0.0, "outcome": "passed"},
            "metadata": {"gotcha": verdict.to_json()}}


def document(reading: WatchReading, verdicts: list[Verdict], platform: dict[str, Any], versions: dict[str, Any],
             options: dict[str, Any], artifacts: dict[str, str]) -> dict[str, Any]:
    """The report as JSON-ready data, credentials masked (strings otherwise as read)."""
    tests = [_test(v, reading.elapsed_s) for v in verdicts]
    failed = sum(t["outcome"] == "failed" for t in tests)
    skipped = sum(t["outcome"] == "skipped" for t in tests)
    section = {
        "suite_version": __version__,
        "mode": "watch",
        "replayed_from": None,
        "interrupted": reading.end.how.startswith("still running"),
        "interruption": reading.end.how if reading.end.how.startswith("still running") else None,
        "lines": summary_lines(verdicts),
        "gotchas": {f"G{top.gotcha}": {"status": top.status.value, "line": gotcha_line(top, group),
                                        "summary": top.summary, "fix": top.fix, "checks": len(group)}
                    for top, group in summarize(verdicts)},
        "left_out": [],
        "platform": platform,
        "options": options,
        "versions": versions,
        "artifacts": artifacts,
        "timing": {"torch": None, "checks": [], "prepare_errors": {}, "worker": None, "load_worker": None},
        "watch": to_jsonable(reading),
    }
    return outward.record({
        "created": time.time(), "duration": reading.elapsed_s, "exitcode": 1 if failed else 0, "root": os.getcwd(),
        "environment": {}, "summary": {"passed": len(tests) - failed - skipped, "failed": failed, "skipped": skipped,
                                       "total": len(tests), "collected": len(tests)},
        "collectors": [], "tests": tests, "spark_gotchas": section})


def reading_of(doc: Any) -> Optional[WatchReading]:
    """The watch reading a report holds (typed, each value checked); None when it holds none."""
    section = doc.get("spark_gotchas") if isinstance(doc, dict) else None
    data = section.get("watch") if isinstance(section, dict) else None
    if not isinstance(data, dict):
        return None
    return from_jsonable(WatchReading, data)


# -- the metrics file ---------------------------------------------------------------------------------
NAMESPACE = "spark_gotchas_watch"


def metrics(reading: WatchReading, sample: Any, open_events: list[Any], worst: dict[int, str], running: bool,
            exit_status: Optional[int] = None) -> str:
    """The run so far in node_exporter's textfile format (prometheus_client writes it)."""
    from prometheus_client import CollectorRegistry, Gauge, Info, generate_latest

    registry = CollectorRegistry(auto_describe=True)

    def gauge(name: str, help_text: str, value: Optional[float], scale: float = 1.0) -> None:
        if value is not None:
            Gauge(f"{NAMESPACE}_{name}", help_text, registry=registry).set(float(value) * scale)

    status = Gauge(f"{NAMESPACE}_status", "1 for the worst status each gotcha reached so far, 0 for the others",
                   ("gotcha", "status"), registry=registry)
    for gotcha in (3, 4, 6):
        for value in ("FAIL", "WARN", "PASS", "INFO"):
            status.labels(f"G{gotcha}", value).set(1 if worst.get(gotcha, "PASS") == value else 0)
    active = Gauge(f"{NAMESPACE}_state_active", "1 for each state open now (its gotcha and kind)",
                   ("gotcha", "kind", "status"), registry=registry)
    for event in open_events:
        active.labels(f"G{event.gotcha}", event.kind, event.status).set(1)
    gauge("running", "1 while the watched job runs, 0 once it ended", 1 if running else 0)
    gauge("job_exit_status", "the watched job's exit status (128 + signal when a signal killed it)", exit_status)
    gauge("elapsed_seconds", "seconds since the watch began", reading.elapsed_s)
    gauge("rate_reference", "the best rolling median of the job's rate so far", reading.rate_reference)
    if sample is not None:
        gauge("last_sample_timestamp_seconds", "when the last sample was taken (Unix time)", sample.epoch_s)
        gauge("rate", "the last rate the job's log printed (--rate-regex)", sample.rate)
        gauge("sm_clock_hertz", "the GPU's SM clock", sample.sm_clock_mhz, 1e6)
        gauge("gpu_power_watts", "the GPU's power draw", sample.power_w)
        gauge("gpu_temperature_celsius", "the GPU's temperature", sample.temperature_c)
        gauge("gpu_utilization_ratio", "the GPU's utilization (0-1)", sample.utilization_pct, 0.01)
        gauge("memory_available_bytes", "MemAvailable", sample.mem_available_bytes)
        gauge("swap_used_bytes", "swap in use", sample.swap_used_bytes)
        gauge("job_rss_bytes", "RSS summed over the job's processes", sample.job_rss_bytes)
        gauge("job_gpu_memory_bytes", "GPU memory NVML lists for the job's processes", sample.job_gpu_memory_bytes)
        gauge("cgroup_used_bytes", "the job's cgroup: usage minus inactive file pages", sample.cgroup_used_bytes)
        gauge("cgroup_limit_bytes", "the job's cgroup memory limit", sample.cgroup_limit_bytes)
        gauge("memory_pressure_full_ratio", "PSI memory full avg10 (0-1)", sample.psi_full_avg10, 0.01)
        gauge("gpu_other_processes", "other processes NVML lists on the GPU", sample.gpu_others)
    info = Info(NAMESPACE, "the watched job (1)", registry=registry)
    info.info({"command": outward.line(" ".join(reading.command))[:400], "pid": str(reading.job_pid or ""),
               "device": outward.line(reading.device or ""), "suite": __version__})
    return generate_latest(registry).decode("utf-8")
