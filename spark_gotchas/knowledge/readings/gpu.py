"""Reading types of the ``gpu.*`` keys (G1, G3, G5, G6, G7, G10): NVML's inventory of the GPUs, and the
other processes on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from ...microbench.quantities import Bytes, Count, Epoch, IntMHz, IntPercent, MHz, Milliwatts, Percent, Watts


# -- gpu.inventory --------------------------------------------------------------------------------
@dataclass
class GpuDevice:
    """One GPU as NVML describes it. None = not readable; ``unavailable`` says why.

    Command line equivalent: ``nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,
    memory.used,clocks.max.memory,clocks.max.sm,power.limit --format=csv``
    """

    index: int
    name: Optional[str] = None
    uuid: Optional[str] = None
    capability: Optional[tuple[int, int]] = None
    memory_total_bytes: Optional[Bytes] = None
    memory_used_bytes: Optional[Bytes] = None
    memory_free_bytes: Optional[Bytes] = None
    bus_width_bits: Optional[int] = None
    max_memory_clock_mhz: Optional[IntMHz] = None
    max_sm_clock_mhz: Optional[IntMHz] = None
    power_limit_mw: Optional[Milliwatts] = None
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def theoretical_bandwidth_gbps(self) -> Optional[float]:
        """max memory clock x bus width x 2 (DDR) / 8 bits, in GB/s; None when NVML hides it."""
        if not self.max_memory_clock_mhz or not self.bus_width_bits:
            return None
        return self.max_memory_clock_mhz * 1e6 * self.bus_width_bits * 2 / 8 / 1e9


@dataclass
class GpuInventory:
    """``nvml_error`` is set (and devices empty) when NVML itself is unavailable; ``pynvml_shadow``
    then names the module named pynvml that is not nvidia-ml-py's, where that is the cause."""

    nvml_error: Optional[str] = None
    pynvml_shadow: Optional[str] = None
    driver_version: Optional[str] = None
    cuda_driver_version: Optional[int] = None  # 13000 means CUDA 13.0
    devices: list[GpuDevice] = field(default_factory=list)

    @property
    def cuda_driver_major(self) -> Optional[int]:
        return None if self.cuda_driver_version is None else self.cuda_driver_version // 1000

    @property
    def cuda_driver_text(self) -> Optional[str]:
        v = self.cuda_driver_version
        return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"

    @property
    def first(self) -> Optional[GpuDevice]:
        return self.devices[0] if self.devices else None


# -- gpu.processes --------------------------------------------------------------------------------
@dataclass
class ServerConfig:
    """A config file a known server's command line names, as read for G6 (``cat PATH``, under the
    process's own root and working folder): its text with secret-looking values masked, or why it
    was not read."""

    path: str  # as the command line names it
    text: Optional[str] = None  # None when not read
    error: Optional[str] = None  # why not: no permission, not a regular file, larger than the bound, not UTF-8 ...


@dataclass
class ServerStart:
    """What bounds a known server beyond its command line: the variables of its environment that bound
    a server (masked), the config files it names, and its installed version.

    Command line equivalent: ``tr '\\0' '\\n' < /proc/PID/environ | grep -E '^(OLLAMA_|LLAMA_ARG_|CUDA_MEMORY_)'``,
    ``cat CONFIG``, and ``ls -d /proc/PID/root/PREFIX/lib/python3*/*-packages/vllm-*.dist-info`` (PREFIX: its
    virtual environment, or its interpreter's).
    """

    environ: Optional[dict[str, str]] = None  # None when not read; only the variables that bound a server
    environ_error: Optional[str] = None  # why not: another user's process, exited ...
    configs: list[ServerConfig] = field(default_factory=list)
    version: Optional[str] = None  # the installed release of the server's Python distribution
    version_from: Optional[str] = None  # the dist-info folder it was read from, as the process sees it
    version_error: Optional[str] = None  # why no version was read


