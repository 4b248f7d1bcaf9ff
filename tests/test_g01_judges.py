"""G1 judges on recorded readings: real GB10 and H200 printouts, and made-up edge cases."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from spark_gotchas.base.serial import from_jsonable
from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.profiles import PROFILES
from spark_gotchas.knowledge.readings import remedies
from spark_gotchas.knowledge.readings.env import CudaDistribution, CudaLibrary, ExtensionScan, LinkedExtension
from spark_gotchas.knowledge.readings.gpu import GpuInventory
from spark_gotchas.knowledge.readings.torch import FirstLaunch, TorchBuild
from spark_gotchas.knowledge.verdict import Status

REAL = json.loads((Path(__file__).parent / "fixtures" / "g01_readings.json").read_text())
GB10, H200, NONE = PROFILES["gb10"], PROFILES["h200"], PROFILES["none"]
# The remedy for a package PyPI has no CUDA 13 build of, judged for sm_121.
BUILD13 = ("build {name} from source with CUDA 13's nvcc for sm_121 (CMake: -DCMAKE_CUDA_ARCHITECTURES=121; torch "
           "extensions: TORCH_CUDA_ARCH_LIST=12.1), e.g. in an NGC container: nvcr.io/nvidia/pytorch:25.10-py3 or "
           "later ships CUDA 13 and its nvcc; PyPI has no CUDA 13 build of it")


def inventory(name: str) -> GpuInventory:
    return from_jsonable(GpuInventory, REAL["inventories"][name]["reading"])


def build(name: str) -> TorchBuild:
    return from_jsonable(TorchBuild, REAL["torch_builds"][name]["reading"])


def scan(name: str) -> ExtensionScan:
    return from_jsonable(ExtensionScan, REAL["extension_scans"][name]["reading"])


def made_up_build(version: str, cuda: str | None) -> TorchBuild:
    return TorchBuild(installed=True, version=version, cuda=cuda, compiled_with_cuda=cuda is not None)


# -- torch's CUDA major vs the driver's ---------------------------------------------------------------
@pytest.mark.parametrize("torch_name,inv_name", [("pip_2.9.0+cu130_gb10", "gb10_580.95.05"),
                                                 ("ngc_2.10.0a0_nv25.11", "gb10_580.142")])
def test_cuda_13_torch_on_a_spark_passes_with_or_without_a_cu_tag(torch_name, inv_name):
    verdict = g01.judge_torch(build(torch_name), inventory(inv_name), GB10)
    assert verdict.status is Status.PASS
    b, inv = build(torch_name), inventory(inv_name)
    assert verdict.line == f"G1 PASS: torch {b.version} (CUDA 13.0) matches the driver's CUDA 13.0"
    assert verdict.detail == f"driver {inv.driver_version} supports CUDA 13.0"


def test_cu128_torch_on_a_spark_fails():
    verdict = g01.judge_torch(made_up_build("2.8.0+cu128", "12.8"), inventory("gb10_580.95.05"), GB10)
    assert verdict.status is Status.FAIL
    assert verdict.summary == "torch 2.8.0+cu128 is built for CUDA 12.8 but driver 580.95.05 supports CUDA 13.0"
    assert "download.pytorch.org/whl/cu130" in verdict.fix


def test_cu12_torch_on_an_h200_with_a_cuda_13_driver_warns():
    verdict = g01.judge_torch(made_up_build("2.8.0+cu128", "12.8"), inventory("h200_580.159.04"), H200)
    assert verdict.status is Status.WARN
    assert verdict.summary == "torch 2.8.0+cu128 is built for CUDA 12.8, older than the driver's CUDA 13.0"
    assert verdict.detail == ("driver 580.159.04 supports CUDA 13.0: torch runs through backward compatibility, "
                              "but extensions built for the driver's CUDA will not match it")
    assert verdict.fix.startswith("reinstall torch built for CUDA 13: pip install --force-reinstall torch "
                                  "--index-url https://download.pytorch.org/whl/cu130")


def test_cu130_torch_on_a_cuda_12_driver_is_told_to_take_the_cuda_12_index():
    """The index the fix names is the driver's major's (cu128), not always cu130; so is the no-torch fix's."""
    old_driver = dataclasses.replace(inventory("h200_580.159.04"), cuda_driver_version=12080)
    verdict = g01.judge_torch(made_up_build("2.11.0+cu130", "13.0"), old_driver, H200)
    assert verdict.status is Status.FAIL
    assert verdict.fix == ("reinstall torch built for CUDA 12: pip install --force-reinstall torch --index-url "
                           "https://download.pytorch.org/whl/cu128 (or use a matched NGC container)")
    missing = g01.judge_torch(dataclasses.replace(made_up_build("2.11.0+cu130", "13.0"), installed=False), old_driver, H200)
    assert missing.fix.endswith("install torch built for CUDA 12: pip install torch --index-url "
                                "https://download.pytorch.org/whl/cu128")


