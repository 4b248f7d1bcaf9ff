"""What ``spark-gotchas watch`` says of a user's own run: the states it finds as it goes, and the G3, G4 and
G6 lines for the whole run at its end.

Pure: samples and the GPU's other processes go in, lines and verdicts come out. Every threshold that
the preflight also judges is the preflight's own (G3's page cache, G4's clock floor, busy share and
clock fall, G6's judgement of the other processes), taken from those judges; what only a run can
show (a fall of the job's own rate, memory running out as it goes) is stated below.

Rules:

Times are since the watch began; a sample is one tick of `--every` (1 s by default). A state begins
once its sign has shown in 5 of the last 10 samples (its onset: the first of them) and ends once the
sign has been gone for 30 samples in a row; a counter that grew (time the driver spent throttling)
or an OOM kill begins one at once. Each state is one line when it begins and one when it ends, with
how long it lasted and things as they are then (`rate back to 315 (best 315)`); nothing is said
while it lasts, however its sign comes and goes.

- **G3** (memory: /proc/meminfo, /proc/pressure/memory and the job's cgroup, every sample):
  - MemAvailable under 5 % of MemTotal, or memory pressure (PSI `full` avg10) at 10 % or more, or
    swap in use grown by 256 MB or more within 60 samples while MemAvailable is under 10 % →
    **WARN** `MemAvailable 3.1 GB (2%), swap 2.0 GB in use: the next allocation may be killed`;
  - the job's cgroup using 90 % or more of its memory limit (usage minus inactive file pages,
    against the lowest limit above it) → **WARN**;
  - on a unified-memory GPU (GB10) the page cache as G3's preflight judges it (25 % of MemTotal or
    more: CUDA sees only MemFree) → **WARN**, with G3's fix (drop the page cache between runs);
  - the kernel's OOM killer killing the job or one of its processes (the kernel's or the cgroup's
    `oom_kill` count grew and the kernel log names the pid, or the count grew as the job died of
    SIGKILL) → **FAIL**; killing a process outside the job → **WARN**.
- **G4** (NVML every sample; nvidia-smi's finer counters once a minute):
  - a thermal or power-brake reason active (HW slowdown, SW or HW thermal slowdown, HW power
    brake), or a thermal or power-brake counter growing → **WARN** `SM clock 2450 -> 1700 MHz, SW
    thermal slowdown active, rate 412 -> 331 it/s (-20%)`; the SW power cap alone is no sign (a GPU
    at its power limit caps by design);
  - the GPU busy 80 % or more with the SM clock under G4's floor (GB10 1400 MHz; half the max clock
    elsewhere) → **FAIL**, with G4's fix for a GPU stuck in its low-power state.
- The rate (`--rate-regex`: the job's own rate as its log prints it): the median of its values over
  the last 30 samples' time (5 values at least) more than `--max-drop` (default 10 %) below the
  highest such median so far is a fall (time the job spent stopped, Ctrl-Z, is left out). It is
  blamed, when it begins, on:
  - throttling: a G4 state open or ended within that window → **G4 FAIL** `rate 412 -> 331 it/s
    (-20%) with …`;
  - else another process on the GPU, there when it began → **G6 WARN** (**FAIL** where G6's judge
    fails that process) `rate … since pid 5123 python3 joined the GPU`: its load also explains an
    SM clock that fell with it (two loads reach the power cap sooner);
  - else the busy SM clock's median 5 % or more below where it was at the best rate → **G4 FAIL**;
  - else → **G4 WARN** `rate … with no clock or throttle sign: not the cooling`.
- **G6** (NVML's compute and graphics lists every sample, the job's own processes, its whole tree,
  left out): a process listed in 2 samples in a row is judged with G6's preflight judge (its cap,
  what it holds, the pool): that status, INFO where the judge passes, `pid 5123 vLLM joined the GPU
  (no memory cap)`; one on the GPU as the watch began: `… was on the GPU before the job`. It ends
  once it has been off the lists for 2 samples. Use of the GPU that no visible process explains
  (another container's) → **WARN**.

At the end, one line per gotcha in the usual contract, its finding with the onset and the share of
the run it lasted, and for FAIL and WARN its fix:

- **G3**: the job OOM-killed → **FAIL**; else its worst state (an OOM kill elsewhere, low memory,
  the cgroup, the page cache) → **WARN**; none → **PASS** with the lowest MemAvailable and when; no
  memory read → **SKIP**.
- **G4**: a fall blamed on throttling → **FAIL**, fix: G4's "improve cooling … or cap run length and
  checkpoint before throttling sets in (here: before <the minute the rate fell>)"; the clock stuck
  under the floor → **FAIL**; a fall with no clock or throttle sign and nobody else on the GPU →
  **WARN**, fix: the job itself or jobs beside it, never the cooling; throttle states and no rate
  read → **WARN** (what they cost is unknown); throttle states with the rate holding → **PASS**
  naming them; nothing → **PASS** with the busy clock range and the highest temperature; no NVML →
  **SKIP**, and a fall then is a **WARN** whose cause is unknown.
- **G6**: a fall blamed on another process → **WARN** (**FAIL** as G6's judge said of it), fix: G6's
  for it; else a process G6's judge failed or warned of → that status and its fix; use of the GPU
  no visible process explains → **WARN**; processes small or capped → **PASS** listing them; nobody
  → **PASS**; no process lists (NVML) → **SKIP**.
- A profile asked for on a machine that is not that platform (`--spark-profile gb10` on an H200):
  nothing of this machine's live state is judged; each line is **INFO** `not a GB10 (…): memory not
  judged` (clocks, processes).
"""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field, replace
from typing import Optional

from ..base.units import gb, hms
from .judges import g03_unified_memory as g03
from .judges import g04_thermal as g04
from .judges import g06_contention as g06
from .plan import Plan
from .profiles import SAME, Machine, Profile
from .readings.gpu import OUTSIDE_FIX, GpuProcesses
from .readings.mem import MemInfo
from .readings.thermal import DEFAULT_MAX_DROP, THROTTLE_BITS, reason_names
from .readings.watch import WatchEvent, WatchProcess, WatchReading, WatchSample
from .verdict import Status, Verdict, fitting

