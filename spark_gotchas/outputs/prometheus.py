"""A run as Prometheus metrics, in node_exporter's textfile-collector format (``--spark-prometheus PATH``).

Monitoring alerts on series, not lines. Everything here comes from the verdicts that print the
G-lines, and nothing is judged again: each gotcha's status as one series per status value (the
one it has is 1, the others 0, so ``spark_gotchas_status{status="FAIL"} == 1`` alerts), the
figures its judges were given (``Verdict.readings``) in base units, the time the readings were
taken, and the versions as an info metric. docs/operations.md lists every series with an
alerting rule for it.

Written by the official client (``prometheus_client``, the ``prometheus`` extra): its exposition
escapes label values; :func:`outward.line` masks credentials and escapes control characters in them first.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional

from ..base import outward
from ..knowledge.verdict import Status, Verdict, summarize
from ..machine import platform
from ..microbench.quantities import Epoch
from ..run.session import SessionState

NAMESPACE = "spark_gotchas"
REQUIREMENT = "prometheus_client"
INTERRUPTED = ("Prometheus metrics not written to {path}: the run was interrupted, and the gotchas it did not reach "
               "would vanish from the metrics (the file keeps the last whole run's)")
MISSING = ("--spark-prometheus needs the prometheus_client package in this environment: pip install "
           "prometheus-client (or the suite's prometheus extra); it pulls in nothing else")


@dataclass(frozen=True)
class Figure:
    """A reading a judge was given, as a metric: ``key`` in the verdict's readings of gotcha
    ``gotcha``; a dict value gives one series per key, labelled ``by``; ``scale`` turns the
    suite's unit (GB/s, MHz, TFLOP/s) into the base unit the name says."""

    gotcha: int
    key: str
    metric: str
    scale: float = 1.0
    by: str = ""  # the label of a dict's keys (method, precision)
    labels: tuple[tuple[str, str], ...] = ()  # fixed labels (source)
    label_from: tuple[tuple[str, str], ...] = ()  # labels whose value is another reading (label, key)
    low_end: bool = False  # the value is a [low, high] range: its low end


FIGURES = (
    Figure(5, "gbps", "bandwidth_bytes_per_second", 1e9, by="method"),
    Figure(5, "ranges_gbps", "bandwidth_floor_bytes_per_second", 1e9, by="method", low_end=True),
    Figure(5, "theoretical_gbps", "bandwidth_theoretical_bytes_per_second", 1e9),
    Figure(4, "sm_clock_median_mhz", "sm_clock_under_load_hertz", 1e6),
    Figure(4, "floor_mhz", "sm_clock_floor_hertz", 1e6),
    Figure(4, "temperature_max_c", "gpu_temperature_celsius"),
    Figure(4, "temperature_c", "gpu_temperature_celsius"),
    Figure(4, "power_median_w", "gpu_power_watts"),
    Figure(4, "power_w", "gpu_power_watts"),
    Figure(4, "tflops", "gemm_flop_per_second", 1e12, label_from=(("precision", "precision"),)),
    Figure(7, "tflops", "gemm_flop_per_second", 1e12, by="precision"),
    Figure(3, "cuda_free_bytes", "memory_free_bytes", labels=(("source", "cuda"),)),
    Figure(3, "device_free_bytes", "memory_free_bytes", labels=(("source", "cuda"),)),
    Figure(3, "mem_available_bytes", "memory_free_bytes", labels=(("source", "memavailable"),)),
    Figure(3, "mem_free_bytes", "memory_free_bytes", labels=(("source", "memfree"),)),
)

HELP = {
    "status": "1 for the status this gotcha's G-line has, 0 for the other four (FAIL WARN PASS INFO SKIP)",
    "bandwidth_bytes_per_second": "device-memory bandwidth G5 measured, per method (copy read write triad)",
    "bandwidth_floor_bytes_per_second": "low end of the profile's measured bandwidth range per method: G5 warns "
                                        "under 0.9 of it and fails under 0.75",
    "bandwidth_theoretical_bytes_per_second": "NVML's theoretical memory bandwidth (max memory clock x bus width)",
    "sm_clock_under_load_hertz": "median SM clock under G4's GEMM load",
    "sm_clock_floor_hertz": "SM clock under load below which G4 fails (the profile's floor)",
    "gpu_temperature_celsius": "GPU temperature G4 read: at rest, and the highest under load",
    "gpu_power_watts": "GPU power G4 read: at rest, and the median under load",
    "gemm_flop_per_second": "GEMM rate measured by G4's load and G7's probe, per precision",
    "memory_free_bytes": "memory free for a load as G3 read it (source: cuda, memavailable, memfree)",
    "run_timestamp_seconds": "when the readings were taken (Unix time): this run's end, or a replayed snapshot's run",
}
INFO_HELP = "the run's versions and platform (1)"
INFO_LABELS = (("version", "suite"), ("driver", "driver"), ("cuda", "cuda_driver"), ("torch", "torch"),
               ("torch_cuda", "torch_cuda"))