def test_the_h200_measured_here_passes():
    verdict = g01.judge_torch(build("pip_2.11.0+cu130_h200"), inventory("h200_580.159.04"), H200)
    assert verdict.line == "G1 PASS: torch 2.11.0+cu130 (CUDA 13.0) matches the driver's CUDA 13.0"
    assert verdict.detail == "driver 580.159.04 supports CUDA 13.0"


def test_a_newer_cuda_than_the_driver_fails_everywhere():
    old_driver = GpuInventory(driver_version="550.54.15", cuda_driver_version=12040)
    verdict = g01.judge_torch(build("pip_2.11.0+cu130_h200"), old_driver, H200)
    assert verdict.status is Status.FAIL and "but driver 550.54.15 supports CUDA 12.4" in verdict.summary


def test_cpu_torch_without_a_driver_skips():
    verdict = g01.judge_torch(made_up_build("2.13.0+cpu", None), inventory("no_driver"), NONE)
    assert verdict.line == "G1 SKIP: torch 2.13.0+cpu is a CPU build and no NVIDIA driver is present"


def test_cpu_torch_on_a_spark_fails():
    verdict = g01.judge_torch(build("cpu_2.9.1_spark"), inventory("gb10_580.142"), GB10)
    assert verdict.line == "G1 FAIL: torch 2.9.1+cpu is a CPU build; driver 580.142 supports CUDA 13.0"


def test_cpu_torch_judged_as_a_spark_without_a_driver_fails():
    verdict = g01.judge_torch(made_up_build("2.13.0+cpu", None), inventory("no_driver"), GB10)
    assert verdict.line == ("G1 FAIL: torch 2.13.0+cpu is a CPU build; no driver read; "
                            "the gb10 profile expects CUDA 13")


def test_a_cuda_torch_without_a_driver_skips_and_says_how_to_judge_anyway():
    verdict = g01.judge_torch(build("pip_2.9.0+cu130_gb10"), inventory("no_driver"), NONE)
    assert verdict.line == ("G1 SKIP: torch 2.9.0+cu130 is built for CUDA 13.0; "
                            "no NVIDIA driver to compare with")
    assert verdict.detail == "--spark-profile gb10 judges it against a Spark's CUDA 13"


def test_import_error_naming_cudart_12_fails_with_the_hint():
    verdict = g01.judge_torch(build("import_error_cudart12"), inventory("gb10_580.95.05"), GB10)
    assert verdict.status is Status.FAIL
    assert verdict.summary.startswith("import torch fails (a CUDA 12 build on a CUDA 13 system): ImportError: "
                                      "libcudart.so.12: cannot open shared object file")


def test_a_worker_crash_while_importing_torch_fails_naming_the_signal():
    crashed = TorchBuild(installed=True, worker_problem="child process killed by SIGSEGV")
    verdict = g01.judge_torch(crashed, inventory("gb10_580.95.05"), GB10)
    assert verdict.line == ("G1 FAIL: import torch crashed or hung in a child process: "
                            "child process killed by SIGSEGV")


def test_a_crash_with_the_cuda_context_warm_up_beside_it_says_how_to_tell_them_apart(monkeypatch):
    from bench_fakes import FakeWorker

    from spark_gotchas.machine.options import RunOptions
    from spark_gotchas.machine.readers import ReadContext
    from spark_gotchas.machine.readers.torch import read_torch_build
    from spark_gotchas.runtime.worker import TaskResult

    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: True)
    worker = FakeWorker({"spark_gotchas.runtime.tasks:torch_build": TaskResult(
        ok=False, crashed=True, signal="SIGSEGV", beside=("cuda_context",))})
    build = read_torch_build(ReadContext(options=RunOptions(), worker_factory=lambda: worker))
    verdict = g01.judge_torch(build, inventory("gb10_580.95.05"), GB10)
    assert verdict.line.startswith("G1 FAIL: import torch crashed or hung in a child process: child process "
                                   "killed by SIGSEGV (the ")
    assert "cuda_context was running beside it; SPARK_GOTCHAS_" in verdict.line  # and how to run without it


