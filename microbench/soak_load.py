"""Sustained BF16 GEMM load for the G4 spot check and soak; reports throughput per window.

Why BF16: it is what training runs (bf16 mixed precision), every GPU the suite knows runs it
through cuBLAS with no scaling setup, and it keeps the tensor cores as busy as a training step
does. FP8 GEMMs are faster per FLOP but draw less power per second of work on GB10 (public
readings: INT8/FP8-style kernels peak ~105 W, FP32 ~70 W), and a throttle check wants the
load users actually sustain. Random (not zero) inputs, since zeros draw less power.

Sized safely for unified memory: three N x N BF16 matrices (N <= 8192, 384 MiB at most) and
never more than 5% of what ``cudaMemGetInfo`` reports free, so the load cannot push a Spark
(one CPU+GPU memory pool) into the OOM it would otherwise be blamed for.

The loop keeps the GPU queue full: batches of GEMMs sized to ~50 ms, each between two CUDA
events, waiting only on the batch two behind. At each window's end it drains the queue once
and reports throughput (FLOPs done / wall time) and the busy fraction (GPU time inside the
batches / wall time: below 1 means the GPU waited for the host).

In the worker: ``worker.call("spark_gotchas.microbench.soak_load:run", {"seconds": 60, "window_s": 5})``;
each window goes to ``progress`` (the worker passes its own, which streams it to the parent) and
the loop stops early once ``should_stop()`` (the worker's: SIGINT/SIGTERM). Alone:
``spark-gotchas microbench soak_load --seconds 30 --window 5`` (``--device cpu`` for a dry run
without a GPU; ``--backend cublas`` needs no torch).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Optional

from ._cli import ArgumentParser, in_span, parse_seconds, print_json, require_cuda, require_torch, say
from ._cublas import CublasUnavailable

MAX_SIZE = 8192
MIN_SIZE = 256
FREE_FRACTION = 0.05  # never more than this share of free device memory
BATCH_S = 0.05  # target GPU time per batch between events


def choose_size(free_bytes: Optional[int], device: str, itemsize: int = 2) -> int:
    """Largest power-of-two N <= 8192 whose three N x N matrices fit in 5% of free memory."""
    if device == "cpu":
        return 512  # a dry run: a few tens of ms per GEMM on two cores
    n = MAX_SIZE
    budget = FREE_FRACTION * free_bytes if free_bytes else 0
    while n > MIN_SIZE and 3 * n * n * itemsize > budget:
        n //= 2
    return n


def _rss_bytes() -> Optional[int]:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


class TorchGemm:
    """N x N GEMMs through torch (``torch.matmul``), on a CUDA device or the CPU (a dry run)."""

    def __init__(self, dtype: str, device: str):
        import torch

        self.torch = torch
        self.dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
        self.itemsize = torch.tensor([], dtype=self.dt).element_size()
        self.events_time_the_gpu = device.startswith("cuda")
        self.name, self.free_bytes, self.device, self.library = "cpu", None, device, "torch"
        if self.events_time_the_gpu:
            torch.cuda.init()
            dev = torch.device(device)
            if dev.index is None:
                dev = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(dev)  # events and streams below belong to this device
            self.device = str(dev)
            self.name = torch.cuda.get_device_name(dev)
            self.free_bytes, _total = torch.cuda.mem_get_info(dev.index)
        self.n = 0

    def allocate(self, n: int) -> None:
        torch = self.torch
        self.n = n
        gen = torch.Generator(device=self.device).manual_seed(0)
        self.a = torch.randn(n, n, device=self.device, dtype=self.dt, generator=gen)
        self.b = torch.randn(n, n, device=self.device, dtype=self.dt, generator=gen)
        self.c = torch.empty(n, n, device=self.device, dtype=self.dt)

    def gemm(self) -> None:
        self.torch.matmul(self.a, self.b, out=self.c)

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        if self.events_time_the_gpu:
            self.torch.cuda.synchronize(self.device)

    def close(self) -> None:
        self.a = self.b = self.c = None


def open_gemm(backend: str, dtype: str, device: str):
    """The GEMM backend: "torch", or "cublas" (ctypes, no torch import; device 0 only)."""
    if backend == "cublas":
        if device not in ("cuda", "cuda:0"):
            raise ValueError(f"the cublas backend runs on cuda:0 only, not {device}")
        from ._cublas import CublasGemm

        return CublasGemm(dtype)
    if backend != "torch":
        raise ValueError(f"unknown backend {backend!r}")
    return TorchGemm(dtype, device)


def run(seconds: float, window_s: float = 5.0, size: Optional[int] = None, dtype: str = "bf16",
        device: str = "cuda", backend: str = "torch", *, progress: Optional[Callable[[dict], None]] = None,
        should_stop: Optional[Callable[[], bool]] = None) -> dict[str, Any]:
    """Run the GEMM load for ``seconds`` (after a short warm-up); return its summary.

    Every window's figures go to ``progress`` as they happen, and the load ends early once
    ``should_stop()``. Times are ``time.time()`` epochs so the parent can line them up with its
    samples. ``backend="cublas"`` drives cuBLAS through ctypes without importing torch (the G4
    spot check, while the worker imports torch); it raises ``CublasUnavailable`` where it cannot.
    """
    g = open_gemm(backend, dtype, device)
    try:
        return _load(g, seconds, window_s, size, dtype, should_stop or (lambda: False), progress or (lambda w: None))
    finally:
        g.close()


def _load(g, seconds, window_s, size, dtype, stop, progress) -> dict[str, Any]:
    cuda = g.events_time_the_gpu
    name = g.name
    n = int(size or choose_size(g.free_bytes, "cuda" if cuda else "cpu", g.itemsize))
    flop = 2.0 * n ** 3
    g.allocate(n)
    sync = g.synchronize
    # Warm-up: cuBLAS picks its kernel on the first call; then time a few to size the batches.
    g.gemm()
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        g.gemm()
    sync()
    per_gemm = max((time.perf_counter() - t0) / 3, 1e-6)
    batch = max(1, int(BATCH_S / per_gemm))

    windows: list[dict] = []
    total_gemms = 0
    busy_total = 0.0
    start = time.time()
    end_at = start + seconds
    stopped = False
    while time.time() < end_at and not stopped:
        w_start = time.time()
        w_end = min(w_start + window_s, end_at)
        gemms, busy = 0, 0.0
        pending: deque = deque()
        while time.time() < w_end:
            if stop():
                stopped = True
                break
            if cuda:
                ev0, ev1 = g.event(), g.event()
                ev0.record()
                for _ in range(batch):
                    g.gemm()
                ev1.record()
                pending.append((ev0, ev1))
                if len(pending) > 2:  # keep two batches queued, never more
                    e0, e1 = pending.popleft()
                    e1.synchronize()
                    busy += e0.elapsed_time(e1) / 1000.0
            else:
                t = time.perf_counter()
                for _ in range(batch):
                    g.gemm()
                busy += time.perf_counter() - t
            gemms += batch
        sync()
        for e0, e1 in pending:
            busy += e0.elapsed_time(e1) / 1000.0
        now = time.time()
        wall = max(now - w_start, 1e-9)
        if gemms:
            window = {
                "window": len(windows),
                "device": name,
                "size": n,
                "dtype": dtype,
                "t_end_epoch": now,
                "seconds": wall,
                "gemms": gemms,
                "tflops": gemms * flop / wall / 1e12,
                "busy_fraction": min(1.0, busy / wall),
                "rss_bytes": _rss_bytes(),
            }
            windows.append(window)
            total_gemms += gemms
            busy_total += busy
            progress(window)
    finish = time.time()
    elapsed = max(finish - start, 1e-9)
    return {
        "device": name,
        "backend": g.library,
        "size": n,
        "dtype": dtype,
        "batch": batch,
        "flop_per_gemm": flop,
        "t_start_epoch": start,
        "t_end_epoch": finish,
        "seconds": elapsed,
        "gemms": total_gemms,
        "tflops": total_gemms * flop / elapsed / 1e12,
        "busy_fraction": min(1.0, busy_total / elapsed),
        "stopped_early": stopped,
        "windows": windows[-1000:],
    }


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="spark-gotchas microbench soak_load", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=in_span(1, 7 * 86400, "seconds", parse=parse_seconds), default=30.0, help="how long to load, e.g. 30s, 5m (default 30s)")
    parser.add_argument("--window", type=in_span(0.05, 3600, "seconds"), default=5.0, help="seconds per throughput window (default 5)")
    parser.add_argument("--size", type=in_span(16, 1 << 17, integer=True), default=None, help="matrix size N (default: sized from free memory)")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1 … or cpu (a dry run)")
    parser.add_argument("--backend", default="torch", choices=("torch", "cublas"),
                        help="torch (default) or cublas: cuBLAS through ctypes, without importing torch (cuda:0 only)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    halt = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: halt.set())
    signal.signal(signal.SIGTERM, lambda *_: halt.set())

    def show(w: dict) -> None:
        say(f"window {w['window']:3d}: {w['tflops']:8.2f} TFLOP/s, busy {w['busy_fraction']:.1%}, {w['seconds']:.2f} s")

    if args.backend == "torch" and not (require_cuda() if args.device.startswith("cuda") else require_torch()):
        return 2
    try:
        summary = run(args.seconds, args.window, args.size, args.dtype, args.device, backend=args.backend,
                      progress=None if args.json else show, should_stop=halt.is_set)
    except CublasUnavailable as exc:
        say(f"the cublas backend cannot run here: {exc}", err=True)
        return 1
    except ValueError as exc:  # a backend or device the load does not offer
        say(f"soak_load: {exc}", err=True)
        return 2
    if args.json:
        summary = {k: v for k, v in summary.items() if k != "windows"}
        print_json(summary)
    else:
        say(f"{summary['device']}: {summary['dtype']} {summary['size']}^3 GEMM for {summary['seconds']:.1f} s: "
            f"{summary['tflops']:.2f} TFLOP/s, busy {summary['busy_fraction']:.1%}"
            + (" (stopped early)" if summary["stopped_early"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
