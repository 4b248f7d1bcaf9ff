"""The G-line contract: format, worst-wins order, fixes. Tools grep these lines."""

import itertools

import pytest

from spark_gotchas.knowledge.verdict import GOTCHA_IDS, Status, Verdict, format_line, summary_lines, worst

ORDER = [Status.FAIL, Status.WARN, Status.PASS, Status.INFO, Status.SKIP]  # worst first


def v(gid: int, status: str, summary: str = "finding", fix: str = "") -> Verdict:
    if Status(status).needs_fix and not fix:
        fix = f"fix for {summary}"
    return Verdict(gid, Status(status), summary, fix=fix)


@pytest.mark.parametrize("gid", GOTCHA_IDS)
def test_line_has_no_zero_padding(gid):
    line = format_line(gid, Status.PASS, "ok")
    assert line == f"G{gid} PASS: ok"
    assert not line.startswith("G0")


def test_line_of_a_verdict():
    assert Verdict(10, Status.INFO, "MemAvailable 115.9 GiB").line == "G10 INFO: MemAvailable 115.9 GiB"
    assert Verdict(1, "FAIL", "x", fix="y").line == "G1 FAIL: x"  # a status string is accepted


def test_status_order_is_fail_warn_pass_info_skip():
    assert sorted(Status, key=lambda s: -s.rank) == ORDER


@pytest.mark.parametrize("a,b", list(itertools.combinations(ORDER, 2)))
def test_worst_wins_in_either_order(a, b):
    assert worst([v(3, a), v(3, b)]).status is a
    assert worst([v(3, b), v(3, a)]).status is a


def test_worst_keeps_the_first_on_ties_and_none_when_empty():
    first, second = v(4, "WARN", "first"), v(4, "WARN", "second")
    assert worst([first, second]) is first
    assert worst([]) is None


@pytest.mark.parametrize("status", ["FAIL", "WARN"])
def test_fail_and_warn_need_a_fix(status):
    with pytest.raises(ValueError, match="needs a fix"):
        Verdict(2, Status(status), "something is wrong")
    with pytest.raises(ValueError, match="needs a fix"):
        Verdict(2, Status(status), "something is wrong", fix="   ")


@pytest.mark.parametrize("status", ["PASS", "INFO", "SKIP"])
def test_other_statuses_need_no_fix(status):
    assert Verdict(2, Status(status), "fine").fix == ""


@pytest.mark.parametrize("gid", [0, 11, -1, "1", True])
def test_gotcha_ids_are_1_to_10(gid):
    with pytest.raises(ValueError, match="1..10"):
        Verdict(gid, Status.PASS, "x")


def test_a_summary_from_outside_stays_one_line_and_status_must_exist():
    forged = Verdict(6, Status.WARN, "vllm serve \nG4 PASS: forged\r\x1b[2J\x07 \u202e", fix="stop it\nG5 PASS: no")
    assert forged.line == "G6 WARN: vllm serve \\x0aG4 PASS\\x3a forged\\x0d\\x1b[2J\\x07 \\u202e"
    assert summary_lines([forged]) == [forged.line, "    fix: stop it\\x0aG5 PASS\\x3a no"]
    with pytest.raises(ValueError):
        Verdict(1, "BROKEN", "x")


def test_a_summary_shows_no_credential():
    verdict = Verdict(6, Status.INFO, "vllm --api-key sk-abcdefghijklmnopqrstu https://u:pw1234@h.example")
    assert verdict.line == "G6 INFO: vllm --api-key *** https://u:***@h.example"


def test_summary_lines_one_per_gotcha_in_g_order_with_fixes():
    lines = summary_lines([
        v(10, "PASS", "tp=1"),
        v(3, "WARN", "page cache 40 GiB", fix="drop caches between runs"),
        v(1, "PASS", "torch cu130"),
        v(1, "FAIL", "libcudart.so.12 in vllm", fix="reinstall vllm for CUDA 13"),
        v(3, "INFO", "MemTotal 121.7 GiB"),
        v(1, "FAIL", "first launch crashed", fix="reinstall vllm for CUDA 13"),
        v(2, "SKIP", "no flash-attn"),
    ])
    assert lines == [
        "G1 FAIL: libcudart.so.12 in vllm (+1 more FAIL)",
        "    fix: reinstall vllm for CUDA 13",  # the same fix is given once
        "G2 SKIP: no flash-attn",
        "G3 WARN: page cache 40 GiB",
        "    fix: drop caches between runs",
        "G10 PASS: tp=1",
    ]


