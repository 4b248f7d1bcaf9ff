"""G1 on real files: a stub cu12 extension installed as a distribution turns G1 into FAIL naming it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import elf_build as eb
import pytest
from gline_block import glines

from spark_gotchas.judges import g01_cuda_abi as g01
from spark_gotchas.profiles import PROFILES
from spark_gotchas.readers import env as ex

ROOT = Path(__file__).resolve().parents[1]
EXT = f"cu12_ext/_C{eb.EXT_SUFFIX}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A site-packages folder as pip leaves it after installing a cu12 wheel and a clean one."""
    eb.need_gcc()
    build = tmp_path_factory.mktemp("build")
    cudart12 = eb.cuda_stub(build / "lib", 12)
    ext = eb.extension(build / "ext", "_C", [cudart12])
    plain = eb.plain_shared(build / "plain", "_fast.so")
    orphan = eb.extension(build / "orphan", "_orphan", [cudart12])
    sp = tmp_path_factory.mktemp("venv") / "lib" / "python3.11" / "site-packages"
    eb.install_distribution(sp, "cu12-ext", "0.3.21", {EXT: ext, "cu12_ext/lib/libcudart.so.12": cudart12})
    eb.install_distribution(sp, "clean-ext", "1.0", {"clean_ext/_fast.so": plain})
    (sp / "loose").mkdir()
    (sp / "loose" / orphan.name).write_bytes(orphan.read_bytes())  # copied in by hand: no RECORD names it
    return sp


def test_the_scan_finds_the_cu12_extension_and_its_distribution(site, monkeypatch):
    monkeypatch.setattr(ex, "site_dirs", lambda: [str(site)])
    monkeypatch.syspath_prepend(str(site))  # importlib.metadata finds the .dist-info there
    reading = ex.read_cuda_extensions(None)
    assert reading.shared_objects == 4 and reading.unreadable == 0
    by_path = {os.path.relpath(e.path, site): e for e in reading.linked}
    assert set(by_path) == {EXT, f"loose/_orphan{eb.EXT_SUFFIX}"}  # the stub itself and the clean one link nothing
    assert by_path[EXT].distribution == "cu12-ext" and by_path[EXT].cuda_libs == {"libcudart.so.12": 12}
    assert by_path[f"loose/_orphan{eb.EXT_SUFFIX}"].distribution is None

    verdict = g01.judge_extensions(reading, None, PROFILES["gb10"])
    assert verdict.status.value == "FAIL"
    assert verdict.summary.startswith("2 extension(s) link a CUDA runtime other than 13: cu12-ext (libcudart.so.12); "
                                      "(no distribution) ")
    assert verdict.fix.startswith("reinstall cu12-ext built for CUDA 13")


def test_pytest_fast_as_a_spark_fails_g1_naming_the_distribution(site, tmp_path):
    """``pytest -m fast --spark-profile gb10`` from the repo root with the cu12 wheel on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "fast", "-k", "g01",
                           "--spark-profile", "gb10", "--json-report", f"--json-report-file={report}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    block = glines(out, (1,))
    g1 = [line for line in block if line.startswith("G1 ")]
    assert len(g1) == 1 and g1[0].startswith("G1 FAIL: "), out[-3000:]  # the CPU torch fails G1 here too
    assert "    fix: reinstall cu12-ext built for CUDA 13 (their cu130 wheels or from source), " \
           "or use a matched NGC container" in block
    assert "Traceback" not in out
    data = json.loads(report.read_text())
    (ext_check,) = [t for t in data["tests"] if t["nodeid"].endswith("test_g1_extensions_link_driver_cuda")]
    gotcha = ext_check["metadata"]["gotcha"]
    assert re.match(r"\d+ extension\(s\) link a CUDA runtime other than 13: (.*; )?cu12-ext \(libcudart.so.12\)",
                    gotcha["summary"]), gotcha  # other cu12 files of this environment may be named too
    assert gotcha["status"] == "FAIL" and gotcha["readings"]["mismatched"][0]["distribution"] == "cu12-ext"
    assert data["spark_gotchas"]["platform"]["profile"] == "gb10"