@dataclass
class GpuProcess:
    """One process beside this run.

    Command line equivalent: ``nvidia-smi --query-compute-apps=pid,process_name,used_memory
    --format=csv`` (plus the G rows of plain ``nvidia-smi``), then ``ps -o pid,ppid,user,rss,args
    -p PID``.
    """

    pid: int
    ppid: Optional[int] = None
    name: Optional[str] = None
    cmdline: Optional[list[str]] = None  # None when it could not be read; secret values masked
    username: Optional[str] = None
    rss_bytes: Optional[Bytes] = None  # host RSS; on GB10 CUDA memory does not show here
    gpu_memory_bytes: Optional[Bytes] = None  # NVML usedGpuMemory summed over devices; None = not reported
    gpu_devices: list[int] = field(default_factory=list)
    nvml_lists: list[str] = field(default_factory=list)  # "compute" and/or "graphics"
    found_by: str = "nvml"  # "nvml", "scan" or "nvml+scan"
    problem: Optional[str] = None  # why something about it could not be read
    visible: bool = True  # False: NVML lists a pid this process cannot see (another pid namespace, or it exited)
    start: Optional[ServerStart] = None  # a known server's environment, config files and version (None: not read)


# -- one GPU's use as a whole, whoever uses it (no pid needed) --------------------------------------
BUSY_UTILIZATION_PCT = 10.0  # at rest, a GPU busy at least this share of NVML's last sample period is in use
BUSY_POWER_OF_LIMIT = 0.5  # at rest, without a utilization figure: drawing half its power limit or more
UNLISTED_FLOOR_BYTES = 256 << 20  # memory in use that no listed process holds (the driver's reserve apart): a
#                                   CUDA context alone holds more (about 0.5 GB on an H100 or H200)
UNLISTED_FLOOR_V1_BYTES = 2 << 30  # where NVML does not split its reserve out (v1: 0.64 GB on an idle H200)


@dataclass
class DeviceUse:
    """One GPU's use as a whole at one moment, and how much of it the processes NVML lists explain.

    A container started without ``--pid=host`` sees NVML list another namespace's processes under
    pids it cannot map, or not at all; the device's own figures still show their work.
    Command line equivalent: ``nvidia-smi --query-gpu=utilization.gpu,power.draw,power.limit,
    clocks.sm,memory.total,memory.used,memory.reserved --format=csv`` beside ``nvidia-smi
    --query-compute-apps=pid,used_memory --format=csv`` (and ``ls /proc/PID`` for each pid).
    """

    utilization_pct: Optional[Percent] = None  # share of NVML's last sample period with a kernel running
    power_w: Optional[Watts] = None
    power_limit_w: Optional[Watts] = None
    sm_clock_mhz: Optional[MHz] = None
    memory_total_bytes: Optional[Bytes] = None
    memory_used_bytes: Optional[Bytes] = None  # allocated; the driver's reserve left out where NVML splits it (v2)
    memory_reserved_bytes: Optional[Bytes] = None  # the reserve; None: NVML's v1 figure, the reserve inside "used"
    listed: Count = 0  # processes NVML lists on it (compute and graphics), this run's own included
    listed_bytes: Optional[Bytes] = None  # the GPU memory NVML gives for them, summed (None: it gives none)
    not_visible: Count = 0  # listed pids this process cannot see (no such pid here: another pid namespace)
    own_listed: Count = 0  # listed pids of this run's own processes
    unavailable: dict[str, str] = field(default_factory=dict)  # figure -> NVML's reason

    @property
    def unlisted_bytes(self) -> Optional[int]:
        """Memory in use that no listed process holds (None where either side is not known)."""
        if self.memory_used_bytes is None or self.listed_bytes is None:
            return None
        return max(0, self.memory_used_bytes - (self.listed_bytes or 0))


def unlisted_floor(reserve_split: bool) -> int:
    """How much unlisted memory is someone's rather than the driver's own."""
    return UNLISTED_FLOOR_BYTES if reserve_split else UNLISTED_FLOOR_V1_BYTES


