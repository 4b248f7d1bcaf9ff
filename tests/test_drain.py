"""The node health decision (spark_gotchas.commands.slurm.drain): a run's verdicts and Slurm's view of the node in,
drain / undrain / leave out; NHC's rule that a reason not our own is never touched."""

from __future__ import annotations

import pytest

from spark_gotchas.commands.slurm import drain
from spark_gotchas.commands.slurm.drain import Do, Node, Outcome
from spark_gotchas.commands.slurm.scontrol import SlurmError, parse_node

G4_FAIL = "G4 FAIL: SM clock 600 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state"
OURS = f"spark-gotchas: {G4_FAIL}"
FAILING = Outcome(lines=(G4_FAIL, "    fix: power-cycle the Spark"), fails=(G4_FAIL,))
WARNING = Outcome(lines=("G9 WARN: not an NGC or Unsloth container", "    fix: run in NGC"))
IDLE = Node("fleet2", "IDLE")


def report(gotchas: dict[str, str], *, exitcode: int = 0, gpu: str | None = "NVIDIA H200", lines=None) -> dict:
    """A JSON report's top level as docs/report.md gives it, with the statuses asked for."""
    return {"exitcode": exitcode, "spark_gotchas": {
        "lines": lines if lines is not None else [f"{g} {s}: finding of {g}" for g, s in gotchas.items()],
        "gotchas": {g: {"status": s, "summary": f"finding of {g}", "fix": "", "checks": 1} for g, s in gotchas.items()},
        "platform": {"gpu": gpu, "nvml_error": None if gpu else "NVML library not found"}}}


# -- from the report ------------------------------------------------------------------------------------
def test_the_fail_lines_come_from_the_report_statuses_and_lines():
    doc = report({"G1": "PASS", "G4": "FAIL", "G5": "FAIL", "G9": "WARN"}, exitcode=1)
    doc["spark_gotchas"]["lines"][1] = "G4 FAIL: finding of G4 (+1 more FAIL)"
    found = drain.outcome(doc)
    assert found.fails == ("G4 FAIL: finding of G4 (+1 more FAIL)", "G5 FAIL: finding of G5")
    assert found.error == "" and not found.healthy
    assert drain.reason(found) == "spark-gotchas: G4 FAIL: finding of G4 (+1 more FAIL); G5 FAIL: finding of G5"


def test_the_line_the_report_keeps_for_a_gotcha_is_the_reason():
    """``gotchas.G<n>.line`` is the G-line as printed: the reason quotes it, counts and all."""
    doc = report({"G4": "FAIL"}, exitcode=1, lines=[])
    doc["spark_gotchas"]["gotchas"]["G4"]["line"] = "G4 FAIL: finding of G4 (+1 more FAIL)"
    assert drain.outcome(doc).fails == ("G4 FAIL: finding of G4 (+1 more FAIL)",)


def test_only_the_g_line_block_of_a_report_is_passed_on():
    """A report is a file: a line of it that reads as node-health's own, or as anything but a G-line
    or its fix, is not printed as if the pass had said it."""
    doc = report({"G4": "FAIL"}, exitcode=1)
    doc["spark_gotchas"]["lines"] += ["    fix: power-cycle it", "node-health: fleet2: undrained: no FAIL now",
                                      "G11 PASS: forged", "G4 PASS: all fine\nnode-health: fleet2: healthy"]
    assert drain.outcome(doc).lines == ("G4 FAIL: finding of G4", "    fix: power-cycle it",
                                        "G4 PASS: all fine\nnode-health: fleet2: healthy")  # its \n escaped when printed


def test_a_status_without_its_line_takes_its_summary():
    found = drain.outcome(report({"G5": "FAIL"}, lines=[]))
    assert found.fails == ("G5 FAIL: finding of G5",)


def test_reading_a_report_is_linear_in_its_lines():
    """Each FAIL's line is found in one pass over the lines: 40,000 FAIL entries and as many lines
    (a report someone names with --from-report) are read at once, not one scan per gotcha."""
    import time

    n = 40_000
    doc = {"exitcode": 1, "spark_gotchas": {
        "lines": [f"G{i} FAIL: finding {i}" for i in range(n)],
        "gotchas": {f"G{i}": {"status": "FAIL", "summary": f"finding {i}"} for i in range(n)}}}
    started = time.monotonic()
    found = drain.outcome(doc)
    assert len(found.fails) == n and found.fails[-1] == f"G{n - 1} FAIL: finding {n - 1}"
    assert time.monotonic() - started < 30  # one scan per gotcha: n * n / 2 = 8e8 comparisons, minutes


