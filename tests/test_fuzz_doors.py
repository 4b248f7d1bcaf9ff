"""Generated hostile strings planted in every string field of a real snapshot and a real JSON
report, then every command run on them: ``diff`` (text and ``--json``), ``fleet`` (text,
``--json``, ``--summary-md``), ``check-report``, and a replay (``pytest -m fast --spark-replay -v``
with a JSON report, a snapshot and a Markdown summary). Nothing they print or write may hold a raw
control character, a planted line on a line of its own, a planted credential or a traceback
(:func:`hostile.problems`).

The snapshot is the recorded H200 run (tests/fixtures/h200/preflight-snapshot.json, 449 strings);
the report is the workflow's preflight of this machine (:func:`ci_preflight.preflight`). Every
string value is planted (and the names of the installed distributions, dictionary keys that come
from package metadata): the piece is appended or put in front after a separator, or replaces the
value.

Examples are few, for the suite's time on two cores: the commands run in this process, about
0.5 s an example, for :data:`EXAMPLES` (20) examples; the replay is a pytest child of several
seconds, for :data:`REPLAYS` (3). ``SPARK_GOTCHAS_FUZZ_EXAMPLES`` (as in test_fuzz.py) scales both.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import os
import random
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is a test dependency (pip install -e '.[test]')")
from ci_preflight import preflight  # noqa: E402
from hostile import FORGED, PIECES, problems  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spark_gotchas.commands import diff, fleet, report_check  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())
SCALE = int(os.environ.get("SPARK_GOTCHAS_FUZZ_EXAMPLES", "200")) / 200
EXAMPLES = max(1, round(20 * SCALE))
REPLAYS = max(1, round(3 * SCALE))
SEPARATORS = (" ", "\t", ", ", "(", "'", '"', ": ", "\n")  # a credential is a word of its own (hf_… glued to a
# letter or digit is no token's shape)
KEEP = {"format", "status"}  # what makes the file a snapshot, an entry a verdict: planted, each is refused in one line
DOORS = settings(deadline=None, database=None, derandomize=not os.environ.get("SPARK_GOTCHAS_FUZZ_RANDOM"),
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                        HealthCheck.data_too_large])

# A piece: one of the known hostile strings, or generated text with them inside.
PIECE = st.one_of(st.sampled_from(PIECES),
                  st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), min_size=1, max_size=4).map("".join))


def plant(doc, pieces: list[str], rnd) -> object:
    """A copy of ``doc`` with a piece in every string value (and in every distribution's name)."""
    def at(value: str) -> str:
        piece, sep = rnd.choice(pieces), rnd.choice(SEPARATORS)
        return rnd.choice((value + sep + piece, piece + sep + value, piece))

    def walk(node, key=None):
        if isinstance(node, str):
            return node if key in KEEP else at(node)
        if isinstance(node, dict):
            names_are_data = key == "versions"  # env.distributions: package names from their metadata
            return {(at(k) if names_are_data else k): walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, key) for v in node]
        return node

    return walk(copy.deepcopy(doc))


def run(main, argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own exit
            code = exc.code
    return code, out.getvalue() + err.getvalue()


@functools.cache
def real_report() -> dict:
    return json.loads(preflight().report.read_text(encoding="utf-8"))


@settings(DOORS, max_examples=EXAMPLES)
@given(st.lists(PIECE, min_size=1, max_size=6), st.integers(0, 2**32))
def test_every_command_on_planted_documents(tmp_path_factory, pieces, seed):
    rnd = random.Random(seed)
    where = tmp_path_factory.mktemp("doors")
    snap, rep = where / "snapshot.json", where / "report.json"
    snap.write_text(json.dumps(plant(SNAPSHOT, pieces, rnd)))
    rep.write_text(json.dumps(plant(real_report(), pieces, rnd)))
    summary = where / "fleet.md"
    seen = {}
    for name, main, argv, codes in (
            ("diff", diff.main, [snap, rep], (0, 1)),
            ("diff --json", diff.main, [rep, snap, "--json"], (0, 1)),
            ("fleet", fleet.main, [snap, rep, "--name-by", "file"], (0, 1)),
            ("fleet --json", fleet.main, [snap, rep, "--json"], (0, 1)),
            ("fleet --summary-md", fleet.main, [rep, snap, "--summary-md", summary], (0, 1)),
            ("check-report", report_check.main, [rep], (0, 1))):
        code, seen[name] = run(main, argv)
        assert code in codes, f"{name} exited {code}: {seen[name][-2000:]}"
        if name.endswith("--json"):
            seen[f"{name}'s values"] = json.dumps(json.loads(seen[name]), ensure_ascii=False)
    seen["fleet's Markdown"] = summary.read_text(encoding="utf-8")
    found = [p for where_, text in seen.items() for p in problems(text, where_)]
    assert found == [], f"{found[:4]} with pieces {pieces!r}, seed {seed}"


@settings(DOORS, max_examples=REPLAYS)
@given(st.lists(PIECE, min_size=1, max_size=6), st.integers(0, 2**32))
def test_a_replay_of_a_planted_snapshot(pytester, pieces, seed):
    rnd = random.Random(seed)
    planted = pytester.path / "planted.json"
    planted.write_text(json.dumps(plant(SNAPSHOT, pieces, rnd)))
    for name in ("report.json", "again.json", "summary.md"):
        (pytester.path / name).unlink(missing_ok=True)
    result = pytester.run(sys.executable, "-m", "pytest", "-m", "fast", "-v", "-p", "no:randomly",
                          str(ROOT / "tests_gotchas"), f"--spark-replay={planted}", "--json-report",
                          "--json-report-file=report.json", "--spark-snapshot=again.json", "--spark-summary-md=summary.md",
                          timeout=240)
    seen = {"the terminal": result.stdout.str() + result.stderr.str()}
    for name in ("report.json", "again.json", "summary.md"):  # the JSON files keep strings as read, masked
        path = pytester.path / name
        seen[name] = path.read_text(encoding="utf-8") if path.exists() else ""
    found = [p for where, text in seen.items() for p in problems(text, where)]
    assert found == [], f"{found[:4]} with pieces {pieces!r}, seed {seed}"
    assert "the check itself failed" not in seen["the terminal"], seen["the terminal"][-3000:]
    assert not [line for line in seen["the terminal"].splitlines() if line.startswith(FORGED)]
