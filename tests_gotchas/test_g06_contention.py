"""G6 — global unified-memory contention: other GPU servers and trainers beside this run."""

import pytest

from spark_gotchas.knowledge.judges import g06_contention as g06

pytestmark = pytest.mark.fast


def test_g6_other_gpu_workloads(spark):
    """other workloads"""
    spark.report(g06.judge_contention(spark.read("gpu.processes"), spark.profile, spark.plan,
                                      spark.try_read("mem.meminfo"), spark.try_read("gpu.inventory"), spark.here))
