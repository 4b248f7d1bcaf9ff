"""Whether a package's GPU code runs on a GPU: the cubin and PTX rules, applied per translation unit.

Why here: the env.cuda_extensions reading records each object's fatbin units by their targets
(``sm_80 sm_90 compute_90@8.3``: PTX with its ISA version); G1 asks of them "does this package have
code for this GPU, and how much of it". The rules (NVIDIA's CUDA compatibility rules, the PTX ISA
release history; docs/checks/g01.md cites both):

- a cubin runs on a GPU of the same major with a minor at or below the GPU's (sm_120 runs on sm_121);
  a family cubin (``sm_120f``) the same; an arch-specific one (``sm_120a``, ``sm_90a``) only on that
  very GPU;
- PTX is compiled by the driver for any GPU at or above its virtual arch (``compute_90`` on sm_121;
  ``compute_120f`` within its family, ``compute_120a`` on sm_120 only), when the driver knows its ISA
  version: ISA 9.0 is CUDA 13.0's, so a CUDA 13.0 driver refuses ISA 9.3 (``cuda_libs.ptx_cuda``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import cuda_libs
from .env import entry_from_target


def runs(token: str, capability: tuple[int, int], driver_cuda: Optional[tuple[int, int]]) -> tuple[bool, str]:
    """(does this target run on a GPU of ``capability``, why not when the PTX's ISA alone stops it).
    ``token`` is a unit's target: ``sm_120f``, ``compute_90@8.3``."""
    target, _, isa = token.partition("@")
    entry = entry_from_target(target)
    if entry is None:
        return False, ""
    have = capability[0] * 10 + capability[1]
    if entry.suffix == "a":
        fits = entry.sm == have
    elif entry.kind == "ptx" and not entry.suffix:
        fits = entry.sm <= have
    else:
        fits = entry.sm // 10 == capability[0] and entry.sm <= have
    if not fits or entry.kind != "ptx" or not isa or driver_cuda is None:
        return fits, ""
    needs = cuda_libs.ptx_cuda(isa)
    if needs is not None and needs > driver_cuda:
        return False, f"{target} is PTX ISA {isa}, which needs a CUDA {needs[0]}.{needs[1]} driver"
    return True, ""


def _specialised(tokens: list[str]) -> bool:
    """Every target arch-specific or family (sm_90a, sm_100f): code made for other GPUs on purpose."""
    entries = [entry_from_target(t.split("@")[0]) for t in tokens]
    return all(e is not None and e.suffix for e in entries)


@dataclass
class CodeView:
    """A package's GPU code judged for one GPU (or for one of its builds)."""

    units: int = 0
    runnable: int = 0  # units with a cubin or compilable PTX for the GPU
    general: int = 0  # units with a target for no GPU in particular (not only sm_90a, sm_100f …)
    general_runnable: int = 0
    cubins: list[str] = field(default_factory=list)  # cubin targets that run on it
    ptx: list[str] = field(default_factory=list)  # PTX targets that run on it, with their ISA
    refused: list[str] = field(default_factory=list)  # why PTX that would reach it does not (ISA too new)
    other_gpus: dict[str, list[str]] = field(default_factory=dict)  # file -> targets: code for other GPUs only
    targets: list[str] = field(default_factory=list)
    dead: dict[str, list[str]] = field(default_factory=dict)  # file -> its targets: no unit of it runs on the GPU
    live: list[str] = field(default_factory=list)  # files with a unit that runs on it

    @property
    def runs(self) -> Optional[bool]:
        """None when there is no code to judge; False when none runs, or most general units lack it."""
        if not self.units:
            return None
        if not self.runnable:
            return False
        return not (self.general and self.general_runnable * 2 < self.general)


def view(units: dict[str, dict[str, int]], capability: tuple[int, int],
         driver_cuda: Optional[tuple[int, int]]) -> CodeView:
    """Judge every unit of every file: how many hold code for the GPU, by cubin or by PTX."""
    out = CodeView()
    cubins, ptx, refused, targets = set(), set(), set(), set()
    for path, by_key in units.items():
        file_runs = False
        file_tokens: set[str] = set()
        for key, count in by_key.items():
            tokens = key.split()
            file_tokens.update(tokens)
            verdicts = [(t, *runs(t, capability, driver_cuda)) for t in tokens]
            ok = [t for t, fits, _ in verdicts if fits]
            out.units += count
            general = not _specialised(tokens)
            out.general += count if general else 0
            if ok:
                file_runs = True
                out.runnable += count
                out.general_runnable += count if general else 0
                cubins.update(t for t in ok if t.startswith("sm_"))
                if not any(t.startswith("sm_") for t in ok):
                    ptx.update(t for t in ok)
            refused.update(why for _, _, why in verdicts if why)
        targets.update(t.split("@")[0] for t in file_tokens)
        if file_runs:
            out.live.append(path)
        else:
            out.dead[path] = sorted({t.split("@")[0] for t in file_tokens}, key=_order)
        if not file_runs and _specialised(sorted(file_tokens)):
            out.other_gpus[path] = out.dead[path]
    out.cubins = sorted(cubins, key=_order)
    out.ptx = sorted(ptx, key=lambda t: _order(t.split("@")[0]))
    out.refused = sorted(refused)
    out.targets = sorted(targets, key=_order)
    return out


def _order(target: str) -> tuple:
    entry = entry_from_target(target)
    return (2, 0, target) if entry is None else (entry.kind == "ptx", entry.sm, entry.suffix)
