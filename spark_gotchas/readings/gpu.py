"""Reading types of the ``gpu.*`` keys (G1, G3, G5, G6, G7, G10): NVML's inventory of the GPUs, and the
other processes on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..microbench.quantities import Bytes, Epoch, IntMHz, IntPercent, Milliwatts


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


@dataclass
class DeviceProcessLists:
    index: int
    uuid: Optional[str] = None
    errors: dict[str, str] = field(default_factory=dict)  # list name -> NVML reason


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

    def computing(self) -> list[GpuProcess]:
        """The other processes that may keep the GPU busy: those in NVML's compute lists, and where
        NVML cannot list any, the known servers and trainers found by their command lines."""
        if self.nvml_error:
            return list(self.processes)
        return [p for p in self.processes if "compute" in p.nvml_lists]


def process_label(proc: GpuProcess) -> str:
    """``pid 6008 VLLM::EngineCore``: the pid and its program's file name (or process name)."""
    argv0 = proc.cmdline[0] if proc.cmdline else ""
    name = (argv0.rsplit("/", 1)[-1] or proc.name or "unknown process")[:40]
    return f"pid {proc.pid} {name}"


# -- who else was on the GPU while a measurement ran (G4 spot load, G5 bandwidth, G7 GEMM) ---------
SUITE_WORKER_MODULE = "spark_gotchas.worker_main"  # how another spark-gotchas run's worker shows in its command line


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

    @property
    def read(self) -> bool:
        """True when the process lists were read while the measurement ran."""
        return self.lists_error is None and self.samples > 0

    def busy(self) -> list[WindowProcess]:
        """The others that shared the GPU during the measurement (see the class docstring)."""
        shared = [p for p in self.others
                  if ("during" in p.phases or {"before", "after"} <= set(p.phases))
                  and (self.utilization_error is not None or p.sm_util_max_pct is None or p.sm_util_max_pct > 0)]
        hidden = [p for p in shared if not p.visible][: self.own_hidden]
        return [p for p in shared if p not in hidden]


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

    @property
    def only_runs(self) -> bool:
        """Everyone busy was another spark-gotchas run: wait for it, nothing to stop."""
        return bool(self.pids) and self.suite_runs == len(self.pids)

    @property
    def cause(self) -> str:
        """``shared with pid 7001 python3`` (seen while it ran), ``pid 6008 vllm busy (see G6)`` (listed
        at another moment of the run); '' when nobody is known to have been busy."""
        if not self.busy:
            return ""
        return f"shared with {self.brief or self.names}" if self.sampled else f"{self.names} busy (see G6)"

    @property
    def aside(self) -> str:
        """What a detail adds about them: ``; measured while a spark-gotchas run (pid 579) shared the GPU``."""
        return f"; measured while {self.names} shared the GPU" if self.busy and self.sampled else ""


def _names(procs: list, limit: int = 2, brief: bool = False) -> str:
    """Who shared the GPU: other spark-gotchas runs together (``2 spark-gotchas runs (pids 4242,
    4343)``; brief: ``2 other spark-gotchas runs``), then the rest by pid and program, ``+N more``
    past ``limit`` names."""
    workers = [p for p in procs if isinstance(p, WindowProcess) and p.suite_run]
    rest = [p for p in procs if p not in workers]
    runs = list(dict.fromkeys(p.run_pid or p.pid for p in workers))  # a run's GPU and load workers are one run
    if brief:
        parts = ["another spark-gotchas run"] if len(runs) == 1 else [f"{len(runs)} other spark-gotchas runs"] if runs \
            else []
    else:
        parts = [f"a spark-gotchas run (pid {runs[0]})"] if len(runs) == 1 else \
            [f"{len(runs)} spark-gotchas runs (pids {', '.join(str(p) for p in runs[:3])}"
             + (", ..." if len(runs) > 3 else "") + ")"] if runs else []
    parts += [(p.brief if brief else p.label) if isinstance(p, WindowProcess) else process_label(p) for p in rest]
    more = f" +{len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def sharing(window: Optional[MeasureWindow], processes: Optional[GpuProcesses] = None) -> Sharing:
    """Who shared the GPU during a measurement: from its own window where it was sampled; else
    (a snapshot of an older suite) the run's process list, which may name a job already there but
    cannot show that nothing else ran while the measurement did."""
    if window is not None and window.read:
        busy = window.busy()
        return Sharing(bool(busy), _names(busy), tuple(p.pid for p in busy), True,
                       sum(1 for p in busy if p.suite_run), _names(busy, limit=1, brief=True))
    if window is None and processes is not None:
        computing = processes.computing()
        if computing:
            return Sharing(True, _names(computing), tuple(p.pid for p in computing))
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
