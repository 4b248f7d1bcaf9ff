"""Strings from outside, met for real: a process whose command line forges a G-line and carries
credentials, and a snapshot whose strings do the same. Each must stay inside its own line, shown
escaped, with every credential masked, in every output: the terminal, the JSON report, the
snapshot and the Markdown summary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gline_block import glines

ROOT = Path(__file__).resolve().parents[1]
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")
SECRETS = {
    "flag": "sk-proj-Flag0123456789abcdefXYZ",
    "json": "Json0123456789abcdefSecret",
    "url": "UrlPassw0rd123456",
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWx12",
    "bearer": "BearerVal0123456789abcdef",
    "env": "EnvOnly-0123456789-Secret",
}
FORGED_NAME = "vllm\nG4 PASS: forged by a process name\x1b[2J\x1b]8;;http://evil\x07\r"
# One argument at the kernel's limit (MAX_ARG_STRLEN, 131072 bytes with its NUL): masking it took the
# preflight past 360 s on two cores while the masker was quadratic; the run's timeout ends that.
LONG_ARG = '{"rope_scaling":"' + "A" * (131071 - 19) + '"}'
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # what may never reach an output (tab and LF aside)


@pytest.fixture
def hostile_server():
    """A real process that looks like a vLLM server with credentials on its command line, a
    forged G-line in its argv[0] and one argument of 131,071 characters."""
    argv = [FORGED_NAME, "-c", "import time; time.sleep(120)", "vllm", "serve", "org/model",
            "--api-key", SECRETS["flag"], "--kv-transfer-config", f'{{"kv_connector": "x", "api_key": "{SECRETS["json"]}"}}',
            "--download-url", f"https://user:{SECRETS['url']}@models.example/x", f"--hf-token={SECRETS['hf']}",
            "--header", f"Authorization: Bearer {SECRETS['bearer']}", "--hf-overrides", LONG_ARG]
    proc = subprocess.Popen(argv, executable=sys.executable)
    time.sleep(0.3)  # its command line is in /proc once exec is done
    yield proc
    proc.kill()
    proc.wait()


def run_preflight(pytester, *args):
    return pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:randomly", str(ROOT / "tests_gotchas"),
                        "-rs", *args, timeout=240)


DOORS = ("--junitxml=junit.xml", "--spark-prometheus=spark.prom")


def outputs(pytester, result) -> dict[str, str]:
    out = {"terminal": result.stdout.str() + result.stderr.str()}
    for name in ("report.json", "snapshot.json", "summary.md", "junit.xml", "spark.prom"):
        path = pytester.path / name
        out[name] = path.read_text(encoding="utf-8") if path.exists() else ""
    return out


def assert_one_line_each_and_nothing_leaks(result, texts: dict[str, str]):
    block = [line for line in glines(result) if GLINE.match(line)]
    numbers = [int(GLINE.match(line).group(1)) for line in block]
    assert numbers == list(range(1, 11)), f"not one line per gotcha: {block}"
    assert not any(line.startswith("G4 PASS: forged") for line in block)  # quoted, escaped, never a line
    assert not [line for line in block if "the check itself failed" in line]
    for where, text in texts.items():
        for kind, secret in SECRETS.items():
            assert secret not in text, f"the {kind} secret reached the {where}"
        assert not RAW_CONTROLS.search(text), f"a raw control character reached the {where}"
    report = json.loads(texts["report.json"])
    lines = report["spark_gotchas"]["lines"]
    assert not any(line.startswith("G4 PASS: forged") for line in lines)
    assert_the_doors_hold(texts)


def assert_the_doors_hold(texts: dict[str, str]):
    """The JUnit XML parses, with one line per check and none forged; the metrics parse, with no
    series but the suite's (a label value cannot end its quotes and start a line of its own)."""
    from junitparser import JUnitXml
    from prometheus_client.parser import text_string_to_metric_families

    xml = JUnitXml.fromstring(texts["junit.xml"].encode())
    for suite in xml:
        for case in suite:
            (result,) = case.result or [None]
            shown = (result.text if result is not None else case.system_out) or ""
            assert GLINE.match(shown), (case.name, shown[:200])
            assert not [line for line in shown.splitlines() if line.startswith("G4 PASS: forged")]
    names = {s.name for family in text_string_to_metric_families(texts["spark.prom"]) for s in family.samples}
    assert names and all(name.startswith("spark_gotchas_") for name in names), names


