"""G2 — flash-attn: is it installed, does it import and agree with SDPA here, is Unsloth beside it."""

import pytest

from spark_gotchas.knowledge.judges import g02_flash_attn as g02

pytestmark = pytest.mark.fast


@pytest.mark.gpu
def test_g2_flash_attn_and_unsloth(spark):
    """flash-attn"""
    spark.report(g02.judge_flash_attn(spark.read("attention.flash_attn"), spark.try_read("attention.unsloth"),
                                      spark.try_read("attention.sdpa"), spark.try_read("torch.build"),
                                      spark.try_read("env.container")))
