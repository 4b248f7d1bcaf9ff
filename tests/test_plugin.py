"""The pytest plugin as a user meets it, through pytester: G-lines, outcomes, reports, replay."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from gline_block import glines

from spark_gotchas.knowledge.profiles import CHOICES
from spark_gotchas.machine import readers
from spark_gotchas.machine.readers import ReaderSpec
from spark_gotchas.machine.snapshot import Snapshot, save
from spark_gotchas.runtime import headstart

ROOT = Path(__file__).resolve().parents[1]
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")
FIX = "    fix: "
SECRETS = {
    "HF_TOKEN": "hf_q7Zt0pSecretValue1",
    "GITHUB_TOKEN": "ghp_SecretValue2xYz",
    "WANDB_API_KEY": "0123456789abcdefSecret3",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/Secret4",
}


def check(gid: int, status: str = "PASS", summary: str = "finding", fix: str = "", marker: str = "fast",
          name: str = "check") -> dict[str, str]:
    """A gotcha check file that reports one fixed verdict (the plugin, not a judge, is under test)."""
    if status in ("FAIL", "WARN") and not fix:
        fix = f"fix {summary}"
    marks = f"pytestmark = pytest.mark.{marker}" if marker else ""
    body = f"""
        import pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict
        {marks}

        def test_{name}(spark):
            spark.report(Verdict({gid}, Status.{status}, {summary!r}, fix={fix!r}, readings={{"n": {gid}}}))
    """
    return {f"test_g{gid:02d}_{name}": textwrap.dedent(body)}


@pytest.fixture(autouse=True)
def inner_runs(monkeypatch):
    """In-process runs load only the plugins under test (each installed plugin would be imported
    afresh in every run: seconds) and start the worker without torch (not what these tests check)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: False)


def run(pytester, *args):
    """An in-process run with the suite's plugin and the two it works with."""
    import pytest_jsonreport.plugin
    import pytest_timeout

    import spark_gotchas.plugin

    return pytester.runpytest(*args, plugins=[spark_gotchas.plugin, pytest_timeout, pytest_jsonreport.plugin])


@pytest.fixture
def as_installed(monkeypatch):
    """Subprocess runs load plugins as a user's run does: through their pytest11 entry points."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")


@dataclass
class Clock:
    sm_mhz: int


@dataclass
class Secrets:
    values: dict[str, str]


CLOCK_MHZ = {"value": 2418, "calls": 0}


def read_clock(ctx) -> Clock:
    CLOCK_MHZ["calls"] += 1
    if CLOCK_MHZ["value"] is None:
        raise AssertionError("this reading must come from the snapshot")
    return Clock(CLOCK_MHZ["value"])


def read_broken(ctx) -> Clock:
    raise OSError("permission denied: /sys/class/hwmon/hwmon0")


@pytest.fixture
def test_readers(monkeypatch):
    readers.load_all()
    CLOCK_MHZ.update(value=2418, calls=0)
    for key, func, tp in (("test.clock", read_clock, Clock), ("test.broken", read_broken, Clock),
                          ("test.secrets", lambda ctx: Secrets({k: os.environ.get(k, "") for k in SECRETS}), Secrets)):
        monkeypatch.setitem(readers.READERS, key, ReaderSpec(key, func, tp, ""))
    return CLOCK_MHZ


CLOCK_CHECK = """
    import pytest
    from spark_gotchas.knowledge.verdict import Status, Verdict
    pytestmark = pytest.mark.fast

    def test_clock(spark):
        mhz = spark.read("test.clock").sm_mhz
        status = Status.FAIL if mhz < 1400 else Status.PASS
        spark.report(Verdict(4, status, f"SM clock {mhz} MHz under load", fix="remove AC power for 60 s",
                             readings={"sm_mhz": mhz}))