@dataclass(frozen=True)
class Outside:
    """Use of the GPU that no process visible here explains: another pid namespace's work (a
    container started without ``--pid=host`` sees only its own processes by pid)."""

    hidden: int = 0  # pids NVML lists that are not visible here (this run's own discounted)
    unlisted_bytes: Optional[int] = None  # memory in use that no listed process holds, above the floor
    utilization_pct: Optional[Percent] = None  # at rest: before this run used the GPU (None: not read then)
    power_w: Optional[float] = None  # at rest, as utilization_pct
    power_limit_w: Optional[float] = None
    memory_when: str = "at rest"  # when unlisted_bytes was seen: "at rest", "while it ran" …

    @property
    def text(self) -> str:
        """``another process outside this container uses the GPU: 2 pids NVML lists are not visible here``,
        ``…: NVML lists no pid for it``."""
        head = "another process outside this container uses the GPU"
        if self.hidden > 9:  # a G-line keeps to 100 columns
            return f"{head}: {self.hidden} pids NVML lists, none visible here"
        if self.hidden:
            return f"{head}: {self.hidden} pid{'s' if self.hidden != 1 else ''} NVML lists " \
                   f"{'are' if self.hidden != 1 else 'is'} not visible here"
        return f"{head}: NVML lists no pid for it"

    @property
    def idle(self) -> bool:
        """Read idle at rest: it holds memory, and no compute was seen (it may start any time)."""
        return self.utilization_pct is not None and self.utilization_pct < BUSY_UTILIZATION_PCT

    @property
    def figures(self) -> str:
        """``100% busy, 700.8 W of 700 W at rest; 1.1 GB held by no listed process while it ran``."""
        rest = ([f"{self.utilization_pct:.0f}% busy"] if self.utilization_pct is not None else []) + \
            ([f"{self.power_w:.1f} W" + (f" of {self.power_limit_w:.0f} W" if self.power_limit_w else "")]
             if self.power_w is not None else [])
        bits = [", ".join(rest) + " at rest"] if rest else []
        if self.unlisted_bytes is not None:  # GB as units.gb writes it (reading types import no helpers)
            bits.append(f"{self.unlisted_bytes / 1e9:.1f} GB held by no listed process {self.memory_when}")
        return "; ".join(bits)

    @property
    def detail(self) -> str:
        """The text, its figures, and why pids fail here."""
        return (f"{self.text} ({self.figures}; a container started without --pid=host sees another pid namespace's "
                "processes under pids it cannot map, or not at all)")

    @property
    def brief(self) -> str:
        return "a process outside this container"

    def cause(self, sampled: bool) -> str:
        """Its part in a figure: ``shared with a process outside this container``; one seen idle at rest
        only holds memory beside the measurement."""
        if self.idle:
            held = f" holding {self.unlisted_bytes / 1e9:.1f} GB" if self.unlisted_bytes is not None else ""
            return f"beside {self.brief}{held} (idle at rest)"
        return f"shared with {self.brief}" if sampled else f"{self.brief} busy at rest (see G6)"


def rest_outside(use: Optional[DeviceUse], own_on_gpu: Optional[int], visible_computing: int = 0) -> Optional[Outside]:
    """What of ``use`` no visible process explains, read while this run had ``own_on_gpu`` processes on
    the GPU (0: before it touched the GPU; None: not known). ``visible_computing``: other processes
    NVML lists on it by a pid visible here (their work is theirs, named by pid).

    At rest every listed process is someone else's, and so is the device's utilization and power;
    once this run is on the GPU, a hidden pid may be its own (each of its processes counts against
    them) and its work is in the figures, so only hidden pids beyond its own and memory are used.
    """
    if use is None:
        return None
    possibly_own = max(0, own_on_gpu - use.own_listed) if own_on_gpu is not None else use.not_visible
    hidden = max(0, use.not_visible - possibly_own)
    unlisted = use.unlisted_bytes
    floor = unlisted_floor(use.memory_reserved_bytes is not None)
    if unlisted is not None and (unlisted < floor or possibly_own > use.not_visible):
        unlisted = None  # the driver's own, or possibly this run's processes that NVML does not list
    busy = False
    if own_on_gpu == 0 and not visible_computing:
        if use.utilization_pct is not None:
            busy = use.utilization_pct >= BUSY_UTILIZATION_PCT
        elif use.power_w is not None and use.power_limit_w:
            busy = use.power_w >= BUSY_POWER_OF_LIMIT * use.power_limit_w
    if not (hidden or unlisted or busy):
        return None
    rest = own_on_gpu == 0  # the figures are someone else's only before this run used the GPU
    return Outside(hidden=hidden, unlisted_bytes=unlisted, utilization_pct=use.utilization_pct if rest else None,
                   power_w=use.power_w if rest else None, power_limit_w=use.power_limit_w,
                   memory_when="at rest" if rest else "while this run was on the GPU")