def test_torch_not_installed_is_never_a_pass_when_a_cuda_major_is_expected():
    verdict = g01.judge_torch(TorchBuild(installed=False), None, GB10)
    assert verdict.line == "G1 WARN: torch is not installed: the CUDA ABI of torch cannot be checked"
    assert verdict.readings["source"] == "no driver read; the gb10 profile expects CUDA 13"
    assert verdict.fix.startswith("run the preflight with the Python of the environment you train in")
    assert "https://download.pytorch.org/whl/cu130" in verdict.fix
    assert g01.judge_torch(TorchBuild(installed=False), inventory("h200_580.159.04"), H200).status is Status.WARN
    assert g01.judge_torch(TorchBuild(installed=False), None, NONE).line == (
        "G1 SKIP: torch is not installed: no torch CUDA build to check")


# -- the first launch ----------------------------------------------------------------------------------------
def test_first_launch_segfault_fails_naming_the_signal():
    launch = FirstLaunch(attempted=True, ok=False, reason="child process killed by SIGSEGV", signal="SIGSEGV",
                         seconds=0.8)
    verdict = g01.judge_first_launch(launch)
    assert verdict.line == "G1 FAIL: first CUDA launch crashed with SIGSEGV: child process killed by SIGSEGV"
    assert verdict.readings["signal"] == "SIGSEGV"


def test_first_launch_hang_and_wrong_answer_fail():
    hung = g01.judge_first_launch(FirstLaunch(attempted=True, reason="timed out after 60 s (killed)", timed_out=True))
    assert hung.line == "G1 FAIL: first CUDA launch hung (killed at the timeout): timed out after 60 s (killed)"
    wrong = g01.judge_first_launch(FirstLaunch(attempted=True, reason="kernel gave 0.0, expected 523776.0"))
    assert wrong.status is Status.FAIL and "failed: kernel gave 0.0" in wrong.summary


def test_first_launch_ok_and_not_tried():
    ok = g01.judge_first_launch(FirstLaunch(attempted=True, ok=True, seconds=0.201))
    assert ok.line == "G1 PASS: first CUDA kernel ran in a child process in 0.20 s"
    skipped = g01.judge_first_launch(FirstLaunch(attempted=False, reason="torch is a CPU build"))
    assert skipped.line == "G1 SKIP: first CUDA launch not tried: torch is a CPU build"


# -- extensions ---------------------------------------------------------------------------------------------------
def lib(soname: str, found: str | None = None, via: str | None = None, inside: bool = True) -> CudaLibrary:
    from spark_gotchas.knowledge.readings.cuda_libs import soname_major

    return CudaLibrary(soname, soname_major(soname), found, via, inside and found is not None)


def ext(path: str, dist: str | None, *libs: CudaLibrary, tag: str | None = None) -> LinkedExtension:
    return LinkedExtension(path, dist, {x.soname: x.major for x in libs if x.major is not None}, list(libs),
                           build_tag=tag)


def resolved(*linked: LinkedExtension, dists: tuple[CudaDistribution, ...] = (), torch_cuda: str | None = None,
             **kw) -> ExtensionScan:
    return ExtensionScan(shared_objects=850, seconds=0.2, linked=list(linked), distributions=list(dists),
                         resolved=True, torch_cuda=torch_cuda, **kw)


def test_a_cu12_extension_on_a_spark_fails_naming_its_distribution_and_the_missing_libraries():
    verdict = g01.judge_extensions(scan("sgl_kernel_cu12_gb10"), inventory("gb10_580.142"), GB10)
    assert verdict.line == "G1 FAIL: sgl-kernel: CUDA 12 libraries not found: libcudart.so.12, libnvrtc.so.12"
    # sgl-kernel's one remedy: SGLang's own cu130 index has the CUDA 13 build with sm_121a (MEDS_EIC_AR#163)
    assert verdict.fix == remedies.SGL_KERNEL.text
    assert verdict.readings["packages"]["sgl-kernel"]["not_found"] == ["libcudart.so.12", "libnvrtc.so.12"]
    assert verdict.readings["mismatched"][0]["distribution"] == "sgl-kernel"


