"""G5 — bandwidth ceiling: plan memory-bound work from measured bandwidth, not the datasheet.

Figures are GB/s (10^9 bytes/s) at the median repetition, with the byte accounting the
probe names (copy counts read + write, triad three arrays; see microbench/bandwidth.py).

Rules:

- A profile asked for on a machine that is not that platform (`--spark-profile gb10` on a CI
  box or on an H200; the machine's own GPU, or none, decides; a replay decides from the GPU
  the snapshot recorded): its bandwidth stands for nothing on a Spark → **INFO**
  `not a GB10 (NVIDIA H200): bandwidth not judged` (its detail: `this machine is not a GB10
  (NVIDIA H200): its bandwidth cannot stand for a Spark's`), the
  sweep too, whatever was measured (the figures stay in the JSON report).
- A figure more than 5 % above the platform's datasheet bandwidth (its envelope, `profiles.py`:
  GB10 273 GB/s, H100 SXM 3350, PCIe 2039, NVL 3900, H200 4800, GH200 4900), or NVML's theoretical
  peak above it: every byte the probe moves is counted (a copy's read and its write), as the
  datasheet counts them, so no method can pass it; or a recorded CPU architecture or capability
  the platform has none of → **WARN** `read 905 GB/s is 3.3x GB10's 273 GB/s: not a GB10's;
  bandwidth not judged` (the sweep and the decode ceiling too; the detail gives the datasheet): the snapshot, or the
  profile taken for this GPU, is wrong, so nothing is judged from it (never a PASS, never a FAIL).
- Profiles with measured ranges (GB10: copy 180–210, read 231–253, write 180–253, triad
  180–210; H200: its recorded run): a method under 0.75 × the range's low end is far below,
  under 0.9 × below; otherwise **PASS** with the budget in its detail, e.g.
  `G5 PASS: read 232, copy 200 GB/s: within GB10's measured range`, its detail `copy 200, read 232,
  write 210, triad 200 GB/s (1 GiB arrays); budget 200 GB/s copy and 232 GB/s read - not the datasheet's 273`.
- Who else was on the GPU is read while the probe runs (`gpu_window`: NVML's compute processes
  before, every 0.1 s during and after it, and NVML's per-process SM utilization over it; this
  run's own processes left out). A process listed during the probe (or before and after it)
  shared the GPU unless its utilization reads 0. A figure below or far below with such a process →
  **WARN** naming it, "shared with …" (another spark-gotchas run is named as such; fix: re-run once
  it has finished): the figure is theirs as much as the GPU's. A process outside this container
  (another pid namespace's: NVML lists it under a pid not visible here, or not at all) counts the
  same, seen as G4 says: device memory no listed process held while the probe ran, or what the
  run's process list saw at rest where the probe's window cannot compare memory → "shared with a
  process outside this container", fix: find it from the host.
- Nobody else seen: below → **WARN** (check clocks, G4, and other GPU work, then re-run). Far
  below → the probe runs once more before any verdict; far below again with nobody seen →
  **FAIL** "… nothing else on the GPU, twice", both figures in the detail, pointing at clocks
  (G4), the driver, then NVIDIA support; the second look within range → judged on it ("(second
  try)"), the first figures in the detail. Far below with no second measurement (a snapshot of
  an older suite, or the second one failed) → **WARN** "measured once", fix: re-run. A snapshot
  without the probe's window names a process from the run's process list, never "nothing else",
  and is never a **FAIL** on the hardware (a sweep of an older suite: **WARN** "other GPU work
  unknown").
- Profiles without ranges (generic, H100, GH200): the best method against NVML's theoretical
  peak: under 50 % is far below, under 70 % below, with the same causes and verdicts; else
  **PASS**. Neither a range nor a theoretical peak → **INFO** with the figures.
- A kernel whose output is wrong → **FAIL** (check ECC and `dmesg` for Xid errors). The probe
  crashing or hanging → **FAIL**. Not measurable (no torch, a CPU build, no device, too little
  free memory) → **SKIP** with the reason.
- Decode ceiling, with `--spark-model-gb N`: tokens/s ≤ read GB/s ÷ N GB for one batch-1
  sequence (every weight read once per token; KV-cache reads lower it further) → **INFO**,
  next to what the datasheet figure would promise. On a machine that is not the profile's, the
  ceiling comes from the profile's read range instead:
  `G5 INFO: on a GB10, batch-1 decode of 30 GB of weights tops out at 7.7-8.4 tokens/s (read 231-253 GB/s)`.
  Without the option → **SKIP**.
- Sweep: the rules above on the median over sizes of at least 4 × the L2 (several sizes count as
  measured more than once); the largest size under 0.8 × that median → **WARN** (memory pressure
  at that size: see G3 and G6).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

from ...microbench.bandwidth import BandwidthResult, MethodResult
from ..plan import Plan
from ..profiles import SAME, Beyond, Machine, Profile, beyond
from ..readings.bench import BandwidthReading, BandwidthSweepReading
from ..readings.gpu import GpuInventory, GpuProcesses, MeasureWindow, Sharing, sharing
from ..verdict import LINE_COLUMNS, Status, Verdict, format_line

G = 5
FAIL_FRACTION = 0.75  # of the profile range's low end
WARN_FRACTION = 0.9
THEORETICAL_FAIL = 0.5  # of NVML's theoretical peak, profiles without ranges
THEORETICAL_WARN = 0.7
PLATEAU_L2_MULTIPLE = 4
SWEEP_DROP = 0.8
ORDER = ("copy", "read", "write", "triad")
FIX_SLOW = ("find what else uses the GPU or its memory (G6, nvidia-smi, other servers) and check the SM clock "
            "under load (G4, nvidia-smi -q -d PERFORMANCE,CLOCK); a GB10 stuck in a low-power state clears only "
            "after removing AC power for about 60 s; then re-run spark-gotchas -m fast -k g05")
FIX_HARDWARE = ("check the SM clock under load (G4, nvidia-smi -q -d PERFORMANCE,CLOCK), since nothing else ran on "
                "the GPU during either measurement; a GB10 stuck in a low-power state clears only after removing AC "
                "power for about 60 s; then update or reinstall the driver, and if it persists, contact NVIDIA support")
FIX_REMEASURE = ("re-run spark-gotchas -m fast -k g05: this figure was measured once; if it stays far below with "
                 "nothing else on the GPU, check the SM clock under load (G4)")
FIX_SHARED_SUITE = ("re-run spark-gotchas -m fast -k g05 when no other run is measuring: {names} shared the GPU "
                    "with this one, so no figure is the GPU's own")
FIX_WRONG = ("re-run; if it repeats, the GPU or its memory is faulty: check nvidia-smi -q -d ECC,ROW_REMAPPER "
             "and look for Xid errors in dmesg")
FIX_CRASH = "run the G1 checks (first CUDA launch) and look for Xid errors in dmesg, then re-run"
FIX_BUDGET = "budget memory-bound work from these measured figures, not the datasheet"


def _theoretical(inventory: Optional[GpuInventory]) -> Optional[float]:
    dev = inventory.first if inventory is not None else None
    return dev.theoretical_bandwidth_gbps if dev is not None else None


def _fmt(gbps: float) -> str:
    return f"{gbps:.0f}"


def _figures_text(figures: dict[str, float]) -> str:
    return ", ".join(f"{m} {_fmt(figures[m])}" for m in ORDER if m in figures) + " GB/s"


def _ceiling_word(profile: Profile, theoretical: Optional[float]) -> tuple[Optional[float], str]:
    if profile.datasheet_bandwidth_gbps:
        return profile.datasheet_bandwidth_gbps, f"the datasheet's {_fmt(profile.datasheet_bandwidth_gbps)}"
    if theoretical:
        return theoretical, f"NVML's theoretical {_fmt(theoretical)}"
    return None, ""


def _shared_fix(share: Sharing) -> str:
    """Re-run once the process that shared the GPU is gone: the figure was partly its doing."""
    return share.fix("re-run spark-gotchas -m fast -k g05", FIX_SHARED_SUITE if share.only_runs else
                     "stop or pause {names} (G6 says how), then re-run spark-gotchas -m fast -k g05")


def _slow(far: bool, line: str, share: Sharing, readings: dict, detail: str, look: Look, too: str = "",
          short: str = "") -> Verdict:
    """A figure under the yardstick, by who else was on the GPU while it was measured:
    someone busy → WARN naming them; nobody seen → far below is a FAIL only when a second
    measurement agreed (``look.repeated``), else a WARN that asks for a re-run. ``too`` (the other
    methods below, `` (copy, triad too)``) joins the line only where no cause follows it (the
    detail names them all); ``short``: the line in fewer words, where a cause would not fit beside it."""
    readings["busy_pids"] = list(share.pids) if share.busy is not None else None
    readings["outside"] = share.outside.text if share.outside is not None else None
    readings["sharing_sampled"] = share.sampled
    if look.first is not None:
        detail += f"; measured twice: the first read {look.first}"
    if share.busy:
        head = f"{line}: {share.cause}"
        if short and len(format_line(G, Status.WARN, head)) > LINE_COLUMNS:
            head = f"{short}: {share.cause}"
        return Verdict(G, Status.WARN, head, detail=detail + share.aside, fix=_shared_fix(share), readings=readings)
    seen = "nothing else on the GPU" if share.busy is False else "other GPU work unknown"
    if not far:
        return Verdict(G, Status.WARN, line + (f"; {seen}" if share.busy is False else too), detail=detail,
                       fix=FIX_SLOW, readings=readings)
    if look.repeated and share.busy is False:
        return Verdict(G, Status.FAIL, f"{line}; {seen}" + (", twice" if look.first is not None else ""),
                       detail=detail, fix=FIX_HARDWARE, readings=readings)
    if look.repeated:  # measured more than once, but who else ran meanwhile is not known: no verdict on the GPU
        return Verdict(G, Status.WARN, f"{line}; {seen}", detail=detail, fix=FIX_SLOW, readings=readings)
    return Verdict(G, Status.WARN, f"{line}; {seen}, measured once", detail=detail, fix=FIX_REMEASURE,
                   readings=readings)


@dataclass(frozen=True)
class Look:
    """Which measurement a verdict judges: ``repeated`` when a far-below figure has been measured
    again (or over several sizes) with nobody else on the GPU, ``first`` the first one's figures."""

    repeated: bool = False
    first: Optional[str] = None