@dataclass
class DeviceProcessLists:
    index: int
    uuid: Optional[str] = None
    errors: dict[str, str] = field(default_factory=dict)  # list name -> NVML reason
    use: Optional[DeviceUse] = None  # the device as a whole, read with the lists (None: an older suite's snapshot)


@dataclass
class GpuProcesses:
    nvml_error: Optional[str] = None  # NVML itself unavailable
    devices: list[DeviceProcessLists] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    scan_error: Optional[str] = None  # the process table could not be scanned
    scanned: int = 0  # processes whose command line was read
    scan_denied: int = 0  # processes whose command line we may not read
    own_excluded: int = 0  # NVML-listed processes of the suite's own tree, left out
    cuda_visible_devices: Optional[str] = None
    own_on_gpu: Optional[int] = None  # this run's processes that may hold a GPU context when read (0: at rest)

    def computing(self) -> list[GpuProcess]:
        """The other processes that may keep the GPU busy: those in NVML's compute lists, and where
        NVML cannot list any, the known servers and trainers found by their command lines."""
        if self.nvml_error:
            return list(self.processes)
        return [p for p in self.processes if "compute" in p.nvml_lists]

    def outside(self, devices: Optional[set[int]] = None) -> Optional[Outside]:
        """Use of ``devices`` (default: all) that no process visible here explains, the first such
        device's (:func:`rest_outside`)."""
        for dev in self.devices:
            if devices is not None and dev.index not in devices:
                continue
            computing = [p for p in self.computing() if p.visible and dev.index in p.gpu_devices]
            found = rest_outside(dev.use, self.own_on_gpu, len(computing))
            if found is not None:
                return found
        return None

    def outside_pids(self) -> set[int]:
        """Pids listed at rest that are not visible here: surely not this run's (it had none on the GPU)."""
        if self.own_on_gpu != 0:
            return set()
        return {p.pid for p in self.processes if not p.visible and p.found_by != "scan"}


def process_label(proc: GpuProcess) -> str:
    """``pid 6008 VLLM::EngineCore``: the pid and its program's file name (or process name)."""
    argv0 = proc.cmdline[0] if proc.cmdline else ""
    name = (argv0.rsplit("/", 1)[-1] or proc.name or "unknown process")[:40]
    return f"pid {proc.pid} {name}"


# -- who else was on the GPU while a measurement ran (G4 spot load, G5 bandwidth, G7 GEMM) ---------
SUITE_WORKER_MODULE = "spark_gotchas.runtime.worker_main"  # how another spark-gotchas run's worker shows in its command line


@dataclass
class WindowProcess:
    """A process on the measured GPU, other than this run's own, while a measurement ran.

    Command line equivalent, during the measurement: ``nvidia-smi --query-compute-apps=pid,
    process_name,used_memory --format=csv`` and ``nvidia-smi pmon -c 1 -s u`` (per-process SM %).
    """

    pid: int
    program: str = ""  # its program's file name (argv[0]) or process name; '' when not visible here
    suite_run: bool = False  # a worker of another spark-gotchas run
    run_pid: Optional[int] = None  # that run's own pid (the worker's parent), when it could be read
    visible: bool = True  # False: NVML names a pid this process cannot see (another pid namespace)
    phases: list[str] = field(default_factory=list)  # "before", "during", "after": when it was listed
    sm_util_max_pct: Optional[IntPercent] = None  # NVML's per-process SM utilization, the most it reported
    gpu_memory_bytes: Optional[Bytes] = None

    @property
    def label(self) -> str:
        """``a spark-gotchas run (pid 4242)``, ``pid 6008 vllm``, ``pid 91 (not visible here)``."""
        if self.suite_run:
            return f"a spark-gotchas run (pid {self.run_pid or self.pid})"
        if not self.visible:
            return f"pid {self.pid} (not visible here)"
        return f"pid {self.pid} {self.program[:40] or 'unknown process'}"

    @property
    def brief(self) -> str:
        """The label in the few words a G-line has room for: ``another spark-gotchas run``,
        ``pid 7001 python3`` (the program cut to 20 characters)."""
        if self.suite_run:
            return "another spark-gotchas run"
        if not self.visible:
            return f"pid {self.pid} (not visible here)"
        return f"pid {self.pid} {self.program[:20] or 'unknown process'}"


