"""docs/checks/g06.md's table of servers says what spark_gotchas/knowledge/workloads.py knows, both ways:
every program the code recognises has a row, every option spelling and variable a server's bound reads is
in its row with the default the code takes, and no row names a program, flag or variable the code does
not read. What the code cannot hold (how each parser reads, the sources) stays on the page as prose.

The programs come from ``_recognise`` and ``_trainer`` (the kinds and names they return); a server's bound
from its ``<kind>_bound`` function and whatever module constant or helper it reaches (``VLLM_OPTIONS``,
``LLAMA_ENV``, ``_env(start, "CUDA_MEMORY_FRACTION")``, ``pull_config``'s ``--config``); its defaults from
calling that function on an empty command line."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from spark_gotchas.knowledge import workloads as w
from spark_gotchas.knowledge.profiles import GB10
from spark_gotchas.knowledge.readings.gpu import ServerStart

PAGE = Path(__file__).resolve().parents[1] / "docs" / "checks" / "g06.md"
TEXT = PAGE.read_text(encoding="utf-8")
SECTION = TEXT.split("\n## Servers and what bounds them\n", 1)[1].split("\n## ", 1)[0]
MODULE = ast.parse(inspect.getsource(w))
FUNCTIONS = {node.name: node for node in MODULE.body if isinstance(node, ast.FunctionDef)}
FLAG = re.compile(r"^--?[a-z][a-z0-9_-]*$")
VARIABLE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
CONFIG_KEY = re.compile(r"^[a-z][a-z0-9_]*(?:\[\])?(?:\.[a-z][a-z0-9_]*)*$")
EMPTY = ServerStart(environ={})  # a server whose environment was read and sets nothing


def tables(section: str) -> list[list[list[str]]]:
    """The Markdown tables of ``section``, each as its rows of cells (the header and rule left out)."""
    found, rows = [], []
    for line in [*section.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            found.append(rows[1:])
            rows = []
    return found


BOUNDS, READ_AS = tables(SECTION)[:2]
ROWS = {row[0]: row for row in BOUNDS}


def ticked(cell: str) -> list[str]:
    """The first word of each `code` span of a cell, without an ``=value``."""
    return [span.split()[0].split("=")[0] for span in re.findall(r"`([^`]+)`", cell) if span.split()]


def examples(cell: str) -> list[str]:
    """The command lines a "recognised by" cell gives (its flags and variables are settings, not programs)."""
    spans = re.findall(r"`([^`]+)`", cell)
    return [s for s in spans if not s.startswith("-") and not VARIABLE.match(s)]


def program(command: str) -> str | None:
    """What the code takes ``command`` for: a server's kind, ``trainer: <name>``, or None."""
    argv = command.split()
    found = w._recognise(argv, argv[0])
    if found is not None:
        return found[0]
    trainer = w._trainer(argv)
    return f"trainer: {trainer}" if trainer else None


def returned(function: str) -> set[str]:
    """The kind or name each ``return`` of ``function`` starts with, where it is a string."""
    out = set()
    for node in ast.walk(FUNCTIONS[function]):
        if isinstance(node, ast.Return) and node.value is not None:
            first = node.value.elts[0] if isinstance(node.value, ast.Tuple) else node.value
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value:
                out.add(first.value)
    return out


KINDS = returned("_recognise") | {f"trainer: {name}" for name in returned("_trainer")}
ROW_KINDS = {name: {program(c) for c in examples(row[1])} for name, row in ROWS.items()}