UNKNOWN = Sharing(None)  # nobody's use of the GPU during the measurement is known
ONCE = Look()  # measured once


def _aside(share: Sharing, look: Look) -> str:
    """What a PASS's detail adds: who shared the GPU meanwhile, and a first measurement that was far below."""
    out = share.aside
    if look.first is not None:
        out += (f"; measured twice: the first read {look.first}, far below with nothing else seen on the GPU, "
                "so something unseen slowed it")
    return out


def far_below(figures: dict[str, float], profile: Profile, inventory: Optional[GpuInventory]) -> bool:
    """Is any figure far below the yardstick (the profile's range, else NVML's theoretical peak)?"""
    ranges = {m: r for m, r in profile.bandwidth_gbps.items() if m in figures}
    if ranges:
        return any(figures[m] < FAIL_FRACTION * r.lo for m, r in ranges.items())
    theoretical = _theoretical(inventory)
    return bool(theoretical and figures and max(figures.values()) < THEORETICAL_FAIL * theoretical)


def wants_second_look(result: Optional[BandwidthResult], window: Optional[MeasureWindow], profile: Profile,
                      inventory: Optional[GpuInventory]) -> bool:
    """Measure once more before any verdict: far below, with nobody else seen on the GPU meanwhile."""
    if result is None:
        return False
    return far_below(probe_figures(result), profile, inventory) and sharing(window).busy is not True