@dataclass
class MeasureWindow:
    """Who else used the GPU while a timed measurement ran: NVML's compute processes sampled before,
    during and after it, and NVML's per-process utilization over it.

    A process listed during the window (or both before and after it) shared the GPU unless NVML's
    per-process utilization shows it idle. Where NVML reports the pids of another pid namespace (a
    container without ``--pid=host``), this run's own measuring process is among the hidden ones:
    ``own_hidden`` says how many of them are this run's and are not counted.
    """

    what: str = ""  # the measurement ("G5 bandwidth probe")
    t_start_epoch: Optional[Epoch] = None
    t_end_epoch: Optional[Epoch] = None
    samples: int = 0  # process lists read
    others: list[WindowProcess] = field(default_factory=list)
    lists_error: Optional[str] = None  # NVML could not list processes: nothing can be said
    utilization_error: Optional[str] = None  # per-process utilization not reported: listed counts as busy
    own_hidden: int = 0  # hidden pids taken as this run's own (its measuring process not listed by its pid)
    # Device memory in use that no listed process held while it ran (compute and graphics lists, this run's
    # own included), the most seen in two samples in a row; None: not comparable (no device memory figure,
    # or this run's measuring process not among those listed)
    unlisted_bytes: Optional[Bytes] = None
    reserve_split: Optional[bool] = None  # NVML gave the driver's reserve apart from "used" (v2)

    @property
    def read(self) -> bool:
        """True when the process lists were read while the measurement ran."""
        return self.lists_error is None and self.samples > 0

    def busy(self, outside_pids: frozenset[int] | set[int] = frozenset()) -> list[WindowProcess]:
        """The others that shared the GPU during the measurement (see the class docstring).
        ``outside_pids``: hidden pids listed before this run used the GPU, never taken as its own."""
        shared = [p for p in self.others
                  if ("during" in p.phases or {"before", "after"} <= set(p.phases))
                  and (self.utilization_error is not None or p.sm_util_max_pct is None or p.sm_util_max_pct > 0)]
        hidden = [p for p in shared if not p.visible and p.pid not in outside_pids][: self.own_hidden]
        return [p for p in shared if p not in hidden]

    def outside(self) -> Optional[Outside]:
        """Memory held while it ran by a process NVML did not list (another pid namespace's)."""
        if self.unlisted_bytes is None or self.unlisted_bytes < unlisted_floor(bool(self.reserve_split)):
            return None
        return Outside(unlisted_bytes=self.unlisted_bytes, memory_when="while it ran")


OUTSIDE_FIX = ("find it from the host, where nvidia-smi names its pid and program (or start this container with "
               "--pid=host), and stop it or let it finish")


