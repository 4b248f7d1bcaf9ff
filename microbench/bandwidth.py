"""Device-memory bandwidth: read (a reduction), write (a fill), copy and triad, in GB/s.

Why: memory-bound work (decode above all) is planned from a bandwidth figure, and public
figures for one GPU differ by 40% because people measure different things. Each result here
names what it counted:

    read   one array read (a sum into per-program partials)          bytes = 1 x array
    write  one array written (a fill)                                  bytes = 1 x array
    copy   one array read and one written (b -> a)                     bytes = 2 x array
    triad  two arrays read and one written (a = b + s * c)             bytes = 3 x array

GB/s are 10**9 bytes per second at the median repetition (``gbps``) and at the fastest
(``gbps_best``, what BabelStream reports). Arrays are fp32, many times the L2 (so the
figure is DRAM, not cache; no L2 flush is needed or wanted: a flush leaves dirty lines that
the next timed kernel would pay for) and at most a quarter of the free memory; on unified
memory (GB10) free means the smaller of cudaMemGetInfo and the kernel's MemAvailable. Every
kernel's output is checked once (outside the timing) against an exact expectation.

Kernels are CUDA C built into PTX (``stream_kernels.cu``), launched through the CUDA driver
(``_stream_cuda``): no torch and no Triton, so the suite runs the probe while torch imports. Where
the driver refuses them, Triton's (``_stream_triton``) where Triton imports, torch ops otherwise;
``references=True`` also times the torch ops so the two can be compared in one run.

Command line: ``spark-gotchas microbench bandwidth [--size-mb N] [--backend cuda|triton|torch]
[--references] [--tune] [--sweep] [--json]`` (or ``python -m spark_gotchas.microbench bandwidth …``). Nearest shell equivalents:
BabelStream (``cuda-stream --arraysize``), nvbandwidth.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from . import _stream_cuda
from ._cli import ArgumentParser, cut, first_line, in_span, print_json, require_cuda, say, shown
from ._stream_cuda import StreamConfig
from ._timing import Timing, TorchClock, bench
from .quantities import Bytes, Count, GBps, Seconds

METHODS = ("read", "write", "copy", "triad")
ARRAYS_COUNTED = {"read": 1, "write": 1, "copy": 2, "triad": 3}
ACCOUNTING = {
    "read": "1 array read",
    "write": "1 array written",
    "copy": "1 array read + 1 written",
    "triad": "2 arrays read + 1 written (a = b + s*c)",
}
TORCH_OPS = {  # the reference ops, per method; the first is the fallback implementation
    "read": ("torch.sum", "torch.amax"),
    "write": ("Tensor.fill_", "Tensor.zero_"),
    "copy": ("Tensor.copy_",),
    "triad": ("torch.add(b, c, alpha=s, out=a)",),
}
GIB = 1 << 30
MIB = 1 << 20
ELEMENT_BYTES = 4  # fp32
FAST_ARRAY_BYTES = GIB  # BabelStream's default-size comparison point
MIN_L2_MULTIPLE = 4  # below this the figure is partly cache
FAST_L2_MULTIPLE = 16
MEMORY_FRACTION = 0.25  # of free memory, for all three arrays together
SCALAR = 3.0
FILL_VALUE = 1.5
READ_REL_TOL = 1e-5


@dataclass(frozen=True)
class KernelConfig:
    """Tuning knobs of the Triton kernels (see ``_stream_triton``; the CUDA kernels' are ``StreamConfig``)."""

    block: int = 4096
    warps: int = 4
    programs_per_sm: int = 0  # 0: one program per tile; N: persistent grid of N programs per SM
    streaming: bool = False  # evict-first loads and streaming (.cs) stores
    stages: int = 0  # 0: Triton's default num_stages

    @property
    def label(self) -> str:
        grid = f"persistent {self.programs_per_sm}/SM" if self.programs_per_sm else "1 tile/program"
        extra = (" streaming" if self.streaming else "") + (f" stages={self.stages}" if self.stages else "")
        return f"triton BLOCK={self.block} warps={self.warps} {grid}{extra}"


# Defaults per method: reductions want a persistent grid (few partials, long streams per
# program); the element-wise kernels one tile per program. Retune with --tune.
# Picked from the tuning grid on an H200 (docs/benchmarks.md, 1 GiB arrays): the fastest
# configuration of each method, each at or above the best torch op in the same run.
DEFAULT_CONFIGS: dict[str, KernelConfig] = {
    "read": KernelConfig(block=4096, warps=4, streaming=True),
    "write": KernelConfig(block=1024, warps=8),
    "copy": KernelConfig(block=1024, warps=8),
    "triad": KernelConfig(block=1024, warps=8),
}
# The CUDA kernels' launch shapes, per method, picked as the Triton defaults were (docs/benchmarks.md):
# the fastest of CUDA_TUNE_GRID on an H200 at 1 GiB per array.
CUDA_CONFIGS: dict[str, StreamConfig] = {
    "read": StreamConfig(threads=128, vectors=8),
    "write": StreamConfig(threads=256, vectors=1),
    "copy": StreamConfig(threads=256, vectors=1),
    "triad": StreamConfig(threads=256, vectors=1),
}
CUDA_TUNE_GRID: tuple[StreamConfig, ...] = tuple(StreamConfig(threads=t, vectors=v)
                                                 for t in (128, 256, 512) for v in (1, 2, 4, 8))
TUNE_GRID: tuple[KernelConfig, ...] = tuple(
    KernelConfig(block=b, warps=w, programs_per_sm=p)
    for b in (1024, 4096, 8192) for w in (4, 8) for p in (0, 4)
) + (KernelConfig(block=4096, warps=4, streaming=True), KernelConfig(block=4096, warps=8, programs_per_sm=4,
                                                                      streaming=True))


@dataclass
class MethodResult:
    """One method measured by one implementation at one array size."""

    method: str
    implementation: str
    accounting: str
    array_bytes: Bytes
    bytes_per_call: Bytes
    gbps: Optional[GBps] = None  # at the median repetition
    gbps_best: Optional[GBps] = None  # at the fastest repetition
    timing: Optional[Timing] = None
    check: str = ""  # "ok", or what the output got wrong
    error: str = ""  # why there is no figure
    fallback: str = ""  # why the preferred implementation was not used
    first_call_seconds: Optional[Seconds] = None  # includes Triton's compilation when not cached
    role: str = "probe"  # "probe": the figure the suite judges; "reference": a torch op beside it

    @property
    def ok(self) -> bool:
        return self.gbps is not None and self.check == "ok"


@dataclass
class BandwidthResult:
    """What ``probe`` measured, and on what."""

    device: str
    capability: tuple[int, int]
    sms: Count
    l2_bytes: Optional[Bytes]
    unified_memory: bool
    array_bytes: Bytes
    sizing: str  # how array_bytes was chosen, in words
    mode: str  # "fast" | "sized" | "sweep"
    methods: list[MethodResult] = field(default_factory=list)  # the probe's figure per method
    references: list[MethodResult] = field(default_factory=list)  # torch ops, when asked
    backend: str = ""  # "cuda driver 13.0 (PTX kernels, no torch)" | "triton 3.6.0" | "torch (Triton not usable: …)"
    seconds: Seconds = 0.0  # the whole probe: setup, checks, timing
    setup_seconds: Seconds = 0.0  # allocation and initialisation
    compile_wait_seconds: Seconds = 0.0  # no longer measured (kernels compiled ahead by Triton); kept for old snapshots

    def method(self, name: str) -> Optional[MethodResult]:
        for result in self.methods:
            if result.method == name:
                return result
        return None

    def best_method(self) -> Optional[MethodResult]:
        measured = [m for m in self.methods if m.ok]
        return max(measured, key=lambda m: m.gbps or 0.0) if measured else None


@dataclass
class BandwidthSweep:
    """The probe over array sizes from below the L2 to the memory budget (soak)."""

    device: str
    l2_bytes: Optional[Bytes]
    unified_memory: bool
    points: list[MethodResult] = field(default_factory=list)
    sizes_bytes: list[Bytes] = field(default_factory=list)
    backend: str = ""
    seconds: Seconds = 0.0
    stopped_early: bool = False


@dataclass
class TuneResult:
    """Every Triton configuration of the tuning grid and every torch op, per method, at one size."""

    device: str
    array_bytes: int
    sizing: str
    triton: str  # its version, or "not usable: <why>"
    rows: list[MethodResult] = field(default_factory=list)


# -- sizing --------------------------------------------------------------------------------------
def available_bytes(free_device_bytes: int, mem_available_bytes: Optional[int], unified: bool) -> int:
    """What the probe may take from: on unified memory the smaller of CUDA's free and MemAvailable."""
    if unified and mem_available_bytes is not None:
        return min(free_device_bytes, mem_available_bytes)
    return free_device_bytes


def choose_array_bytes(l2_bytes: Optional[int], available: int, requested: Optional[int] = None,
                       fraction: float = MEMORY_FRACTION) -> tuple[int, str]:
    """Bytes per array and the reason in words. Raises ValueError when memory is too short."""
    l2 = l2_bytes or 0
    cap = int(available * fraction / 3)
    if requested:
        target, why = requested, f"{_human(requested)} per array as asked"
    else:
        target = max(FAST_ARRAY_BYTES, FAST_L2_MULTIPLE * l2)
        why = f"{_human(target)} per array ({target / l2:.0f}x the {_human(l2)} L2)" if l2 else \
            f"{_human(target)} per array"
    size = min(target, cap)
    size -= size % MIB
    if size < max(MIN_L2_MULTIPLE * l2, MIB):
        raise ValueError(f"not enough free memory for a bandwidth probe: {_human(available)} free, "
                         f"{fraction:.0%} of it gives {_human(cap)} per array, under {MIN_L2_MULTIPLE}x the "
                         f"{_human(l2)} L2")
    if size < target:
        why = f"{_human(size)} per array (capped at {fraction:.0%} of {_human(available)} free; {size / max(l2, 1):.0f}x L2)"
    return size, why


def _human(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


# -- the probe ----------------------------------------------------------------------------------
def _triton_version() -> tuple[Optional[str], str]:
    try:
        import triton

        from . import _stream_triton  # noqa: F401  (the kernels must at least define)
        return triton.__version__, ""
    except Exception as exc:  # ImportError, or a broken install
        return None, f"{type(exc).__name__}: {exc}"


class _Buffers:
    """a (output), b and c (inputs, random small integers so sums are exact), partial sums."""

    def __init__(self, torch: Any, n: int, device: str = "cuda"):
        self.torch = torch
        gen = torch.Generator(device=device)
        gen.manual_seed(0)
        self.n = n
        self.a = torch.zeros(n, dtype=torch.float32, device=device)
        self.b = torch.empty(n, dtype=torch.float32, device=device).random_(0, 16, generator=gen)
        self.c = torch.empty(n, dtype=torch.float32, device=device).random_(0, 16, generator=gen)
        self.partials = torch.empty(-(-n // 256), dtype=torch.float32, device=device)
        self.b_sum = float(torch.sum(self.b, dtype=torch.float64).item())
        self.b_max = float(self.b.max().item())

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "c": self.c, "partials": self.partials}


CHUNK = 1 << 26  # elements compared at a time (bounded temporaries)


def _first_difference(torch: Any, out: Any, expected: Callable[[slice], Any], n: int) -> str:
    """'' when ``out`` equals ``expected`` chunk by chunk, else the first differing element."""
    for start in range(0, n, CHUNK):
        sl = slice(start, min(n, start + CHUNK))
        want = expected(sl)
        differs = out[sl] != want
        if bool(differs.any()):
            i = int(differs.nonzero()[0].item())
            want_i = want if isinstance(want, float) else float(want[i].item())
            return f"element {start + i} is {float(out[start + i].item())}, expected {want_i}"
    return ""


def check(torch: Any, method: str, bufs: _Buffers, out: Any, expect: Optional[float]) -> str:
    """``"ok"`` or what is wrong with the output of one run of ``method``.

    read: the sum of the partial sums (or the reduction's scalar) must equal ``expect``
    within READ_REL_TOL; write: every element equals ``expect``; copy: a == b; triad:
    a == b + s*c exactly (small integers, so no rounding is involved).
    """
    n = bufs.n
    if method == "read":
        value = float(out.sum(dtype=torch.float64).item())
        if expect is None or not abs(value - expect) <= READ_REL_TOL * max(abs(expect), 1.0):  # NaN fails
            return f"reduction gave {value:.9g}, expected {expect:.9g}"
        return "ok"
    if method == "write":
        wrong = _first_difference(torch, bufs.a, lambda sl: float(expect), n)
    elif method == "copy":
        wrong = _first_difference(torch, bufs.a, lambda sl: bufs.b[sl], n)
    elif method == "triad":
        wrong = _first_difference(torch, bufs.a, lambda sl: torch.add(bufs.b[sl], bufs.c[sl], alpha=SCALAR), n)
    else:
        raise ValueError(f"unknown method {method!r}")
    return wrong or "ok"


def _torch_op(torch: Any, op: str, bufs: _Buffers) -> tuple[str, Callable[[], Any], Optional[float]]:
    """(method, function, expected value) for a reference op name of TORCH_OPS."""
    a, b, c = bufs.a, bufs.b, bufs.c
    if op == "torch.sum":
        return "read", (lambda: torch.sum(b)), bufs.b_sum
    if op == "torch.amax":
        return "read", (lambda: torch.amax(b)), bufs.b_max
    if op == "Tensor.fill_":
        return "write", (lambda: a.fill_(FILL_VALUE)), FILL_VALUE
    if op == "Tensor.zero_":
        return "write", (lambda: a.zero_()), 0.0
    if op == "Tensor.copy_":
        return "copy", (lambda: a.copy_(b)), None
    if op.startswith("torch.add"):
        return "triad", (lambda: torch.add(b, c, alpha=SCALAR, out=a)), None
    raise ValueError(f"unknown torch op {op!r}")


def _measure(torch: Any, method: str, label: str, fn: Callable[[], Any], bufs: _Buffers, expect: Optional[float],
             warmup_ms: float, rep_ms: float, clock: Any = None) -> MethodResult:
    """Check one run of ``fn`` (outputs reset first), then time it; failures become fields."""
    clock = clock or TorchClock()
    array_bytes = bufs.n * ELEMENT_BYTES
    result = MethodResult(method=method, implementation=label, accounting=ACCOUNTING[method],
                          array_bytes=array_bytes, bytes_per_call=ARRAYS_COUNTED[method] * array_bytes)
    try:
        bufs.a.fill_(-1.0)  # outputs start wrong, so a kernel that skips work cannot pass its check
        bufs.partials.fill_(float("nan"))
        t0 = time.perf_counter()
        out = fn()
        clock.synchronize()
        result.first_call_seconds = time.perf_counter() - t0
        result.check = check(torch, method, bufs, out, expect)
        if result.check != "ok":
            return result
        timing = bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, clock=clock)
    except Exception as exc:  # a Triton compile error, CUDA OOM …: a reading, not a crash
        result.error = cut((f"{type(exc).__name__}: {exc}".strip().splitlines() or [""])[0], 300)
        return result
    result.timing = timing
    result.gbps = timing.rate(result.bytes_per_call) / 1e9
    result.gbps_best = timing.rate(result.bytes_per_call, at="min") / 1e9
    return result


def _triton_result(torch: Any, method: str, config: KernelConfig, bufs: _Buffers, sms: int,
                   warmup_ms: float, rep_ms: float, clock: Any = None) -> MethodResult:
    from . import _stream_triton

    try:
        run, _grid = _stream_triton.launcher(method, config, sms, bufs.as_dict(), SCALAR, FILL_VALUE)
    except Exception as exc:
        return MethodResult(method, config.label, ACCOUNTING[method], bufs.n * ELEMENT_BYTES,
                            ARRAYS_COUNTED[method] * bufs.n * ELEMENT_BYTES, error=f"{type(exc).__name__}: {exc}")
    expect = {"read": bufs.b_sum, "write": FILL_VALUE}.get(method)
    return _measure(torch, method, config.label, run, bufs, expect, warmup_ms, rep_ms, clock)


def _torch_result(torch: Any, op: str, bufs: _Buffers, warmup_ms: float, rep_ms: float,
                  clock: Any = None) -> MethodResult:
    method, fn, expect = _torch_op(torch, op, bufs)
    return _measure(torch, method, op, fn, bufs, expect, warmup_ms, rep_ms, clock)


def _budget(free_bytes: int, integrated: bool, unified_memory: Optional[bool]) -> dict:
    """``unified_memory`` (asked, else the device's word) and the bytes the probe may take from."""
    unified = bool(unified_memory) if unified_memory is not None else bool(integrated)
    mem_available = None
    if unified:
        try:
            import psutil

            mem_available = int(psutil.virtual_memory().available)
        except Exception:
            mem_available = None
    return {"unified_memory": unified, "available": available_bytes(int(free_bytes), mem_available, unified)}


def _device_facts(torch: Any, unified_memory: Optional[bool]) -> dict:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    free, _total = torch.cuda.mem_get_info()
    return {
        "device": props.name,
        "capability": (props.major, props.minor),
        "sms": int(props.multi_processor_count),
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
        **_budget(free, bool(getattr(props, "is_integrated", False)), unified_memory),
    }


def _new_result(facts: dict, array_bytes: int, sizing: str, mode: str, backend: str, setup: float) -> BandwidthResult:
    return BandwidthResult(
        device=facts["device"], capability=facts["capability"], sms=facts["sms"], l2_bytes=facts["l2_bytes"],
        unified_memory=facts["unified_memory"], array_bytes=array_bytes, sizing=sizing, mode=mode,
        backend=cut(backend, 400), setup_seconds=setup)


def _cuda_first(backend: str, device: str, clock: Any) -> bool:
    """Whether the CUDA driver's kernels are tried first: asked for (or "auto") on a real GPU."""
    return backend in ("auto", "cuda") and clock is None and device.startswith("cuda")


def _cuda_refused(backend: str, exc: Exception) -> str:
    """Why the driver's kernels are not used, for the backend text; an error where they were asked for."""
    if backend == "cuda":
        raise RuntimeError(f"the CUDA driver's kernels asked for but not usable: {exc}") from None
    return f"CUDA driver kernels not usable: {exc}"


def probe(
    mode: str = "fast",
    size_mb: Optional[float] = None,
    backend: str = "auto",
    references: bool = False,
    methods: tuple[str, ...] | list[str] = METHODS,
    warmup_ms: float = 10.0,
    rep_ms: float = 50.0,
    unified_memory: Optional[bool] = None,
    fraction: float = MEMORY_FRACTION,
    configs: Optional[dict[str, dict]] = None,
    *,
    device: str = "cuda",
    clock: Any = None,
) -> BandwidthResult:
    """Measure each method once at one array size.

    ``backend``: "auto" (the CUDA driver's kernels, else Triton where it imports, else torch ops),
    "cuda", "triton" or "torch". ``configs``: per-method fields overriding the backend's defaults
    (CUDA_CONFIGS or DEFAULT_CONFIGS). ``device`` and ``clock`` exist for the suite's tests (CPU
    tensors, a wall clock): they take the torch path.
    """
    note = ""
    if _cuda_first(backend, device, clock):
        try:
            result = probe_cuda(mode, size_mb, methods, warmup_ms, rep_ms, unified_memory, fraction, configs)
        except _stream_cuda.CudaUnavailable as exc:
            note = _cuda_refused(backend, exc)
        else:
            if references:
                result.references = _torch_references(result.array_bytes, methods, warmup_ms, rep_ms)
            return result
    import torch

    t0 = time.perf_counter()
    clock = clock or TorchClock()
    facts = _device_facts(torch, unified_memory)
    requested = int(size_mb * MIB) if size_mb else None
    array_bytes, sizing = choose_array_bytes(facts["l2_bytes"], facts["available"], requested, fraction)
    use_triton, backend_text = _pick_backend("auto" if backend == "cuda" else backend)
    bufs = _Buffers(torch, array_bytes // ELEMENT_BYTES, device)
    clock.synchronize()
    setup = time.perf_counter() - t0
    result = _new_result(facts, array_bytes, sizing, "sized" if requested else mode,
                         f"{backend_text}{f' ({note})' if note else ''}", setup)
    try:
        for method in methods:
            result.methods.append(_preferred(torch, method, use_triton, bufs, facts["sms"], warmup_ms, rep_ms,
                                             _config(method, configs), clock))
        if references:
            for method in methods:
                for op in TORCH_OPS[method]:
                    result.references.append(_reference(torch, op, bufs, warmup_ms, rep_ms, clock))
    finally:
        del bufs
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    result.seconds = time.perf_counter() - t0
    return result


# -- through the CUDA driver (no torch) -----------------------------------------------------------
def _cuda_config(method: str, configs: Optional[dict[str, dict]]) -> StreamConfig:
    base = CUDA_CONFIGS[method]
    if configs and method in configs:
        return replace(base, **configs[method])
    return base


def _cuda_measure(arrays: Any, method: str, config: StreamConfig, warmup_ms: float, rep_ms: float) -> MethodResult:
    """Check one run of ``method``'s kernel (outputs reset first), then time it; failures become fields."""
    array_bytes = arrays.n * ELEMENT_BYTES
    result = MethodResult(method=method, implementation=config.label, accounting=ACCOUNTING[method],
                          array_bytes=array_bytes, bytes_per_call=ARRAYS_COUNTED[method] * array_bytes)
    dev = arrays.dev
    try:
        run, blocks = _stream_cuda.method_launcher(arrays, method, config, SCALAR, FILL_VALUE)
        arrays.reset(blocks if method == "read" else 0)
        t0 = time.perf_counter()
        run()
        dev.synchronize()
        result.first_call_seconds = time.perf_counter() - t0
        result.check = _stream_cuda.check(arrays, method, blocks, SCALAR, FILL_VALUE)
        if result.check != "ok":
            return result
        timing = bench(run, warmup_ms=warmup_ms, rep_ms=rep_ms, clock=dev)
    except Exception as exc:  # a launch error, an illegal address …: a reading, not a crash
        result.error = first_line(exc, 300)
        return result
    result.timing = timing
    result.gbps = timing.rate(result.bytes_per_call) / 1e9
    result.gbps_best = timing.rate(result.bytes_per_call, at="min") / 1e9
    return result


def _cuda_facts(dev: Any, unified_memory: Optional[bool]) -> dict:
    f = dev.facts
    return {**f, **_budget(f["free_bytes"], f["integrated"], unified_memory),
            "backend": f"cuda driver {f['driver_cuda']} (PTX kernels, no torch)"}


def probe_cuda(
    mode: str = "fast",
    size_mb: Optional[float] = None,
    methods: tuple[str, ...] | list[str] = METHODS,
    warmup_ms: float = 10.0,
    rep_ms: float = 50.0,
    unified_memory: Optional[bool] = None,
    fraction: float = MEMORY_FRACTION,
    configs: Optional[dict[str, dict]] = None,
) -> BandwidthResult:
    """:func:`probe` through the CUDA driver alone, in a process that need not import torch (the
    suite's load worker, while the GPU worker imports it). Raises ``CudaUnavailable`` when the
    driver, the device or the PTX cannot be used; a method that fails says so in its result."""
    t0 = time.perf_counter()
    chosen = {m: _cuda_config(m, configs) for m in methods}
    with _stream_cuda.open_device(tuple(sorted({c.vectors for c in chosen.values()}))) as dev:
        facts = _cuda_facts(dev, unified_memory)
        requested = int(size_mb * MIB) if size_mb else None
        array_bytes, sizing = choose_array_bytes(facts["l2_bytes"], facts["available"], requested, fraction)
        arrays = _stream_cuda.StreamArrays(dev, array_bytes // ELEMENT_BYTES)
        dev.synchronize()
        result = _new_result(facts, array_bytes, sizing, "sized" if requested else mode, facts["backend"],
                             time.perf_counter() - t0)
        result.methods = [_cuda_measure(arrays, method, chosen[method], warmup_ms, rep_ms) for method in methods]
    result.seconds = time.perf_counter() - t0
    return result


def _torch_references(array_bytes: int, methods: tuple[str, ...] | list[str], warmup_ms: float,
                      rep_ms: float, first_only: bool = False) -> list[MethodResult]:
    """Every torch op of TORCH_OPS (or each method's first) on arrays of ``array_bytes``, to compare with."""
    import torch

    bufs = _Buffers(torch, array_bytes // ELEMENT_BYTES)
    try:
        return [_reference(torch, op, bufs, warmup_ms, rep_ms) for m in methods
                for op in (TORCH_OPS[m][:1] if first_only else TORCH_OPS[m])]
    finally:
        del bufs
        torch.cuda.empty_cache()


def _reference(torch: Any, op: str, bufs: _Buffers, warmup_ms: float, rep_ms: float, clock: Any = None) -> MethodResult:
    result = _torch_result(torch, op, bufs, warmup_ms, rep_ms, clock)
    result.role = "reference"
    return result


def _config(method: str, configs: Optional[dict[str, dict]]) -> KernelConfig:
    base = DEFAULT_CONFIGS[method]
    if configs and method in configs:
        return replace(base, **configs[method])
    return base


def _pick_backend(backend: str) -> tuple[bool, str]:
    if backend == "torch":
        return False, "torch (asked for)"
    version, why = _triton_version()
    if version is None:
        if backend == "triton":
            raise RuntimeError(f"Triton asked for but not usable: {why}")
        return False, f"torch (Triton not usable: {why})"
    return True, f"triton {version}"


def _preferred(torch, method, use_triton, bufs, sms, warmup_ms, rep_ms, config, clock=None) -> MethodResult:
    """The Triton kernel when asked and it works, else the first torch op (saying why)."""
    if use_triton:
        res = _triton_result(torch, method, config, bufs, sms, warmup_ms, rep_ms, clock)
        if res.ok:
            return res
        why = res.error or f"wrong result: {res.check}"
        fallback = _torch_result(torch, TORCH_OPS[method][0], bufs, warmup_ms, rep_ms, clock)
        fallback.fallback = f"{config.label} failed: {why}"
        return fallback
    return _torch_result(torch, TORCH_OPS[method][0], bufs, warmup_ms, rep_ms, clock)


def tune(size_mb: Optional[float] = None, methods: tuple[str, ...] | list[str] = METHODS,
         grid: Optional[list[dict]] = None, warmup_ms: float = 10.0, rep_ms: float = 60.0,
         unified_memory: Optional[bool] = None, backend: str = "auto") -> TuneResult:
    """Every CUDA launch shape of CUDA_TUNE_GRID, every Triton configuration of ``grid`` (default
    TUNE_GRID) and every torch op, per method, at one size (``backend`` "cuda" or "triton": that
    backend's grid only, with the torch ops)."""
    import torch

    facts = _device_facts(torch, unified_memory)
    array_bytes, sizing = choose_array_bytes(facts["l2_bytes"], facts["available"],
                                             int(size_mb * MIB) if size_mb else None)
    rows: list[MethodResult] = []
    if backend in ("auto", "cuda"):
        try:
            with _stream_cuda.open_device(tuple(sorted({c.vectors for c in CUDA_TUNE_GRID}))) as dev:
                arrays = _stream_cuda.StreamArrays(dev, array_bytes // ELEMENT_BYTES)
                rows += [_cuda_measure(arrays, m, cfg, warmup_ms, rep_ms) for m in methods for cfg in CUDA_TUNE_GRID]
        except _stream_cuda.CudaUnavailable as exc:
            rows += [MethodResult(m, "cuda", ACCOUNTING[m], array_bytes, ARRAYS_COUNTED[m] * array_bytes,
                                  error=str(exc)) for m in methods]
    version, why = _triton_version() if backend in ("auto", "triton") else (None, f"not asked for (backend {backend})")
    configs = [KernelConfig(**g) for g in grid] if grid else list(TUNE_GRID)
    bufs = _Buffers(torch, array_bytes // ELEMENT_BYTES)
    try:
        for method in methods:
            if version is not None:
                rows += [_triton_result(torch, method, cfg, bufs, facts["sms"], warmup_ms, rep_ms) for cfg in configs]
            rows += [_reference(torch, op, bufs, warmup_ms, rep_ms) for op in TORCH_OPS[method]]
    finally:
        del bufs
        torch.cuda.empty_cache()
    return TuneResult(device=facts["device"], array_bytes=array_bytes, sizing=sizing,
                      triton=version or f"not usable: {why}", rows=rows)


def sweep_sizes(l2_bytes: Optional[int], available: int, fraction: float = MEMORY_FRACTION) -> list[int]:
    """Array sizes for the sweep: half the L2 up to the memory budget, doubling (MiB multiples)."""
    l2 = l2_bytes or 32 * MIB
    cap = int(available * fraction / 3)
    sizes, size = [], max(MIB, (l2 // 2) - (l2 // 2) % MIB)
    while size <= cap and len(sizes) < 14:
        sizes.append(size)
        size *= 2
    return sizes


def sweep(backend: str = "auto", references: bool = True, warmup_ms: float = 10.0, rep_ms: float = 100.0,
          unified_memory: Optional[bool] = None, max_seconds: float = 300.0, *,
          progress: Optional[Callable[[Any], None]] = None, should_stop: Optional[Callable[[], bool]] = None,
          device: str = "cuda", clock: Any = None) -> BandwidthSweep:
    """The probe at every size of :func:`sweep_sizes`; ``progress`` gets one line per size, and the
    sweep ends early (``stopped_early``) once ``should_stop()`` says so or ``max_seconds`` pass.
    ``backend`` as :func:`probe`'s; the torch references (the first op of each method) need torch."""
    t0 = time.perf_counter()
    dev, note, torch = None, "", None
    if _cuda_first(backend, device, clock):
        try:
            dev = _stream_cuda.open_device(tuple(sorted({c.vectors for c in CUDA_CONFIGS.values()})))
        except _stream_cuda.CudaUnavailable as exc:
            note = f" ({_cuda_refused(backend, exc)})"
    with dev if dev is not None else contextlib.nullcontext():
        if dev is not None:
            facts = _cuda_facts(dev, unified_memory)
            use_triton, backend_text = False, facts["backend"]
        else:
            import torch

            clock = clock or TorchClock()
            facts = _device_facts(torch, unified_memory)
            use_triton, backend_text = _pick_backend("auto" if backend == "cuda" else backend)
        out = BandwidthSweep(device=facts["device"], l2_bytes=facts["l2_bytes"],
                             unified_memory=facts["unified_memory"], backend=cut(f"{backend_text}{note}", 400))
        for size in sweep_sizes(facts["l2_bytes"], facts["available"]):
            if (should_stop is not None and should_stop()) or time.perf_counter() - t0 > max_seconds:
                out.stopped_early = True
                break
            if dev is not None:
                arrays = _stream_cuda.StreamArrays(dev, size // ELEMENT_BYTES)
                try:
                    row = [_cuda_measure(arrays, m, CUDA_CONFIGS[m], warmup_ms, rep_ms) for m in METHODS]
                finally:
                    arrays.free()
                if references:
                    row += _torch_references(size, METHODS, warmup_ms, rep_ms, first_only=True)
            else:
                row = _torch_row(torch, size, use_triton, facts["sms"], references, warmup_ms, rep_ms, device, clock)
            out.points += row
            out.sizes_bytes.append(size)
            if progress is not None:
                progress({"array_bytes": size, "gbps": {r.method: r.gbps for r in row[:len(METHODS)]}})
    out.seconds = time.perf_counter() - t0
    return out


def _torch_row(torch: Any, size: int, use_triton: bool, sms: int, references: bool, warmup_ms: float,
               rep_ms: float, device: str, clock: Any) -> list[MethodResult]:
    """The sweep's row at one size through torch: each method (Triton or torch op), the references."""
    bufs = _Buffers(torch, size // ELEMENT_BYTES, device)
    try:
        row = [_preferred(torch, m, use_triton, bufs, sms, warmup_ms, rep_ms, DEFAULT_CONFIGS[m], clock)
               for m in METHODS]
        if references:
            row += [_reference(torch, TORCH_OPS[m][0], bufs, warmup_ms, rep_ms, clock) for m in METHODS]
        return row
    finally:
        del bufs
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


# -- command line -------------------------------------------------------------------------------
def format_rows(rows: list[MethodResult]) -> list[str]:
    lines = [f"{'method':<6} {'GB/s':>8} {'best':>8} {'p20-p80 ms':>17}  {'counts':<40} implementation"]
    for r in rows:
        if r.gbps is None:
            lines.append(f"{r.method:<6} {'-':>8} {'-':>8} {'':>17}  {r.accounting:<40} {r.implementation}: "
                         f"{r.error or r.check}")
            continue
        q = r.timing.quantiles_ms if r.timing else {}
        spread = f"{q.get('0.2', 0):.3f}-{q.get('0.8', 0):.3f}"
        note = f"  (fallback: {r.fallback})" if r.fallback else ""
        lines.append(f"{r.method:<6} {r.gbps:>8.1f} {r.gbps_best or 0:>8.1f} {spread:>17}  {r.accounting:<40} "
                     f"{r.implementation}{note}")
    return lines


def format_result(res: BandwidthResult) -> str:
    head = (f"bandwidth on {res.device} (cc {res.capability[0]}.{res.capability[1]}, {res.sms} SMs, "
            f"L2 {_human(res.l2_bytes or 0)}{', unified memory' if res.unified_memory else ''}); {res.sizing}; "
            f"{res.backend}")
    lines = [head, *format_rows(res.methods)]
    if res.references:
        lines += ["torch reference ops, same run:", *format_rows(res.references)]
    lines.append(f"probe {res.seconds:.2f} s (setup {res.setup_seconds:.2f} s); GB = 1e9 bytes")
    return "\n".join(map(shown, lines))  # a device name or error holding a line break stays on its line


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="spark-gotchas microbench bandwidth", description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=in_span(0.001, 1 << 20, "MiB"), help="MiB per array (default: 1 GiB or 16x L2, within the budget)")
    parser.add_argument("--backend", choices=("auto", "cuda", "triton", "torch"), default="auto",
                        help="auto: the CUDA driver's kernels, else Triton, else torch ops; cuda alone (without "
                             "--references, --tune, --sweep) needs no torch")
    parser.add_argument("--references", action="store_true", help="also time the torch reference ops")
    parser.add_argument("--tune", action="store_true", help="time every CUDA and Triton configuration of the tuning grids")
    parser.add_argument("--sweep", action="store_true", help="array sizes from L2/2 to the memory budget")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    parser.add_argument("--warmup-ms", type=in_span(0, 60_000, "ms"), default=10.0)
    parser.add_argument("--rep-ms", type=in_span(1, 600_000, "ms"), default=50.0)
    parser.add_argument("--unified-memory", action="store_true", default=None,
                        help="size from MemAvailable too (automatic on integrated GPUs)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(shown(f"unknown method(s) {unknown}; choose from {METHODS}"))
    torch_free = args.backend == "cuda" and not (args.references or args.tune or args.sweep)
    if not torch_free and not require_cuda():
        return 2
    if torch_free:  # the CUDA driver alone: no torch needed, none imported
        try:
            result = probe("fast", args.size_mb, "cuda", False, methods, args.warmup_ms, args.rep_ms,
                           args.unified_memory)
        except (RuntimeError, ValueError) as exc:  # no driver, no device, PTX refused, memory too short
            say(f"bandwidth: {exc}", err=True)
            return 1
        if args.json:
            print_json(result)
        else:
            say(*format_result(result).split("\n"))
        return 0
    if args.tune:
        tuned = tune(args.size_mb, methods, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
                     unified_memory=args.unified_memory, backend=args.backend)
        if args.json:
            print_json(tuned)
        else:
            say(f"tuning on {tuned.device}: {tuned.sizing}; triton {tuned.triton}")
            for method in methods:
                mine = sorted((r for r in tuned.rows if r.method == method), key=lambda r: -(r.gbps or 0))
                say(*format_rows(mine))
        return 0
    if args.sweep:
        swept = sweep(args.backend, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, unified_memory=args.unified_memory,
                      progress=None if args.json else _print_point)
        if args.json:
            print_json(swept)
        else:
            say(f"sweep on {swept.device}: {swept.backend}, {swept.seconds:.1f} s",
                *format_rows(sorted(swept.points, key=lambda r: (r.method, r.array_bytes))))
        return 0
    result = probe("fast", args.size_mb, args.backend, args.references, methods, args.warmup_ms, args.rep_ms,
                   args.unified_memory)
    if args.json:
        print_json(result)
    else:
        say(*format_result(result).split("\n"))
    return 0


def _print_point(point: dict) -> None:
    figures = ", ".join(f"{m} {v:.0f}" for m, v in point["gbps"].items() if v is not None)
    say(f"{point['array_bytes'] / MIB:.0f} MiB per array: {figures} GB/s")