def test_summary_lines_list_each_distinct_fix_of_the_worst_status():
    lines = summary_lines([
        v(9, "WARN", "bare host", fix="use a container"),
        v(9, "WARN", "changed since baseline", fix="re-validate"),
        v(9, "PASS", "no broken requirement"),
    ])
    assert lines == ["G9 WARN: bare host (+1 more WARN)", "    fix: use a container", "    fix: re-validate"]


def test_to_json_is_the_report_shape():
    verdict = Verdict(5, Status.WARN, "copy 150 GB/s", fix="budget from 180 GB/s", readings={"copy_gbps": 150.0})
    assert verdict.to_json() == {
        "id": "G5", "status": "WARN", "summary": "copy 150 GB/s", "fix": "budget from 180 GB/s",
        "readings": {"copy_gbps": 150.0},
    }


def test_a_line_never_hides_what_was_not_checked():
    group = [Verdict(1, Status.PASS, "scan: no CUDA 12 extension", check="extensions link driver cuda"),
             Verdict(1, Status.SKIP, "torch build not checked: torch is not installed", check="torch cuda matches driver"),
             Verdict(1, Status.SKIP, "first CUDA launch not tried: torch is not installed", check="first cuda launch")]
    assert summary_lines(group) == ["G1 PASS: scan: no CUDA 12 extension; not checked: torch cuda matches driver, "
                                    "first cuda launch"]  # the reasons do not fit in 100 columns: named only
    short = [Verdict(1, Status.PASS, "ok"), Verdict(1, Status.SKIP, "launch not tried: no torch", check="launch")]
    assert summary_lines(short) == ["G1 PASS: ok; not checked: launch (no torch)"]
    warned = [Verdict(1, Status.WARN, "two CUDA runtimes", fix="install cupy-cuda13x"), *group[1:]]
    assert summary_lines(warned)[0] == "G1 WARN: two CUDA runtimes"  # a WARN or FAIL speaks for itself
    assert summary_lines(group[1:])[0].startswith("G1 SKIP: ")


def test_a_long_line_keeps_its_not_checked_tail_within_100_columns():
    """Where the names do not all fit, as many as fit and a count of the others; before that, the
    count of more verdicts of the same status gives way (the report lists them all)."""
    finding = "x" * 50
    skips = [Verdict(4, Status.SKIP, f"not run: {why}", check=check)
             for why, check in (("a", "clocks at rest"), ("b", "clocks under load"), ("c", "last soak"))]
    (line,) = summary_lines([Verdict(4, Status.PASS, finding), Verdict(4, Status.PASS, "y"), *skips])
    assert line == f"G4 PASS: {finding}; not checked: clocks at rest +2"
    assert len(line) <= 100
    (line,) = summary_lines([Verdict(4, Status.PASS, "x" * 20), Verdict(4, Status.PASS, "y"), *skips])
    assert line == f"G4 PASS: {'x' * 20} (+1 more PASS); not checked: clocks at rest, clocks under load +1"
    (line,) = summary_lines([Verdict(4, Status.PASS, "x" * 55), *skips])  # room for one name and the count
    assert line == f"G4 PASS: {'x' * 55}; not checked: clocks at rest +2"
    (line,) = summary_lines([Verdict(4, Status.PASS, "x" * 80), *skips])  # room for the count alone
    assert line == f"G4 PASS: {'x' * 80}; 3 not checked"


def test_a_fail_line_keeps_its_count_of_more_fails_whose_fixes_it_lists():
    fails = [Verdict(1, Status.FAIL, "x" * 95, fix="fix one"), Verdict(1, Status.FAIL, "cupy", fix="fix two"),
             Verdict(1, Status.SKIP, "not run: no driver", check="first launch")]
    assert summary_lines(fails) == [f"G1 FAIL: {'x' * 95} (+1 more FAIL)", "    fix: fix one", "    fix: fix two"]
