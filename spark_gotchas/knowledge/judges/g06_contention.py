"""G6 — global unified-memory contention: another GPU workload in the way of this run.

The pool a cap is a fraction of: NVML's device total; on a unified-memory GPU without one
(GB10), MemTotal. Figures are in GB (10^9 bytes). On a GPU with its own memory no neighbour can
grow into the host's, so an uncapped one is in the way only of a plan it leaves too little for.
A process in another pid namespace has no pid here: it is found from the device's own figures
(:meth:`spark_gotchas.knowledge.readings.gpu.GpuProcesses.outside`). What bounds each server is read by
:mod:`spark_gotchas.knowledge.workloads` as the server itself reads it.

Rules:

The pool a cap is a fraction of: NVML's device total; on a unified-memory GPU without one
(GB10), MemTotal.

- A profile asked for on a machine that is not that platform (`--spark-profile gb10` on a CI
  box or on an H200; the machine's own GPU, or none, decides; a replay decides from the GPU the
  snapshot recorded): its processes stand for nothing on a Spark → **INFO**
  `not a GB10 (no GPU): processes not judged`, its detail listing what was seen (servers and
  trainers first), none judged.
- A machine taken for the profile's platform with a fact none of it has (an x86_64 "GB10", another
  capability: `profiles.beyond`) → **WARN** that the machine is not that platform's; processes not
  judged (their pool and memory rule would be another platform's).
- No GPU visible here (profile `none`): a server's or trainer's command line cannot hold GPU
  memory on this machine → **INFO** listing it, e.g.
  `G6 INFO: no GPU visible here: 1 workload seen, holding no GPU memory on this machine` (its
  detail: `seen, not judged: pid 4242 vLLM (default --gpu-memory-utilization 0.9; user ci)`).
  Where a GPU exists but NVML cannot list other containers' processes, the command lines are
  judged as below.
- Processes of one program are judged together: a process joins its topmost recorded
  ancestor that is a recognised workload (an engine child joins `vllm serve`, a torchrun
  worker joins torchrun), adding its memory to the group's.
- A server is bounded by every setting it reads, read as its own parser reads it (docs/checks/g06.md
  lists them with their sources): a flag however it may be spelled (`--flag=v`, `_` for `-` where the server takes it,
  an abbreviation argparse accepts), the config file its command line names, the variables of
  its environment, and the default of its installed release where none is set (vLLM: 0.9 to
  0.19, 0.92 from 0.20, all of the GPU from 0.34; a release the snapshot does not hold is taken
  at 0.9, the least any takes, and said so). The bound is one of: a share of the pool; a share of
  the memory free after its weights (TensorRT-LLM); a KV cache of a set size beside its weights
  (vLLM `--kv-cache-memory-bytes`, which leaves `--gpu-memory-utilization` out of it); what its
  model and context need when it loads (llama.cpp); models loaded on request (Ollama,
  llama-swap, llama-server's router mode).
- Bounded above 0.5 of the pool, holding more than 0.5 of it, or a KV cache that with what it
  holds beside it comes to more than 0.5 → **FAIL**. A KV cache set but nothing held yet →
  **WARN** `cannot tell how far pid N may grow: its weights come on top of its KV cache …`.
- A bound the recorded facts cannot settle (an engine whose launcher is not visible, a config
  file that could not be read, an environment not read where the server reads its bound there,
  a value the server would not have started with) is said, `cannot tell how far pid N may grow:
  …` with the reason, and no default takes its place: it is judged by what it holds, as a
  process without a cap is (below), and named `bound unknown`.
- No cap and holding more than 4 GB → **FAIL** on a unified-memory GPU (GB10, GH200: an uncapped
  process grows into the pool the run needs). On a GPU with its own memory (H100, H200, a GPU
  without a profile whose memory NVML reads) → **WARN** naming it and what it leaves, e.g.
  `pid 4242 python3 (holds 4.8 GB, no memory cap, leaves 80.7 GB)`: its memory is in the way only
  when it holds more than half the device (above) or leaves too little for the planned load
  (below); its compute is a sharing matter, judged by G4, G5 and G7 where it slowed a measurement.
- A process outside this container (started without `--pid=host`, a container sees another pid
  namespace's processes under pids it cannot map, or not at all), found without pids: pids NVML
  lists that are not visible here, beyond those of this run's own processes that may hold a GPU
  context (none at rest); device memory in use, the driver's reserve apart, that no listed process
  holds (256 MiB or more; 2 GiB where NVML does not split the reserve out); and, before this run
  used the GPU, utilization of 10 % or more (without a utilization figure, power at half the limit
  or more) with no visible process listed on it. It is one workload holding the hidden pids'
  memory and the unlisted memory, judged by the memory rules here (no cap), and otherwise
  **WARN** `another process outside this container uses the GPU: 2 pids NVML lists are not visible
  here` (or `…: NVML lists no pid for it`), its figures in the detail; the fix says to find it from
  the host.
- All workloads together claiming more than 0.5 of the pool (a cap claims cap × pool, a KV cache
  its size or what it holds, an uncapped process what it holds) → **FAIL**. With `--spark-model-gb N`, claiming more than
  the pool minus the planned load peak (N × `--spark-load-factor` on unified memory, N on a
  discrete GPU) → **FAIL** naming the shortfall.
- A server that loads models on request (Ollama, llama-swap) holding 4 GB or less, or an
  uncapped process whose memory is unknown → **WARN**.
- Small or capped (≤ 0.5) workloads → **PASS** listing them; nothing else running → **PASS**
  saying how many command lines were looked at.
- On a discrete GPU only the devices in `CUDA_VISIBLE_DEVICES` (all when unset) are judged;
  processes on other GPUs are counted, not judged.
- Neither NVML nor the process table readable → **SKIP**.

The line names the workloads in the way (two at most): pid, program, and its cap or what it
holds (pid and program alone where that does not fit in 100 columns; a total claim leads with
the total, e.g. `together they claim 111.5 GB of 130.7 GB, more than half: pid 6001 vLLM, pid
44700 vLLM`); the detail names each with its cap (and where the cap came from: flag, config,
environment, default), what it holds and its owner. The fix names the setting that bounds each
server as it was started (its flag, the key in the config file it read, its variable; never one
it ignores) with the figure that fits: 0.5, or the share the other claims and the planned load
peak leave; a KV cache size from what its weights take beside it. Where only the next reading
can tell (TensorRT-LLM's share of free memory, a llama-server's context, Ollama, an engine's
launcher, a config this run may not read), it says what to look at or to run the check again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from ...base.units import GB, gb
from ..plan import Plan
from ..profiles import SAME, Machine, Profile
from ..readings.gpu import OUTSIDE_FIX, GpuInventory, GpuProcess, GpuProcesses, Outside
from ..readings.mem import MemInfo
from ..verdict import LINE_COLUMNS, Status, Verdict, fitting, format_line
from ..workloads import FREE_FRACTION, KV_BYTES, NO_BOUND, ON_REQUEST, UNKNOWN, Bound, Workload, classify

G = 6
NEAR_CAPACITY_FRACTION = 0.5
SMALL_BYTES = 4 * GB  # the gotcha's own example: a < 4 GB LoRA coexists with a capped server
OLLAMA_STOP = "stop Ollama while training (sudo systemctl stop ollama) or unload its models (ollama stop MODEL)"
OLLAMA_KEEP = ("to keep it beside training, set OLLAMA_MAX_LOADED_MODELS=1 and OLLAMA_KEEP_ALIVE=0 in its service's "
               "environment (sudo systemctl edit ollama) and see what it holds with ollama ps")
RESTART = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "trtllm": "trtllm-serve"}


@dataclass
class Group:
    """One workload: a root process, the processes that belong to it, and what it claims."""

    root: GpuProcess
    workload: Optional[Workload]
    members: list[GpuProcess] = field(default_factory=list)
    outside: Optional[Outside] = None  # the processes outside this container: pids not visible here, or none listed
    pool: Optional[int] = None  # the memory its bound is a share of (set when it is judged)
    room: Optional[float] = None  # what it may claim with the others as they are: half the pool, or what the plan leaves

    @property
    def held_bytes(self) -> Optional[int]:
        values = [m.gpu_memory_bytes for m in self.members if m.gpu_memory_bytes is not None]
        if self.outside is not None and self.outside.unlisted_bytes is not None:
            values.append(self.outside.unlisted_bytes)
        return sum(values) if values else None

    @property
    def devices(self) -> list[int]:
        return sorted({d for m in self.members for d in m.gpu_devices})

    @property
    def pids(self) -> list[int]:
        return [m.pid for m in self.members]

    @property
    def bound(self) -> Bound:
        return self.workload.bound if self.workload is not None else NO_BOUND

    def fraction(self, pool: Optional[float]) -> Optional[float]:
        """The share of ``pool`` its bound lets it take (a fraction, or one its server sizes from the GPU)."""
        return self.bound.fraction_for(pool)

    @property
    def graphics_only(self) -> bool:
        return all(m.nvml_lists == ["graphics"] for m in self.members)

    @property
    def name(self) -> str:
        """``pid 6001 vLLM``: the root process and its program; ``pid 91 outside this container``."""
        proc = self.root
        if self.outside is not None:
            pids = [m.pid for m in self.members]
            if not pids:
                return self.outside.brief
            return f"pid{'s' if len(pids) > 1 else ''} {', '.join(str(p) for p in pids[:3])}" \
                   f"{' ...' if len(pids) > 3 else ''} outside this container"
        if self.workload is not None:
            name = self.workload.program
        elif proc.cmdline:
            name = os.path.basename(proc.cmdline[0]) or proc.name or "?"
        else:
            name = proc.name or "unknown process"
        return f"pid {proc.pid} {name}"

    @property
    def label(self) -> str:
        if self.outside is not None:
            return self.name
        n = len(self.members) - 1
        extra = f" +{n} process{'es' if n > 1 else ''}" if n else ""
        return f"{self.name}{extra}"


def group_processes(processes: list[GpuProcess]) -> list[Group]:
    by_pid = {p.pid: p for p in processes}
    kinds = {p.pid: classify(p.cmdline, p.name or "", p.start) for p in processes}
    groups: dict[int, Group] = {}
    for proc in processes:
        root, seen, cur = proc.pid, {proc.pid}, proc
        while cur.ppid in by_pid and cur.ppid not in seen:
            seen.add(cur.ppid)
            cur = by_pid[cur.ppid]
            if kinds[cur.pid] is not None:
                root = cur.pid
        if root not in groups:
            groups[root] = Group(by_pid[root], kinds[root])
        groups[root].members.append(proc)
    return sorted(groups.values(), key=lambda g: g.root.pid)


def visible_devices(reading: GpuProcesses) -> Optional[set[int]]:
    """NVML indices CUDA_VISIBLE_DEVICES names (indices or UUIDs); None = all (unset or unparseable)."""
    text = reading.cuda_visible_devices
    if text is None or not text.strip():
        return None
    out: set[int] = set()
    for item in (t.strip() for t in text.split(",")):
        if item.isascii() and item.isdigit() and len(item) <= 6:  # int() of 10,000 digits is a ValueError
            out.add(int(item))
            continue
        match = [d.index for d in reading.devices if d.uuid and item and d.uuid.startswith(item)]
        if not match:
            return None
        out.update(match)
    return out


def fold_outside(groups: list[Group], reading: GpuProcesses, devices: Optional[set[int]]) -> list[Group]:
    """``groups`` with the processes outside this container made one group: the pids NVML lists
    that are not visible here (at most as many as are not this run's own), and the use of the GPU
    no listed process explains (:meth:`GpuProcesses.outside`)."""
    outside = reading.outside(devices)
    hidden = [g for g in groups if not g.root.visible and g.root.found_by != "scan" and g.workload is None]
    if outside is None and not hidden:
        return groups
    keep = sorted(hidden, key=lambda g: -(g.held_bytes or 0))[: outside.hidden if outside is not None else 0]
    if reading.own_on_gpu is None:
        keep = hidden  # an older suite's reading: no count of this run's own to hold them against
    rest = [g for g in groups if g not in hidden]
    if not keep and (outside is None or (outside.unlisted_bytes is None and outside.utilization_pct is None
                                         and not outside.hidden)):
        return rest
    outside = outside or Outside(hidden=len(keep))
    members = sorted((m for g in keep for m in g.members), key=lambda m: m.pid)
    root = members[0] if members else GpuProcess(pid=0, visible=False)
    return rest + [Group(root, None, members, outside)]


def pool_bytes(profile: Profile, meminfo: Optional[MemInfo], inventory: Optional[GpuInventory],
               devices: list[int]) -> Optional[int]:
    """The memory a cap is a fraction of, for a workload on ``devices`` (the smallest such GPU).

    NVML's device total where it reads one; else, unless the GPU is discrete, MemTotal (GB10's
    pool, or the host when there is no GPU); else unknown.
    """
    totals = {d.index: d.memory_total_bytes for d in (inventory.devices if inventory else []) if d.memory_total_bytes}
    if totals:
        return min([totals[i] for i in devices if i in totals] or list(totals.values()))
    if profile.memory_kind != "discrete" and meminfo is not None and meminfo.ok:
        return meminfo.mem_total_bytes
    return None


def _claim(group: Group, pool: Optional[int]) -> Optional[float]:
    """What it may hold: its bound (a fraction of the pool, a fixed KV cache) or what it holds, the larger."""
    held, fraction, bound = group.held_bytes, group.fraction(pool), group.bound
    if fraction is not None and pool:
        return max(fraction * pool, held or 0)
    if bound.kind == KV_BYTES and bound.value is not None:
        return max(bound.value, held or 0)
    return held


def _grows(group: Group) -> str:
    """``cannot tell how far pid 6008 may grow: …`` where its bound is not known; '' where it is."""
    bound = group.bound
    return f"cannot tell how far pid {group.root.pid} may grow: {bound.why}" if bound.kind == UNKNOWN else ""


def _describe(group: Group, pool: Optional[int], nvml_ok: bool = True) -> str:
    if group.outside is not None:
        held = sum(m.gpu_memory_bytes or 0 for m in group.members) if group.members else None
        bits = [b for b in (group.outside.figures, f"holds {gb(held)}" if held else "") if b]
        return f"{group.label} ({'; '.join(bits)})" if bits else group.label
    bits = []
    bound, fraction = group.bound, group.fraction(pool)
    if bound.kind == UNKNOWN:
        bits.append(_grows(group))
    elif bound.setting:
        cap = bound.setting
        if fraction is not None and pool:
            cap += f" = {gb(fraction * pool)} of {gb(pool)}" if not bound.auto else \
                f": {fraction:g} = {gb(fraction * pool)} of {gb(pool)}"
            if bound.kind == FREE_FRACTION:
                cap += " free at its start"
        bits.append(cap + "".join(f"; {note}" for note in bound.notes))
    if group.held_bytes is not None:
        bits.append(f"holds {gb(group.held_bytes)}")
    elif nvml_ok and group.root.found_by == "scan":
        bits.append("no GPU memory listed by NVML")
    if group.graphics_only:
        bits.append("graphics")
    if group.root.username:
        bits.append(f"user {group.root.username}")
    if group.root.problem:
        bits.append(group.root.problem)
    return f"{group.label} ({'; '.join(bits)})" if bits else group.label


def _brief(group: Group, pool: Optional[int], why: str, alone: bool, status: Status = Status.PASS) -> str:
    """A workload in a few words for the line: ``pid 6008 vLLM (default cap 0.9 = 117.6 GB of 130.7 GB)``,
    ``pid 1790 Ollama (holds 34.5 GB, no memory cap)``; the figures in GB only for a workload alone;
    the processes outside this container alone as what shows them there."""
    if group.outside is not None and alone and status is Status.WARN:
        return group.outside.text
    bits = []
    bound, fraction = group.bound, group.fraction(pool)
    if fraction is not None:
        cap = f"{'default ' if bound.source == 'default' else ''}cap {fraction:g}"
        if bound.source == "default" and bound.why:  # a release this suite cannot place: the least any release takes
            cap += " or more"
        if pool and alone:
            cap += f" = {gb(fraction * pool)} of {gb(pool)}"
        bits.append(cap)
        if pool and group.held_bytes is not None and group.held_bytes > fraction * pool:
            bits.append(f"holds {gb(group.held_bytes)}")
    elif bound.kind == KV_BYTES and bound.value is not None:
        bits.append(f"KV cache {gb(bound.value)}" + (f", holds {gb(group.held_bytes)}"
                                                     if alone and group.held_bytes is not None else ""))
    elif group.held_bytes is not None:
        bits.append(f"holds {gb(group.held_bytes)}")
    if bound.kind == UNKNOWN:
        bits.append("bound unknown")
    if why:
        bits.append(_short(why))
    return f"{group.label} ({', '.join(bits)})" if bits else group.label


def _short(why: str) -> str:
    """A reason in the few words a G-line has room for: ``bound unknown`` for ``cannot tell how far …``."""
    why = why.removeprefix(": ")
    if why.startswith("cannot tell how far"):
        return "weights not loaded yet" if "its weights come on top" in why else "bound unknown"
    return why


def _rule(group: Group, pool: Optional[int], discrete: bool = False) -> tuple[Status, str]:
    """One workload on its own: FAIL/WARN with the reason appended to its description, or PASS.
    ``discrete``: the GPU has its own memory, which no process beside it can take from the host."""
    held, cap, w, bound = group.held_bytes, group.fraction(pool), group.workload, group.bound
    if cap is not None and cap > NEAR_CAPACITY_FRACTION:
        return Status.FAIL, ""
    if held is not None and pool and held > NEAR_CAPACITY_FRACTION * pool:
        return Status.FAIL, ""
    if group.outside is not None:
        if not discrete and held is not None and held > SMALL_BYTES:
            return Status.FAIL, ": no memory cap"
        return Status.WARN, ""
    if bound.kind == KV_BYTES:  # a KV cache of a set size beside its weights: it grows no further once loaded
        claim = _claim(group, pool)
        if claim is not None and pool and claim > NEAR_CAPACITY_FRACTION * pool:
            return Status.FAIL, ""
        if held is None:
            return Status.WARN, (f": cannot tell how far pid {group.root.pid} may grow: its weights come on top of "
                                 "its KV cache, and NVML lists no memory for it yet")
        return Status.PASS, ""
    unknown = bound.kind == UNKNOWN  # its reason stands in its description: no cap is claimed for it
    why = "" if unknown else ": no memory cap"
    if cap is None and held is not None and held > SMALL_BYTES:
        if discrete:  # in the way only for a plan it leaves too little for (judged with the plan, below)
            return Status.WARN, (why or ":") + (f"{',' if why else ''} leaves {gb(pool - held)}" if pool else "")
        return Status.FAIL, why
    if unknown:
        return Status.WARN, why
    if cap is None and w is not None and w.loads_on_demand:
        return Status.WARN, ": no memory cap, loads models on request"
    if cap is None and held is None:
        return Status.WARN, ": no memory cap, GPU memory unknown"
    return Status.PASS, ""


def _listed_only(reading: GpuProcesses, head: str, readings: dict, long: str = "") -> Verdict:
    """INFO naming the workloads found, none of them judged: known servers and trainers first, then by memory."""
    groups = sorted(group_processes(reading.processes), key=lambda g: (g.workload is None, -(g.held_bytes or 0)))
    readings.update({"workloads": [{"pids": g.pids, "program": g.workload.program if g.workload else None,
                                    "cap_fraction": g.fraction(None), "held_bytes": g.held_bytes,
                                    "cmdline": g.root.cmdline, "user": g.root.username} for g in groups],
                     "nvml_error": reading.nvml_error, "scanned": reading.scanned})
    seen = f"seen, not judged: {_join([(_describe(g, None, False), g) for g in groups], 3)}" if groups else ""
    return Verdict(G, Status.INFO, head, detail="; ".join(t for t in (long, seen) if t), readings=readings)


def judge_contention(reading: GpuProcesses, profile: Profile, plan: Plan,
                     meminfo: Optional[MemInfo] = None, inventory: Optional[GpuInventory] = None,
                     here: Machine = SAME) -> Verdict:
    if reading.nvml_error and reading.scan_error:
        return Verdict(G, Status.SKIP, f"no process list: NVML {reading.nvml_error}; {reading.scan_error}")
    if here.beyond is not None:  # taken for the profile's platform, but with a fact none of it has
        return here.beyond.verdict(G, "processes", {"machine": here.device})
    if not here.is_profile:
        return _listed_only(reading, here.not_judged(profile, "processes"),
                            {"machine_is_profile": False, "machine": here.device}, here.not_profile(profile, "processes"))
    kind = profile.memory_kind
    if kind == "none" and reading.processes:
        return _listed_only(reading, f"no GPU visible here: {_workloads(len(group_processes(reading.processes)))} "
                                     "seen, holding no GPU memory on this machine", {"memory": kind})
    visible = visible_devices(reading) if kind == "discrete" else None
    judged, elsewhere = [], []
    for group in group_processes(reading.processes):
        other_gpu = visible is not None and group.devices and not set(group.devices) & visible
        (elsewhere if other_gpu else judged).append(group)
    judged = fold_outside(judged, reading, visible)
    pool_all = pool_bytes(profile, meminfo, inventory, sorted(visible) if visible else [])
    found: dict[Status, list[tuple[str, Group]]] = {Status.FAIL: [], Status.WARN: [], Status.PASS: []}
    briefs: dict[int, str] = {}  # pid of the root -> the workload in a few words
    by_claim: list[tuple[float, bool, str, Group]] = []  # (claim, sizable, text, group), for "together"
    rows = []
    for group in judged:
        pool = pool_bytes(profile, meminfo, inventory, [d for d in group.devices if visible is None or d in visible])
        group.pool = pool
        claim = _claim(group, pool)
        text = _describe(group, pool, nvml_ok=not reading.nvml_error)
        status, why = _rule(group, pool, kind == "discrete")
        found[status].append((text + why, group))
        briefs[group.root.pid] = _brief(group, pool, why, len(judged) == 1, status)
        sizable = group.fraction(pool) is not None or group.bound.kind == KV_BYTES or \
            (group.held_bytes or 0) > SMALL_BYTES
        by_claim.append((claim or 0, sizable, text, group))
        w = group.workload
        rows.append({"pids": group.pids, "program": w.program if w else None, "kind": w.kind if w else None,
                     "cap_fraction": group.fraction(pool), "cap": w.cap_text if w else "no memory cap",
                     "bound": group.bound.kind, "bound_setting": group.bound.setting or None,
                     "bound_source": group.bound.source, "cannot_tell": group.bound.why or None,
                     "version": w.version if w else None,
                     "held_bytes": group.held_bytes, "claim_bytes": claim, "pool_bytes": pool, "devices": group.devices,
                     "cmdline": group.root.cmdline, "user": group.root.username, "problem": group.root.problem,
                     "outside": group.outside.text if group.outside is not None else None, "status": status.value})
    claims = sum(item[0] for item in by_claim)
    peak = plan.peak_bytes(unified=kind != "discrete")
    for claim, _, _, group in by_claim:  # the fix's figures: what each may claim beside the others' claims
        limit = [NEAR_CAPACITY_FRACTION * (group.pool or pool_all or 0)]
        if peak is not None and pool_all and peak <= pool_all:
            limit.append(pool_all - peak)
        group.room = max(0.0, min(limit) - (claims - claim)) if limit[0] else None
    readings = {"memory": kind, "pool_bytes": pool_all, "claims_bytes": claims, "planned_peak_bytes": peak,
                "workloads": rows, "elsewhere": [g.pids for g in elsewhere], "nvml_error": reading.nvml_error,
                "scanned": reading.scanned, "scan_denied": reading.scan_denied, "own_excluded": reading.own_excluded}
    together, short = "", ""
    if pool_all and not found[Status.FAIL] and claims > NEAR_CAPACITY_FRACTION * pool_all:
        together = f"together they claim {gb(claims)} of {gb(pool_all)}, more than half"
        short = together
    elif pool_all and peak is not None and 0 < claims and peak <= pool_all and claims > pool_all - peak:
        together = (f"they claim {gb(claims)} of {gb(pool_all)}, leaving {gb(max(pool_all - claims, 0))} for the "
                    f"planned load peak of {gb(peak)} ({gb(claims - (pool_all - peak))} short)")
        short = f"{gb(claims - (pool_all - peak))} short of the {gb(peak)} load peak"
    note = _note(reading, elsewhere)
    fails = found[Status.FAIL]
    if fails or together:
        lead = ""
        if not fails:  # no single culprit: name the biggest claimants, the sizable ones first
            ranked = sorted(by_claim, key=lambda item: (not item[1], -item[0]))
            fails = [(text, group) for _, sizable, text, group in ranked if sizable] or \
                [(text, group) for _, _, text, group in ranked]
            lead = f"{short}: "
        groups = [group for _, group in fails]
        head = lead or f"{_workloads(len(fails))} in the way: "
        return Verdict(G, Status.FAIL, _named(Status.FAIL, head, groups, briefs),
                       detail=_join(fails, 3) + (f"; {together}" if together else "") + note + _outside_note(groups),
                       fix=_fix([group for _, group in fails]), readings=readings)
    warns, listed = found[Status.WARN], found[Status.PASS]
    if warns:
        groups = [group for _, group in warns]
        left = pool_all - claims if kind == "discrete" and pool_all else None
        fits = left is not None and peak is not None and peak <= left
        shares = ("; on a GPU with its own memory, what it holds is in the way only of a run that needs more than "
                  f"the {gb(left)} left" + (f" (the planned {gb(peak)} load peak fits)" if fits else "")
                  + "; its compute is shared (G4, G5 and G7 name it where it slowed a measurement)") \
            if left is not None else ""
        return Verdict(G, Status.WARN, _named(Status.WARN, "", groups, briefs,
                                              f"{_workloads(len(warns))} with no memory cap: "),
                       detail=_join(warns, 3) + (f"; also {len(listed)} small or capped: " + _join(listed, 4)
                                                 if listed else "") + shares + note + _outside_note(groups),
                       fix=_fix(groups, left, fits), readings=readings)
    if listed:
        return Verdict(G, Status.PASS, _named(Status.PASS, f"{_workloads(len(listed))} beside this run, small or "
                                                           "capped: ", [group for _, group in listed], briefs),
                       detail=_join(listed, 4) + note, readings=readings)
    scanned = f"none of {reading.scanned} command lines is a known server or trainer"
    if reading.nvml_error:
        return Verdict(G, Status.PASS, f"no other GPU workload: {scanned}",
                       detail=f"NVML unavailable: {reading.nvml_error}{note}", readings=readings)
    return Verdict(G, Status.PASS, f"no other GPU workload among NVML's processes and {reading.scanned} command lines",
                   detail=f"NVML lists no other process, and {scanned}{note}", readings=readings)


def _named(status: Status, head: str, groups: list[Group], briefs: dict[int, str], short_head: str = "") -> str:
    """``head`` and the workloads (two at most), each in a few words while the G-line fits in
    LINE_COLUMNS, else by pid and program alone (after ``short_head``, when given)."""
    full = head + _join([(briefs[g.root.pid], g) for g in groups], 2)
    if len(format_line(G, status, full)) <= LINE_COLUMNS:
        return full
    more = f" +{len(groups) - 2} more" if len(groups) > 2 else ""
    head = short_head or head
    return fitting(G, status, head + ", ".join(g.name for g in groups[:2]) + more,
                   head + groups[0].name + (f" +{len(groups) - 1} more" if len(groups) > 1 else ""))


def _workloads(n: int) -> str:
    return f"{n} workload{'s' if n != 1 else ''}"


def _join(items: list[tuple[str, Group]], limit: int) -> str:
    texts = [text for text, _ in items]
    return "; ".join(texts[:limit]) + (f"; +{len(texts) - limit} more" if len(texts) > limit else "")


def _outside_note(groups: list[Group]) -> str:
    """Why a process outside this container has no name here."""
    outside = next((g.outside for g in groups if g.outside is not None), None)
    return "" if outside is None else ("; a container started without --pid=host sees another pid namespace's "
                                       "processes under pids it cannot map, or not at all")


def _note(reading: GpuProcesses, elsewhere: list[Group]) -> str:
    bits = []
    if reading.nvml_error and reading.processes:
        bits.append(f"NVML unavailable: {reading.nvml_error}; judged from command lines")
    if reading.scan_error:
        bits.append(reading.scan_error)
    if reading.scan_denied:
        bits.append(f"{reading.scan_denied} command line(s) unreadable")
    if elsewhere:
        bits.append(f"{len(elsewhere)} on GPUs outside CUDA_VISIBLE_DEVICES not judged")
    return f" ({'; '.join(bits)})" if bits else ""


def _fix(groups: list[Group], left: Optional[float] = None, fits: bool = False) -> str:
    """What to do about ``groups``; ``left``: on a discrete GPU, the memory they leave (their memory is
    in the way only of a run that needs more); ``fits``: the planned load peak fits in it."""
    here = [g for g in groups if g.outside is None]
    text = _stop(here) if here else ""
    if here and left is not None:
        stop = text.removeprefix("run one heavy job at a time: ")
        text = f"for a run that needs all of the GPU's compute, {stop}" if fits else \
            (f"if the planned run needs more than the {gb(left)} left on the GPU (or all of its compute for a timed "
             f"run), {stop}; --spark-model-gb N checks a plan against what is left")
    if len(here) < len(groups):
        text = f"{text}; for the process outside this container, {OUTSIDE_FIX}" if text else \
            f"{OUTSIDE_FIX} before training"
    return text


def _stop(groups: list[Group]) -> str:
    steps = list(dict.fromkeys(step for step in (_step(g) for g in groups) if step))
    pids = " ".join(str(g.root.pid) for g in groups[:6])
    them = "it" if len(groups) == 1 else "them"
    if not steps:
        return f"run one heavy job at a time: let the other {'job' if len(groups) == 1 else 'jobs'} finish, " \
               f"or stop {them} (kill {pids})"
    return f"run one heavy job at a time: {'; '.join(steps)}; or stop what you do not need (kill {pids})"


def _step(group: Group) -> str:
    """The setting that bounds this workload as it was started, turned down: the one it reads, never one
    it ignores ('' for a program the suite does not know)."""
    w, b, pid = group.workload, group.bound, group.root.pid
    if w is None:
        return ""
    if w.kind == "trainer":
        return "let the other training job finish first"
    if w.kind == "ollama":
        return _ollama_step(group)
    if w.program == "llama-swap":
        return "stop llama-swap while training, or let it run one model at a time (its models in one group, swap: true)"
    if w.kind == "llama.cpp":
        if b.kind == ON_REQUEST:
            return "stop the llama.cpp server while training, or restart it with --models-max 1"
        if b.knob.lstrip("-") == "n_gpu_layers":  # llama-cpp-python: its settings' own names, never llama.cpp's -c
            change = f"set a smaller n_gpu_layers or n_ctx for its models in {b.where} and restart it" if b.where else \
                "restart it with a smaller --n_gpu_layers or --n_ctx"
            return (f"stop the llama.cpp server while training, or {change} (it keeps what it takes when it loads) and "
                    "run this check again")
        ctx = b.knob if b.knob.startswith("LLAMA_ARG_") else "-c/--ctx-size"
        return (f"stop the llama.cpp server while training, or restart it with a smaller {ctx} (it keeps what it takes "
                "when it loads) and run this check again")
    name = "trl vllm-serve" if "trl" in w.program else RESTART.get(w.kind, w.program)
    if b.kind == UNKNOWN:
        if b.source == "child":
            return (f"see how each {w.program} engine was started (its launcher's flags: ps -o args= -p $(ps -o ppid= "
                    f"-p PID)) and restart it with {b.knob} 0.5 or lower")
        if b.where and b.where != "environment":
            return (f"read its config as root (sudo cat {b.where}) or run this check as root; or restart {name} with "
                    f"{b.knob} 0.5 or lower")
        if w.kind == "tgi":
            return ("run this check as root to read its environment (sudo spark-gotchas -m fast -k g06), or restart TGI "
                    "with --cuda-memory-fraction 0.5 or lower")
        fraction = "--gpu-memory-utilization" if w.kind == "vllm" and "trl" not in w.program else b.knob
        return (f"see how {name} pid {pid} was started (ps -o args= -p {pid}: it would not have started with what its "
                f"command line reads here) and restart it with {fraction} 0.5 or lower")
    if b.kind == KV_BYTES and b.value is not None:
        return _kv_step(b, group.held_bytes, group.room, pid)
    if b.kind == FREE_FRACTION:
        value = f"lower (now {b.value:g}, the share of the memory still free after its weights it takes for its KV " \
                "cache)"
        where = f"set kv_cache_config.free_gpu_memory_fraction {value} in {b.where}" if b.where else \
            f"set --kv_cache_free_gpu_memory_fraction {value}"
        return f"{where} or cap kv_cache_config.max_tokens, restart trtllm-serve and run this check again"
    share = _share(group.room, group.pool)
    if share is None:
        return f"stop {name} pid {pid} while training: the others leave it no room"
    if b.where == "environment":
        return f"set {b.knob.lstrip('-').upper().replace('-', '_')}={share} or lower in its environment and restart {name}"
    if b.where:
        return f"set {b.knob.lstrip('-')}: {share} or lower in {b.where} and restart {name}"
    return f"restart {name} with {b.knob} {share} or lower"


def _share(room: Optional[float], pool: Optional[int]) -> Optional[str]:
    """The fraction to set: 0.5, or less where the others' claims or the plan leave less (None: none left)."""
    if room is None or not pool:
        return "0.5"
    share = min(NEAR_CAPACITY_FRACTION, int(room / pool * 100) / 100)
    return None if share < 0.05 else f"{share:g}"


