"""G9 — container first, not bare pip: which image, how the container was started, requirement drift,
baseline."""

import pytest

from spark_gotchas.knowledge.judges import g09_container as g09

pytestmark = [pytest.mark.fast, pytest.mark.scan]


def test_g9_container_and_consistency(spark):
    """container"""
    spark.report(g09.judge_environment(spark.read("env.container"), spark.read("env.distributions")))


def test_g9_shm_and_ulimits(spark):
    """shm and ulimits"""
    spark.report(g09.judge_start(spark.read("env.container")))


def test_g9_since_baseline(spark):
    """baseline"""
    spark.report(g09.judge_baseline(spark.read("env.baseline"), spark.read("env.distributions")))
