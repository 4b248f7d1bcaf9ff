"""Dense GEMM rate per precision: BF16, FP8 (e4m3) and NVFP4 (e2m1, block-scaled), in TFLOP/s.

Why: G7. Switching from FP8 to NVFP4 only pays if this GPU and this build run FP4 on the
tensor cores. This times ``C = A @ B`` (M = N = K = size, TFLOP/s = 2*M*N*K / median time)
through torch's own entry points on random data:

    bf16   torch.mm on bfloat16 operands
    fp8    torch._scaled_mm, A (M, K) row-major and B (K, N) column-major float8_e4m3fn,
           one float32 scale per tensor (amax / 448), bfloat16 output
    nvfp4  torch._scaled_mm, A (M, K/2) and B (N, K/2)^T packed float4_e2m1fn_x2 (two values
           a byte, the first in the low nibble), one float8_e4m3fn scale per 16 values along K
           in cuBLAS's swizzled 128x4 layout, bfloat16 output

Each output is checked against a float64 product of the same (dequantised) operands on a
256 x 256 corner, within the output format's tolerance. A precision this GPU or build cannot
run is a reading with torch's error text, not a crash.

``probe_cublas`` measures BF16 and FP8 the same way without importing torch, through cuBLAS and
cuBLASLt via ctypes (``_cublaslt``), so it runs while a process is still importing torch. It checks
32 output elements against float64 dot products on the host instead of a corner. Below compute
capability 10.0 there are no FP4 tensor cores and NVFP4 is a reading saying so; from 10.0 on it
raises ``CublasUnavailable``: NVFP4 is measured through torch there, and the NVFP4/FP8 ratio must
come from one path, so the caller runs ``probe`` for every precision.

Command line: ``spark-gotchas microbench gemm [--size 8192] [--precisions bf16,fp8,nvfp4]
[--backend torch|cublas] [--json]`` (or ``python -m spark_gotchas.microbench gemm …``).
"""

from __future__ import annotations

import importlib.metadata
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._cli import ArgumentParser, cut, in_span, print_json, require_cuda, say, shown
from ._cublas import CublasUnavailable
from ._timing import Timing, TorchClock, bench, l2_flusher
from .quantities import Count, Ratio, Seconds, TFlops

PRECISIONS = ("bf16", "fp8", "nvfp4")
E4M3_MAX = 448.0
NVFP4_BLOCK = 16
CHECK_CORNER = 256
# Relative Frobenius error allowed against the float64 product of the dequantised operands:
# every product of the operands is exact in fp32, so what is left is fp32 accumulation and
# the bfloat16 output's rounding (2**-9 relative).
TOLERANCE = {"bf16": 1e-2, "fp8": 1e-2, "nvfp4": 1e-2}
FP4_TENSOR_CORES = (10, 0)  # the first capability with FP4 MMA (Blackwell)
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


@dataclass
class PrecisionResult:
    """One precision at one size: its rate, or why it could not run."""

    precision: str
    supported: bool
    api: str = ""
    tflops: Optional[TFlops] = None  # at the median repetition
    tflops_best: Optional[TFlops] = None
    timing: Optional[Timing] = None
    rel_error: Optional[Ratio] = None  # against the float64 reference corner
    tolerance: Optional[Ratio] = None
    check: str = ""  # "ok" or what was wrong
    error: str = ""  # why unsupported / failed (torch's own words)

    @property
    def ok(self) -> bool:
        return self.supported and self.tflops is not None and self.check == "ok"


@dataclass
class GemmResult:
    device: str
    capability: tuple[int, int]
    torch: str
    torch_cuda: Optional[str]
    m: Count
    n: Count
    k: Count
    results: list[PrecisionResult] = field(default_factory=list)
    seconds: Seconds = 0.0
    backend: str = "torch"  # what measured it: "torch" (probe) or "cublas" (probe_cublas, no torch import)

    def get(self, precision: str) -> Optional[PrecisionResult]:
        for r in self.results:
            if r.precision == precision:
                return r
        return None


