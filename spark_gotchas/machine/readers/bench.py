"""Measured rates of this GPU: memory bandwidth (G5) and GEMM per precision (G7).

Both run in the GPU worker through the microbenchmarks that ``spark-gotchas microbench`` also
runs, so the figures a check judges are the figures a user can reproduce by hand.

Keys: ``bench.bandwidth``, ``bench.bandwidth_sweep``, ``bench.gemm``; their types are in
:mod:`spark_gotchas.knowledge.readings.bench`.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any, Optional

from ...base import atomic, outward, scrub
from ...base.serial import from_jsonable
from ...knowledge.readings.bench import BandwidthReading, BandwidthSweepReading, GemmReading
from ...microbench.bandwidth import BandwidthResult, BandwidthSweep
from ...microbench.gemm import GemmResult
from ..gpu_window import watch
from . import ReadContext, reader
from .gpu import single_capability

BANDWIDTH_TASK = "spark_gotchas.microbench.bandwidth:probe"
BANDWIDTH_CUDA_TASK = "spark_gotchas.microbench.bandwidth:probe_cuda"  # no torch: the load worker's
GEMM_CUBLAS_TASK = "spark_gotchas.microbench.gemm:probe_cublas"
GEMM_SIZE = 8192  # the public GB10 and measured H200 figures are at 8192^3


def _unified_memory(ctx: ReadContext) -> Optional[bool]:
    """The profile's word on unified memory (GB10, GH200); None lets the probe ask the device."""
    return True if ctx.profile().unified_memory else None


def _failed(result) -> dict:
    return {"problem": result.problem, "crashed": bool(result.crashed or result.timed_out)}


def measured(ctx: ReadContext, what: str, task: str, args: dict, timeout: float, **call: Any) -> tuple[Any, Any]:
    """(the worker's TaskResult, who else was on the GPU meanwhile) for one measurement in the GPU worker."""
    worker = ctx.worker
    with watch(what, measuring_pid=lambda: worker.pid) as window:
        result = worker.call(task, args, timeout=timeout, **call)
    return result, window.window


@reader("bench.bandwidth")
def read_bandwidth(ctx: ReadContext) -> BandwidthReading:
    """The fast bandwidth probe (read, write, copy, triad; ~1 s), with who else was on the GPU
    meanwhile; run once more when it is far below the profile with nobody else seen. Through the
    CUDA driver without torch in the load worker (the head start's ``g5_probe``, during the
    import) where a GPU is seen, else through torch in the GPU worker."""
    args = {"mode": "fast", "unified_memory": _unified_memory(ctx)}
    light = ctx.torch_free_worker("g5_probe")
    note = ""
    if light is not None and bandwidth_without_torch(ctx):
        reading = _bandwidth(ctx, light, BANDWIDTH_CUDA_TASK, args)
        if reading.result is not None or reading.crashed:  # a crash or hang is the finding: not tried again
            return reading
        note = scrub.clip(f"CUDA driver kernels without torch: {reading.problem}", 300, mark="")
    why = ctx.provider.read("torch.build").gpu_unavailable
    if why:
        return BandwidthReading(attempted=False, reason=why, backend_note=note)
    reading = _bandwidth(ctx, None, BANDWIDTH_TASK, args)
    reading.backend_note = note
    return reading


def _bandwidth(ctx: ReadContext, light: Any, task: str, args: dict) -> BandwidthReading:
    """The probe in the load worker (``light``, the GPU worker paused) or the GPU worker (None)."""

    def once(what: str) -> tuple[Any, Any]:
        if light is None:
            return measured(ctx, what, task, args, 120)
        with ctx.gpu_to_itself(), watch(what, measuring_pid=lambda: light.pid) as window:
            return light.call(task, args, timeout=120), window.window

    result, window = once("G5 bandwidth probe")
    if not result.ok:
        return BandwidthReading(attempted=True, window=window, **_failed(result))
    reading = BandwidthReading(attempted=True, result=from_jsonable(BandwidthResult, result.value), window=window)
    from ...knowledge.judges.g05_bandwidth import wants_second_look  # the judge's own rule

    if wants_second_look(reading.result, window, ctx.profile(), ctx.provider.try_read("gpu.inventory")):
        again, reading.again_window = once("G5 bandwidth probe, again")
        if again.ok:
            reading.again = from_jsonable(BandwidthResult, again.value)
    return reading