def reached(function: str, seen: set[str] | None = None) -> tuple[set[str], set[str]]:
    """(module names, string constants) of ``function`` and of every module function it calls."""
    seen = set() if seen is None else seen
    seen.add(function)
    names, strings = set(), set()
    for node in ast.walk(FUNCTIONS[function]):
        if isinstance(node, ast.Name):
            names.add(node.id)
            if node.id in FUNCTIONS and node.id not in seen:
                more = reached(node.id, seen)
                names, strings = names | more[0], strings | more[1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
    return names, strings


def bound_function(kind: str) -> str:
    return kind.replace(".", "_").replace("-", "_") + "_bound"


def known(kind: str) -> tuple[set[str], set[str], set[str]]:
    """(flags, variables, config-key words) a kind's bound reads; empty for a kind with no bound of its own."""
    if kind is None or bound_function(kind) not in FUNCTIONS:
        return set(), set(), set()
    names, strings = reached(bound_function(kind))
    flags, variables = set(), set()
    for name in names:
        value = getattr(w, name, None)
        if isinstance(value, tuple) and value and all(isinstance(o, w.Option) for o in value):
            flags |= {n for o in value for n in o.names}
        elif name.endswith(("_ENV", "_VARIABLES")) and name != "BOUND_VARIABLES":
            variables |= set(value.values()) if isinstance(value, dict) else {k for k, _ in value}
    variables |= {s for s in strings if VARIABLE.match(s)}
    if "pull_config" in names:
        flags.add("--config")
    return flags, variables, strings


def row_known(name: str) -> tuple[set[str], set[str], set[str]]:
    flags, variables, words = set(), set(), set()
    for kind in ROW_KINDS[name]:
        more = known(kind)
        flags, variables, words = flags | more[0], variables | more[1], words | more[2]
    return flags, variables, words


def test_the_page_has_both_tables_with_one_row_per_server_in_the_same_order():
    assert [row[0] for row in BOUNDS] == [row[0] for row in READ_AS]
    assert all(len(row) == 4 for row in BOUNDS) and all(len(row) == 3 for row in READ_AS)


def test_every_program_the_code_recognises_has_a_row_and_each_row_names_programs_it_recognises():
    for name, kinds in ROW_KINDS.items():
        assert None not in kinds, f"{name}: a command line in 'recognised by' that workloads.py does not recognise"
        assert kinds, f"{name}: no command line in 'recognised by'"
    claimed = [kind for kinds in ROW_KINDS.values() for kind in kinds]
    assert sorted(KINDS - set(claimed)) == [], "recognised by workloads.py, and in no row of docs/checks/g06.md"
    servers = [kind for kind in claimed if not kind.startswith("trainer: ")]
    assert len(servers) == len(set(servers)), "a server kind in two rows"


def test_every_bound_function_is_named_for_a_kind_the_code_recognises():
    kinds = {k for k in KINDS if not k.startswith("trainer: ")}
    orphans = [f for f in FUNCTIONS if f.endswith("_bound") and not any(bound_function(k) == f for k in kinds)]
    assert orphans == [], "a bound function named for no kind _recognise returns: name it <kind>_bound"


@pytest.mark.parametrize("name", [n for n in ROWS if n != "trainers"])
def test_a_rows_bound_names_every_setting_the_code_reads_and_none_it_does_not(name):
    flags, variables, words = row_known(name)
    row = ROWS[name]
    spans = set(ticked(" ".join(row[1:])))
    assert sorted(flags - spans) == [], f"{name}: options workloads.py reads, not in its row"
    assert sorted(variables - spans) == [], f"{name}: variables workloads.py reads, not in its row"
    named = set(ticked(" ".join(row[2:])))
    assert sorted(s for s in named if FLAG.match(s) and s not in flags) == [], f"{name}: options the code does not read"
    assert sorted(s for s in named if VARIABLE.match(s) and s not in variables) == [], \
        f"{name}: variables the code does not read"
    keys = [s for s in named if CONFIG_KEY.match(s) and "_" in s]
    assert sorted(k for k in keys if not set(re.split(r"\[\]\.|\.", k)) <= words) == [], \
        f"{name}: config keys the code does not read"


def fmt(value: float) -> str:
    """A default as the page writes it: 0.9, 0.92, 1.0."""
    return f"{value:.1f}" if value == round(value, 1) else f"{value:g}"


def test_vllm_defaults_by_release_are_the_codes():
    newest = w.VLLM_NEWEST_CHECKED
    minor = int(newest.split(".")[1])
    releases = [f"0.{m}.0" for m in range(9, minor + 1)]
    values = [w.vllm_bound([], ServerStart(environ={}, version=v), v).value for v in releases]
    cell = ROWS["vLLM"][3]
    assert f"unset: {fmt(values[0])} up to" in cell
    for before, after, release in zip(values, values[1:], releases[1:], strict=False):
        if after != before:
            assert f"{fmt(after)} from {release}" in cell, f"vLLM's default {after} from {release}"
    off = w.vllm_bound(["--no-enable-extensible-kv-cache"], ServerStart(environ={}, version=newest), newest).value
    assert f"then {fmt(off)}" in cell
    unread = w.vllm_bound([], None, None).value
    assert f"a release newer than {newest}, or one not read: {fmt(unread)}" in cell


def test_the_other_defaults_are_the_codes():
    assert ROWS["trl vllm-serve"][3].startswith(fmt(w.trl_bound([], None).value))
    assert ROWS["TensorRT-LLM"][3] == fmt(w.trtllm_bound([], None).value)
    assert ROWS["TGI"][3] == fmt(w.tgi_bound([], EMPTY).value)
    router = re.search(r"up to (\d+)", w.llama_cpp_bound(["--models-dir", "/models"], EMPTY)[0].setting).group(1)
    assert f"up to {router} models at once" in ROWS["llama.cpp server"][3]
    unset = re.search(r"unset: (\d+)", w.llama_cpp_python_bound([], EMPTY).setting).group(1)
    assert f"`n_gpu_layers` {unset} " in ROWS["llama-cpp-python server"][3]
    for variable, default in w.OLLAMA_VARIABLES:
        assert f"`{variable}` {default.removeprefix('unset: ')}" in ROWS["Ollama"][3]


def test_sglangs_reserves_and_the_share_it_takes_of_a_gb10_are_the_codes():
    cell = ROWS["SGLang"][3]
    for limit, reserve in w.SGLANG_RESERVES:
        where = f"below {limit / w.GIB:g} GiB" if limit is not None else "above"
        assert f"{reserve / w.GIB:.1f} GiB {where}" in cell
    assert f"{w.sglang_fraction(GB10.memory_total_bytes):g} of a GB10" in cell


def test_what_it_reads_names_every_variable_recorded_and_every_distribution_whose_version_counts():
    reads = TEXT.split("\n## What it reads\n", 1)[1].split("\n## ", 1)[0]
    for variable in w.BOUND_VARIABLES:
        assert f"`{variable}*`" in reads if variable.endswith("_") else f"`{variable}`" in reads, variable
    for dist in w.DISTRIBUTIONS.values():
        assert f"`{dist}`" in reads, dist
