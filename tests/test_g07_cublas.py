"""G7's GEMM probe without torch (cuBLAS/cuBLASLt through ctypes): its operands, its host check, its
NVFP4 rule by capability, what it says without a driver, and its result judged as the torch probe's."""

from __future__ import annotations

import array
import ctypes
import json
import math
import struct
import time
from pathlib import Path

import pytest
from bench_fakes import WallClock

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge import profiles
from spark_gotchas.knowledge.judges import g07_nvfp4 as g07
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.readings.bench import GemmReading
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.microbench import _cublas, _cublaslt, gemm

SNAPSHOT = Path(__file__).parent / "fixtures" / "h200" / "preflight-snapshot.json"


def recorded_h200_gemm() -> gemm.GemmResult:
    """The torch probe's result in the recorded H200 snapshot (``bench.gemm``)."""
    snapshot = json.loads(SNAPSHOT.read_text())
    return from_jsonable(gemm.GemmResult, snapshot["readings"]["bench.gemm"]["result"])


# -- operands ---------------------------------------------------------------------------------------
def test_e4m3_operands_are_finite_in_range_with_both_signs():
    block = _cublas.random_block("e4m3", 1 << 14)
    assert block.itemsize == 1
    assert all(b & 0x7F != 0x7F for b in block)  # never S.1111.111, e4m3fn's NaN
    values = _cublaslt.block_values("e4m3", block)
    assert all(0.5 <= abs(v) <= 1.875 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)
    assert len(set(values)) == 32  # sign x two exponents x eight mantissas: all of them turn up


@pytest.mark.parametrize("bits,value", [(0x38, 1.0), (0xB8, -1.0), (0x30, 0.5), (0x3F, 1.875), (0x7E, 448.0),
                                        (0x08, 2.0 ** -6), (0x01, 2.0 ** -9), (0x00, 0.0), (0x47, 3.75)])
def test_e4m3_decodes_by_the_format_definition(bits, value):
    assert _cublaslt.decode_e4m3(bits) == value


def test_e4m3_nan_is_its_only_non_finite_value():
    assert math.isnan(_cublaslt.decode_e4m3(0x7F)) and math.isnan(_cublaslt.decode_e4m3(0xFF))
    assert sum(math.isnan(v) for v in _cublaslt.E4M3_TABLE) == 2 and max(map(abs, _cublaslt.E4M3_TABLE[:0x7F])) == 448