"""


def test_the_plugin_is_an_installed_pytest11_entry_point():
    from importlib.metadata import entry_points

    found = [ep.value for ep in entry_points(group="pytest11")]
    assert "spark_gotchas.plugin" in found, "install the suite first: pip install --no-deps -e ."


# -- the G-line block and outcomes ---------------------------------------------------------------
def test_one_line_per_gotcha_in_g_order_worst_wins(pytester):
    for files in (check(10, "PASS", "tp=1 on one node", name="a"), check(2, "INFO", "flash-attn absent", name="b"),
                  check(3, "WARN", "page cache 40 GiB", fix="drop caches between runs", name="c"),
                  check(1, "SKIP", "no driver", name="d"), check(1, "FAIL", "vllm links libcudart.so.12",
                                                                  fix="reinstall vllm for CUDA 13", name="e"),
                  check(1, "PASS", "torch cu130", name="f")):
        pytester.makepyfile(**files)
    result = run(pytester, "-m", "fast")
    assert glines(result) == [
        "G1 FAIL: vllm links libcudart.so.12",
        "    fix: reinstall vllm for CUDA 13",
        "G2 INFO: flash-attn absent",
        "G3 WARN: page cache 40 GiB",
        "    fix: drop caches between runs",
        "G10 PASS: tp=1 on one node",
    ]
    result.assert_outcomes(passed=4, failed=1, skipped=1, warnings=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_fail_fails_with_the_line_and_the_fix_but_no_traceback(pytester):
    pytester.makepyfile(**check(1, "FAIL", "torch cu128 on a CUDA 13 driver", fix="use the cu130 index"))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["G1 FAIL: torch cu128 on a CUDA 13 driver", "    fix: use the cu130 index",
                                 "FAILED test_g01_check.py::test_check - Failed: G1 FAIL: torch cu128*"])
    out = result.stdout.str()
    assert "Traceback" not in out and "spark.report(" not in out and "\nE  " not in out


def test_warn_passes_with_a_gotcha_warning_pointing_at_the_check(pytester):
    pytester.makepyfile(**check(3, "WARN", "page cache 40 GiB", fix="drop caches"))
    result = run(pytester)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*test_g03_check.py:*: GotchaWarning: G3 WARN: page cache 40 GiB", "*fix: drop caches"])
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("how", [("--spark-strict",), ("-W", "error::spark_gotchas.knowledge.verdict.GotchaWarning"), "ini"])
def test_strict_makes_warn_fail(pytester, how):
    pytester.makepyfile(**check(3, "WARN", "page cache 40 GiB", fix="drop caches"))
    if how == "ini":
        pytester.makeini("[pytest]\nspark_strict = true\n")
        how = ()
    result = run(pytester, *how)
    result.assert_outcomes(failed=1)
    assert glines(result) == ["G3 WARN: page cache 40 GiB", "    fix: drop caches"]
    assert "Traceback" not in result.stdout.str()


def test_skip_pass_and_info(pytester):
    for files in (check(2, "SKIP", "flash-attn not installed", name="a"), check(5, "PASS", "copy 190 GB/s", name="b"),
                  check(6, "INFO", "no other GPU process", name="c")):
        pytester.makepyfile(**files)
    result = run(pytester, "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_g02_a.py:*: G2 SKIP: flash-attn not installed"])
    assert glines(result) == ["G2 SKIP: flash-attn not installed", "G5 PASS: copy 190 GB/s",
                              "G6 INFO: no other GPU process"]
    assert result.ret == pytest.ExitCode.OK


def test_a_crash_inside_a_check_is_a_fail_line(pytester):
    pytester.makepyfile(test_g04_crash="""
        import pytest
        pytestmark = pytest.mark.fast

        def test_crash(spark):
            readings = {}
            spark.report(readings["missing"])
    """)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert glines(result) == [
        "G4 FAIL: the check itself failed: KeyError: 'missing'",
        "    fix: this is a bug in spark-gotchas: please report it with the snapshot (--spark-snapshot)",
    ]
    result.stdout.fnmatch_lines(["    at *test_g04_crash.py:6 in test_crash"])  # where it broke, for whoever fixes it
    assert "Traceback" not in result.stdout.str()


def test_a_check_reporting_another_gotcha_is_a_bug(pytester):
    pytester.makepyfile(test_g03_wrong=check(4, "PASS", "x")["test_g04_check"])
    result = run(pytester)
    assert glines(result)[0] == ("G3 FAIL: the check itself failed: ValueError: test_g03_wrong.py::test_check is "
                                 "a G3 check but reported G4")


def test_unavailable_reading_skips_and_a_broken_reader_fails(pytester, test_readers):
    pytester.makepyfile(test_g07_read="""
        import pytest
        pytestmark = pytest.mark.fast

        def test_nobody(spark):
            spark.read("test.nobody")
    """, test_g08_read="""
        import pytest
        pytestmark = pytest.mark.fast

        def test_broken(spark):
            spark.read("test.broken")
    """)
    result = run(pytester)
    result.assert_outcomes(skipped=1, failed=1)
    assert glines(result) == [
        "G7 SKIP: could not read test.nobody: no reader of that name",
        "G8 FAIL: the check itself failed reading test.broken: reader failed: OSError: permission denied: "
        "/sys/class/hwmon/hwmon0",
        "    fix: this is a bug in spark-gotchas: please report it with the snapshot (--spark-snapshot)",
    ]
    assert "Traceback" not in result.stdout.str()


# -- markers, selection, timeouts -------------------------------------------------------------------
@pytest.mark.parametrize("marks,has", [((), "none"), (("fast", "soak"), "fast, soak")])
def test_a_check_needs_exactly_one_speed_marker(pytester, marks, has):
    decorators = "".join(f"@pytest.mark.{m}\n" for m in marks)
    pytester.makepyfile(test_g05_bad=f"import pytest\n\n{decorators}def test_bad(spark):\n    pass\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_g05_bad.py::test_bad must carry exactly one of the markers fast, soak, "
                                 f"multinode (has: {has})"])


@pytest.mark.parametrize("args,ran", [((), ["G4 PASS: fast"]), (("-m", "fast"), ["G4 PASS: fast"]),
                                      (("-m", "soak"), ["G4 PASS: soak"]),
                                      (("-m", "fast or soak"), ["G4 PASS: soak (+1 more PASS)"])])
def test_soak_checks_run_only_when_asked_for(pytester, args, ran):
    pytester.makepyfile(**check(4, "PASS", "fast", name="quick"))
    pytester.makepyfile(**check(4, "PASS", "soak", marker="soak", name="long"))
    result = run(pytester, *args)
    assert glines(result) == ran


def test_every_check_gets_a_timeout(pytester):
    body = """
        import pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict
        pytestmark = pytest.mark.{marker}

        def test_t(spark, request):
            spark.report(Verdict({gid}, Status.INFO, f"timeout {{request.node.get_closest_marker('timeout').args[0]}} s"))
    """
    pytester.makepyfile(test_g04_soak=textwrap.dedent(body.format(marker="soak", gid=4)),
                        test_g05_fast=textwrap.dedent(body.format(marker="fast", gid=5)))
    result = run(pytester, "-m", "fast or soak", "--soak-duration", "20s", "--spark-fast-timeout", "30")
    assert glines(result) == ["G4 INFO: timeout 920.0 s", "G5 INFO: timeout 30.0 s"]


def test_a_hanging_check_is_stopped_by_its_timeout(pytester):
    pytester.makepyfile(test_g06_hang="""
        import time, pytest
        pytestmark = pytest.mark.fast

        def test_hang(spark):
            time.sleep(30)
    """)
    result = run(pytester, "--spark-fast-timeout", "1")  # the shortest a fast check may be given
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout*"])
    assert result.duration < 20


# -- options -------------------------------------------------------------------------------------------
def test_options_from_the_ini_and_the_command_line_wins(pytester):
    pytester.makeini("[pytest]\nspark_profile = gb10\nspark_model_gb = 70\n")
    pytester.makepyfile(test_g03_opts="""
        import pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict
        pytestmark = pytest.mark.fast

        def test_opts(spark):
            spark.report(Verdict(3, Status.INFO, f"{spark.profile.key} {spark.options.spark_model_gb}"))
    """)
    assert glines(run(pytester)) == ["G3 INFO: gb10 70.0"]
    assert glines(run(pytester, "--spark-profile", "h200")) == ["G3 INFO: h200 70.0"]


@pytest.mark.parametrize("args,message", [
    (("--spark-replay", "missing.json"), "spark-gotchas: snapshot not found: missing.json"),
    (("--spark-replay", "bad.json"), "spark-gotchas: snapshot bad.json is not JSON: *"),
    (("--soak-duration", "banana"), "spark-gotchas: --soak-duration (soak_duration): not a duration: 'banana' (use e.g. 20s, 30m, 8h)"),
])
def test_bad_option_values_are_one_clear_line(pytester, args, message):
    pytester.makefile(".json", bad="{nope")
    pytester.makepyfile(**check(9))
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("fields,message", [
    ({"options": [1]}, "snapshot shape.json records a bad option: the options are not a JSON object but list"),
    ({"options": {"spark_precision": "int3"}},
     "snapshot shape.json records a bad option: --spark-precision (spark_precision) must be one of bf16, fp8, nvfp4, not 'int3'"),
    ({"options": {"spark_load_factor": "abc"}},
     "snapshot shape.json records a bad option: --spark-load-factor (spark_load_factor) must be a number, not 'abc'"),
])
def test_a_snapshot_of_the_wrong_shape_is_one_clear_line(pytester, fields, message):
    snap = {"format": "spark-gotchas-snapshot", "version": 1, "readings": {}, **fields}
    pytester.makefile(".json", shape=json.dumps(snap))
    pytester.makepyfile(**check(9))
    result = run(pytester, "--spark-replay", "shape.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: spark-gotchas: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("ini,message", [
    ("spark_model_gb = abc", "--spark-model-gb (spark_model_gb) must be a number, not 'abc'"),
    ("spark_load_factor = -1", "--spark-load-factor (spark_load_factor) must be a number above 0 and at most 100, not '-1'"),
    ("spark_profile = nope", f"--spark-profile (spark_profile) must be one of {', '.join(CHOICES)}, not 'nope'"),
    ("spark_strict = maybe", "--spark-strict (spark_strict): invalid truth value 'maybe'"),
    ("spark_precision = int3", "--spark-precision (spark_precision) must be one of bf16, fp8, nvfp4, not 'int3'"),
])
def test_bad_ini_values_are_one_clear_line(pytester, ini, message):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(**check(9))
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: spark-gotchas: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


# -- reports ---------------------------------------------------------------------------------------------
def test_json_report_carries_each_verdict_and_the_run(pytester):
    for files in (check(3, "WARN", "page cache 40 GiB", fix="drop caches"), check(1, "PASS", "torch cu130")):
        pytester.makepyfile(**files)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = run(pytester, "--json-report", "--json-report-file=report.json")
    report = json.loads((pytester.path / "report.json").read_text())
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert tests["test_g03_check.py::test_check"]["metadata"]["gotcha"] == {
        "id": "G3", "status": "WARN", "summary": "page cache 40 GiB", "fix": "drop caches", "readings": {"n": 3},
        "check": "check"}
    assert tests["test_g01_check.py::test_check"]["metadata"]["gotcha"]["status"] == "PASS"
    assert "metadata" not in tests["test_plain.py::test_plain"]
    top = report["spark_gotchas"]
    assert top["lines"] == glines(result) == ["G1 PASS: torch cu130", "G3 WARN: page cache 40 GiB", "    fix: drop caches"]
    assert top["mode"] == "live" and top["replayed_from"] is None
    assert top["gotchas"]["G3"] == {"status": "WARN", "line": "G3 WARN: page cache 40 GiB", "summary": "page cache 40 GiB",
                                    "fix": "drop caches", "checks": 1}
    assert {"profile", "gpu", "driver", "cuda_driver", "torch", "python", "machine"} <= set(top["platform"])
    assert top["platform"]["profile_requested"] == "auto"
    assert {"suite", "python", "torch", "driver", "cuda_driver"} <= set(top["versions"])
    assert top["versions"]["python"] == sys.version.split()[0]
    assert top["options"]["spark_profile"] == "auto"


def test_no_secret_reaches_a_report_or_snapshot(pytester, test_readers, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_g09_leak="""
        import os, pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict
        pytestmark = pytest.mark.fast

        def test_leak(spark):
            values = spark.read("test.secrets").values
            print("stdout:", values)
            spark.report(Verdict(9, Status.FAIL, "leaked " + " ".join(values.values()), fix=values["HF_TOKEN"],
                                 readings=values))
    """)
    result = run(pytester, "--json-report", "--json-report-file=report.json", "--spark-snapshot",
                                "snap.json", "--spark-summary-md", "summary.md")
    result.assert_outcomes(failed=1)
    for name in ("report.json", "snap.json", "summary.md"):
        text = (pytester.path / name).read_text()
        leaked = [k for k, v in SECRETS.items() if v in text]
        assert not leaked, f"{name} holds the values of {leaked}"
        assert "***" in text  # the values were there, masked
    snap = json.loads((pytester.path / "snap.json").read_text())
    assert snap["readings"]["test.secrets"]["values"] == {k: "***" for k in SECRETS}


def test_summary_markdown(pytester):
    pytester.makepyfile(**check(3, "WARN", "page cache 40 GiB", fix="drop caches"))
    run(pytester, "--spark-summary-md", "summary.md")
    text = (pytester.path / "summary.md").read_text()
    assert "G3 WARN" in text and "page cache 40 GiB" in text and "drop caches" in text


# -- snapshot and replay ----------------------------------------------------------------------------------
def test_snapshot_then_replay_gives_the_same_lines_without_the_machine(pytester, test_readers):
    pytester.makepyfile(test_g04_clock=CLOCK_CHECK)
    test_readers["value"] = 600
    live = run(pytester, "--spark-snapshot", "snap.json", "--spark-profile", "gb10")
    assert glines(live) == ["G4 FAIL: SM clock 600 MHz under load", "    fix: remove AC power for 60 s"]
    snap = json.loads((pytester.path / "snap.json").read_text())
    assert snap["readings"]["test.clock"] == {"sm_mhz": 600}
    assert snap["options"]["spark_profile"] == "gb10"
    assert snap["verdicts"][0]["id"] == "G4" and snap["verdicts"][0]["status"] == "FAIL"

    test_readers["value"] = None  # the machine may not be read now
    replay = run(pytester, "--spark-replay", "snap.json")
    assert glines(replay) == glines(live)
    replay.stdout.fnmatch_lines(["replayed snap.json: *profile gb10"])  # the recorded profile is used
    assert test_readers["calls"] == 1


def test_replay_of_a_reading_the_snapshot_lacks_is_a_skip(pytester, test_readers):
    pytester.makepyfile(test_g04_clock=CLOCK_CHECK)
    save(Snapshot(readings={"env.container": {}}), pytester.path / "old.json")
    result = run(pytester, "--spark-replay=old.json")
    result.assert_outcomes(skipped=1)
    assert glines(result) == ["G4 SKIP: could not read test.clock: not in the snapshot old.json"]


def test_replay_starts_no_worker(pytester, test_readers, monkeypatch):
    started = []
    monkeypatch.setattr("spark_gotchas.runtime.worker.Worker.start", lambda self: started.append(self))
    pytester.makepyfile(test_g04_clock=CLOCK_CHECK)
    save(Snapshot(readings={"test.clock": {"sm_mhz": 2418}}), pytester.path / "snap.json")
    result = run(pytester, "--spark-replay", "snap.json")
    assert glines(result) == ["G4 PASS: SM clock 2418 MHz under load"]
    assert started == []


# -- inert elsewhere ---------------------------------------------------------------------------------------
PROBE = """
import json, os, sys

