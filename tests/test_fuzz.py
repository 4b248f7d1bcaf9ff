"""Generated inputs against the parts that meet the outside: G-line formatting, credential
masking, snapshot loading, launch-config parsing, and replayed readings judged by the real checks.

The rule each property states: no traceback, one line per verdict, no raw control character
shown, no credential that survives masking. ``SPARK_GOTCHAS_FUZZ_EXAMPLES`` sets the examples per
property (default 200, enough for CI; e.g. 5000 for a deeper run); ``SPARK_GOTCHAS_FUZZ_RANDOM=1`` draws new
examples each run instead of the same ones.
"""

from __future__ import annotations

import json
import os
import re
import string
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is a test dependency (pip install -e '.[test]')")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spark_gotchas.base import scrub  # noqa: E402
from spark_gotchas.base.text import printable  # noqa: E402
from spark_gotchas.knowledge.readings.launch import LaunchFile  # noqa: E402
from spark_gotchas.knowledge.verdict import Status, Verdict, summary_lines  # noqa: E402
from spark_gotchas.machine.readers import launch  # noqa: E402
from spark_gotchas.machine.snapshot import SnapshotError  # noqa: E402
from spark_gotchas.machine.snapshot import load as load_snapshot  # noqa: E402

EXAMPLES = int(os.environ.get("SPARK_GOTCHAS_FUZZ_EXAMPLES", "200"))
# The same examples on every machine and every run: derandomized (drawn from each test's own code)
# and no example database (a machine's .hypothesis folder would replay what it once found there and
# nowhere else). A property that fails on drawn examples keeps the one that found it as an
# @example. SPARK_GOTCHAS_FUZZ_RANDOM=1 explores new examples, and prints each failure's blob.
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not os.environ.get("SPARK_GOTCHAS_FUZZ_RANDOM"),
                print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])
RAW_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

# Text from outside: any characters, with controls, escapes, Markdown and HTML well represented.
HOSTILE = st.sampled_from(["\n", "\r", "\x1b[2J", "\x1b]8;;http://x\x07", "\x07", "\x00", "\x85", "\u2028", "\u202e",
                           "\udcff", "|", "</details>", "<script>", "```", "G4 PASS: forged", "\t", "\\x1b"])
TEXT = st.lists(st.one_of(st.text(max_size=12), HOSTILE), max_size=12).map("".join)


# -- credentials ---------------------------------------------------------------------------------
ALNUM = string.ascii_letters + string.digits
BODY = st.text(alphabet=ALNUM, min_size=24, max_size=40)
SEP = st.sampled_from([" ", "\n", "\t", ", ", "; ", "(", ")", "'", '"', "\x1b", "|", "&", "=", ": "])
FILLER = st.text(alphabet=string.ascii_letters + " .,:/()-", max_size=20)


@st.composite
def secret_in_shape(draw) -> tuple[str, str]:
    """(a text that carries a credential in one of the shapes the masker knows, the credential)."""
    body = draw(BODY)
    shape = draw(st.sampled_from([
        "ghp_{b}", "github_pat_{b}", "hf_{b}", "sk-{b}", "sk-proj-{b}", "xoxb-{b}", "glpat-{b}",
        "https://user:{b}@host.example/x", "https://{b}@github.com/o/r", "postgres://app:{b}@db:5432/x",
        "--api-key {b}", "--api-key={b}", "--hf-token {b}", "--hf_token={b}", "--password '{b}'", "--db-password=\"{b}\"",
        "api_key={b}", "HF_TOKEN={b}", "password: {b}", '{{"api_key": "{b}"}}', "{{'client_secret': '{b}'}}",
        '"token":"{b}"', "Authorization: Bearer {b}", "Authorization: token {b}", "Bearer {b}", "basic {b}",
        "AKIA{u}",
        # a quote never closed: a command line or a log line cut short
        'password="{b}', "api_key: '{b}", '--api-key "{b}', '{{"client_secret": "{b}',
        # gitleaks' families, a value led by a dash, a client's password, spaces no one sees, a PEM key
        "sk_live_{b}", "npm_{b}{b}", "AIza{b}{b}", "pypi-AgEIcHlwaS5vcmc{b}{b}{b}", "eyJ{b}.eyJ{b}.{b}",
        "--api-key -{b}", "--password --{b}", "mysql -u root -p{b} db", "curl -u user:{b} https://x.example/",
        "redis-cli -h h -a {b} ping", "sshpass -p {b} ssh host", "password=\u00a0{b}", "api_key\u200b: {b}",
        "next=%2F%3Fpassword%3D{b}", "-----BEGIN RSA PRIVATE KEY-----\n{b}\n{b}\n-----END RSA PRIVATE KEY-----",
    ]))
    secret = body if "{u}" not in shape else "".join(c for c in body.upper() if c.isalnum())[:16].ljust(16, "A")
    text = shape.format(b=body, u=secret)
    return draw(FILLER) + draw(SEP) + text + draw(SEP) + draw(FILLER), secret


