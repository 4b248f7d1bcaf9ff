"""G4 — thermal throttling: at rest, under a 3 s load, after a reboot, and over a soak.

Rules:

At rest: a thermal or power-brake reason active (HW slowdown `0x8`, SW thermal `0x20`,
HW thermal `0x40`, HW power brake `0x80`), or the temperature at or above a positive slowdown
threshold → **WARN**; otherwise **INFO** with the figures and the counters since the driver
loaded (history, not judged: they may be months old). No NVML → **SKIP**. A GPU busy at rest
(utilization 10 % or more; without a utilization figure, power at half its limit or more) is
another process's work, named from the run's process list read at rest: a process NVML lists
there, or one outside this container (a pid not visible here, memory no listed process holds, or
nothing listed at all: see G6) → **INFO** `not at rest: a process outside this container uses the
GPU (100% busy, 700.8 W)`; with a reason or temperature as above → **WARN** `throttling at rest,
the GPU in use by …`, fix: stop it (or find it from the host), then re-run; never the cooling.

Readings no machine of the profile's platform can give (its envelope, `profiles.py`), at rest,
under load and in the soak: a power limit above the platform's maximum (H100 PCIe 350 W, SXM
700 W), on a GB10 a power limit or a draw of 240 W or more (NVML reports no limit there, and 240 W
feeds the whole box), an SM clock or max clock above its maximum (GB10 3003 MHz, Hopper 1980 MHz),
the load's TFLOP/s more than 10 % above the dense datasheet peak (GB10 BF16 125), or a recorded CPU
architecture or capability it has none of → **WARN** `BF16 181 TFLOP/s is 1.4x GB10's 125 TFLOP/s:
not a GB10's; clocks not judged` (at rest: `power limit 240 W is no GB10's: not a GB10 reading; clocks
not judged`): the snapshot, or the profile taken for this GPU, is wrong,
so nothing is judged from it (never a PASS, never a FAIL).

Under load (spot check):
- a profile asked for on a machine that is not that platform (`--spark-profile gb10` on a CI box
  or an H200; a replay decides from the GPU the snapshot recorded) → **INFO**
  `not a GB10 (NVIDIA H200): clocks not judged` (its detail: `this machine is not a GB10
  (NVIDIA H200): its clocks under load cannot stand for a Spark's`);
- no NVML, or neither load can run (no cuBLAS and no CUDA torch) → **SKIP**; the load
  crashed, hung or raised → **FAIL** (a hang of the torch-free load too; a crash or error there
  only moves the load to torch);
- **load-adequacy gate**: the GPU busy less than 80 % of the time (the lower of the load's own
  busy fraction, from CUDA events, and NVML utilization) → **INFO** "inconclusive" — a lightly
  loaded GPU may clock down for good reasons;
- median SM clock under load (the first 0.3 s of ramp left out) below the **floor** → **FAIL**.
  Floor: GB10 1400 MHz; H200/H100/GH200 half their max SM clock (990 MHz); a GPU without a
  profile half the max clock NVML reports; no max clock → not judged;
- a thermal or power-brake reason active in any sample, or a thermal/power-brake counter
  growing during the check → **WARN**. The SW power cap alone is no finding: a GPU at its power
  limit caps by design (on GB10 it always dominates the counters); the detail mentions it. While
  another process shared the GPU (as below) its load heats and draws power too → **WARN**
  `throttling under load: shared with …` naming it, the events in the detail, fix: stop it or
  re-run once it has finished; never the cooling;
- clocks and power fine but the throughput **far below** the profile's own GEMM figure for the
  load's precision (under 0.7 × the range's low end: GB10 BF16 94–98 TFLOP/s, so under 66) →
  **WARN**, by who else was on the GPU while the load ran (NVML's compute processes sampled
  before, during and after it, and per-process SM utilization; this run's own left out): a process
  that shared the GPU → "shared with …" naming it (another spark-gotchas run as such), fix: stop it
  or re-run once it has finished. A process outside this container counts as one too: device
  memory no listed process held while the load ran (256 MiB or more, the driver's reserve apart;
  2 GiB where NVML does not split the reserve out; seen in two samples in a row, and only while
  this run's own process is listed), or, where the load's window cannot compare memory, what the
  run's process list saw at rest (a pid hidden here, a GPU busy before this run used it); a pid
  listed at rest is never taken for this run's own. One seen idle at rest only holds memory
  ("beside a process outside this container holding 22.5 GB (idle at rest)"), fix: find it from
  the host; nobody seen → the load runs once more first, and only a second
  rate far below with nobody seen says "twice" with the driver and NVIDIA support in the fix (both
  rates in the detail; where NVML could not list the processes, the fix asks what else uses the
  GPU instead); a second rate that is fine is judged instead ("(second try)"); no second rate →
  "measured once", fix: re-run. A snapshot without the load's window names a process from
  the run's process list, never "nothing else". A profile without that figure is not judged on it;
- otherwise **PASS** with clock and throughput (power and temperature in the detail).

Reboot: no heartbeat → **SKIP**. The last soak ended with `completed` → **PASS**; ended
otherwise (cut short, load failed) → **INFO**. No end marker and the boot id changed (or,
where no boot id is readable, the boot time moved past the last heartbeat) →
**FAIL** `the last soak ended in a reboot/power loss at about <last heartbeat>` (its detail:
when the soak started and how the reboot shows). Same boot and the soak's process alive →
**INFO** "running now"; gone → **INFO** "killed" (an OOM kill or `kill -9`, not a reboot).
Times are UTC so a replay prints the same line.

A watched run (`watch.earlier`: the heartbeats earlier runs of `spark-gotchas watch` left in the
state folder, `$SPARK_GOTCHAS_STATE_DIR`, else `~/.local/state/spark-gotchas`; a watch whose job
ended by itself leaves none): one without an end marker written before this boot →
**FAIL** `the watched run `CMD` (started T) ended in a reboot/power loss at about <last heartbeat>`,
the fix the soak's; one of this boot whose watch is gone → **INFO** "killed with its watch"; one
whose watch runs now → **INFO**; none of these → **PASS**; no heartbeat → **SKIP** (as for the
soak); the folder there but unlistable → **SKIP**. The preflight leaves the files; the next watch says each once and removes it.

Soak: see "Judging a soak" below.

Soak (`thermal.soak`, `pytest -m soak`): Windows at least half the planned window length are judged ("full" windows).
- not run → **SKIP**; the load failed before a full window → **SKIP**, after one → **FAIL**;
- no full window → **INFO** "too short to judge";
- load-adequacy gate on the median window (as above) → **INFO** "inconclusive";
- median SM clock below the floor → **FAIL** (a stuck unit makes no drift, so this comes first);
- throughput of the last full window more than the allowed fraction (default 10 %) below the
  first's:
  - with throttling evidence → **FAIL** naming the cause and when the fall began. Evidence,
    in windows after the first: a thermal/power-brake reason active or its counter growing;
    the SW power cap's share of the time up by 10 points or more; the SM clock down 5 % or
    more; power flat (within 5 %) under 60 % of the rated figure over the last half **while**
    the temperature kept rising (5 °C or more overall, still ≥ 0.1 °C/min over the last half).
    That last sign counts only here, when throughput falls with it: a Spark's power always
    settles near 100 W and warm-up always raises the temperature, so neither alone fails a
    healthy box;
  - without evidence → **WARN**: something else slowed the load (another job, G6);
- otherwise **PASS**: throughput first → last, sustained power vs rated (GB10: vs the 240 W
  brick), max temperature, SM clock range (in the detail); throttle events without a fall and
  a temperature still rising at the end are named there.
- cut short (SIGINT/SIGTERM): judged on what it measured, and it says so first ("cut short by
  SIGINT after X of Y"); where that would be a **PASS** it is a **WARN** ("held over what ran"),
  with the fix to run it for its whole length: a soak that did not run its plan cannot say the
  throughput held over it. The run then ends as pytest ends an interrupted one (exit status 2).
  A soak that ran its whole planned duration is not cut short, whenever a signal came: it is
  judged as completed.
"""

