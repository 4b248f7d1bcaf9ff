"""Every text transformation is linear in its input: masking, neutralising, G-line folding and the
parsers of outside text.

A 120 KB argument of a ``vllm serve`` command line once made the preflight take 240 s on two
cores (the masker's ``name: value`` pattern backtracked over every run of name characters from each
of its positions), and a 24 MB reading kept a snapshot from being written for minutes. The figures
come from ``devscripts/text_timing.py``, run in a child process so that a quadratic regression
ends at the child's timeout instead of holding the suite for hours.

Their time bound is a hang guard, not a speed target: it is set far from both sides, so only a
quadratic regression can cross it (tests/test_drain.py reads a 40,000-line report under the same
kind of bound, and the fault tests bound a wedged probe by its own timeout). At 512 Ki characters per case the linear code takes 0.001 to 0.4 s on a
loaded 2-core box (docs/benchmarks.md), the quadratic masker took 9.7 s for 20,000 characters of
one case, so minutes to hours here; every step must finish within :data:`BOUND_S`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_gotchas.base import scrub
from spark_gotchas.machine.readers import env, launch

ROOT = Path(__file__).resolve().parents[1]
CHARS = 512 * 1024
BOUND_S = 5.0  # per case and step; linear: at most 0.4 s here, quadratic: minutes to hours


def test_every_transformation_of_a_few_mb_of_adversarial_text_is_quick():
    try:
        run = subprocess.run([sys.executable, str(ROOT / "devscripts" / "text_timing.py"), "--size", str(CHARS), "--json"],
                             capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired as exc:
        done = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"not done in 180 s (quadratic?); finished before that:\n{done}")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(rows) >= 40 and sum(r["chars"] for r in rows if r["step"] == "mask") > 6_000_000
    slow = [f"{r['case']} ({r['step']}): {r['seconds']:.2f} s" for r in rows if r["seconds"] > BOUND_S]
    assert slow == [], f"over {BOUND_S} s for {CHARS} characters: {slow}"


# -- the results stay what they were ---------------------------------------------------------------------
@pytest.mark.parametrize("text, masked", [
    # a run of name characters before a key: the key's name is the whole run, from its first letter
    ("9-api_key=SeCrEt123 rest", "9-api_key=*** rest"),
    ("x.y.password: 'p4ss word' next", "x.y.password: '***' next"),
    ('note="token": "abcdef123456"', 'note="token": "***"'),
    ('token="a=b" token2=c', 'token="***" token2=***'),
    ("token=token=token=abc d", "token=*** d"),
    ('password="unclosed and more', 'password="*** and more'),  # no closing quote: the value ends at a space
    # flags: the run's first flag start, never one glued after a dot
    ("--api-key=xyz123 --model m", "--api-key=*** --model m"),
    ("--token.-x value", "--token.-x ***"),
    ("--hf-token -v", "--hf-token ***"),  # the next word is its value, whatever it starts with
    # URL userinfo, the scheme anywhere in its run
    ("git+https://user:pw123@host/x", "git+https://user:***@host/x"),
    ("-https://u:p4ssw0rd@h", "-https://u:***@h"),
    ("a://b://c:d@e", "a://b://c:***@e"),
])
def test_the_linear_masker_masks_what_the_quadratic_one_did(text, masked):
    assert scrub.mask_shapes(text) == masked


def test_a_128_kb_argument_is_masked_where_a_secret_is_and_kept_elsewhere():
    """The issue's example: one long ``--hf-overrides`` value beside a key, each masked as before."""
    big = '{"rope_scaling":{"factor":4}}' * 4500  # 126 KB
    argv = ["vllm", "serve", "org/model", "--hf-overrides", big, "--api-key", "sk-abcdefghijklmnop12345"]
    start = time.perf_counter()
    masked = scrub.mask_argv(argv)
    assert masked[4] == big and masked[-1] == "***"
    assert time.perf_counter() - start < BOUND_S


def test_a_24_mb_reading_is_recorded_whole_and_masked():
    """A snapshot's reading of 24 MB (the issue's example) is masked whole, its token too."""
    reading = {"cmdline": "a" * (24 << 20) + " hf_Q9xLmN3vB7kR2tY8wE4uZ"}
    start = time.perf_counter()
    kept = scrub.scrub(reading)["cmdline"]
    assert time.perf_counter() - start < 4 * BOUND_S  # 24 MB: about 1.4 s here
    assert kept.endswith(" ***") and len(kept) == (24 << 20) + 4


def test_a_bare_requirement_keeps_the_next_line_to_itself():
    """``Requires-Dist: foo`` without a specifier took the next requirement line as its specifier
    (``\\s*`` read past the line break), and that requirement was lost."""
    text = "Requires-Dist: foo\nRequires-Dist: bar>=1\nRequires-Dist: baz ; extra == \"x\"\nRequires-Dist: q[a] (>=2)\n"
    assert env.REQUIRES.findall(text) == [("foo", "", ""), ("bar", ">=1", ""), ("baz", "", ' extra == "x"'),
                                          ("q", "(>=2)", "")]


@pytest.mark.parametrize("token, expanded", [
    ("${A:-x}$B-${C}y", "12-${C}y"),
    ("a${A:-$B}c${", "a1c${"),
    ("${NOPE:-d}${NOPE}", "d${NOPE}"),
    ("$A${B:-q}$A}", "121}"),
    ("${a:-" * 3, "${a:-" * 3),
])
def test_a_launch_scripts_variables_expand_as_before(token, expanded):
    assert launch.expand(token, {"A": "1", "B": "2"}) == expanded