def pytest_unconfigure(config):
    with open(os.environ["SPARK_PROBE_OUT"], "w") as fh:
        json.dump({m: m in sys.modules for m in ("torch", "pynvml", "spark_gotchas.runtime.worker", "elftools")}, fh)
"""


def test_inert_in_a_project_without_gotcha_checks(pytester, monkeypatch, as_installed):
    pytester.makepyfile(test_plain="def test_plain():\n    print('hello')\n",
                        test_g01_not_a_check="def test_no_spark_fixture():\n    pass\n")
    pytester.makepyfile(probe_plugin=PROBE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("SPARK_PROBE_OUT", str(pytester.path / "modules.json"))
    result = pytester.runpytest_subprocess("-p", "probe_plugin", "--json-report",
                                           "--json-report-file=report.json")
    result.assert_outcomes(passed=2)
    assert "spark-gotchas" not in result.stdout.str().replace("plugins:", "").split("collected")[1]
    assert glines(result) == []
    assert "spark_gotchas" not in json.loads((pytester.path / "report.json").read_text())
    assert json.loads((pytester.path / "modules.json").read_text()) == {
        "torch": False, "pynvml": False, "spark_gotchas.runtime.worker": False, "elftools": False}


# -- the real checks, from the repo root, as a user types the commands ---------------------------------------
def run_suite(*args, home: Path, **env_extra: str) -> tuple[int, list[str]]:
    """``python -m pytest ARGS`` from the repo root in a fresh process (entry points, rootdir, ini as for a user)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(HOME=str(home), **env_extra)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.splitlines()
    return proc.returncode, lines