from __future__ import annotations

import statistics
from typing import Any, Optional

from ...base.units import duration_text, hms, human_us, pct, utc
from ..profiles import SAME, Beyond, Machine, Profile, beyond
from ..readings.gpu import BUSY_POWER_OF_LIMIT, BUSY_UTILIZATION_PCT, GpuProcesses, Outside, Sharing, sharing
from ..readings.thermal import (
    COUNTER_NAMES,
    REASON_NAMES,
    SW_POWER_CAP,
    THROTTLE_BITS,
    THROTTLE_COUNTERS,
    RebootCheck,
    SoakReading,
    SoakWindow,
    SpotCheck,
    ThermalSample,
    ThermalSnapshot,
    reason_names,
)
from ..readings.watch import EarlierWatches, WatchHeartbeat
from ..verdict import Status, Verdict, fitting

G = 4
BUSY_MIN = 0.80
FLOOR_FRACTION_OF_MAX = 0.5
CLOCK_FALL = 0.05
CAP_SHARE_RISE = 0.10
PLATEAU_CV = 0.05
PLATEAU_OF_RATED = 0.60
TEMP_RISE_MIN_C = 5.0
TEMP_SLOPE_MIN_C_PER_MIN = 0.1

FIX_STUCK_GB10 = ("power-cycle the Spark fully: shut it down, unplug AC power for about 60 s, then boot "
                  "(a reboot does not clear the low-power state); if it comes back, contact NVIDIA support")
FIX_STUCK = ("look for an applied clock or power cap with nvidia-smi -q -d CLOCK,POWER (locked or applications "
             "clocks, a lowered power limit), then check cooling and power delivery and re-run")
FIX_COOLING = ("improve cooling (clear intake and exhaust, cooler room, nothing stacked on or against the unit) "
               "or cap run length and checkpoint before throttling sets in")
FIX_REBOOT_COMMON = ("improve cooling and cap run length (checkpoint often); read the last boot's kernel log "
                     "(journalctl -k -b -1 | tail -50) for a thermal or power event")
FIX_REBOOT = FIX_REBOOT_COMMON + "; then run a new soak (spark-gotchas -m soak), which replaces this record"
FIX_LOAD = ("re-run with no other GPU job; if it repeats, look for Xid errors (sudo dmesg | grep -i xid) "
            "and check the G1 lines")
FIX_UNEXPLAINED = ("look for other GPU or CPU jobs that ran during the soak (G6, nvidia-smi, top), stop them, then run "
                   "the soak again")
FIX_CUT_SHORT = ("run the soak again for its whole planned length (spark-gotchas -m soak --soak-duration {planned}) "
                 "before trusting a long run to this machine")


# -- small formatters ----------------------------------------------------------------------






def counters_text(values_us: dict[str, float]) -> str:
    order = ("sw_power_cap", "sw_thermal", "hw_thermal", "hw_power_brake", "thermal")
    return ", ".join(f"{COUNTER_NAMES[k]} {human_us(values_us[k])}" for k in order if k in values_us)


def clock_floor(profile: Profile, max_sm_clock_mhz: Optional[float]) -> tuple[Optional[float], str]:
    """The under-load SM clock floor and where it comes from."""
    if profile.sm_clock_floor_mhz:
        return profile.sm_clock_floor_mhz, f"{profile.key} profile"
    top = profile.max_sm_clock_mhz or max_sm_clock_mhz
    if top:
        return top * FLOOR_FRACTION_OF_MAX, f"half the {top:.0f} MHz max"
    return None, "no max clock known"


def rated_power(profile: Profile, power_limit_w: Optional[float]) -> tuple[Optional[float], str]:
    if profile.key == "gb10" and profile.rated_power_w:
        return profile.rated_power_w, f"the {profile.rated_power_w:.0f} W brick (a Spark's GPU rail settles near 100 W)"
    if profile.rated_power_w:
        return profile.rated_power_w, f"{profile.rated_power_w:.0f} W rated"
    if power_limit_w:
        return power_limit_w, f"the {power_limit_w:.0f} W power limit"
    return None, "no rated figure"




