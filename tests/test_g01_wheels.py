"""G1 on real wheels' facts: the scan's readings of PyPI wheels laid out as pip installs them,
recorded by devscripts/g01_wheels.py (tests/fixtures/g01_wheels.json), judged as a Spark (gb10, no
driver) and with no profile. CHANGELOG.md (G1, 2026-12-05) lists the wheels, the line expected before each run
and the line printed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_fix_texts import PYPI, instruction_problems, pip_names

from spark_gotchas.base.serial import from_jsonable
from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.profiles import PROFILES
from spark_gotchas.knowledge.readings.env import ExtensionScan
from spark_gotchas.knowledge.readings.gpu import GpuInventory
from spark_gotchas.knowledge.verdict import Status

WHEELS = json.loads((Path(__file__).parent / "fixtures" / "g01_wheels.json").read_text())
GB10, NONE, H200 = PROFILES["gb10"], PROFILES["none"], PROFILES["h200"]
BUILD13 = ("build {name} from source with CUDA 13's nvcc for sm_121 (CMake: -DCMAKE_CUDA_ARCHITECTURES=121; torch "
           "extensions: TORCH_CUDA_ARCH_LIST=12.1), e.g. in an NGC container: nvcr.io/nvidia/pytorch:25.10-py3 or "
           "later ships CUDA 13 and its nvcc; PyPI has no CUDA 13 build of it")


def reading(case: str) -> ExtensionScan:
    return from_jsonable(ExtensionScan, WHEELS[case]["reading"])


def spark(case: str):
    return g01.judge_extensions(reading(case), None, GB10)


# -- 1. the binaries for this platform outrank metadata ----------------------------------------------
def test_aarch64_tensorflow_is_a_cpu_build_not_a_cuda_12_failure():
    """tensorflow 2.21.0 for aarch64: build_info says is_cuda_build False, no GPU code, no CUDA
    soname; its METADATA's and-cuda extra (nvidia-*-cu12, not installed) is no evidence."""
    scan = reading("tf-a")
    (dist,) = [d for d in scan.distributions if d.name == "tensorflow"]
    assert dist.build_info == {"file": "tensorflow/python/platform/build_info.py", "cuda_build": "False"}
    assert dist.units == {} and dist.requires_majors  # the extra's wheels: metadata only
    verdict = spark("tf-a")
    assert verdict.line == "G1 WARN: tensorflow 2.21.0 is a CPU-only build: it will never use the GPU"
    assert "nvcr.io/nvidia/tensorflow" in verdict.fix and "CUDA 12" not in verdict.line
    report = verdict.readings["packages"]["tensorflow"]
    assert report["evidence"] == "its tensorflow/python/platform/build_info.py says it is not a CUDA build"


def test_x86_64_tensorflow_fails_the_same_alone_and_beside_one_of_its_libraries():
    """Static cudart, names built at run time, RUNPATH into nvidia/cublas/lib …: its build record says
    CUDA 12.5.1; nvidia-cudnn-cu12 beside it supplies one of its ten libraries, not cuBLAS."""
    alone, beside = spark("tf-x"), spark("tf-x-cudnn")
    line = "G1 FAIL: tensorflow: CUDA 12 libraries it loads not found: libcublas.so.12, libcublasLt.so.12 +8"
    assert alone.line == line and beside.line == line
    report = alone.readings["packages"]["tensorflow"]
    assert report["evidence"] == "its tensorflow/python/platform/build_info.py says CUDA 12.5.1"
    assert report["kernels"] == "its kernels reach sm_121 only through PTX compute_90 (ISA 8.3, compiled at first use)"
    assert "libcudnn.so.9" not in beside.readings["packages"]["tensorflow"]["not_found"]


def test_x86_64_tensorflow_is_named_in_a_nine_gigabyte_environment():
    """Beside nvidia-cudnn-cu12, vLLM, libcudf-cu12, DALI, open3d, paddle and xgboost it is judged as
    alone (it was not named at all before)."""
    if "big" not in WHEELS:
        pytest.skip("the 9 GB environment was not recorded")
    verdict = spark("big")
    report = verdict.readings["packages"]
    assert report["tensorflow"]["status"] == "FAIL" and verdict.status is Status.FAIL
    alone = spark("tf-x").readings["packages"]["tensorflow"]["not_found"]
    # only what the environment really supplies leaves the list: cuDNN (nvidia-cudnn-cu12), libnccl.so.2
    assert sorted(set(alone) - set(report["tensorflow"]["not_found"])) == ["libcudnn.so.9", "libnccl.so.2"]
    assert "for tensorflow, build tensorflow from source" in verdict.fix


