"""G5 — bandwidth ceiling: measured device-memory bandwidth against the platform's real range."""

import pytest

from spark_gotchas.knowledge.judges import g05_bandwidth as g05


@pytest.mark.fast
@pytest.mark.gpu
def test_g5_bandwidth_budget(spark):
    """bandwidth"""
    spark.report(g05.judge_bandwidth(spark.read("bench.bandwidth"), spark.try_read("gpu.inventory"), spark.profile,
                                     spark.try_read("gpu.processes"), spark.here))


@pytest.mark.fast
@pytest.mark.gpu
def test_g5_decode_ceiling(spark):
    """decode ceiling"""
    spark.report(g05.judge_decode_ceiling(spark.read("bench.bandwidth"), spark.profile, spark.plan, spark.here))


@pytest.mark.soak
@pytest.mark.gpu
def test_g5_bandwidth_sweep(spark):
    """bandwidth sweep"""
    spark.report(g05.judge_sweep(spark.read("bench.bandwidth_sweep"), spark.try_read("gpu.inventory"), spark.profile,
                                 spark.try_read("gpu.processes"), spark.here))