def judge_figures(figures: dict[str, float], profile: Profile, inventory: Optional[GpuInventory],
                  what: str, readings: dict, share: Sharing = UNKNOWN, look: Look = ONCE) -> Verdict:
    """The rules above on per-method figures (GB/s); ``what`` says what was measured."""
    theoretical = _theoretical(inventory)
    readings.update({"gbps": {m: round(v, 1) for m, v in figures.items()}, "profile": profile.key,
                     "theoretical_gbps": round(theoretical, 1) if theoretical else None})
    peak_note = ""
    if theoretical and figures:
        best = max(figures.values())
        peak_note = f"; best {best / theoretical:.0%} of NVML's theoretical {_fmt(theoretical)} GB/s"
    ranges = {m: r for m, r in profile.bandwidth_gbps.items() if m in figures}
    if ranges:
        readings["ranges_gbps"] = {m: [r.lo, r.hi] for m, r in ranges.items()}
        far = [m for m in ORDER if m in ranges and figures[m] < FAIL_FRACTION * ranges[m].lo]
        low = [m for m in ORDER if m in ranges and figures[m] < WARN_FRACTION * ranges[m].lo]
        name = profile.name
        if far or low:
            flagged = far or low
            expected = ", ".join(f"{m} {ranges[m].lo:.0f}-{ranges[m].hi:.0f}" for m in ORDER if m in flagged)
            lead = "read" if "read" in flagged else flagged[0]
            others = [m for m in flagged if m != lead]
            line = (f"{lead} {_fmt(figures[lead])} GB/s, {'far ' if far else ''}below {name}'s "
                    f"{ranges[lead].lo:.0f}-{ranges[lead].hi:.0f}")
            return _slow(bool(far), line, share, readings,
                         f"{_figures_text(figures)} ({what}): {', '.join(flagged)} {'far ' if far else ''}below "
                         f"{name}'s measured range ({expected} GB/s){peak_note}", look,
                         f" ({', '.join(others)} too)" if others else "")
        budget = " and ".join(f"{_fmt(figures[m])} GB/s {m}" for m in ("copy", "read") if m in figures)
        _, ceiling = _ceiling_word(profile, theoretical)
        against = f" - not {ceiling}" if ceiling else ""
        under = [m for m in ORDER if m in ranges and figures[m] < ranges[m].lo]
        over = [m for m in ORDER if m in ranges and figures[m] > ranges[m].hi]
        notes = [f"{', '.join(ms)} {word} it" for ms, word in ((under, "under"), (over, "above")) if ms]
        where = (f"within {1 - WARN_FRACTION:.0%} of " if under else "at or above " if over else "within ") + \
            f"{name}'s measured range"
        lead = [m for m in ("read", "copy") if m in figures]
        line = ", ".join(f"{m} {_fmt(figures[m])}" for m in lead) + " GB/s: " if lead else ""
        return Verdict(G, Status.PASS, f"{line}{where}" + (" (second try)" if look.first is not None else ""),
                       detail=f"{_figures_text(figures)} ({what})" + (f"; {'; '.join(notes)}" if notes else "")
                              + f"; budget {budget}{against}{peak_note}" + _aside(share, look), readings=readings)
    if theoretical:
        best_method = max(figures, key=figures.get)
        fraction = figures[best_method] / theoretical
        readings["fraction_of_theoretical"] = round(fraction, 3)
        line = (f"best {best_method} {_fmt(figures[best_method])} GB/s is {fraction:.0%} of NVML's theoretical "
                f"{_fmt(theoretical)}")
        measured = f"{_figures_text(figures)} ({what})"
        if fraction < THEORETICAL_WARN:
            far = fraction < THEORETICAL_FAIL
            return _slow(far, line + f", under {THEORETICAL_FAIL if far else THEORETICAL_WARN:.0%}", share,
                         readings, measured, look, short=f"{best_method} {_fmt(figures[best_method])} GB/s, "
                                                         f"{fraction:.0%} of NVML's {_fmt(theoretical)}")
        return Verdict(G, Status.PASS, line, detail=f"{measured}; budget from these, not the theoretical peak"
                       + _aside(share, look), readings=readings)
    return Verdict(G, Status.INFO, f"{_figures_text(figures)}: no range or NVML peak to judge by",
                   detail=f"{what}; {profile.title} has no measured range and NVML no theoretical peak: {FIX_BUDGET}",
                   readings=readings)


