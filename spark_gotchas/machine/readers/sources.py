"""Which Python modules name a file of a package, and whether importing the package loads it.

Why: a wheel may split its GPU code per feature. FlashInfer's prebuilt jit-cache holds one shared
object per module (``jit_cache/moe_utils/moe_utils.so``, which its MoE path loads by that name on
first use); vLLM keeps FlashMLA and FlashAttention 3 in ``_flashmla_C`` and ``_vllm_fa3_C`` beside
its core. A part without kernels for this GPU breaks what loads it, not the whole package: G1 names
the part and its users, and fails the package only when its import loads the part.

Read from the sources as text, never imported. ``grep -rlF`` (bounded, in a child) finds the ``.py``
files that hold one of a part's names: its name quoted (``"moe_utils"``), its import name
(``vllm._flashmla_C``, ``import _vllm_fa3_C``), ``torch.ops.<name>``. Python's :mod:`ast` then says
whether a file names it in code its import runs (not inside a function), and follows the package's
module-level imports from its ``__init__.py`` to learn whether importing the package runs that file.
By hand: ``grep -rn -e '"moe_utils"' -e 'import _flashmla_C' $(python -c 'import flashinfer, os;
print(os.path.dirname(flashinfer.__file__))')``.
"""

from __future__ import annotations

import ast
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

from ...base.procs import run_bounded

SEARCH_TIMEOUT_S = 5.0  # one grep over a package's sources (FlashInfer's 120 MB of .py: 0.3 s warm)
MAX_SOURCE_BYTES = 1 << 20  # a .py file larger than this is not parsed (generated tables)
MAX_USERS = 4  # users named per part
IMPORT_WALK_FILES = 400  # modules followed from a package's __init__.py before giving up
IMPORT_WALK_S = 2.0


@dataclass(frozen=True)
class Part:
    """One file with GPU code: its key (the path its RECORD gives), its import name, its stem."""

    key: str  # vllm/_flashmla_C.abi3.so
    module: str  # vllm._flashmla_C
    stem: str  # _flashmla_C


@dataclass
class Found:
    """What the sources say of one part."""

    users: list[str] = field(default_factory=list)  # modules naming it, the package's own first
    at_import: Optional[bool] = None
    searched: bool = False


def part_of(key: str) -> Part:
    """``vllm/_flashmla_C.abi3.so`` -> Part(key, ``vllm._flashmla_C``, ``_flashmla_C``)."""
    pieces = key.replace("\\", "/").split("/")
    stem = pieces[-1].split(".")[0]
    return Part(key, ".".join(pieces[:-1] + [stem]), stem)


def names(part: Part) -> list[str]:
    """The fixed strings a source that loads ``part`` holds: its quoted name (what loaders pass to
    a JIT cache or ``load_library``), its import name, ``import <stem>`` (``from . import _C``),
    ``<stem> import`` (``from ._C import f``), ``ops.<stem>`` (``torch.ops._C``)."""
    s = part.stem
    return [f'"{s}"', f"'{s}'", f'"{s}.so"', f"'{s}.so'", part.module, f"import {s}", f"{s} import", f"ops.{s}"]


def may_name(text: str, part: Part, inside: bool) -> bool:
    """Could this source name ``part`` (before its tree is parsed to be sure)? Its name quoted, its
    absolute import name, ``ops.<name>``; ``import <name>`` / ``<name> import`` only in a file of the
    part's own package, where a relative import can reach it (``from .moe_utils import f`` in another
    package imports a module of that package)."""
    s = part.stem
    if any(q in text for q in (f'"{s}"', f"'{s}'", f'"{s}.so"', f"'{s}.so'", f"/{s}.so", part.module, f"ops.{s}")):
        return True
    return inside and (f"import {s}" in text or f"{s} import" in text)


def grep(roots: list[str], needles: list[str], timeout: float = SEARCH_TIMEOUT_S) -> tuple[list[str], str]:
    """(the .py files under ``roots`` holding any of ``needles``, why the search failed or ''). GNU grep
    matches many fixed strings in one pass (FlashInfer's sources: 0.3 s for a hundred names)."""
    roots = [r for r in roots if os.path.isdir(r)]
    if not roots or not needles:
        return [], ""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as fh:
        fh.write("\n".join(sorted(set(needles))) + "\n")
        listing = fh.name
    try:
        run = run_bounded(["grep", "-rlF", "--include=*.py", "-f", listing, "--", *roots], timeout)
    finally:
        os.unlink(listing)
    if run.error:
        return [], f"grep could not run ({run.error})"
    if run.timed_out or run.cut:
        return [], f"the search of the sources did not finish within {timeout:g} s"
    if run.returncode not in (0, 1, 2):  # 2: some file unreadable; what it found still counts
        return [], run.problem
    return sorted({line for line in run.stdout.splitlines() if line.endswith(".py")}), ""


def module_name(path: str, site: str) -> str:
    """``<site>/flashinfer/jit/moe_utils.py`` -> ``flashinfer.jit.moe_utils`` (``__init__`` -> the package)."""
    rel = os.path.relpath(path, site).replace(os.sep, "/")
    rel = rel[:-3] if rel.endswith(".py") else rel
    rel = rel[: -len("/__init__")] if rel.endswith("/__init__") else rel
    return rel.replace("/", ".")