def suite_glines(lines: list[str]) -> list[str]:
    return [line for line in glines(SimpleNamespace(stdout=SimpleNamespace(lines=lines)))
            if line.startswith(("G1 ", "G9 ")) or line.startswith(FIX)]


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """One live preflight of the G1 and G9 checks on this machine, with a snapshot and a JSON report."""
    out = tmp_path_factory.mktemp("live")
    code, lines = run_suite("-m", "fast", "-k", "g01 or g09", "--spark-snapshot", str(out / "runs" / "snap.json"),
                            "--json-report", f"--json-report-file={out / 'report.json'}", home=out)
    assert code in (0, 1), "\n".join(lines[-30:])
    return out, suite_glines(lines), json.loads((out / "report.json").read_text())


def test_live_run_prints_real_g1_and_g9_lines(live_run):
    _out, lines, report = live_run
    assert [line.split(":")[0] for line in lines if GLINE.match(line)] == [
        line.split(":")[0] for line in report["spark_gotchas"]["lines"] if line.startswith(("G1 ", "G9 "))]
    assert any(line.startswith("G1 ") for line in lines) and any(line.startswith("G9 ") for line in lines)
    checks = [t for t in report["tests"] if "gotcha" in t.get("metadata", {})]
    assert {t["metadata"]["gotcha"]["id"] for t in checks} == {"G1", "G9"}
    assert report["spark_gotchas"]["mode"] == "live"


