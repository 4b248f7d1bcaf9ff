"""G7 — NVFP4 slower than FP8 on SM121.

On GB10 (capability 12.1) FP4 needs kernels built for the arch-specific target ``sm_121a``
(or a family target ``sm_12Xf``): plain ``sm_120``/``sm_121`` cubins and PTX run without
``cvt.e2m1x2`` and block-scaled MMA, and NVFP4 ends up slower than FP8.

Rules:

- Capability: NVML's, else torch's, else the profile's (`--spark-profile gb10` judges as 12.1).
- Kernel targets on 12.1: a library is ready when it ships an `sm_121a` cubin, an `sm_12Xf`
  cubin with X ≤ 1, or `compute_121a`/`compute_12Xf` PTX. An installed FP4 library with
  kernels but none ready, or `TORCH_CUDA_ARCH_LIST` set without `12.1a`/`12.0f`/`12.1f` (NGC's
  `8.0 8.6 9.0 10.0 11.0 12.0+PTX` is such a list) → **WARN** "stay on FP8"; with
  `--spark-precision nvfp4` → **FAIL**. Libraries without prebuilt kernels (FlashInfer's JIT
  package) are listed, not judged. All ready → **PASS**. No FP4 kernel library → **INFO**.
  torch is listed but not required: its NVFP4 GEMM is cuBLAS's, measured below; bitsandbytes'
  4-bit formats dequantise in software. Triton's ptxas (`triton.ptxas`, G1's reading) that cannot
  compile for sm_121a (older than CUDA 12.9, or not running) is one more such problem: Triton's FP4
  kernels cannot target it; the fix adds G1's remedy for it (`TRITON_PTXAS_PATH` to a newer ptxas).
- Kernel targets elsewhere → **INFO** naming which libraries carry this GPU's `a` target.
- Rates more than 10 % above the dense datasheet peak of the GPU that ran them (the profile its
  name matches, `spark_gotchas/knowledge/profiles.py`: GB10 BF16 125, FP8 250, NVFP4 500, from
  NVIDIA's 1 PFLOP FP4 with sparsity; H100 SXM and H200 BF16 989, FP8 1979; H100 PCIe 756 / 1513), or a capability that
  GPU does not have (a "GB10" of 12.0) → **WARN** `BF16 181 TFLOP/s: not a GB10 reading; GEMM rates
  not judged` (its detail: `… is 1.4x GB10's 125 TFLOP/s dense peak`): nothing is judged from rates no such GPU can reach.
  A GPU without a profile is not bounded. A recorded CPU architecture the platform has none of
  (an x86_64 "GB10") leaves the rates unjudged the same way.
- Rates on 12.1: NVFP4 slower than FP8 → **FAIL** with the ratio, or **WARN** "shared with …"
  when another process was busy on the GPU while the probe ran (NVML's compute processes and
  per-process utilization, sampled during it; fix: re-run once it has finished); not slower →
  **PASS**;
  NVFP4 not runnable through torch → **WARN** "stay on FP8" (**FAIL** with nvfp4 planned).
- Any GPU: the precision named by `--spark-precision` not runnable → **FAIL**. Otherwise
  **INFO** listing the precisions that run and their TFLOP/s (an H200: `G7 INFO: NVIDIA H200 (cc
  9.0) runs BF16 688, FP8 1258 TFLOP/s; NVFP4 not supported`, its NVFP4 `CUBLAS_STATUS_NOT_SUPPORTED`
  in the detail; the figures measured at length are in `docs/benchmarks.md`), and who shared the GPU
  while they were measured: rates beside another process are not this GPU's own, e.g. `G7 INFO: BF16 264, FP8 497
  TFLOP/s, shared with a process outside this container` (seen as G4 says; one idle at rest is
  named in the detail only).
- A GEMM outside its tolerance, or the probe crashing or hanging → **FAIL**; not measurable
  (no torch, a CPU build, no device) → **SKIP**.
"""

from __future__ import annotations

import re
from typing import Optional