PLATFORM_LABELS = (("profile", "profile"), ("gpu", "gpu"))


LABEL_CHARS = 200  # a label value's length at most: a dashboard shows it in a legend or a table cell


def label(value: Any) -> str:
    """A label value from outside: credentials masked, control and format characters escaped,
    white space runs folded and a G-line head escaped, at most :data:`LABEL_CHARS` characters
    (:func:`outward.field`; the client escapes backslash, quote and newline for the exposition format)."""
    return outward.field("" if value is None else str(value), LABEL_CHARS)


def _number(value: Any, scale: float) -> Optional[float]:
    """A finite number from a reading, in base units; None for anything else (a string, a
    bool, NaN, a number too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        scaled = float(value) * scale
    except OverflowError:
        return None
    return scaled if math.isfinite(scaled) else None


def figures(verdicts: Iterable[Verdict]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """metric -> {labels: value} from the verdicts' readings; the first verdict with a series wins."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for verdict in verdicts:
        base = (("gotcha", f"G{verdict.gotcha}"), ("check", label(verdict.check)))
        for fig in FIGURES:
            if fig.gotcha != verdict.gotcha or fig.key not in verdict.readings:
                continue
            raw = verdict.readings[fig.key]
            items = raw.items() if fig.by and isinstance(raw, Mapping) else [] if fig.by else [("", raw)]
            for name, value in items:
                if fig.low_end:
                    value = value[0] if isinstance(value, (list, tuple)) and value else None
                number = _number(value, fig.scale)
                if number is None:
                    continue
                labels = base + fig.labels + tuple((name_, label(verdict.readings.get(key))) for name_, key in fig.label_from) \
                    + (((fig.by, label(name)),) if fig.by else ())
                out.setdefault(fig.metric, {}).setdefault(labels, number)
    return out


def run_epoch(created: Optional[str]) -> Optional[float]:
    """A snapshot's ``created`` (ISO 8601 with its zone) as Unix time; None when it is not one, or not
    a wall-clock time (before 1970 or past year 5138: Epoch's span): a replayed snapshot is a file."""
    if not isinstance(created, str):
        return None
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    try:
        epoch = when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
    return None if Epoch.__metadata__[0].problem(epoch) else epoch


def render(verdicts: list[Verdict], platform: Mapping[str, Any], versions: Mapping[str, Any],
           epoch: Optional[float], mode: str) -> str:
    """The metrics file's text (exposition format 0.0.4, as node_exporter's textfile collector reads)."""
    from prometheus_client import CollectorRegistry, Gauge, Info, generate_latest

    registry = CollectorRegistry(auto_describe=True)
    status = Gauge(f"{NAMESPACE}_status", HELP["status"], ("gotcha", "status"), registry=registry)
    for top, _group in summarize(verdicts):
        for value in Status:
            status.labels(f"G{top.gotcha}", value.value).set(1 if value is top.status else 0)
    for metric, series in figures(verdicts).items():
        names = [name for name, _ in next(iter(series))]  # every figure of a metric has the same label names
        gauge = Gauge(f"{NAMESPACE}_{metric}", HELP[metric], names, registry=registry)
        for labels, value in series.items():
            gauge.labels(*(v for _, v in labels)).set(value)
    if epoch is not None:
        Gauge(f"{NAMESPACE}_run_timestamp_seconds", HELP["run_timestamp_seconds"], registry=registry).set(epoch)
    info = Info(NAMESPACE, INFO_HELP, registry=registry)
    info.info({"mode": label(mode),
               **{name: label(versions.get(key)) for name, key in INFO_LABELS},
               **{name: label(platform.get(key)) for name, key in PLATFORM_LABELS}})
    return generate_latest(registry).decode("utf-8")



def of_run(state: SessionState) -> str:
    """The metrics of the run ``state`` holds: its verdicts, platform and versions; the time of a
    replay is the time the snapshot's run took its readings."""
    provider, requested = state.provider, state.options.spark_profile
    epoch = run_epoch(state.replay.created) if state.replay is not None else time.time()
    return render(state.verdicts, platform.describe(provider, requested), platform.versions(provider), epoch,
                  "replay" if state.replay is not None else "live")