# What the drawn examples found, kept: a secret-named flag's value that starts with '-' (kept in the
# snapshot and the JSON report before the masker took the next argument whatever it starts with),
# an AWS key ID after a lone ESC (``ESC A`` reads as an escape sequence that took the key's 'A'), a
# mysql -p after a line break shown escaped (\x0a), and repr's \' before a quote never closed.
FOUND = [("vllm serve org/model --api-key -PlantedKey0123456789abcdef --port 8000", "PlantedKey0123456789abcdef"),
         ("--password --Pw2abcdefghijklmnopqrstuvwx --model m", "Pw2abcdefghijklmnopqrstuvwx"),
         ('--api-key "-QzX9v8LmN3bR7tY2wE4uK6pA"', "QzX9v8LmN3bR7tY2wE4uK6pA"),
         ("\x1bAKIA0000000000000000 ", "0000000000000000"),
         # a client's password after an escaped line break; a repr'd quote never closed (\' then ")
         ("\nmysql -u root -p000000000000000000000000 db ", "000000000000000000000000"),
         (" api_key: '000000000000000000000000\"", "000000000000000000000000")]


def found(test):
    """``test`` with each of :data:`FOUND` as an explicit example, tried before any drawn one."""
    for case in reversed(FOUND):
        test = example(case)(test)
    return test


@FUZZ
@given(secret_in_shape())
@found
def test_no_credential_survives_masking(case):
    text, secret = case
    assert secret not in scrub.mask_text(text), text


@FUZZ
@given(secret_in_shape())
@found
def test_no_credential_survives_masking_after_its_text_was_escaped(case):
    """Text escaped first (``\\x0a`` for a line break, ``repr``'s ``\\n``) and masked after: a
    credential glued to an escaped control character is still masked."""
    text, secret = case
    assert secret not in scrub.mask_text(printable(text, limit=0)), printable(text, limit=0)
    assert secret not in scrub.mask_text(repr(text)), repr(text)


@FUZZ
@given(secret_in_shape(), TEXT)
@example(FOUND[0], "")
@example(FOUND[1], "x\n")
@example(FOUND[3], "")
def test_no_credential_reaches_a_g_line(case, noise):
    text, secret = case
    verdict = Verdict(6, Status.WARN, noise + " " + text, fix=text + noise)
    assert not any(secret in line for line in summary_lines([verdict]))
    assert secret not in json.dumps(scrub.scrub(verdict.to_json()))


@FUZZ
@given(st.lists(st.one_of(TEXT, st.sampled_from(["--api-key", "--token", "--tokenizer", "-p", "--password"])), max_size=8),
       st.one_of(BODY, BODY.map(lambda b: "-" + b), BODY.map(lambda b: "--" + b)), st.integers(0, 8),
       st.sampled_from(["separate", "joined", "json", "url"]))
@example(["vllm", "serve", "m"], "-PlantedKey0123456789abcdef", 3, "separate")
@example(["--password"], "--Pw2abcdefghijklmnopqrstuvwx", 1, "separate")
@example(["-p"], "-Xq8vLmN3bR7tY2wE4uK6pAzz", 0, "separate")
def test_a_command_line_keeps_no_credential(argv, secret, at, form):
    """A secret flag's value is masked whatever it starts with ('-', '--'), wherever it stands."""
    at = min(at, len(argv))
    inserted = {"separate": ["--api-key", secret], "joined": [f"--hf-token={secret}"],
                "json": ["--kv-transfer-config", json.dumps({"kv_connector": "x", "api_key": secret})],
                "url": [f"https://u:{secret}@h.example/"]}[form]
    masked = scrub.mask_argv(argv[:at] + inserted + argv[at:])
    assert not any(secret in tok for tok in masked)
    assert len(masked) == len(argv) + len(inserted)


# -- G-lines ---------------------------------------------------------------------------------------
@FUZZ
@given(st.integers(1, 10), st.sampled_from(list(Status)), TEXT, TEXT)
def test_every_verdict_is_one_line_of_plain_characters(gotcha, status, summary, fix):
    verdict = Verdict(gotcha, status, summary, fix=fix if fix.strip() or not status.needs_fix else "a fix")
    lines = summary_lines([verdict])
    assert lines[0].startswith(f"G{gotcha} {status.value}: ")
    assert len(lines) == (2 if status.needs_fix else 1)
    for line in lines:
        assert not RAW_CONTROL.search(line), repr(line)
        line.encode("utf-8")  # a terminal can be given it: no lone surrogate left


# -- snapshots -------------------------------------------------------------------------------------
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT)
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(TEXT, inner, max_size=4)), max_leaves=20)


@FUZZ
@given(st.one_of(st.binary(max_size=200), JSON_VALUE.map(lambda v: json.dumps(v).encode()),
                 st.dictionaries(st.sampled_from(["format", "version", "readings", "options", "platform", "verdicts"]),
                                 JSON_VALUE).map(lambda d: json.dumps({**d, "format": "spark-gotchas-snapshot"}).encode()),
                 st.integers(1, 200_000).map(lambda n: b"[" * n)))
