"""--soak-duration: what a user may type, and what a typo does."""

import pytest

from spark_gotchas.machine.options import RunOptions, parse_duration
from spark_gotchas.runtime.soak.engine import window_for


@pytest.mark.parametrize("text, seconds", [
    ("20s", 20.0), ("30m", 1800.0), ("8h", 28800.0), ("1.5h", 5400.0), ("90", 90.0), (" 2 H ", 7200.0),
    ("1d", 86400.0), (45, 45.0),
])
def test_durations_users_type(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "h", "-3m", "1h30m", "ten minutes"])
def test_what_is_not_a_duration_says_how_to_write_one(text):
    with pytest.raises(ValueError, match="use e.g. 20s, 30m, 8h"):
        parse_duration(text)


def test_the_default_soak_is_half_an_hour_in_15_s_windows():
    options = RunOptions()
    assert options.soak_seconds == 1800.0 and window_for(options.soak_seconds) == 15.0


def test_a_typo_on_the_command_line_is_a_usage_error_not_a_soak(pytester, monkeypatch):
    import spark_gotchas.plugin

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "soak", "--soak-duration", "8hours",
                                plugins=[spark_gotchas.plugin])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*spark-gotchas: --soak-duration (soak_duration): not a duration: '8hours' (use e.g. 20s, 30m, 8h)*"])