def test_cu12_extension_judged_as_a_spark_without_a_driver_fails():
    verdict = g01.judge_extensions(scan("sgl_kernel_cu12_gb10"), inventory("no_driver"), GB10)
    assert verdict.status is Status.FAIL and "sgl-kernel" in verdict.summary


def test_the_h200_extensions_match_its_driver():
    verdict = g01.judge_extensions(scan("h200_torch_cu130"), inventory("h200_580.159.04"), H200)
    assert verdict.line == ("G1 PASS: 2 packages use CUDA 13 (the driver supports CUDA 13.0): torch; torchaudio")
    assert verdict.detail == ""  # every package is in the line


def test_packages_whose_names_would_pass_100_columns_are_counted_and_named_in_the_detail():
    """The recorded H200's seven CUDA 13 packages: three names and a count were 117 columns; the line
    keeps the count and the driver, so a not-checked tail still fits; the detail names every package."""
    recorded = json.loads((Path(__file__).parent / "fixtures" / "h200" / "preflight-snapshot.json").read_text())
    readings = recorded["readings"]
    verdict = g01.judge_extensions(from_jsonable(ExtensionScan, readings["env.cuda_extensions"]),
                                   from_jsonable(GpuInventory, readings["gpu.inventory"]), H200)
    assert verdict.line == "G1 PASS: 7 packages use CUDA 13 (the driver supports CUDA 13.0)"
    assert verdict.detail == ("cupy-cuda13x; nvidia-cublas; nvidia-cusolver; nvidia-cusparse; torch; torchaudio; "
                              "torchvision")


def test_without_a_driver_the_line_says_the_profile_expects_cuda_13_not_the_driver():
    torch13 = resolved(ext("/sp/torch/lib/libc10_cuda.so", "torch", lib("libcudart.so.13", "/sp/nvidia/cu13/lib/x")))
    verdict = g01.judge_extensions(torch13, inventory("no_driver"), GB10)
    assert verdict.line == "G1 PASS: torch uses CUDA 13; the gb10 profile expects CUDA 13"
    assert "driver" not in verdict.summary


def mixed_scan() -> ExtensionScan:
    """A snapshot of an older suite: sonames only, nothing resolved."""
    return ExtensionScan(shared_objects=5, seconds=0.01, linked=[
        LinkedExtension("/sp/torch/lib/libc10_cuda.so", "torch", {"libcudart.so.13": 13}),
        LinkedExtension("/sp/torchaudio/lib/a.so", "torchaudio", {"libcudart.so.13": 13}),
        LinkedExtension("/sp/vllm/_C.abi3.so", "vllm", {"libcudart.so.12": 12}),
        LinkedExtension("/sp/orphan/_x.so", None, {"libcublasLt.so.12": 12}),
    ])


def test_mixed_majors_without_a_driver_fail_naming_the_minority():
    verdict = g01.judge_extensions(mixed_scan(), inventory("no_driver"), NONE)
    assert verdict.status is Status.FAIL
    assert verdict.summary == ("2 packages will not load: (no distribution) /sp/orphan/_x.so (libcublasLt.so.12); "
                               "vllm (libcudart.so.12)")
    assert verdict.fix.startswith("for (no distribution) /sp/orphan/_x.so, rebuild /sp/orphan/_x.so against "
                                  "CUDA 13 or remove it (no installed distribution owns it); ")
    assert verdict.fix.endswith("; for vllm, build vllm from source with CUDA 13's nvcc, e.g. in an NGC container: "
                                "nvcr.io/nvidia/pytorch:25.10-py3 or later ships CUDA 13 and its nvcc; PyPI has no "
                                "CUDA 13 build of it")  # no GPU read, no profile: no sm_ to build for
    assert verdict.readings["expected_from"] == "most packages here use CUDA 13 (no driver read)"


def test_one_major_without_a_driver_is_information():
    only13 = ExtensionScan(shared_objects=3, seconds=0.01, linked=mixed_scan().linked[:2])
    verdict = g01.judge_extensions(only13, inventory("no_driver"), NONE)
    assert verdict.line == "G1 INFO: CUDA 13: torch, torchaudio; no driver to compare with"
    assert verdict.detail == "--spark-profile gb10 judges these packages as a Spark would load them"
    nothing = g01.judge_extensions(ExtensionScan(shared_objects=207, seconds=0.14), inventory("no_driver"), NONE)
    assert nothing.line == "G1 INFO: no package uses CUDA"  # nothing to compare with a driver
    assert nothing.detail == "207 shared objects read"