@pytest.mark.parametrize("where", ["inside", "outside"])
@pytest.mark.parametrize("spelling", ["space", "equals"])
def test_replay_gives_the_live_lines_whatever_the_spelling_and_place(live_run, tmp_path, where, spelling):
    out, live_lines, _ = live_run
    if where == "inside":
        folder = ROOT / "reports" / f".replay-test-{os.getpid()}-{spelling}"
        folder.mkdir(parents=True, exist_ok=True)
        typed = str((folder / "snap.json").relative_to(ROOT))
    else:
        folder = out / "runs"
        # the shell expands ~ after a space (pytest sees an absolute path outside the repo), not after =
        typed = str(folder / "snap.json") if spelling == "space" else "~/runs/snap.json"
    try:
        if where == "inside":
            shutil.copy(out / "runs" / "snap.json", folder / "snap.json")
        option = ["--spark-replay", typed] if spelling == "space" else [f"--spark-replay={typed}"]
        (tmp_path / "probe_plugin.py").write_text(PROBE)
        code, lines = run_suite("-m", "fast", "-k", "g01 or g09", *option, "--json-report",
                                f"--json-report-file={tmp_path / 'report.json'}", "-p", "probe_plugin", home=out,
                                SPARK_PROBE_OUT=str(tmp_path / "modules.json"),
                                PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
        assert code in (0, 1), "\n".join(lines[-30:])
        assert suite_glines(lines) == live_lines
        imported = json.loads((tmp_path / "modules.json").read_text())  # a replay touches no GPU library
        assert imported == {"torch": False, "pynvml": False, "spark_gotchas.runtime.worker": False, "elftools": False}
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["spark_gotchas"]["mode"] == "replay"
        collected = [r["nodeid"] for c in report.get("collectors", []) for r in c.get("result", [])]
        assert [n for n in collected if "test_g01_cuda_abi.py" in n], collected
        assert not [n for n in collected if "tests/" in n.replace("tests_gotchas/", "")], \
            "a preflight must not collect the suite's own tests"
        assert report["summary"].get("error", 0) == 0
    finally:
        if where == "inside":
            shutil.rmtree(folder, ignore_errors=True)



# -- readings started early, and the report's timing ----------------------------------------------
EVENTS: list[str] = []


@pytest.fixture
def prepared_reader(monkeypatch, test_readers):
    """test.logged logs "clock read", test.prepared logs "prepared"; the head start takes
    test.prepared early when a G5 GPU check is collected."""
    EVENTS.clear()

    def read_clock_logged(ctx) -> Clock:
        EVENTS.append("clock read")
        return Clock(1980)

    def read_prepared(ctx) -> Clock:
        EVENTS.append("prepared")
        return Clock(1980)

    monkeypatch.setitem(readers.READERS, "test.prepared", ReaderSpec("test.prepared", read_prepared, Clock, ""))
    monkeypatch.setitem(readers.READERS, "test.logged", ReaderSpec("test.logged", read_clock_logged, Clock, ""))
    monkeypatch.setattr(headstart, "EARLY", {"test.prepared": 5})
    return EVENTS


PREPARED_CHECKS = {
    "test_g03_cpu": """
        import pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict
        pytestmark = pytest.mark.fast

        def test_cpu_first(spark):
            spark.report(Verdict(3, Status.PASS, f"{spark.read('test.logged').sm_mhz} MHz"))
    """,
    "test_g01_files_here": """
        import pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict
        pytestmark = [pytest.mark.fast, pytest.mark.scan]

        def test_scan_second(spark):
            spark.report(Verdict(1, Status.PASS, "scanned"))
    """,
    "test_g05_gpu": """
        import pytest
        from spark_gotchas.knowledge.verdict import Status, Verdict

        @pytest.mark.fast
        @pytest.mark.gpu
        def test_gpu_later(spark):
            spark.report(Verdict(5, Status.PASS, f"{spark.read('test.prepared').sm_mhz} MHz"))
    """,
}


def test_checks_run_live_then_scans_then_gpu_and_prepared_readings_start_after_the_live_ones(
        pytester, prepared_reader):
    pytester.makepyfile(**{k: textwrap.dedent(v) for k, v in PREPARED_CHECKS.items()})
    result = run(pytester, "--json-report", "--json-report-file=report.json")
    result.assert_outcomes(passed=3)
    # the live check read the machine first; the GPU check's reading was taken early, at the scan
    assert prepared_reader == ["clock read", "prepared"]
    timing = json.loads((pytester.path / "report.json").read_text())["spark_gotchas"]["timing"]
    assert [c["nodeid"].split("::")[1] for c in timing["checks"]] == [
        "test_cpu_first", "test_scan_second", "test_gpu_later"]
    assert glines(result) == ["G1 PASS: scanned", "G3 PASS: 1980 MHz", "G5 PASS: 1980 MHz"]  # file order
    assert all(c["start_s"] >= 0 and c["seconds"] >= 0 for c in timing["checks"])
    assert timing["worker"] is None or isinstance(timing["worker"]["tasks"], list)


def test_the_cuda_context_waits_for_the_checks_of_the_machine_at_rest(pytester, prepared_reader, monkeypatch):
    monkeypatch.setattr(headstart.HeadStart, "cuda_context", lambda self: EVENTS.append("cuda context"))
    pytester.makepyfile(**{k: textwrap.dedent(v) for k, v in PREPARED_CHECKS.items()})
    run(pytester).assert_outcomes(passed=3)
    # asked for (it touches the GPU) only after the live check read the machine at rest
    assert prepared_reader[:3] == ["clock read", "cuda context", "prepared"]


def test_a_deselected_gpu_check_prepares_nothing(pytester, prepared_reader):
    pytester.makepyfile(**{k: textwrap.dedent(v) for k, v in PREPARED_CHECKS.items()})
    run(pytester, "-k", "cpu_first or scan").assert_outcomes(passed=2, deselected=1)
    assert prepared_reader == ["clock read"]


def test_a_replay_prepares_nothing(pytester, prepared_reader):
    pytester.makepyfile(**{k: textwrap.dedent(v) for k, v in PREPARED_CHECKS.items()})
    save(Snapshot(readings={"test.prepared": {"sm_mhz": 1500}, "test.logged": {"sm_mhz": 1400}}),
         str(pytester.path / "snap.json"))
    result = run(pytester, "--spark-replay", "snap.json")
    result.assert_outcomes(passed=3)
    assert prepared_reader == [] and "G5 PASS: 1500 MHz" in glines(result)


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="needs numpy")
def test_in_process_runs_survive_a_plugin_that_imports_numpy(pytester, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    pytester.makepyfile(test_inner="def test_ok(): pass")
    for _ in range(2):
        pytester.runpytest("-p", "numpy_plugin", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    import numpy

    assert numpy.ones(2).sum() == 2
