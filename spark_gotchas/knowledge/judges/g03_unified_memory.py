"""G3 — unified-memory OOM below 128 GB.

Figures are in GB (10^9 bytes, as ``--spark-model-gb`` is); ``free -h`` prints GiB.

Rules:

A profile asked for on a machine that is not that platform (`--spark-profile gb10` on a CI box
or on an H200; the machine's own GPU, as NVML or torch name it, or none, decides; a replay
decides from the GPU the snapshot recorded): that machine's memory stands for nothing on a
Spark, so every G3 check says **INFO** `not a GB10 (no GPU): memory not judged` (its detail:
`this machine is not a GB10 (no GPU): its memory cannot stand for a Spark's`), never FAIL or
WARN from it. With `--spark-model-gb N` the headroom check
still weighs the plan against the profile's own memory (a GB10 holds 130.7 GB in all; an H200
150.8 GB): a load peak larger than that → **WARN** (no such machine can load it), else
**INFO** with the peak. The load probe (soak) likewise says **INFO**.

    G3 INFO: not a GB10 (no GPU): 30 GB of weights would peak at ~60.0 GB (x2) of a GB10's 130.7 GB
    G3 WARN: 70 GB of weights would peak at ~140.0 GB (x2), more than all of a GB10's 130.7 GB

A reading no machine of the profile's platform can give (its envelope, `profiles.py`): MemTotal,
NVML's or CUDA's device memory above all the platform can have (a GB10: its 128 GiB pool), or a
recorded CPU architecture or GPU capability it has none of (an x86_64 "GB10") → every G3 check says
**WARN** `NVML device memory 400.0 GB: not a GB10 reading; memory not judged` (its detail: `… is
2.9x all GB10 can have (137.4 GB)` and the datasheet), fix: take the snapshot again on the machine it names, or judge the GPU with
`--spark-profile generic`. Such a reading says the snapshot, or the profile taken for this GPU, is
wrong, and nothing of the machine's memory: never a PASS, never a FAIL. NVML device memory on a GB10
within its pool is judged as read (every driver measured says NotSupported; one report claims a
driver that returns the pool).

The memory kind comes from the profile: **unified** (GB10; GH200's shared pool), **discrete**
(H200, H100, generic) or **no GPU**.

Page cache (Buffers + Cached − Shmem, the part the kernel can drop):
- unified: 25 % of MemTotal or more → **WARN**; a planned load peak that fits MemAvailable
  but not MemFree, with the page cache making the difference → **WARN**; otherwise **PASS**.
- discrete: the page cache is host memory only → **PASS**.
- no GPU visible here → **INFO** (`--spark-profile gb10` says what a Spark would take of a plan).

Headroom, with `--spark-model-gb N` (planned weights) and `--spark-load-factor F` (default 2.0),
counting memory already gone:
- swap in use (SwapTotal − SwapFree) is taken from MemAvailable: those pages belong to running
  processes and come back when they run, so a load that takes all of MemAvailable pushes the
  machine into swapping (on a Spark, a frozen host). The line says "MemAvailable less swap in use";
- a container's own memory limit: this process's cgroup (`mem.cgroup`: cgroup v2 `memory.max`,
  the tightest of its cgroup and the ancestors visible, found from `/proc/self/cgroup` under
  `/sys/fs/cgroup`; the v1 memory controller's `memory.limit_in_bytes` or
  `hierarchical_memory_limit`), where it is below MemTotal (`/proc/meminfo` inside a container is
  the host's), leaves the limit less its working set (usage less inactive page cache, as kubelet
  and `docker stats` count). The load's host side, N × (F − 1) (the page cache's copy; with no GPU
  the whole N × F), must fit that room → else **FAIL** `50 GB of weights need ~50.0 GB of host
  memory; the container's limit leaves 38.7 GB`, fix: give the container a larger limit (`docker
  run --memory`, a Kubernetes limit, Slurm `--mem`). The CUDA copy is no charge on the container
  on a unified-memory GPU (a GB10's cgroup read 16.7 GiB while its engine
  held 77 GiB, vllm #54200; sglang #35860): the whole peak is weighed against the pool instead.
  A cgroup that cannot be read is named in the detail;
- unified (and no GPU): MemAvailable (less swap in use) below N × F → **FAIL** naming the
  shortfall in GB; otherwise **PASS** stating the headroom.
- discrete: the GPU with the most free memory (CUDA's figure, else NVML's) must hold N, and
  MemAvailable (less swap in use) and the container's room must hold N × (F − 1), the host side
  of the load → **FAIL** naming what is short, else **PASS**.
- without N → **INFO** with the figures and the largest load that would fit (by the pool, or by
  the container's limit where that is smaller).

GPU memory view:
- unified: NVML memory `Not Supported` → **INFO** explaining why nvidia-smi shows N/A, with
  CUDA's free figure beside MemFree and MemAvailable and the gap between them.
- discrete: NVML reads device memory → **PASS**; it cannot → **WARN**.
- neither NVML nor a CUDA device → **SKIP**, both reasons in its detail.

Load probe (soak): the peak extra memory of a real load, as a multiple of the file size,
above F → **WARN** (pass that ratio as `--spark-load-factor` for this machine's plans);
within F → **PASS**; the load failing, crashing or hanging → **FAIL**.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from ...base.units import GB, gb
from ..plan import Plan
from ..profiles import SAME, Beyond, Machine, Profile, beyond
from ..readings.gpu import GpuInventory
from ..readings.mem import CudaMemory, LoadProbe, MemCgroup, MemInfo
from ..verdict import Status, Verdict, fitting

G = 3
PAGE_CACHE_WARN_FRACTION = 0.25
DROP_CACHES = "sync; echo 3 > /proc/sys/vm/drop_caches"
DROP_CACHES_FIX = (f"drop the page cache between runs, as root: {DROP_CACHES} (never in the middle of training; "
                   "the suite never does this itself)")
QLORA_NOTE = "QLoRA peaks earlier than bf16 (dequantization adds transient copies): leave more room than the factor says"




def _skip_meminfo(info: MemInfo) -> Verdict:
    return Verdict(G, Status.SKIP, f"could not read system memory: {info.error or 'no MemTotal'}",
                   readings={"source": info.source})


def _figures(info: MemInfo) -> dict:
    return {"mem_total_bytes": info.mem_total_bytes, "mem_free_bytes": info.mem_free_bytes,
            "mem_available_bytes": info.mem_available_bytes, "page_cache_bytes": info.page_cache_bytes,
            "dirty_bytes": info.dirty_bytes, "available_estimated": info.available_estimated}


def _spoiled(profile: Profile, info: Optional[MemInfo] = None, inventory: Optional[GpuInventory] = None,
             cuda: Optional[CudaMemory] = None) -> Optional[Beyond]:
    """A memory figure no machine of the profile's platform can have (its envelope), else None."""
    memory = {}
    first = inventory.first if inventory is not None else None
    if first is not None and first.memory_total_bytes:
        memory["NVML device memory"] = first.memory_total_bytes
    if cuda is not None and cuda.first is not None and cuda.first.total_bytes:
        memory["CUDA total memory"] = cuda.first.total_bytes
    total = info.mem_total_bytes if info is not None and info.ok else None
    return beyond(profile, memory=memory, host_memory_bytes=total)