def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _present(values: list[Optional[float]]) -> list[float]:
    return [v for v in values if v is not None]


def _busy(load_busy: Optional[float], utilization_pct: Optional[float]) -> Optional[float]:
    parts = _present([load_busy, None if utilization_pct is None else utilization_pct / 100.0])
    return min(parts) if parts else None


def _stuck_verdict(clock: float, floor: float, floor_src: str, where: str, profile: Profile,
                   readings: dict[str, Any], short: str = "under load") -> Verdict:
    state = "GPU stuck in its low-power state" if profile.key == "gb10" else "clocks held far below max"
    return Verdict(G, Status.FAIL, f"SM clock {clock:.0f} MHz {short}, below the {floor:.0f} MHz floor: {state}",
                   detail=f"SM clock {clock:.0f} MHz {where}, below the {floor:.0f} MHz floor ({floor_src})",
                   fix=FIX_STUCK_GB10 if profile.key == "gb10" else FIX_STUCK, readings=readings)


# -- at rest ---------------------------------------------------------------------------------
RERUN = "re-run spark-gotchas -m fast -k g04"


def busy_at_rest(sample: ThermalSample, power_limit_w: Optional[float],
                 processes: Optional[GpuProcesses]) -> Optional[Sharing]:
    """Who keeps the GPU busy at rest (None: it is at rest, or no process list says who could). The
    run's process list names a process listed on it, or what no visible process explains (another pid
    namespace's); a busy GPU whose lists name nobody is such a process too (NVML lists no pid for it)."""
    util, power = sample.utilization_pct, sample.power_w
    busy = util >= BUSY_UTILIZATION_PCT if util is not None else \
        power is not None and bool(power_limit_w) and power >= BUSY_POWER_OF_LIMIT * power_limit_w
    if not busy or processes is None:
        return None
    share = sharing(None, processes)
    if share.busy:
        return share
    if not processes.nvml_error and processes.own_on_gpu == 0:
        return Sharing(True, "a process outside this container", brief="a process outside this container",
                       outside=Outside(utilization_pct=util, power_w=power, power_limit_w=power_limit_w))
    return Sharing(True, "the other GPU user", brief="another GPU user")


def judge_snapshot(snap: ThermalSnapshot, profile: Profile, here: Machine = SAME,
                   processes: Optional[GpuProcesses] = None) -> Verdict:
    """``processes``: the run's process list, read at rest, to name who keeps a GPU busy at rest."""
    if snap.nvml_error:
        return Verdict(G, Status.SKIP, f"NVML unavailable: {snap.nvml_error}")
    if not here.is_profile:
        return Verdict(G, Status.INFO, here.not_judged(profile, "clocks"), detail=here.not_profile(profile, "clocks at rest"),
                       readings={"machine_is_profile": False, "machine": here.device})
    if here.beyond is not None:
        return here.beyond.verdict(G, "clocks")
    s = snap.sample or ThermalSample(t_s=0.0)
    spoiled = beyond(profile, power_limit_w=snap.power_limit_w, power_w=s.power_w,
                     clocks={"max SM clock": snap.max_sm_clock_mhz, "SM clock": s.sm_clock_mhz})
    if spoiled is not None:
        return spoiled.verdict(G, "clocks", {"power_limit_w": snap.power_limit_w, "max_sm_clock_mhz": snap.max_sm_clock_mhz})
    mask = s.reasons_mask
    readings = {"device": snap.name, "temperature_c": s.temperature_c, "power_w": s.power_w,
                "power_limit_w": snap.power_limit_w, "sm_clock_mhz": s.sm_clock_mhz,
                "max_sm_clock_mhz": snap.max_sm_clock_mhz, "reasons_mask": mask,
                "slowdown_temp_c": snap.slowdown_temp_c, "counters_us": dict(snap.counters.values_us),
                "counter_sources": dict(snap.counters.sources), "unavailable": dict(snap.unavailable)}
    temp = "temperature N/A" if s.temperature_c is None else f"{s.temperature_c:.0f} °C"
    power = "power N/A" if s.power_w is None else f"{s.power_w:.1f} W"
    power += f" of {snap.power_limit_w:.0f} W limit" if snap.power_limit_w else " (no power limit reported)"
    clock = "SM clock N/A" if s.sm_clock_mhz is None else f"SM {s.sm_clock_mhz:.0f} MHz"
    if snap.max_sm_clock_mhz:
        clock += f" of {snap.max_sm_clock_mhz:.0f} max"
    figures = f"{temp}, {power}, {clock}"
    active = reason_names((mask or 0) & THROTTLE_BITS)
    slowdown = snap.slowdown_temp_c if snap.slowdown_temp_c and snap.slowdown_temp_c > 0 else None
    hot = slowdown is not None and s.temperature_c is not None and s.temperature_c >= slowdown
    what = ([", ".join(active) + " active"] if active else []) + \
        ([f"at or above the {slowdown:.0f} °C slowdown threshold"] if hot else [])
    user = busy_at_rest(s, snap.power_limit_w, processes)
    if user is not None:  # the figures are another process's work: nothing here is the cooling's doing
        readings["busy_at_rest"] = user.names
        load = [f"{s.utilization_pct:.0f}% busy"] if s.utilization_pct is not None else []
        load += [f"{s.power_w:.1f} W"] if s.power_w is not None else []
        head = f"not at rest: {user.brief} uses the GPU" + (f" ({', '.join(load)})" if load else "")
        who = user.aside if user.outside is not None else f"; in use by {user.names}"
        detail = f"{figures}{'; ' + '; '.join(what) if what else ''}{who}"
        if what:
            return Verdict(G, Status.WARN, f"throttling at rest, the GPU in use by {user.brief}", detail=detail,
                           fix=user.fix(RERUN, FIX_SPOT_BUSY), readings=readings)
        return Verdict(G, Status.INFO, head, detail=detail, readings=readings)
    if what:
        return Verdict(G, Status.WARN, f"throttling at rest: {'; '.join(what)}", detail=figures, fix=FIX_COOLING,
                       readings=readings)
    history = counters_text(snap.counters.values_us)
    history = f"since the driver loaded: {history}" if history else "no clock-event counters readable"
    return Verdict(G, Status.INFO, f"at rest: {figures}", detail=history, readings=readings)


