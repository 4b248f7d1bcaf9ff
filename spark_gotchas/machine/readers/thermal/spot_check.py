"""G4 spot check: under 3 s of BF16 GEMM load, what do the SM clock, power and counters do?

The load runs in a child process; this process samples NVML at 10 Hz in a thread meanwhile and
reads the cumulative counters (NVML and nvidia-smi) before and after, so their deltas show
throttling even where the active-reasons mask reads 0 (GB10).

Where the load runs: first in a worker that imports no torch, driving cuBLAS through ctypes
(:mod:`spark_gotchas.microbench._cublas`), so the preflight starts it while the GPU worker is still importing
torch (the head start's ``g4_load``, :mod:`spark_gotchas.runtime.headstart`); where that cannot run
(no cuBLAS found, the driver refuses it, it crashes) the same load runs through torch in the GPU
worker. Either way the GPU worker runs no other task meanwhile, so no measurement overlaps it.

Check by hand: run ``spark-gotchas microbench soak_load --seconds 10`` in one shell and
``nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
--format=csv -lms 200`` in another.

Key: ``thermal.spot_check``; its type is in :mod:`spark_gotchas.knowledge.readings.thermal`.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from ....base import scrub
from ....knowledge.readings.thermal import SpotCheck
from ... import nvml
from ...gpu_window import watch
from ...sampler import Sampler
from .. import ReadContext, reader
from .snapshot import cuda0_handle, read_counters, snapshot_of, take_sample

LOAD_TASK = "spark_gotchas.microbench.soak_load:run"
LOAD_SECONDS = 1.5  # measured load; with warm-up the GPU is busy about 2 s (clocks settle within 0.3 s on an H200)
WINDOW_S = 0.5
SAMPLE_INTERVAL_S = 0.1
TIMEOUT_S = 120.0


def no_cuda_reason(ctx: ReadContext) -> Optional[str]:
    """Why no GPU load can run here (None when torch sees a CUDA device)."""
    build = ctx.provider.try_read("torch.build")
    if build is None:
        return "torch could not be read"
    return build.gpu_unavailable or None


@reader("thermal.spot_check")
def read_spot_check(ctx: ReadContext) -> SpotCheck:
    """≤ 3 s of BF16 GEMM in a child process while this process samples NVML at 10 Hz and lists who
    else is on the GPU; the load runs once more when its rate is far below the profile's with nobody
    else seen (:func:`spark_gotchas.knowledge.judges.g04_thermal.wants_second_look`)."""
    reason = nvml.init()
    if reason is not None:
        why = no_cuda_reason(ctx)
        return SpotCheck(attempted=False, reason=why or f"NVML unavailable ({reason.reason}): no clock to read under load")
    handle, index, how = cuda0_handle()
    if handle is None:
        return SpotCheck(attempted=False, reason=f"no NVML device for cuda:0 ({how})")
    from ....knowledge.judges.g04_thermal import (
        wants_second_look,  # the judge's own rule; the soak's engine imports no judge
    )

    spot = _one_load(ctx, handle, index, how)
    if spot.attempted and wants_second_look(spot, ctx.profile()):
        again = _one_load(ctx, handle, index, how, "G4 spot check's load, again")
        spot.again = again if again.attempted else None
    return spot


def _one_load(ctx: ReadContext, handle: Any, index: Optional[int], how: str,
              what: str = "G4 spot check's load") -> SpotCheck:
    """One load with its samples, counters and who else was on the GPU meanwhile."""
    static = snapshot_of(handle, index, how)
    spot = SpotCheck(attempted=True, max_sm_clock_mhz=static.max_sm_clock_mhz, power_limit_w=static.power_limit_w,
                     unavailable=dict(static.unavailable))
    t0 = time.time()
    spot.counters_before = static.counters  # read just now, with nvidia-smi's split
    sampler = Sampler(lambda: take_sample(handle, t0), spot.samples.append, SAMPLE_INTERVAL_S, "g4-spot-sampler")
    with sampler:
        result, spot.window = _run_load(ctx, spot, handle, what)
        time.sleep(SAMPLE_INTERVAL_S)  # one sample after the load's end
    if result is None:  # neither load could run: say why of both
        return SpotCheck(attempted=False, reason="; ".join(filter(None, (spot.reason, spot.backend_note))),
                         backend_note=spot.backend_note)
    spot.counters_after = read_counters(handle, index)
    spot.sampler_errors = sampler.errors
    if not result.ok:
        spot.load_problem = result.problem
        return spot
    v = result.value
    spot.device, spot.size, spot.dtype = v["device"], v["size"], v["dtype"]
    spot.backend = v.get("backend") or "torch"
    spot.load_start_s, spot.load_end_s = v["t_start_epoch"] - t0, v["t_end_epoch"] - t0
    spot.tflops, spot.busy_fraction = v["tflops"], v["busy_fraction"]
    return spot


def _run_load(ctx: ReadContext, spot: SpotCheck, handle: Any, what: str) -> tuple[Any, Any]:
    """(the load's TaskResult, who else was on the GPU meanwhile): torch-free first, else through
    torch; (None, window) with spot.reason when neither can run."""
    args = {"seconds": LOAD_SECONDS, "window_s": WINDOW_S, "device": "cuda"}
    light = ctx.torch_free_worker("g4_load")
    if light is not None:
        with ctx.gpu_to_itself(), watch(what, handle, lambda: light.pid) as window:
            result = light.call(LOAD_TASK, {**args, "backend": "cublas"}, timeout=TIMEOUT_S)
        if result.ok or result.timed_out:  # a hung GEMM is the finding, not a reason to try again
            return result, window.window
        spot.backend_note = scrub.clip(f"cuBLAS without torch: {result.problem}", 300, mark="")
    why = no_cuda_reason(ctx)
    if why:
        spot.reason = why
        return None, None
    worker = ctx.worker
    with watch(what, handle, lambda: worker.pid) as window:
        result = worker.call(LOAD_TASK, {**args, "backend": "torch"}, timeout=TIMEOUT_S)
    return result, window.window
