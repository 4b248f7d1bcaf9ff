"""BF16 and FP8 (e4m3) GEMMs through cuBLAS and cuBLASLt alone (ctypes), checked on the host: no torch import.

Why: G7's rates are the GEMM probe's, and through torch they wait for ``import torch`` (seconds in
the preflight's GPU worker). Through libcuda, libcublas and libcublasLt directly the same GEMMs run
while the worker is still importing torch, so the check only reads the result.

The operands follow :mod:`gemm`'s torch probe (C = A·B, M = N = K = size):

    bf16  cublasGemmEx, both operands and the output bfloat16, column-major, no transpose (the
          call torch.mm makes for row-major operands), float32 accumulation
    fp8   cublasLtMatmul, A and B e4m3 in the "TN" layout cuBLASLt requires for FP8 (A transposed:
          torch._scaled_mm's A row-major and B column-major), one float32 scale per tensor in device
          memory, bfloat16 output, float32 accumulation

The operands are a random block tiled over device memory (``_cublas.fill_tiled``), so the host
knows every operand value without copying it back: ``SAMPLES`` output elements are copied back and
compared with float64 dot products computed here.
"""

from __future__ import annotations

import array
import ctypes
import math
import operator
import struct
from dataclasses import dataclass
from typing import Callable, Optional

from ._cublas import (
    FILL_BLOCK_ELEMENTS,
    CublasUnavailable,
    DeviceSession,
    cublas_candidates,
    device_identity,
    fill_tiled,
    load_cublas_pair,
    random_block,
)

# Enum values and the structure below, from the CUDA 13 headers: cublasLt.h and cublas_api.h of cuBLAS
# 13.1.0 (CUBLAS_VER_MAJOR/MINOR/PATCH; site-packages/nvidia/cu13/include, as torch 2.11.0+cu130
# installs it), library_types.h and cuda.h of CUDA 13.0 (/usr/local/cuda-13.0/include).
CUDA_R_32F = 0  # cudaDataType_t (library_types.h)
CUDA_R_16BF = 14
CUDA_R_8F_E4M3 = 28
CUBLAS_COMPUTE_32F = 68  # cublasComputeType_t (cublas_api.h)
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1  # cublasOperation_t (cublas_api.h)
CUBLAS_GEMM_DEFAULT = -1  # cublasGemmAlgo_t (cublas_api.h)
CUBLAS_STATUS_SUCCESS = 0  # cublasStatus_t (cublas_api.h)
CUBLAS_STATUS_NOT_SUPPORTED = 15
CUBLASLT_MATMUL_DESC_TRANSA = 3  # cublasLtMatmulDescAttributes_t (cublasLt.h): int32_t
CUBLASLT_MATMUL_DESC_TRANSB = 4  # int32_t
CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17  # const void * (device memory, the compute type: float)
CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18
CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1  # cublasLtMatmulPreferenceAttributes_t (cublasLt.h): uint64_t

WORKSPACE_BYTES = 32 << 20
SAMPLES = 32  # output elements checked against float64 on the host
SCALE_A, SCALE_B = 0.5, 0.25  # powers of two: the reference stays exact, and a scale left out shows
E4M3_BIAS = 7


class CublasLtMatmulHeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t (cublasLt.h): the algorithm (cublasLtMatmulAlgo_t, uint64_t[8]) and
    what the heuristic says of it."""

    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class CublasStatusError(RuntimeError):
    """A cuBLAS or cuBLASLt call that did not return CUBLAS_STATUS_SUCCESS, with the status's name."""

    def __init__(self, call: str, status: int, name: str = ""):
        self.status = status
        super().__init__(f"{call}: {name or 'status'} ({status})")


