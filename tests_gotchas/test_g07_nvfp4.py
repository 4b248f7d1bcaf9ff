"""G7 — NVFP4 slower than FP8 on SM121: kernel targets of FP4 libraries, measured GEMM rates."""

import pytest

from spark_gotchas.knowledge.judges import g07_nvfp4 as g07

pytestmark = pytest.mark.fast


@pytest.mark.gpu
def test_g7_fp4_kernels_target_sm121a(spark):
    """FP4 kernels"""
    spark.report(g07.judge_kernel_targets(spark.read("env.fp4_kernels"), spark.try_read("gpu.inventory"),
                                          spark.try_read("torch.build"), spark.profile, spark.plan,
                                          spark.try_read("triton.ptxas")))


@pytest.mark.gpu
def test_g7_nvfp4_vs_fp8_rate(spark):
    """NVFP4 rate"""
    spark.report(g07.judge_gemm_rates(spark.read("bench.gemm"), spark.profile, spark.plan,
                                      spark.try_read("gpu.processes"), spark.here))
