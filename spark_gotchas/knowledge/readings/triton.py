"""Reading types of the ``triton.*`` keys (G1, G7): the ``ptxas`` Triton runs to turn its kernels into
GPU code, and the CUDA release it comes from.

Why: Triton compiles every kernel it JITs (torch.compile's, vLLM's, Unsloth's) with the ``ptxas`` it
bundles (``triton/backends/nvidia/bin/ptxas``; from Triton 3.6 on a second one, ``ptxas-blackwell``,
for sm_90 and newer), or the one ``TRITON_PTXAS_PATH`` (``TRITON_PTXAS_BLACKWELL_PATH``) names. A
ptxas older than CUDA 12.9 knows no ``sm_121``: on a Spark it stops with ``ptxas fatal : Value
'sm_121a' is not defined for option 'gpu-name'`` (triton-lang/triton#8539, Triton 3.5.0's ptxas 12.8).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Seconds


@dataclass
class PtxasRun:
    """One ``ptxas --version``, run in a child with a timeout: ``$(python -c 'import triton, os;
    print(os.path.dirname(triton.__file__))')/backends/nvidia/bin/ptxas --version``"""

    path: str
    release: Optional[str] = None  # "12.8" from "Cuda compilation tools, release 12.8, V12.8.93"
    version_text: Optional[str] = None  # the line that says it
    error: Optional[str] = None  # why it gave no release: not found, not executable, exec format, timeout
    seconds: Seconds = 0.0


@dataclass
class PtxasTool:
    """One of Triton's ptxas tools: the bundled binary, the variable that replaces it, what runs."""

    name: str  # "ptxas" | "ptxas-blackwell"
    env_var: str  # TRITON_PTXAS_PATH | TRITON_PTXAS_BLACKWELL_PATH
    env_value: Optional[str] = None  # the variable as set for this run; None when unset
    bundled: Optional[PtxasRun] = None  # triton/backends/nvidia/bin/<name>
    from_env: Optional[PtxasRun] = None  # the binary the variable names (Triton falls back to the bundled one
    # when it does not run)

    @property
    def used(self) -> Optional[PtxasRun]:
        """What Triton runs: the variable's binary when it gives a version, else the bundled one."""
        if self.from_env is not None and self.from_env.release:
            return self.from_env
        return self.bundled


@dataclass
class TritonPtxas:
    """Triton's ptxas tools and the other CUDA ptxas binaries found on this machine (a toolkit's, a
    wheel's), each ``--version`` run bounded. Check by hand: ``ls $(python -c 'import triton, os;
    print(os.path.dirname(triton.__file__))')/backends/nvidia/bin; env | grep TRITON_PTXAS``"""

    installed: bool
    version: Optional[str] = None
    location: Optional[str] = None
    tools: list[PtxasTool] = field(default_factory=list)
    # Triton's compiler picks ptxas-blackwell for GPUs from this SM on (triton/backends/nvidia/compiler.py
    # ``get_ptxas(arch)``: 90 in Triton 3.9); None when it has one ptxas for every GPU
    blackwell_from_sm: Optional[int] = None
    others: list[PtxasRun] = field(default_factory=list)  # /usr/local/cuda*/bin/ptxas, CUDA_HOME, nvidia wheels, PATH
    error: Optional[str] = None  # why Triton's files could not be read

    def tool_for(self, sm: int) -> Optional[PtxasTool]:
        """The tool Triton's compiler runs for a GPU of SM ``sm`` (121 for a GB10)."""
        by_name = {t.name: t for t in self.tools}
        if self.blackwell_from_sm is not None and sm >= self.blackwell_from_sm and "ptxas-blackwell" in by_name:
            return by_name["ptxas-blackwell"]
        return by_name.get("ptxas") or (self.tools[0] if self.tools else None)


# The CUDA release whose ptxas first compiles for an SM (the CUDA toolkit's release notes and features
# archive: 12.8 added sm_100 and sm_120, 12.9 sm_103 and sm_121, 13.0 sm_110).
PTXAS_FIRST = {121: (12, 9), 120: (12, 8), 103: (12, 9), 100: (12, 8), 110: (13, 0), 101: (12, 8),
               90: (11, 8), 89: (11, 8), 87: (11, 4), 86: (11, 1), 80: (11, 0), 75: (10, 0)}


def release(text: Optional[str]) -> Optional[tuple[int, int]]:
    """``12.8`` -> (12, 8); None for no release."""
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def compiles_for(ptxas: TritonPtxas, capability: tuple[int, int]) -> Optional[bool]:
    """Does the ptxas Triton runs for a GPU of ``capability`` know its SM? None when it cannot be told
    (triton not installed, an SM outside the table); False when that ptxas does not run."""
    if not ptxas.installed:
        return None
    sm = capability[0] * 10 + capability[1]
    needed = PTXAS_FIRST.get(sm)
    if needed is None:
        return None
    tool = ptxas.tool_for(sm)
    if tool is None or tool.used is None:
        return False
    found = release(tool.used.release)
    return found is not None and found >= needed
