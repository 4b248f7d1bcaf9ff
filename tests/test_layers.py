"""The suite's layers import one way, read from the source with ``ast`` (nothing is imported).

A module's layer is the folder it lives in (:data:`FOLDERS`), never a list kept by hand:

- ``base/``: helpers of the whole suite; imports nothing of it;
- ``knowledge/``: the judges, verdict, profiles, workloads, plan and the reading types — pure; a
  judge imports only the reading types, other knowledge and base's pure helpers, never another judge;
  ``knowledge/readings/`` imports only other reading types and microbench's result types;
- ``machine/``: taking and keeping readings (readers, provider, NVML, snapshot) — may import knowledge;
- ``runtime/``: work in child processes and over time (the GPU worker, the soak, the watch);
- ``outputs/``, ``commands/``, ``run/`` and the package's own public modules (``plugin``,
  ``startup``, ``fixes``, ``__main__``): the top, which may import everything below.

The soak's engine returns readings and never judges. :func:`spark_gotchas.machine.readers.load_all`
imports the soak's reader (``spark_gotchas.runtime.soak.reader``) by name, a string in
``readers.ELSEWHERE`` that this test does not read as an import. Imports inside functions count for
every rule, the one on cycles too: a cycle through an import inside a function fails as one at
module level does.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spark_gotchas", "microbench")

# What a judge may import of the suite besides knowledge: base's pure helpers.
JUDGE_BASE = ("spark_gotchas.base.units", "spark_gotchas.base.text", "spark_gotchas.base.scrub")
KNOWLEDGE_EXACT = ("spark_gotchas",)  # the package itself, for __version__

# Imports the rules still allow, each until the name it brings moves to the right layer: delete an
# entry once its import is gone (test_every_allowed_exception_is_still_needed says when).
ALLOWED = {
    # G5 names BandwidthResult and MethodResult, the microbenchmark's types that bench readings embed.
    ("spark_gotchas.knowledge.judges.g05_bandwidth", "microbench.bandwidth"): "judge imports microbench",
}


@functools.cache
def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) for every module of the suite's packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _suite(name: str) -> str:
    """microbench ships inside the suite as spark_gotchas.microbench: either name is microbench."""
    return name.replace("spark_gotchas.microbench", "microbench", 1) if name.startswith("spark_gotchas.microbench") \
        else name


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names (``from . import nvml`` names spark_gotchas.machine.nvml)."""
    if isinstance(node, ast.Import):
        return [_suite(alias.name) for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    source = _suite(source)
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules() else source for alias in node.names]


@functools.cache
def imports(module: str, module_level: bool = False) -> frozenset[str]:
    """What ``module`` imports of the suite: everywhere, or only what importing it runs."""
    path, is_package = modules()[module]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if module_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.update(_targets(module, is_package, child))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return frozenset(t for t in found if t.split(".")[0] in PACKAGES and t != module)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def edges(importers: str, wrong) -> list[str]:
    """``importer -> imported`` for every import of a module under ``importers`` that ``wrong`` flags
    and ALLOWED does not list."""
    return sorted(f"{m} -> {t}" for m in modules() if _under(m, importers) for t in imports(m)
                  if wrong(m, t) and (m, t) not in ALLOWED)


def is_judge(name: str) -> bool:
    return name.startswith("spark_gotchas.knowledge.judges.")


def test_microbench_imports_nothing_of_the_suite():
    """What a measurement needs of the suite (progress, stop requests, its memory reader, its
    network reader) comes in as arguments: a leaf runs alone, and the suite depends on it, not
    the other way round."""
    found = edges("microbench", lambda m, t: _under(t, "spark_gotchas"))
    assert found == [], "microbench imports the suite: " + "; ".join(found)


def test_no_judge_imports_another_judge():
    found = edges("spark_gotchas.knowledge.judges", lambda m, t: is_judge(m) and is_judge(t))
    assert found == [], "a judge imports another judge: " + "; ".join(found)


def test_reading_types_import_only_other_reading_types_and_microbench():
    allowed = ("spark_gotchas.knowledge.readings", "microbench")
    found = edges("spark_gotchas.knowledge.readings", lambda m, t: not any(_under(t, a) for a in allowed))
    assert found == [], "reading types import more than reading types: " + "; ".join(found)


def test_judges_import_only_reading_types_and_knowledge():
    def wrong(m: str, t: str) -> bool:
        return is_judge(m) and not is_judge(t) and not (
            t in KNOWLEDGE_EXACT or _under(t, "spark_gotchas.knowledge") or any(_under(t, k) for k in JUDGE_BASE))

    found = edges("spark_gotchas.knowledge.judges", wrong)
    assert found == [], "judges import more than reading types and knowledge: " + "; ".join(found)