# -- spot check -------------------------------------------------------------------------------
SPOT_FAR_BELOW = 0.7  # of the profile's GEMM range's low end: a spot-check rate under it is far below
FIX_SPOT_BUSY = "stop or pause {names} (G6 says how), then re-run spark-gotchas -m fast -k g04"
FIX_SPOT_SUITE = ("re-run spark-gotchas -m fast -k g04 when no other run is measuring: {names} shared the GPU with "
                  "this one, so no rate is the GPU's own")
FIX_SPOT_ONCE = ("re-run spark-gotchas -m fast -k g04: this rate was measured once; if it stays far below with healthy "
                 "clocks and nothing else on the GPU, update or reinstall the NVIDIA driver")
FIX_SPOT_UNSEEN = ("find what else uses the GPU (G6, nvidia-smi): NVML could not list its processes while the load "
                   "ran; then re-run spark-gotchas -m fast -k g04")
FIX_SPOT_ALONE = ("update or reinstall the NVIDIA driver and re-run (nothing else ran on the GPU during either load); "
                  "if the rate stays low with healthy clocks, contact NVIDIA support: the GPU or its cooling needs "
                  "service")


def spot_far_below(spot: SpotCheck, profile: Profile) -> bool:
    """Is the load's rate under 0.7 x the low end of the profile's GEMM range for its precision?"""
    expected = profile.gemm_tflops.get(spot.dtype)
    return expected is not None and spot.tflops is not None and spot.tflops < SPOT_FAR_BELOW * expected.lo


def wants_second_look(spot: SpotCheck, profile: Profile) -> bool:
    """Run the load once more before any verdict: far below, with nobody else seen on the GPU meanwhile."""
    return not spot.load_problem and spot_far_below(spot, profile) and sharing(spot.window).busy is not True


def judge_spot_check(spot: SpotCheck, profile: Profile, processes: Optional[GpuProcesses] = None,
                     here: Machine = SAME) -> Verdict:
    """``processes``: the run's process list, used only for a snapshot whose spot check has no window
    (an older suite's): it can name a job that was there, never prove that nothing else ran."""
    if not here.is_profile:
        return Verdict(G, Status.INFO, here.not_judged(profile, "clocks"),
                       detail=here.not_profile(profile, "clocks under load"),
                       readings={"machine_is_profile": False, "machine": here.device, "tflops": spot.tflops,
                                 "precision": spot.dtype})
    if here.beyond is not None:
        return here.beyond.verdict(G, "clocks")
    if not spot.attempted:
        return Verdict(G, Status.SKIP, f"no load spot check: {spot.reason}")
    spoiled = None if spot.load_problem else \
        _spoiled(spot, profile) or (_spoiled(spot.again, profile) if spot.again is not None else None)
    if spoiled is not None:  # (a load that crashed is a finding whatever its figures: judged below)
        return spoiled.verdict(G, "clocks", {"tflops": spot.tflops, "precision": spot.dtype,
                                             "power_limit_w": spot.power_limit_w})
    share = sharing(spot.window, processes)
    again = spot.again
    if again is not None and again.attempted and not again.load_problem and share.busy is not True \
            and spot_far_below(spot, profile):
        return _judge_load(again, profile, sharing(again.window, processes), first=spot)
    return _judge_load(spot, profile, share)


def _spoiled(spot: SpotCheck, profile: Profile) -> Optional[Beyond]:
    """A rate, clock or power figure of the load no machine of the profile's platform can give."""
    clocks = _present([s.sm_clock_mhz for s in spot.samples])
    powers = _present([s.power_w for s in spot.samples])
    return beyond(profile, tflops={spot.dtype: spot.tflops}, power_limit_w=spot.power_limit_w,
                  power_w=max(powers) if powers else None,
                  clocks={"max SM clock": spot.max_sm_clock_mhz, "SM clock": max(clocks) if clocks else None})


