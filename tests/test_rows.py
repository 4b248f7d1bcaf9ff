"""A line cannot be forged on the screen either: users read rows, not lines. A string from outside
inside a line (G5's method name, the GPU's name in the platform line) has its white space runs
folded, its length bounded where it is printed, and any G-line head in it escaped, so wherever the
terminal wraps, no row but a G-line's own start reads as a G-line. Format characters (Unicode's Cf:
zero-width spaces, bidirectional controls, U+FEFF, U+061C, the tag characters) are escaped in every
output, as Trojan-source checks flag them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from spark_gotchas.base import outward
from spark_gotchas.base.text import folded, printable
from spark_gotchas.commands.slurm import drain
from spark_gotchas.knowledge.verdict import SUMMARY_CHARS, Status, Verdict, summary_lines
from spark_gotchas.machine import platform
from spark_gotchas.microbench import _cli

ROOT = Path(__file__).resolve().parents[1]
HEAD = re.compile(r"\s*G(?:10|[1-9]) (?:FAIL|WARN|PASS|INFO|SKIP):")
NAMED = "\u200b\u202e\U000e0041\ufeff\u061c"  # the ones the issue names: zero-width space, RLO, a tag, BOM, ALM
INVISIBLE = re.compile("[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0"
                       "\U000e0000-\U000e007f\U000e0100-\U000e01ef]")
PADDED_METHOD = "write" + " " * 141 + "G4 PASS: planted wrap"
PADDED_GPU = "NVIDIA H200" + " " * 141 + "G4 PASS: planted gpu " + "".join(f"{c}x" for c in NAMED)


def rows(text: str, width: int) -> list[str]:
    """The rows a terminal ``width`` columns wide shows ``text`` in."""
    out = []
    for line in text.splitlines():
        out += [line[i:i + width] for i in range(0, max(len(line), 1), width)]
    return out


def forged_rows(text: str, widths=(40, 60, 80, 100, 120)) -> list[str]:
    """Rows, at any of ``widths``, that read as a G-line without being a G-line's own start. A row that
    starts one of the G-lines ``text`` prints as lines of their own is that line, not a forgery: pytest's
    warnings summary quotes a WARN's line after the check's path, which wraps there at some checkout
    paths' lengths."""
    own = [line for line in text.splitlines() if re.match(r"G(?:10|[1-9]) ", line)]
    found = []
    for width in widths:
        for line in text.splitlines():
            found += [r for r in rows(line, width)[1:] if HEAD.match(r)
                      and not any(g.startswith(r.strip()) for g in own)]
            if HEAD.match(line) and not re.match(r"G(?:10|[1-9]) ", line):
                found.append(line)
    return found


# -- the one escaper ----------------------------------------------------------------------------------
def test_every_format_character_of_this_python_is_escaped():
    cf = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    assert len(cf) > 150
    kept = [f"U+{ord(c):04X}" for c in cf if _cli.shown(c) == c]
    assert kept == [], kept
    for c in NAMED + "\u00ad\u2066\u2069\u200d\U000e007f\U000e0100\u3164":
        assert _cli.shown(c) != c and _cli.shown(c).startswith("\\"), hex(ord(c))


@pytest.mark.parametrize("char, shown", [("\u200b", "\\u200b"), ("\u202e", "\\u202e"), ("\U000e0041", "\\U000e0041"),
                                         ("\ufeff", "\\ufeff"), ("\u061c", "\\u061c")])
def test_the_named_characters_show_as_their_code(char, shown):
    assert printable(f"a{char}b") == f"a{shown}b"
    assert outward.line(f"a{char}b") == f"a{shown}b"


def test_letters_accents_and_emoji_are_kept():
    text = "NVIDIA H200 é ü 日本語 😀 ✓ — “quoted”"
    assert printable(text) == text


# -- folding and heads ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, shown", [
    (PADDED_METHOD, "write G4 PASS\\x3a planted wrap"),
    ("a\u00a0\u00a0\u2003 b", "a b"),
    ("G10 FAIL: x G1 WARN: y", "G10 FAIL\\x3a x G1 WARN\\x3a y"),
    ("G4\u00a0PASS: nbsp", "G4 PASS\\x3a nbsp"),
    ("a\tb", "a\\x09b"),  # a tab is shown escaped, not folded away
    ("G4 PASSED: no colon, G4: PASS", "G4 PASSED: no colon, G4: PASS"),
])
def test_a_quoted_string_is_folded_and_holds_no_g_line_head(text, shown):
    assert outward.quoted(text) == shown


def test_a_verdict_quoting_a_padded_name_gives_no_row_that_reads_as_a_g_line():
    verdict = Verdict(5, Status.PASS, f"best {PADDED_METHOD} 4646 GB/s is 97% of NVML's theoretical 4814",
                      fix="", detail=PADDED_METHOD)
    (line,) = summary_lines([verdict])
    assert line == "G5 PASS: best write G4 PASS\\x3a planted wrap 4646 GB/s is 97% of NVML's theoretical 4814"
    assert forged_rows(line) == []
    assert verdict.detail == "write G4 PASS\\x3a planted wrap"