_P = ctypes.POINTER
_VP, _INT, _SIZE = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
# (restype, argtypes) of every cuBLAS/cuBLASLt function called, as the headers declare them.
CUBLAS_SIGNATURES = {
    "cublasCreate_v2": (_INT, [_P(_VP)]),
    "cublasDestroy_v2": (_INT, [_VP]),
    "cublasGemmEx": (_INT, [_VP, _INT, _INT, _INT, _INT, _INT, _VP, _VP, _INT, _INT, _VP, _INT, _INT, _VP, _VP,
                            _INT, _INT, _INT, _INT]),
}
CUBLASLT_SIGNATURES = {
    "cublasLtCreate": (_INT, [_P(_VP)]),
    "cublasLtDestroy": (_INT, [_VP]),
    "cublasLtGetStatusName": (ctypes.c_char_p, [_INT]),
    "cublasLtGetVersion": (_SIZE, []),
    "cublasLtMatmulDescCreate": (_INT, [_P(_VP), _INT, _INT]),
    "cublasLtMatmulDescSetAttribute": (_INT, [_VP, _INT, _VP, _SIZE]),
    "cublasLtMatmulDescDestroy": (_INT, [_VP]),
    "cublasLtMatrixLayoutCreate": (_INT, [_P(_VP), _INT, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64]),
    "cublasLtMatrixLayoutDestroy": (_INT, [_VP]),
    "cublasLtMatmulPreferenceCreate": (_INT, [_P(_VP)]),
    "cublasLtMatmulPreferenceSetAttribute": (_INT, [_VP, _INT, _VP, _SIZE]),
    "cublasLtMatmulPreferenceDestroy": (_INT, [_VP]),
    "cublasLtMatmulAlgoGetHeuristic": (_INT, [_VP, _VP, _VP, _VP, _VP, _VP, _VP, _INT,
                                              _P(CublasLtMatmulHeuristicResult), _P(_INT)]),
    "cublasLtMatmul": (_INT, [_VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP,
                              _P(ctypes.c_uint64 * 8), _VP, _SIZE, _VP]),
}


def declare(lib: ctypes.CDLL, signatures: dict) -> None:
    """Set restype and argtypes of each function, so 64-bit values and pointers pass whole."""
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes


# -- values on the host -------------------------------------------------------------------------------
def decode_bf16(bits: int) -> float:
    """A bfloat16 bit pattern as a float: the upper half of a float32."""
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def decode_e4m3(bits: int) -> float:
    """An e4m3 (float8_e4m3fn) bit pattern as a float: S.EEEE.MMM, bias 7, subnormals at exponent 0,
    S.1111.111 NaN and no infinity."""
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> 3) & 0xF, bits & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** (1 - E4M3_BIAS)
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - E4M3_BIAS)


E4M3_TABLE = tuple(decode_e4m3(b) for b in range(256))


def block_values(dtype: str, block: array.array) -> list[float]:
    """A random block's raw bits as floats (a whole block in milliseconds: one C-level pass for bf16)."""
    if dtype == "bf16":
        widened = bytearray(4 * len(block))  # little-endian float32 with the bf16 bits on top
        raw = block.tobytes()
        widened[2::4], widened[3::4] = raw[0::2], raw[1::2]
        return array.array("f", bytes(widened)).tolist()
    if dtype == "e4m3":
        return [E4M3_TABLE[b] for b in block]
    raise ValueError(f"no decoder for {dtype!r}")


def tiled(values: list[float], start: int, stride: int, count: int) -> list[float]:
    """``values[(start + t * stride) % len(values)]`` for t < count: a row or column of a matrix tiled from
    ``values`` (contiguous runs are slices)."""
    size = len(values)
    if stride == 1 and count <= size:
        start %= size
        head = values[start:start + count]
        return head + values[:count - len(head)]
    return [values[(start + t * stride) % size] for t in range(count)]


@dataclass
class Operand:
    """A matrix as the GEMM reads it (op(A) is M x K, B is K x N) from values tiled in memory: element
    (r, c) sits at ``r * row_stride + c * col_stride``."""

    values: list[float]
    row_stride: int
    col_stride: int

    def row(self, r: int, count: int) -> list[float]:
        return tiled(self.values, r * self.row_stride, self.col_stride, count)

    def col(self, c: int, count: int) -> list[float]:
        return tiled(self.values, c * self.col_stride, self.row_stride, count)


