"""Each docs/checks/gNN.md lists every line its checks can print, with its fix, under "## Lines and
fixes": the text of every fix constant of the gotcha's judges, and every literal piece of the lines
and fixes its judges build, stand there (``<…>`` on the page marks what a line fills in, where the
judge's text has ``{name}`` or an f-string's value)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from spark_gotchas.knowledge import profiles
from spark_gotchas.knowledge.profiles import GB10
from spark_gotchas.knowledge.readings import gpu, remedies
from spark_gotchas.plugin import BUG_FIX

ROOT = Path(__file__).resolve().parents[1]
JUDGES = ROOT / "spark_gotchas" / "knowledge" / "judges"
PAGES = tuple(range(1, 11))  # the pages written as references with a "Lines and fixes" section
SECTION = "## Lines and fixes"
LINE_NAMES = ("line", "summary", "head", "clause")  # a judge's variables that hold (part of) a line
SHORTEST = 6  # a literal piece shorter than this ("; ", " GB") says nothing on its own
BUILT_AT_LEAST = {8: 5}  # the search finds the judges' texts: G8 has few, its fixes come from the playbooks it reads
NO_FIX_CONSTANTS = (8,)  # G8's fixes name the playbook and its issues: none is a constant

# Fixes several judges share, defined outside the judge modules, and the pages that give them.
SHARED = {
    "profiles.FIX_BEYOND": (profiles.FIX_BEYOND, (3, 4, 5)),
    "readings.gpu.OUTSIDE_FIX": (gpu.OUTSIDE_FIX, (4, 5)),
    "remedies.FLASH_ATTN": (remedies.FLASH_ATTN.text, (1, 2)),
    "remedies.SGL_KERNEL": (remedies.SGL_KERNEL.text, (1,)),
    "remedies.jit_cache": (remedies.for_package("flashinfer-jit-cache", GB10.capability).text, (1,)),
    "remedies.power_cycle (a Spark)": (remedies.power_cycle(True).text, (1, 3)),
    "remedies.power_cycle (elsewhere)": (remedies.power_cycle(False).text, (1,)),
    "plugin.BUG_FIX": (BUG_FIX, PAGES),
}


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def lines_section(gotcha: int) -> str:
    text = (ROOT / "docs" / "checks" / f"g{gotcha:02d}.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/checks/g{gotcha:02d}.md has no {SECTION!r} section"
    return flat(text.split(SECTION, 1)[1].split("\n## ", 1)[0])


def shown(text: str, section: str) -> bool:
    """``text`` stands in ``section``, each ``{name}`` of it as a ``<…>`` there (or as written)."""
    parts = re.split(r"\{[a-z_]+\}", flat(text))
    pattern = r"(?:<[^>]*>|\{[a-z_]+\})".join(re.escape(p) for p in parts)
    return re.search(pattern, section) is not None


def modules(gotcha: int) -> list[Path]:
    return sorted(JUDGES.glob(f"g{gotcha:02d}_*.py"))


def fix_constants(gotcha: int) -> dict[str, str]:
    out = {}
    for path in modules(gotcha):
        module = importlib.import_module(f"spark_gotchas.knowledge.judges.{path.stem}")
        out.update({f"{path.stem}.{name}": value for name, value in vars(module).items()
                    if "FIX" in name and isinstance(value, str)})
    return out


def pieces(node: ast.AST | None, assigned: dict[str, list[ast.AST]], depth: int = 0) -> list[str]:
    """The literal text of an expression that makes a line or a fix: its strings and f-strings' literal
    parts, through ``+``, ``x if c else y``, a cut (``[:300]``), ``fitting(G, status, longest, …)``'s
    longest form and the function's own variables."""
    if node is None or depth > 5:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.Subscript):
        return pieces(node.value, assigned, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return pieces(node.left, assigned, depth + 1) + pieces(node.right, assigned, depth + 1)
    if isinstance(node, ast.IfExp):
        return pieces(node.body, assigned, depth + 1) + pieces(node.orelse, assigned, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fitting" \
            and len(node.args) > 2:
        return pieces(node.args[2], assigned, depth + 1)
    if isinstance(node, ast.Name):
        return [p for value in assigned.get(node.id, []) for p in pieces(value, assigned, depth + 1)]
    return []


def built_texts(gotcha: int) -> list[tuple[str, str]]:
    """(where, literal piece) of every line and fix the gotcha's judges build: a ``Verdict``'s
    summary and ``fix=``, a G1 ``Finding``'s clause and fix, the variables that hold a line, and what
    the functions that make fixes (``*fix*``, ``*remedy*``, ``build_*``) return."""
    out = []
    for path in modules(gotcha):
        for fn in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.FunctionDef)):
            assigned: dict[str, list[ast.AST]] = {}
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    assigned.setdefault(n.targets[0].id, []).append(n.value)
            found = [value for name in (*LINE_NAMES, "fix") for value in assigned.get(name, [])]
            if any(word in fn.name for word in ("fix", "remedy", "build_")):
                found += [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("Verdict", "Finding"):
                    at = 2 if n.func.id == "Verdict" else 3
                    found += n.args[at:at + 1] + [k.value for k in n.keywords if k.arg == "fix"]
            for value in found:
                for piece in pieces(value, assigned):
                    piece = flat(piece).strip(" ;,:.(")
                    if len(piece) >= SHORTEST:
                        out.append((f"{path.name}:{value.lineno}", piece))
    return out


@pytest.mark.parametrize("gotcha", PAGES)
def test_every_fix_constant_is_on_its_page(gotcha):
    section = lines_section(gotcha)
    constants = fix_constants(gotcha)
    assert constants or gotcha in NO_FIX_CONSTANTS  # every other gotcha's judges name their fixes
    missing = [name for name, text in constants.items() if not shown(text, section)]
    assert missing == [], f"docs/checks/g{gotcha:02d}.md does not give these fixes word for word: {missing}"


@pytest.mark.parametrize("name", SHARED)
def test_every_shared_fix_is_on_the_pages_that_give_it(name):
    text, pages = SHARED[name]
    assert [g for g in pages if not shown(text, lines_section(g))] == []


@pytest.mark.parametrize("gotcha", PAGES)
def test_every_line_and_fix_a_judge_builds_is_on_its_page(gotcha):
    section = lines_section(gotcha)
    built = built_texts(gotcha)
    assert len(built) >= BUILT_AT_LEAST.get(gotcha, 10)
    missing = sorted({f"{where}: {piece!r}" for where, piece in built if piece not in section})
    assert missing == [], f"docs/checks/g{gotcha:02d}.md's {SECTION!r} lacks: {missing}"


def test_the_checks_catch_what_they_are_for():
    section = "| FAIL | `the last soak ended in a reboot/power loss at about <time>` | `stop or pause <names> (G6 says how)` |"
    assert shown("stop or pause {names} (G6 says how)", flat(section))
    assert not shown("stop or pause {names} (G5 says how)", flat(section))
    tree = ast.parse('def judge():\n    what = "a process"\n    summary = f"{what} ran at {1} GB/s, far below"\n'
                     '    return Verdict(G, Status.WARN, summary, fix="re-run it " + FIX)\n')
    fn = tree.body[0]
    assigned = {n.targets[0].id: [n.value] for n in fn.body if isinstance(n, ast.Assign)}
    assert pieces(ast.parse("summary", mode="eval").body, assigned) == [" ran at ", " GB/s, far below"]
    assert pieces(fn.body[-1].value.keywords[0].value, assigned) == ["re-run it "]