def _spoiled(profile: Profile, inventory: Optional[GpuInventory], *figures: dict[str, float]) -> Optional[Beyond]:
    """A figure no machine of the profile's platform can reach (its envelope: the datasheet's
    bandwidth, every byte counted), NVML's theoretical peak among them, else None."""
    for some in figures:
        out = beyond(profile, bandwidth=some)
        if out is not None:
            return out
    theoretical = _theoretical(inventory)
    return beyond(profile, bandwidth={"NVML's theoretical": theoretical}) if theoretical else None


def _not_measured(reading, label: str) -> Optional[Verdict]:
    """The SKIP/FAIL verdict when a probe did not give figures, else None."""
    if not reading.attempted:
        return Verdict(G, Status.SKIP, f"{label} not measured: {reading.reason}")
    if reading.problem:
        if reading.crashed:
            return Verdict(G, Status.FAIL, f"{label} crashed or hung: {reading.problem}"[:300], fix=FIX_CRASH)
        return Verdict(G, Status.SKIP, f"{label} could not run: {reading.problem}"[:300])
    if reading.result is None:
        return Verdict(G, Status.SKIP, f"{label}: no result recorded")
    return None


def _wrong(results: list[MethodResult]) -> Optional[Verdict]:
    wrong = [r for r in results if r.check not in ("ok", "") and r.gbps is None]
    if wrong:
        what = "; ".join(f"{r.method} ({r.implementation}): {r.check}" for r in wrong)
        return Verdict(G, Status.FAIL, f"bandwidth probe gave wrong results: {what}"[:300], fix=FIX_WRONG,
                       readings={"wrong": [r.method for r in wrong]})
    return None