@dataclass(frozen=True)
class Sharing:
    """What a judge can say about other GPU work during a measurement.

    ``busy``: True (someone else was on the GPU: ``names`` says who), False (the lists were read
    while it ran and nobody else was busy), None (not known: not sampled, or NVML could not list)."""

    busy: Optional[bool]
    names: str = ""  # who, with pids (fixes, details)
    pids: tuple[int, ...] = ()
    sampled: bool = False  # True: from lists read during the measurement; False: from a list read at another time
    suite_runs: int = 0  # how many of the busy ones are other spark-gotchas runs' workers
    brief: str = ""  # who, in the few words a G-line has room for
    outside: Optional[Outside] = None  # use of the GPU no process visible here explains (another pid namespace's)
    hidden: int = 0  # how many of the busy ones are pids not visible here

    @property
    def only_runs(self) -> bool:
        """Everyone busy was another spark-gotchas run: wait for it, nothing to stop."""
        return bool(self.pids) and self.suite_runs == len(self.pids)

    @property
    def only_outside(self) -> bool:
        """Everyone busy is outside this container: nothing here can be stopped by pid."""
        return bool(self.busy) and (self.outside is not None or (bool(self.pids) and self.hidden == len(self.pids)))

    @property
    def cause(self) -> str:
        """``shared with pid 7001 python3`` (seen while it ran), ``pid 6008 vllm busy (see G6)`` (listed
        at another moment of the run); '' when nobody is known to have been busy."""
        if not self.busy:
            return ""
        if self.outside is not None:
            return self.outside.cause(self.sampled)
        if self.sampled:
            return f"shared with {self.brief or self.names}"
        return f"{self.names} busy (see G6)"

    @property
    def aside(self) -> str:
        """What a detail adds about them: ``; measured while a spark-gotchas run (pid 579) shared the GPU``."""
        if self.busy and self.outside is not None:
            return f"; {self.outside.detail}"
        return f"; measured while {self.names} shared the GPU" if self.busy and self.sampled else ""

    def fix(self, then: str, default: str) -> str:
        """The fix for a figure they spoiled: ``default`` (formatted with ``names``), or for a process
        outside this container, how to find it; ``then`` is the re-run that follows."""
        if self.only_outside:
            return f"{OUTSIDE_FIX}, then {then}"
        return default.format(names=self.names)


def _names(procs: list, limit: int = 2, brief: bool = False) -> str:
    """Who shared the GPU: other spark-gotchas runs together (``2 spark-gotchas runs (pids 4242,
    4343)``; brief: ``2 other spark-gotchas runs``), processes outside this container together,
    then the rest by pid and program, ``+N more`` past ``limit`` names."""
    workers = [p for p in procs if isinstance(p, WindowProcess) and p.suite_run]
    hidden = [p for p in procs if p not in workers and not getattr(p, "visible", True)]
    rest = [p for p in procs if p not in workers and p not in hidden]
    runs = list(dict.fromkeys(p.run_pid or p.pid for p in workers))  # a run's GPU and load workers are one run
    if brief:
        parts = ["another spark-gotchas run"] if len(runs) == 1 else [f"{len(runs)} other spark-gotchas runs"] if runs \
            else []
    else:
        parts = [f"a spark-gotchas run (pid {runs[0]})"] if len(runs) == 1 else \
            [f"{len(runs)} spark-gotchas runs (pids {', '.join(str(p) for p in runs[:3])}"
             + (", ..." if len(runs) > 3 else "") + ")"] if runs else []
    if hidden:
        who = "a process" if len(hidden) == 1 else f"{len(hidden)} processes"
        pids = ", ".join(str(p.pid) for p in hidden[:3]) + (", ..." if len(hidden) > 3 else "")
        parts.append(f"{who} outside this container" + ("" if brief else f" (pid{'s' if len(hidden) > 1 else ''} "
                                                                         f"{pids}, not visible here)"))
    parts += [(p.brief if brief else p.label) if isinstance(p, WindowProcess) else process_label(p) for p in rest]
    more = f" +{len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def _busy_sharing(procs: list, sampled: bool) -> Sharing:
    return Sharing(True, _names(procs), tuple(p.pid for p in procs), sampled,
                   sum(1 for p in procs if isinstance(p, WindowProcess) and p.suite_run),
                   _names(procs, limit=1, brief=True), hidden=sum(1 for p in procs if not getattr(p, "visible", True)))


def _outside_sharing(outside: Outside, sampled: bool) -> Sharing:
    return Sharing(True, f"{outside.brief} ({outside.figures})", (), sampled, brief=outside.brief, outside=outside)