# -- memory already gone: swap in use, a container's limit ----------------------------------------
CGROUP_NOTE = ("on a unified-memory GPU the CUDA copy is not charged to it (a GB10's cgroup memory.current read "
               "16.7 GiB while its engine held 77 GiB), so the pool is weighed for the whole peak")


@dataclass(frozen=True)
class Gone:
    """What of MemAvailable a load cannot have: pages of running processes already in swap, and, in
    a container, what its own memory limit leaves (``room``; None where no limit below MemTotal binds)."""

    avail: int
    swap: int
    room: Optional[int] = None
    limit: Optional[int] = None
    limit_file: str = ""
    working_set: Optional[int] = None
    unknown: str = ""  # why the container's limit could not be read

    @property
    def usable(self) -> int:
        return max(self.avail - self.swap, 0)

    @property
    def pool_text(self) -> str:
        """``MemAvailable 124.2 GB`` or ``MemAvailable less swap in use (X)``: the pool as the line says it."""
        return f"MemAvailable {gb(self.avail)}" if not self.swap else f"MemAvailable less swap in use ({gb(self.usable)})"

    def notes(self) -> str:
        """The figures behind the line, for its detail."""
        out = []
        if self.swap:
            out.append(f"{gb(self.swap)} in swap (SwapTotal - SwapFree) counts as gone: those pages belong to running "
                       f"processes and come back when they run, so MemAvailable {gb(self.avail)} leaves "
                       f"{gb(self.usable)}")
        if self.room is not None:
            out.append(f"this container's memory limit is {gb(self.limit)} ({self.limit_file}), "
                       f"{gb(self.working_set)} of it in use: {gb(self.room)} left")
        elif self.unknown:
            out.append(f"container memory limit unknown ({self.unknown})")
        return "; ".join(out)

    def readings(self) -> dict:
        return {"swap_used_bytes": self.swap, "usable_bytes": self.usable, "cgroup_limit_bytes": self.limit,
                "cgroup_room_bytes": self.room, "cgroup_limit_file": self.limit_file or None,
                "cgroup_unknown": self.unknown or None}


