"""Measured rates of this GPU: memory bandwidth (G5) and GEMM per precision (G7).

Both run in the GPU worker through the microbenchmarks that ``spark-gotchas microbench`` also
runs, so the figures a check judges are the figures a user can reproduce by hand.

Keys: ``bench.bandwidth``, ``bench.bandwidth_sweep``, ``bench.gemm``; their types are in
:mod:`spark_gotchas.readings.bench`.
"""

from __future__ import annotations

import csv
import os
from typing import Optional

from ..microbench.bandwidth import BandwidthResult, BandwidthSweep
from ..microbench.gemm import GemmResult
from ..readings.bench import BandwidthReading, BandwidthSweepReading, GemmReading
from ..serial import from_jsonable
from . import ReadContext, reader

GEMM_SIZE = 8192  # the public GB10 and measured H200 figures are at 8192^3


def _unified_memory(ctx: ReadContext) -> Optional[bool]:
    """The profile's word on unified memory (GB10, GH200); None lets the probe ask the device."""
    from ..platform import profile

    prof = profile(ctx.provider, ctx.options.spark_profile)
    return True if prof.unified_memory else None


def _failed(result) -> dict:
    return {"problem": result.problem, "crashed": bool(result.crashed or result.timed_out)}


@reader("bench.bandwidth")
def read_bandwidth(ctx: ReadContext) -> BandwidthReading:
    """The fast bandwidth probe in the worker (read, write, copy, triad; ~1 s)."""
    why = ctx.provider.read("torch.build").gpu_unavailable
    if why:
        return BandwidthReading(attempted=False, reason=why)
    result = ctx.worker.call("spark_gotchas.microbench.bandwidth:probe",
                             {"mode": "fast", "unified_memory": _unified_memory(ctx)}, timeout=120)
    if not result.ok:
        return BandwidthReading(attempted=True, **_failed(result))
    return BandwidthReading(attempted=True, result=from_jsonable(BandwidthResult, result.value))


@reader("bench.bandwidth_sweep")
def read_bandwidth_sweep(ctx: ReadContext) -> BandwidthSweepReading:
    """The bandwidth probe at every array size up to the budget; one progress line per size."""
    why = ctx.provider.read("torch.build").gpu_unavailable
    if why:
        return BandwidthSweepReading(attempted=False, reason=why)

    def progress(point: dict) -> None:
        figures = ", ".join(f"{m} {v:.0f}" for m, v in point.get("gbps", {}).items() if v is not None)
        ctx.say(f"G5 sweep: {point.get('array_bytes', 0) / (1 << 20):.0f} MiB per array: {figures} GB/s")

    result = ctx.worker.call("spark_gotchas.microbench.bandwidth:sweep", {"unified_memory": _unified_memory(ctx)},
                             timeout=600, on_progress=progress)
    if not result.ok:
        return BandwidthSweepReading(attempted=True, **_failed(result))
    sweep = from_jsonable(BandwidthSweep, result.value)
    return BandwidthSweepReading(attempted=True, result=sweep, csv_path=_write_csv(ctx, sweep))


def _write_csv(ctx: ReadContext, sweep: BandwidthSweep) -> Optional[str]:
    """The sweep as CSV in --soak-dir (one row per size, method and implementation)."""
    try:
        os.makedirs(ctx.options.soak_dir, exist_ok=True)
        path = os.path.join(ctx.options.soak_dir, "g5_bandwidth_sweep.csv")
        with open(path, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(["array_bytes", "method", "implementation", "gbps_median", "gbps_best", "check", "error"])
            for p in sweep.points:
                out.writerow([p.array_bytes, p.method, p.implementation, p.gbps, p.gbps_best, p.check, p.error])
    except OSError:
        return None
    ctx.add_artifact("G5 bandwidth sweep (CSV)", path)
    return path


@reader("bench.gemm")
def read_gemm(ctx: ReadContext) -> GemmReading:
    """BF16, FP8 and NVFP4 GEMM at 8192^3 in the worker; unsupported formats say why."""
    why = ctx.provider.read("torch.build").gpu_unavailable
    if why:
        return GemmReading(attempted=False, reason=why)
    result = ctx.worker.call("spark_gotchas.microbench.gemm:probe", {"size": GEMM_SIZE}, timeout=180)
    if not result.ok:
        return GemmReading(attempted=True, **_failed(result))
    return GemmReading(attempted=True, result=from_jsonable(GemmResult, result.value))