@pytest.mark.parametrize("status", ["WARN", "PASS", "INFO", "SKIP"])
def test_nothing_but_fail_makes_a_node_unhealthy(status):
    found = drain.outcome(report({"G9": status, "G1": "PASS"}))
    assert found.healthy and found.fails == ()


@pytest.mark.parametrize("doc, error", [
    ({}, "the run's report has no spark_gotchas section"),
    ([], "the run's report has no spark_gotchas section"),
    ({"spark_gotchas": {"lines": "G1 PASS"}}, "the run's report has no verdicts (spark_gotchas.gotchas, spark_gotchas.lines)"),
    (report({"G1": "PASS"}, exitcode=4), "pytest exited 4 (usage error)"),
    (report({"G1": "PASS"}, exitcode=2), "pytest exited 2 (interrupted)"),
    (report({"G1": "PASS"}, exitcode="\x1b[2J"), "pytest exited \\x1b[2J"),
    (report({"G1": "PASS"}, exitcode=True), "pytest exited True"),  # JSON's true is no exit status
    (report({"G6": "fail"}), "G6's status in the report is 'fail', not one of FAIL, WARN, PASS, INFO, SKIP"),
    (report({"G6": "FAIL\x1b[2J"}), "G6's status in the report is 'FAIL\\x1b[2J', not one of FAIL, WARN, PASS, INFO, SKIP"),
    ({"exitcode": 1, "spark_gotchas": {"lines": [], "gotchas": {"G6": "FAIL"}}},
     "G6's entry in the report is 'FAIL', not an object"),
    (report({}), "the run judged no gotcha"),
])
def test_a_report_without_a_judgement_is_an_error(doc, error):
    assert drain.outcome(doc).error == error


def test_no_gpu_where_slurm_gives_one_is_an_error_unless_a_fail_says_more():
    assert drain.outcome(report({"G1": "INFO"}, gpu=None), require_gpu=True).error == \
        "no GPU visible, where Slurm gives this node one: NVML library not found"
    assert drain.outcome(report({"G1": "INFO"}, gpu=None)).healthy
    assert drain.outcome(report({"G1": "FAIL"}, gpu=None, exitcode=1), require_gpu=True).fails == \
        ("G1 FAIL: finding of G1",)


# -- the reason -----------------------------------------------------------------------------------------
def test_the_reason_is_masked_escaped_and_cut_to_255_bytes():
    token = "ghp_" + "x1" * 18
    line = f"G6 FAIL: pid 7 vllm\x1b[2J\nG4 PASS: fine {token} " + "é" * 300
    text = drain.reason(Outcome(fails=(line,)))
    assert text.startswith("spark-gotchas: G6 FAIL: pid 7 vllm\\x1b[2J\\x0aG4 PASS: fine *** é")
    assert token not in text and "\n" not in text and "\x1b" not in text
    assert len(text.encode()) <= drain.REASON_BYTES and text.endswith("é…")
    assert len(drain.reason(Outcome(fails=("G5 FAIL: slow",))).encode()) < drain.REASON_BYTES


def test_an_error_reason_says_there_is_no_verdict():
    assert drain.reason(drain.error("the checks did not finish within 38 s")) == \
        "spark-gotchas: no verdict: the checks did not finish within 38 s"


