"""Triton's ptxas (G1, G7): which binary Triton runs to compile its kernels, and its CUDA release.

Nothing imports triton here: its folder is found with ``importlib.util.find_spec``, its compiler's
choice of ptxas read from ``backends/nvidia/compiler.py`` as text, and each ``ptxas --version`` runs
in a child with a timeout (:func:`spark_gotchas.base.procs.run_bounded`): a binary for another CPU, a hung
or missing one is a reading, never a crash of the run.

Keys: ``triton.ptxas``; its types are in :mod:`spark_gotchas.knowledge.readings.triton`.
"""

from __future__ import annotations

import glob
import importlib.metadata as md
import importlib.util
import os
import re
import shutil
import time
from typing import Optional

from ...base.procs import run_bounded
from ...knowledge.readings.triton import PtxasRun, PtxasTool, TritonPtxas
from . import ReadContext, reader

VERSION_TIMEOUT_S = 10.0
RELEASE = re.compile(r"release (\d+\.\d+)")
TOOLS = ("ptxas", "ptxas-blackwell")
BLACKWELL_FROM = re.compile(r"if\s+arch\s*<\s*(\d+)\s*:\s*\n\s*return\s+knobs\.nvidia\.ptxas\b")
COMPILER_BYTES = 1 << 20


def ptxas_version(path: str, timeout: float = VERSION_TIMEOUT_S) -> PtxasRun:
    """``path --version`` in a child, bounded: its CUDA release, or why there is none."""
    t0 = time.monotonic()
    if not os.path.isfile(path):
        return PtxasRun(path, error="not found")
    if not os.access(path, os.X_OK):
        return PtxasRun(path, error="not executable")
    run = run_bounded([path, "--version"], timeout, merge_stderr=True)
    seconds = time.monotonic() - t0
    if run.error:
        return PtxasRun(path, error=run.error.replace("OSError: ", ""), seconds=seconds)
    if run.timed_out:
        return PtxasRun(path, error=f"--version did not answer within {timeout:g} s", seconds=seconds)
    found = RELEASE.search(run.stdout)
    line = next((ln.strip() for ln in run.stdout.splitlines() if "release" in ln), None)
    if run.returncode != 0 or found is None:
        return PtxasRun(path, version_text=line, error=run.problem or "no release in its --version output",
                        seconds=seconds)
    return PtxasRun(path, release=found.group(1), version_text=line, seconds=seconds)


def _triton_dir() -> Optional[str]:
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(list(spec.submodule_search_locations)[0])


def blackwell_from(compiler: str) -> Optional[int]:
    """The SM from which Triton's compiler runs ptxas-blackwell (``if arch < 90: return knobs.nvidia.ptxas``),
    None when compiler.py has no such choice."""
    try:
        with open(compiler, encoding="utf-8", errors="replace") as fh:
            text = fh.read(COMPILER_BYTES)
    except OSError:
        return None
    found = BLACKWELL_FROM.search(text)
    return int(found.group(1)) if found and "ptxas_blackwell" in text else None


def other_ptxas() -> list[str]:
    """CUDA's ptxas binaries outside Triton: the toolkits' (/usr/local/cuda*, CUDA_HOME, CUDA_PATH),
    NVIDIA's nvcc wheels' (site-packages nvidia/*/bin/ptxas) and the one on PATH."""
    found = []
    for base in [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")] + sorted(glob.glob("/usr/local/cuda*")):
        if base:
            found.append(os.path.join(base, "bin", "ptxas"))
    import site
    for sp in list(getattr(site, "getsitepackages", lambda: [])()):
        found += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "bin", "ptxas")))
    on_path = shutil.which("ptxas")
    if on_path:
        found.append(on_path)
    seen, out = set(), []
    for path in found:
        real = os.path.realpath(path)
        if os.path.isfile(path) and real not in seen:
            seen.add(real)
            out.append(path)
    return out


@reader("triton.ptxas")
def read_triton_ptxas(ctx: ReadContext) -> TritonPtxas:
    """Triton's bundled ptxas tools, what TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH name, each
    one's --version; the other ptxas binaries of this machine."""
    others = [ptxas_version(p) for p in other_ptxas()]
    where = _triton_dir()
    if where is None:
        return TritonPtxas(installed=False, others=others)
    try:
        version = md.version("triton")
    except md.PackageNotFoundError:
        version = None
    bin_dir = os.path.join(where, "backends", "nvidia", "bin")
    tools = []
    for name in TOOLS:
        bundled = os.path.join(bin_dir, name)
        var = f"TRITON_{name.upper().replace('-', '_')}_PATH"
        value = os.environ.get(var)
        if not os.path.exists(bundled) and value is None:
            continue
        tools.append(PtxasTool(name=name, env_var=var, env_value=value, bundled=ptxas_version(bundled),
                               from_env=ptxas_version(value) if value else None))
    return TritonPtxas(installed=True, version=version, location=where, tools=tools, others=others,
                       blackwell_from_sm=blackwell_from(os.path.join(where, "backends", "nvidia", "compiler.py")),
                       error=None if tools else f"no ptxas in {bin_dir}")
