"""G1 judges on recorded readings: real GB10 and H200 printouts, and made-up edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_gotchas.judges import g01_cuda_abi as g01
from spark_gotchas.profiles import PROFILES
from spark_gotchas.readings.env import ExtensionScan, LinkedExtension
from spark_gotchas.readings.gpu import GpuInventory
from spark_gotchas.readings.torch import FirstLaunch, TorchBuild
from spark_gotchas.serial import from_jsonable
from spark_gotchas.verdict import Status

REAL = json.loads((Path(__file__).parent / "fixtures" / "g01_readings.json").read_text())
GB10, H200, NONE = PROFILES["gb10"], PROFILES["h200"], PROFILES["none"]


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
    assert verdict.line == (f"G1 PASS: torch {b.version} is built for CUDA 13.0; "
                            f"driver {inv.driver_version} supports CUDA 13.0")


def test_cu128_torch_on_a_spark_fails():
    verdict = g01.judge_torch(made_up_build("2.8.0+cu128", "12.8"), inventory("gb10_580.95.05"), GB10)
    assert verdict.status is Status.FAIL
    assert verdict.summary == "torch 2.8.0+cu128 is built for CUDA 12.8 but driver 580.95.05 supports CUDA 13.0"
    assert "download.pytorch.org/whl/cu130" in verdict.fix


def test_cu12_torch_on_an_h200_with_a_cuda_13_driver_warns():
    verdict = g01.judge_torch(made_up_build("2.8.0+cu128", "12.8"), inventory("h200_580.159.04"), H200)
    assert verdict.status is Status.WARN
    assert verdict.summary.startswith("torch 2.8.0+cu128 is built for CUDA 12.8, older than the driver's "
                                      "(driver 580.159.04 supports CUDA 13.0)")
    assert verdict.fix


def test_the_h200_measured_here_passes():
    verdict = g01.judge_torch(build("pip_2.11.0+cu130_h200"), inventory("h200_580.159.04"), H200)
    assert verdict.line == "G1 PASS: torch 2.11.0+cu130 is built for CUDA 13.0; driver 580.159.04 supports CUDA 13.0"


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
    assert verdict.status is Status.SKIP and "--spark-profile gb10" in verdict.summary


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

    from spark_gotchas.options import RunOptions
    from spark_gotchas.readers import ReadContext
    from spark_gotchas.readers.torch import read_torch_build
    from spark_gotchas.worker import TaskResult

    monkeypatch.setattr("spark_gotchas.readers.torch.torch_installed", lambda: True)
    worker = FakeWorker({"spark_gotchas.tasks:torch_build": TaskResult(
        ok=False, crashed=True, signal="SIGSEGV", beside=("cuda_context",))})
    build = read_torch_build(ReadContext(options=RunOptions(), worker_factory=lambda: worker))
    verdict = g01.judge_torch(build, inventory("gb10_580.95.05"), GB10)
    assert verdict.line == ("G1 FAIL: import torch crashed or hung in a child process: child process killed by "
                            "SIGSEGV (the warm-up cuda_context was running beside it; SPARK_GOTCHAS_WARMUPS=none "
                            "runs without)")


def test_torch_not_installed_skips():
    assert g01.judge_torch(TorchBuild(installed=False), None, GB10).line == (
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
def test_a_cu12_extension_on_a_spark_fails_naming_its_distribution():
    verdict = g01.judge_extensions(scan("sgl_kernel_cu12_gb10"), inventory("gb10_580.142"), GB10)
    assert verdict.line == ("G1 FAIL: 1 extension(s) link a CUDA runtime other than 13: "
                            "sgl-kernel (libcudart.so.12, libnvrtc.so.12)")
    assert verdict.fix.startswith("reinstall sgl-kernel built for CUDA 13")
    assert verdict.readings["mismatched"][0]["distribution"] == "sgl-kernel"


def test_cu12_extension_judged_as_a_spark_without_a_driver_fails():
    verdict = g01.judge_extensions(scan("sgl_kernel_cu12_gb10"), inventory("no_driver"), GB10)
    assert verdict.status is Status.FAIL and "sgl-kernel" in verdict.summary


def test_the_h200_extensions_match_its_driver():
    verdict = g01.judge_extensions(scan("h200_torch_cu130"), inventory("h200_580.159.04"), H200)
    assert verdict.line == ("G1 PASS: 847 shared objects scanned in 0.30 s; 2 link CUDA 13, "
                            "matching the driver's CUDA 13")


def mixed_scan() -> ExtensionScan:
    return ExtensionScan(shared_objects=5, seconds=0.01, linked=[
        LinkedExtension("/sp/torch/lib/libc10_cuda.so", "torch", {"libcudart.so.13": 13}),
        LinkedExtension("/sp/torchaudio/lib/a.so", "torchaudio", {"libcudart.so.13": 13}),
        LinkedExtension("/sp/vllm/_C.abi3.so", "vllm", {"libcudart.so.12": 12}),
        LinkedExtension("/sp/orphan/_x.so", None, {"libcublasLt.so.12": 12}),
    ])


def test_mixed_majors_without_a_driver_fail_naming_the_minority():
    verdict = g01.judge_extensions(mixed_scan(), inventory("no_driver"), NONE)
    assert verdict.status is Status.FAIL
    assert verdict.summary == ("extensions link different CUDA majors [12, 13]: vllm (libcudart.so.12); "
                               "(no distribution) /sp/orphan/_x.so (libcublasLt.so.12)")
    assert verdict.fix.startswith("reinstall vllm built for CUDA 13")


def test_one_major_without_a_driver_is_information():
    only13 = ExtensionScan(shared_objects=3, seconds=0.01, linked=mixed_scan().linked[:2])
    verdict = g01.judge_extensions(only13, inventory("no_driver"), NONE)
    assert verdict.status is Status.INFO and "2 link CUDA 13" in verdict.summary
    nothing = g01.judge_extensions(ExtensionScan(shared_objects=207, seconds=0.14), inventory("no_driver"), NONE)
    assert nothing.line == ("G1 INFO: 207 shared objects scanned in 0.14 s; none links a CUDA runtime; "
                            "no driver to compare with (--spark-profile gb10 judges for a Spark)")


def test_static_cudart_everywhere_is_no_finding_on_a_spark():
    verdict = g01.judge_extensions(ExtensionScan(shared_objects=40, seconds=0.02), inventory("gb10_580.95.05"), GB10)
    assert verdict.line == ("G1 PASS: 40 shared objects scanned in 0.02 s; none links a CUDA runtime, "
                            "matching the driver's CUDA 13")


def test_many_offenders_are_capped_in_the_line():
    linked = [LinkedExtension(f"/sp/p{i}/_C.so", f"pkg{i}", {"libcudart.so.12": 12}) for i in range(9)]
    verdict = g01.judge_extensions(ExtensionScan(shared_objects=9, linked=linked), inventory("gb10_580.95.05"), GB10)
    assert verdict.summary.endswith("pkg5 (libcudart.so.12); +3 more")
    assert "pkg8" in verdict.fix  # the fix names every package to reinstall


BROKEN_PYNVML = "raise AttributeError(\"module 'pynvml' has no attribute 'nvmlInit'\")\n"
MISSING_CUDNN = "import ctypes\nctypes.CDLL('libcudnn.so.9-not-here')\n"  # as torch loads its CUDA libraries


@pytest.mark.parametrize("torch_init,other_files,fails_in,fix", [
    ("import pynvml\n", {"pynvml.py": BROKEN_PYNVML}, "pynvml.py", "not part of torch: repair or remove the package"),
    (MISSING_CUDNN, {}, None, g01.FIX_INDEX),
], ids=["a broken pynvml torch imports", "a CUDA library torch cannot load"])
def test_an_import_of_torch_that_fails_names_the_package_to_repair(tmp_path, torch_init, other_files, fails_in, fix):
    import os

    from spark_gotchas.worker import Worker

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(torch_init)
    for name, text in other_files.items():
        (tmp_path / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    worker = Worker(preload=("torch",), env=env)
    try:
        result = worker.call("spark_gotchas.tasks:torch_build", timeout=60)
    finally:
        worker.close()
    reading = from_jsonable(TorchBuild, result.value)
    verdict = g01.judge_torch(reading, inventory("gb10_580.95.05"), GB10)
    assert verdict.status is Status.FAIL and fix in verdict.fix
    if fails_in:  # the line names the other package's file
        assert verdict.line.startswith(f"G1 FAIL: import torch fails in {tmp_path / fails_in}: AttributeError")
    else:  # torch's own file (ctypes, in Python's library, is passed over): reinstall torch
        assert reading.import_error_file == str(tmp_path / "torch" / "__init__.py")
        assert verdict.line.startswith("G1 FAIL: import torch fails: OSError: libcudnn.so.9-not-here")