from ..plan import Plan
from ..profiles import GENERIC, NONE, SAME, Machine, Profile, beyond, match
from ..readings import remedies
from ..readings.bench import GemmReading
from ..readings.env import Fp4KernelScan, LibraryKernels, entry_from_target
from ..readings.gpu import GpuInventory, GpuProcesses, sharing
from ..readings.torch import TorchBuild
from ..readings.triton import PTXAS_FIRST, TritonPtxas, compiles_for
from ..verdict import LINE_COLUMNS, TAIL_ROOM, Status, Verdict, fitting, format_line

G = 7
SPARK = (12, 1)
FIX_FP8 = ('stay on FP8 unless the kernels target sm_121a: build extensions with TORCH_CUDA_ARCH_LIST="12.1a" '
           '(FlashInfer: FLASHINFER_CUDA_ARCH_LIST="12.1a") or install builds that ship sm_121a kernels')
FIX_PLANNED = ("plan a precision that runs on this GPU and torch build (the line lists those that ran), or move the "
               "run to a GPU that runs the planned one")
FIX_SHARED = ("re-run spark-gotchas -m fast -k g07 when nothing else uses the GPU: {names} shared it with this "
              "run, so no rate is the GPU's own")
FIX_WRONG = "re-run; if it repeats, a broken kernel or a faulty GPU is the cause: look for Xid errors in dmesg"
FIX_CRASH = "run the G1 checks (first CUDA launch) and look for Xid errors in dmesg, then re-run"
NAMES = {"bf16": "BF16", "fp8": "FP8", "nvfp4": "NVFP4"}


def _name(precision: str) -> str:
    """BF16, FP8, NVFP4; a precision this suite does not know (a newer run's) as recorded."""
    return NAMES.get(precision, str(precision))


def device_capability(inventory: Optional[GpuInventory], build: Optional[TorchBuild],
                      profile: Profile) -> tuple[Optional[tuple[int, int]], str]:
    """(capability, where it came from)."""
    dev = inventory.first if inventory is not None else None
    if dev is not None and dev.capability:
        return tuple(dev.capability), f"{dev.name or 'GPU 0'}"
    if build is not None and build.devices:
        return tuple(build.devices[0].capability), build.devices[0].name
    if profile.capability:
        return tuple(profile.capability), f"the {profile.key} profile"
    return None, ""


def ready_target(target: str, capability: tuple[int, int]) -> bool:
    """Does this cubin/PTX target run FP4 natively on ``capability`` (sm_121a, sm_12Xf, X <= minor)?"""
    entry = entry_from_target(target)
    if entry is None:
        return False
    major, minor = entry.sm // 10, entry.sm % 10
    if entry.suffix == "a":
        return (major, minor) == tuple(capability)
    if entry.suffix == "f":
        return major == capability[0] and minor <= capability[1]
    return False


def arch_list_ready(text: str, capability: tuple[int, int]) -> bool:
    """Whether ``TORCH_CUDA_ARCH_LIST`` (e.g. ``"8.0 9.0 12.0+PTX"``) names 12.1a or 12.Xf."""
    for item in re.split(r"[\s;,]+", text.strip()):
        match = re.fullmatch(r"(\d+)\.?(\d)([af]?)(\+PTX)?", item, re.I)
        if not match:
            continue
        major, minor, suffix = int(match.group(1)), int(match.group(2)), match.group(3).lower()
        if suffix == "a" and (major, minor) == tuple(capability):
            return True
        if suffix == "f" and major == capability[0] and minor <= capability[1]:
            return True
    return False


def _short_targets(lib: LibraryKernels, limit: int = 6) -> str:
    items = [f"{t} x{n}" if n > 1 else t for t, n in lib.targets.items()]
    return ", ".join(items[:limit]) + (f", +{len(items) - limit} more" if len(items) > limit else "")


def _cap_text(cap: tuple[int, int]) -> str:
    return f"{cap[0]}.{cap[1]}"


