"""G4 — thermal throttling: clocks at rest, under 3 s of load, after a reboot; and the soak (-m soak)."""

import pytest

from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.outputs.soak_finish import finish


@pytest.mark.fast
def test_g4_clocks_at_rest(spark):
    """clocks at rest"""
    spark.report(g04.judge_snapshot(spark.read("thermal.snapshot"), spark.profile, spark.here,
                                    spark.try_read("gpu.processes")))


@pytest.mark.fast
@pytest.mark.gpu
def test_g4_clocks_under_load(spark):
    """clocks under load"""
    spark.report(g04.judge_spot_check(spark.read("thermal.spot_check"), spark.profile, spark.try_read("gpu.processes"),
                                      spark.here))


@pytest.mark.fast
@pytest.mark.scan
def test_g4_last_soak_ended(spark):
    """last soak"""
    spark.report(g04.judge_reboot(spark.read("thermal.reboot")))


@pytest.mark.fast
@pytest.mark.scan
@pytest.mark.reads("watch.earlier")
def test_g4_last_watch_ended(spark):
    """last watch"""
    spark.report(g04.judge_earlier_watches(spark.read("watch.earlier")))


@pytest.mark.soak
@pytest.mark.gpu
def test_g4_soak(spark):
    """soak"""
    reading = spark.read("thermal.soak")
    verdict = g04.judge_soak(reading, spark.profile)
    spark.report(finish(spark, reading, verdict))  # live: the PNG titled with the verdict line, the files named
    if reading.cut_short and spark.live:
        spark.stop_run(f"the soak was {reading.end_reason}")  # as Ctrl-C ends a run: exit status 2
