"""G2 — flash-attn: skip the pip build, watch Unsloth's auto-detect.

Rules:

- flash-attn not installed → **PASS**: SDPA is the right choice, said of where this Python is: on
  bare pip (a venv or the system's pip), in this conda environment (a `conda-meta/` folder in
  `sys.prefix`), here (an NGC PyTorch image). But with torch a CPU build → **INFO** "no attention runs
  on a GPU here" (G1's torch line names the build to install), and with no torch → **INFO**: never
  a PASS about GPU attention where none can run.
- installed but broken → **FAIL** with "uninstall flash-attn, use SDPA": flash-attn's one remedy
  (`readings/remedies.py`), the one G1 gives too for a flash-attn whose kernels do not reach this
  GPU. Broken: the import raises, crashes (the signal is named) or hangs; the interface Unsloth
  imports does not load; the causal call raises; or its output is not finite or differs from an
  fp32 SDPA reference by more than max(2 × torch SDPA's own error in the same dtype, 1e-3) — the
  rule flash-attn's own tests use. A crash on import adds that `import unsloth` will crash the
  same way.
- installed and working, Unsloth installed beside it, and the GPU at or above Unsloth's
  capability gate → **WARN**: Unsloth will ignore `attn_implementation="sdpa"`.
- installed and working, no Unsloth (or a GPU below its gate) → **PASS**.
- installed and importable but no GPU here to try the call → **INFO** (**WARN** with Unsloth
  beside it); torch not installed → **SKIP**.
"""

from __future__ import annotations

from typing import Optional

from ..readings import remedies
from ..readings.attention import FlashAttn, Sdpa, Unsloth
from ..readings.env import ContainerEvidence
from ..readings.torch import TorchBuild
from ..verdict import TAIL_ROOM, Status, Verdict, fitting

G = 2
UNSLOTH_MIN_MAJOR = 8  # unsloth.models._utils: "if major_version >= 8"
FIX_BROKEN = remedies.FLASH_ATTN.text  # flash-attn's one remedy: G1 gives the same for a flash-attn without kernels here
FIX_UNSLOTH = ("call spark_gotchas.fixes.force_sdpa() before `import unsloth` (it hides flash_attn, so Unsloth "
               'sets HAS_FLASH_ATTENTION = False), then check that model.config._attn_implementation == "sdpa"; '
               "or run pip uninstall -y flash-attn")
XFORMERS_NOTE = ("; xformers is installed too, and Unsloth prefers it over SDPA: call "
                 "force_sdpa(hide_xformers=True) instead")


def _cc(capability) -> str:
    """(7, 5) -> ``7.5``."""
    return ".".join(str(part) for part in capability) if capability else "unknown"


def unsloth_picks_flash(flash: FlashAttn, unsloth: Optional[Unsloth]) -> Optional[bool]:
    """Would Unsloth's import-time check set HAS_FLASH_ATTENTION here? None = cannot tell."""
    if unsloth is None or not unsloth.installed or not flash.installed:
        return False
    probe = flash.probe
    if probe is None or not probe.attempted:
        return None
    if not probe.imported or probe.interface is None:
        return False
    minimum = unsloth.min_capability_major or UNSLOTH_MIN_MAJOR
    if probe.capability is not None and probe.capability[0] < minimum:
        return False
    return True


def _sdpa_note(sdpa: Optional[Sdpa]) -> str:
    if sdpa is None or not sdpa.torch_installed:
        return ""
    if sdpa.device and sdpa.ran:
        working = sdpa.working
        if working:
            return f"; SDPA backends that ran on {sdpa.device}: {', '.join(working)}"
        return f"; no SDPA backend ran on {sdpa.device} ({'; '.join(f'{k}: {v}' for k, v in sdpa.ran.items())})"[:300]
    return f"; SDPA not tried on a GPU ({sdpa.problem})" if sdpa.problem else ""


def _unsloth_name(unsloth: Optional[Unsloth]) -> str:
    return f"Unsloth {unsloth.version or '(version unknown)'}" if unsloth is not None else "Unsloth"


def _links(flash: FlashAttn) -> str:
    majors = sorted({m for libs in flash.extensions.values() for m in libs.values()})
    return f" (its extensions link CUDA {', '.join(map(str, majors))} runtime libraries)" if majors else ""


def _broken(flash: FlashAttn) -> Optional[tuple[str, str]]:
    """Why this flash-attn is broken, in a few words and in full; None when it is not."""
    p = flash.probe
    if p is None or not p.attempted:
        return None
    if p.crashed:
        return "importing it crashes the process", f"{p.problem}{_links(flash)}"
    if p.timed_out:
        return "importing or calling it hangs", f"{p.problem}"
    if p.problem:
        return "the probe failed", f"{p.problem}"
    if not p.imported:
        return "import flash_attn fails", f"{p.import_error}{_links(flash)}"
    if p.interface is None:
        return "flash_attn_interface does not load", f"flash_attn imports; the interface: {p.interface_error}"
    if p.gpu_error:
        return "a causal flash_attn_func call fails", f"on {p.device}: {p.gpu_error}"
    if p.agrees is False:
        if not p.finite:
            return "flash_attn_func gives non-finite output", f"on {p.device}"
        return ("flash_attn_func disagrees with SDPA", f"on {p.device}: max |error| {p.max_abs_err_flash:.2e} > "
                f"tolerance {p.tolerance:.2e}")
    return None