def loaded_by(module: str) -> set[str]:
    """Every module of the suite that importing ``module`` runs (module-level imports, followed)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        for t in imports(m, module_level=True):
            parts = t.split(".")
            for above in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
                if above in modules() and above not in seen:
                    seen.add(above)
                    todo.append(above)
    return seen


def test_the_soak_engine_never_judges():
    """The engine returns readings; the check judges them (and its finish step draws the verdict)."""
    engine = "spark_gotchas.runtime.soak.engine"
    found = edges(engine, lambda m, t: _under(t, "spark_gotchas.knowledge.judges"))
    found += sorted(f"importing {engine} runs {t}" for t in loaded_by(engine) if _under(t, "spark_gotchas.knowledge.judges"))
    assert found == [], "the soak's engine imports a judge: " + "; ".join(found)


def test_readers_import_nothing_of_the_soak():
    found = edges("spark_gotchas.machine.readers", lambda m, t: _under(t, "spark_gotchas.runtime.soak"))
    assert found == [], "a reader module imports the soak, which sits above the readers: " + "; ".join(found)


def test_every_allowed_exception_is_still_needed():
    gone = sorted(f"{m} -> {t}" for m, t in ALLOWED if m not in modules() or t not in imports(m))
    assert gone == [], f"no longer imported: delete these entries from ALLOWED: {gone}"


def import_graph(module_level: bool) -> dict[str, set[str]]:
    """module -> the modules of the suite it imports, each package on the way included
    (``spark_gotchas.machine.readers.mem`` runs ``spark_gotchas.machine.readers`` first), its own packages left out."""
    graph: dict[str, set[str]] = {}
    for m in modules():
        graph[m] = set()
        for t in imports(m, module_level=module_level):
            parts = t.split(".")
            for above in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
                if above in modules() and above != m and not m.startswith(above + "."):
                    graph[m].add(above)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (``a -> b -> a``), or [] when there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_no_import_cycle_at_module_level():
    """Importing a module runs its module-level imports: a cycle there can fail at import."""
    found = cycle(import_graph(module_level=True))
    assert found == [], "import cycle: " + " -> ".join(found)


def test_no_import_cycle_at_all():
    """An import inside a function still ties two modules to each other: layers import one way, so
    no module reaches back to one that imports it, however the import is written."""
    found = cycle(import_graph(module_level=False))
    assert found == [], "import cycle (imports inside functions included): " + " -> ".join(found)


def test_the_cycle_finder_finds_a_cycle_through_an_import_inside_a_function():
    """The rule above on a graph with the circle it was written for (platform -> provider ->
    readers -> platform, the last import inside a function)."""
    graph = {"platform": {"provider"}, "provider": {"readers"}, "readers": {"platform"}}
    assert sorted(cycle(graph)[:-1]) == ["platform", "provider", "readers"]
    assert cycle({"platform": set(), "provider": {"readers"}, "readers": {"platform"}}) == []


# The layers, bottom first, each the folder (or folders) of the package that holds it.
FOLDERS = {"base": "base", "knowledge": "knowledge", "machine": "readings", "runtime": "runtime",
           "outputs": "top", "commands": "top", "run": "top"}
ORDER = ["leaf", "base", "knowledge", "readings", "runtime", "top"]
PUBLIC = ("plugin", "startup", "fixes", "__main__")  # the package's own modules: its public names, on top


def layer(name: str) -> str | None:
    """The layer of a module of the suite, read from its folder; None for the package itself and
    for microbench's package root."""
    parts = name.split(".")
    if parts[0] == "microbench":
        return "leaf" if len(parts) > 1 else None
    if len(parts) == 1:
        return None
    if len(parts) == 2 and parts[1] in PUBLIC:
        return "top"
    return FOLDERS.get(parts[1])


def test_every_module_has_a_layer():
    """A module beside the layers' folders is one of the package's public names, or in no layer."""
    loose = [m for m in modules() if not _under(m, "microbench") and m != "spark_gotchas" and layer(m) is None]
    assert loose == [], (f"modules in no layer: {', '.join(loose)}: put each in one of the folders "
                         f"{', '.join(FOLDERS)} (or, for a new public name, add it to PUBLIC)")


def test_the_package_holds_only_its_layers_and_public_names():
    """The tree answers "where does this live": folders for the layers, and at the top only what
    users name (the pytest11 entry points, python -m, the fixes users import, the version)."""
    def held(p: Path) -> bool:  # a folder left holding only caches (a checkout pulled across a move) holds nothing
        return p.is_file() or any(p.rglob("*.py"))

    top = sorted(p.name for p in (ROOT / "spark_gotchas").iterdir()
                 if not p.name.startswith(("__pycache__", ".")) and held(p))
    expected = sorted([*FOLDERS, *(f"{name}.py" for name in PUBLIC), "__init__.py", "pytest.ini"])
    assert top == expected


def test_no_module_imports_a_layer_above_its_own():
    def wrong(m: str, t: str) -> bool:
        lm, lt = layer(m), layer(t)
        return lm is not None and lt is not None and ORDER.index(lt) > ORDER.index(lm)

    found = edges("spark_gotchas", wrong)
    assert found == [], "imports of a higher layer: " + "; ".join(found)
