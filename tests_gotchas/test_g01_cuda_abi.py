"""G1 — CUDA 12/13 ABI mismatch: torch vs driver, extension sonames, the first launch."""

import pytest

from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.judges import g01_kernel_log, g01_visibility

pytestmark = pytest.mark.fast


@pytest.mark.gpu
def test_g1_torch_cuda_matches_driver(spark):
    """torch build"""
    spark.report(g01.judge_torch(spark.read("torch.build"), spark.try_read("gpu.inventory"), spark.profile,
                                 spark.try_read("env.container")))


@pytest.mark.scan
def test_g1_extensions_link_driver_cuda(spark):
    """extensions"""
    spark.report(g01.judge_extensions(spark.read("env.cuda_extensions"), spark.try_read("gpu.inventory"), spark.profile,
                                      spark.try_read("host.platform")))


@pytest.mark.gpu
def test_g1_first_cuda_launch(spark):
    """first launch"""
    spark.report(g01.judge_first_launch(spark.read("torch.first_launch")))


@pytest.mark.gpu
def test_g1_gpu_visible_here(spark):
    """GPU visible here"""
    spark.report(g01_visibility.judge_gpu_visible(spark.try_read("gpu.visibility"), spark.try_read("gpu.inventory"),
                                                  spark.try_read("torch.build")))


@pytest.mark.scan
@pytest.mark.reads("triton.ptxas")
def test_g1_triton_ptxas(spark):
    """Triton ptxas"""
    spark.report(g01.judge_triton_ptxas(spark.read("triton.ptxas"), spark.try_read("gpu.inventory"), spark.profile))


@pytest.mark.scan
@pytest.mark.reads("kernel.log")
def test_g1_kernel_log(spark):
    """kernel log"""
    spark.report(g01_kernel_log.judge_kernel_log(spark.read("kernel.log"), spark.profile))