def _source(path: str) -> Optional[str]:
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _parse(text: str, path: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:``: a block only type checkers read."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _module_level(tree: ast.AST):
    """Every node importing the module runs: all but what functions (and lambdas) hold and what
    ``if TYPE_CHECKING:`` guards."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        if _type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _text(node: ast.AST) -> str:
    """An import or attribute as source reads it (``from . import _C``, ``torch.ops._C``), rebuilt
    from the tree (``ast.get_source_segment`` splits the whole file each call)."""
    if isinstance(node, ast.Import):
        return "import " + ", ".join(alias.name for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return f"from {'.' * node.level}{node.module or ''} import " + ", ".join(a.name for a in node.names)
    pieces = []
    while isinstance(node, ast.Attribute):
        pieces.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        pieces.append(node.id)
    return ".".join(reversed(pieces))


def _resolve(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The absolute names an import statement imports (``from . import _C`` in vllm/__init__.py: ``vllm``,
    ``vllm._C``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [m for m in [source] + [f"{source}.{alias.name}" for alias in node.names if alias.name != "*"] if m]


def uses(tree: ast.Module, module: str, is_package: bool, part: Part) -> tuple[bool, bool]:
    """(does this module name ``part`` anywhere, does code its import runs name it). Named: its name
    quoted (``"moe_utils"``, ``"moe_utils.so"``, a path ending ``/moe_utils.so``), an import of it
    resolved to its own name (``from . import _vllm_fa3_C`` beside it; ``from .moe_utils import f`` in
    another folder is another module), ``torch.ops.<name>`` (the namespace its ops register)."""
    eager = {id(node) for node in _module_level(tree)}
    quoted = {part.stem, f"{part.stem}.so", part.module}
    anywhere = at_import = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = node.value in quoted or node.value.endswith(f"/{part.stem}.so")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            hit = part.module in _resolve(node, module, is_package)
        elif isinstance(node, ast.Attribute) and node.attr == part.stem:
            text = _text(node)
            hit = text == part.module or text.endswith(f"ops.{part.stem}")
        else:
            continue
        if hit:
            anywhere = True
            at_import = at_import or id(node) in eager
            if at_import:
                break
    return anywhere, at_import


def _imports(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    """The modules a module's import runs (its module-level imports), as absolute names."""
    return [m for node in _module_level(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for m in _resolve(node, module, is_package)]


def _file_of(module: str, site: str) -> Optional[str]:
    base = os.path.join(site, *module.split("."))
    for candidate in (os.path.join(base, "__init__.py"), base + ".py"):
        if os.path.isfile(candidate):
            return candidate
    return None


def reached(site: str, tops: list[str], wanted: set[str], budget_s: float = IMPORT_WALK_S,
            most: int = IMPORT_WALK_FILES) -> Optional[set[str]]:
    """Which of ``wanted`` (module names) importing the packages ``tops`` runs, following module-level
    imports inside ``tops``; None when the walk ran out of its bounds first."""
    t0 = time.monotonic()
    seen: set[str] = set()
    todo = list(tops)
    found: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen or module.split(".")[0] not in tops:
            continue
        seen.add(module)
        path = _file_of(module, site)
        if path is None:
            continue
        if module in wanted:
            found.add(module)
            if found == wanted:
                return found
        if len(seen) > most or time.monotonic() - t0 > budget_s:
            return None
        text = _source(path)
        tree = _parse(text, path) if text is not None else None
        if tree is None:
            continue
        for name in _imports(tree, module, path.endswith("__init__.py")):
            pieces = name.split(".")
            todo += [".".join(pieces[:i]) for i in range(1, len(pieces) + 1)]  # a.b.c runs a and a.b first
    return found


def find(parts: list[Part], site: str, tops: list[str], roots: list[str], own: str = "",
         timeout: float = SEARCH_TIMEOUT_S) -> tuple[dict[str, Found], str]:
    """For each part, the modules under ``roots`` that name it and whether importing ``tops`` (the
    packages, in ``site``) loads it; and why the search could not answer (''). ``own``: the package
    whose modules are named first."""
    if not parts:
        return {}, ""
    files, problem = grep(roots, [n for p in parts for n in names(p)], timeout)
    if problem:
        return {p.key: Found() for p in parts}, problem
    texts = {f: t for f in files if (t := _source(f)) is not None}
    trees: dict[str, Optional[ast.Module]] = {}
    out: dict[str, Found] = {}
    at_import_candidates: dict[str, list[str]] = {}
    for part in parts:
        users, eager = set(), []
        package = os.path.join(site, part.module.split(".")[0]) + os.sep
        for f, text in texts.items():
            if not may_name(text, part, f.startswith(package)):
                continue
            if f not in trees:
                trees[f] = _parse(text, f)
            tree = trees[f]
            if tree is None:
                continue
            name = module_name(f, site)
            anywhere, at_import = uses(tree, name, f.endswith("__init__.py"), part)
            if anywhere:
                users.add(name)
            if at_import:
                eager.append(name)
        modules = sorted(users, key=lambda m: (not m.startswith(own + ".") and m != own, m))
        out[part.key] = Found(users=modules[:MAX_USERS], at_import=False if not eager else None, searched=True)
        if eager:
            at_import_candidates[part.key] = eager
    if at_import_candidates:
        wanted = {m for ms in at_import_candidates.values() for m in ms}
        ran = reached(site, tops, wanted)
        for key, eager in at_import_candidates.items():
            out[key].at_import = None if ran is None and not wanted & set(tops) else any(
                m in (ran or set()) or m in tops for m in eager)
    return out, ""