def _ollama_step(group: Group) -> str:
    """Stop Ollama, or bound it: the variables it reads, each only where it is not set so already."""
    env = (group.root.start.environ if group.root.start is not None else None) or {}
    settings = [f"{k}={v}" + (f" (it is {env[k]})" if k in env else "")
                for k, v in (("OLLAMA_MAX_LOADED_MODELS", "1"), ("OLLAMA_KEEP_ALIVE", "0")) if env.get(k) != v]
    keep = (f"to keep it beside training, set {' and '.join(settings)} in its service's environment (sudo systemctl "
            "edit ollama) and see what it holds with ollama ps") if settings else \
        "it already loads one model at a time and unloads it after each request: see what it holds with ollama ps"
    return f"{OLLAMA_STOP}; {keep}"


def _kv_step(b: Bound, held: Optional[int], room: Optional[float], pid: int) -> str:
    """A --kv-cache-memory-bytes that keeps vLLM within its room (half of the pool, or what the plan and
    the others leave), from what its weights and buffers take beside its KV cache (what it holds, less
    the cache); unknown before it has loaded."""
    kv = int(b.value or 0)
    where = f"kv-cache-memory-bytes in {b.where}" if b.where else "--kv-cache-memory-bytes"
    if held is None or room is None or held < kv:
        return (f"restart vLLM with a smaller {where} (its KV cache is {gb(kv)}; its weights and buffers come on top: "
                "see what it holds with nvidia-smi once it has loaded)")
    beside = held - kv
    target = int((room - beside) // 1e9)
    if target < 1:
        return f"stop vLLM pid {pid} while training: its weights and buffers ({gb(beside)}) alone take its room"
    size = f"{target}g or less"
    change = f"set kv-cache-memory-bytes: {size} in {b.where}" if b.where else f"restart vLLM with " \
        f"--kv-cache-memory-bytes {size}"
    return f"{change} (its KV cache is {gb(kv)}; its weights and buffers take {gb(beside)} beside it)" + \
        (" and restart vLLM" if b.where else "")
