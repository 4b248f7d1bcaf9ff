"""G10 — dual Spark is DDP/FSDP only: launch config review (fast) and an all-reduce probe (multinode)."""

import pytest

from spark_gotchas.knowledge.judges import g10_parallelism as g10


@pytest.mark.fast
@pytest.mark.scan
def test_g10_launch_config_review(spark):
    """launch config"""
    spark.report(g10.judge_launch(spark.read("launch.review"), spark.profile, spark.try_read("gpu.inventory")))


@pytest.mark.multinode
@pytest.mark.timeout(900)  # the rendezvous waits for the other nodes to start (SPARK_GOTCHAS_COLLECTIVE_RENDEZVOUS)
def test_g10_collective_probe(spark):
    """collective probe"""
    spark.report(g10.judge_collective(spark.read("dist.collective"), spark.profile))