def probe_figures(result: BandwidthResult) -> dict[str, float]:
    return {m.method: m.gbps for m in result.methods if m.ok and m.gbps is not None}


def _elsewhere(here: Machine, profile: Profile, reading: Optional[BandwidthReading]) -> Verdict:
    """INFO: this machine is not the profile's platform, so its figures (kept in the readings) are not judged."""
    result = reading.result if reading is not None else None
    figures = probe_figures(result) if result is not None else {}
    return Verdict(G, Status.INFO, here.not_judged(profile, "bandwidth"), detail=here.not_profile(profile, "bandwidth"),
                   readings={"machine_is_profile": False, "machine": here.device,
                             "gbps": {m: round(v, 1) for m, v in figures.items()},
                             "ranges_gbps": {m: [r.lo, r.hi] for m, r in profile.bandwidth_gbps.items()}})


def judge_bandwidth(reading: BandwidthReading, inventory: Optional[GpuInventory], profile: Profile,
                    processes: Optional[GpuProcesses] = None, here: Machine = SAME) -> Verdict:
    """``processes``: the run's process list, used only for a snapshot whose probe has no window
    (an older suite's): it can name a job that was there, never prove that nothing else ran."""
    """The fast probe's figures against the profile (rules in the module docstring)."""
    if not here.is_profile:
        return _elsewhere(here, profile, reading)
    if here.beyond is not None:
        return here.beyond.verdict(G, "bandwidth")
    early = _not_measured(reading, "bandwidth")
    if early is not None:
        return early
    res = reading.result
    wrong = _wrong(res.methods)
    if wrong is not None:
        return wrong
    figures = probe_figures(res)
    if not figures:
        errors = "; ".join(f"{m.method}: {m.error}" for m in res.methods if m.error)
        return Verdict(G, Status.SKIP, f"no bandwidth method could run: {errors}"[:300])
    readings = {"array_bytes": res.array_bytes, "sizing": res.sizing, "backend": res.backend,
                "device": res.device, "probe_seconds": round(res.seconds, 2),
                "implementations": {m.method: m.implementation for m in res.methods}}
    second = probe_figures(reading.again) if reading.again is not None else {}
    spoiled = _spoiled(profile, inventory, figures, second)
    if spoiled is not None:
        return spoiled.verdict(G, "bandwidth", {**readings, "gbps": {m: round(v, 1) for m, v in figures.items()}})
    what = f"{_size(res.array_bytes)} arrays"
    share = sharing(reading.window, processes)
    if second and share.busy is not True and far_below(figures, profile, inventory):
        readings["first_gbps"] = {m: round(v, 1) for m, v in figures.items()}
        return judge_figures(second, profile, inventory, what, readings, sharing(reading.again_window, processes),
                             Look(repeated=True, first=_figures_text(figures)))
    return judge_figures(figures, profile, inventory, what, readings, share)