def bandwidth_without_torch(ctx: ReadContext) -> bool:
    """Whether G5's probe can run through the CUDA driver without torch: NVML lists GPUs of one
    compute capability (device 0 is one of them). Where it cannot, the probe says why and the
    reader takes it through torch."""
    return single_capability(ctx.provider) is not None


@reader("bench.bandwidth_sweep")
def read_bandwidth_sweep(ctx: ReadContext) -> BandwidthSweepReading:
    """The bandwidth probe at every array size up to the budget; one progress line per size."""
    why = ctx.provider.read("torch.build").gpu_unavailable
    if why:
        return BandwidthSweepReading(attempted=False, reason=why)

    def progress(point: dict) -> None:
        figures = ", ".join(f"{m} {v:.0f}" for m, v in point.get("gbps", {}).items() if v is not None)
        ctx.say(f"G5 sweep: {point.get('array_bytes', 0) / (1 << 20):.0f} MiB per array: {figures} GB/s")

    result, window = measured(ctx, "G5 bandwidth sweep", "spark_gotchas.microbench.bandwidth:sweep",
                              {"unified_memory": _unified_memory(ctx)}, 600, on_progress=progress)
    if not result.ok:
        return BandwidthSweepReading(attempted=True, window=window, **_failed(result))
    sweep = from_jsonable(BandwidthSweep, result.value)
    return BandwidthSweepReading(attempted=True, result=sweep, csv_path=_write_csv(ctx, sweep), window=window)


def _write_csv(ctx: ReadContext, sweep: BandwidthSweep) -> Optional[str]:
    """The sweep as CSV in --soak-dir (one row per size, method and implementation)."""
    text = io.StringIO(newline="")
    out = csv.writer(text)
    out.writerow(["array_bytes", "method", "implementation", "gbps_median", "gbps_best", "check", "error"])
    for p in sweep.points:
        out.writerow([p.array_bytes, p.method, p.implementation, p.gbps, p.gbps_best, p.check, p.error])
    path = os.path.join(ctx.options.soak_dir, "g5_bandwidth_sweep.csv")
    try:  # whole or not at all, an error text from the kernels masked
        atomic.write_text(path, outward.record(text.getvalue()), parents=True)
    except OSError:
        return None
    ctx.add_artifact("G5 bandwidth sweep (CSV)", path)
    return path


@reader("bench.gemm")
def read_gemm(ctx: ReadContext) -> GemmReading:
    """BF16, FP8 and NVFP4 GEMM at 8192^3; unsupported formats say why. Through cuBLAS without
    torch in the load worker where NVFP4 cannot run anyway (:func:`gemm_without_torch`: the
    head start's ``g7_rates``, during the import), else through torch in the GPU worker."""
    note = ""
    light = ctx.torch_free_worker("g7_rates")
    if light is not None and gemm_without_torch(ctx):
        from .thermal.snapshot import cuda0_handle

        with ctx.gpu_to_itself(), watch("G7 GEMM probe", cuda0_handle()[0], lambda: light.pid) as window:
            result = light.call(GEMM_CUBLAS_TASK, {"size": GEMM_SIZE}, timeout=180)
        if result.ok:
            return GemmReading(attempted=True, result=from_jsonable(GemmResult, result.value), window=window.window)
        if result.timed_out:  # a hung GEMM is the finding, not a reason to try again through torch
            return GemmReading(attempted=True, window=window.window, **_failed(result))
        note = scrub.clip(f"cuBLAS without torch: {result.problem}", 300, mark="")
    why = ctx.provider.read("torch.build").gpu_unavailable
    if why:
        return GemmReading(attempted=False, reason=why)
    result, window = measured(ctx, "G7 GEMM probe", "spark_gotchas.microbench.gemm:probe", {"size": GEMM_SIZE}, 180)
    if not result.ok:
        return GemmReading(attempted=True, window=window, backend_note=note, **_failed(result))
    return GemmReading(attempted=True, result=from_jsonable(GemmResult, result.value), window=window,
                       backend_note=note)


FP4_CAPABILITY = (10, 0)  # no FP4 tensor cores below it: NVFP4 cannot run, so torch has nothing to add


def gemm_without_torch(ctx: ReadContext) -> bool:
    """Whether G7's rates can be measured through cuBLAS without torch: every GPU NVML lists is below
    compute capability 10.0 (on a GPU that can run NVFP4, all three rates come from torch, so the
    NVFP4/FP8 ratio compares one path)."""
    capability = single_capability(ctx.provider)
    return capability is not None and tuple(capability) < FP4_CAPABILITY