G3, G4, G6 = 3, 4, 6
HOLD_SAMPLES = 5  # a state begins once its sign held this many samples in a row (5 s at --every 1)
CLEAR_SAMPLES = 30  # and ends once it has been gone this many
LOW_AVAILABLE = 0.05
LOW_AVAILABLE_SWAPPING = 0.10
SWAP_GROWTH_BYTES = 256e6
PSI_FULL_PCT = 10.0
CGROUP_NEAR = 0.90
RATE_WINDOW_SAMPLES = 30  # the rate's rolling median spans this many samples' time
RATE_MIN_VALUES = 5
SWAP_WINDOW_SAMPLES = 60
GPU_HOLD_SAMPLES = 2

FIX_LOW_MEMORY = ("free memory for the job: stop what else holds it (G6 names GPU processes; top -o RES the rest), "
                  "lower the batch size or sequence length, or add swap as a cushion; "
                  "spark-gotchas -m fast --spark-model-gb N checks a plan before the run")
FIX_CGROUP = ("raise the job's memory limit (docker run --memory, systemd MemoryMax=, Slurm --mem) or lower what "
              "the job holds (batch size, dataloader workers)")
FIX_OOM = ("the job needed more memory than it had: lower the batch size, sequence length or dataloader workers, "
           "free memory before the run (G6 names other GPU processes; drop the page cache between runs as root: "
           f"{g03.DROP_CACHES}), or raise the cgroup's limit; the kernel log says what it killed "
           "(sudo dmesg | grep -i 'killed process')")
FIX_OOM_ELSEWHERE = ("memory ran out on the machine: the next kill may be the job's; free memory or stop the "
                     "process that grows (sudo dmesg | grep -i 'killed process' names it)")
FIX_NOT_COOLING = ("not the cooling (no clock fall, no throttle reason or counter, nobody else on the GPU): look at "
                   "the job itself (data loading, evaluation, checkpoints, a growing sequence length) and at CPU or "
                   "disk jobs beside it (top, iostat)")
FIX_THROTTLE_NO_RATE = (f"{g04.FIX_COOLING}; run with --rate-regex RE to see what it costs the job's rate")
FIX_OUTSIDE = f"{OUTSIDE_FIX} before the next run"
FIX_UNKNOWN_CAUSE = ("the GPU's clocks were not read (NVML unavailable): run spark-gotchas -m fast -k g04 on the "
                     "machine, and look for other jobs (G6, nvidia-smi, top)")


# -- the states, as they go ---------------------------------------------------------------------------
@dataclass
class Context:
    """What the states are judged against (fixed for the run)."""

    profile: Profile
    here: Machine = SAME
    plan: Plan = field(default_factory=Plan)
    max_drop: float = DEFAULT_MAX_DROP
    every_s: float = 1.0
    max_sm_clock_mhz: Optional[float] = None
    rate_read: bool = False
    nvml_ok: bool = True
    rate_unit: str = ""  # filled in once the log's first rate is read

    @property
    def floor(self) -> Optional[float]:
        return g04.clock_floor(self.profile, self.max_sm_clock_mhz)[0]


@dataclass
class _State:
    kind: str
    key: str = ""
    since: Optional[float] = None  # the first sign among those that began the state
    clear_since: Optional[float] = None  # when the sign went away (the state still open)
    gone: int = 0  # samples it was gone in a row
    event: Optional[WatchEvent] = None
    recent: collections.deque = field(default_factory=lambda: collections.deque(maxlen=2 * HOLD_SAMPLES))


@dataclass
class OomHit:
    """An OOM kill the engine found: whose pid, and what says so."""

    pid: Optional[int]
    name: str = ""
    in_job: bool = False  # the job or one of its processes
    evidence: str = ""
    job: bool = False  # the job itself


def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _rate(value: Optional[float]) -> str:
    if value is None:
        return "?"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


