"""G3 — unified-memory OOM below 128 GB: page cache, load headroom, what NVML and CUDA say, the load probe."""

import pytest

from spark_gotchas.knowledge.judges import g03_unified_memory as g03


@pytest.mark.fast
def test_g3_page_cache(spark):
    """page cache"""
    spark.report(g03.judge_page_cache(spark.read("mem.meminfo"), spark.profile, spark.plan, spark.here))


@pytest.mark.fast
@pytest.mark.gpu
def test_g3_load_headroom(spark):
    """load headroom"""
    cuda = spark.try_read("mem.cuda") if spark.profile.has_gpu and not spark.profile.unified_memory else None
    spark.report(g03.judge_headroom(spark.read("mem.meminfo"), spark.profile, spark.plan,
                                    cuda, spark.try_read("gpu.inventory"), spark.here, spark.try_read("mem.cgroup")))


@pytest.mark.fast
@pytest.mark.gpu
def test_g3_gpu_memory_view(spark):
    """GPU memory view"""
    spark.report(g03.judge_gpu_memory_view(spark.read("mem.meminfo"), spark.profile,
                                           spark.try_read("gpu.inventory"), spark.try_read("mem.cuda"), spark.here))


@pytest.mark.soak
@pytest.mark.gpu
def test_g3_load_double_count(spark):
    """load double count"""
    spark.report(g03.judge_load_probe(spark.read("mem.load_probe"), spark.plan, spark.profile, spark.here))
