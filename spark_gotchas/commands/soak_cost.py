"""What the G4 soak's sampler costs the load it watches: throughput alone vs with the sampler.

Three phases on one worker (one torch import): the GEMM load alone for half the time, the load
with the soak's own 1 Hz sampler (NVML every tick, nvidia-smi every 10 s, each row flushed to
a CSV, the heartbeat rewritten) for the full time, then the load alone again. Comparing the
middle phase with the mean of the two outer ones cancels a slow thermal drift; the gap between
the two outer phases is printed as the noise floor. Memory: this process's RSS at the start and
end of the sampled phase, and the load's RSS in its first and last window.

``python -m spark_gotchas.commands.soak_cost --seconds 30`` (≈ 65 s on a GPU); the soak's budget is
1% of throughput. ``--device cpu`` is a dry run of the plumbing without a GPU. It is the suite's
own measurement of its soak, so it lives with the soak and runs the soak's own engine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from ..base import outward
from ..machine import nvml
from ..machine.readers.thermal.snapshot import cuda0_handle
from ..microbench._cli import in_span
from ..runtime.soak import engine
from ..runtime.soak.engine import LOAD_TASK

LIMIT = 0.01


def _rss() -> Optional[int]:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def measure(seconds: float = 30.0, interval_s: float = 1.0, device: str = "cuda", window_s: float = 5.0,
            worker: Any = None, load_task: str = LOAD_TASK) -> dict[str, Any]:
    """Run A (seconds/2) - B with sampler (seconds) - A (seconds/2); return the figures."""
    from ..runtime.worker import Worker

    own = worker is None
    worker = worker or Worker(preload=("torch",))
    args = {"device": device, "dtype": "bf16", "window_s": window_s}
    out: dict[str, Any] = {"seconds": seconds, "interval_s": interval_s, "device": device}
    try:
        alone = []
        for phase in ("alone_1", "sampled", "alone_2"):
            if phase == "sampled":
                handle = index = None
                if nvml.init() is None and device.startswith("cuda"):
                    handle, index, _ = cuda0_handle()
                with tempfile.TemporaryDirectory(prefix="g4-cost-") as tmp:
                    plan = engine.SoakPlan(duration_s=seconds, soak_dir=Path(tmp), window_s=window_s,
                                           sample_interval_s=interval_s, progress_every_s=1e9, load_task=load_task,
                                           load_args={"device": device, "dtype": "bf16"})
                    t0 = time.time()
                    rss_start = _rss()
                    source = engine.SampleSource(handle, index, t0)
                    reading = engine.run_soak(worker, plan, source, t0, lambda _: None, {})
                    rss_end = _rss()
                if reading.load_problem:
                    raise RuntimeError(f"load failed while sampled: {reading.load_problem}")
                weight = sum(w.seconds for w in reading.windows if w.tflops is not None)
                tflops = sum(w.tflops * w.seconds for w in reading.windows if w.tflops is not None) / max(weight, 1e-9)
                loads = [w.worker_rss_bytes for w in reading.windows if w.worker_rss_bytes is not None]
                out["sampled"] = {
                    "tflops": tflops, "samples": reading.samples, "sampler_busy_s": reading.sampler_busy_s,
                    "sampler_errors": reading.sampler_errors, "parent_rss_start_bytes": rss_start,
                    "parent_rss_end_bytes": rss_end, "load_rss_first_bytes": loads[0] if loads else None,
                    "load_rss_last_bytes": loads[-1] if loads else None, "windows": len(reading.windows),
                }
                continue
            result = worker.call(load_task, {**args, "seconds": seconds / 2}, timeout=seconds + 300)
            if not result.ok:
                raise RuntimeError(f"load failed alone: {result.problem}")
            alone.append(float(result.value["tflops"]))
            out[phase] = {"tflops": alone[-1], "device_name": result.value.get("device")}
    finally:
        if own:
            worker.close()
    base = sum(alone) / len(alone)
    out["cost_fraction"] = 1.0 - out["sampled"]["tflops"] / base if base else None
    out["noise_fraction"] = abs(alone[0] - alone[1]) / base if base else None
    out["sampler_cpu_fraction"] = out["sampled"]["sampler_busy_s"] / seconds
    out["ok"] = out["cost_fraction"] is not None and out["cost_fraction"] <= LIMIT
    return out


def _mib(value: Optional[int]) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MiB"


def report(out: dict[str, Any]) -> list[str]:
    s = out["sampled"]
    return [
        f"load alone (first):   {out['alone_1']['tflops']:.2f} TFLOP/s ({out['alone_1'].get('device_name')})",
        f"load + {1 / out['interval_s']:.0f} Hz sampler:  {s['tflops']:.2f} TFLOP/s ({s['samples']} samples to CSV + "
        f"heartbeat; sampler busy {s['sampler_busy_s']:.3f} s = {out['sampler_cpu_fraction']:.2%} of one core; "
        f"{s['sampler_errors']} errors)",
        f"load alone (second):  {out['alone_2']['tflops']:.2f} TFLOP/s",
        f"sampler cost: {out['cost_fraction']:+.2%} of throughput (noise between the two alone phases "
        f"{out['noise_fraction']:.2%}; budget {LIMIT:.0%}): {'OK' if out['ok'] else 'OVER BUDGET'}",
        f"memory over the sampled phase: this process {_mib(s['parent_rss_start_bytes'])} -> "
        f"{_mib(s['parent_rss_end_bytes'])}; load {_mib(s['load_rss_first_bytes'])} -> "
        f"{_mib(s['load_rss_last_bytes'])} over {s['windows']} windows",
    ]


def _duration(text: str) -> float:
    from ..machine.options import SOAK_SECONDS, parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    why = SOAK_SECONDS.problem(seconds)
    if why:
        raise argparse.ArgumentTypeError(f"{text!r} {why}")
    return seconds


def main(argv: Optional[list[str]] = None) -> int:
    parser = outward.ArgumentParser(prog="python -m spark_gotchas soak-cost", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=_duration, default="30s",
                        help="length of the sampled phase (each alone phase is half), e.g. 30s, 2m")
    parser.add_argument("--interval", type=in_span(0.01, 3600, "seconds"), default=1.0, help="sampler interval in seconds (the soak's: 1)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        out = measure(args.seconds, args.interval, args.device)
    except RuntimeError as exc:  # the load failed: one line, not a traceback
        outward.say(f"{parser.prog}: {exc}", err=True)
        return 2
    if args.json:
        outward.say_json(out)
    else:
        outward.say(*report(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