def _judge_load(spot: SpotCheck, profile: Profile, share: Sharing, first: Optional[SpotCheck] = None) -> Verdict:
    """One load's verdict; ``first`` is the load before it when this one is the second look."""
    if spot.load_problem:
        return Verdict(G, Status.FAIL, f"the BF16 GEMM load failed under test: {spot.load_problem}"[:300], fix=FIX_LOAD,
                       readings={"load_problem": spot.load_problem, "load_backend_note": spot.backend_note or None})
    under = spot.under_load()
    clocks = _present([s.sm_clock_mhz for s in under])
    seconds = (spot.load_end_s or 0.0) - (spot.load_start_s or 0.0)
    load = f"{seconds:.1f} s of {spot.dtype.upper()} GEMM ({spot.size}^3)"
    tflops = "?" if spot.tflops is None else f"{spot.tflops:.1f}"
    deltas = spot.counter_deltas_us
    util = _median(_present([s.utilization_pct for s in under]))
    busy = _busy(spot.busy_fraction, util)
    floor, floor_src = clock_floor(profile, spot.max_sm_clock_mhz)
    clock = _median(clocks)
    power = _median(_present([s.power_w for s in under]))
    temps = _present([s.temperature_c for s in under])
    readings = {"sm_clock_median_mhz": clock, "floor_mhz": floor, "power_median_w": power,
                "temperature_max_c": max(temps) if temps else None, "tflops": spot.tflops, "precision": spot.dtype,
                "busy": busy, "samples_under_load": len(under), "counter_deltas_us": deltas,
                "load_backend": spot.backend or None, "load_backend_note": spot.backend_note or None,
                "busy_pids": list(share.pids) if share.busy is not None else None,
                "outside": share.outside.text if share.outside is not None else None,
                "sharing_sampled": share.sampled}
    twice = ""
    if first is not None:
        readings["first_tflops"] = first.tflops
        twice = f"; measured twice: the first load ran at {first.tflops:.1f} TFLOP/s"
    if not clocks:
        why = spot.unavailable.get("sm_clock_mhz", "no sample fell inside the load window")
        return Verdict(G, Status.SKIP, f"no SM clock read under load ({why})",
                       detail=f"{load} ran at {tflops} TFLOP/s{twice}", readings=readings)
    figures = (f"SM clock {clock:.0f} MHz"
               + ("" if power is None else f", {power:.0f} W")
               + ("" if not temps else f", {max(temps):.0f} °C")
               + f", {tflops} TFLOP/s")
    if busy is not None and busy < BUSY_MIN:
        return Verdict(G, Status.INFO, f"inconclusive: the load kept the GPU busy only {busy:.0%} "
                                       f"(needs {BUSY_MIN:.0%})", detail=f"{load}: {figures}{twice}", readings=readings)
    if floor is not None and clock < floor:
        return _stuck_verdict(clock, floor, floor_src, f"under {load}", profile, readings)
    mask = 0
    for s in spot.samples:
        if spot.load_start_s is not None and spot.load_end_s is not None \
                and spot.load_start_s <= s.t_s <= spot.load_end_s and s.reasons_mask:
            mask |= s.reasons_mask
    events = [f"{name} active" for name in reason_names(mask & THROTTLE_BITS)]
    events += [f"{COUNTER_NAMES[k]} +{human_us(deltas[k])}" for k in THROTTLE_COUNTERS if deltas.get(k, 0) > 0]
    cap = mask & SW_POWER_CAP or deltas.get("sw_power_cap", 0) > 0
    cap_note = "; SW power cap engaged (at its power limit)" if cap else ""
    if events and share.busy:  # another process's load heats and draws power too: not the cooling's doing
        return Verdict(G, Status.WARN, f"throttling under load: {share.cause}",
                       detail=f"{load}: {figures}; {', '.join(events)}{twice}{share.aside}",
                       fix=share.fix(RERUN, FIX_SPOT_SUITE if share.only_runs else FIX_SPOT_BUSY),
                       readings=readings)
    if events:
        return Verdict(G, Status.WARN, f"throttling under load: {', '.join(events)}", detail=f"{load}: {figures}{twice}",
                       fix=FIX_COOLING, readings=readings)
    expected = profile.gemm_tflops.get(spot.dtype)
    if spot_far_below(spot, profile):
        readings["expected_tflops"] = [expected.lo, expected.hi]
        head = (f"{tflops} TFLOP/s at {clock:.0f} MHz, far below {profile.name}'s "
                f"{expected.lo:.0f}-{expected.hi:.0f}")
        if share.busy:
            fix = share.fix(RERUN, FIX_SPOT_SUITE if share.only_runs else FIX_SPOT_BUSY)
            if share.sampled or share.outside is not None:  # the clock is in the detail: the line names who shared
                head = f"{tflops} TFLOP/s, far below {profile.name}'s {expected.lo:.0f}-{expected.hi:.0f}"
            return Verdict(G, Status.WARN, f"{head}: {share.cause}", detail=f"{load}: {figures}{twice}{share.aside}",
                           fix=fix, readings=readings)
        seen = "nothing else on the GPU" if share.busy is False else "other GPU work unknown"
        if first is not None:  # the driver or the hardware only when nobody was seen either time
            return Verdict(G, Status.WARN, f"{head}; {seen}, twice", detail=f"{load}: {figures}{twice}",
                           fix=FIX_SPOT_ALONE if share.busy is False else FIX_SPOT_UNSEEN, readings=readings)
        return Verdict(G, Status.WARN, f"{head}; {seen}, measured once", detail=f"{load}: {figures}",
                       fix=FIX_SPOT_ONCE, readings=readings)
    floor_note = f", floor {floor:.0f} MHz" if floor else ""
    rate = "" if spot.tflops is None else f", {spot.tflops:.0f} TFLOP/s"
    aside = share.aside
    if first is not None:
        aside += "; the first load was far below with nothing else seen on the GPU, so something unseen slowed it"
    return Verdict(G, Status.PASS, f"{clock:.0f} MHz under load{f' (floor {floor:.0f})' if floor else ''}{rate}, "
                                   "no throttling" + (" (second try)" if first is not None else ""),
                   detail=f"{load}: {figures}{floor_note}; no thermal or power-brake event{cap_note}{twice}{aside}",
                   readings=readings)


# -- reboot -------------------------------------------------------------------------------------
def rebooted_since(check: RebootCheck) -> tuple[Optional[bool], str]:
    """(True/False, how we know), or (None, why not) when this boot cannot be compared."""
    beat = check.heartbeat
    assert beat is not None
    return _rebooted(beat.boot_id, beat.btime_s, beat.last_sample_epoch, check.boot_id, check.btime_s)


def _rebooted(then_boot: Optional[str], then_btime: Optional[float], last_sample: float,
              now_boot: Optional[str], now_btime: Optional[float]) -> tuple[Optional[bool], str]:
    """Whether the machine rebooted since a heartbeat written in boot ``then_boot`` (booted at
    ``then_btime``, last written at ``last_sample``): by boot id, else boot time."""
    if then_boot and now_boot:
        return then_boot != now_boot, f"boot id changed; this boot began {utc(now_btime)}"
    if now_btime is not None and then_btime is not None:
        return now_btime != then_btime, f"boot time changed to {utc(now_btime)}"
    if now_btime is not None:
        return now_btime > last_sample, f"this boot began {utc(now_btime)}"
    return None, "neither boot id nor boot time readable"