@pytest.mark.parametrize("case,package,evidence", [
    # DALI's RPATH ../cufft/lib reads as the cu12 layout in both builds: the names it loads decide first
    ("dali130", "nvidia-dali-cuda130", "it loads libnppc.so.13, libnppicc.so.13 +1 by name"),
    ("dali120", "nvidia-dali-cuda120", "it loads libnppc.so.12, libnppicc.so.12 +1 by name"),
    ("xgboost", "xgboost", "its PTX is ISA 9.3 (built with CUDA 13)"),
    ("paddle", "paddlepaddle-gpu", "its paddle/version/__init__.py says CUDA 11.8"),
    ("jax12", "jax-cuda12-plugin", "its PTX is ISA 8.8 (built with CUDA 12)"),
    ("cupy12", "cupy-cuda12x", "it links libcublas.so.12, libnvrtc.so.12"),
])
def test_the_evidence_that_decided_is_said(case, package, evidence):
    assert spark(case).readings["packages"][package]["evidence"] == evidence


# -- 2. no kernel for this GPU is a FAIL however the package reaches CUDA ------------------------------
def test_paddle_with_almost_no_code_for_sm_121_fails():
    verdict = spark("paddle")
    assert verdict.line == ("G1 FAIL: paddlepaddle-gpu is built for CUDA 11 with kernels for sm_121 in 7 of 857 "
                            "units only (it has sm_35, sm_50, sm_52 +11)")
    assert verdict.fix == BUILD13.format(name="paddlepaddle-gpu")


def test_vllm_whose_optional_parts_have_no_kernel_here_warns_naming_them_and_their_users():
    """vllm 0.33.0 (aarch64): its core (_C_stable_libtorch, _moe_C, FA2) runs on sm_121; FlashMLA,
    DeepSelect, QuTLASS and FA3 are separate objects built for sm_90a/sm_100f only, each loaded by a
    feature module (vllm.v1.attention.ops.flashmla …), none when vllm is imported: a WARN naming them,
    never a FAIL, and never a PASS that names them only in the JSON report."""
    verdict = spark("vllm")
    assert verdict.line == "G1 WARN: vllm: 5 parts have no kernel for sm_121: _deepselect_C, _flashmla_C +3"
    report = verdict.readings["packages"]["vllm"]
    assert report["note"].startswith("kernels for other GPUs only: _deepselect_C (sm_100f); _flashmla_C (sm_90a, "
                                     "sm_100f)")
    assert report["units"] == 547 and report["units_for_this_gpu"] > 100
    parts = report["parts_without_kernels"]
    assert sorted(parts) == ["_deepselect_C", "_flashmla_C", "_flashmla_extension_C", "_qutlass_C", "_vllm_fa3_C"]
    assert {p["how"] for p in parts.values()} == {"optional"}
    assert parts["_vllm_fa3_C"]["users"] == ["vllm.vllm_flash_attn.flash_attn_interface"]
    assert "vllm.v1.attention.ops.flashmla loads it, when that feature is first used" in verdict.detail
    assert verdict.fix.startswith("use only vllm's features that do not load _deepselect_C, _flashmla_C")
    assert "build vllm from source for sm_121" in verdict.fix
    h200 = g01.judge_extensions(reading("vllm"), None, H200)  # sm_90: FlashMLA and FA3 run; DeepSelect does not
    assert sorted(h200.readings["packages"]["vllm"]["parts_without_kernels"]) == ["_deepselect_C", "_qutlass_C"]


def test_flashinfer_jit_cache_whose_moe_utils_has_sm100_kernels_only_warns_naming_the_module_and_its_loader():
    """flashinfer-python 0.7.4 (the real wheel) beside a jit-cache laid out as public reports show it
    (devscripts/jit_cache_wheel.py): moe_utils (sm_100f only, flashinfer#5238) is named with the module
    that loads it by name; fused_moe_100 is covered by fused_moe_120 (sm_120 runs on sm_121);
    fused_moe_trtllm_sm100 is built for another GPU by its name. The fix is the package's one remedy."""
    verdict = spark("flashinfer")
    assert verdict.line == "G1 WARN: flashinfer-jit-cache: moe_utils has no kernel for sm_121 (sm_100f only)"
    assert verdict.detail.startswith("moe_utils (flashinfer_jit_cache/jit_cache/moe_utils/moe_utils.so: sm_100f): "
                                     "flashinfer.jit.moe_utils loads it, when that feature is first used")
    assert "fused_moe_100 (covered, by fused_moe_120)" in verdict.detail
    assert "fused_moe_trtllm_sm100 (for another GPU)" in verdict.detail
    assert verdict.fix.startswith("run pip uninstall -y flashinfer-jit-cache: flashinfer-python then builds each")
    assert verdict.readings["remedy"] == [{"kind": "uninstall", "target": "flashinfer-jit-cache"},
                                          {"kind": "env", "target": "FLASHINFER_CUDA_ARCH_LIST", "value": "12.1a"}]
    parts = verdict.readings["packages"]["flashinfer-jit-cache"]["parts_without_kernels"]
    assert parts["moe_utils"]["how"] == "optional" and parts["moe_utils"]["users"] == ["flashinfer.jit.moe_utils"]


