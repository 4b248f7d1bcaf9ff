"""G3 — memory that already ran out since boot: the kernel log's NV_ERR_NO_MEMORY and OOM kills."""

import pytest

from spark_gotchas.knowledge.judges import g03_unified_memory_log as g03_log

pytestmark = pytest.mark.fast


@pytest.mark.gpu  # its place in the run order: after G3's other checks (it reads the kernel log, not the GPU)
@pytest.mark.reads("kernel.log")
def test_g3_kernel_log(spark):
    """kernel log"""
    spark.report(g03_log.judge_kernel_memory(spark.read("kernel.log"), spark.profile))


@pytest.mark.scan
@pytest.mark.reads("watch.earlier")
def test_g3_last_watch(spark):
    """last watch"""
    spark.report(g03_log.judge_watched_oom(spark.read("watch.earlier")))