def test_static_cudart_everywhere_is_no_finding_on_a_spark():
    verdict = g01.judge_extensions(ExtensionScan(shared_objects=40, seconds=0.02), inventory("gb10_580.95.05"), GB10)
    assert verdict.line == ("G1 PASS: no package uses CUDA (40 shared objects read); "
                            "the driver supports CUDA 13.0")


def test_many_offenders_are_capped_in_the_line():
    linked = [ext(f"/sp/p{i}/_C.so", f"pkg{i}", lib("libcudart.so.12")) for i in range(9)]
    verdict = g01.judge_extensions(resolved(*linked), inventory("gb10_580.95.05"), GB10)
    assert verdict.summary.startswith("9 packages will not load: pkg0 (libcudart.so.12 not found); ")
    assert verdict.summary.endswith("; +6 more")
    assert f"; for pkg8, {BUILD13.format(name='pkg8')}; or keep this build" in verdict.fix  # every package named


BNB = [ext(f"/sp/bitsandbytes/libbitsandbytes_cuda{t}.so", "bitsandbytes", lib(f"libcudart.so.{m}"),
           lib(f"libcublas.so.{m}"), tag=f"cuda{t}")
       for t, m in (("118", 11), ("121", 12), ("128", 12), ("130", 13), ("132", 13))]


@pytest.mark.parametrize("torch_cuda,line", [
    ("13.0", "G1 PASS: bitsandbytes loads libbitsandbytes_cuda130.so; the gb10 profile expects CUDA 13"),
    (None, "G1 PASS: bitsandbytes holds CUDA 13 builds (cuda130, cuda132); the gb10 profile expects CUDA 13"),
], ids=["torch cu130", "no torch"])
def test_several_builds_pass_when_one_is_for_the_cuda_of_the_run(torch_cuda, line):
    verdict = g01.judge_extensions(resolved(*BNB, torch_cuda=torch_cuda), inventory("no_driver"), GB10)
    assert verdict.line == line
    assert verdict.readings["packages"]["bitsandbytes"]["builds"] == {"libbitsandbytes_*.so": [11, 12, 13]}


def test_several_builds_on_a_machine_without_a_cuda_major_to_compare_with_are_information():
    verdict = g01.judge_extensions(resolved(*BNB), inventory("no_driver"), H200)
    assert verdict.line == "G1 INFO: bitsandbytes holds builds for CUDA 11, 12, 13; no driver to compare with"


def test_with_a_driver_a_missing_library_of_the_right_major_fails_too():
    cupy13 = resolved(ext("/sp/cupy_backends/cuda/libs/cublas.so", "cupy-cuda13x", lib("libcublas.so.13")))
    verdict = g01.judge_extensions(cupy13, inventory("h200_580.159.04"), H200)
    assert verdict.line == "G1 FAIL: cupy-cuda13x: CUDA 13 libraries not found: libcublas.so.13"
    assert verdict.fix == "install the CUDA libraries it needs: pip install nvidia-cublas"
    # judged for a Spark from another machine, the Spark's own CUDA 13 is taken to provide it
    assert g01.judge_extensions(cupy13, None, GB10).line == ("G1 PASS: cupy-cuda13x uses CUDA 13; "
                                                             "the gb10 profile expects CUDA 13")


def test_a_library_found_only_on_this_machine_does_not_count_for_a_spark():
    """/usr/local/cuda-12.8 on a CI box is not on the Spark the run is judged for."""
    system = lib("libcudart.so.12", "/usr/local/cuda-12.8/lib64/libcudart.so.12", "ld.so.cache", inside=False)
    scan12 = resolved(ext("/sp/fastops/_C.so", "fastops", system))
    assert g01.judge_extensions(scan12, None, GB10).status is Status.FAIL
    on_this_machine = GpuInventory(driver_version="570.1", cuda_driver_version=13000)
    assert g01.judge_extensions(scan12, on_this_machine, H200).status is Status.WARN