def judge_decode_ceiling(reading: BandwidthReading, profile: Profile, plan: Plan, here: Machine = SAME) -> Verdict:
    """tokens/s <= read GB/s / weights GB, for batch-1 decode (rules in the module docstring)."""
    model_gb = plan.model_gb
    if model_gb is None:
        return Verdict(G, Status.SKIP, "no planned model size (--spark-model-gb GB): no decode ceiling to state")
    if model_gb <= 0:
        return Verdict(G, Status.SKIP, f"--spark-model-gb {model_gb:g} is not a model size")
    if not here.is_profile:
        return _ceiling_elsewhere(here, profile, model_gb)
    if here.beyond is not None:
        return here.beyond.verdict(G, "decode ceiling")
    early = _not_measured(reading, "bandwidth")
    if early is not None:
        return early
    figures = probe_figures(reading.result)
    spoiled = beyond(profile, bandwidth=figures)
    if spoiled is not None:
        return spoiled.verdict(G, "decode ceiling", {"model_gb": model_gb})
    method = "read" if "read" in figures else (max(figures, key=figures.get) if figures else None)
    if method is None:
        return Verdict(G, Status.SKIP, "no bandwidth figure to compute a decode ceiling from")
    gbps = figures[method]
    tokens = gbps / model_gb
    readings = {"model_gb": model_gb, "method": method, "gbps": round(gbps, 1), "tokens_per_s": round(tokens, 2)}
    promise = ""
    if profile.datasheet_bandwidth_gbps:
        promised = profile.datasheet_bandwidth_gbps / model_gb
        readings["datasheet_tokens_per_s"] = round(promised, 2)
        promise = f" (a plan from the datasheet's {_fmt(profile.datasheet_bandwidth_gbps)} GB/s would expect {promised:.1f})"
    return Verdict(G, Status.INFO,
                   f"batch-1 decode of {model_gb:g} GB of weights tops out at {tokens:.1f} tokens/s ({method} "
                   f"{_fmt(gbps)} GB/s)",
                   detail=f"at most {tokens:.1f} tokens/s per batch-1 sequence at the measured {method} "
                          f"{_fmt(gbps)} GB/s{promise}; KV-cache reads lower it further", readings=readings)