def judge_reboot(check: RebootCheck) -> Verdict:
    if not check.found:
        return Verdict(G, Status.SKIP, "no earlier soak recorded: nothing to check for a reboot",
                       detail=f"no heartbeat at {check.heartbeat_path}", readings={"heartbeat": check.heartbeat_path})
    if check.error or check.heartbeat is None:
        return Verdict(G, Status.SKIP, f"the last soak's heartbeat cannot be used: {check.error}")
    beat = check.heartbeat
    started = utc(beat.started_epoch)
    readings = {"heartbeat": check.heartbeat_path, "started": started, "last_heartbeat": utc(beat.last_sample_epoch),
                "end_reason": beat.end_reason, "csv": beat.csv_path}
    if beat.end_reason is not None:
        ended = utc(beat.ended_epoch)
        if beat.end_reason == "completed":
            return Verdict(G, Status.PASS, f"the last soak ({hms(beat.planned_s)} planned) ended normally at {ended}",
                           detail=f"it started {started}", readings=readings)
        return Verdict(G, Status.INFO, f"the last soak ended at {ended}: {beat.end_reason}; no reboot",
                       detail=f"it started {started}", readings=readings)
    rebooted, how = rebooted_since(check)
    last = utc(beat.last_sample_epoch)
    if rebooted:
        return Verdict(G, Status.FAIL, f"the last soak ended in a reboot/power loss at about {last}",
                       detail=f"it started {started}; {how}", fix=FIX_REBOOT, readings=readings)
    if rebooted is None:
        return Verdict(G, Status.INFO, "the last soak has no end marker; this boot cannot be compared",
                       detail=f"it started {started}; last heartbeat {last}; {how}", readings=readings)
    if check.soak_pid_alive:
        ago = max(0.0, check.now_epoch - beat.last_sample_epoch)
        return Verdict(G, Status.INFO, f"a soak is running now (started {started}, pid {beat.pid}, "
                                       f"last sample {ago:.0f} s ago)", readings=readings)
    return Verdict(G, Status.INFO, f"the last soak was killed at about {last} (no end marker, no reboot)",
                   detail=f"it started {started}; its CSV keeps what it measured ({beat.csv_path})", readings=readings)


def _words(beat: WatchHeartbeat, n: int) -> str:
    """The watched command in at most ``n`` words: ``python train.py --lr …``."""
    return " ".join(beat.command[:n]) + (" …" if len(beat.command) > n else "") or "?"


def watched_run(beat: WatchHeartbeat, words: int = 40) -> str:
    """``the watched run `python train.py --lr 3e-4` (started 2026-12-07 01:02:03 UTC)``, for a detail."""
    return f"the watched run `{_words(beat, words)}` (started {utc(beat.started_epoch)})"


def judge_earlier_watches(reading: EarlierWatches) -> Verdict:
    """Did a watched run end in a reboot? What the heartbeats earlier watches left say."""
    readings: dict[str, Any] = {"state_dir": reading.state_dir, "heartbeats": [w.path for w in reading.watches]}
    if reading.problem:
        return Verdict(G, Status.SKIP, "earlier watches' heartbeats cannot be read", detail=reading.problem,
                       readings=readings)
    unusable = [f"{w.path}: {w.problem}" for w in reading.watches if w.heartbeat is None]
    aside = ("; left unread: " + "; ".join(unusable[:3])) if unusable else ""
    rebooted, killed, running = [], [], []
    for w in reading.watches:
        beat = w.heartbeat
        if beat is None or beat.end_reason is not None:
            continue
        if w.watch_alive:
            running.append(beat)
            continue
        gone, how = _rebooted(beat.boot_id, beat.btime_s, beat.last_sample_epoch, reading.boot_id, reading.btime_s)
        (rebooted if gone else killed).append((beat, how))
    clear = f"; the next spark-gotchas watch says so once and removes its record in {reading.state_dir}"
    if rebooted:
        beat, how = rebooted[-1]
        last = utc(beat.last_sample_epoch)
        more = f" (+{len(rebooted) - 1} more)" if len(rebooted) > 1 else ""
        summary = fitting(G, Status.FAIL, *(f"watched `{_words(beat, n)}` ended in a reboot/power loss at about {last}{more}"
                                             for n in (3, 2)),
                          f"a watched run ended in a reboot/power loss at about {last}{more}",
                          "a watched run ended in a reboot or power loss")
        files = f"; its files: {beat.out_dir}" if beat.out_dir else ""
        return Verdict(G, Status.FAIL, summary, detail=f"{watched_run(beat, 40)}; {how}{files}{clear}{aside}",
                       fix=FIX_REBOOT_COMMON + "; then watch the next run (spark-gotchas watch -- …)",
                       readings={**readings, "rebooted": len(rebooted)})
    if killed:
        beat, how = killed[-1]
        last = utc(beat.last_sample_epoch)
        summary = fitting(G, Status.INFO, *(f"watched `{_words(beat, n)}` was killed with its watch at about {last} "
                                            "(no reboot)" for n in (3, 2)),
                          f"a watched run was killed with its watch at about {last} (no reboot)",
                          "a watched run was killed with its watch (no reboot)")
        return Verdict(G, Status.INFO, summary, detail=f"{watched_run(beat, 40)}; {how}{clear}{aside}",
                       readings=readings)
    if running:
        beat = running[-1]
        return Verdict(G, Status.INFO, fitting(G, Status.INFO, f"a watch is running now: `{_words(beat, 3)}`",
                                               "a watch is running now"),
                       detail=f"{watched_run(beat, 40)}, watch pid {beat.watch_pid}{aside}", readings=readings)
    if not reading.watches:
        return Verdict(G, Status.SKIP, "no earlier watch recorded: nothing to check for a reboot",
                       detail=f"no heartbeat in {reading.state_dir}", readings=readings)
    return Verdict(G, Status.PASS, "no watched run ended in a reboot or power loss",
                   detail=f"{len(reading.watches)} heartbeat(s) earlier watches left in {reading.state_dir}{aside}",
                   readings=readings)


# -- soak ----------------------------------------------------------------------------------------
def _window_busy(w: SoakWindow) -> Optional[float]:
    return _busy(w.busy_fraction, w.utilization_mean_pct)


