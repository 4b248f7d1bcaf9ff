"""One remedy per package, decided here: what every judge that finds a package unable to run on this
GPU tells the user to do with it, and the same remedy in a form a program can apply.

Why one place: G1 (no kernel for the GPU) and G2 (flash-attn broken) both judge flash-attn; told
"build flash-attn from source for sm_121" on one line and "uninstall flash-attn, use SDPA" on the
next, a user cannot do both. A package named here gets this remedy from every judge; a package not
named gets the judge's general one (a CUDA 13 build, a build from source for the GPU).

Each remedy carries its changes (``Change``): what applying it changes, as a program would apply
it (``uninstall flash-attn``, ``setting attn_implementation=sdpa``, ``env FLASHINFER_CUDA_ARCH_LIST=12.1a``).
The tests apply them to the readings a verdict was judged from and judge again (tests/test_fixes_agree.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .triton import TritonPtxas, release


@dataclass(frozen=True)
class Change:
    """One thing a fix changes. ``kind``: ``uninstall`` / ``install`` (a distribution), ``env`` (a
    variable set to ``value``), ``mtu`` (an interface's MTU), ``setting`` (a program's option),
    ``power-cycle`` (the machine), ``measure`` (a measurement that decides what comes next: the fix
    changes nothing by itself)."""

    kind: str
    target: str
    value: str = ""

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "target": self.target, **({"value": self.value} if self.value else {})}


@dataclass(frozen=True)
class Remedy:
    text: str  # the instruction, as a fix line gives it
    changes: tuple[Change, ...] = ()


def changes_json(changes: tuple[Change, ...] | list[Change]) -> list[dict[str, Any]]:
    """The changes as a verdict's readings keep them (``readings["remedy"]``)."""
    return [c.to_json() for c in changes]


FLASH_ATTN = Remedy(
    'run pip uninstall -y flash-attn and load models with attn_implementation="sdpa" (bare pip has no '
    "working flash-attn for this GPU; NGC containers ship one that works)",
    (Change("uninstall", "flash-attn"), Change("setting", "attn_implementation", "sdpa")))


def _jit_cache(capability: Optional[tuple[int, int]]) -> Remedy:
    arch = f"{capability[0]}.{capability[1]}a" if capability else "12.1a"
    return Remedy(
        "run pip uninstall -y flashinfer-jit-cache: flashinfer-python then builds each module it needs for this "
        f"GPU on first use (with CUDA 13's nvcc; export FLASHINFER_CUDA_ARCH_LIST={arch}) instead of loading a "
        "prebuilt one that has no kernel for it",
        (Change("uninstall", "flashinfer-jit-cache"), Change("env", "FLASHINFER_CUDA_ARCH_LIST", arch)))


# SGLang serves CUDA 13 builds of sgl-kernel with sm_121a kernels from its own index; PyPI's stop at
# sm_120a (mmcdermott/MEDS_EIC_AR#163: "uv pip install --index-url https://docs.sglang.ai/whl/cu130/
# sgl-kernel==0.3.21+cu130")
SGL_KERNEL = Remedy(
    "reinstall sgl-kernel's CUDA 13 build from SGLang's own index, which carries sm_121a kernels: pip install "
    "--force-reinstall --no-deps --index-url https://docs.sglang.ai/whl/cu130/ sgl-kernel (the release your sglang "
    "pins, with its +cu130 tag)",
    (Change("install", "sgl-kernel", "https://docs.sglang.ai/whl/cu130/"),))


def for_package(name: str, capability: Optional[tuple[int, int]] = None) -> Optional[Remedy]:
    """The one remedy for a package that cannot run here, where this module names one; else None."""
    key = name.lower().replace("_", "-")
    if key == "flash-attn":
        return FLASH_ATTN
    if key == "flashinfer-jit-cache":
        return _jit_cache(capability)
    if key == "sgl-kernel" and capability is not None and capability[0] == 12:
        return SGL_KERNEL
    return None


def power_cycle(spark: bool) -> Remedy:
    """The full power cycle a lost GPU or a link that will not come up asks for (NVIDIA's Xid catalogue:
    RESTART_BM). A Spark's GPU is reset with the machine only, and a warm reboot keeps some states."""
    if spark:
        return Remedy("power-cycle the Spark fully: shut it down, unplug AC power for about 60 s, then boot; if it "
                      "comes back, check its cooling and power (G4) and contact NVIDIA support",
                      (Change("power-cycle", "machine"),))
    return Remedy("restart the machine (the GPU alone: nvidia-smi -r where nothing uses it); if it comes back, check "
                  "the GPU's power, cooling and PCIe seating and contact the vendor",
                  (Change("power-cycle", "machine"),))


def ptxas(found: TritonPtxas, var: str, needed: Optional[tuple[int, int]], target: str) -> Remedy:
    """Point Triton at a ptxas that knows ``target``: one found on this machine, else CUDA 13's
    (triton-lang/triton#8539). G1 (Triton cannot compile for the GPU) and G7 (its FP4 kernels cannot
    target sm_121a) give this one remedy."""
    good = [o for o in found.others if needed and (release(o.release) or (0, 0)) >= needed]
    if good:
        return Remedy(f"export {var}={good[0].path} (CUDA {good[0].release}'s ptxas, found here): Triton then "
                      f"compiles for {target} with it, whatever ptxas it bundles",
                      (Change("env", var, good[0].path),))
    return Remedy(f"install CUDA 13's toolkit (its ptxas compiles for {target}) and export {var}=/usr/local/cuda/bin/"
                  "ptxas (triton-lang/triton#8539)", (Change("env", var, "/usr/local/cuda/bin/ptxas"),))