def gone(info: MemInfo, cgroup: Optional[MemCgroup]) -> Gone:
    """Swap in use from /proc/meminfo; the container's room from its cgroup, where its limit is below
    MemTotal (a limit above all of memory bounds nothing)."""
    avail, swap = info.mem_available_bytes or 0, info.swap_used_bytes
    if cgroup is None:
        return Gone(avail, swap)
    if cgroup.error:
        return Gone(avail, swap, unknown=cgroup.error)
    limit = cgroup.limit_bytes
    if limit is None or (info.mem_total_bytes and limit >= info.mem_total_bytes):
        return Gone(avail, swap)
    return Gone(avail, swap, room=cgroup.room_bytes, limit=limit, limit_file=cgroup.limit_file or "memory.max",
                working_set=cgroup.working_set_bytes or 0)


def _container_fix(need: float, gone_: Gone) -> str:
    more = need - (gone_.room or 0) + (gone_.limit or 0)
    return (f"give this container a memory limit of at least {gb(more)} (docker run --memory, a Kubernetes memory "
            "limit, Slurm --mem), or plan a smaller or quantized model. " + QLORA_NOTE)


# -- page cache ---------------------------------------------------------------------------------
def _elsewhere(here: Machine, profile: Profile, thing: str, readings: Optional[dict] = None) -> Verdict:
    """INFO: this machine is not the profile's platform, so its ``thing`` is not judged."""
    return Verdict(G, Status.INFO, here.not_judged(profile, thing), detail=here.not_profile(profile, thing),
                   readings={**(readings or {}), "machine_is_profile": False, "machine": here.device})


