"""G7 as a user meets it: kernel targets of installed FP4 libraries (real nvcc 13.0 fatbins
installed as fake distributions), measured NVFP4/FP8 rates (recorded H200, public GB10), the
GEMM probe's layouts on CPU, and a snapshot -> replay run."""

import json
import shutil
import sys
from pathlib import Path

import bench_fakes as fk
import no_nvml
import pytest
from bench_fakes import WallClock
from gline_block import glines
from sysfs_fakes import GB10_PCI, make_root

from spark_gotchas.knowledge import profiles
from spark_gotchas.knowledge.judges import g07_nvfp4 as g07
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.readings.bench import GemmReading
from spark_gotchas.knowledge.readings.torch import TorchBuild, TorchDevice
from spark_gotchas.knowledge.verdict import Status, Verdict
from spark_gotchas.machine.readers.env import read_fp4_kernels
from spark_gotchas.microbench import gemm

ROOT = Path(__file__).resolve().parents[1]
FATBIN = Path(__file__).parent / "fixtures" / "fatbin"
NGC_ARCH_LIST = fk.GB10["ngc_torch_cuda_arch_list"]["value"]


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site-packages folder on sys.path where tests install fake distributions."""
    import importlib

    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    importlib.invalidate_caches()

    def install(name: str, version: str, files: dict[str, str]) -> None:
        """files: installed path -> fixture file copied there (None: an empty Python file)."""
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        record = []
        for rel, fixture in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if fixture:
                shutil.copy(FATBIN / fixture, target)
            else:
                target.write_text("")
            record.append(f"{rel},,")
        (info / "RECORD").write_text("\n".join(record) + "\n")
        importlib.invalidate_caches()

    install.root = root
    return install


def scan_of(site_install, **libs):
    for name, (version, files) in libs.items():
        site_install(name.replace("_", "-"), version, files)
    return read_fp4_kernels(None)


def test_vllm_without_sm121a_warns_stay_on_fp8(site):
    scan = scan_of(site, vllm=("0.11.0", {"vllm/_C.abi3.so": "plain_sm120_sm121_ptx121.so", "vllm/__init__.py": None}))
    lib = scan.library("vllm")
    assert lib.targets == {"sm_120": 1, "sm_121": 1, "compute_121": 1} and lib.files_scanned == 1
    v = g07.judge_kernel_targets(scan, fk.gb10_inventory(), None, profiles.GB10, Plan(precision=None))
    assert v.line == "G7 WARN: no sm_121a kernels from vLLM 0.11.0: stay on FP8"
    assert v.detail == ("vLLM 0.11.0 ships sm_120, sm_121, compute_121, none sm_121a/sm_12Xf; NVFP4 would run without "
                        "cvt.e2m1x2")
    assert 'TORCH_CUDA_ARCH_LIST="12.1a"' in v.fix


def test_planned_nvfp4_with_such_kernels_fails(site):
    scan = scan_of(site, vllm=("0.11.0", {"vllm/_C.abi3.so": "plain_sm120_sm121_ptx121.so"}))
    v = g07.judge_kernel_targets(scan, fk.gb10_inventory(), None, profiles.GB10, Plan(precision="nvfp4"))
    assert v.status is Status.FAIL and v.summary == "no sm_121a kernels from vLLM 0.11.0, and this run plans NVFP4"


def test_sm121a_or_family_kernels_pass(site):
    scan = scan_of(site,
                   vllm=("0.11.1", {"vllm/_C.abi3.so": "sm121a_ptx121a.so", "vllm/_moe_C.abi3.so": "sm120a_sm90.so"}),
                   flashinfer_cubin=("0.5.0", {"flashinfer_cubin/cubins/gemm.cubin": "standalone_sm121a.cubin"}),
                   sgl_kernel=("0.3.0", {"sgl_kernel/common_ops.abi3.so": "sm120f.so"}),
                   flashinfer_python=("0.5.0", {"flashinfer/__init__.py": None}))
    v = g07.judge_kernel_targets(scan, fk.gb10_inventory(), None, profiles.GB10, Plan(precision="nvfp4"))
    assert v.status is Status.PASS
    assert v.summary == ("FP4 kernels target SM121's arch-specific code: vLLM 0.11.1, FlashInfer cubins 0.5.0, "
                         "SGLang kernels 0.3.0")
    assert v.detail == ("vLLM 0.11.1 (sm_121a, compute_121a); FlashInfer cubins 0.5.0 (sm_121a); SGLang kernels 0.3.0 "
                        "(sm_120f); JIT-built at run time: FlashInfer")


def test_an_arch_list_without_121a_warns_even_with_good_wheels(site, monkeypatch):
    scan_of(site, vllm=("0.11.1", {"vllm/_C.abi3.so": "sm121a_ptx121a.so"}))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", NGC_ARCH_LIST)
    v = g07.judge_kernel_targets(read_fp4_kernels(None), fk.gb10_inventory(), None, profiles.GB10, Plan(precision=None))
    assert v.status is Status.WARN
    assert v.summary == "TORCH_CUDA_ARCH_LIST builds without sm_121a: stay on FP8"
    assert v.detail.startswith(f'TORCH_CUDA_ARCH_LIST="{NGC_ARCH_LIST}" builds without sm_121a')
    planned = g07.judge_kernel_targets(read_fp4_kernels(None), fk.gb10_inventory(), None, profiles.GB10,
                                       Plan(precision="nvfp4"))
    assert planned.line == "G7 FAIL: TORCH_CUDA_ARCH_LIST builds without sm_121a, and this run plans NVFP4"
    site("sgl-kernel", "0.3.0", {"sgl_kernel/common_ops.abi3.so": "plain_sm120_sm121_ptx121.so"})
    both = g07.judge_kernel_targets(read_fp4_kernels(None), fk.gb10_inventory(), None, profiles.GB10,
                                    Plan(precision=None))
    assert both.line == "G7 WARN: no sm_121a kernels from SGLang kernels 0.3.0; TORCH_CUDA_ARCH_LIST builds none: stay on FP8"
    assert both.readings["not_ready"] == ["sgl-kernel", "TORCH_CUDA_ARCH_LIST"]


@pytest.mark.parametrize("text,ready", [
    (NGC_ARCH_LIST, False), ("12.1", False), ("12.1+PTX", False), ("12.0a", False), ("12.1a", True),
    ("8.0;9.0;12.0f", True), ("12.1f+PTX", True), ("9.0a 10.0a 12.1a", True), ("12.2f", False),
])
def test_torch_cuda_arch_list_forms(text, ready):
    assert g07.arch_list_ready(text, (12, 1)) is ready


@pytest.mark.parametrize("target,ready", [
    ("sm_121a", True), ("compute_121a", True), ("sm_120f", True), ("sm_121f", True), ("compute_120f", True),
    ("sm_121", False), ("sm_120", False), ("sm_120a", False), ("compute_121", False), ("sm_100a", False),
])
def test_which_targets_run_fp4_natively_on_sm121(target, ready):
    assert g07.ready_target(target, (12, 1)) is ready


def test_no_fp4_library_is_info_naming_torch(site):
    site("torch", "2.10.0+cu130", {"torch/lib/libtorch_cuda.so": "compressed_sm121a_sm120.so"})
    v = g07.judge_kernel_targets(read_fp4_kernels(None), fk.gb10_inventory(), None, profiles.GB10, Plan(precision=None))
    assert v.line == "G7 INFO: no FP4 kernel library with prebuilt kernels installed"
    assert v.detail == ("looked for vLLM, FlashInfer, TensorRT-LLM, Transformer Engine, SGLang; TORCH_CUDA_ARCH_LIST "
                        "unset; PyTorch 2.10.0+cu130: sm_120, sm_121a")


def test_elsewhere_the_targets_are_listed_as_info(site):
    scan = scan_of(site, vllm=("0.11.0", {"vllm/_C.abi3.so": "sm120a_sm90.so"}))
    v = g07.judge_kernel_targets(scan, fk.h200_inventory(), None, profiles.H200, Plan(precision=None))
    assert v.line.startswith("G7 INFO: SM90 (NVIDIA H200), not SM121: vLLM 0.11.0: no sm_90a")


@pytest.mark.parametrize("name, cap, shown", [
    ("NVIDIA H100 80GB HBM3", (9, 0), "G7 INFO: SM90 (NVIDIA H100 80GB HBM3), not SM121: no FP4 kernel library installed"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0), "G7 INFO: SM120, not SM121: no FP4 kernel library installed"),
    ("NVIDIA A100-SXM4-80GB\n G7 PASS: forged " + "x" * 300, (8, 0), "G7 INFO: SM80, not SM121: no FP4 kernel library installed"),
])
def test_a_device_name_gives_way_before_the_line_runs_past_100_columns(site, name, cap, shown):
    """The G-line keeps room for "; 1 not checked" (a check that could not run) within 100 columns:
    a long device name is left to the platform line, which names the GPU above the G-lines."""
    from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
    from spark_gotchas.knowledge.verdict import gotcha_line

    inventory = GpuInventory(driver_version="580.159.04", cuda_driver_version=13000, devices=[GpuDevice(0, name, capability=cap)])
    v = g07.judge_kernel_targets(scan_of(site), inventory, None, profiles.GENERIC, Plan(precision=None))
    assert v.line == shown
    skipped = Verdict(7, Status.SKIP, "rates not measured: torch sees no CUDA device", check="gemm rates")
    assert len(gotcha_line(v, [v, skipped])) <= 100


def test_capability_comes_from_nvml_then_torch_then_the_profile():
    build = TorchBuild(installed=True, devices=[TorchDevice(0, "NVIDIA GB10", (12, 1), 1)])
    assert g07.device_capability(None, build, profiles.H200) == ((12, 1), "NVIDIA GB10")
    assert g07.device_capability(None, None, profiles.GB10) == ((12, 1), "the gb10 profile")
    assert g07.device_capability(None, None, profiles.GENERIC) == (None, "")


# -- measured rates -------------------------------------------------------------------------------------
def rates(result):
    return GemmReading(attempted=True, result=result)


def test_h200_states_what_runs_and_why_nvfp4_does_not():
    v = g07.judge_gemm_rates(rates(fk.h200_gemm()), profiles.H200, Plan(precision=None))
    assert v.line == "G7 INFO: NVIDIA H200 (cc 9.0) runs BF16 763, FP8 1290 TFLOP/s; NVFP4 not supported"
    assert v.detail.startswith("BF16 763, FP8 1290 TFLOP/s at 8192^3; NVFP4 not supported here: RuntimeError('CUDA "
                               "error: CUBLAS_STATUS_NOT_SUPPORTED when calling")
    assert len(v.detail) < 400 and "CUBLAS_STATUS_NOT_SUPPORTED" in v.readings["unsupported"]["nvfp4"]


def test_planning_a_precision_the_gpu_cannot_run_fails():
    v = g07.judge_gemm_rates(rates(fk.h200_gemm()), profiles.H200, Plan(precision="nvfp4"))
    assert v.line == "G7 FAIL: NVFP4, the planned precision, does not run here (cc 9.0); BF16 763, FP8 1290 TFLOP/s do"
    assert v.detail.startswith("torch 2.11.0+cu130: RuntimeError('CUDA error: CUBLAS_STATUS_NOT_SUPPORTED")
    assert v.detail.endswith("; BF16 763, FP8 1290 TFLOP/s at 8192^3") and v.fix == g07.FIX_PLANNED
    assert g07.judge_gemm_rates(rates(fk.h200_gemm()), profiles.H200, Plan(precision="fp8")).status is Status.INFO


def test_gb10_nvfp4_slower_than_fp8_fails_with_the_ratio():
    fp8 = fk.GB10["gemm_tflops_8192"]["fp8_cublas"]
    v = g07.judge_gemm_rates(rates(fk.gb10_gemm(nvfp4_tflops=fp8 * 0.68)), profiles.GB10, Plan(precision=None))
    assert v.line == "G7 FAIL: NVFP4 127 TFLOP/s is 0.68x FP8's 187: NVFP4 is slower here"
    assert v.detail == "BF16 94, FP8 187, NVFP4 127 TFLOP/s at 8192^3"
    assert v.readings["nvfp4_over_fp8"] == pytest.approx(0.68)


def test_gb10_nvfp4_faster_than_fp8_passes():
    v = g07.judge_gemm_rates(rates(fk.gb10_gemm(nvfp4_tflops=350.0)), profiles.GB10, Plan(precision="nvfp4"))
    assert v.line == "G7 PASS: NVFP4 350 TFLOP/s = 1.87x FP8's 187"
    assert v.detail == "BF16 94, FP8 187, NVFP4 350 TFLOP/s at 8192^3"


def test_gb10_without_a_working_nvfp4_gemm_warns_stay_on_fp8():
    error = "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmulAlgoGetHeuristic"
    v = g07.judge_gemm_rates(rates(fk.gb10_gemm(None, error)), profiles.GB10, Plan(precision=None))
    assert v.line == "G7 WARN: NVFP4 GEMM does not run through torch 2.10.0+cu130 here: stay on FP8"
    assert v.detail == f"{error}; BF16 94, FP8 187 TFLOP/s at 8192^3" and v.fix == g07.FIX_FP8
    assert g07.judge_gemm_rates(rates(fk.gb10_gemm(None, error)), profiles.GB10, Plan(precision="nvfp4")).status is Status.FAIL


def test_a_gemm_outside_its_tolerance_fails():
    res = fk.gb10_gemm(nvfp4_tflops=300.0)
    res.results[1].check, res.results[1].tflops = "relative error 0.31 over the 0.01 tolerance", None
    v = g07.judge_gemm_rates(rates(res), profiles.GB10, Plan(precision=None))
    assert v.status is Status.FAIL and "FP8: relative error 0.31 over the 0.01 tolerance" in v.summary


@pytest.mark.parametrize("bad,status,start", [
    (GemmReading(attempted=False, reason="torch is not installed"), Status.SKIP, "GEMM rates not measured: torch"),
    (GemmReading(attempted=True, problem="timed out after 180 s (killed)", crashed=True), Status.FAIL,
     "GEMM probe crashed or hung: timed out"),
    (GemmReading(attempted=True, problem="RuntimeError: CUDA error: out of memory"), Status.SKIP,
     "GEMM probe could not run: RuntimeError: CUDA error: out of memory"),
])
def test_bad_gemm_input_gives_one_clear_line(bad, status, start):
    v = g07.judge_gemm_rates(bad, profiles.GB10, Plan(precision=None))
    assert v.status is status and v.summary.startswith(start)


# -- the probe's layouts, on CPU ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_scale_swizzle_matches_cublas_documented_offsets(torch):
    rows, cols = 256, 8  # two 128-row tiles, two 4-column tiles
    scales = torch.arange(rows * cols, dtype=torch.int32).reshape(rows, cols)
    flat = gemm.to_blocked(scales)
    tiles_per_row = gemm.ceil_div(cols, 4)
    for i in range(rows):
        for j in range(cols):
            tile = 512 * ((i // 128) * tiles_per_row + j // 4)
            offset = tile + (i % 128 % 32) * 16 + (i % 128 // 32) * 4 + j % 4  # cuBLAS 1D block scaling layout
            assert flat[offset] == scales[i, j]


def test_scale_swizzle_pads_partial_tiles(torch):
    flat = gemm.to_blocked(torch.ones(130, 5))
    assert flat.numel() == 2 * 128 * 8 and float(flat.sum()) == 130 * 5


def test_e2m1_codes_decode_by_the_format_definition(torch):
    """e2m1: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is subnormal (m x 0.5)."""
    codes = torch.arange(16, dtype=torch.uint8)
    for code, value in zip(range(16), gemm.decode_e2m1(codes).tolist(), strict=True):
        sign, exp, man = code >> 3, (code >> 1) & 3, code & 1
        want = (man * 0.5) if exp == 0 else 2.0 ** (exp - 1) * (1 + man / 2)
        assert value == (-want if sign else want)


def test_e2m1_packing_puts_the_first_value_in_the_low_nibble(torch):
    codes = torch.tensor([[0x1, 0x7, 0xF, 0x2]], dtype=torch.uint8)
    assert gemm.pack_e2m1(codes).tolist() == [[0x71, 0x2F]]  # torch's pack_uint4 order


def test_relative_error_is_frobenius(torch):
    want = torch.ones(4, 4)
    assert gemm.rel_error(want * 1.01, want) == pytest.approx(0.01)
    assert gemm.rel_error(torch.zeros(2, 2), torch.zeros(2, 2)) == 0.0


def test_the_gemm_command_line_says_why_without_a_gpu(torch, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gemm.main(["--size", "256"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_the_table_lists_unsupported_formats_in_torch_words():
    from spark_gotchas.base.serial import from_jsonable, to_jsonable

    res = from_jsonable(gemm.GemmResult, json.loads(json.dumps(to_jsonable(fk.h200_gemm()))))
    assert res == fk.h200_gemm()
    table = gemm.format_result(res)
    assert "bf16          763.4" in table and "nvfp4" in table and "not supported here: RuntimeError(" in table


# -- live (fake worker) -> snapshot -> replay -----------------------------------------------------------
def test_snapshot_then_replay_gives_the_same_g7_lines(pytester, site, monkeypatch):
    import pytest_timeout

    import spark_gotchas.plugin as plugin

    site("vllm", "0.11.0", {"vllm/_C.abi3.so": "plain_sm120_sm121_ptx121.so"})
    worker = fk.FakeWorker({"spark_gotchas.runtime.tasks:torch_build": fk.torch_build_value("NVIDIA GB10", (12, 1)),
                            "spark_gotchas.microbench.gemm:probe": fk.gb10_gemm(nvfp4_tflops=127.0)})
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: True)
    monkeypatch.setattr("spark_gotchas.run.session.SessionState.worker", lambda self: worker)
    # the fake GB10 is the only GPU: on a GPU machine NVML would name the real one
    no_nvml.pin(monkeypatch)
    # and its environment has no Triton: a GPU machine's own Triton (whose ptxas may build no sm_121a) is not its
    monkeypatch.setattr("spark_gotchas.machine.readers.triton._triton_dir", lambda: None)
    # and the machine is a Spark's (aarch64, its GPU on the bus), live as in the replay of what it recorded
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(pytester.path / "root", pci=[GB10_PCI],
                                                               dev=("nvidia0", "nvidiactl"))))
    pytester.makepyfile(test_g07_check=(ROOT / "tests_gotchas" / "test_g07_nvfp4.py").read_text())

    def run(*args):
        return pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[plugin, pytest_timeout])

    live = run("-m", "fast", "--spark-snapshot", "snap.json", "--spark-precision", "nvfp4", "-v")
    live.assert_outcomes(failed=2)
    lines = glines(live, (7,))
    assert lines[0] == "G7 FAIL: no sm_121a kernels from vLLM 0.11.0, and this run plans NVFP4 (+1 more FAIL)", lines
    details = [line for line in live.stdout.lines if line.startswith("    fail: ")]
    assert "    fail: no sm_121a kernels from vLLM 0.11.0, and this run plans NVFP4 (vLLM 0.11.0 ships sm_120, sm_121, " \
           "compute_121, none sm_121a/sm_12Xf; NVFP4 would run without cvt.e2m1x2)" in details, details
    assert len(lines) >= 2 and all(line.startswith("    fix: ") for line in lines[1:]), lines
    assert sys.modules.get("vllm") is None  # read from its files, never imported

    monkeypatch.setattr("spark_gotchas.run.session.SessionState.worker", lambda self: (_ for _ in ()).throw(AssertionError("worker")))
    shutil.rmtree(site.root)  # the machine is gone: the snapshot must suffice
    replay = run("-m", "fast", "--spark-replay", "snap.json", "-v")
    replay.assert_outcomes(failed=2)
    assert glines(replay, (7,)) == lines
    assert [line for line in replay.stdout.lines if line.startswith("    fail: ")] == details


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_the_gemm_probe_runs_and_checks_on_cpu(torch, precision):
    """The real operand layouts and float64 check, on CPU tensors (torch's CPU _scaled_mm)."""
    r = gemm._one(torch, precision, 128, 1, 3, False, 1 << 20, WallClock(), device="cpu")
    if not r.supported:
        pytest.skip(f"this torch build's CPU path lacks {precision}: {r.error}")
    assert r.check == "ok" and r.rel_error < r.tolerance and r.tflops > 0


def test_nvfp4_unsupported_is_a_reading_in_torchs_words(torch):
    r = gemm._one(torch, "nvfp4", 128, 1, 3, False, 1 << 20, WallClock(), device="cpu")
    assert not r.supported and r.tflops is None
    assert r.error.split(":")[0] in ("RuntimeError", "ValueError", "NotImplementedError", "TypeError")
    assert r.api.startswith("torch._scaled_mm (float4_e2m1fn_x2")


def test_a_result_outside_its_tolerance_gets_no_rate(torch, monkeypatch):
    monkeypatch.setitem(gemm.TOLERANCE, "bf16", 0.0)
    r = gemm._one(torch, "bf16", 128, 1, 3, False, 1 << 20, WallClock(), device="cpu")
    assert r.supported and r.tflops is None and r.check.startswith("relative error ") and "over the 0 tolerance" in r.check


def test_tritons_ptxas_that_cannot_build_sm121a_keeps_fp4_on_fp8_with_g1s_remedy():
    """triton 3.5.0's ptxas 12.8 (triton-lang/triton#8539), read from the real wheel (tests/fixtures/cases33):
    Triton's FP4 kernels cannot target sm_121a; the fix adds the remedy G1 gives for that ptxas."""
    from spark_gotchas.base.serial import from_jsonable
    from spark_gotchas.knowledge.readings.env import Fp4KernelScan
    from spark_gotchas.knowledge.readings.triton import TritonPtxas

    cases = Path(__file__).parent / "fixtures" / "cases33"
    old = from_jsonable(TritonPtxas, json.loads((cases / "b1-triton-3.5-ptxas-12.8.json").read_text())["readings"]
                        ["triton.ptxas"])
    new = from_jsonable(TritonPtxas, json.loads((cases / "b2-triton-3.9-ptxas-blackwell.json").read_text())["readings"]
                        ["triton.ptxas"])
    v = g07.judge_kernel_targets(Fp4KernelScan(), fk.gb10_inventory(), None, profiles.GB10, Plan(precision=None), old)
    assert v.line == "G7 WARN: Triton's ptxas cannot build sm_121a kernels: stay on FP8"
    assert "triton 3.5.0's ptxas (CUDA 12.8) cannot compile for sm_121a" in v.detail
    assert v.fix.endswith("; for Triton's kernels: export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (CUDA 13.0's "
                          "ptxas, found here): Triton then compiles for sm_121a with it, whatever ptxas it bundles")
    fine = g07.judge_kernel_targets(Fp4KernelScan(), fk.gb10_inventory(), None, profiles.GB10, Plan(precision=None), new)
    assert fine.status is Status.INFO  # no FP4 library installed, and Triton's ptxas-blackwell 13.4 knows sm_121a
