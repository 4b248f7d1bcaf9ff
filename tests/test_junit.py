"""The JUnit XML report (``--junitxml``, pytest's default junit_family xunit2) as CI test views read
it: read back with junitparser, validated against the schema Jenkins ships (junit-10.xsd), each
check's testcase carrying its G-line where GitLab, Jenkins and the GitHub reporters show it."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import xmlschema
from door_runs import H200, VLLM, XSD, h200_doors, replay, vllm_doors  # noqa: F401  the h200 and vllm fixtures
from fs_limits import locked, small_disk
from junitparser import Failure, JUnitXml, Skipped

from spark_gotchas.knowledge.verdict import Status, Verdict
from spark_gotchas.outputs import junit

G9_WARN = "G9 WARN: not an NGC or Unsloth container (nvidia/cuda 13.0.2); bare pip: torch 2.11.0"
G9_FIX = ("    fix: run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container (unsloth/unsloth); "
          "if bare pip is unavoidable, follow NVIDIA's install order and install Unsloth with --no-deps")
G6_FAIL = "G6 FAIL: 1 workload in the way: pid 5990 vLLM +1 process (cap 0.9)"
G6_FIX = ("    fix: run one heavy job at a time: restart vLLM with --gpu-memory-utilization 0.38 or lower; or stop what you "
          "do not need (kill 5990)")


def cases(path) -> dict[str, object]:
    """Testcases by test function name."""
    (suite,) = list(JUnitXml.fromfile(str(path)))
    return {case.name: case for case in suite}


def properties(path) -> dict[str, str]:
    (suite,) = list(JUnitXml.fromfile(str(path)))
    return {p.name: p.value for p in suite.properties()}


def test_a_warn_is_the_first_line_of_its_testcase_system_out_with_its_fix_and_detail(h200):
    case = cases(h200.junit)["test_g9_container_and_consistency"]
    assert case.is_passed  # a WARN passes, as in the terminal
    assert case.system_out.splitlines() == [G9_WARN, G9_FIX, "    detail: a container: NVIDIA image variables "
                                            "(NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME), /.dockerenv"]


def test_every_check_carries_its_own_line_pass_and_info_too(h200):
    by_name = cases(h200.junit)
    assert len(by_name) == 21
    for name, case in by_name.items():
        (skipped,) = case.result or [None]
        text = skipped.message if isinstance(skipped, Skipped) else case.system_out
        assert text.startswith(f"G{name.split('_')[1][1:]} "), (name, text)
    assert by_name["test_g5_bandwidth_budget"].system_out.splitlines()[0] == \
        "G5 PASS: read 4614, copy 4230 GB/s: at or above H200's measured range"
    assert by_name["test_g7_nvfp4_vs_fp8_rate"].system_out.startswith("G7 INFO: NVIDIA H200 (cc 9.0) runs BF16 688, ")


def test_a_skip_message_is_its_line_and_its_text_the_line_and_detail(h200):
    case = cases(h200.junit)["test_g4_last_soak_ended"]
    (skipped,) = case.result
    assert isinstance(skipped, Skipped)
    assert skipped.message == "G4 SKIP: no earlier soak recorded: nothing to check for a reboot"
    assert skipped.text.splitlines() == [skipped.message,
                                         "    detail: no heartbeat at /work/main/reports/g4-soak.heartbeat.json"]


def test_a_fail_message_is_its_line_alone_and_its_text_holds_the_fix(vllm):
    assert vllm.returncode == 1
    (failure,) = cases(vllm.junit)["test_g6_other_gpu_workloads"].result
    assert isinstance(failure, Failure)
    assert failure.message == G6_FAIL
    lines = failure.text.splitlines()
    assert lines[:2] == [G6_FAIL, G6_FIX]
    assert lines[2].startswith("    detail: pid 5990 vLLM +1 process (--gpu-memory-utilization 0.9 = 117.6 GB")
    assert not [line for line in lines if line.startswith("Failed:")]


def test_the_run_s_lines_are_the_testsuite_s_properties(h200, vllm):
    for run in (h200, vllm):
        props = properties(run.junit)
        printed = [line for line in run.lines if line[:1] == "G"]
        assert [props[line.split()[0]] for line in printed] == printed
        assert props["spark_gotchas.machine.platform"].startswith("replayed ")


def test_the_report_is_valid_against_the_schema_jenkins_ships(h200, vllm):
    schema = xmlschema.XMLSchema(str(XSD))
    for run in (h200, vllm):
        schema.validate(str(run.junit))  # raises with the element and the rule
        assert ET.parse(run.junit).getroot().find("testsuite/testcase/properties") is None  # none per testcase


def test_spark_strict_fails_the_warn_with_its_line_as_the_message(tmp_path):
    run = replay(H200, tmp_path, "--spark-strict", metrics=False)
    assert run.returncode == 1
    (failure,) = cases(run.junit)["test_g9_container_and_consistency"].result
    assert failure.message == G9_WARN
    assert failure.text.splitlines()[:2] == [G9_WARN, G9_FIX]
    assert "    (failed because of --spark-strict)" in failure.text.splitlines()
    xmlschema.XMLSchema(str(XSD)).validate(str(run.junit))


def test_junit_prefix_and_logging_are_kept(tmp_path):
    run = replay(H200, tmp_path, "--junit-prefix=node7", "-o", "junit_logging=all", metrics=False)
    case = cases(run.junit)["test_g9_container_and_consistency"]
    assert case.classname == "node7.tests_gotchas.test_g09_container"
    assert case.system_out.startswith(G9_WARN + "\n")
    xmlschema.XMLSchema(str(XSD)).validate(str(run.junit))


def test_case_name_is_pytest_s():
    assert junit.case_name("tests_gotchas/test_g05_bandwidth.py::test_g5_bandwidth_budget") == \
        ("tests_gotchas.test_g05_bandwidth", "test_g5_bandwidth_budget")
    assert junit.case_name("checks/test_g04_thermal.py::test_g4_soak[a::b]", "n1") == \
        ("n1.checks.test_g04_thermal", "test_g4_soak[a::b]")


def test_strings_xml_cannot_hold_are_escaped_and_markup_stays_text():
    hostile = 'vllm]]><x a="1">&amp;\x1b[2J\n\ufffe\uffff'
    case = ET.Element("testcase", classname="c", name="n")
    junit.annotate_case(case, Verdict(6, Status.PASS, f"pid 1 {hostile}", detail=hostile))
    text = ET.tostring(case, encoding="unicode")
    back = ET.fromstring(text).find("system-out").text.splitlines()
    assert back[0] == 'G6 PASS: pid 1 vllm]]><x a="1">&amp;\\x1b[2J\\x0a\\ufffe\\uffff'
    assert len(back) == 2 and back[1].startswith("    detail: vllm]]>")


def _run_into(path, tmp_path, env=None):
    """A replay whose report goes to ``path``: (exit status, printed output)."""
    import sys

    from door_runs import REPO
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:cacheprovider",
                          f"--spark-replay={H200}", f"--junitxml={path}", "--json-report",
                          f"--json-report-file={tmp_path / 'r.json'}"], cwd=REPO, capture_output=True, text=True,
                         timeout=180, env=env)
    return run.returncode, run.stdout + run.stderr


def test_a_path_with_a_variable_pytest_expands_is_the_file_annotated(tmp_path):
    code, out = _run_into("$SPARK_REPORTS/junit.xml", tmp_path, env={**os.environ, "SPARK_REPORTS": str(tmp_path)})
    assert code == 0, out[-2000:]
    assert cases(tmp_path / "junit.xml")["test_g9_container_and_consistency"].system_out.startswith(G9_WARN)


def test_a_report_path_under_a_file_is_one_line_and_exit_1_in_the_json_report_too(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, out = _run_into(blocker / "junit.xml", tmp_path)
    assert code == 1 and "Traceback" not in out
    (line,) = [line for line in out.splitlines() if line.startswith("could not write the JUnit XML report")]
    assert line == (f"could not write the JUnit XML report {blocker}/junit.xml: {blocker} is a file, not a folder "
                    "(the run fails: an output it was asked for is missing)")
    import json
    assert json.loads((tmp_path / "r.json").read_text())["exitcode"] == 1


def test_a_fifo_no_one_reads_is_one_line_and_exit_1_not_a_hang(tmp_path):
    """pytest's own open of a FIFO waits for a reader for ever; the suite's outputs give up after 10 s."""
    fifo = tmp_path / "junit.fifo"
    os.mkfifo(fifo)
    code, out = _run_into(fifo, tmp_path)
    assert code == 1 and "Traceback" not in out, out[-3000:]
    assert (f"could not write the JUnit XML report {fifo}: a FIFO that nothing read within 10 s (the run fails: an "
            "output it was asked for is missing)") in out.splitlines()


def test_a_name_too_long_for_the_file_system_is_one_line_and_exit_1(tmp_path):
    code, out = _run_into(tmp_path / ("n" * 300), tmp_path)
    assert code == 1 and "Traceback" not in out, out[-3000:]
    (line,) = [line for line in out.splitlines() if line.startswith("could not write the JUnit XML report")]
    assert line.endswith(": File name too long (the run fails: an output it was asked for is missing)")


def test_a_full_disk_is_one_line_and_exit_1_and_the_old_report_stays_whole(tmp_path):
    """pytest writes its report to a file of its own beside the one asked for: on a full disk that
    one fails, and the last whole report stays as it was (pytest's plain write had left half of
    it, or its own report without the G-lines, or an empty file)."""
    with small_disk(tmp_path / "disk") as disk:
        (disk / "junit.xml").write_text("<testsuites>the last whole report</testsuites>")
        (disk / "filler").write_bytes(b"x" * (60 << 10))
        code, out = _run_into(disk / "junit.xml", tmp_path)
        kept, left = (disk / "junit.xml").read_text(), sorted(p.name for p in disk.iterdir())
    assert code == 1 and "Traceback" not in out
    (line,) = [line for line in out.splitlines() if line.startswith("could not write the JUnit XML report")]
    assert line.startswith(f"could not write the JUnit XML report {disk}/junit.xml: No space left on device")
    assert kept == "<testsuites>the last whole report</testsuites>" and left == ["filler", "junit.xml"]


def test_two_runs_writing_one_report_at_once_leave_a_whole_one_of_either(tmp_path):
    """Each run's pytest writes a file of its own; the report is replaced whole by a rename: two
    runs at once (one of them with FAILs) leave one run's whole report, never a torn or mixed one
    (pytest's plain write had: about one pair in twenty)."""
    report = tmp_path / "junit.xml"
    for _ in range(6):
        runs = [subprocess.Popen([sys.executable, "-m", "spark_gotchas", "-m", "fast", "-q", f"--spark-replay={snap}",
                                  f"--junitxml={report}"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for snap in (H200, VLLM)]
        for run in runs:
            run.wait(timeout=300)
        (suite,) = list(JUnitXml.fromfile(str(report)))
        lines = {p.name: p.value for p in suite.properties()}
        failures = sum(1 for case in suite if any(isinstance(r, Failure) for r in case.result))
        assert suite.failures == failures and (failures > 0) == lines["G6"].startswith("G6 FAIL")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]


def test_a_folder_no_file_can_be_made_in_is_one_line_once(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "junit.xml").write_text("<testsuites/>")
    with locked(folder):
        code, out = _run_into(folder / "junit.xml", tmp_path)
    assert code == 1 and "Traceback" not in out
    (line,) = [line for line in out.splitlines() if line.startswith("could not write the JUnit XML report")]
    assert line.startswith(f"could not write the JUnit XML report {folder}/junit.xml: ")
    assert line.endswith(f"(cannot create a file in {folder}) (the run fails: an output it was asked for is missing)")


def test_a_report_to_stdout_is_left_as_pytest_writes_it_and_said_so(tmp_path):
    code, out = _run_into("/dev/stdout", tmp_path)
    assert code == 0 and "<testsuites" in out and "Traceback" not in out
    assert ("JUnit XML report /dev/stdout is not a file of its own: written as pytest writes it, without the checks' "
            "lines") in out.splitlines()


def test_an_interrupted_run_has_an_error_testcase_saying_so():
    """A run cut short by Ctrl-C judged only some checks: its report must not read as green."""
    root = ET.fromstring('<testsuites><testsuite name="pytest" errors="0" tests="1">'
                         '<testcase classname="checks.test_g03" name="test_g3_page_cache"/></testsuite></testsuites>')
    junit.annotate(root, {}, [], [], "the run was interrupted (Ctrl-C) after 1 of 21 checks")
    suite = root.find("testsuite")
    (error,) = suite.iter("error")
    assert error.get("message") == "INTERRUPTED: the run was interrupted (Ctrl-C) after 1 of 21 checks"
    assert (suite.get("tests"), suite.get("errors")) == ("2", "1")