def judge_page_cache(info: MemInfo, profile: Profile, plan: Plan, here: Machine = SAME) -> Verdict:
    if not here.is_profile:
        return _elsewhere(here, profile, "memory", _figures(info) if info.ok else None)
    if here.beyond is not None:
        return here.beyond.verdict(G, "memory")
    if not info.ok:
        return _skip_meminfo(info)
    spoiled = _spoiled(profile, info)
    if spoiled is not None:
        return spoiled.verdict(G, "memory", _figures(info))
    lacking = [k for k in ("MemFree", "Cached") if k in info.missing]
    if lacking:
        return Verdict(G, Status.SKIP, f"{info.source} has no {' or '.join(lacking)} line: page cache unknown",
                       readings=_figures(info))
    kind = profile.memory_kind
    total, free, avail = info.mem_total_bytes, info.mem_free_bytes or 0, info.mem_available_bytes or 0
    cache = info.page_cache_bytes
    share = cache / total if total else 0.0
    readings = {**_figures(info), "memory": kind, "page_cache_fraction": round(share, 3)}
    head = f"page cache {gb(cache)} ({share:.0%} of {gb(total)})"
    if kind == "none":
        return Verdict(G, Status.INFO, f"no GPU here: page cache {gb(cache)} of {gb(total)}",
                       detail=f"{head}, MemFree {gb(free)}, MemAvailable {gb(avail)}; on a Spark CUDA would see only "
                              "MemFree (--spark-profile gb10 judges it so)", readings=readings)
    if kind == "discrete":
        gpu = profile.title if profile.capability else "GPU"  # a profile's name, not "a GPU without a profile"
        return Verdict(G, Status.PASS, f"page cache {gb(cache)} is host memory only: the {gpu} has its own",
                       detail=f"{head}; MemAvailable {gb(avail)}", readings=readings)
    dirty = f"; {gb(info.dirty_bytes)} of it dirty, so sync first" if (info.dirty_bytes or 0) >= GB else ""
    peak = plan.peak_bytes(unified=True)
    readings["planned_peak_bytes"] = peak
    if peak is not None and free < peak <= avail and cache >= peak - free:
        return Verdict(G, Status.WARN,
                       f"the {gb(peak)} load peak exceeds what CUDA sees free ({gb(free)}): page cache holds {gb(cache)}",
                       detail=f"the planned load peak fits MemAvailable ({gb(avail)}) but not MemFree ({gb(free)}): "
                              f"{head} stands between{dirty}",
                       fix=DROP_CACHES_FIX, readings=readings)
    if share >= PAGE_CACHE_WARN_FRACTION:
        return Verdict(G, Status.WARN, f"{head}: CUDA sees only {gb(free)} free (MemFree)",
                       detail=f"MemAvailable is {gb(avail)}{dirty}", fix=DROP_CACHES_FIX, readings=readings)
    return Verdict(G, Status.PASS, f"{head}; CUDA sees {gb(free)} free (MemFree)",
                   detail=f"MemAvailable {gb(avail)}", readings=readings)


# -- headroom -------------------------------------------------------------------------------------
def best_device(cuda: Optional[CudaMemory], inventory: Optional[GpuInventory]) -> tuple[Optional[int], Optional[int], str]:
    """(free, total, label) of the GPU with the most free memory: CUDA's view first, then NVML's."""
    if cuda is not None:
        devs = [d for d in cuda.devices if d.free_bytes is not None]
        if devs:
            d = max(devs, key=lambda d: d.free_bytes)
            return d.free_bytes, d.total_bytes, f"GPU {d.index} (CUDA)"
    if inventory is not None:
        devs = [d for d in inventory.devices if d.memory_free_bytes is not None]
        if devs:
            d = max(devs, key=lambda d: d.memory_free_bytes)
            return d.memory_free_bytes, d.memory_total_bytes, f"GPU {d.index} (NVML)"
    return None, None, ""