# -- the decision ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("found, node, do, says", [
    (FAILING, IDLE, Do.DRAIN, OURS),
    (FAILING, Node("fleet2", "DOWN"), Do.DRAIN, OURS),
    (FAILING, Node("fleet2", "IDLE", ("DRAIN",), OURS), Do.NOTHING, f"still drained: {OURS}"),
    (FAILING, Node("fleet2", "IDLE", ("DRAIN",), "spark-gotchas: G5 FAIL: read 2266 GB/s"), Do.DRAIN, OURS),
    (FAILING, Node("fleet2", "IDLE", ("DRAIN",), ""), Do.NOTHING,
     f"left as it is (IDLE+DRAIN): drained with no reason, not by us; found: {OURS}"),
    (FAILING, Node("fleet2", "IDLE", ("DRAIN",), "operator: fan"), Do.NOTHING,
     f"left as it is (IDLE+DRAIN): its reason is not ours: operator: fan; found: {OURS}"),
    (FAILING, Node("fleet2", "DOWN", ("NOT_RESPONDING",), "Not responding"), Do.NOTHING,
     f"left as it is (DOWN+NOT_RESPONDING): its reason is not ours: Not responding; found: {OURS}"),
    (WARNING, IDLE, Do.NOTHING, "healthy: no FAIL"),
    (WARNING, Node("fleet2", "IDLE", ("DRAIN",), OURS), Do.UNDRAIN, f"no FAIL now (was: {OURS})"),
    (WARNING, Node("fleet2", "IDLE", ("DRAIN",), "operator: fan"), Do.NOTHING,
     "left as it is (IDLE+DRAIN): its reason is not ours: operator: fan"),
    (WARNING, Node("fleet2", "IDLE", ("DRAIN",), ""), Do.NOTHING,
     "left as it is (IDLE+DRAIN): drained with no reason, not by us"),
    (WARNING, None, Do.NOTHING, "healthy: no FAIL"),
    (FAILING, None, Do.NOTHING, f"unhealthy: {OURS}"),
])
def test_decide(found, node, do, says):
    action = drain.decide(found, node)
    assert (action.do, action.says) == (do, says)
    assert action.unhealthy == (not found.healthy)
    if do is Do.DRAIN:
        assert action.reason == OURS


def test_an_error_drains_by_default_and_never_undrains():
    broken = drain.error("pytest exited 3 without a report: INTERNALERROR")
    reason = "spark-gotchas: no verdict: pytest exited 3 without a report: INTERNALERROR"
    assert drain.decide(broken, IDLE) == drain.Action(Do.DRAIN, reason, reason, unhealthy=True)
    ours = Node("fleet2", "IDLE", ("DRAIN",), OURS)
    assert drain.decide(broken, ours).do is Do.DRAIN  # the reason says what is true now
    for node in (IDLE, ours):
        ignored = drain.decide(broken, node, on_error="ignore")
        assert (ignored.do, ignored.unhealthy) == (Do.NOTHING, False)
        assert ignored.says == "left as it is (--on-error ignore): no verdict: pytest exited 3 without a report: INTERNALERROR"
    with pytest.raises(ValueError):
        drain.decide(broken, IDLE, on_error="resume")


def test_an_operator_reason_is_shown_escaped():
    node = Node("fleet2", "IDLE", ("DRAIN",), "fan\x1b]0;owned\x07")
    assert "fan\\x1b]0;owned\\x07" in drain.decide(WARNING, node).says


@pytest.mark.parametrize("node, busy", [
    (Node("n", "ALLOCATED"), True), (Node("n", "MIXED", ("DRAIN",)), True), (Node("n", "IDLE", ("COMPLETING",)), True),
    (Node("n", "IDLE"), False), (Node("n", "IDLE", ("DRAIN",)), False), (Node("n", "DOWN", ("NOT_RESPONDING",)), False),
])
def test_a_node_with_jobs_is_left_unchecked(node, busy):
    assert (drain.not_checked(node) is not None) == busy


# -- Slurm's view, as scontrol 22.05.8 prints it --------------------------------------------------------
SHOWN = """NodeName=fleet1 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=4.36
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:h200:1
   NodeAddr=127.0.0.1 NodeHostName=fleet1 Port=16821 Version=22.05.8
   RealMemory=1 AllocMem=0 FreeMem=7450 Sockets=1 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=fleet
   Reason=operator: bad fan ; State=IDLE x=1 [root@2026-12-05T12:30:11]
"""


def test_parse_node_reads_state_flags_reason_and_gres():
    node = parse_node(SHOWN, "fleet1")
    assert node == Node("fleet1", "IDLE", ("DRAIN",), "operator: bad fan ; State=IDLE x=1", "gpu:h200:1")
    assert node.drained and not node.ours and node.has_gpu and not node.busy


def test_parse_node_without_a_reason_or_gres():
    text = SHOWN.replace("Gres=gpu:h200:1", "Gres=(null)").replace("State=IDLE+DRAIN", "State=MIXED")
    node = parse_node("\n".join(line for line in text.splitlines() if "Reason=" not in line), "fleet1")
    assert node == Node("fleet1", "MIXED", (), "", "") and node.busy and not node.has_gpu


def test_a_record_without_a_state_is_an_error():
    with pytest.raises(SlurmError, match="gave no State="):
        parse_node("Node fleet9 not found", "fleet9")

