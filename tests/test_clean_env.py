"""The preflight as tox, cron or a runner service starts it: an environment of PATH and HOME only.

Such environments hold no credential-like variable, no locale, no virtualenv marker; the
suite's own tests otherwise run inside the developer's full shell environment.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")


@pytest.fixture
def bare_environment(monkeypatch, tmp_path):
    """os.environ emptied of everything but PATH, with a fresh HOME (pytester.run inherits it)."""
    keep = os.environ.get("PATH", "/usr/bin:/bin")
    for name in list(os.environ):
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", keep)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def test_the_preflight_report_is_whole_in_a_bare_environment(pytester, bare_environment):
    report = pytester.path / "report.json"
    snapshot = pytester.path / "snapshot.json"
    result = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", str(ROOT / "tests_gotchas"),
                          "--json-report", f"--json-report-file={report}", f"--spark-snapshot={snapshot}",
                          timeout=240)
    assert result.ret in (0, 1), result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    data = json.loads(report.read_text())
    assert len(data["tests"]) >= 10, f"the report holds {len(data.get('tests', []))} tests"
    lines = [line for line in data["spark_gotchas"]["lines"] if GLINE.match(line)]
    assert [int(GLINE.match(line).group(1)) for line in lines] == list(range(1, 11))
    assert all(t["metadata"]["gotcha"]["status"] for t in data["tests"] if t.get("outcome") != "deselected")
    printed = [line for line in result.stdout.lines if GLINE.match(line)]
    assert printed == lines
    # exit 1 only for a FAIL: a GPU machine whose NVML the bare environment cannot load FAILs G1 there
    assert (result.ret == 1) == any(GLINE.match(line).group(2) == "FAIL" for line in lines), lines
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert json.loads(snapshot.read_text())["readings"], "the snapshot holds no reading"