def sample_positions(m: int, n: int, count: int = SAMPLES) -> list[tuple[int, int]]:
    """``count`` output positions spread over the M x N matrix (odd multipliers walk all residues), the
    first and last corners included."""
    spread = [((p * 2654435761) % m, (p * 2246822519 + n // 3) % n) for p in range(count - 1)]
    return spread + [(m - 1, n - 1)]


def reference(a: Operand, b: Operand, positions: list[tuple[int, int]], k: int, scale: float = 1.0) -> list[float]:
    """float64 dot products ``scale * sum_t op(A)[i, t] * B[t, j]`` at each position."""
    return [scale * sum(map(operator.mul, a.row(i, k), b.col(j, k))) for i, j in positions]


def sample_rel_error(got: list[float], want: list[float]) -> float:
    """||got - want|| / ||want|| over the sampled elements (Frobenius, in float64; NaN stays NaN)."""
    diff = math.sqrt(sum((g - w) ** 2 for g, w in zip(got, want, strict=True)))
    norm = math.sqrt(sum(w * w for w in want))
    return diff / (norm if norm > 0 else 1.0)


# -- the device ---------------------------------------------------------------------------------------
def open_libraries() -> tuple[str, ctypes.CDLL, ctypes.CDLL]:
    """(path, libcublas, libcublasLt) from the first candidate whose pair loads and has the calls used here."""
    problems = []
    for path in cublas_candidates():
        try:
            cublas, lt = load_cublas_pair(path)
            if lt is None:  # a soname from the search path: its sibling by soname
                lt = ctypes.CDLL(path.replace("libcublas", "libcublasLt"), mode=ctypes.RTLD_GLOBAL)
            declare(cublas, CUBLAS_SIGNATURES)
            declare(lt, CUBLASLT_SIGNATURES)
            return path, cublas, lt
        except (OSError, AttributeError) as exc:
            problems.append(f"{path}: {exc}")
    raise CublasUnavailable("no usable cuBLAS/cuBLASLt pair: " + ("; ".join(problems[:3]) or "none found"))


class Session(DeviceSession):
    """Device 0's primary context, then (``open_blas``) cuBLAS and cuBLASLt handles; every buffer and handle
    is released by ``close``, whatever failed in between. Shaped as a ``_timing.bench`` clock."""

    def __init__(self) -> None:
        super().__init__()
        self.cublas = self.lt = self.handle = self.lt_handle = None
        self.library = ""
        try:
            self.name, self.capability = device_identity(self.driver, self.device)
        except RuntimeError as exc:
            self.close()
            raise CublasUnavailable(str(exc)) from None

    def open_blas(self) -> None:
        """Load cuBLAS and cuBLASLt and create a handle of each (CublasUnavailable where it cannot)."""
        try:
            self.library, self.cublas, self.lt = open_libraries()
            self.handle, self.lt_handle = ctypes.c_void_p(), ctypes.c_void_p()
            self.check("cublasCreate_v2", self.cublas.cublasCreate_v2(ctypes.byref(self.handle)))
            self.check("cublasLtCreate", self.lt.cublasLtCreate(ctypes.byref(self.lt_handle)))
        except CublasStatusError as exc:
            raise CublasUnavailable(str(exc)) from None

    def status_name(self, status: int) -> str:
        try:
            name = self.lt.cublasLtGetStatusName(status) if self.lt is not None else None
        except (AttributeError, ctypes.ArgumentError):
            name = None
        return name.decode(errors="replace") if name else ""

    def check(self, call: str, status: int) -> None:
        if status != CUBLAS_STATUS_SUCCESS:
            raise CublasStatusError(call, status, self.status_name(status))

    def random_matrix(self, dtype: str, elements: int) -> tuple[int, list[float]]:
        """Device memory holding ``elements`` random values tiled from one block, and the block's values."""
        block = random_block(dtype, FILL_BLOCK_ELEMENTS)
        address = self.alloc(elements * block.itemsize)
        fill_tiled(self.driver, address, block, elements)
        return address, block_values(dtype, block)

    def upload_float(self, value: float) -> int:
        """One float32 in device memory (a per-tensor scale)."""
        host = ctypes.c_float(value)
        address = self.alloc(4)
        self.driver("cuMemcpyHtoD_v2", ctypes.c_uint64(address), ctypes.byref(host), ctypes.c_size_t(4))
        return address

    def read_bf16(self, address: int, offsets: list[int]) -> list[float]:
        """The bfloat16 values at these element offsets of a device buffer (two bytes each copied back)."""
        out = []
        bits = ctypes.c_uint16()
        for offset in offsets:
            self.driver("cuMemcpyDtoH_v2", ctypes.byref(bits), ctypes.c_uint64(address + 2 * offset),
                        ctypes.c_size_t(2))
            out.append(decode_bf16(bits.value))
        return out

    def close(self) -> None:
        """Free every buffer, destroy the handles, release the primary context (each once)."""
        for address in list(self._buffers):
            self.free(address)
        if self.lt_handle is not None and self.lt_handle.value:
            self.lt.cublasLtDestroy(self.lt_handle)
        if self.handle is not None and self.handle.value:
            self.cublas.cublasDestroy_v2(self.handle)
        self.handle = self.lt_handle = None
        self.release()


# -- the two GEMMs ------------------------------------------------------------------------------------
@dataclass
class Case:
    """One precision's GEMM: its call, how to check its output, and what to free afterwards."""

    api: str
    run: Callable[[], None]
    check: Callable[[], float]  # relative error over the sampled elements
    buffers: list[int]
    release: Optional[Callable[[], None]] = None


def _checker(session: Session, out: int, a: Operand, b: Operand, n: int, scale: float = 1.0) -> Callable[[], float]:
    """Compare SAMPLES elements of the (column-major, ld = n) output with the host's float64 products."""
    def check() -> float:
        positions = sample_positions(n, n)
        got = session.read_bf16(out, [i + j * n for i, j in positions])
        return sample_rel_error(got, reference(a, b, positions, n, scale))

    return check


def bf16_case(session: Session, n: int) -> Case:
    """C = A·B through cublasGemmEx: A (M x K, ld M), B (K x N, ld K), C (M x N, ld M), all column-major."""
    a_ptr, a_values = session.random_matrix("bf16", n * n)
    b_ptr, b_values = session.random_matrix("bf16", n * n)
    c_ptr = session.alloc(n * n * 2)
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def run() -> None:
        session.check("cublasGemmEx", session.cublas.cublasGemmEx(
            session.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, ctypes.byref(alpha), a_ptr, CUDA_R_16BF, n,
            b_ptr, CUDA_R_16BF, n, ctypes.byref(beta), c_ptr, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT))

    check = _checker(session, c_ptr, Operand(a_values, 1, n), Operand(b_values, 1, n), n)
    return Case("cublasGemmEx (bfloat16)", run, check, [a_ptr, b_ptr, c_ptr])


class LtDescriptors:
    """The FP8 matmul's cuBLASLt descriptors, each destroyed by ``destroy`` (also when one failed to build)."""

    def __init__(self, session: Session):
        self.session = session
        self.lt = session.lt
        self.matmul = ctypes.c_void_p()
        self.layouts: list[ctypes.c_void_p] = []
        self.preference = ctypes.c_void_p()

    def build(self, n: int, scale_a: int, scale_b: int) -> None:
        lt, check = self.lt, self.session.check
        check("cublasLtMatmulDescCreate",
              lt.cublasLtMatmulDescCreate(ctypes.byref(self.matmul), CUBLAS_COMPUTE_32F, CUDA_R_32F))
        for attribute, value in ((CUBLASLT_MATMUL_DESC_TRANSA, ctypes.c_int32(CUBLAS_OP_T)),
                                 (CUBLASLT_MATMUL_DESC_TRANSB, ctypes.c_int32(CUBLAS_OP_N)),
                                 (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, ctypes.c_void_p(scale_a)),
                                 (CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, ctypes.c_void_p(scale_b))):
            check("cublasLtMatmulDescSetAttribute", lt.cublasLtMatmulDescSetAttribute(
                self.matmul, attribute, ctypes.byref(value), ctypes.sizeof(value)))
        # A stored K x M (ld K) and transposed, B K x N (ld K), D M x N (ld M): the "TN" layout
        for dtype, rows, cols in ((CUDA_R_8F_E4M3, n, n), (CUDA_R_8F_E4M3, n, n), (CUDA_R_16BF, n, n)):
            layout = ctypes.c_void_p()
            check("cublasLtMatrixLayoutCreate", lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype, rows,
                                                                              cols, rows))
            self.layouts.append(layout)
        check("cublasLtMatmulPreferenceCreate", lt.cublasLtMatmulPreferenceCreate(ctypes.byref(self.preference)))
        workspace = ctypes.c_uint64(WORKSPACE_BYTES)
        check("cublasLtMatmulPreferenceSetAttribute", lt.cublasLtMatmulPreferenceSetAttribute(
            self.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctypes.byref(workspace),
            ctypes.sizeof(workspace)))

    def heuristic(self) -> CublasLtMatmulHeuristicResult:
        """cuBLASLt's first choice of algorithm; NOT_SUPPORTED (a CublasStatusError) where it has none."""
        a, b, d = self.layouts
        result, returned = CublasLtMatmulHeuristicResult(), ctypes.c_int(0)
        self.session.check("cublasLtMatmulAlgoGetHeuristic", self.lt.cublasLtMatmulAlgoGetHeuristic(
            self.session.lt_handle, self.matmul, a, b, d, d, self.preference, 1, ctypes.byref(result),
            ctypes.byref(returned)))
        if returned.value < 1:
            raise CublasStatusError("cublasLtMatmulAlgoGetHeuristic: no algorithm", CUBLAS_STATUS_NOT_SUPPORTED,
                                    "CUBLAS_STATUS_NOT_SUPPORTED")
        self.session.check("cublasLtMatmulAlgoGetHeuristic (result)", result.state)
        return result

    def destroy(self) -> None:
        lt = self.lt
        if self.preference.value:
            lt.cublasLtMatmulPreferenceDestroy(self.preference)
        for layout in self.layouts:
            if layout.value:
                lt.cublasLtMatrixLayoutDestroy(layout)
        if self.matmul.value:
            lt.cublasLtMatmulDescDestroy(self.matmul)
        self.preference, self.layouts, self.matmul = ctypes.c_void_p(), [], ctypes.c_void_p()


def fp8_case(session: Session, n: int) -> Case:
    """D = scale_a * scale_b * op(A)·B through cublasLtMatmul, e4m3 operands in the TN layout, bfloat16 D."""
    buffers: list[int] = []
    descriptors = LtDescriptors(session)
    try:
        a_ptr, a_values = session.random_matrix("e4m3", n * n)
        buffers.append(a_ptr)
        b_ptr, b_values = session.random_matrix("e4m3", n * n)
        buffers.append(b_ptr)
        buffers += [session.alloc(n * n * 2), session.upload_float(SCALE_A), session.upload_float(SCALE_B)]
        d_ptr, scale_a, scale_b = buffers[2:]
        descriptors.build(n, scale_a, scale_b)
        choice = descriptors.heuristic()
        workspace_bytes = max(int(choice.workspaceSize), 1)
        buffers.append(session.alloc(workspace_bytes))
    except Exception:
        descriptors.destroy()
        for address in buffers:
            session.free(address)
        raise
    workspace = buffers[-1]
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    a_desc, b_desc, d_desc = descriptors.layouts

    def run() -> None:
        session.check("cublasLtMatmul", session.lt.cublasLtMatmul(
            session.lt_handle, descriptors.matmul, ctypes.byref(alpha), a_ptr, a_desc, b_ptr, b_desc,
            ctypes.byref(beta), d_ptr, d_desc, d_ptr, d_desc, ctypes.byref(choice.algo), workspace,
            choice.workspaceSize, None))

    # op(A)[i, t] = A_stored[t, i] at t + i * K; B[t, j] at t + j * K
    check = _checker(session, d_ptr, Operand(a_values, n, 1), Operand(b_values, 1, n), n, SCALE_A * SCALE_B)
    return Case("cublasLtMatmul (e4m3, per-tensor scales)", run, check, buffers, descriptors.destroy)