def _where(env: Optional[ContainerEvidence]) -> str:
    """Where SDPA without flash-attn is the right choice: ``on bare pip`` (a venv or the system's pip),
    ``in this conda environment``, ``here`` (an NVIDIA image); ``on bare pip`` where it was not recorded."""
    if env is None or env.python_env is None:
        return "on bare pip"
    if env.ngc_vars.get("NVIDIA_PYTORCH_VERSION") or env.ngc_vars.get("PYTORCH_BUILD_VERSION"):
        return "here"
    return "in this conda environment" if env.python_env == "conda" else "on bare pip"


def judge_flash_attn(flash: FlashAttn, unsloth: Optional[Unsloth] = None, sdpa: Optional[Sdpa] = None,
                     build: Optional[TorchBuild] = None, env: Optional[ContainerEvidence] = None) -> Verdict:
    p = flash.probe
    readings = {
        "flash_attn": flash.version if flash.installed else None,
        "unsloth": unsloth.version if unsloth is not None and unsloth.installed else None,
        "unsloth_picks_flash": unsloth_picks_flash(flash, unsloth),
        "flag_users": unsloth.flag_users if unsloth is not None else [],
        "probe": {k: getattr(p, k) for k in ("imported", "interface", "device", "max_abs_err_flash",
                                              "tolerance", "signal", "timed_out")} if p is not None else None,
        "sdpa_working": sdpa.working if sdpa is not None else None,
    }
    note = _sdpa_note(sdpa)
    if not flash.installed:
        after = ""
        if unsloth is not None and unsloth.installed:
            after = f"; {_unsloth_name(unsloth)} falls back to {'xformers' if unsloth.xformers_installed else 'SDPA'}"
        no_torch = (build is not None and not build.installed) or (sdpa is not None and not sdpa.torch_installed)
        if no_torch:
            return Verdict(G, Status.INFO, "flash-attn and torch are not installed: no attention runs here",
                           detail=(after + note)[2:], readings=readings)
        if build is not None and build.installed and not build.import_error and not build.worker_problem \
                and build.cuda_major is None:
            return Verdict(G, Status.INFO, fitting(G, Status.INFO, f"torch {build.version} is a CPU build: no attention "
                                                               "runs on a GPU here; flash-attn not installed",
                                                   "torch is a CPU build: no attention runs on a GPU here; flash-attn "
                                                   "not installed"),
                           detail=("G1's torch line names the build to install" + after + note), readings=readings)
        return Verdict(G, Status.PASS, "flash-attn is not installed: attention uses torch SDPA, the right choice "
                                       f"{_where(env)}", detail=(after + note)[2:], readings=readings)
    name = f"flash-attn {flash.version or '(no metadata)'}"
    if p is None:
        return Verdict(G, Status.SKIP, f"{name} is installed but was not tried: the reading holds no probe",
                       readings=readings)
    if not p.attempted:
        return Verdict(G, Status.SKIP, f"{name} is installed but could not be tried: {p.reason}", readings=readings)
    broken = _broken(flash)
    if broken is not None:
        why, more = broken
        if unsloth is not None and unsloth.installed and p is not None and p.crashed:
            why += "; `import unsloth` will crash too"
            more += f"; {_unsloth_name(unsloth)} imports flash_attn"
        return Verdict(G, Status.FAIL, f"{name} is installed but broken: {why}", detail=more[:400], fix=FIX_BROKEN,
                       readings={**readings, "remedy": remedies.changes_json(remedies.FLASH_ATTN.changes)})
    picks = unsloth_picks_flash(flash, unsloth)
    if picks:
        where = "unsloth.models._utils" if unsloth is None or unsloth.flag_decided_there else (
            "its import-time check (HAS_FLASH_ATTENTION not found in unsloth/models/_utils.py: a new layout)")
        copies = f", read by {len(unsloth.flag_users)} more modules" if unsloth and unsloth.flag_users else ""
        ignores = f"{_unsloth_name(unsloth)} will ignore attn_implementation=\"sdpa\": {name}"
        summary = fitting(G, Status.WARN, f"{ignores} works on {p.device}", f"{ignores} works here") \
            if p is not None and p.gpu_tried else f"{ignores} imports (no GPU here to try a call)"
        return Verdict(G, Status.WARN, summary, detail=f"Unsloth sets HAS_FLASH_ATTENTION in {where}{copies}",
                       fix=FIX_UNSLOTH + (XFORMERS_NOTE if unsloth is not None and unsloth.xformers_installed else ""),
                       readings=readings)
    if not p.gpu_tried:
        return Verdict(G, Status.INFO, f"{name} imports, but no call was tried: {p.gpu_reason}", detail=note[2:],
                       readings=readings)
    if unsloth is not None and unsloth.installed:
        minimum = unsloth.min_capability_major or UNSLOTH_MIN_MAJOR
        beside = f"{_unsloth_name(unsloth)} will not pick it (compute capability {_cc(p.capability)} < {minimum})"
    else:
        beside = "Unsloth is not installed"
    return Verdict(G, Status.PASS, fitting(G, Status.PASS, f"{name} works on {p.device}; {beside}",
                                           f"{name} works here; {beside}", tail=TAIL_ROOM),
                   detail=f"a causal call agrees with SDPA (max |error| {p.max_abs_err_flash:.1e} <= "
                          f"{p.tolerance:.1e}){note}", readings=readings)