@pytest.mark.parametrize("kernels,status,words", [
    (["sm_80", "sm_90", "compute_90"], Status.WARN, "its kernels reach sm_121 only through PTX compute_90"),
    (["sm_80", "sm_90", "sm_120"], Status.WARN, "its kernels include sm_120, which runs on sm_121"),
    (["sm_80", "sm_90", "sm_90a"], Status.FAIL, "no kernel for sm_121"),
])
def test_a_loadable_cuda_12_package_is_told_whether_its_kernels_run_on_sm_121(kernels, status, words):
    found = lib("libcudart.so.12", "/sp/nvidia/cuda_runtime/lib/libcudart.so.12", "nvidia wheel")
    dist = CudaDistribution("cupy-cuda12x", "14.2.0", name_major=12, shared_objects=65,
                            kernels={"cupy/cuda/cub.so": kernels})
    verdict = g01.judge_extensions(resolved(ext("/sp/cupy/cuda/cub.so", "cupy-cuda12x", found), dists=(dist,)),
                                   inventory("gb10_580.95.05"), GB10)
    assert verdict.status is status and words in verdict.summary + verdict.fix
    assert verdict.fix.startswith("install its CUDA 13 build instead: pip uninstall -y cupy-cuda12x && "
                                  "pip install cupy-cuda13x")


def test_library_wheels_are_never_the_package_named():
    cublas = ext("/sp/nvidia/cublas/lib/libcublas.so.12", "nvidia-cublas-cu12", lib("libcublasLt.so.12"))
    wheel = CudaDistribution("nvidia-cublas-cu12", "12.9.1.4", library_wheel=True, name_major=12)
    verdict = g01.judge_extensions(resolved(cublas, dists=(wheel,)), None, GB10)
    assert verdict.status is Status.PASS and "nvidia" not in verdict.line


def test_a_package_known_only_by_its_metadata_is_judged_by_it():
    """No file links CUDA or names a library: a CUDA 12 name and CUDA 12 requirements still say which."""
    dist = CudaDistribution("cuda-bindings", "12.9.10", name_major=12, shared_objects=32, strings_scanned=32,
                            requires_majors={"nvidia-cuda-nvrtc-cu12": 12},
                            declared=[lib("libnvrtc.so.12", "/sp/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia wheel")])
    verdict = g01.judge_extensions(resolved(dists=(dist,)), None, GB10)
    assert verdict.line == ("G1 WARN: cuda-bindings uses CUDA 12 (its libraries are installed); "
                            "the gb10 profile expects CUDA 13")
    assert verdict.fix == "install its CUDA 13 release: pip install 'cuda-bindings>=13,<14'"


@pytest.mark.parametrize("name,sibling", [
    ("cupy-cuda12x", "cupy-cuda13x"), ("jax-cuda12-plugin", "jax-cuda13-plugin"), ("jax-cuda12-pjrt", "jax-cuda13-pjrt"),
    ("transformer-engine-cu12", "transformer-engine-cu13"), ("nvidia-dali-cuda120", "nvidia-dali-cuda130"),
    ("vllm", None), ("cupy", None), ("accuracy-cu-tools", None),
])
def test_the_cuda_13_sibling_by_naming_convention(name, sibling):
    assert g01.sibling(name, 13) == sibling


def test_the_pytorch_family_is_sent_to_the_cu130_index():
    torch12 = resolved(ext("/sp/torchvision/_C.so", "torchvision", lib("libcudart.so.12", "/sp/nvidia/x", "RPATH")))
    verdict = g01.judge_extensions(torch12, inventory("gb10_580.95.05"), GB10)
    assert verdict.status is Status.WARN
    assert verdict.fix == ("reinstall torchvision for CUDA 13: pip install --force-reinstall torchvision "
                           "--index-url https://download.pytorch.org/whl/cu130")


BROKEN_PYNVML = "raise AttributeError(\"module 'pynvml' has no attribute 'nvmlInit'\")\n"
MISSING_CUDNN = "import ctypes\nctypes.CDLL('libcudnn.so.9-not-here')\n"  # as torch loads its CUDA libraries