def _not_spark(cap: tuple[int, int], source: str, listed: str) -> str:
    """``SM90 (NVIDIA H200), not SM121: …``, without the device's name where the line has no room for
    it ("NVIDIA RTX PRO 6000 Blackwell Server Edition")."""
    sm = f"SM{cap[0]}{cap[1]}"
    return fitting(G, Status.INFO, f"{sm} ({source}), not SM121: {listed}", f"{sm}, not SM121: {listed}",
                   tail=TAIL_ROOM)  # G7's rate check may not run beside it


def judge_kernel_targets(scan: Fp4KernelScan, inventory: Optional[GpuInventory], build: Optional[TorchBuild],
                         profile: Profile, plan: Plan, ptxas: Optional[TritonPtxas] = None) -> Verdict:
    """Do the installed FP4 libraries (and TORCH_CUDA_ARCH_LIST, and Triton's ptxas) target sm_121a? (rules above)"""
    precision = plan.precision
    cap, source = device_capability(inventory, build, profile)
    fp4 = [lib for lib in scan.libraries if lib.role == "fp4"]
    context = [lib for lib in scan.libraries if lib.role != "fp4"]
    readings = {
        "capability": list(cap) if cap else None,
        "capability_source": source,
        "torch_cuda_arch_list": scan.torch_cuda_arch_list,
        "torch_arch_list": build.arch_list if build is not None else None,
        "libraries": {lib.distribution: {"version": lib.version, "targets": lib.targets, "role": lib.role,
                                         "files_scanned": lib.files_scanned} for lib in scan.libraries},
        "scan_seconds": round(scan.seconds, 3),
    }
    context_text = "; ".join(f"{lib.label} {lib.version}: {_short_targets(lib) or 'no GPU kernels'}"
                             for lib in context)
    if cap is None:
        listed = "; ".join(f"{lib.label} {lib.version}: {_short_targets(lib) or 'no prebuilt kernels'}"
                           for lib in scan.libraries) or "no FP4-capable library installed"
        return Verdict(G, Status.INFO, "no GPU to judge FP4 kernels against",
                       detail=f"--spark-profile gb10 judges them for a Spark; {listed}", readings=readings)
    ready = {lib.distribution: [t for t in lib.targets if ready_target(t, cap)] for lib in fp4}
    if tuple(cap) != SPARK:
        arch = f"sm_{cap[0]}{cap[1]}a"
        parts = [f"{lib.label} {lib.version}: {'has ' + arch if ready[lib.distribution] else 'no ' + arch}"
                 for lib in fp4]
        listed = "; ".join(parts) or "no FP4 kernel library installed"
        return Verdict(G, Status.INFO, _not_spark(cap, source, listed), detail=context_text, readings=readings)
    missing = [lib for lib in fp4 if lib.files_with_kernels and not ready[lib.distribution]]
    jit_only = [lib for lib in fp4 if not lib.files_with_kernels]
    arch_env = scan.torch_cuda_arch_list
    env_bad = arch_env is not None and arch_env.strip() != "" and not arch_list_ready(arch_env, cap)
    problems = [f"{lib.label} {lib.version} ships {_short_targets(lib)}, none sm_121a/sm_12Xf" for lib in missing]
    if env_bad:
        problems.append(f'TORCH_CUDA_ARCH_LIST="{arch_env}" builds without sm_121a')
    triton_bad = ptxas is not None and compiles_for(ptxas, cap) is False
    if triton_bad:
        tool = ptxas.tool_for(cap[0] * 10 + cap[1])
        used = tool.used if tool is not None else None
        problems.append(f"triton {ptxas.version}'s ptxas " + (f"(CUDA {used.release}) cannot compile for sm_121a"
                                                              if used is not None and used.release else "does not run"))
    readings["not_ready"] = [lib.distribution for lib in missing] + (["TORCH_CUDA_ARCH_LIST"] if env_bad else []) + (
        ["triton"] if triton_bad else [])
    if problems:
        planned = precision == "nvfp4"
        names = [f"{lib.label} {lib.version}" for lib in missing]
        shown = ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")
        found = [f"no sm_121a kernels from {shown}"] if names else []
        if env_bad:
            found.append("TORCH_CUDA_ARCH_LIST builds none" if names else "TORCH_CUDA_ARCH_LIST builds without sm_121a")
        if triton_bad:
            found.append("Triton's ptxas builds none" if found else "Triton's ptxas cannot build sm_121a kernels")
        tail = ", and this run plans NVFP4" if planned else ": stay on FP8"
        fix = FIX_FP8
        if triton_bad:  # Triton's one remedy, the one G1 gives for its ptxas
            tool = ptxas.tool_for(cap[0] * 10 + cap[1])
            fix += "; for Triton's kernels: " + remedies.ptxas(ptxas, tool.env_var if tool else "TRITON_PTXAS_PATH",
                                                             PTXAS_FIRST.get(cap[0] * 10 + cap[1]), "sm_121a").text
        return Verdict(G, Status.FAIL if planned else Status.WARN, "; ".join(found) + tail,
                       detail=f"{'; '.join(problems)}; NVFP4 would run without cvt.e2m1x2"[:400],
                       fix=fix, readings=readings)
    ok = [f"{lib.label} {lib.version} ({', '.join(ready[lib.distribution][:3])})" for lib in fp4
          if ready[lib.distribution]]
    jit = f"; JIT-built at run time: {', '.join(lib.label for lib in jit_only)}" if jit_only else ""
    if ok:
        names = ", ".join(f"{lib.label} {lib.version}" for lib in fp4 if ready[lib.distribution])
        return Verdict(G, Status.PASS, f"FP4 kernels target SM121's arch-specific code: {names}",
                       detail=f"{'; '.join(ok)}{jit}", readings=readings)
    env = f'TORCH_CUDA_ARCH_LIST="{arch_env}"' if arch_env else "TORCH_CUDA_ARCH_LIST unset"
    extra = f"; {context_text}" if context_text else ""
    return Verdict(G, Status.INFO, "no FP4 kernel library with prebuilt kernels installed",
                   detail=f"looked for vLLM, FlashInfer, TensorRT-LLM, Transformer Engine, SGLang{jit}; "
                          f"{env}{extra}"[:400], readings=readings)