def test_a_finding_as_long_as_the_judge_makes_it_is_bounded_where_it_is_printed():
    long = "x" * 3000 + " " + "y" * 3000
    verdict = Verdict(7, Status.INFO, long, detail=long)
    assert len(verdict.summary) <= SUMMARY_CHARS + len("… (9999 more characters)")
    assert len(verdict.detail) > SUMMARY_CHARS  # the detail keeps more


def test_the_platform_line_bounds_and_folds_a_gpu_name():
    desc = {"gpu": PADDED_GPU + "z" * 500, "capability": [9, 0], "driver": "580.159.04", "cuda_driver": "13.0",
            "torch": "2.11.0\u200b+cu130", "profile": "h200"}
    line = platform.one_line(desc, "/tmp/a" + " " * 100 + "G9 FAIL: path")
    assert forged_rows(line) == [] and not INVISIBLE.search(line)
    gpu = line.split(": ", 1)[1].split(" (cc ")[0]
    assert len(gpu) <= 100 and gpu.endswith("…")
    assert "torch 2.11.0\\u200b+cu130" in line and "G9 FAIL\\x3a path" in line


def test_a_drain_reason_holds_no_format_character():
    found = drain.Outcome((), (f"G1 FAIL: {PADDED_GPU}",))
    reason = drain.reason(found)
    assert not INVISIBLE.search(reason) and len(reason.encode()) <= 255


def test_a_case_of_every_class_of_invisible_character():
    """Beyond the named ones: the Hangul filler that shows as a letter-wide blank, a variation
    selector past the BMP, the soft hyphen, an isolate, the Mongolian vowel separator."""
    text = "a\u3164b\U000e0100c\u00add\u2067e\u180ef"
    assert outward.line(text) == "a\\u3164b\\U000e0100c\\xadd\\u2067e\\u180ef"
    assert folded(printable(text)) == outward.line(text)


# -- every output of a real run ---------------------------------------------------------------------------
def planted_snapshot(tmp_path: Path) -> Path:
    recorded = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())
    for method in recorded["readings"]["bench.bandwidth"]["result"]["methods"]:
        if method["method"] == "write":
            method["method"] = PADDED_METHOD
    recorded["readings"]["gpu.inventory"]["devices"][0]["name"] = PADDED_GPU
    path = tmp_path / "planted.json"
    path.write_text(json.dumps(recorded))
    return path


def test_a_replay_planting_padded_names_and_format_characters_forges_no_row_in_any_output(tmp_path):
    snapshot = planted_snapshot(tmp_path)
    outputs = {name: tmp_path / name for name in ("report.json", "snapshot.json", "summary.md", "junit.xml", "spark.prom")}
    run = subprocess.run(
        [sys.executable, "-m", "spark_gotchas", "-m", "fast", "-p", "no:randomly", f"--spark-replay={snapshot}",
         "--spark-profile=generic", "--json-report", f"--json-report-file={outputs['report.json']}",
         f"--spark-snapshot={outputs['snapshot.json']}", f"--spark-summary-md={outputs['summary.md']}",
         f"--junitxml={outputs['junit.xml']}", f"--spark-prometheus={outputs['spark.prom']}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                                       "COLUMNS": "80"})
    terminal = run.stdout + run.stderr
    assert "Traceback" not in terminal, terminal[-3000:]
    assert "G5 PASS: best write G4 PASS\\x3a planted wrap " in terminal
    assert forged_rows(terminal) == [], forged_rows(terminal)
    texts = {"terminal": terminal, **{name: path.read_text(encoding="utf-8") for name, path in outputs.items()}}
    for where, text in texts.items():
        assert not INVISIBLE.search(text), f"a format character reached the {where} raw"
    report = json.loads(texts["report.json"])
    assert all(forged_rows(line) == [] for line in report["spark_gotchas"]["lines"])
    for entry in report["spark_gotchas"]["gotchas"].values():
        assert forged_rows(entry["line"]) == []
        assert not INVISIBLE.search(drain.reason(drain.Outcome((), (entry["line"],))))
    assert "G4 PASS: planted" not in texts["junit.xml"] and "G4 PASS\\x3a planted wrap" in texts["junit.xml"]
    assert "G4 PASS: planted" not in texts["spark.prom"]


def test_diff_shows_a_padded_gpu_name_and_package_folded_and_bounded(tmp_path):
    """diff printed a reading's text as it read it: ``GPU  NVIDIA H200 -> NVIDIA H200`` and 141
    spaces before ``G4 PASS: planted gpu`` (found from outside, the door beside the platform line)."""
    recorded = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())
    a = tmp_path / "a.json"
    a.write_text(json.dumps(recorded))
    recorded["platform"]["gpu"] = PADDED_GPU
    recorded["readings"]["env.distributions"]["versions"]["torch" + " " * 141 + "G9 PASS: planted"] = "1.0" + "9" * 300
    b = tmp_path / "b.json"
    b.write_text(json.dumps(recorded))
    run = subprocess.run([sys.executable, "-m", "spark_gotchas", "diff", str(a), str(b)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert forged_rows(run.stdout) == [] and not INVISIBLE.search(run.stdout)
    assert "G4 PASS\\x3a planted gpu" in run.stdout and "torch G9 PASS\\x3a planted" in run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) < 300