@pytest.mark.parametrize("torch_init,other_files,fails_in,fix", [
    ("import pynvml\n", {"pynvml.py": BROKEN_PYNVML}, "pynvml.py", "it is not part of torch, and reinstalling torch will not help"),
    (MISSING_CUDNN, {}, None, g01.FIX_INDEX),
], ids=["a broken pynvml torch imports", "a CUDA library torch cannot load"])
def test_an_import_of_torch_that_fails_names_the_package_to_repair(tmp_path, torch_init, other_files, fails_in, fix):
    import os

    from spark_gotchas.runtime.worker import Worker

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(torch_init)
    for name, text in other_files.items():
        (tmp_path / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    worker = Worker(preload=("torch",), env=env)
    try:
        result = worker.call("spark_gotchas.runtime.tasks:torch_build", timeout=60)
    finally:
        worker.close()
    reading = from_jsonable(TorchBuild, result.value)
    verdict = g01.judge_torch(reading, inventory("gb10_580.95.05"), GB10)
    assert verdict.status is Status.FAIL and fix in verdict.fix
    if fails_in:  # the line names the other package's file
        assert verdict.line.startswith(f"G1 FAIL: import torch fails in {tmp_path / fails_in}: AttributeError")
        assert verdict.fix.startswith(f"repair or remove the package that {tmp_path / fails_in} belongs to")
    else:  # torch's own file (ctypes, in Python's library, is passed over): reinstall torch
        assert reading.import_error_file == str(tmp_path / "torch" / "__init__.py")
        assert verdict.line.startswith("G1 FAIL: import torch fails: OSError: libcudnn.so.9-not-here")


# -- a fix names only what PyPI has, and promises only what holds (real wheels, readelf and fatbin facts) --------
def faiss_gpu_cu12(found: bool) -> ExtensionScan:
    """faiss-gpu-cu12 1.14.1.post1 (cp312 manylinux2014 x86_64; PyPI has no aarch64 build): libfaiss links
    libcudart/libcublas/libcublasLt.so.12 and holds SASS for sm_70 and sm_80 only, no PTX."""
    where = "/sp/nvidia/{}/lib/{}" if found else None
    libs = [lib(s, where.format(w, s) if where else None, "nvidia wheel")
            for s, w in (("libcudart.so.12", "cuda_runtime"), ("libcublas.so.12", "cublas"),
                         ("libcublasLt.so.12", "cublas"))]
    dist = CudaDistribution("faiss-gpu-cu12", "1.14.1.post1", name_major=12, shared_objects=6,
                            requires_majors={"nvidia-cuda-runtime-cu12": 12, "nvidia-cublas-cu12": 12},
                            kernels={"faiss_gpu_cu12.libs/libfaiss-6b43fd57.so": ["sm_70", "sm_80"]})
    return resolved(ext("/sp/faiss_gpu_cu12.libs/libfaiss-6b43fd57.so", "faiss-gpu-cu12", *libs),
                    ext("/sp/faiss/_swigfaiss.so", "faiss-gpu-cu12", libs[0]), dists=(dist,))


@pytest.mark.parametrize("found", [False, True], ids=["its libraries missing", "its libraries installed"])
def test_faiss_gpu_cu12_is_never_told_of_a_cuda_13_sibling_or_that_its_libraries_would_help(found):
    """The fix said `pip install faiss-gpu-cu13` (no such project) and "or keep this build and add its
    libraries … it then runs beside CUDA 13" (none of its kernels runs on sm_121)."""
    verdict = g01.judge_extensions(faiss_gpu_cu12(found), None, GB10)
    assert verdict.line == "G1 FAIL: faiss-gpu-cu12 is built for CUDA 12 with no kernel for sm_121 (it has sm_70, sm_80)"
    assert verdict.fix == BUILD13.format(name="faiss-gpu-cu12")
    assert "faiss-gpu-cu13" not in verdict.fix and "keep this build" not in verdict.fix
    report = verdict.readings["packages"]["faiss-gpu-cu12"]
    assert report["not_found"] == ([] if found else ["libcublas.so.12", "libcublasLt.so.12", "libcudart.so.12"])


def test_faiss_on_an_h200_runs_its_sm_80_kernels_through_nothing_either():
    """sm_90 runs no sm_80 cubin (a cubin runs on its own major only) and there is no PTX: the same FAIL,
    the build remedy for sm_90."""
    verdict = g01.judge_extensions(faiss_gpu_cu12(True), inventory("h200_580.159.04"), H200)
    assert verdict.line == "G1 FAIL: faiss-gpu-cu12 is built for CUDA 12 with no kernel for sm_90 (it has sm_70, sm_80)"
    assert "for sm_90 (CMake: -DCMAKE_CUDA_ARCHITECTURES=90; torch extensions: TORCH_CUDA_ARCH_LIST=9.0)" in verdict.fix


@pytest.mark.parametrize("name,version,kernels,fix", [
    # cvcuda-cu12 0.19.0: static cudart, kernels up to PTX compute_90 (readelf, fatbin of _cvcuda*.so)
    ("cvcuda-cu12", "0.19.0", ["sm_80", "sm_90", "compute_90"],
     "install its CUDA 13 build instead: pip uninstall -y cvcuda-cu12 && pip install cvcuda-cu13; as it is, its "
     "kernels reach sm_121 only through PTX compute_90 (compiled at first use)"),
    # nvidia-nvimgcodec-cu12 0.9.0.20: its kernels include sm_120
    ("nvidia-nvimgcodec-cu12", "0.9.0.20", ["sm_90", "sm_100", "sm_120"],
     "install its CUDA 13 build instead: pip uninstall -y nvidia-nvimgcodec-cu12 && pip install "
     "nvidia-nvimgcodec-cu13; as it is, its kernels include sm_120, which runs on sm_121"),
    # a CUDA 12 package of a project PyPI has no CUDA 13 build of, kernels only for Hopper
    ("widget-cu12", "0.3.9", ["sm_90a"], BUILD13.format(name="widget-cu12")),
    # sgl-kernel: its one remedy, SGLang's own cu130 index (PyPI has no CUDA 13 build of it)
    ("sgl-kernel", "0.3.9", ["sm_90a"], "reinstall sgl-kernel's CUDA 13 build from SGLang's own index, which carries "
     "sm_121a kernels: pip install --force-reinstall --no-deps --index-url https://docs.sglang.ai/whl/cu130/ sgl-kernel "
     "(the release your sglang pins, with its +cu130 tag)"),
])
def test_a_cuda_12_build_is_sent_to_a_cuda_13_project_only_when_pypi_has_it(name, version, kernels, fix):
    found = lib("libcudart.so.12", "/sp/nvidia/cuda_runtime/lib/libcudart.so.12", "nvidia wheel")
    dist = CudaDistribution(name, version, name_major=12, shared_objects=3, kernels={"pkg/_C.so": kernels})
    verdict = g01.judge_extensions(resolved(ext("/sp/pkg/_C.so", name, found), dists=(dist,)), None, GB10)
    assert verdict.fix == fix


def test_every_cuda_13_build_the_fix_can_name_is_on_pypi_and_faiss_has_none():
    """Siblings come from the naming patterns, each checked against PyPI's names (shipped in
    readings/cuda_builds.py): a name the patterns make up (faiss-gpu-cu13) is never named."""
    from test_fix_texts import PYPI

    from spark_gotchas.knowledge.readings.cuda_builds import NAMES

    for name, major, other in [("faiss-gpu-cu12", 13, None), ("kvikio-cu12", 13, "kvikio-cu13"),
                               ("cupy-cuda13x", 12, "cupy-cuda12x"), ("widget-cu12", 13, None),
                               ("nvidia-dali-cuda120", 13, "nvidia-dali-cuda130"),
                               ("jax-cuda12-plugin", 13, "jax-cuda13-plugin"), ("libcudf-cu12", 13, "libcudf-cu13"),
                               ("cudf-cu12", 13, "cudf-cu13"), ("cupy-cuda12x", 13, "cupy-cuda13x")]:
        assert g01.sibling(name, major) == other
        assert other is None or other in NAMES
    named = {g01.sibling(n, 13) for n in ("cupy-cuda12x", "jax-cuda12-pjrt", "nvidia-dali-cuda120", "cudf-cu12",
                                          "transformer-engine-cu12", "tensorrt-cu12", "cvcuda-cu12", "kvikio-cu12")}
    assert sorted(named - PYPI) == []


def test_a_missing_library_is_told_only_of_wheels_pypi_has():
    """CUDA 11 has no nvidia-cufile-cu11 or nvidia-nvjitlink-cu11: a CUDA 11 package missing them is told
    to install the toolkit's libraries, not a wheel that does not exist."""
    from spark_gotchas.knowledge.readings.cuda_libs import wheel_for

    assert wheel_for("libcufile.so.0", 11) is None and wheel_for("libcufile.so.0", 12) == "nvidia-cufile-cu12"
    assert wheel_for("libcublas.so.11", 13) == "nvidia-cublas-cu11"