def test_a_cuda_13_build_with_only_sm_120a_kernels_fails_on_sm_121_and_passes_on_an_h200():
    """onnxruntime-gpu 1.31.1 (x86_64): sm_120a cubins do not run on sm_121; sm_90a ones run on sm_90."""
    verdict = spark("onnx")
    assert verdict.line == "G1 FAIL: onnxruntime-gpu has no kernel for sm_121 (it has sm_75, sm_80, sm_86 +3)"
    assert verdict.fix.startswith("build onnxruntime-gpu from source for sm_121 (CMake: -DCMAKE_CUDA_ARCHITECTURES=121")
    h200 = g01.judge_extensions(reading("onnx"), None, H200)  # judged for an H200 (sm_90): its sm_90a cubins run
    assert h200.readings["packages"]["onnxruntime-gpu"]["kernels"] == "its kernels include sm_90a, which runs on sm_90"


def test_ptx_newer_than_the_driver_is_refused_and_said_where_cubins_carry_it():
    """xgboost 3.4.1 (aarch64): PTX ISA 9.3 needs a CUDA 13.3 driver; its sm_120 cubin runs instead."""
    report = spark("xgboost").readings["packages"]["xgboost"]
    assert report["kernels"] == "its kernels include sm_120, which runs on sm_121"
    assert report["note_ptx"] == "compute_120 is PTX ISA 9.3, which needs a CUDA 13.3 driver: its cubins run instead"


def test_ptx_older_than_the_driver_reaches_the_gpu():
    """xformers 0.0.35 (x86_64): sm_75/80/90a cubins and compute_80 PTX ISA 8.7 (CUDA 12.8)."""
    report = spark("xformers").readings["packages"]["xformers"]
    assert report["kernels"] == "its kernels reach sm_121 only through PTX compute_80 (ISA 8.7, compiled at first use)"


# -- 3. the fix names what the user installed and its real sibling -------------------------------------
def test_libcudf_cu12_is_sent_to_cudf_cu13_through_the_package_that_brought_it():
    verdict = spark("cudf12")
    assert verdict.line == "G1 FAIL: libcudf-cu12: CUDA 12 libraries not found: libnvJitLink.so.12, libnvrtc.so.12"
    assert verdict.fix.startswith("install the CUDA 13 build of cudf-cu12 instead (libcudf-cu12 came with it): "
                                  "pip uninstall -y cudf-cu12 libcudf-cu12 && pip install cudf-cu13; or keep")
    assert verdict.readings["packages"]["libcudf-cu12"]["brought_by"] == ["cudf-cu12"]


@pytest.mark.parametrize("case,sibling", [("dali120", "nvidia-dali-cuda130"), ("cupy12", "cupy-cuda13x"),
                                          ("jax12", "jax-cuda13-plugin")])
def test_other_cuda_12_builds_are_sent_to_their_pypi_sibling(case, sibling):
    verdict = spark(case)
    assert f"&& pip install {sibling}" in verdict.fix and "PyPI has no" not in verdict.fix


def test_no_sibling_on_pypi_is_said_only_after_the_names_were_checked():
    verdict = spark("xformers")  # no xformers-cu13 on PyPI
    assert verdict.fix.startswith(BUILD13.format(name="xformers"))


