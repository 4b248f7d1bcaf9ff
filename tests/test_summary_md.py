"""The Markdown job summary as a person reads it: problems first with fixes, then the rest."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from ci_preflight import preflight

from spark_gotchas.knowledge.verdict import Status, Verdict
from spark_gotchas.outputs.summary_md import counts, inline, render

PLATFORM = {"profile": "h200", "gpu": "NVIDIA H200", "capability": [9, 0], "driver": "580.159.04",
            "cuda_driver": "13.0", "torch": "2.11.0+cu130"}  # the H200 measured for the project


def verdicts() -> list[Verdict]:
    return [
        Verdict(1, Status.PASS, "torch 2.11.0+cu130 matches the driver's CUDA 13.0"),
        Verdict(9, Status.WARN, "bare host (no container marker)", fix="use an NGC container"),
        Verdict(3, Status.WARN, "page cache 61.2 GB; MemAvailable 58.3 GB < 2 x 40 GB",
                fix="sync; echo 3 > drop_caches"),
        Verdict(4, Status.FAIL, "SM clock 702 MHz under load (floor 1400 MHz)", fix="remove AC power for 60 s"),
        Verdict(4, Status.PASS, "no reboot since the last soak"),
        Verdict(7, Status.SKIP, "capability (9, 0) has no FP4 path"),
        Verdict(6, Status.INFO, "no other GPU process"),
        Verdict(9, Status.WARN, "since baseline: torch 2.10.0 -> 2.11.0", fix="review the change"),
    ]


def test_problems_come_first_each_with_its_fix_then_the_rest_in_g_order():
    text = render(verdicts(), PLATFORM)
    lines = text.splitlines()
    assert lines[0] == "## ❌ spark-gotchas: FAIL"
    attention = lines[lines.index("### Needs attention") + 2:lines.index("### Other gotchas") - 1]
    assert attention == [
        "- ❌ **G4 FAIL** (thermal throttling): SM clock 702 MHz under load (floor 1400 MHz)",
        "    - **fix:** remove AC power for 60 s",
        "- ⚠️ **G3 WARN** (unified-memory OOM below 128 GB): page cache 61.2 GB; MemAvailable 58.3 GB &lt; 2 x 40 GB",
        "    - **fix:** sync; echo 3 &gt; drop\\_caches",
        "- ⚠️ **G9 WARN** (container first, not bare pip): bare host (no container marker)",
        "    - **fix:** use an NGC container",
        "- ⚠️ **G9 WARN** (container first, not bare pip): since baseline: torch 2.10.0 -&gt; 2.11.0",
        "    - **fix:** review the change",
    ]
    rows = [x for x in lines if x.startswith("| ") and "**G" in x]
    assert [re.search(r"\*\*(G\d+) ", r).group(1) for r in rows] == ["G1", "G6", "G7"]
    assert "| ⏭️ | **G7 SKIP**<br>NVFP4 slower than FP8 on SM121 | capability (9, 0) has no FP4 path |" in rows


def test_counts_platform_and_every_check():
    text = render(verdicts(), PLATFORM)
    assert counts(verdicts()) == {"FAIL": 1, "WARN": 2, "PASS": 1, "INFO": 1, "SKIP": 1}
    assert "**1** FAIL · **2** WARN · **1** PASS · **1** INFO · **1** SKIP — 6 gotchas, 8 checks" in text
    assert "Platform: `NVIDIA H200 (cc 9.0), driver 580.159.04 / CUDA 13.0, torch 2.11.0+cu130, profile h200`" in text
    block = text[text.index("```text"):text.index("```\n\n</details>")]
    assert block.count("\nG") == 8 and "\nG4 PASS: no reboot since the last soak" in block
    assert "    fix: remove AC power for 60 s" in block


def test_artifacts_and_replay_are_named():
    text = render(verdicts()[:1], PLATFORM, artifacts={"soak_png": "reports/soak/soak.png",
                                                       "soak_csv": "reports/soak/soak.csv"},
                  replayed_from="night1.json")
    assert "Platform: `replayed night1.json: NVIDIA H200" in text
    files = text[text.index("### Files this run produced"):].splitlines()[2:4]
    assert files == ["- soak\\_csv: `reports/soak/soak.csv`", "- soak\\_png: `reports/soak/soak.png`"]
    assert "### Files" not in render(verdicts()[:1], PLATFORM)


def test_a_pass_run_has_no_attention_section_and_an_empty_run_says_so():
    text = render([Verdict(1, Status.PASS, "fine"), Verdict(2, Status.INFO, "noted")], PLATFORM)
    assert text.startswith("## ✅ spark-gotchas: PASS") and "Needs attention" not in text and "### Gotchas" in text
    empty = render([], {"profile": "none", "nvml_error": "NVML library not found"})
    assert empty.startswith("## spark-gotchas: no verdict") and "No gotcha check reported a verdict." in empty


def test_text_from_the_machine_cannot_break_the_markdown():
    odd = Verdict(5, Status.WARN, "a|b <script>alert(1)</script> *bold* [link](x) ```", fix="x | y\nz")
    text = render([odd, Verdict(6, Status.PASS, "c|d")], PLATFORM)
    outside = text[:text.index("```text")]  # inside the code fence text is shown as it is
    assert "<script>" not in outside and "&lt;script&gt;" in outside
    assert "| ✅ | **G6 PASS**<br>unified-memory contention | c\\|d |" in text
    assert "- **fix:** x \\| y\\\\x0az" in text  # the newline shown escaped, as in the G-line
    assert text.count("```") == 2  # the fence is never closed early
    assert inline("a_b*c") == "a\\_b\\*c"


def _html(text: str) -> str:
    markdown = pytest.importorskip("markdown", reason="markdown is in the test extra: pip install -e .[test]")
    return markdown.markdown(text, extensions=["tables", "fenced_code", "md_in_html"])


def test_it_renders_as_html_a_person_can_read():
    html = _html(render(verdicts(), PLATFORM, artifacts={"soak_csv": "reports/soak.csv"}))
    assert html.count("<table>") == 1
    body = html[html.index("<tbody>"):html.index("</tbody>")]
    assert body.count("<tr>") == 3 and body.count("<td>") == 9  # 3 gotchas x 3 columns, none split
    assert "<li>❌ <strong>G4 FAIL</strong> (thermal throttling): SM clock 702 MHz" in html
    assert "<strong>fix:</strong> sync; echo 3 &gt; drop_caches" in html  # escapes render as the text
    assert "<details><summary>Every check (8)</summary>" in html.replace("\n", "")
    assert "<script" not in _html(render([Verdict(5, Status.FAIL, "<script>x</script>", fix="f")], PLATFORM))


def test_the_workflow_preflight_summary_of_this_machine():
    run = preflight()
    text = run.summary.read_text()
    report = json.loads(run.report.read_text())["spark_gotchas"]
    for gid, entry in report["gotchas"].items():
        assert f"**{gid} {entry['status']}**" in text
        if entry["status"] in ("FAIL", "WARN"):
            assert inline(entry["fix"]) in text
    assert report["platform"]["profile"] in text.split("Platform: ", 1)[1].splitlines()[0]
    html = _html(text)
    quiet = [g for g in report["gotchas"].values() if g["status"] not in ("FAIL", "WARN")]
    assert html.count("<tr>") == len(quiet) + 1  # header + one row per gotcha without a problem


CHECK = textwrap.dedent("""
    import pytest
    from spark_gotchas.knowledge.verdict import Status, Verdict
    pytestmark = pytest.mark.fast

    def test_soak_like(spark, tmp_path):
        path = tmp_path / "soak.csv"
        path.write_text("t_s,power_w\\n0,87\\n")
        spark.add_artifact("soak_csv", str(path))
        spark.report(Verdict(4, Status.WARN, "power flat at 99 W while temperature rose", fix="improve cooling"))
""")


def test_the_option_appends_one_block_per_run(pytester):
    pytester.makepyfile(test_g04_md_summary_case=CHECK)
    snap = pytester.path / "empty.json"
    snap.write_text(json.dumps({"format": "spark-gotchas-snapshot", "version": 1, "readings": {}}))
    for _ in range(2):
        result = pytester.runpytest(f"--spark-replay={snap}", "--spark-summary-md=summary.md", "-p", "no:cacheprovider",
                                    "-p", "no:hypothesispytest", "-p", "no:asyncio", "-p", "no:benchmark")
        outcomes = result.parseoutcomes()  # other warnings of this process may join the GotchaWarning
        assert outcomes.get("passed") == 1 and not outcomes.get("failed") and outcomes.get("warnings", 0) >= 1
    text = (pytester.path / "summary.md").read_text()
    assert text.count("## ⚠️ spark-gotchas: WARN") == 2
    assert "- ⚠️ **G4 WARN** (thermal throttling): power flat at 99 W while temperature rose" in text
    assert "    - **fix:** improve cooling" in text
    assert "- soak\\_csv: `" in text and "soak.csv`" in text
    assert "replayed " in text and "empty.json" in text