def test_a_snapshot_file_loads_or_is_refused_in_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("snap") / "s.json"
    path.write_bytes(data)
    try:
        load_snapshot(path)
    except SnapshotError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)


# -- launch configs --------------------------------------------------------------------------------
@st.composite
def yaml_with_aliases(draw) -> str:
    """A YAML mapping whose values nest anchors and aliases, some of them exploding when walked."""
    depth = draw(st.integers(1, 12))
    width = draw(st.integers(1, 9))
    lines = ["a0: &a0 [" + ", ".join(draw(st.lists(st.sampled_from(["1", "x", "tp", "'\\e'"]), min_size=1, max_size=3))) + "]"]
    for i in range(1, depth):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    lines.append(draw(st.sampled_from(["tensor_parallel_size: 2", "num_processes: 2", "tp: *a0", ""])))
    return "\n".join(lines) + "\n"


@FUZZ
@given(st.one_of(
    yaml_with_aliases().map(lambda t: ("c.yaml", t)),
    JSON_VALUE.map(lambda v: ("c.json", json.dumps({"tensor_parallel_size": 2, "x": v}))),
    st.integers(1, 150_000).map(lambda n: ("deep.json", "[" * n + "]" * n)),
    st.integers(1, 150_000).map(lambda n: ("deep.yaml", "a: " + "[" * n + "]" * n)),
    TEXT.map(lambda t: ("launch.sh", "torchrun --nproc-per-node 2 " + t)),
    TEXT.map(lambda t: ("c.yaml", t)),
))
def test_a_launch_config_is_reviewed_or_refused_in_one_line(tmp_path_factory, case):
    name, text = case
    path = tmp_path_factory.mktemp("launch") / name
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    parsed, named = launch.parse_file(str(path))
    assert isinstance(parsed, LaunchFile)
    assert isinstance(named, list)
    if parsed.error:
        assert "\n" not in Verdict(10, Status.FAIL, parsed.error, fix="x").line  # an error is a line of its own


def test_the_fuzz_examples_come_from_the_environment():
    assert EXAMPLES >= 1
    assert Path(__file__).name == "test_fuzz.py"


# -- replayed readings judged by the real checks ------------------------------------------------------
RECORDED = json.loads((Path(__file__).parent / "fixtures" / "h200" / "preflight-snapshot.json").read_text())


class ReplaySpark:
    """The ``spark`` fixture's surface over a replay provider, recording verdicts instead of acting."""

    def __init__(self, snapshot, profile: str = "auto"):
        from spark_gotchas.machine import platform
        from spark_gotchas.machine.options import RunOptions
        from spark_gotchas.machine.provider import Provider

        self.options = RunOptions(spark_profile=profile)
        self.provider = Provider(self.options, snapshot)
        self.profile = platform.profile(self.provider, profile)
        self.plan = self.options.plan
        self.here = platform.machine(self.provider, profile)
        self.live = False
        self.verdicts: list[Verdict] = []

    def read(self, key):
        return self.provider.read(key)

    def try_read(self, key):
        return self.provider.try_read(key)

    def say(self, text):
        pass

    def add_artifact(self, name, path):
        pass

    def report(self, verdict):
        self.verdicts.append(verdict)
        return verdict


def _checks():
    import importlib
    import inspect
    import sys

    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    found = []
    for path in sorted((root / "tests_gotchas").glob("test_g*.py")):
        module = importlib.import_module(f"tests_gotchas.{path.stem}")
        found += [f for name, f in inspect.getmembers(module, inspect.isfunction) if name.startswith("test_g")]
    return found


CHECKS = _checks()


@st.composite
def mutated_readings(draw) -> dict:
    """The recorded H200 readings with a few values anywhere inside them replaced."""
    import copy

    readings = copy.deepcopy(RECORDED["readings"])
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(sorted(readings)))
        node, parent, slot = readings[key], readings, key
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            slot = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
            parent, node = node, node[slot]
        parent[slot] = draw(JSON_VALUE | st.sampled_from([-1, 0, 1e308, -1e308, "", [], {}, "12.1", True]))
    return readings


@FUZZ
@given(mutated_readings(), st.sampled_from(["auto", "gb10", "h200", "generic"]))
def test_a_replayed_snapshot_gives_one_line_per_check_and_no_crash(readings, profile):
    from spark_gotchas.machine.provider import ReadingUnavailable
    from spark_gotchas.machine.snapshot import Snapshot

    spark = ReplaySpark(Snapshot(readings=readings, options={}, path="fuzzed.json"), profile)
    for check in CHECKS:
        before = len(spark.verdicts)
        try:
            check(spark)
        except ReadingUnavailable as exc:  # the plugin makes this a SKIP line
            assert not exc.bug, f"{check.__name__}: {exc}"
            continue
        assert len(spark.verdicts) == before + 1, check.__name__
        for line in summary_lines(spark.verdicts[-1:]):
            assert not RAW_CONTROL.search(line)