def sharing(window: Optional[MeasureWindow], processes: Optional[GpuProcesses] = None) -> Sharing:
    """Who shared the GPU during a measurement: from its own window where it was sampled; else
    (a snapshot of an older suite) the run's process list, which may name a job already there but
    cannot show that nothing else ran while the measurement did.

    Use no visible process explains counts too (:class:`Outside`): memory no listed process held
    while it ran, or, where the window could not compare memory, what the run's process list saw
    at rest (pids hidden from this container, a GPU busy before this run used it)."""
    rest = processes.outside() if processes is not None else None
    if window is not None and window.read:
        busy = window.busy(processes.outside_pids() if processes is not None else frozenset())
        if busy:
            return _busy_sharing(busy, True)
        seen = window.outside()
        if seen is not None:  # what the run saw at rest says whether it computes or only holds memory
            return _outside_sharing(seen if rest is None else replace(
                seen, utilization_pct=rest.utilization_pct, power_w=rest.power_w, power_limit_w=rest.power_limit_w),
                True)
        if rest is not None and window.unlisted_bytes is None:  # the window could not see through the wall
            return _outside_sharing(rest, False)
        return Sharing(False, sampled=True)
    if processes is not None:
        computing = processes.computing() if window is None else []
        if computing:
            return _busy_sharing(computing, False)
        if rest is not None:
            return _outside_sharing(rest, False)
    return Sharing(None)


# -- gpu.visibility -------------------------------------------------------------------------------
NVIDIA_PCI_VENDOR = "0x10de"
GPU_PCI_CLASSES = ("0x0300", "0x0302")  # display VGA controller, 3D controller (first 4 hex digits)
HIDDEN_DEVICE_VALUES = ("", "void", "none")  # NVIDIA_VISIBLE_DEVICES values that give no GPU


@dataclass
class PciGpu:
    """An NVIDIA display or 3D controller on the PCI bus (``lspci -d 10de: -nn`` lists the same)."""

    address: str  # 000f:01:00.0 on a GB10
    device_id: Optional[str] = None  # 0x2e12 on a GB10
    class_code: Optional[str] = None  # 0x030200 (3D controller)

    @property
    def text(self) -> str:
        ident = f"10de:{self.device_id[2:]}" if self.device_id and self.device_id.startswith("0x") else "10de"
        return f"{ident} at {self.address}"


@dataclass
class GpuVisibility:
    """Whether an NVIDIA GPU is in this machine, and what this environment is given of it.

    A container started without ``--gpus all`` has no ``/dev/nvidia*`` and no NVML library, yet
    the PCI bus (sysfs is not namespaced) still shows the GPU, and an NGC image still sets its
    NVIDIA_* variables. Command line equivalent: ``lspci -d 10de: ; ls /dev/nvidia* ;
    env | grep -E 'NVIDIA_|CUDA_VISIBLE'``.
    """

    pci_gpus: list[PciGpu] = field(default_factory=list)
    pci_error: Optional[str] = None  # the PCI bus could not be listed (then absence proves nothing)
    dev_nodes: list[str] = field(default_factory=list)  # /dev/nvidia0, /dev/nvidiactl, ...
    nvidia_visible_devices: Optional[str] = None  # None = unset
    cuda_visible_devices: Optional[str] = None  # None = unset
    image_vars: dict[str, str] = field(default_factory=dict)  # NVIDIA_PRODUCT_NAME, NVIDIA_BUILD_ID, ...
    container: Optional[str] = None  # the marker file found (/.dockerenv, /run/.containerenv), else None

    @property
    def gpu_on_bus(self) -> bool:
        return bool(self.pci_gpus)

    @property
    def gpu_requested(self) -> bool:
        """NVIDIA_VISIBLE_DEVICES names GPUs: set by the NVIDIA runtime, or by an NGC image's own ENV."""
        value = self.nvidia_visible_devices
        return value is not None and value.strip().lower() not in HIDDEN_DEVICE_VALUES

    @property
    def bus_text(self) -> str:
        """``10de:2e12 at 000f:01:00.0`` (the first, and how many more)."""
        if not self.pci_gpus:
            return ""
        more = f" (+{len(self.pci_gpus) - 1} more)" if len(self.pci_gpus) > 1 else ""
        return self.pci_gpus[0].text + more