# -- 4. two distributions that own the same file ---------------------------------------------------------
@pytest.mark.parametrize("case,line", [
    ("cudnn12-13", "G1 WARN: nvidia-cudnn-cu12 and nvidia-cudnn-cu13 both install nvidia/cudnn/lib (10 files); "
                   "the copy on disk is nvidia-cudnn-cu13's"),
    ("cudnn13-12", "G1 FAIL: nvidia-cudnn-cu12 and nvidia-cudnn-cu13 both install nvidia/cudnn/lib (10 files); "
                   "the copy on disk is nvidia-cudnn-cu12's"),
    ("nccl12-13", "G1 WARN: nvidia-nccl-cu12 and nvidia-nccl-cu13 both install libnccl.so.2; "
                  "the copy on disk is nvidia-nccl-cu13's"),
    ("nccl13-xgb", "G1 FAIL: nvidia-nccl-cu12 and nvidia-nccl-cu13 both install libnccl.so.2; "
                   "the copy on disk is nvidia-nccl-cu12's"),
])
def test_a_file_two_cuda_majors_install_names_both_and_the_one_on_disk(case, line):
    verdict = spark(case)
    assert verdict.line == line
    assert verdict.fix.startswith("run pip uninstall -y nvidia-")
    owners = {f.on_disk for f in reading(case).shared_files}
    assert len(owners) == 1 and owners.pop() in line


# -- 5. a CPU-only build of a package users install for the GPU ----------------------------------------
@pytest.mark.parametrize("case,name,version", [("tf-a", "tensorflow", "2.21.0"), ("open3d-a", "open3d", "0.20.0")])
def test_a_cpu_only_framework_warns_on_a_spark_and_is_info_elsewhere(case, name, version):
    assert spark(case).line == f"G1 WARN: {name} {version} is a CPU-only build: it will never use the GPU"
    h200 = g01.judge_extensions(reading(case), GpuInventory(driver_version="580.159.04", cuda_driver_version=13000),
                                H200)
    assert h200.status is Status.PASS and f"{name} {version} is a CPU-only build" in h200.detail


def test_open3d_for_x86_64_is_a_cuda_build():
    report = spark("open3d-x").readings["packages"]["open3d"]
    assert report["mode"] == "links" and report["cuda_majors"] == [12]


@pytest.mark.parametrize("case", sorted(k for k in WHEELS if not k.startswith("_")))
def test_every_fix_is_an_instruction_naming_projects_pypi_has(case):
    """What a fix installs is on PyPI; what it uninstalls is installed here (flashinfer-jit-cache comes
    from FlashInfer's own index, not PyPI)."""
    installed = {d.name.lower() for d in reading(case).distributions}
    for profile in (GB10, NONE):
        fix = g01.judge_extensions(reading(case), None, profile).fix
        if fix:
            assert instruction_problems(fix) == []
            removed = {n for part in re.findall(r"pip uninstall[^:;&]*", fix) for n in pip_names(part)}
            assert removed <= installed
            assert sorted(set(pip_names(re.sub(r"pip uninstall[^:;&]*", "", fix))) - PYPI) == []


def test_names_and_paths_read_from_records_reach_the_line_escaped():
    """A distribution's name and a RECORD path are outside strings: control characters escaped."""
    from spark_gotchas.knowledge.readings.env import FileOwner, SharedFile

    evil = "nvidia-x-cu12\x1b]8;;http://a\x07"
    shared = [SharedFile(path="nvidia/x/lib/libx.so.1\x1b[2J", how="size", on_disk=evil,
                         owners=[FileOwner(evil, "1.0", 12, size=1), FileOwner("nvidia-x-cu13", "2.0", 13, size=2)])]
    verdict = g01.judge_extensions(ExtensionScan(shared_files=shared, resolved=True), None, GB10)
    assert verdict.status is Status.FAIL
    assert "\x1b" not in verdict.line + verdict.fix and "\x07" not in verdict.line
    assert "libx.so.1" in verdict.line and "nvidia-x-cu13" in verdict.fix


def test_pypi_sgl_kernel_with_kernels_up_to_sm_120a_fails_on_a_spark_with_sglangs_own_cu130_build():
    """sgl-kernel 0.3.21 from PyPI (x86_64, the version sglang 0.5.9 pins): "PyPI sgl-kernel wheels carry
    kernel images only up to sm_120a … The +cu130 builds from SGLang's own index do contain sm_121a"
    (mmcdermott/MEDS_EIC_AR#163). Expected before the run: a FAIL for no kernel for sm_121; printed: the
    majority rule's FAIL (10 of 341 general units hold code for sm_121)."""
    verdict = spark("sgl-kernel")
    assert verdict.line == ("G1 FAIL: sgl-kernel is built for CUDA 12 with kernels for sm_121 in 10 of 341 units only "
                            "(it has sm_80, sm_86, sm_89 +6)")
    assert verdict.fix.startswith("reinstall sgl-kernel's CUDA 13 build from SGLang's own index")
    assert "https://docs.sglang.ai/whl/cu130/" in verdict.fix