def test_e4m3_agrees_with_torch_float8_e4m3fn():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    codes = torch.arange(256, dtype=torch.uint8)
    want = codes.view(torch.float8_e4m3fn).float().tolist()
    got = list(_cublaslt.E4M3_TABLE)
    assert all((math.isnan(g) and math.isnan(w)) or g == w for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("bits,value", [(0x3F80, 1.0), (0xBF80, -1.0), (0x3F00, 0.5), (0x4040, 3.0), (0x3FFF, 1.9921875)])
def test_bf16_decodes_as_the_upper_half_of_a_float32(bits, value):
    assert _cublaslt.decode_bf16(bits) == value


def test_a_whole_bf16_block_decodes_as_each_value_alone():
    block = _cublas.random_block("bf16", 4099)
    assert _cublaslt.block_values("bf16", block) == [_cublaslt.decode_bf16(b) for b in block]


class MemoryDriver:
    """The two copies ``fill_tiled`` makes, on a host bytearray standing in for device memory."""

    def __init__(self, nbytes: int):
        self.memory = bytearray(nbytes)
        self.calls: list[str] = []

    def __call__(self, name: str, dst, src, size) -> None:
        self.calls.append(name)
        start, n = dst.value, size.value
        if name == "cuMemcpyHtoD_v2":
            self.memory[start:start + n] = ctypes.string_at(src.value, n)
        else:
            self.memory[start:start + n] = self.memory[src.value:src.value + n]


@pytest.mark.parametrize("dtype,elements", [("e4m3", 1000), ("bf16", 77), ("bf16", 7), ("e4m3", 5)])
def test_the_tiled_fill_puts_block_element_L_mod_its_length_at_L(dtype, elements):
    block = _cublas.random_block(dtype, 7)
    driver = MemoryDriver(elements * block.itemsize)
    _cublas.fill_tiled(driver, 0, block, elements)
    filled = array.array(block.typecode, bytes(driver.memory))
    assert list(filled) == [block[i % len(block)] for i in range(elements)]
    assert driver.calls.count("cuMemcpyHtoD_v2") == 1  # the rest is copied on the device


# -- the host reference ------------------------------------------------------------------------------
def full_matrix(operand: _cublaslt.Operand, rows: int, cols: int) -> list[list[float]]:
    size = len(operand.values)
    return [[operand.values[(r * operand.row_stride + c * operand.col_stride) % size] for c in range(cols)]
            for r in range(rows)]


@pytest.mark.parametrize("a_strides", [(1, 6), (6, 1)])  # op(A) as cublasGemmEx (N) and as the FP8 TN call reads it
def test_the_reference_is_the_product_of_the_tiled_matrices(a_strides):
    n = 6
    values_a = [1.0, -2.0, 0.5, 3.0, -1.5, 2.5, 0.25]  # 7 values over 36 places: rows do not repeat
    values_b = [2.0, 1.0, -0.5, -3.0, 1.5]
    a, b = _cublaslt.Operand(values_a, *a_strides), _cublaslt.Operand(values_b, 1, n)
    dense_a, dense_b = full_matrix(a, n, n), full_matrix(b, n, n)
    positions = [(i, j) for i in range(n) for j in range(n)]
    want = [0.5 * sum(dense_a[i][t] * dense_b[t][j] for t in range(n)) for i, j in positions]
    assert _cublaslt.reference(a, b, positions, n, scale=0.5) == want
    assert dense_a[1][0] == values_a[(a_strides[0]) % 7] and dense_b[0][1] == values_b[n % 5]


def test_rows_and_columns_wrap_around_the_block():
    values = [float(v) for v in range(7)]
    assert _cublaslt.tiled(values, 5, 1, 5) == [5.0, 6.0, 0.0, 1.0, 2.0]
    assert _cublaslt.tiled(values, 3, 3, 4) == [3.0, 6.0, 2.0, 5.0]
    assert _cublaslt.tiled(values, 12, 1, 3) == [5.0, 6.0, 0.0]


def test_sample_positions_spread_over_the_matrix_and_hold_both_corners():
    positions = _cublaslt.sample_positions(8192, 8192)
    assert len(positions) == len(set(positions)) == _cublaslt.SAMPLES
    assert positions[0][0] == 0 and positions[-1] == (8191, 8191)
    rows, cols = [i for i, _ in positions], [j for _, j in positions]
    assert max(rows) - min(rows) > 6000 and max(cols) - min(cols) > 6000
    assert len({i // 2048 for i in rows}) == 4 and len({j // 2048 for j in cols}) == 4  # every quarter


def test_the_sample_error_is_relative_frobenius():
    assert _cublaslt.sample_rel_error([3.0, 4.0], [3.0, 4.0]) == 0.0
    assert _cublaslt.sample_rel_error([3.0, 4.5], [3.0, 4.0]) == pytest.approx(0.5 / 5.0)
    assert _cublaslt.sample_rel_error([1.0], [0.0]) == 1.0
    assert math.isnan(_cublaslt.sample_rel_error([math.nan], [1.0]))


def to_bf16_bits(value: float) -> int:
    """float -> bfloat16 bits, rounded to nearest even (as the GEMM's epilogue stores its output)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def test_bfloat16_rounding_of_the_output_is_within_the_tolerance():
    """What the GPU's answer differs by at most, besides fp32 accumulation: rounding to bfloat16."""
    n = 8192
    block = _cublas.random_block("e4m3", _cublas.FILL_BLOCK_ELEMENTS)
    values = _cublaslt.block_values("e4m3", block)
    a, b = _cublaslt.Operand(values, n, 1), _cublaslt.Operand(values, 1, n)
    positions = _cublaslt.sample_positions(n, n)
    want = _cublaslt.reference(a, b, positions, n, 0.125)
    rounded = [_cublaslt.decode_bf16(to_bf16_bits(w)) for w in want]
    assert _cublaslt.sample_rel_error(rounded, want) < gemm.TOLERANCE["fp8"] / 2


# -- NVFP4 by capability, and the probe's flow on a stand-in session -------------------------------------
def test_below_capability_10_nvfp4_is_a_reading_saying_why():
    gemm.check_nvfp4_path((9, 0), gemm.PRECISIONS)  # no raise
    assert gemm.no_fp4_text((9, 0)) == "no FP4 tensor cores below compute capability 10.0 (this GPU: 9.0)"


@pytest.mark.parametrize("capability", [(10, 0), (12, 1)])
def test_with_fp4_tensor_cores_every_precision_goes_through_torch(capability):
    with pytest.raises(gemm.NvFp4ThroughTorch, match=r"NVFP4 is measured through torch there") as caught:
        gemm.check_nvfp4_path(capability, gemm.PRECISIONS)
    assert isinstance(caught.value, _cublas.CublasUnavailable)  # the caller's fallback catches it
    gemm.check_nvfp4_path(capability, ("bf16", "fp8"))  # without NVFP4 there is no ratio to keep on one path


class StandInSession(WallClock):
    """What ``probe_cublas`` asks of a session, on the host: a device, cases, buffers."""

    def __init__(self, capability=(9, 0)):
        self.name, self.capability, self.closed, self.freed, self.opened = "NVIDIA H200", capability, False, [], False

    def open_blas(self):
        self.opened = True

    def free(self, address):
        self.freed.append(address)

    def close(self):
        self.closed = True


@pytest.fixture
def stand_in(monkeypatch):
    session = StandInSession()
    released = []

    def case(api, buffers, error=0.002):
        return _cublaslt.Case(api, lambda: time.sleep(0.0005), lambda: error, buffers, lambda: released.append(api))

    def unsupported(session, n):
        raise _cublaslt.CublasStatusError("cublasLtMatmulAlgoGetHeuristic", 15, "CUBLAS_STATUS_NOT_SUPPORTED")

    monkeypatch.setattr(_cublaslt, "Session", lambda: session)
    monkeypatch.setattr(_cublaslt, "bf16_case", lambda s, n: case("cublasGemmEx (bfloat16)", [1, 2, 3]))
    monkeypatch.setattr(_cublaslt, "fp8_case", lambda s, n: case("cublasLtMatmul (e4m3, per-tensor scales)", [4, 5]))
    session.released, session.case, session.unsupported = released, case, unsupported
    return session


def test_the_probe_reads_the_device_checks_times_and_frees_each_precision(stand_in, monkeypatch):
    monkeypatch.setattr(gemm, "installed_torch", lambda: "2.11.0+cu130")
    res = gemm.probe_cublas(256, warmup_ms=1, rep_ms=2)
    assert (res.device, res.capability, res.torch, res.torch_cuda, res.backend) == \
        ("NVIDIA H200", (9, 0), "2.11.0+cu130", None, "cublas")
    bf16, fp8, fp4 = res.results
    assert bf16.ok and fp8.ok and bf16.check == fp8.check == "ok" and bf16.rel_error == 0.002
    assert fp8.api == "cublasLtMatmul (e4m3, per-tensor scales)" and bf16.timing.reps >= 5
    assert not fp4.supported and fp4.error == "no FP4 tensor cores below compute capability 10.0 (this GPU: 9.0)"
    assert stand_in.freed == [1, 2, 3, 4, 5] and len(stand_in.released) == 2 and stand_in.closed


def test_no_algorithm_for_fp8_is_a_reading_in_cublas_words(stand_in, monkeypatch):
    monkeypatch.setattr(_cublaslt, "fp8_case", stand_in.unsupported)
    fp8 = gemm.probe_cublas(256, ("fp8",), warmup_ms=1, rep_ms=2).get("fp8")
    assert not fp8.supported and fp8.tflops is None
    assert fp8.error == "CublasStatusError: cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_NOT_SUPPORTED (15)"
    assert stand_in.closed


def test_an_output_outside_the_tolerance_gets_no_rate(stand_in, monkeypatch):
    monkeypatch.setattr(_cublaslt, "bf16_case", lambda s, n: stand_in.case("cublasGemmEx (bfloat16)", [9], 0.3))
    bf16 = gemm.probe_cublas(256, ("bf16",), warmup_ms=1, rep_ms=2).get("bf16")
    assert bf16.supported and bf16.tflops is None and bf16.check == "relative error 0.3 over the 0.01 tolerance"
    assert stand_in.freed == [9]


def test_on_a_gpu_with_fp4_tensor_cores_the_probe_defers_to_torch(stand_in):
    stand_in.capability = (12, 1)
    with pytest.raises(gemm.NvFp4ThroughTorch):
        gemm.probe_cublas(256)
    assert stand_in.closed and not stand_in.opened  # nothing loaded or allocated first


def test_the_installed_torch_is_named_without_importing_it(monkeypatch):
    monkeypatch.setattr(gemm.importlib.metadata, "version", lambda name: "2.11.0+cu130")
    assert gemm.installed_torch() == "2.11.0+cu130"

    def missing(name):
        raise gemm.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(gemm.importlib.metadata, "version", missing)
    assert gemm.installed_torch() == ""


# -- without a driver ------------------------------------------------------------------------------------
@pytest.fixture
def no_libcuda(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(_cublas.ctypes, "CDLL", refuse)


def test_without_a_driver_the_probe_says_why(no_libcuda):
    with pytest.raises(_cublas.CublasUnavailable, match=r"^libcuda\.so\.1 not loadable: libcuda\.so\.1: cannot open"):
        gemm.probe_cublas(256)


def test_the_command_line_says_so_in_one_line_and_exits_2(no_libcuda, capsys):
    assert gemm.main(["--backend", "cublas", "--size", "256"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == ("gemm: libcuda.so.1 not loadable: libcuda.so.1: cannot open shared object file: "
                                 "No such file or directory\n")


def test_the_command_line_offers_the_backend(capsys):
    with pytest.raises(SystemExit):
        gemm.main(["--help"])
    assert "--backend {torch,cublas}" in capsys.readouterr().out


# -- the result, as the check reads it --------------------------------------------------------------------
def cublas_h200_gemm() -> gemm.GemmResult:
    """The recorded H200 rates as probe_cublas would report them (its APIs, its NVFP4 reading)."""
    res = recorded_h200_gemm()
    bf16, fp8, fp4 = res.results
    bf16.api, fp8.api = "cublasGemmEx (bfloat16)", "cublasLtMatmul (e4m3, per-tensor scales)"
    results = [bf16, fp8, gemm.PrecisionResult(precision="nvfp4", supported=False, tolerance=0.01,
                                               error=gemm.no_fp4_text((9, 0)))]
    return gemm.GemmResult(device=res.device, capability=res.capability, torch=res.torch, torch_cuda=None,
                           m=8192, n=8192, k=8192, results=results, seconds=1.1, backend="cublas")


def test_an_older_snapshot_without_a_backend_reads_as_torch():
    assert recorded_h200_gemm().backend == "torch"


def test_the_cublas_result_round_trips_through_json():
    res = cublas_h200_gemm()
    assert from_jsonable(gemm.GemmResult, json.loads(json.dumps(to_jsonable(res)))) == res
    assert "cuBLAS without torch (torch 2.11.0+cu130)" in gemm.format_result(res)


@pytest.mark.parametrize("precision", [None, "fp8", "nvfp4"])
def test_the_check_judges_it_as_the_torch_result(precision):
    plan = Plan(precision=precision)
    torch_verdict = g07.judge_gemm_rates(GemmReading(attempted=True, result=recorded_h200_gemm()), profiles.H200, plan)
    cublas_verdict = g07.judge_gemm_rates(GemmReading(attempted=True, result=cublas_h200_gemm()), profiles.H200, plan)
    assert cublas_verdict.status is torch_verdict.status is (Status.FAIL if precision == "nvfp4" else Status.INFO)
    assert cublas_verdict.line == torch_verdict.line
    if precision is None:
        assert cublas_verdict.line == "G7 INFO: NVIDIA H200 (cc 9.0) runs BF16 688, FP8 1258 TFLOP/s; NVFP4 not supported"
        assert cublas_verdict.detail.endswith("NVFP4 not supported here: no FP4 tensor cores below compute capability "
                                              "10.0 (this GPU: 9.0)")
