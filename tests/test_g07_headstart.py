"""G7's rates without torch (the head start's ``g7_rates``): measured through cuBLAS in the load worker
where the GPU has no FP4 tensor cores, through torch elsewhere or when the torch-free probe fails."""

from __future__ import annotations

import bench_fakes as fk
import pytest
from bench_fakes import torch_in_the_fake_worker  # noqa: F401  a fixture

from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.runtime import headstart
from spark_gotchas.runtime.headstart import HeadStart
from spark_gotchas.runtime.worker import TaskResult

pytestmark = pytest.mark.usefixtures("torch_in_the_fake_worker")  # its GPU worker is a fake with torch

CUBLAS = "spark_gotchas.microbench.gemm:probe_cublas"
TORCH = "spark_gotchas.microbench.gemm:probe"
BUILD = "spark_gotchas.runtime.tasks:torch_build"


def inventory(*capabilities) -> GpuInventory:
    return GpuInventory(driver_version="580.159.04", cuda_driver_version=13000,
                        devices=[GpuDevice(index=i, name="NVIDIA H200", capability=c) for i, c in enumerate(capabilities)])


def provider(gpu: fk.FakeWorker, load: fk.FakeWorker, caps=((9, 0),), parts=frozenset({"g4_load", "g7_rates"})):
    return fk.provider_with_load(gpu, load, inventory(*caps), parts)


def workers(cublas_answer=None):
    gpu = fk.FakeWorker({BUILD: fk.torch_build_value(), TORCH: fk.h200_gemm()})
    cublas = fk.h200_gemm() if cublas_answer is None else cublas_answer
    return gpu, fk.FakeWorker({CUBLAS: cublas})


def test_an_h200_measures_its_rates_in_the_load_worker_without_waiting_for_torch():
    gpu, load = workers()
    reading = provider(gpu, load).read("bench.gemm")
    assert load.calls == [CUBLAS] and gpu.calls == ["paused"]  # no GPU task meanwhile; torch.build not asked for
    assert reading.result.get("fp8").tflops == fk.h200_gemm().get("fp8").tflops and reading.backend_note == ""


def test_a_gpu_that_can_run_nvfp4_measures_all_three_through_torch():
    gpu, load = workers()
    reading = provider(gpu, load, caps=((12, 1),)).read("bench.gemm")
    assert load.calls == [] and TORCH in gpu.calls and reading.result is not None


def test_mixed_gpus_or_the_part_turned_off_measure_through_torch():
    gpu, load = workers()
    provider(gpu, load, caps=((9, 0), (8, 0))).read("bench.gemm")
    assert load.calls == []
    gpu, load = workers()
    provider(gpu, load, parts=frozenset({"g4_load"})).read("bench.gemm")
    assert load.calls == [] and TORCH in gpu.calls


def test_a_failed_torch_free_probe_falls_back_to_torch_and_says_why():
    gpu, load = workers(TaskResult(ok=False, error="CublasUnavailable: no usable cuBLASLt: none found"))
    reading = provider(gpu, load).read("bench.gemm")
    assert load.calls == [CUBLAS] and TORCH in gpu.calls and reading.result is not None
    assert reading.backend_note == "cuBLAS without torch: CublasUnavailable: no usable cuBLASLt: none found"


def test_a_hung_torch_free_probe_is_the_finding():
    gpu, load = workers(TaskResult(ok=False, timed_out=True, seconds=180.0))
    reading = provider(gpu, load).read("bench.gemm")
    assert reading.crashed and "timed out after 180 s" in reading.problem and gpu.calls == ["paused"]


def test_the_head_start_starts_the_rates_only_where_they_need_no_torch():
    for caps, early in (((9, 0),), True), (((12, 1),), False):
        gpu, load = workers()
        p = provider(gpu, load, caps=caps)
        h = HeadStart(p, lambda gpu=gpu: gpu)
        h.plan({7})
        h.begin()
        thread = p._prefetching.get("bench.gemm")
        if thread is not None:
            thread.join(10)
        assert (thread is not None) is early and (CUBLAS in load.calls) is early


def test_g7_rates_is_a_part_that_can_be_turned_off():
    assert "g7_rates" in headstart.PARTS and not headstart.enabled("g7_rates", {headstart.ENV: "-g7_rates"})
