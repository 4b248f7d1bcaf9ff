"""The GPUs as NVML sees them, and the other processes on them.

Keys: ``gpu.inventory``: driver, CUDA driver version, and each GPU's static facts. ``gpu.visibility``:
the NVIDIA GPUs on the PCI bus, ``/dev/nvidia*`` and the variables that give this environment a GPU
(read under ``$SPARK_GOTCHAS_SYS_ROOT`` instead of ``/`` where that is set). ``gpu.processes``:
NVML's process lists, plus a scan of command lines for known servers. NVML lists processes that
hold GPU memory (on GB10 per-process memory works although device memory does not). It does not
list a server that has not allocated yet, and it may be missing altogether, so every process's
command line is also scanned for known servers and trainers (:mod:`spark_gotchas.knowledge.workloads`). The
suite's own process tree (this pytest, its GPU worker, and the launchers above it) is left out.

Their types are in :mod:`spark_gotchas.knowledge.readings.gpu`.
"""

from __future__ import annotations

import functools
import glob
import os
import re
from typing import Any, Callable, Iterable, Optional

from ...base import bounded_read, scrub
from ...knowledge import workloads
from ...knowledge.readings.gpu import (
    GPU_PCI_CLASSES,
    NVIDIA_PCI_VENDOR,
    DeviceProcessLists,
    DeviceUse,
    GpuDevice,
    GpuInventory,
    GpuProcess,
    GpuProcesses,
    GpuVisibility,
    PciGpu,
    ServerConfig,
    ServerStart,
)
from ...knowledge.workloads import classify
from .. import nvml
from . import ReadContext, reader


# -- gpu.inventory --------------------------------------------------------------------------------
def read_device(index: int, handle) -> GpuDevice:
    values = {
        "name": nvml.query("nvmlDeviceGetName", handle),
        "uuid": nvml.query("nvmlDeviceGetUUID", handle),
        "capability": nvml.query("nvmlDeviceGetCudaComputeCapability", handle),
        "bus_width_bits": nvml.query("nvmlDeviceGetMemoryBusWidth", handle),
        "max_memory_clock_mhz": nvml.query("nvmlDeviceGetMaxClockInfo", handle, nvml.const("NVML_CLOCK_MEM")),
        "max_sm_clock_mhz": nvml.query("nvmlDeviceGetMaxClockInfo", handle, nvml.const("NVML_CLOCK_SM")),
        "power_limit_mw": nvml.query("nvmlDeviceGetEnforcedPowerLimit", handle),
    }
    memory = nvml.query("nvmlDeviceGetMemoryInfo", handle)
    if nvml.is_na(memory):
        for key in ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes"):
            values[key] = memory
    else:
        values["memory_total_bytes"] = int(memory.total)
        values["memory_used_bytes"] = int(memory.used)
        values["memory_free_bytes"] = int(memory.free)
    clean, reasons = nvml.split(values)
    if clean["capability"] is not None:
        clean["capability"] = tuple(clean["capability"])
    return GpuDevice(index=index, unavailable=reasons, **clean)


@reader("gpu.inventory")
def read_inventory(ctx: ReadContext) -> GpuInventory:
    """Driver and GPUs from NVML (``nvidia-smi -q`` shows the same)."""
    reason = nvml.init()
    if reason is not None:
        return GpuInventory(nvml_error=reason.reason, pynvml_shadow=nvml.shadow())
    driver = nvml.query("nvmlSystemGetDriverVersion")
    cuda = nvml.query("nvmlSystemGetCudaDriverVersion")
    devices = [read_device(i, h) for i, h in enumerate(nvml.device_handles())]
    late = nvml.init()  # a call that hung meanwhile made NVML unavailable
    shadow = nvml.shadow() if late is not None else None
    if shadow and late is not None:  # the values came from a module that is not nvidia-ml-py and then hung: none is trusted
        return GpuInventory(nvml_error=late.reason, pynvml_shadow=shadow)
    return GpuInventory(
        nvml_error=None if late is None else late.reason,
        driver_version=None if nvml.is_na(driver) else str(driver),
        cuda_driver_version=None if nvml.is_na(cuda) else int(cuda),
        devices=devices,
    )


def single_capability(provider: Any) -> Optional[tuple[int, int]]:
    """The compute capability of every GPU NVML lists, when they all share one (else None: which
    of them the worker's device 0 is would be a guess)."""
    inventory = provider.try_read("gpu.inventory")
    capabilities = {d.capability for d in inventory.devices} if inventory is not None else set()
    return capabilities.pop() if len(capabilities) == 1 and None not in capabilities else None


