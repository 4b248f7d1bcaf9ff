"""G1 — CUDA 12/13 ABI mismatch.

Rules:
- torch's CUDA major (``torch.version.cuda``) must equal the driver's (NVML
  ``nvmlSystemGetCudaDriverVersion``; without a driver, the profile's, GB10 -> 13). A torch
  built for a newer CUDA than the driver is a FAIL everywhere. An older one is a FAIL under the
  GB10 profile (the Spark failure) and a WARN elsewhere, where the driver's backward
  compatibility usually carries it. The ``+cuXXX`` tag is not used: NGC builds carry none.
- Every compiled extension linking ``libcudart.so.N`` (or another soname that names the CUDA
  major) with N != the expected major is a FAIL naming its distribution. Extensions that
  link two different majors between them are a FAIL even when no driver says which is right.
- The first CUDA launch, tried in a child process, must run and give the right answer:
  a crash (signal), a hang (timeout) or an exception is a FAIL.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Optional

from ..profiles import Profile
from ..readings.env import ExtensionScan
from ..readings.gpu import GpuInventory
from ..readings.torch import FirstLaunch, TorchBuild
from ..verdict import Status, Verdict

G = 1


def _outside_torch(path: Optional[str]) -> str:
    """``path`` when an import of torch failed in a file of another package (a broken pynvml that
    torch imports, say), else ''."""
    if not path or path.startswith("<"):
        return ""
    parts = PurePath(path).parts
    return "" if "torch" in parts or "torchgen" in parts else path


def shadow_fix(path: str) -> str:
    """What to do about a foreign module named pynvml (not the driver, not torch)."""
    return (f"remove or rename {path}: a module named pynvml there hides nvidia-ml-py's "
            f"(torch imports pynvml too); check the current folder and PYTHONPATH; reinstalling torch "
            f"or the driver will not help")


def _is_pynvml(path: str) -> bool:
    """True for the file of a module named pynvml (``pynvml.py`` or ``pynvml/__init__.py``)."""
    parts = PurePath(path).parts
    return parts[-1:] == ("pynvml.py",) or parts[-2:] == ("pynvml", "__init__.py")


FIX_INDEX = (
    "reinstall torch for the driver's CUDA: pip install --force-reinstall torch "
    "--index-url https://download.pytorch.org/whl/cu130 (or use a matched NGC container)"
)


def expected_major(inventory: Optional[GpuInventory], profile: Profile) -> tuple[Optional[int], str]:
    """The CUDA major this environment must match, and where that figure came from."""
    if inventory is not None and inventory.cuda_driver_major is not None:
        return inventory.cuda_driver_major, f"driver {inventory.driver_version} supports CUDA {inventory.cuda_driver_text}"
    if profile.cuda_major is not None:
        return profile.cuda_major, f"no driver read; the {profile.key} profile expects CUDA {profile.cuda_major}"
    return None, ""


def judge_torch(build: TorchBuild, inventory: Optional[GpuInventory], profile: Profile) -> Verdict:
    major, source = expected_major(inventory, profile)
    readings = {"torch": build.version, "torch_cuda": build.cuda, "expected_cuda_major": major, "source": source}
    if not build.installed:
        return Verdict(G, Status.SKIP, "torch is not installed: no torch CUDA build to check", readings=readings)
    shadow = inventory.pynvml_shadow if inventory is not None else None
    if build.worker_problem:
        if shadow:  # torch imports pynvml: the foreign one is the likelier culprit
            return Verdict(G, Status.FAIL, f"import torch crashed or hung in a child process: {build.worker_problem} "
                                           f"(torch imports pynvml, and {shadow} is not nvidia-ml-py's)"[:300],
                           fix=shadow_fix(shadow), readings=readings)
        return Verdict(G, Status.FAIL, f"import torch crashed or hung in a child process: {build.worker_problem}",
                       fix=FIX_INDEX, readings=readings)
    if build.import_error:
        elsewhere = _outside_torch(build.import_error_file)
        if elsewhere and shadow and _is_pynvml(elsewhere):
            return Verdict(G, Status.FAIL, f"import torch fails in {elsewhere}: {build.import_error}"[:300],
                           fix=shadow_fix(elsewhere), readings=readings)
        if elsewhere:
            return Verdict(G, Status.FAIL, f"import torch fails in {elsewhere}: {build.import_error}"[:300],
                           fix=f"{elsewhere} is not part of torch: repair or remove the package it belongs to "
                               f"(pip show -f, pip uninstall); reinstalling torch will not help",
                           readings=readings)
        hint = " (a CUDA 12 build on a CUDA 13 system)" if "so.12" in build.import_error else ""
        return Verdict(G, Status.FAIL, f"import torch fails{hint}: {build.import_error}"[:300], fix=FIX_INDEX,
                       readings=readings)
    if build.cuda_major is None:
        if major is None:
            return Verdict(G, Status.SKIP, f"torch {build.version} is a CPU build and no NVIDIA driver is present",
                           readings=readings)
        return Verdict(G, Status.FAIL, f"torch {build.version} is a CPU build; {source}", fix=FIX_INDEX,
                       readings=readings)
    if major is None:
        return Verdict(G, Status.SKIP,
                       f"torch {build.version} is built for CUDA {build.cuda}, but no NVIDIA driver is present to "
                       "compare with (use --spark-profile gb10 to judge against a Spark's CUDA 13)",
                       readings=readings)
    if build.cuda_major == major:
        return Verdict(G, Status.PASS, f"torch {build.version} is built for CUDA {build.cuda}; {source}",
                       readings=readings)
    if build.cuda_major > major or profile.key == "gb10":
        return Verdict(G, Status.FAIL, f"torch {build.version} is built for CUDA {build.cuda} but {source}",
                       fix=FIX_INDEX, readings=readings)
    return Verdict(G, Status.WARN,
                   f"torch {build.version} is built for CUDA {build.cuda}, older than the driver's ({source}); "
                   "it runs through backward compatibility but extensions built for the driver's CUDA will not match",
                   fix=FIX_INDEX, readings=readings)


def judge_extensions(scan: ExtensionScan, inventory: Optional[GpuInventory], profile: Profile) -> Verdict:
    major, source = expected_major(inventory, profile)
    majors_seen = sorted({m for ext in scan.linked for m in ext.cuda_libs.values()})
    readings = {
        "shared_objects": scan.shared_objects,
        "scan_seconds": round(scan.seconds, 3),
        "linked": len(scan.linked),
        "majors_seen": majors_seen,
        "expected_cuda_major": major,
    }
    scanned = f"{scan.shared_objects} shared objects scanned in {scan.seconds:.2f} s"
    if major is None:
        if len(majors_seen) > 1:
            offenders = _name_offenders(scan, min_count_major(scan))
            return Verdict(G, Status.FAIL, f"extensions link different CUDA majors {majors_seen}: {offenders}",
                           fix=_fix_for(scan, min_count_major(scan)), readings=readings)
        found = f"{len(scan.linked)} link CUDA {majors_seen[0]}" if majors_seen else "none links a CUDA runtime"
        return Verdict(G, Status.INFO,
                       f"{scanned}; {found}; no driver to compare with (--spark-profile gb10 judges for a Spark)",
                       readings=readings)
    bad = [ext for ext in scan.linked if any(m != major for m in ext.cuda_libs.values())]
    readings["mismatched"] = [
        {"distribution": ext.distribution, "path": ext.path, "libs": ext.cuda_libs} for ext in bad
    ]
    if bad:
        return Verdict(G, Status.FAIL,
                       f"{len(bad)} extension(s) link a CUDA runtime other than {major}: {_name_offenders(scan, major)}",
                       fix=_fix_for(scan, major), readings=readings)
    linked = f"{len(scan.linked)} link CUDA {major}" if scan.linked else "none links a CUDA runtime"
    return Verdict(G, Status.PASS, f"{scanned}; {linked}, matching the driver's CUDA {major}", readings=readings)


def min_count_major(scan: ExtensionScan) -> int:
    """With no driver, the majority major is taken as intended; the others are the offenders."""
    counts: dict[int, int] = {}
    for ext in scan.linked:
        for m in set(ext.cuda_libs.values()):
            counts[m] = counts.get(m, 0) + 1
    return max(counts, key=lambda m: counts[m])


def _offenders(scan: ExtensionScan, major: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ext in scan.linked:
        wrong = [s for s, m in ext.cuda_libs.items() if m != major]
        if wrong:
            out.setdefault(ext.distribution or f"(no distribution) {ext.path}", []).extend(wrong)
    return out


def _name_offenders(scan: ExtensionScan, major: int) -> str:
    items = []
    for dist, libs in _offenders(scan, major).items():
        items.append(f"{dist} ({', '.join(sorted(set(libs)))})")
    text = "; ".join(items[:6])
    return text + (f"; +{len(items) - 6} more" if len(items) > 6 else "")


def _fix_for(scan: ExtensionScan, major: int) -> str:
    dists = [d for d in _offenders(scan, major) if not d.startswith("(no distribution)")]
    names = " ".join(sorted(set(dists))) or "the packages named above"
    return (f"reinstall {names} built for CUDA {major} (their cu{major}0 wheels or from source), "
            "or use a matched NGC container")


def judge_first_launch(launch: FirstLaunch) -> Verdict:
    readings = {"attempted": launch.attempted, "ok": launch.ok, "signal": launch.signal,
                "timed_out": launch.timed_out, "seconds": launch.seconds}
    if not launch.attempted:
        return Verdict(G, Status.SKIP, f"first CUDA launch not tried: {launch.reason}", readings=readings)
    if launch.ok:
        took = f" in {launch.seconds:.2f} s" if launch.seconds is not None else ""
        return Verdict(G, Status.PASS, f"first CUDA kernel ran in a child process{took}", readings=readings)
    if launch.signal:
        what = f"crashed with {launch.signal}"
    elif launch.timed_out:
        what = "hung (killed at the timeout)"
    else:
        what = "failed"
    return Verdict(G, Status.FAIL, f"first CUDA launch {what}: {launch.reason}"[:300], fix=FIX_INDEX,
                   readings=readings)
