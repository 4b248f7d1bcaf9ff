"""Options at their edges: every number a run is given (an option, its ini value, an environment
variable, a subcommand's argument) is checked where options are made, and one out of its span is
one line naming it and its span (pytest's usage error, exit 4; a subcommand's usage error, exit 2),
never an INTERNALERROR, a traceback or a run of 1,326 lines.

The examples that were found: ``--spark-fast-timeout 1e12`` (INTERNALERROR) and ``0.001`` (every
check timed out: 1,326 lines and "this is a bug in spark-gotchas"). Then the class: every other
numeric option, NaN and infinities, the ini file, the environment's numbers, the subcommands'.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_gotchas.machine import options
from spark_gotchas.machine.options import ENVIRONMENT, RunOptions, declared, env_number

FAST = """
import pytest
from spark_gotchas.knowledge.verdict import Status, Verdict
pytestmark = pytest.mark.fast

def test_check(spark):
    spark.report(Verdict(9, Status.PASS, "fine"))
"""


@pytest.fixture(autouse=True)
def only_the_plugins_under_test(monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(pytester, *args: str):
    import pytest_timeout

    import spark_gotchas.plugin

    pytester.makepyfile(test_g09_check=FAST)
    return pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[spark_gotchas.plugin, pytest_timeout])


def refused(result, line: str) -> None:
    __tracebackhide__ = True
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    errors = [text for text in result.stderr.str().splitlines() if text.strip()]
    assert errors == [f"ERROR: spark-gotchas: {line}"]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


TIMEOUT = "must be a number of seconds from 1 to 86400, or 0 for none"


@pytest.mark.parametrize("value", ["1e12", "0.001", "-1", "nan", "inf", "1e400", "86401"])
def test_a_fast_timeout_out_of_its_span_is_one_usage_line(pytester, value):
    refused(run(pytester, "--spark-fast-timeout", value),
            f"--spark-fast-timeout (spark_fast_timeout) {TIMEOUT}, not '{value}'")


@pytest.mark.parametrize("value", ["0", "1", "120", "86400"])
def test_a_fast_timeout_in_its_span_runs(pytester, value):
    run(pytester, "--spark-fast-timeout", value).assert_outcomes(passed=1)


@pytest.mark.parametrize("flag, value, span", [
    ("--spark-model-gb", "0", "must be a number of GB above 0 and at most 10000"),
    ("--spark-model-gb", "1e9", "must be a number of GB above 0 and at most 10000"),
    ("--spark-model-gb", "-inf", "must be a number of GB above 0 and at most 10000"),
    ("--spark-load-factor", "0", "must be a number above 0 and at most 100"),
    ("--spark-load-factor", "NaN", "must be a number above 0 and at most 100"),
    ("--soak-duration", "0s", "must be a duration from 1s to 168h"),
    ("--soak-duration", "99999999999h", "must be a duration from 1s to 168h"),
])
def test_every_numeric_option_refuses_a_value_out_of_its_span(pytester, flag, value, span):
    name = flag.lstrip("-").replace("-", "_")
    refused(run(pytester, f"{flag}={value}"), f"{flag} ({name}) {span}, not '{value}'")


def test_an_ini_value_out_of_its_span_is_the_same_line(pytester):
    pytester.makeini("[pytest]\nspark_fast_timeout = 1e12\n")
    refused(run(pytester), f"--spark-fast-timeout (spark_fast_timeout) {TIMEOUT}, not '1e12'")


def test_options_made_in_code_are_checked_too():
    with pytest.raises(ValueError, match=r"--spark-fast-timeout \(spark_fast_timeout\) must be .* not 1000000000000.0"):
        RunOptions(spark_fast_timeout=1e12)
    with pytest.raises(ValueError, match=r"--soak-duration \(soak_duration\) must be a duration from 1s to 168h"):
        RunOptions(soak_duration="1000h")


def test_every_numeric_option_declares_a_span():
    numbers = [f.name for f in declared() if options.kind(f) is float or f.name == "soak_duration"]
    assert sorted(numbers) == ["soak_duration", "spark_fast_timeout", "spark_load_factor", "spark_model_gb"]
    assert all(f.metadata["span"] is not None for f in declared() if f.name in numbers)


@pytest.mark.parametrize("name, value, line", [
    ("SPARK_GOTCHAS_NVML_TIMEOUT", "1e12", "must be a number of seconds from 0.1 to 600"),
    ("SPARK_GOTCHAS_NVML_TIMEOUT", "nan", "must be a number of seconds from 0.1 to 600"),
    ("SPARK_GOTCHAS_GITHUB_TIMEOUT", "-5", "must be a number of seconds from 0.1 to 300"),
    ("SPARK_GOTCHAS_SOAK_MAX_DROP", "lots", "must be a number above 0 and below 1 (0.1 or 10%)"),
    ("SPARK_GOTCHAS_SOAK_MAX_DROP", "150%", "must be a number above 0 and below 1 (0.1 or 10%)"),
    ("SPARK_GOTCHAS_NNODES", "2.5", "must be a whole number of nodes from 1 to 4096"),
    ("SPARK_GOTCHAS_COLLECTIVE_TIMEOUT", "0", "must be a number of seconds from 1 to 3600"),
])
def test_an_environment_number_out_of_its_span_is_one_usage_line(pytester, monkeypatch, name, value, line):
    monkeypatch.setenv(name, value)
    refused(run(pytester), f"{name}={value!r} {line}")


def test_environment_numbers_in_their_span_are_read_and_the_modules_keep_their_defaults(monkeypatch):
    from spark_gotchas.machine import nvml
    from spark_gotchas.machine.readers import github
    from spark_gotchas.runtime.soak import engine

    assert env_number("SPARK_GOTCHAS_SOAK_MAX_DROP", {"SPARK_GOTCHAS_SOAK_MAX_DROP": "15%"}) == 0.15
    assert env_number("SPARK_GOTCHAS_NNODES", {"SPARK_GOTCHAS_NNODES": "2"}) == 2
    assert env_number("SPARK_GOTCHAS_NVML_TIMEOUT", {}) is None
    # the spans are the ones the modules that read the variables clamp to
    spans = {e.name: e.span for e in ENVIRONMENT}
    assert spans["SPARK_GOTCHAS_GITHUB_TIMEOUT"].hi == github.MAX_BUDGET_S
    monkeypatch.setenv(nvml.TIMEOUT_ENV, "1e12")
    assert nvml.timeout_s() == nvml.DEFAULT_TIMEOUT_S  # a program using the module alone: its default
    assert engine.max_drop_fraction({engine.MAX_DROP_ENV: "1"})[0] == engine.DEFAULT_MAX_DROP


def test_a_bad_node_count_is_a_g10_reason_not_a_crashed_check(monkeypatch):
    from spark_gotchas.machine.readers import dist

    monkeypatch.setenv("PET_NNODES", "two")
    with pytest.raises(ValueError, match=r"^NNODES='two' must be a whole number from 0 to 4096$"):
        dist.config_from_env()


@pytest.mark.parametrize("argv, message", [
    (["microbench", "gemm", "--size", "1e12"], "argument --size: '1e12' is not a whole number from 16 to 131072"),
    (["microbench", "bandwidth", "--rep-ms", "nan"], "argument --rep-ms: 'nan' is not a number of ms from 1 to 600000"),
    (["microbench", "soak_load", "--seconds", "0.001"],
     "argument --seconds: '0.001' is not a number of seconds from 1 to 604800"),
    (["microbench", "safetensors_load", "--size-gb", "-16"],
     "argument --size-gb: '-16' is not a number of GB from 0.001 to 10000"),
    (["soak-cost", "--interval", "inf"], "argument --interval: 'inf' is not a number of seconds from 0.01 to 3600"),
    (["soak-cost", "--seconds", "9999h"], "argument --seconds: '9999h' must be a duration from 1s to 168h"),
    (["soak-record", "x.csv", "--max-drop", "2"], "argument --max-drop: '2' is not a fraction in (0, 1)"),
    (["diff", "a.json", "b.json", "--tolerance", "1e400"],
     "argument --tolerance: '1e400' is not a number of percent from 0 to 1000"),
    (["node-health", "--timeout", "abc"], "argument --timeout: 'abc' is not a number of seconds from 0.1 to 86400"),
    (["node-health", "--scontrol-timeout", "1e300"],
     "argument --scontrol-timeout: '1e300' is not a number of seconds from 0.1 to 86400"),
])
def test_a_subcommands_number_out_of_its_span_is_a_usage_error_before_anything_runs(argv, message):
    proc = subprocess.run([sys.executable, "-m", "spark_gotchas", *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