def judge_headroom(info: MemInfo, profile: Profile, plan: Plan,
                   cuda: Optional[CudaMemory] = None, inventory: Optional[GpuInventory] = None,
                   here: Machine = SAME, cgroup: Optional[MemCgroup] = None) -> Verdict:
    """``cgroup``: this process's own cgroup (a container's memory limit), None where not read."""
    if not here.is_profile:
        return _plan_elsewhere(here, profile, plan)
    if here.beyond is not None:
        return here.beyond.verdict(G, "memory")
    if not info.ok:
        return _skip_meminfo(info)
    if info.mem_available_bytes is None:
        return Verdict(G, Status.SKIP, f"{info.source} has no MemAvailable or MemFree line: headroom unknown",
                       readings=_figures(info))
    kind = profile.memory_kind
    factor = plan.factor
    left = gone(info, cgroup)
    readings = {**_figures(info), **left.readings(), "memory": kind, "load_factor": factor, "model_gb": plan.model_gb}
    spoiled = _spoiled(profile, info, *((inventory, cuda) if kind == "discrete" else ()))  # what it weighs
    if spoiled is not None:
        return spoiled.verdict(G, "memory", readings)
    if kind == "discrete":
        return _headroom_discrete(info, plan, factor, readings, left, *best_device(cuda, inventory))
    avail, usable = left.avail, left.usable
    where = "host memory (no GPU)" if kind == "none" else "the unified pool"
    notes = left.notes()
    if plan.model_gb is None:
        fits, bound = usable / factor, left.pool_text
        charged = factor if kind == "none" else factor - 1  # of the weights, what the container is charged for
        if left.room is not None and charged > 0 and left.room / charged < fits:
            fits, bound = left.room / charged, f"the container's limit leaves {gb(left.room)}"
        return Verdict(G, Status.INFO, f"{bound}: up to {gb(fits)} of weights fit a load (x{factor:g})",
                       detail=f"MemAvailable {gb(avail)} of {gb(info.mem_total_bytes)} (MemFree "
                              f"{gb(info.mem_free_bytes)}, page cache {gb(info.page_cache_bytes)}) in {where}"
                              + (f"; {notes}" if notes else "") + "; --spark-model-gb N judges a plan",
                       readings=readings)
    peak = plan.peak_bytes(unified=True)
    # what the container is charged for: on a unified GPU the page cache's copy (CUDA's is not charged);
    # with no GPU the whole load is host memory
    host = peak if kind == "none" else float(plan.model_gb) * GB * (factor - 1)
    readings.update({"planned_peak_bytes": peak, "host_need_bytes": host})
    planned = f"{plan.model_gb:g} GB of weights peak at ~{gb(peak)} (x{factor:g})"
    loading = f"the peak is while loading safetensors, in {where}" + (f"; {notes}" if notes else "")
    if usable < peak:
        short = peak - usable
        if not left.swap:
            summary = f"{planned}, but MemAvailable is {gb(avail)}: {gb(short)} short"
        else:
            summary = fitting(G, Status.FAIL, f"{planned}, but MemAvailable less swap in use is {gb(usable)}: "
                                              f"{gb(short)} short",
                              f"{planned}, but MemAvailable less swap is {gb(usable)}: {gb(short)} short",
                              f"{planned}: {gb(short)} short of MemAvailable less swap")
        return Verdict(G, Status.FAIL, summary, detail=loading,
                       fix="free memory before loading: stop other GPU processes (G6 names them), drop the page cache "
                           f"between runs as root ({DROP_CACHES}), or plan a smaller or quantized model. {QLORA_NOTE}",
                       readings=readings)
    if left.room is not None and left.room < host:
        return Verdict(G, Status.FAIL, fitting(G, Status.FAIL,
                                               f"{planned}, but the container's limit leaves {gb(left.room)}: "
                                               f"{gb(host - left.room)} short",
                                               f"{plan.model_gb:g} GB of weights need ~{gb(host)} of host memory; "
                                               f"the container's limit leaves {gb(left.room)}"),
                       detail=(f"the load's host side (~{gb(host)}, the page cache's copy at x{factor:g}) is charged "
                               f"to this container; {notes}; {CGROUP_NOTE}") if kind != "none" else
                              f"with no GPU the whole load (~{gb(host)}) is host memory, charged to this container; {notes}",
                       fix=_container_fix(host, left), readings=readings)
    spare = f"leaves {gb(usable - peak)} to spare"
    summary = f"{planned}; MemAvailable {gb(avail)} {spare}" if not left.swap else fitting(
        G, Status.PASS, f"{planned}; MemAvailable less swap in use ({gb(usable)}) {spare}",
        f"{planned}; MemAvailable less swap ({gb(usable)}) {spare}", f"{planned}; MemAvailable less swap {spare}")
    return Verdict(G, Status.PASS, summary,
                   detail=loading + (f"; the container's room covers the load's host side (~{gb(host)})"
                                     if left.room is not None else ""), readings=readings)