def _ceiling_elsewhere(here: Machine, profile: Profile, model_gb: float) -> Verdict:
    """The decode ceiling from the profile's read range: nothing measured here stands for it."""
    read = profile.bandwidth_gbps.get("read")
    readings = {"model_gb": model_gb, "machine_is_profile": False, "machine": here.device}
    if read is None:
        return Verdict(G, Status.INFO, here.not_judged(profile, "bandwidth") + "; no decode ceiling to state",
                       detail=here.not_profile(profile, "bandwidth") + "; no measured range to state a decode ceiling "
                              "from", readings=readings)
    lo, hi = read.lo / model_gb, read.hi / model_gb
    readings.update({"method": "read", "range_gbps": [read.lo, read.hi], "tokens_per_s": [round(lo, 2), round(hi, 2)]})
    return Verdict(G, Status.INFO, f"on {profile.a_name}, batch-1 decode of {model_gb:g} GB of weights tops out at "
                                   f"{lo:.1f}-{hi:.1f} tokens/s (read {_fmt(read.lo)}-{_fmt(read.hi)} GB/s)",
                   readings=readings)


def judge_sweep(reading: BandwidthSweepReading, inventory: Optional[GpuInventory], profile: Profile,
                processes: Optional[GpuProcesses] = None, here: Machine = SAME) -> Verdict:
    """The sweep's DRAM plateau against the profile, and any drop at the largest size."""
    if not here.is_profile:
        return _elsewhere(here, profile, None)
    if here.beyond is not None:
        return here.beyond.verdict(G, "bandwidth")
    early = _not_measured(reading, "bandwidth sweep")
    if early is not None:
        return early
    sweep = reading.result
    probe_points = [p for p in sweep.points if p.role == "probe"]
    wrong = _wrong(probe_points)
    if wrong is not None:
        return wrong
    floor = PLATEAU_L2_MULTIPLE * (sweep.l2_bytes or 0)
    plateau: dict[str, list[MethodResult]] = {}
    for p in probe_points:
        if p.ok and p.array_bytes >= floor:
            plateau.setdefault(p.method, []).append(p)
    if not plateau:
        return Verdict(G, Status.SKIP, "bandwidth sweep has no size of at least "
                                       f"{PLATEAU_L2_MULTIPLE}x the L2 with a figure")
    figures = {m: statistics.median(p.gbps for p in pts) for m, pts in plateau.items()}
    sizes = sorted({p.array_bytes for pts in plateau.values() for p in pts})
    what = f"median over {len(sizes)} sizes, {_size(sizes[0])}-{_size(sizes[-1])} arrays"
    readings = {"sizes_bytes": sizes, "csv": reading.csv_path, "stopped_early": sweep.stopped_early,
                "per_size_gbps": {m: {str(p.array_bytes): round(p.gbps, 1) for p in pts} for m, pts in plateau.items()}}
    spoiled = _spoiled(profile, inventory, figures, {m: max(p.gbps for p in pts) for m, pts in plateau.items()})
    if spoiled is not None:
        return spoiled.verdict(G, "bandwidth", readings)
    verdict = judge_figures(figures, profile, inventory, what, readings, sharing(reading.window, processes),
                            Look(repeated=len(sizes) > 1))
    if verdict.status in (Status.PASS, Status.INFO):
        drops: list[MethodResult] = []
        for m in sorted(plateau, key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER)):
            largest = max(plateau[m], key=lambda p: p.array_bytes)
            if largest.gbps < SWEEP_DROP * figures[m]:
                drops.append(largest)
        if drops:
            at = {_size(p.array_bytes) for p in drops}
            if len(at) == 1:
                line = (f"bandwidth drops at the largest size ({at.pop()}): "
                        + ", ".join(f"{p.method} {_fmt(p.gbps)}" for p in drops) + " GB/s")
            else:
                line = "bandwidth drops at the largest size: " + ", ".join(
                    f"{p.method} {_fmt(p.gbps)} GB/s at {_size(p.array_bytes)}" for p in drops)
            return Verdict(G, Status.WARN, line,
                           detail=f"under {SWEEP_DROP:.0%} of the plateau {_figures_text(figures)} ({what}): memory "
                                  "pressure at that size",
                           fix="free memory before memory-bound runs (drop the page cache between runs, G3; stop "
                               "other GPU work, G6), then run the sweep again", readings=readings)
    return verdict


def _size(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"