# -- layouts (pure torch, also run on CPU by the tests) -------------------------------------------
def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def to_blocked(scales: Any) -> Any:
    """Rearrange (rows, cols) block scales into cuBLAS's swizzled layout, flattened.

    Rows pad to multiples of 128 and columns to multiples of 4; each 128x4 tile is stored as
    32 rows of 16 bytes, row r holding tile rows r, r+32, r+64, r+96 (4 scales each).
    """
    import torch

    rows, cols = scales.shape
    n_row_blocks, n_col_blocks = ceil_div(rows, 128), ceil_div(cols, 4)
    padded = scales
    if (rows, cols) != (n_row_blocks * 128, n_col_blocks * 4):
        padded = torch.zeros((n_row_blocks * 128, n_col_blocks * 4), device=scales.device, dtype=scales.dtype)
        padded[:rows, :cols] = scales
    blocks = padded.view(n_row_blocks, 128, n_col_blocks, 4).permute(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def pack_e2m1(codes: Any) -> Any:
    """(rows, cols) 4-bit codes (uint8 0..15) -> (rows, cols/2) bytes, even column in the low nibble."""
    return (codes[:, 1::2] << 4) | codes[:, ::2]


def decode_e2m1(codes: Any) -> Any:
    """4-bit e2m1 codes -> float32 values (sign bit 8, then 2 exponent and 1 mantissa bit)."""
    import torch

    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    return table[codes.long()]


def rel_error(got: Any, want: Any) -> float:
    """||got - want|| / ||want|| (Frobenius), in float64."""
    got, want = got.double(), want.double()
    denom = float(want.norm())
    return float((got - want).norm()) / (denom if denom > 0 else 1.0)


# -- operands per precision -------------------------------------------------------------------------
def _bf16_case(torch: Any, m: int, n: int, k: int, gen: Any) -> tuple:
    a = torch.randn(m, k, device=gen.device, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(k, n, device=gen.device, dtype=torch.bfloat16, generator=gen)
    c = CHECK_CORNER

    def run():
        return torch.mm(a, b)

    def reference():
        return a[:c].double() @ b[:, :c].double()

    return run, reference, "torch.mm (bfloat16)", a.numel() * 2 + b.numel() * 2


def _fp8_case(torch: Any, m: int, n: int, k: int, gen: Any, fast_accum: bool) -> tuple:
    a_hp = torch.randn(m, k, device=gen.device, dtype=torch.bfloat16, generator=gen)
    b_hp = torch.randn(n, k, device=gen.device, dtype=torch.bfloat16, generator=gen)  # B^T, row-major
    scale_a = (a_hp.abs().amax().float() / E4M3_MAX).reshape(())
    scale_b = (b_hp.abs().amax().float() / E4M3_MAX).reshape(())
    a = (a_hp.float() / scale_a).to(torch.float8_e4m3fn)
    b_t = (b_hp.float() / scale_b).to(torch.float8_e4m3fn)
    del a_hp, b_hp
    b = b_t.t()  # (K, N) column-major, as cuBLASLt's FP8 kernels require
    c = CHECK_CORNER

    def run():
        return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                                use_fast_accum=fast_accum)

    def reference():
        ad = a[:c].float().double() * float(scale_a)
        bd = b_t[:c].float().double() * float(scale_b)
        return ad @ bd.t()

    api = "torch._scaled_mm (float8_e4m3fn, per-tensor scales" + (", fast accumulation)" if fast_accum else ")")
    return run, reference, api, a.numel() + b.numel()


def _nvfp4_case(torch: Any, m: int, n: int, k: int, gen: Any) -> tuple:
    if not hasattr(torch, "float4_e2m1fn_x2"):
        raise NotImplementedError(f"torch {torch.__version__} has no float4_e2m1fn_x2 dtype")
    if k % (2 * NVFP4_BLOCK):
        raise ValueError(f"NVFP4 needs K divisible by {2 * NVFP4_BLOCK}, got {k}")
    codes_a = torch.randint(0, 16, (m, k), device=gen.device, dtype=torch.uint8, generator=gen)
    codes_b = torch.randint(0, 16, (n, k), device=gen.device, dtype=torch.uint8, generator=gen)
    # scales are powers of two in e4m3 (exact), one per 16 values along K
    exp_a = torch.randint(-2, 3, (m, k // NVFP4_BLOCK), device=gen.device, generator=gen)
    exp_b = torch.randint(-2, 3, (n, k // NVFP4_BLOCK), device=gen.device, generator=gen)
    sa = torch.pow(2.0, exp_a.float()).to(torch.float8_e4m3fn)
    sb = torch.pow(2.0, exp_b.float()).to(torch.float8_e4m3fn)
    a = pack_e2m1(codes_a).view(torch.float4_e2m1fn_x2)  # (M, K/2)
    b = pack_e2m1(codes_b).view(torch.float4_e2m1fn_x2)  # (N, K/2)
    sa_blocked, sb_blocked = to_blocked(sa), to_blocked(sb)
    c = CHECK_CORNER
    corner_a = decode_e2m1(codes_a[:c]) * sa[:c].float().repeat_interleave(NVFP4_BLOCK, dim=1)
    corner_b = decode_e2m1(codes_b[:c]) * sb[:c].float().repeat_interleave(NVFP4_BLOCK, dim=1)
    del codes_a, codes_b

    def run():
        return torch._scaled_mm(a, b.t(), sa_blocked, sb_blocked, out_dtype=torch.bfloat16)

    def reference():
        return corner_a.double() @ corner_b.double().t()

    api = "torch._scaled_mm (float4_e2m1fn_x2, float8_e4m3fn scales per 16 values, swizzled)"
    return run, reference, api, a.numel() + b.numel()


# -- the probe ------------------------------------------------------------------------------------
def _one(torch: Any, precision: str, size: int, warmup_ms: float, rep_ms: float, fast_accum: bool,
         l2_bytes: int, clock: Any, device: str = "cuda") -> PrecisionResult:
    """One precision: build its operands, run once (unsupported formats raise there), check the
    corner against float64, then time it; every failure becomes a field, never an exception."""
    result = PrecisionResult(precision=precision, supported=False, tolerance=TOLERANCE[precision])
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    m = n = k = size
    try:
        if precision == "bf16":
            run, reference, api, operand_bytes = _bf16_case(torch, m, n, k, gen)
        elif precision == "fp8":
            if not hasattr(torch, "float8_e4m3fn"):
                raise NotImplementedError(f"torch {torch.__version__} has no float8_e4m3fn dtype")
            run, reference, api, operand_bytes = _fp8_case(torch, m, n, k, gen, fast_accum)
        else:
            run, reference, api, operand_bytes = _nvfp4_case(torch, m, n, k, gen)
        result.api = api
        out = run()  # the first call: unsupported formats raise here
        clock.synchronize()
    except Exception as exc:
        result.error = _one_line(exc)
        return result

    def measure_error() -> float:
        nonlocal out
        error = rel_error(out[:CHECK_CORNER, :CHECK_CORNER], reference())
        out = None  # its memory back before the timing
        return error

    def time_it() -> Timing:
        flush = l2_flusher(l2_bytes, device) if operand_bytes < 4 * l2_bytes else None
        return bench(run, warmup_ms=warmup_ms, rep_ms=rep_ms, flush=flush, clock=clock)

    return _check_then_time(result, measure_error, time_it, 2.0 * m * n * k)


def _check_then_time(result: PrecisionResult, measure_error: Callable[[], float], time_it: Callable[[], Timing],
                     flops: float) -> PrecisionResult:
    """What both probes do once the first call ran: the output within tolerance (else no rate), then the
    timing and the rates; a failure becomes a field, never an exception."""
    result.supported = True
    try:
        result.rel_error = measure_error()
        if not result.rel_error <= result.tolerance:  # NaN fails too
            result.check = f"relative error {result.rel_error:.3g} over the {result.tolerance:g} tolerance"
            return result
        result.check = "ok"
        result.timing = time_it()
    except Exception as exc:
        result.error = _one_line(exc)
        return result
    result.tflops = result.timing.rate(flops) / 1e12
    result.tflops_best = result.timing.rate(flops, at="min") / 1e12
    return result


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return cut(" ".join(text.split()), 400)


def probe(size: int = 8192, precisions: tuple[str, ...] | list[str] = PRECISIONS, warmup_ms: float = 25.0,
          rep_ms: float = 100.0, fast_accum: bool = False) -> GemmResult:
    """Time each precision at ``size``^3 on the current CUDA device."""
    import torch

    t0 = time.perf_counter()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    out = GemmResult(device=props.name, capability=(props.major, props.minor), torch=torch.__version__,
                     torch_cuda=torch.version.cuda, m=size, n=size, k=size)
    clock = TorchClock()
    l2 = int(getattr(props, "L2_cache_size", 0)) or 64 << 20
    _check_precisions(precisions)
    for precision in precisions:
        out.results.append(_one(torch, precision, size, warmup_ms, rep_ms, fast_accum, l2, clock))
        torch.cuda.empty_cache()
    out.seconds = time.perf_counter() - t0
    return out


# -- the same GEMMs without torch (cuBLAS and cuBLASLt through ctypes) --------------------------------
class NvFp4ThroughTorch(CublasUnavailable):
    """A GPU with FP4 tensor cores: NVFP4 is measured through torch there, so every precision is (one path
    for the NVFP4/FP8 ratio the check judges)."""


def installed_torch() -> str:
    """The installed torch's version, read from its metadata without importing it ("" where none)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return ""


def no_fp4_text(capability: tuple[int, int]) -> str:
    """Why NVFP4 is not measured below compute capability 10.0, as the reading's error says it."""
    return (f"no FP4 tensor cores below compute capability {FP4_TENSOR_CORES[0]}.{FP4_TENSOR_CORES[1]} "
            f"(this GPU: {capability[0]}.{capability[1]})")


def check_nvfp4_path(capability: tuple[int, int], precisions: tuple[str, ...] | list[str]) -> None:
    """Raise NvFp4ThroughTorch where NVFP4 is asked for and this GPU has FP4 tensor cores."""
    if "nvfp4" in precisions and tuple(capability) >= FP4_TENSOR_CORES:
        raise NvFp4ThroughTorch(f"compute capability {capability[0]}.{capability[1]} has FP4 tensor cores: NVFP4 "
                                "is measured through torch there, so every precision is (use probe)")


def _check_precisions(precisions: tuple[str, ...] | list[str]) -> None:
    for precision in precisions:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; choose from {PRECISIONS}")


def _one_cublas(session: Any, precision: str, size: int, warmup_ms: float, rep_ms: float) -> PrecisionResult:
    """One precision through cuBLAS/cuBLASLt: build, first call (no algorithm, no memory: a reading with
    cuBLAS's words), host check of sampled elements, timing; its buffers and descriptors freed after."""
    from ._cublaslt import bf16_case, fp8_case

    result = PrecisionResult(precision=precision, supported=False, tolerance=TOLERANCE[precision])
    if precision == "nvfp4":
        result.error = no_fp4_text(session.capability)
        return result
    case = None
    try:
        try:
            case = (bf16_case if precision == "bf16" else fp8_case)(session, size)
            result.api = case.api
            case.run()  # the first call: an unsupported configuration fails here
            session.synchronize()
        except Exception as exc:
            result.error = _one_line(exc)
            return result

        def time_it() -> Timing:  # 8192^3 operands are over 4x any L2: no flush, as in probe
            return bench(case.run, warmup_ms=warmup_ms, rep_ms=rep_ms, clock=session)

        return _check_then_time(result, case.check, time_it, 2.0 * size ** 3)
    finally:
        if case is not None:
            if case.release is not None:
                case.release()
            for address in case.buffers:
                session.free(address)


def probe_cublas(size: int = 8192, precisions: tuple[str, ...] | list[str] = PRECISIONS, warmup_ms: float = 25.0,
                 rep_ms: float = 100.0) -> GemmResult:
    """Time each precision at ``size``^3 on device 0 through cuBLAS/cuBLASLt, without importing torch.

    Raises ``CublasUnavailable`` where there is no driver, device or cuBLAS pair, and its subclass
    ``NvFp4ThroughTorch`` where NVFP4 is asked for on a GPU with FP4 tensor cores (use ``probe``).
    """
    from ._cublaslt import Session

    t0 = time.perf_counter()
    _check_precisions(precisions)
    session = Session()
    try:
        check_nvfp4_path(session.capability, precisions)
        out = GemmResult(device=session.name, capability=session.capability, torch=installed_torch(),
                         torch_cuda=None, m=size, n=size, k=size, backend="cublas")
        session.open_blas()
        for precision in precisions:
            out.results.append(_one_cublas(session, precision, size, warmup_ms, rep_ms))
    finally:
        session.close()
    out.seconds = time.perf_counter() - t0
    return out


def format_result(res: GemmResult) -> str:
    through = (f"cuBLAS without torch (torch {res.torch or 'not installed'})" if res.backend == "cublas"
               else f"torch {res.torch} (CUDA {res.torch_cuda})")
    lines = [f"GEMM {res.m}x{res.n}x{res.k} on {res.device} (cc {res.capability[0]}.{res.capability[1]}), {through}",
             f"{'precision':<9} {'TFLOP/s':>9} {'best':>9} {'rel.err':>9}  api"]
    for r in res.results:
        if r.ok:
            lines.append(f"{r.precision:<9} {r.tflops:>9.1f} {r.tflops_best or 0:>9.1f} {r.rel_error:>9.2g}  {r.api}")
        elif not r.supported:
            lines.append(f"{r.precision:<9} {'-':>9} {'-':>9} {'-':>9}  not supported here: {r.error}")
        else:
            lines.append(f"{r.precision:<9} {'-':>9} {'-':>9} {'-':>9}  {r.api}: {r.check or r.error}")
    fp8, fp4 = res.get("fp8"), res.get("nvfp4")
    if fp8 is not None and fp4 is not None and fp8.ok and fp4.ok:
        lines.append(f"NVFP4 / FP8 = {fp4.tflops / fp8.tflops:.2f}")
    lines.append(f"{res.seconds:.2f} s")
    return "\n".join(map(shown, lines))  # a device name or error holding a line break stays on its line


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="spark-gotchas microbench gemm", description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=in_span(16, 1 << 17, integer=True), default=8192, help="M = N = K (default 8192)")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--fast-accum", action="store_true", help="FP8 with cuBLAS fast accumulation")
    parser.add_argument("--warmup-ms", type=in_span(0, 60_000, "ms"), default=25.0)
    parser.add_argument("--rep-ms", type=in_span(1, 600_000, "ms"), default=100.0)
    parser.add_argument("--backend", choices=("torch", "cublas"), default="torch",
                        help="torch (default), or cublas: cuBLAS/cuBLASLt through ctypes, no torch import")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    precisions = tuple(p for p in args.precisions.split(",") if p)
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown:
        parser.error(shown(f"unknown precision(s) {unknown}; choose from {PRECISIONS}"))
    if args.backend == "cublas":
        if args.fast_accum:
            parser.error("--fast-accum is for the torch backend")
        try:
            result = probe_cublas(args.size, precisions, args.warmup_ms, args.rep_ms)
        except CublasUnavailable as exc:
            say(f"gemm: {exc}", err=True)
            return 2
    elif not require_cuda():
        return 2
    else:
        result = probe(args.size, precisions, args.warmup_ms, args.rep_ms, args.fast_accum)
    if args.json:
        print_json(result)
    else:
        say(*format_result(result).split("\n"))
    return 0