def _clip(text: str, limit: int = 160) -> str:
    """torch's error text shortened for the one-line finding (the readings keep all of it)."""
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _rate(r) -> str:
    return f"{r.tflops:.0f}"


def judge_gemm_rates(reading: GemmReading, profile: Profile, plan: Plan,
                     processes: Optional[GpuProcesses] = None, here: Machine = SAME) -> Verdict:
    """Measured NVFP4 vs FP8 (and BF16) GEMM rates (rules above). ``processes``: the run's process
    list, read at rest, for what the probe's own window could not see (another pid namespace's work).
    ``here``: a machine no such platform is (an x86_64 "GB10") has its rates left unjudged."""
    precision = plan.precision
    if here.beyond is not None:
        return here.beyond.verdict(G, "GEMM rates")
    if not reading.attempted:
        return Verdict(G, Status.SKIP, f"GEMM rates not measured: {reading.reason}")
    if reading.problem:
        if reading.crashed:
            return Verdict(G, Status.FAIL, f"GEMM probe crashed or hung: {reading.problem}"[:300], fix=FIX_CRASH)
        return Verdict(G, Status.SKIP, f"GEMM probe could not run: {reading.problem}"[:300])
    res = reading.result
    if res is None:
        return Verdict(G, Status.SKIP, "GEMM probe: no result recorded")
    cap = tuple(res.capability)
    size = f"{res.m}^3" if res.m == res.n == res.k else f"{res.m}x{res.n}x{res.k}"
    readings = {
        "device": res.device, "capability": list(cap), "torch": res.torch, "size": [res.m, res.n, res.k],
        "tflops": {r.precision: round(r.tflops, 1) for r in res.results if r.ok},
        "unsupported": {r.precision: r.error for r in res.results if not r.supported},
        "rel_error": {r.precision: r.rel_error for r in res.results if r.rel_error is not None},
    }
    claimed = match(res.device, cap)  # the platform the rates say they are of (a profile asked for another: not it)
    spoiled = beyond(claimed, capability=cap, tflops={r.precision: r.tflops for r in res.results if r.ok}) \
        if claimed not in (GENERIC, NONE) else None
    if spoiled is not None:
        return spoiled.verdict(G, "GEMM rates", readings)
    wrong = [r for r in res.results if r.supported and r.check not in ("ok", "")]
    if wrong:
        what = "; ".join(f"{_name(r.precision)}: {r.check}" for r in wrong)
        return Verdict(G, Status.FAIL, f"GEMM results outside tolerance at {size}: {what}"[:300], fix=FIX_WRONG,
                       readings=readings)
    share = sharing(reading.window, processes)
    readings["busy_pids"] = list(share.pids) if share.busy is not None else None
    readings["outside"] = share.outside.text if share.outside is not None else None
    aside = share.aside
    runs = {r.precision: r for r in res.results if r.ok}
    not_run = {r.precision: (r.error or r.check or "no figure") for r in res.results if not r.ok}
    rates = ", ".join(f"{_name(p)} {_rate(r)}" for p, r in runs.items())
    rates_text = f"{rates} TFLOP/s at {size}" if rates else f"no precision ran at {size}"
    if precision and precision not in runs:
        why = not_run.get(precision, "not measured")
        return Verdict(G, Status.FAIL, f"{_name(precision)}, the planned precision, does not run here "
                                       f"(cc {_cap_text(cap)}); " + (f"{rates} TFLOP/s do" if rates else
                                                                     "no precision runs"),
                       detail=f"torch {res.torch}: {_clip(why)}; {rates_text}", fix=FIX_PLANNED, readings=readings)
    fp8, fp4 = runs.get("fp8"), runs.get("nvfp4")
    if cap == SPARK:
        if fp8 is not None and fp4 is not None:
            ratio = fp4.tflops / fp8.tflops
            readings["nvfp4_over_fp8"] = round(ratio, 3)
            if ratio < 1.0 and share.busy:
                return Verdict(G, Status.WARN, f"NVFP4 {_rate(fp4)} TFLOP/s is {ratio:.2f}x FP8's {_rate(fp8)}: "
                                               + share.cause, detail=rates_text + aside,
                               fix=share.fix("re-run spark-gotchas -m fast -k g07", FIX_SHARED), readings=readings)
            if ratio < 1.0:
                return Verdict(G, Status.FAIL, f"NVFP4 {_rate(fp4)} TFLOP/s is {ratio:.2f}x FP8's {_rate(fp8)}: "
                                               "NVFP4 is slower here", detail=rates_text, fix=FIX_FP8,
                               readings=readings)
            return Verdict(G, Status.PASS, f"NVFP4 {_rate(fp4)} TFLOP/s = {ratio:.2f}x FP8's {_rate(fp8)}",
                           detail=rates_text + aside, readings=readings)
        if fp4 is None and "nvfp4" in not_run:
            return Verdict(G, Status.WARN, f"NVFP4 GEMM does not run through torch {res.torch} here: stay on FP8",
                           detail=f"{_clip(not_run['nvfp4'])}; {rates_text}", fix=FIX_FP8, readings=readings)
    missing = "; ".join(f"{_name(p)} not supported here: {_clip(why)}" for p, why in not_run.items())
    unsupported = f"; {', '.join(_name(p) for p in not_run)} not supported" if not_run else ""
    head = f"{res.device} (cc {_cap_text(cap)}) runs {rates or 'no precision'}" + (" TFLOP/s" if rates else "")
    if share.busy and not (share.outside is not None and share.outside.idle):  # not this GPU's own rates: say whose
        fits = [h for h in (f"{head}, {share.cause}", f"{rates} TFLOP/s, {share.cause}")
                if len(format_line(G, Status.INFO, h)) <= LINE_COLUMNS]
        head = fits[0] if fits else f"{head}{unsupported}"
    else:
        head += unsupported
    return Verdict(G, Status.INFO, head, detail=rates_text + (f"; {missing}" if missing else "") + aside,
                   readings=readings)