def _slope_per_min(points: list[tuple[float, float]]) -> Optional[float]:
    if len(points) < 2:
        return None
    mean_t = sum(t for t, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var <= 0:
        return None
    return sum((t - mean_t) * (y - mean_y) for t, y in points) / var * 60.0


def temperature_trend(full: list[SoakWindow]) -> tuple[Optional[float], Optional[float]]:
    """(rise from the first window to the last, °C; slope over the last half, °C/min)."""
    temps = [(w.t_end_s, w.temperature_mean_c) for w in full if w.temperature_mean_c is not None]
    if len(temps) < 2:
        return None, None
    half = temps[len(temps) // 2:]
    return temps[-1][1] - temps[0][1], _slope_per_min(half)


def power_plateau(full: list[SoakWindow], rated: Optional[float]) -> Optional[float]:
    """Mean power over the last half when it is flat and well under the rated figure, else None."""
    if not rated or len(full) < 4:
        return None
    powers = _present([w.power_mean_w for w in full[len(full) // 2:]])
    if len(powers) < 2:
        return None
    mean = sum(powers) / len(powers)
    if mean <= 0 or statistics.pstdev(powers) / mean > PLATEAU_CV or mean > PLATEAU_OF_RATED * rated:
        return None
    return mean


def _cap_share(w: SoakWindow) -> Optional[float]:
    value = w.counter_deltas_us.get("sw_power_cap")
    return None if value is None or w.seconds <= 0 else min(1.0, value / (w.seconds * 1e6))


def throttle_evidence(full: list[SoakWindow], rated: Optional[float], rated_label: str,
                      with_fall: bool) -> list[tuple[float, str, str]]:
    """(onset seconds, text, short text) for each sign of throttling after the first window, earliest first.

    The power-plateau + rising-temperature sign is only included when ``with_fall`` (the clock or
    throughput fell): on its own it is what every healthy Spark does.
    """
    first, later = full[0], full[1:]
    found: list[tuple[float, str, str]] = []
    for bit in (0x80, 0x40, 0x20, 0x8):
        hits = [w for w in later if w.reasons_mask and w.reasons_mask & bit]
        if hits:
            text = f"{REASON_NAMES[bit]} active from {hms(hits[0].t_start_s)}"
            found.append((hits[0].t_start_s, text, text))
    for key in ("hw_power_brake", "hw_thermal", "sw_thermal", "thermal"):
        if key == "thermal" and any("thermal" in text for _, text, _ in found):
            continue  # NVML's thermal total repeats what the finer split already said
        grew = [w for w in later if w.counter_deltas_us.get(key, 0) > 0]
        if grew:
            total = sum(w.counter_deltas_us[key] for w in grew)
            text = f"{COUNTER_NAMES[key]} counter +{human_us(total)} from {hms(grew[0].t_start_s)}"
            found.append((grew[0].t_start_s, text, text))
    start_share = _cap_share(first)
    end_shares = _present([_cap_share(w) for w in full[-max(1, len(full) // 3):]])
    if start_share is not None and end_shares:
        end_share = sum(end_shares) / len(end_shares)
        if end_share - start_share >= CAP_SHARE_RISE:
            onset = next((w.t_start_s for w in later if (_cap_share(w) or 0) - start_share >= CAP_SHARE_RISE), later[-1].t_start_s)
            found.append((onset, f"SW power cap engaged {end_share:.0%} of the time at the end vs {start_share:.0%} at first",
                          f"SW power cap engaged {start_share:.0%} -> {end_share:.0%} of the time"))
    c0, c1 = first.sm_clock_median_mhz, full[-1].sm_clock_median_mhz
    if c0 and c1 and c1 < c0 * (1 - CLOCK_FALL):
        onset = next((w.t_start_s for w in later if w.sm_clock_median_mhz and w.sm_clock_median_mhz < c0 * (1 - CLOCK_FALL)),
                     later[-1].t_start_s)
        text = f"SM clock {c0:.0f} -> {c1:.0f} MHz from {hms(onset)}"
        found.append((onset, text, text))
        with_fall = True
    plateau = power_plateau(full, rated)
    rise, slope = temperature_trend(full)
    if with_fall and plateau is not None and rise is not None and slope is not None \
            and rise >= TEMP_RISE_MIN_C and slope >= TEMP_SLOPE_MIN_C_PER_MIN:
        t0 = full[0].temperature_mean_c or 0.0
        found.append((full[len(full) // 2].t_start_s,
                      f"power flat at {plateau:.0f} W ({plateau / rated:.0%} of {rated_label.split(' (')[0]}) while the "
                      f"temperature kept rising ({t0:.0f} -> {t0 + rise:.0f} °C)",
                      f"power flat at {plateau:.0f} W, temperature up {t0:.0f} -> {t0 + rise:.0f} °C"))
    return sorted(found)


def judge_soak(soak: SoakReading, profile: Profile, max_drop: Optional[float] = None) -> Verdict:
    if not soak.attempted:
        return Verdict(G, Status.SKIP, f"soak not run: {soak.reason}")
    max_drop = soak.max_drop_fraction if max_drop is None else max_drop
    need = 0.5 * soak.window_s if soak.window_s else 0.0
    full = [w for w in soak.windows if w.tflops is not None and w.seconds >= need]
    prefix, ending = "", ""
    if soak.cut_short:
        prefix = f"{soak.end_reason} after {hms(soak.elapsed_s)} of {hms(soak.planned_s)}; "
    elif soak.end_reason and not soak.completed and not soak.load_problem:
        # "no end marker: the run was killed or …": the line keeps the finding, the detail the explanation
        ending = soak.end_reason
        prefix = f"{ending.split(': ', 1)[0]} (after {hms(soak.elapsed_s)}); "

    def told(*texts: str) -> str:  # the detail, led by the explanation the line left out
        return "; ".join(t for t in (ending if ": " in ending else "", *texts) if t)

    readings: dict[str, Any] = {"csv": soak.csv_path, "png": soak.png_path, "windows": len(soak.windows),
                                "end_reason": soak.end_reason, "max_drop_fraction": max_drop}
    if soak.load_problem:
        if not full:
            return Verdict(G, Status.SKIP, f"the soak's load could not start: {soak.load_problem}"[:300], readings=readings)
        return Verdict(G, Status.FAIL, f"the soak's load failed after {hms(soak.elapsed_s)}: {soak.load_problem}"[:300],
                       fix=FIX_LOAD, readings=readings)
    if not full:
        return Verdict(G, Status.INFO, f"{prefix}too short to judge: no full {soak.window_s:.0f} s load window measured",
                       detail=told(), readings=readings)
    rates = _present([w.tflops for w in full])
    spoiled = beyond(profile, tflops={soak.dtype: max(rates) if rates else None}, power_limit_w=soak.power_limit_w,
                     clocks={"max SM clock": soak.max_sm_clock_mhz,
                             "SM clock": max(_present([w.sm_clock_max_mhz for w in full]), default=None)})
    if spoiled is not None:
        return spoiled.verdict(G, "soak", readings)
    busy = _median(_present([_window_busy(w) for w in full]))
    clocks = _present([w.sm_clock_median_mhz for w in full])
    clock = _median(clocks)
    first, last = full[0], full[-1]
    readings.update({"first_tflops": first.tflops, "last_tflops": last.tflops, "busy": busy, "sm_clock_median_mhz": clock})
    if busy is not None and busy < BUSY_MIN:
        return Verdict(G, Status.INFO, f"{prefix}inconclusive: the load kept the GPU busy only {busy:.0%} of the soak "
                                       f"(needs {BUSY_MIN:.0%})", detail=told(f"{first.tflops:.1f} -> {last.tflops:.1f} TFLOP/s"),
                       readings=readings)
    floor, floor_src = clock_floor(profile, soak.max_sm_clock_mhz)
    readings["floor_mhz"] = floor
    if floor is not None and clock is not None and clock < floor:
        return _stuck_verdict(clock, floor, floor_src, f"over {hms(soak.elapsed_s)} of sustained load", profile, readings,
                              "over the soak")
    rated, rated_label = rated_power(profile, soak.power_limit_w)
    drop = 1.0 - last.tflops / first.tflops if first.tflops else 0.0
    readings["drop"] = drop
    if len(full) >= 2 and drop > max_drop:
        evidence = throttle_evidence(full, rated, rated_label, with_fall=True)
        readings["evidence"] = [text for _, text, _ in evidence]
        threshold = first.tflops * (1 - max_drop / 2)
        onset = last
        for w in reversed(full[1:]):
            if w.tflops is not None and w.tflops < threshold:
                onset = w
            else:
                break
        fell = (f"throughput fell {drop:.0%} ({first.tflops:.1f} -> {last.tflops:.1f} TFLOP/s, more than "
                f"{max_drop:.0%}), from {hms(onset.t_start_s)} on")
        short = f"throughput fell {drop:.0%} from {hms(onset.t_start_s)} on"
        if evidence:
            causes = "; ".join(text for _, text, _ in evidence[:3])
            return Verdict(G, Status.FAIL, f"{prefix}{short}: {evidence[0][2]}", detail=told(f"{fell}; cause: {causes}"),
                           fix=FIX_COOLING + f" (here: before {hms(onset.t_start_s)})", readings=readings)
        return Verdict(G, Status.WARN, f"{prefix}{short}, with no sign of throttling",
                       detail=told(f"{fell}, with no clock fall or throttle reason/counter: something else slowed the load"),
                       fix=FIX_UNEXPLAINED, readings=readings)
    powers = _present([w.power_mean_w for w in full[len(full) // 2:]])
    power = _median(powers)
    temps = _present([w.temperature_max_c for w in full])
    lows = _present([w.sm_clock_min_mhz for w in full])
    highs = _present([w.sm_clock_max_mhz for w in full])
    held = "held its throughput" if not soak.cut_short else "held over what ran"
    figures = f"{first.tflops:.1f} -> {last.tflops:.1f} TFLOP/s ({pct(-drop)})"
    # a line that first says how the soak ended leaves the throughput figures to the detail (100 columns)
    parts = [f"{hms(soak.elapsed_s)} of {soak.dtype.upper()} GEMM {held}" + ("" if prefix else f": {figures}")]
    if prefix:
        parts.append(figures)
    if power is not None:
        parts.append(f"sustained {power:.0f} W vs {rated_label}")
    if temps:
        parts.append(f"max {max(temps):.0f} °C")
    if lows and highs:
        lo, hi = round(min(lows)), round(max(highs))
        parts.append(f"SM clock {lo}-{hi} MHz" if lo != hi else f"SM clock {lo} MHz")
    if len(full) < 2:
        parts.append("one window only: too short to see a trend")
    else:
        events = throttle_evidence(full, rated, rated_label, with_fall=False)
        if events:
            parts.append("without a throughput fall: " + ", ".join(text for _, text, _ in events[:2]))
        rise, slope = temperature_trend(full)
        if rise is not None and slope is not None and slope >= TEMP_SLOPE_MIN_C_PER_MIN:
            parts.append(f"temperature still rising at the end (+{slope:.1f} °C/min): a longer soak tells more")
    if soak.nvml_error:
        parts.append(f"no temperature, power or clock read (NVML unavailable: {soak.nvml_error})")
    readings.update({"sustained_power_w": power, "rated_power_w": rated,
                     "temperature_max_c": max(temps) if temps else None})
    detail = told(*parts[1:])
    if soak.cut_short:  # a soak cut short cannot say the throughput held over the run it planned
        return Verdict(G, Status.WARN, prefix + parts[0], detail=detail,
                       fix=FIX_CUT_SHORT.format(planned=duration_text(soak.planned_s)), readings=readings)
    return Verdict(G, Status.PASS, prefix + parts[0], detail=detail, readings=readings)