def test_a_process_name_cannot_forge_a_line_and_its_credentials_never_leave(pytester, hostile_server, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRETS["env"])
    monkeypatch.setenv("SPARK_GOTCHAS_NOTE", f"a value that holds {SECRETS['env']}")
    result = run_preflight(pytester, "--json-report", "--json-report-file=report.json", "--spark-snapshot=snapshot.json",
                           "--spark-summary-md=summary.md", *DOORS)
    texts = outputs(pytester, result)
    assert_one_line_each_and_nothing_leaks(result, texts)
    snapshot = json.loads(texts["snapshot.json"])
    cmdlines = [p.get("cmdline") or [] for p in snapshot["readings"]["gpu.processes"]["processes"]]
    (ours,) = [c for c in cmdlines if c and c[0].startswith("vllm\nG4")]  # kept as read, masked, escaped only when shown
    assert "--api-key" in ours and ours[ours.index("--api-key") + 1] == "***"
    assert ours[ours.index("--hf-overrides") + 1] == LONG_ARG  # whole, nothing in it to mask
    assert any('"api_key": "***"' in tok for tok in ours)


def poisoned_snapshot(pytester, hostile: str) -> Path:
    """The recorded H200 snapshot with ``hostile`` appended to every string of its readings and
    platform that does not start with a digit (versions stay readable as versions)."""
    recorded = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())

    def poison(node):
        if isinstance(node, dict):
            return {k: poison(v) for k, v in node.items()}
        if isinstance(node, list):
            return [poison(v) for v in node]
        return node + hostile if isinstance(node, str) and node and not node[0].isdigit() else node

    recorded["readings"] = poison(recorded["readings"])
    recorded["platform"] = poison(recorded["platform"])
    path = pytester.path / "hostile.json"
    path.write_text(json.dumps(recorded))
    return path


def test_strings_in_a_replayed_snapshot_cannot_forge_a_line(pytester):
    path = poisoned_snapshot(pytester, "\nG4 PASS: forged by a snapshot\x1b[31m\r" + f" token={SECRETS['flag']}")
    result = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:randomly", str(ROOT / "tests_gotchas"),
                          f"--spark-replay={path}", "--json-report", "--json-report-file=report.json",
                          "--spark-summary-md=summary.md", *DOORS, timeout=240)
    texts = outputs(pytester, result)
    del texts["snapshot.json"]
    assert_one_line_each_and_nothing_leaks(result, texts)
    assert "Traceback" not in texts["terminal"]


XML_HOSTILE = ']]><testcase name="forged"/><![CDATA[ &amp; "q" \x00\ufffe\uffff"} 1\nfake_metric 1\n'


def test_markup_and_what_xml_cannot_hold_in_a_snapshot_stay_text_in_the_junit_report_and_the_labels(pytester):
    """``]]>``, tags, quotes, NUL and U+FFFE in every string of a snapshot: the JUnit report stays
    valid against junit-10.xsd with one testcase per check, the metrics file passes promtool and
    holds no series but the suite's, every label value as read (escaped)."""
    import shutil

    import xmlschema
    from door_runs import XSD

    path = poisoned_snapshot(pytester, XML_HOSTILE)
    result = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-p", "no:randomly", str(ROOT / "tests_gotchas"),
                          f"--spark-replay={path}", *DOORS, timeout=240)
    texts = outputs(pytester, result)
    assert "Traceback" not in texts["terminal"] and "could not write" not in texts["terminal"]
    xmlschema.XMLSchema(str(XSD)).validate(str(pytester.path / "junit.xml"))
    assert_the_doors_hold(texts)
    assert texts["junit.xml"].count("<testcase ") == result.parseoutcomes().get("passed", 0) + \
        result.parseoutcomes().get("skipped", 0) + result.parseoutcomes().get("failed", 0)
    assert not RAW_CONTROLS.search(texts["junit.xml"] + texts["spark.prom"])
    assert "\ufffe" not in texts["junit.xml"] and "\\ufffe" in texts["junit.xml"]
    assert 'gpu="NVIDIA H200]]><testcase name=\\"forged\\"/>' in texts["spark.prom"]
    promtool = shutil.which("promtool")
    if promtool is not None:
        check = subprocess.run([promtool, "check", "metrics"], input=texts["spark.prom"], capture_output=True,
                               text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