def _plan_elsewhere(here: Machine, profile: Profile, plan: Plan) -> Verdict:
    """This machine's memory says nothing; the plan against the profile's own memory still does."""
    total = profile.memory_total_bytes
    peak = plan.peak_bytes(unified=profile.memory_kind != "discrete")
    readings = {"machine_is_profile": False, "machine": here.device, "model_gb": plan.model_gb,
                "load_factor": plan.factor, "planned_peak_bytes": peak, "profile_memory_bytes": total}
    if peak is None or not total:
        return Verdict(G, Status.INFO, here.not_judged(profile, "memory"), detail=here.not_profile(profile, "memory"),
                       readings=readings)
    what = f"would peak at ~{gb(peak)} (x{plan.factor:g})" if profile.memory_kind != "discrete" else \
        f"would take {gb(peak)}"
    planned = f"{plan.model_gb:g} GB of weights {what}"
    whose = f"{profile.a_name}'s {gb(total)}"
    if peak > total:
        return Verdict(G, Status.WARN, f"{planned}, more than all of {whose}",
                       fix=f"plan a smaller or quantized model: this one cannot load on {profile.a_name}. {QLORA_NOTE}",
                       readings=readings)
    machine = f" ({here.device})" if here.device else ""
    return Verdict(G, Status.INFO, f"not {profile.a_name}{machine}: {planned} of {whose}",
                   readings=readings)


def _headroom_discrete(info: MemInfo, plan: Plan, factor: float, readings: dict, left: Gone,
                       dev_free: Optional[int], dev_total: Optional[int], label: str) -> Verdict:
    avail = left.usable  # MemAvailable less swap in use
    host_word = "MemAvailable" if not left.swap else "MemAvailable less swap in use"
    readings.update({"device": label, "device_free_bytes": dev_free, "device_total_bytes": dev_total})
    device = f"{label} has {gb(dev_free)} free of {gb(dev_total)}" if dev_free is not None else \
        "GPU free memory unreadable (no NVML memory, no CUDA device)"
    notes = left.notes()
    if plan.model_gb is None:
        host_room = min(avail, left.room) if left.room is not None else avail
        host_fit = host_room / (factor - 1) if factor > 1 else float("inf")
        fits = min(dev_free, host_fit) if dev_free is not None else host_fit
        more = f"host {host_word} {gb(avail)}" + (f"; {notes}" if notes else "") + "; --spark-model-gb N judges a plan"
        if fits == float("inf"):
            return Verdict(G, Status.INFO, device, detail=more, readings=readings)
        return Verdict(G, Status.INFO, f"up to {gb(fits)} of weights fit a load: {device}", detail=more,
                       readings=readings)
    weights = float(plan.model_gb) * GB
    host_need = weights * (factor - 1)
    readings.update({"device_need_bytes": weights, "host_need_bytes": host_need})
    problems = []
    dev_short = dev_free is not None and dev_free < weights
    host_short = avail < host_need
    room_short = left.room is not None and left.room < host_need
    if dev_short:
        problems.append(f"{plan.model_gb:g} GB of weights do not fit: {device} ({gb(weights - dev_free)} short)")
    if host_short:
        problems.append(f"the load's host side (~{gb(host_need)} at x{factor:g}) exceeds {host_word} {gb(avail)} "
                        f"({gb(host_need - avail)} short)")
    if room_short and not host_short:
        problems.append(f"the load's host side (~{gb(host_need)} at x{factor:g}) exceeds what the container's limit "
                        f"leaves ({gb(left.room)}, {gb(host_need - left.room)} short)")
    if problems:
        summary, detail = problems[0], "; ".join(problems[1:] + ([notes] if notes else []))
        if dev_short and (host_short or room_short):  # both in the line would pass 100 columns
            where = "host memory" if host_short else "the container's limit"
            short = host_need - avail if host_short else host_need - (left.room or 0)
            summary = (f"{plan.model_gb:g} GB of weights do not fit: {label} is {gb(weights - dev_free)} short, "
                       f"{where} {gb(short)} short")
            detail = "; ".join(problems + ([notes] if notes else []))
        elif room_short and not dev_short:
            summary = fitting(G, Status.FAIL, problems[0], f"the load's host side (~{gb(host_need)}) exceeds the "
                                                           f"container's {gb(left.room)} left: "
                                                           f"{gb(host_need - left.room)} short")
        fix = "free the GPU first (G6 names what holds it), shard or quantize the model, or free host memory. " + \
            QLORA_NOTE
        if room_short and not dev_short and not host_short:
            fix = _container_fix(host_need, left)
        return Verdict(G, Status.FAIL, summary, detail=detail, fix=fix, readings=readings)
    dev_part = (f"{label} has {gb(dev_free)} free for {plan.model_gb:g} GB of weights "
                f"({gb(dev_free - weights)} to spare)") if dev_free is not None else device
    covers = f"host {host_word} {gb(avail)}" + (f" and the container's {gb(left.room)} left" if left.room is not None
                                                else "")
    verb = "cover" if left.room is not None else "covers"
    return Verdict(G, Status.PASS, dev_part, detail=f"{covers} {verb} the load's host side (~{gb(host_need)})"
                   + (f"; {notes}" if notes else ""), readings=readings)


