"""G8 — stale official playbooks: open issues of NVIDIA/dgx-spark-playbooks for each --spark-playbook."""

import pytest

from spark_gotchas.knowledge.judges import g08_playbooks as g08

pytestmark = pytest.mark.fast


@pytest.mark.scan
def test_g8_playbook_open_issues(spark):
    """playbook issues"""
    spark.report(g08.judge_playbooks(spark.read("github.playbook_issues")))