# -- gpu.visibility -------------------------------------------------------------------------------
SYS_ROOT_ENV = "SPARK_GOTCHAS_SYS_ROOT"  # a folder read in place of / (tests: a fake sysfs and /dev)
IMAGE_VARS = ("NVIDIA_PRODUCT_NAME", "NVIDIA_PYTORCH_VERSION", "NVIDIA_BUILD_ID", "NVIDIA_DRIVER_CAPABILITIES",
              "CUDA_VERSION")
MAX_PCI_DEVICES = 4096  # a bus listing longer than this is cut (a real one has tens)
SHOWN_VALUE_CHARS = 200  # an environment variable's value is kept to this length


def _root() -> str:
    return os.environ.get(SYS_ROOT_ENV) or "/"


def _sysfs_text(path: str) -> Optional[str]:
    """The first line of a small sysfs file (``0x10de``), lower-cased; None when unreadable."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(64)
    except OSError:
        return None
    text = raw.decode("ascii", "replace").strip().lower()
    return text or None


def pci_gpus(root: str) -> tuple[list[PciGpu], Optional[str]]:
    """NVIDIA display and 3D controllers under ``root``/sys/bus/pci/devices: (found, why unreadable)."""
    bus = os.path.join(root, "sys", "bus", "pci", "devices")
    try:
        names = sorted(os.listdir(bus))[:MAX_PCI_DEVICES]
    except OSError as exc:
        return [], f"cannot list {bus}: {exc.strerror or exc}"
    found = []
    for name in names:
        vendor = _sysfs_text(os.path.join(bus, name, "vendor"))
        klass = _sysfs_text(os.path.join(bus, name, "class"))
        if vendor == NVIDIA_PCI_VENDOR and klass is not None and klass[:6] in GPU_PCI_CLASSES:
            found.append(PciGpu(address=name[:40], device_id=_sysfs_text(os.path.join(bus, name, "device")),
                                class_code=klass[:10]))
    return found, None


def _env(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return None if value is None else scrub.clip(value, SHOWN_VALUE_CHARS, mark="")  # masked before it is cut


@reader("gpu.visibility")
def read_visibility(ctx: ReadContext) -> GpuVisibility:
    """NVIDIA GPUs on the PCI bus, the /dev/nvidia* nodes and the variables that hand a GPU to this
    environment (no NVML, no torch: it answers where neither works)."""
    root = _root()
    gpus, error = pci_gpus(root)
    nodes = sorted(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(root), "dev", "nvidia*")))[:64]
    marker = next((m for m in ("/.dockerenv", "/run/.containerenv")
                   if os.path.exists(os.path.join(root, m.lstrip("/")))), None)
    image = scrub.scrub_env({k: scrub.clip(os.environ[k], SHOWN_VALUE_CHARS, mark="") for k in IMAGE_VARS if k in os.environ})
    return GpuVisibility(pci_gpus=gpus, pci_error=error, dev_nodes=[f"/dev/{n}" for n in nodes],
                         nvidia_visible_devices=_env("NVIDIA_VISIBLE_DEVICES"),
                         cuda_visible_devices=_env("CUDA_VISIBLE_DEVICES"), image_vars=image, container=marker)


# -- gpu.processes --------------------------------------------------------------------------------
NVML_LISTS = (("compute", "nvmlDeviceGetComputeRunningProcesses"),
              ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"))


# -- NVML ----------------------------------------------------------------------------------------
NVML_MEMORY_V2 = 0x02000028  # nvml.h's nvmlMemory_v2: the memory call that gives the driver's reserve apart
NVML_CLOCK_SM = 1  # nvml.h's nvmlClockType_t


def memory_figures(handle: Any, query: Callable[..., Any] = nvml.query) -> dict[str, Any]:
    """The device's memory: total, allocated and the driver's reserve apart (NVML's v2 call), else
    v1's ``used`` with the reserve inside it (``memory_reserved_bytes`` then NotAvailable)."""
    memory = query("nvmlDeviceGetMemoryInfo", handle, NVML_MEMORY_V2)
    split = not nvml.is_na(memory) and getattr(memory, "reserved", None) is not None
    if not split:
        memory = query("nvmlDeviceGetMemoryInfo", handle)
    if nvml.is_na(memory):
        return dict.fromkeys(("memory_total_bytes", "memory_used_bytes", "memory_reserved_bytes"), memory)
    return {"memory_total_bytes": int(memory.total), "memory_used_bytes": int(memory.used),
            "memory_reserved_bytes": int(memory.reserved) if split else nvml.NotAvailable("NVML v1: inside used")}


def device_use(handle: Any, query: Callable[..., Any] = nvml.query) -> DeviceUse:
    """The device's utilization, power, SM clock and memory, whoever uses it (counts filled in by the caller)."""
    util = query("nvmlDeviceGetUtilizationRates", handle)
    power = query("nvmlDeviceGetPowerUsage", handle)
    limit = query("nvmlDeviceGetEnforcedPowerLimit", handle)
    clock = query("nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM)
    values = {"utilization_pct": util if nvml.is_na(util) else float(util.gpu),
              "power_w": power if nvml.is_na(power) else int(power) / 1000.0,
              "power_limit_w": limit if nvml.is_na(limit) else int(limit) / 1000.0,
              "sm_clock_mhz": clock if nvml.is_na(clock) else float(clock), **memory_figures(handle, query)}
    clean, reasons = nvml.split(values)
    return DeviceUse(unavailable=reasons, **clean)


def nvml_rows(query: Callable[..., Any] = nvml.query, handles: Callable[[], list] = nvml.device_handles,
              init: Callable[[], Any] = nvml.init) -> tuple[Optional[str], list[DeviceProcessLists], dict[int, dict]]:
    """NVML's compute and graphics lists of every device, and each device's use read with them:
    (error, per-device lists, pid -> row); a row's ``per_device`` holds its memory on each device."""
    reason = init()
    if reason is not None:
        return reason.reason, [], {}
    devices: list[DeviceProcessLists] = []
    rows: dict[int, dict] = {}
    for index, handle in enumerate(handles()):
        uuid = query("nvmlDeviceGetUUID", handle)
        dev = DeviceProcessLists(index=index, uuid=None if nvml.is_na(uuid) else str(uuid))
        for list_name, func in NVML_LISTS:
            procs = query(func, handle)
            if isinstance(procs, nvml.NotAvailable):
                dev.errors[list_name] = procs.reason
                continue
            for proc in procs or []:
                pid = int(proc.pid)
                row = rows.setdefault(pid, {"memory": None, "devices": [], "lists": [], "per_device": {}})
                used = getattr(proc, "usedGpuMemory", None)
                if used is not None:
                    row["memory"] = (row["memory"] or 0) + int(used)
                    row["per_device"][index] = max(row["per_device"].get(index) or 0, int(used))
                else:
                    row["per_device"].setdefault(index, None)
                if index not in row["devices"]:
                    row["devices"].append(index)
                if list_name not in row["lists"]:
                    row["lists"].append(list_name)
        dev.use = device_use(handle, query)
        devices.append(dev)
    late = init()  # a call that hung meanwhile made NVML unavailable: say so, not "no process"
    return (None if late is None else late.reason), devices, rows


def count_listed(devices: list[DeviceProcessLists], rows: dict[int, dict], own: set[int], hidden: set[int]) -> None:
    """Fill each device's use with what NVML lists on it: how many, their memory, how many are this
    run's own and how many are not visible here."""
    for dev in devices:
        if dev.use is None:
            continue
        on = {pid: row["per_device"][dev.index] for pid, row in rows.items() if dev.index in row["per_device"]}
        known = [m for m in on.values() if m is not None]
        dev.use.listed = len(on)
        complete = len(known) == len(on) and not dev.errors  # a list NVML could not give hides its memory
        dev.use.listed_bytes = sum(known) if complete else None
        dev.use.own_listed = sum(1 for pid in on if pid in own)
        dev.use.not_visible = sum(1 for pid in on if pid in hidden)


# -- psutil ----------------------------------------------------------------------------------------
def mask_cmdline(argv: Iterable[str]) -> list[str]:
    """Mask credentials in a command line (``--api-key X``, ``--hf-token=X``, ``TOKEN=X``, a URL
    with a password, a JSON argument with an ``api_key``): :func:`spark_gotchas.base.scrub.mask_argv`."""
    return scrub.mask_argv(argv)


def own_tree(psutil: Any, pid: Optional[int] = None) -> set[int]:
    """This process, its children (the GPU worker) and its ancestors (the launcher of this run)."""
    me = psutil.Process(pid or os.getpid())
    pids = {me.pid}
    for getter in (lambda: me.children(recursive=True), me.parents):
        try:
            pids.update(p.pid for p in getter())
        except (psutil.Error, OSError):
            pass
    return pids


@functools.lru_cache(maxsize=1)
def proc_hides_others() -> bool:
    """Whether this /proc hides other users' processes (mounted with hidepid=1, 2, invisible or
    noaccess): then a pid psutil cannot find may still be a process of this pid namespace.
    Command line equivalent: ``grep ' /proc .* - proc ' /proc/self/mountinfo``."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            return hidepid(fh.read(1 << 20).decode("utf-8", "replace"))
    except OSError:
        return False


def hidepid(mountinfo: str) -> bool:
    """Whether the /proc of this ``/proc/self/mountinfo`` text hides other users' processes."""
    hides = False
    for line in mountinfo.splitlines():  # the last mount on /proc is the one in use
        mount, _, fs = line.partition(" - ")
        fields = mount.split()
        if len(fields) > 4 and fields[4] == "/proc" and fs.startswith("proc "):
            options = ",".join(fs.split()[2:] + fields[5:6]).split(",")
            hides = any(o.startswith("hidepid=") and o not in ("hidepid=0", "hidepid=off") for o in options)
    return hides


def in_this_namespace(pid: int) -> bool:
    """Whether ``pid``, which psutil cannot find, is a process of this pid namespace that /proc
    hides (another user's, under hidepid) rather than none here (another namespace's, or gone):
    signal 0 sends nothing, and the kernel answers EPERM for a process this one may not signal,
    ESRCH for none."""
    if not proc_hides_others():
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError, ValueError, OSError):
        return False
    return True


def describe(psutil: Any, pid: int) -> GpuProcess:
    """psutil's facts about one pid; a missing permission or a vanished pid is said, not raised."""
    proc = GpuProcess(pid=pid)
    try:
        p = psutil.Process(pid)
    except psutil.NoSuchProcess:
        if in_this_namespace(pid):
            proc.problem = "no permission to see it (/proc is mounted with hidepid: another user's process)"
            return proc
        proc.problem = "pid not visible here (exited, or in another container's pid namespace)"
        proc.visible = False
        return proc
    except psutil.AccessDenied:
        proc.problem = "no permission to inspect it"
        return proc
    denied = []
    for attr, getter in (("name", p.name), ("ppid", p.ppid), ("username", p.username),
                         ("cmdline", p.cmdline), ("rss_bytes", lambda: p.memory_info().rss)):
        try:
            value = getter()
        except psutil.AccessDenied:
            denied.append(attr.replace("_bytes", ""))
            continue
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            proc.problem = "exited while being read"
            break
        except (psutil.Error, OSError) as exc:
            denied.append(f"{attr} ({type(exc).__name__})")
            continue
        if attr == "cmdline":
            value = mask_cmdline(value)
        setattr(proc, attr, value)
    if denied and proc.problem is None:
        proc.problem = "no permission to read its " + ", ".join(denied) + " (another user's process; run as root to see it)"
    if proc.cmdline is not None and proc.problem is None:
        proc.start = server_start(pid, proc.cmdline, proc.name or "")
    return proc


# -- what bounds a known server beyond its command line ------------------------------------------------------
ENVIRON_KEPT = 64  # variables kept of one server's environment (the ones that bound a server)


def _proc(pid: int, *parts: str) -> str:
    """``/proc/PID/...`` (under ``$SPARK_GOTCHAS_SYS_ROOT`` where that is set)."""
    return os.path.join(_root(), "proc", str(pid), *parts)


def _why_not(exc: BaseException, what: str) -> str:
    """Why ``what`` of another process could not be read, in a few words."""
    if isinstance(exc, PermissionError):
        return f"no permission to read its {what} (another user's process; run as root to read it)"
    if isinstance(exc, FileNotFoundError):
        return f"no {what} (it exited, or no such file as the process sees it)"
    if isinstance(exc, bounded_read.Refused):
        return f"its {what} not read: {exc}"
    return f"its {what} not read: {getattr(exc, 'strerror', None) or exc}"


def read_environ(pid: int) -> tuple[Optional[dict[str, str]], dict[str, str], Optional[str]]:
    """(the variables that bound a server, masked; every variable, to find its Python and never recorded;
    why it was not read). ``/proc/PID/environ`` is the environment the process started with."""
    try:
        data = bounded_read.read_bytes(_proc(pid, "environ"), bounded_read.PROCESS_ENVIRONMENT)
    except (OSError, bounded_read.Refused) as exc:
        return None, {}, _why_not(exc, "environment")
    every: dict[str, str] = {}
    for item in data.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq and key:
            every[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    kept = [(k, v[:SHOWN_VALUE_CHARS]) for k, v in sorted(every.items()) if workloads.bounds_a_server(k)]
    return scrub.scrub_env(dict(kept[:ENVIRON_KEPT])), every, None


def read_config(pid: int, path: str) -> ServerConfig:
    """A config file as the process ``pid`` named it: under its own root (absolute) or working folder
    (relative), through the one way in, its secret-looking values masked."""
    if not path or "\0" in path:
        return ServerConfig(path=path, error="no path after the option")
    if scrub.MASK in path:
        return ServerConfig(path=path, error="its path holds a masked value: not read")
    where = _proc(pid, "root", path.lstrip("/")) if path.startswith("/") else _proc(pid, "cwd", path)
    refused = owner_may_not_read(pid, where)
    if refused:
        return ServerConfig(path=path, error=refused)
    try:
        text = bounded_read.read_text(where, bounded_read.SERVER_CONFIG)
    except PermissionError:
        return ServerConfig(path=path, error="no permission (another user's process; run as root to read it)")
    except FileNotFoundError:
        return ServerConfig(path=path, error="no such file as the process sees it")
    except (OSError, bounded_read.Refused) as exc:
        return ServerConfig(path=path, error=str(getattr(exc, "strerror", None) or exc))
    return ServerConfig(path=path, text=yaml_safe_mask(scrub.mask_text(text)))


def _ids(pid: int) -> Optional[tuple[int, set[int]]]:
    """(effective uid, every gid) of ``pid`` from /proc/PID/status; None when unreadable."""
    try:
        with open(_proc(pid, "status"), "rb") as fh:
            text = fh.read(16384).decode("ascii", "replace")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        uid = int(fields["Uid"].split()[1])
        gids = {int(g) for g in fields["Gid"].split()[:2] + fields.get("Groups", "").split()}
    except (KeyError, IndexError, ValueError):
        return None
    return uid, gids


def owner_may_not_read(pid: int, where: str) -> Optional[str]:
    """Why the owner of ``pid`` could not read ``where`` (None: it could): a run as root reads a config
    only where the server's own user could, so a command line naming another user's file (``--config
    /etc/shadow``) puts nothing of it in a report."""
    ids = _ids(pid)
    try:
        info = os.stat(where)
    except OSError:
        return None  # the read says why
    if ids is None:
        return None if info.st_mode & 0o004 else "its owner's rights could not be read: not read"
    uid, gids = ids
    if uid == 0:
        return None
    bit = 0o400 if info.st_uid == uid else 0o040 if info.st_gid in gids else 0o004
    return None if info.st_mode & bit else "its own user may not read it: not read"


_BARE_MASK = re.compile(r"(?<![\w*\"'])" + re.escape(scrub.MASK) + r"(?![\w*])")


def yaml_safe_mask(text: str) -> str:
    """A masked value that begins a YAML scalar quoted (``api-key: "***"``): bare, ``***`` reads as an
    alias and the whole file would no longer parse."""
    return _BARE_MASK.sub(f'"{scrub.MASK}"', text)


def _prefixes(pid: int, argv: list[str], every: dict[str, str]) -> list[str]:
    """Where the process's Python may keep its packages, most telling first: its virtual environment,
    the folder its interpreter or script lies in, the interpreter /proc/PID/exe names."""
    out = [every.get("VIRTUAL_ENV", ""), every.get("CONDA_PREFIX", "")]
    out += [os.path.dirname(os.path.dirname(t)) for t in argv[:3] if t.startswith("/") and "/bin/" in t]
    try:
        exe = os.readlink(_proc(pid, "exe"))
    except OSError:
        exe = ""
    if exe.startswith("/") and "/bin/" in exe:
        out.append(os.path.dirname(os.path.dirname(exe)))
    if "/usr" in out:  # Debian's Python looks in /usr/local too
        out.append("/usr/local")
    return list(dict.fromkeys(p for p in out if p.startswith("/")))


def read_version(pid: int, argv: list[str], every: dict[str, str], dist: str) -> tuple[Optional[str], Optional[str],
                                                                                        Optional[str]]:
    """(version, the dist-info it came from, why none was read): ``DIST-VERSION.dist-info`` beside the
    process's Python, looked for under its own root (``/proc/PID/root``, so a container's counts)."""
    looked = []
    for prefix in _prefixes(pid, argv, every):
        lib = os.path.join(_proc(pid, "root"), prefix.lstrip("/"), "lib")
        try:
            pythons = sorted(n for n in os.listdir(lib) if n.startswith("python3"))[:8]
        except PermissionError as exc:
            return None, None, _why_not(exc, "file system")
        except OSError:
            continue
        for python in pythons:
            for site in ("site-packages", "dist-packages"):
                folder = os.path.join(lib, python, site)
                try:
                    names = os.listdir(folder)
                except OSError:
                    continue
                looked.append(os.path.join(prefix, "lib", python, site))
                for name in sorted(names):
                    low = name.lower()
                    if low.startswith(f"{dist}-") and low.endswith(".dist-info"):
                        return name[len(dist) + 1:-len(".dist-info")][:64], os.path.join(looked[-1], name), None
    where = ", ".join(looked[:3]) if looked else "no Python library folder found for it"
    return None, None, f"no {dist}-*.dist-info ({where})"


def server_start(pid: int, argv: list[str], name: str) -> Optional[ServerStart]:
    """What bounds a known server beyond its command line; None for anything else."""
    workload = classify(argv, name)
    if workload is None or workload.role != "server":
        return None
    start = ServerStart()
    start.environ, every, start.environ_error = read_environ(pid)
    start.configs = [read_config(pid, path) for path in workloads.config_paths(argv, name, every)[:4]]
    dist = workloads.distribution(argv, name) or ("vllm" if workload.kind == "vllm" and workload.engine else
                                                 "sglang" if workload.kind == "sglang" and workload.engine else None)
    if dist:
        start.version, start.version_from, start.version_error = read_version(pid, argv, every, dist)
    return start


def scan(psutil: Any, skip: set[int]) -> tuple[list[GpuProcess], int, int]:
    """Every process whose command line is a known server or trainer: (found, read, denied)."""
    found: list[GpuProcess] = []
    read = denied = 0
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        info = p.info
        if info.get("pid") in skip:
            continue
        argv = info.get("cmdline")
        if argv is None:
            denied += 1
            continue
        read += 1
        if classify(argv, info.get("name") or "") is not None:
            found.append(describe(psutil, info["pid"]))
    return found, read, denied


@reader("gpu.processes")
def read_processes(ctx: ReadContext) -> GpuProcesses:
    """NVML's GPU process lists, each GPU's use as a whole, and the known servers/trainers among all
    command lines."""
    return collect(own_on_gpu=ctx.own_on_gpu())


def collect(psutil: Any = None, query: Callable[..., Any] = nvml.query,
            handles: Callable[[], list] = nvml.device_handles, init: Callable[[], Any] = nvml.init,
            self_pid: Optional[int] = None, own_on_gpu: Optional[int] = None) -> GpuProcesses:
    """The whole reading; the arguments let tests stand in for psutil and NVML. ``own_on_gpu``: how
    many of this run's processes may hold a GPU context now (0 before it used the GPU)."""
    error, devices, rows = nvml_rows(query, handles, init)
    out = GpuProcesses(nvml_error=error, devices=devices, own_on_gpu=own_on_gpu,
                       cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    if psutil is None:
        try:
            import psutil
        except ImportError:
            psutil = None
    own: set[int] = set()
    if psutil is None:
        out.scan_error = "psutil is not installed: no command lines, no owners"
    else:
        own = own_tree(psutil, self_pid)
    by_pid: dict[int, GpuProcess] = {}
    for pid, row in sorted(rows.items()):
        if pid in own:
            out.own_excluded += 1
            continue
        proc = describe(psutil, pid) if psutil is not None else GpuProcess(pid=pid)
        proc.gpu_memory_bytes, proc.gpu_devices, proc.nvml_lists = row["memory"], row["devices"], row["lists"]
        by_pid[pid] = proc
    if psutil is not None:
        try:
            found, out.scanned, out.scan_denied = scan(psutil, own)
        except (psutil.Error, OSError) as exc:
            out.scan_error = f"could not list processes: {exc}"
            found = []
        for proc in found:
            if proc.pid in by_pid:
                by_pid[proc.pid].found_by = "nvml+scan"
            else:
                proc.found_by = "scan"
                by_pid[proc.pid] = proc
    out.processes = [by_pid[pid] for pid in sorted(by_pid)]
    count_listed(devices, rows, own, {pid for pid, proc in by_pid.items() if not proc.visible and pid in rows})
    return out