class Tracker:
    """The states of one run, sample by sample: :meth:`add` returns the lines to say now."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.events: list[WatchEvent] = []
        self.states: dict[tuple[str, str], _State] = {}
        self.rates: collections.deque[tuple[float, float]] = collections.deque()
        self.rate_reference: Optional[float] = None
        self.rate_first: Optional[float] = None
        self.rate_now: Optional[float] = None
        self.rate_values = 0
        self.clock_window: collections.deque[tuple[float, float]] = collections.deque()
        self.clock_at_best: Optional[float] = None
        self.clock_now: Optional[float] = None
        self.swap_window: collections.deque[tuple[float, int]] = collections.deque()
        self.previous: Optional[WatchSample] = None
        self.others: dict[int, WatchProcess] = {}
        self._gpu_seen: dict[int, int] = {}  # pid -> samples in a row listed
        self._gpu_missing: dict[int, int] = {}
        self.t = 0.0
        self._arrived: list[float] = []

    # -- helpers ----------------------------------------------------------------------------------
    hold_samples = HOLD_SAMPLES
    clear_samples = CLEAR_SAMPLES

    @property
    def _unit(self) -> str:
        return f" {self.ctx.rate_unit}" if self.ctx.rate_unit else ""

    @property
    def window_s(self) -> float:
        return RATE_WINDOW_SAMPLES * self.ctx.every_s

    def _open(self, gotcha: int, status: str, kind: str, text: str, key: str = "", start: Optional[float] = None,
              **extra) -> str:
        event = WatchEvent(gotcha=gotcha, status=status, kind=kind, start_s=self.t if start is None else start,
                           text=text, key=key, **extra)
        self.events.append(event)
        return f"G{gotcha} {status} {hms(event.start_s)} {text}"

    def _step(self, kind: str, on: bool, gotcha: int, status: str, text: str, end_text: str, key: str = "",
              at_once: bool = False, onset: Optional[float] = None, **extra) -> list[str]:
        """Advance one state by a sample (``on``: its sign shows in it): the line to say when it begins or ends."""
        state = self.states.setdefault((kind, key), _State(kind, key))
        state.recent.append((self.t, on))
        if on:
            state.gone, state.clear_since = 0, None
            signs = [t for t, on in state.recent if on]
            if state.event is None and (at_once or len(signs) >= self.hold_samples):
                state.since = signs[0] if not at_once else self.t
                if onset is not None:
                    state.since = min(state.since, onset)
                line = self._open(gotcha, status, kind, text, key, start=state.since, **extra)
                state.event = self.events[-1]
                state.event.end_text = end_text
                return [line]
            return []
        if state.event is None:
            return []
        state.gone += 1
        if state.clear_since is None:
            state.clear_since = self.t
        if state.gone >= self.clear_samples:
            event = state.event
            event.end_s = state.clear_since
            event.end_text = end_text or event.end_text  # as things are now ("rate back to 315"), not at the onset
            state.event, state.clear_since, state.gone = None, None, 0
            return [f"G{event.gotcha} ended {hms(self.t)} after {hms(event.seconds(self.t))}: {event.end_text}"]
        return []

    def open_event(self, kind: str, key: str = "") -> Optional[WatchEvent]:
        state = self.states.get((kind, key))
        return state.event if state is not None else None

    # -- one sample ---------------------------------------------------------------------------------
    def add(self, s: WatchSample, others: Optional[GpuProcesses] = None, ooms: tuple[OomHit, ...] = (),
            rates: Optional[list[float]] = None) -> list[str]:
        """One sample; ``rates``: every rate the log printed since the last (default: the sample's one)."""
        self.t = s.t_s
        self._arrived = rates if rates is not None else ([s.rate] if s.rate is not None else [])
        lines: list[str] = []
        if self.ctx.here.is_profile:
            lines += self._memory(s)
            lines += self._ooms(ooms)
            lines += self._clocks(s)
            lines += self._rate_state(s)
            lines += self._gpu(others)
        else:
            self._note_rate(s)
        self.previous = s
        return lines

    # -- G3 -------------------------------------------------------------------------------------------
    def _memory(self, s: WatchSample) -> list[str]:
        lines: list[str] = []
        total, avail = s.mem_total_bytes, s.mem_available_bytes
        if s.swap_used_bytes is not None:
            self.swap_window.append((s.t_s, s.swap_used_bytes))
            while self.swap_window and s.t_s - self.swap_window[0][0] > SWAP_WINDOW_SAMPLES * self.ctx.every_s:
                self.swap_window.popleft()
        if total and avail is not None:
            share = avail / total
            swap = f", swap {gb(s.swap_used_bytes)} in use" if s.swap_used_bytes else ""
            grown = (self.swap_window[-1][1] - min(v for _, v in self.swap_window)) if self.swap_window else 0
            low = share < LOW_AVAILABLE
            pressure = s.psi_full_avg10 is not None and s.psi_full_avg10 >= PSI_FULL_PCT
            swapping = grown >= SWAP_GROWTH_BYTES and share < LOW_AVAILABLE_SWAPPING
            if low or swapping:
                text = f"MemAvailable {gb(avail)} ({share:.0%}){swap}: the next allocation may be killed"
            else:
                text = (f"memory pressure: every task stalled {s.psi_full_avg10:.0f}% of the last 10 s "
                        f"(MemAvailable {gb(avail)}{swap})") if pressure else ""
            lines += self._step("low_memory", low or pressure or swapping, G3, "WARN", text,
                                f"MemAvailable {gb(avail)} ({share:.0%})",
                                figures={"mem_available_bytes": float(avail), "mem_total_bytes": float(total),
                                         "swap_used_bytes": float(s.swap_used_bytes or 0)})
            event = self.open_event("low_memory")
            if event is not None:
                low_seen = event.figures.get("lowest_available_bytes", float(avail))
                event.figures["lowest_available_bytes"] = min(low_seen, float(avail))
            if self.ctx.profile.memory_kind == "unified":
                info = MemInfo(mem_total_bytes=total, mem_free_bytes=s.mem_free_bytes, mem_available_bytes=avail,
                               cached_bytes=s.page_cache_bytes, buffers_bytes=0, shmem_bytes=0,
                               dirty_bytes=s.dirty_bytes)
                verdict = g03.judge_page_cache(info, self.ctx.profile, self.ctx.plan, self.ctx.here)
                lines += self._step("page_cache", verdict.status is Status.WARN, G3, "WARN", verdict.summary,
                                    f"page cache {gb(s.page_cache_bytes)}, MemFree {gb(s.mem_free_bytes)}")
        if s.cgroup_limit_bytes and s.cgroup_used_bytes is not None:
            share = s.cgroup_used_bytes / s.cgroup_limit_bytes
            lines += self._step("cgroup", share >= CGROUP_NEAR, G3, "WARN",
                                f"the job's cgroup uses {gb(s.cgroup_used_bytes)}, {share:.0%} of its "
                                f"{gb(s.cgroup_limit_bytes)} limit: at 100% the kernel kills inside it",
                                f"the cgroup at {share:.0%} of its limit",
                                figures={"cgroup_limit_bytes": float(s.cgroup_limit_bytes)})
            event = self.open_event("cgroup")
            if event is not None:
                event.figures["peak_share"] = max(event.figures.get("peak_share", 0.0), round(share, 4))
        return lines

    def _ooms(self, ooms: tuple[OomHit, ...]) -> list[str]:
        lines = []
        for hit in ooms:
            who = f"pid {hit.pid}" + (f" ({hit.name})" if hit.name else "") if hit.pid else "a process"
            if hit.in_job:
                whose = "the job" if hit.job else "one of the job's processes"
                text = f"the kernel's OOM killer killed {whose} ({who})"
                status = "FAIL"
            else:
                text = f"the kernel's OOM killer killed {who} outside the job: memory ran out"
                status = "WARN"
            lines.append(self._open(G3, status, "oom_kill", text, key=str(hit.pid or ""), pid=hit.pid,
                                    end_text=hit.evidence))
            self.events[-1].end_s = self.t
        return lines

    # -- G4 -------------------------------------------------------------------------------------------
    def _clocks(self, s: WatchSample) -> list[str]:
        lines: list[str] = []
        busy = s.busy is not None and s.busy >= g04.BUSY_MIN
        if s.sm_clock_mhz is not None and busy:
            self.clock_window.append((s.t_s, s.sm_clock_mhz))
        while self.clock_window and s.t_s - self.clock_window[0][0] > self.window_s:
            self.clock_window.popleft()
        self.clock_now = _median([c for _, c in self.clock_window])
        reasons = reason_names((s.reasons_mask or 0) & THROTTLE_BITS)
        grew = []
        prev = self.previous
        for name, attr in (("thermal", "thermal_us"), ("SW thermal slowdown", "sw_thermal_us"),
                           ("HW thermal slowdown", "hw_thermal_us"), ("HW power brake", "hw_power_brake_us")):
            now, before = getattr(s, attr), getattr(prev, attr) if prev is not None else None
            if now is not None and before is not None and now > before:
                grew.append(name)
        sign = bool(reasons or grew)
        what = (", ".join(reasons) + " active") if reasons else (f"{', '.join(grew)} counter growing" if grew else "")
        clock = ""
        if self.clock_at_best and s.sm_clock_mhz is not None and s.sm_clock_mhz < self.clock_at_best * 0.99:
            clock = f"SM clock {self.clock_at_best:.0f} -> {s.sm_clock_mhz:.0f} MHz, "
        elif s.sm_clock_mhz is not None:
            clock = f"SM clock {s.sm_clock_mhz:.0f} MHz, "
        rate = ""
        if self.rate_reference and self.rate_now is not None and self.rate_now < self.rate_reference * 0.99:
            rate = (f", rate {_rate(self.rate_reference)} -> {_rate(self.rate_now)}{self._unit} "
                    f"({self.rate_now / self.rate_reference - 1:+.0%})")
        lines += self._step("throttle", sign, G4, "WARN", f"{clock}{what}{rate}", "no thermal or power-brake event",
                            at_once=bool(grew) and not reasons,
                            sign=", ".join(reasons) if reasons else f"{', '.join(grew)} counter growing",
                            figures={k: v for k, v in (("sm_clock_mhz", s.sm_clock_mhz),
                                                       ("temperature_c", s.temperature_c)) if v is not None})
        floor = self.ctx.floor
        stuck = busy and floor is not None and s.sm_clock_mhz is not None and s.sm_clock_mhz < floor
        state = "GPU stuck in its low-power state" if self.ctx.profile.key == "gb10" else "clocks held far below max"
        lines += self._step("stuck", stuck, G4, "FAIL",
                            f"SM clock {s.sm_clock_mhz or 0:.0f} MHz at {s.utilization_pct or 0:.0f}% busy, below the "
                            f"{floor or 0:.0f} MHz floor: {state}", "SM clock back above the floor",
                            sign=f"SM clock under the {floor or 0:.0f} MHz floor", figures={"floor_mhz": float(floor or 0)})
        return lines

    # -- the rate -----------------------------------------------------------------------------------
    def _note_rate(self, s: WatchSample) -> None:
        for value in (self._arrived if not s.job_stopped else []):
            self.rate_values += 1
            self.rates.append((s.t_s, value))
            if self.rate_first is None:
                self.rate_first = value
        while self.rates and s.t_s - self.rates[0][0] > self.window_s:
            self.rates.popleft()
        self.rate_now = _median([v for _, v in self.rates]) if len(self.rates) >= RATE_MIN_VALUES else None
        if self.rate_now is not None and not s.job_stopped and (self.rate_reference is None
                                                               or self.rate_now > self.rate_reference):
            self.rate_reference = self.rate_now
            self.clock_at_best = self.clock_now

    def _rate_state(self, s: WatchSample) -> list[str]:
        self._note_rate(s)
        ref, now = self.rate_reference, self.rate_now
        falling = ref is not None and now is not None and not s.job_stopped and now < ref * (1 - self.ctx.max_drop)
        state = self.states.get(("rate_drop", ""))
        if falling and (state is None or state.event is None):
            cause, who, gotcha, status = self._blame()
            fell = f"rate {_rate(ref)} -> {_rate(now)}{self._unit} ({now / ref - 1:+.0%})"
            text = {"throttle": f"{fell} with {who}",
                    "gpu_process": f"{fell} since {who} joined the GPU",
                    "none": f"{fell} with no clock or throttle sign: not the cooling",
                    "unknown": f"{fell} (GPU clocks not read)"}[cause]
        else:
            cause, gotcha, status, text, fell = "", G4, "WARN", "", ""
        figures = {"rate_reference": float(ref or 0), "rate": float(now or 0)}
        if self.clock_at_best is not None and self.clock_now is not None:
            figures.update({"sm_clock_at_best_mhz": self.clock_at_best, "sm_clock_then_mhz": self.clock_now})
        lines = self._step("rate_drop", falling, gotcha, status, text,
                           f"rate back to {_rate(now)} (best {_rate(ref)})", cause=cause, figures=figures,
                           onset=self._fell_from(ref * (1 - self.ctx.max_drop)) if falling and ref else None)
        event = self.open_event("rate_drop")
        if event is not None and now is not None:
            event.figures["lowest_rate"] = min(event.figures.get("lowest_rate", now), now)
        return lines

    def _fell_from(self, threshold: float) -> Optional[float]:
        """When the rate went under ``threshold`` to stay (the median lags it by half a window): the
        earliest value under it from which 80 % of the window's values are under it."""
        values = list(self.rates)
        under = 0
        onset = None
        for i in range(len(values) - 1, -1, -1):
            under += values[i][1] < threshold
            if values[i][1] < threshold and under >= 0.8 * (len(values) - i):
                onset = values[i][0]
        return onset

    def _blame(self) -> tuple[str, str, int, str]:
        """(cause, who or what, gotcha, status) of a rate fall beginning now."""
        for kind in ("stuck", "throttle"):
            event = next((e for e in reversed(self.events) if e.kind == kind
                          and (e.end_s is None or e.end_s >= self.t - self.window_s)), None)
            if event is not None:
                return "throttle", event.text.split(", rate ")[0], G4, "FAIL"
        joined = [e for e in self.events if e.kind in ("gpu_process", "outside") and e.end_s is None]
        if joined:  # its load explains a clock that fell with it (two loads meet the power cap sooner)
            event = joined[-1]
            status = "FAIL" if event.status == "FAIL" else "WARN"
            return "gpu_process", event.text.split(" joined the GPU")[0].split(" was on the GPU")[0], G6, status
        if self.clock_at_best and self.clock_now and self.clock_now < self.clock_at_best * (1 - g04.CLOCK_FALL):
            return "throttle", f"SM clock {self.clock_at_best:.0f} -> {self.clock_now:.0f} MHz", G4, "FAIL"
        if not self.ctx.nvml_ok:
            return "unknown", "", G4, "WARN"
        return "none", "", G4, "WARN"

    # -- G6 -------------------------------------------------------------------------------------------
    def start_gpu(self, others: Optional[GpuProcesses]) -> list[str]:
        """The GPU's other processes as the watch began (the full survey, command lines scanned too):
        those on the GPU were there before the job."""
        if others is None or not self.ctx.here.is_profile:
            return []
        return self._gpu(others, before=True)

    def _gpu(self, others: Optional[GpuProcesses], before: bool = False) -> list[str]:
        if others is None:
            return []
        lines: list[str] = []
        listed = {p.pid: p for p in others.processes if p.nvml_lists}
        for pid in listed:
            self._gpu_seen[pid] = self._gpu_seen.get(pid, 0) + 1
            self._gpu_missing.pop(pid, None)
        for pid in list(self._gpu_seen):
            if pid not in listed:
                self._gpu_missing[pid] = self._gpu_missing.get(pid, 0) + 1
                self._gpu_seen[pid] = 0
        verdict: Optional[Verdict] = None
        groups = {g.root.pid: g for g in g06.group_processes(list(listed.values()))}
        for pid, proc in listed.items():
            known = self.others.get(pid)
            if known is not None:
                known.last_s, known.gone = self.t, False
                if proc.gpu_memory_bytes is not None:
                    known.held_bytes = max(known.held_bytes or 0, proc.gpu_memory_bytes)
                continue
            if self._gpu_seen[pid] < GPU_HOLD_SAMPLES and not before:
                continue
            if verdict is None:
                verdict = g06.judge_contention(others, self.ctx.profile, self.ctx.plan, here=self.ctx.here)
            group = groups.get(pid) or next((g for g in groups.values() if pid in g.pids), None)
            label = group.name if group is not None else f"pid {pid}"
            cap = group.workload.cap_text if group is not None and group.workload is not None else "no memory cap"
            held = f", holds {gb(proc.gpu_memory_bytes)}" if proc.gpu_memory_bytes else ""
            status = verdict.status.value if verdict.status.needs_fix else "INFO"
            start = self.t - (self._gpu_seen[pid] - 1) * self.ctx.every_s if not before else 0.0
            self.others[pid] = WatchProcess(pid=pid, label=label, first_s=max(0.0, start), last_s=self.t,
                                            status=verdict.status.value, summary=verdict.summary, fix=verdict.fix,
                                            cap=cap, held_bytes=proc.gpu_memory_bytes, before_job=before)
            how = "was on the GPU before the job" if before else "joined the GPU"
            lines.append(self._open(G6, status, "gpu_process", f"{label} {how} ({cap}{held})", key=str(pid),
                                    start=max(0.0, start), pid=pid, end_text=f"{label} left the GPU"))
            self.states[("gpu_process", str(pid))] = _State("gpu_process", str(pid), event=self.events[-1])
        for pid, missing in list(self._gpu_missing.items()):
            state = self.states.get(("gpu_process", str(pid)))
            if state is None or state.event is None or missing < GPU_HOLD_SAMPLES:
                continue
            event = state.event
            event.end_s = self.t - (missing - 1) * self.ctx.every_s
            state.event = None
            if pid in self.others:
                self.others[pid].gone = True
            lines.append(f"G6 ended {hms(self.t)} after {hms(event.seconds(self.t))}: {event.end_text}")
            self._gpu_missing.pop(pid, None)
            self._gpu_seen.pop(pid, None)
        outside = others.outside()
        lines += self._step("outside", outside is not None, G6, "WARN", outside.text if outside else "",
                            "the GPU's use is explained by the processes listed again")
        return lines

    def finish(self) -> list[WatchEvent]:
        """The events of the run. A state whose sign was gone from some sample to the end ended then,
        though the run ended before it was gone long enough to be said (a GEMM that left 30 s before
        the end: the rate was back); one whose sign lasted to the end is left open."""
        for state in self.states.values():
            if state.event is not None and state.clear_since is not None:
                state.event.end_s = state.clear_since
        return self.events


# -- the whole run ------------------------------------------------------------------------------------
def _spans(events: list[WatchEvent], elapsed: float) -> float:
    """The share of the run the events covered (overlaps counted once)."""
    if elapsed <= 0:
        return 0.0
    spans = sorted((e.start_s, e.end_s if e.end_s is not None else elapsed) for e in events)
    covered, end = 0.0, -1.0
    for a, b in spans:
        if b <= end:
            continue
        covered += b - max(a, end)
        end = b
    return min(1.0, covered / elapsed)


def _when(events: list[WatchEvent], elapsed: float) -> str:
    share = _spans(events, elapsed)
    first = min(e.start_s for e in events)
    if all(e.end_s is not None and e.end_s == e.start_s for e in events):
        return f"at {hms(first)}"
    return f"from {hms(first)} for {share:.0%} of the run"


def _readings(reading: WatchReading, events: list[WatchEvent], **more) -> dict:
    return {"events": [{"kind": e.kind, "status": e.status, "start_s": e.start_s, "end_s": e.end_s, "text": e.text}
                       for e in events[:20]],
            "share": round(_spans(events, reading.elapsed_s), 4) if events else 0.0,
            "elapsed_s": reading.elapsed_s, "samples": reading.samples, **more}


def _elsewhere(gotcha: int, reading: WatchReading, profile: Profile, here: Machine, thing: str) -> Verdict:
    return Verdict(gotcha, Status.INFO, here.not_judged(profile, thing), detail=here.not_profile(profile, thing),
                   readings={"machine_is_profile": False, "machine": here.device, "elapsed_s": reading.elapsed_s})


def judge_memory(reading: WatchReading, profile: Profile, here: Machine = SAME) -> Verdict:
    if not here.is_profile:
        return _elsewhere(G3, reading, profile, here, "memory")
    events = [e for e in reading.events if e.gotcha == G3]
    figures = {"mem_total_bytes": reading.mem_total_bytes, "lowest_available_bytes": reading.lowest_available_bytes,
               "swap_used_max_bytes": reading.swap_used_max_bytes, "cgroup_limit_bytes": reading.cgroup_limit_bytes,
               "job_rss_max_bytes": reading.job_rss_max_bytes}
    end = reading.end
    if end.oom_kill:
        when = f" at {hms(end.t_s)}" if end.t_s is not None else ""
        who = f"pid {end.oom_pid}" if end.oom_pid else "the job"
        low = f"; lowest MemAvailable {gb(reading.lowest_available_bytes)}" if reading.lowest_available_bytes else ""
        if reading.cgroup_limit_bytes:
            low = f"; its cgroup's limit {gb(reading.cgroup_limit_bytes)}"
        summary = fitting(G3, Status.FAIL, f"the kernel's OOM killer killed the job ({who}){when}{low}",
                          f"the kernel's OOM killer killed the job ({who}){when}")
        return Verdict(G3, Status.FAIL, summary, fix=FIX_OOM, detail=end.oom_evidence,
                       readings=_readings(reading, events, oom_evidence=end.oom_evidence, **figures))
    if reading.samples == 0 or reading.mem_total_bytes is None:
        return Verdict(G3, Status.SKIP, "no memory read while the job ran", readings=_readings(reading, events))
    if events:
        worst = next((e for e in events if e.status == "FAIL"), None)
        if worst is not None:  # one of the job's processes OOM-killed, the job went on
            return Verdict(G3, Status.FAIL, fitting(G3, Status.FAIL, f"{worst.text} at {hms(worst.start_s)}"),
                           fix=FIX_OOM, detail=worst.end_text, readings=_readings(reading, events, **figures))
        order = ("oom_kill", "low_memory", "cgroup", "page_cache")
        kind = min({e.kind for e in events}, key=lambda k: order.index(k) if k in order else 9)
        same = [e for e in events if e.kind == kind]
        first = same[0]
        peak = max((e.figures.get("peak_share", 0.0) for e in same), default=0.0)
        limit = f" ({peak:.0%} of {gb(reading.cgroup_limit_bytes)})" if peak and reading.cgroup_limit_bytes else ""
        head = {"oom_kill": first.text, "low_memory": "MemAvailable ran low",
                "cgroup": f"the job's cgroup neared its memory limit{limit}",
                "page_cache": "page cache held memory CUDA could not use"}[kind]
        lowest = (f"lowest {gb(reading.lowest_available_bytes)} at {hms(reading.lowest_available_s)}"
                  if reading.lowest_available_bytes is not None else "")
        when = _when(same, reading.elapsed_s)
        summary = fitting(G3, Status.WARN, f"{head} {when}" + (f"; {lowest}" if lowest and kind == "low_memory" else ""),
                          f"{head} {when}")
        fix = {"oom_kill": FIX_OOM_ELSEWHERE, "low_memory": FIX_LOW_MEMORY, "cgroup": FIX_CGROUP,
               "page_cache": g03.DROP_CACHES_FIX}[kind]
        others = sorted({e.kind for e in events} - {kind})
        detail = "; ".join([f"{hms(e.start_s)} {e.text}" for e in same[:3]] +
                           ([f"also: {', '.join(others)}"] if others else []))
        return Verdict(G3, Status.WARN, summary, fix=fix, detail=detail, readings=_readings(reading, events, **figures))
    low = reading.lowest_available_bytes
    share = f" ({low / reading.mem_total_bytes:.0%})" if low is not None and reading.mem_total_bytes else ""
    swap = "no swap used" if not reading.swap_used_max_bytes else f"swap up to {gb(reading.swap_used_max_bytes)}"
    summary = fitting(G3, Status.PASS,
                      f"lowest MemAvailable {gb(low)}{share} at {hms(reading.lowest_available_s)} over "
                      f"{hms(reading.elapsed_s)}; {swap}, no OOM kill",
                      f"lowest MemAvailable {gb(low)}{share} over {hms(reading.elapsed_s)}; no OOM kill")
    cg = f"; cgroup limit {gb(reading.cgroup_limit_bytes)}" if reading.cgroup_limit_bytes else ""
    return Verdict(G3, Status.PASS, summary, detail=f"job RSS up to {gb(reading.job_rss_max_bytes)}{cg}",
                   readings=_readings(reading, events, **figures))


def _drops(reading: WatchReading) -> list[WatchEvent]:
    return [e for e in reading.events if e.kind == "rate_drop"]


def cause_of(drop: WatchEvent, reading: WatchReading) -> str:
    """A fall's cause over the whole run: throttling (a G4 state overlapping it or begun up to a
    minute before), another process on the GPU when it began, else none (or unknown without NVML)."""
    end = drop.end_s if drop.end_s is not None else reading.elapsed_s
    window = RATE_WINDOW_SAMPLES * reading.every_s
    for e in reading.events:
        if e.kind in ("throttle", "stuck") and e.start_s <= end and \
                (e.end_s is None or e.end_s >= drop.start_s - window):
            return "throttle"
    for e in reading.events:
        if e.kind in ("gpu_process", "outside") and e.start_s <= drop.start_s + HOLD_SAMPLES * reading.every_s and \
                (e.end_s is None or e.end_s >= drop.start_s):
            return "gpu_process"
    if drop.cause == "throttle":  # the SM clock fell with it, and nobody else was on the GPU
        return "throttle"
    return "unknown" if reading.nvml_error else "none"


def _fell(drop: WatchEvent, unit: str = "") -> tuple[str, str]:
    ref, low = drop.figures.get("rate_reference"), drop.figures.get("lowest_rate", drop.figures.get("rate"))
    if not ref or low is None:
        return "the rate fell", ""
    return f"the rate fell {1 - low / ref:.0%}", f"{_rate(ref)} -> {_rate(low)}" + (f" {unit}" if unit else "")


def judge_clocks(reading: WatchReading, profile: Profile, here: Machine = SAME) -> Verdict:
    if not here.is_profile:
        return _elsewhere(G4, reading, profile, here, "clocks")
    events = [e for e in reading.events if e.gotcha == G4 and e.kind != "rate_drop"]
    drops = _drops(reading)
    floor, floor_src = g04.clock_floor(profile, reading.max_sm_clock_mhz)
    figures = {"sm_clock_busy_min_mhz": reading.sm_clock_busy_min_mhz,
               "sm_clock_busy_max_mhz": reading.sm_clock_busy_max_mhz, "floor_mhz": floor,
               "temperature_max_c": reading.temperature_max_c, "power_max_w": reading.power_max_w,
               "rate_reference": reading.rate_reference, "rate_last": reading.rate_last}
    hot = [d for d in drops if cause_of(d, reading) == "throttle"]
    if hot:
        drop = hot[0]
        fell, figures_text = _fell(drop, reading.rate_unit)
        signs = [e for e in events if e.kind in ("throttle", "stuck")]
        sign = signs[0].sign if signs and signs[0].sign else drop.text.split(" with ", 1)[-1]
        clock = ""
        if drop.figures.get("sm_clock_at_best_mhz") and drop.figures.get("sm_clock_then_mhz"):
            clock = f", SM clock {drop.figures['sm_clock_at_best_mhz']:.0f} -> {drop.figures['sm_clock_then_mhz']:.0f} MHz"
        when = _when([drop], reading.elapsed_s)
        summary = fitting(G4, Status.FAIL, f"{fell} ({figures_text}) {when}: {sign}{clock}",
                          f"{fell} ({figures_text}) {when}: {sign}", f"{fell} {when}: {sign}",
                          f"{fell} {when} with throttling")
        return Verdict(G4, Status.FAIL, summary, fix=f"{g04.FIX_COOLING} (here: before {hms(drop.start_s)})",
                       detail="; ".join(f"{hms(e.start_s)} {e.text}" for e in [drop, *signs][:4]),
                       readings=_readings(reading, [drop, *signs], **figures))
    stuck = [e for e in events if e.kind == "stuck"]
    if stuck:
        fix = g04.FIX_STUCK_GB10 if profile.key == "gb10" else g04.FIX_STUCK
        summary = fitting(G4, Status.FAIL, f"{stuck[0].text} {_when(stuck, reading.elapsed_s)}",
                          f"SM clock under the {floor or 0:.0f} MHz floor while busy {_when(stuck, reading.elapsed_s)}")
        return Verdict(G4, Status.FAIL, summary, fix=fix, detail=f"floor: {floor_src}",
                       readings=_readings(reading, stuck, **figures))
    plain = [d for d in drops if cause_of(d, reading) in ("none", "unknown")]
    if plain:
        drop = plain[0]
        fell, figures_text = _fell(drop, reading.rate_unit)
        unknown = cause_of(drop, reading) == "unknown"
        tail = "GPU clocks not read (NVML unavailable)" if unknown else "no clock or throttle sign: not the cooling"
        summary = fitting(G4, Status.WARN, f"{fell} ({figures_text}) {_when([drop], reading.elapsed_s)}, {tail}",
                          f"{fell} {_when([drop], reading.elapsed_s)}, {tail}")
        return Verdict(G4, Status.WARN, summary, fix=FIX_UNKNOWN_CAUSE if unknown else FIX_NOT_COOLING,
                       detail="; ".join(f"{hms(d.start_s)} {d.text}" for d in plain[:3]),
                       readings=_readings(reading, plain, **figures))
    if reading.nvml_error:
        return Verdict(G4, Status.SKIP, fitting(G4, Status.SKIP, f"NVML unavailable: {reading.nvml_error}",
                                                "NVML unavailable: no GPU clocks read"),
                       readings=_readings(reading, [], **figures))
    throttles = [e for e in events if e.kind == "throttle"]
    clock = ""
    lo, hi = reading.sm_clock_busy_min_mhz, reading.sm_clock_busy_max_mhz
    if lo is not None and hi is not None:
        clock = f"SM clock {lo:.0f}-{hi:.0f} MHz busy" if round(lo) != round(hi) else f"SM clock {lo:.0f} MHz busy"
    temp = f"max {reading.temperature_max_c:.0f} °C" if reading.temperature_max_c is not None else ""
    if throttles and not reading.rate_values:
        first = throttles[0]
        summary = fitting(G4, Status.WARN, f"{first.text.split(', rate ')[0]} {_when(throttles, reading.elapsed_s)}; "
                                           "no rate read to tell its cost",
                          f"throttling {_when(throttles, reading.elapsed_s)}; no rate read to tell its cost")
        return Verdict(G4, Status.WARN, summary, fix=FIX_THROTTLE_NO_RATE,
                       detail="; ".join(x for x in (clock, temp) if x), readings=_readings(reading, throttles, **figures))
    held = ""
    if reading.rate_reference:
        held = f"; rate held ({_rate(reading.rate_reference)} best, {_rate(reading.rate_last)} at the end)"
    if throttles:
        summary = fitting(G4, Status.PASS, f"throttling {_when(throttles, reading.elapsed_s)} without a rate fall{held}",
                          f"throttling {_when(throttles, reading.elapsed_s)} without a rate fall")
        return Verdict(G4, Status.PASS, summary, detail="; ".join(f"{hms(e.start_s)} {e.text}" for e in throttles[:3]),
                       readings=_readings(reading, throttles, **figures))
    parts = [p for p in (clock, temp) if p]
    others = [d for d in drops if cause_of(d, reading) == "gpu_process"]
    aside = f"; the rate fell at {hms(others[0].start_s)} with another process on the GPU (G6)" if others else held
    figures_text = f" ({', '.join(parts)})" if parts else ""
    summary = fitting(G4, Status.PASS, f"no throttling over {hms(reading.elapsed_s)}{figures_text}{aside}",
                      f"no throttling over {hms(reading.elapsed_s)}{aside}",
                      f"no throttling over {hms(reading.elapsed_s)}{figures_text}",
                      f"no throttling over {hms(reading.elapsed_s)}")
    return Verdict(G4, Status.PASS, summary, readings=_readings(reading, [], **figures))


def judge_others(reading: WatchReading, profile: Profile, here: Machine = SAME) -> Verdict:
    if not here.is_profile:
        return _elsewhere(G6, reading, profile, here, "processes")
    events = [e for e in reading.events if e.gotcha == G6]
    procs = {p.pid: p for p in reading.others}
    blamed = [d for d in _drops(reading) if cause_of(d, reading) == "gpu_process"]
    figures = {"processes": [{"pid": p.pid, "label": p.label, "first_s": p.first_s, "last_s": p.last_s,
                              "status": p.status, "cap": p.cap, "held_bytes": p.held_bytes} for p in reading.others[:20]]}
    if blamed:
        drop = blamed[0]
        culprit = next((e for e in events if e.start_s <= drop.start_s + HOLD_SAMPLES * reading.every_s and
                        (e.end_s is None or e.end_s >= drop.start_s)), events[0] if events else None)
        proc = procs.get(culprit.pid) if culprit is not None and culprit.pid is not None else None
        status = Status.FAIL if proc is not None and proc.status == "FAIL" else Status.WARN
        who = proc.label if proc is not None else (culprit.text if culprit is not None else "another process")
        fell, figures_text = _fell(drop, reading.rate_unit)
        span = _when([culprit], reading.elapsed_s) if culprit is not None else ""
        joined = f"{who} on the GPU {span}".strip()
        summary = fitting(G6, status, f"{joined}: {fell} ({figures_text}) from {hms(drop.start_s)}",
                          f"{joined}: {fell} from {hms(drop.start_s)}", f"{who}: {fell} from {hms(drop.start_s)}")
        fix = (proc.fix if proc is not None and proc.fix else
               "run one heavy job at a time: let the other job finish, or stop it"
               + (f" (kill {proc.pid})" if proc is not None else "")) + "; the fall is its doing, not the cooling's"
        if culprit is not None and culprit.kind == "outside":
            fix = FIX_OUTSIDE
        return Verdict(G6, status, summary, fix=fix, detail=proc.summary if proc is not None else "",
                       readings=_readings(reading, events, **figures))
    if reading.lists_error and not reading.others:
        return Verdict(G6, Status.SKIP, fitting(G6, Status.SKIP, f"no GPU process list: {reading.lists_error}",
                                                "no GPU process list (NVML)"), readings=_readings(reading, events))
    bad = [p for p in reading.others if p.status in ("FAIL", "WARN")]
    outside = [e for e in events if e.kind == "outside"]
    if bad:
        status = Status.FAIL if any(p.status == "FAIL" for p in bad) else Status.WARN
        worst = next(p for p in bad if p.status == status.value)
        event = next((e for e in events if e.pid == worst.pid), None)
        span = _when([event], reading.elapsed_s) if event is not None else ""
        how = "before the job" if worst.before_job else "joined"
        summary = fitting(G6, status, f"{worst.label} on the GPU {span} ({how}; {worst.cap})",
                          f"{worst.label} on the GPU {span}", f"{worst.label} on the GPU")
        return Verdict(G6, status, summary, fix=worst.fix or FIX_OUTSIDE,
                       detail=worst.summary, readings=_readings(reading, events, **figures))
    if outside:
        summary = fitting(G6, Status.WARN, f"{outside[0].text} {_when(outside, reading.elapsed_s)}",
                          f"a process outside this container used the GPU {_when(outside, reading.elapsed_s)}")
        return Verdict(G6, Status.WARN, summary, fix=FIX_OUTSIDE, readings=_readings(reading, events, **figures))
    if reading.others:
        names = ", ".join(p.label for p in reading.others[:2]) + (f" +{len(reading.others) - 2} more"
                                                                 if len(reading.others) > 2 else "")
        summary = fitting(G6, Status.PASS, f"small or capped beside the job: {names} "
                                           f"({_when([e for e in events if e.kind == 'gpu_process'], reading.elapsed_s)})",
                          f"small or capped beside the job: {names}")
        return Verdict(G6, Status.PASS, summary, readings=_readings(reading, events, **figures))
    return Verdict(G6, Status.PASS, fitting(G6, Status.PASS,
                                            f"no other process on the GPU over {hms(reading.elapsed_s)} "
                                            f"(NVML's lists every {reading.every_s:g} s)",
                                            f"no other process on the GPU over {hms(reading.elapsed_s)}"),
                   readings=_readings(reading, events, **figures))


def judge_run(reading: WatchReading, profile: Profile, here: Machine = SAME) -> list[Verdict]:
    """The G3, G4 and G6 verdicts of a whole watched run."""
    checks = (("memory over the run", judge_memory), ("clocks over the run", judge_clocks),
              ("other GPU processes over the run", judge_others))
    return [replace(judge(reading, profile, here), check=label) for label, judge in checks]