# -- what NVML and CUDA say ----------------------------------------------------------------------
def judge_gpu_memory_view(info: MemInfo, profile: Profile, inventory: Optional[GpuInventory],
                          cuda: Optional[CudaMemory], here: Machine = SAME) -> Verdict:
    if not here.is_profile:
        return _elsewhere(here, profile, "memory")
    if here.beyond is not None:
        return here.beyond.verdict(G, "memory")
    spoiled = _spoiled(profile, info, inventory, cuda)
    if spoiled is not None:
        return spoiled.verdict(G, "memory")
    kind = profile.memory_kind
    nvml_devs = inventory.devices if inventory is not None else []
    cuda_dev = cuda.first if cuda is not None else None
    nvml_why = (inventory.nvml_error if inventory is not None else "not read") or "no GPU listed"
    cuda_why = (cuda.reason if cuda is not None else "not read") or "no device"
    readings = {"memory": kind, "nvml_error": inventory.nvml_error if inventory is not None else None,
                "nvml_memory": [{"index": d.index, "total_bytes": d.memory_total_bytes, "free_bytes": d.memory_free_bytes,
                                 "unavailable": d.unavailable.get("memory_total_bytes")} for d in nvml_devs],
                "cuda_free_bytes": cuda_dev.free_bytes if cuda_dev else None,
                "cuda_total_bytes": cuda_dev.total_bytes if cuda_dev else None,
                "cuda_reason": cuda.reason if cuda is not None else None,
                "mem_free_bytes": cuda.mem_free_bytes if cuda_dev else info.mem_free_bytes,
                "mem_available_bytes": cuda.mem_available_bytes if cuda_dev else info.mem_available_bytes}
    if not nvml_devs and cuda_dev is None:
        return Verdict(G, Status.SKIP, "no GPU memory to read: neither NVML nor CUDA sees a GPU",
                       detail=f"NVML: {nvml_why}; CUDA: {cuda_why}", readings=readings)
    first = nvml_devs[0] if nvml_devs else None
    nvml_na = first is not None and first.memory_total_bytes is None
    na_reason = first.unavailable.get("memory_total_bytes", "unreadable") if nvml_na else ""
    if cuda_dev is not None:
        free_now = cuda.mem_free_bytes
        cuda_part = (f"CUDA free {gb(cuda_dev.free_bytes)} of {gb(cuda_dev.total_bytes)}"
                     + (f", MemFree {gb(free_now)}, MemAvailable {gb(cuda.mem_available_bytes)}" if free_now else ""))
    else:
        cuda_part = f"CUDA view not read ({cuda_why})"
    if kind == "unified":
        why_na = ""
        if first is None:
            nvml_part = f"NVML unavailable ({nvml_why})"
        elif nvml_na:
            nvml_part = f"NVML device memory is {na_reason}: the GPU shares the {gb(info.mem_total_bytes)} system pool"
            why_na = ("nvidia-smi shows 'Not Supported'/[N/A] here because the GPU has no memory of its own "
                      "(read /proc/meminfo or free); ")
        else:
            nvml_part = f"NVML reports {gb(first.memory_free_bytes)} free of {gb(first.memory_total_bytes)} (the shared pool)"
            if not profile.envelope.nvml_memory:  # within the pool (the envelope ruled out more): unconfirmed, not impossible
                why_na = (f"no {profile.name} driver measured so far reports device memory (NotSupported); this one "
                          "does, within the pool; ")
        gap = ""
        if cuda_dev is not None and cuda.mem_available_bytes and cuda_dev.free_bytes is not None:
            missing = cuda.mem_available_bytes - cuda_dev.free_bytes
            readings["cuda_vs_available_gap_bytes"] = missing
            if missing > 0:
                gap = f": CUDA counts {gb(missing)} that the kernel could reclaim as used"
        return Verdict(G, Status.INFO, nvml_part, detail=f"{why_na}{cuda_part}{gap}", readings=readings)
    if first is None:
        return Verdict(G, Status.INFO, f"NVML unavailable ({nvml_why})", detail=cuda_part, readings=readings)
    if nvml_na:
        return Verdict(G, Status.WARN, f"NVML cannot read this discrete GPU's memory ({na_reason})",
                       detail=f"nvidia-smi shows N/A and tools that size themselves by NVML fail; {cuda_part}",
                       fix="update the NVIDIA driver until nvidia-smi -q -d MEMORY shows FB Memory Usage, or size "
                           "jobs with torch.cuda.mem_get_info()", readings=readings)
    listed = [f"GPU {d.index} {gb(d.memory_free_bytes)} free of {gb(d.memory_total_bytes)}" for d in nvml_devs]
    shown = "; ".join(listed[:2]) + (f"; +{len(listed) - 2} more" if len(listed) > 2 else "")
    return Verdict(G, Status.PASS, f"NVML reads device memory: {shown}",
                   detail="; ".join(listed[:8] + [cuda_part]), readings=readings)


# -- the load probe (soak) --------------------------------------------------------------------------
def judge_load_probe(probe: LoadProbe, plan: Plan, profile: Optional[Profile] = None,
                     here: Machine = SAME) -> Verdict:
    if profile is not None and not here.is_profile:
        return _elsewhere(here, profile, "load peak")
    if profile is not None and here.beyond is not None:
        return here.beyond.verdict(G, "load peak")
    factor = plan.factor
    readings = {"size_bytes": probe.size_bytes, "peak_extra_ratio": probe.peak_extra_ratio,
                "load_factor": factor, "cold": probe.cold, "integrated": probe.integrated,
                "load_seconds": probe.load_seconds, "directory": probe.directory}
    if not probe.attempted:
        return Verdict(G, Status.SKIP, f"safetensors load probe not run: {probe.reason}", readings=readings)
    size = gb(probe.size_bytes) if probe.size_bytes else ""
    article = "an" if re.match(r"8|1[18][ .]", size) else "a"  # "an 8.0 GB", "an 11 GB", "a 4.0 GB"
    load = f"{article} {size} " if size else "a "
    if not probe.ok or probe.peak_extra_ratio is None:
        return Verdict(G, Status.FAIL, f"{load}safetensors load to the GPU failed: {probe.reason}"[:300],
                       fix="reproduce it alone with spark-gotchas microbench safetensors_load --size-gb 8; free "
                           "memory first (G6 names what holds it) and drop the page cache between runs",
                       readings=readings)
    parts = ", ".join(f"{name} {value:.2f}x" for name, value in (
        ("page cache", probe.cache_ratio), ("process RSS", probe.rss_ratio), ("CUDA", probe.cuda_ratio))
        if value is not None)
    head = (f"{load}{'cold' if probe.cold else 'warm'} safetensors load peaked at {probe.peak_extra_ratio:.2f}x "
            "the file")
    split = f"{parts}; {probe.load_seconds:.1f} s"
    if not probe.integrated:
        host = probe.peak_extra_ratio - (probe.cuda_ratio or 0.0)
        return Verdict(G, Status.INFO, f"{head}, host memory {host:.2f}x",
                       detail=f"{split}; the GPU's own memory held the rest; on a unified-memory GPU (a Spark) both "
                              "come out of one pool", readings=readings)
    if probe.peak_extra_ratio > factor:
        suggested = math.ceil(probe.peak_extra_ratio * 10) / 10
        return Verdict(G, Status.WARN, f"{head}, above the x{factor:g} G3 assumes",
                       detail=split,
                       fix=f"judge plans on this machine with --spark-load-factor {suggested:.1f}, and drop the page "
                           f"cache between runs as root ({DROP_CACHES}), never in the middle of training",
                       readings=readings)
    return Verdict(G, Status.PASS, f"{head}, within the x{factor:g} G3 assumes", detail=split, readings=readings)
