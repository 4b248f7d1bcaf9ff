"""The GPU side of a watched job, through NVML only (no CUDA context of the watch's own): the device's
clocks, power, temperature and throttle evidence each sample, and the processes on it.

The device is the one the job calls ``cuda:0`` (the first of its ``CUDA_VISIBLE_DEVICES``, found as
G4's readers find it). Each sample reads it as G4 does (:func:`take_sample`: one NVML call per
figure, each bounded by :mod:`spark_gotchas.machine.nvml`); nvidia-smi's finer counters (SW and HW thermal
slowdown, HW power brake) once a minute, since each read starts a process. The processes: NVML's
compute and graphics lists every sample, the job's own (its whole tree) left out; a pid seen for
the first time is described once (its command line, masked, and owner: G6's reader's
:func:`describe`), and the device's memory figures are read with the lists now and then, so memory
that no listed process holds (another container's) shows. Check by hand: ``nvidia-smi
--query-compute-apps=pid,process_name,used_memory --format=csv -l 1``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from ..knowledge.readings.gpu import DeviceProcessLists, GpuProcess, GpuProcesses
from ..knowledge.readings.thermal import ThermalSample
from . import nvml
from .readers.gpu import describe, device_use
from .readers.thermal.snapshot import cuda0_handle, smi_counters, snapshot_of, take_sample

SMI_EVERY_S = 60.0
USE_EVERY_S = 10.0
LISTS = (("compute", "nvmlDeviceGetComputeRunningProcesses"), ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"))


class GpuProbe:
    """One NVML device, read each sample; ``error`` says why there is none."""

    def __init__(self, cuda_visible_devices: Optional[str] = None):
        self.error = ""
        self.handle: Any = None
        self.index: Optional[int] = None
        self.name: Optional[str] = None
        self.max_sm_clock_mhz: Optional[float] = None
        self.power_limit_w: Optional[float] = None
        self._next_smi = time.monotonic() + SMI_EVERY_S  # the snapshot below read them already
        self._smi_off = False
        self._next_use = 0.0
        self._use = None
        self._use_pids: set[int] = set()  # the pids listed when the device's figures were read
        self._described: dict[int, GpuProcess] = {}
        try:
            import psutil

            self._psutil: Any = psutil
        except ImportError:
            self._psutil = None
        reason = nvml.init()
        if reason is not None:
            self.error = reason.reason
            return
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        if cuda_visible_devices is not None:  # the attached job's, not the watch's
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        try:
            self.handle, self.index, how = cuda0_handle()
        finally:
            if cuda_visible_devices is not None:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
        if self.handle is None:
            self.error = f"no NVML device for cuda:0 ({how})"
            return
        static = snapshot_of(self.handle, self.index, how)
        self.name, self.max_sm_clock_mhz, self.power_limit_w = static.name, static.max_sm_clock_mhz, static.power_limit_w
        self.first_counters = dict(static.counters.values_us)

    def sample(self, t0: float) -> tuple[ThermalSample, dict[str, float]]:
        """(NVML's figures, nvidia-smi's counters when read this time: sw_thermal, hw_thermal, hw_power_brake)."""
        if self.handle is None:
            return ThermalSample(t_s=time.time() - t0), {}
        base = take_sample(self.handle, t0)
        counters: dict[str, float] = {}
        if not self._smi_off and time.monotonic() >= self._next_smi:
            self._next_smi = time.monotonic() + SMI_EVERY_S
            found, why = smi_counters(self.index)
            if why and "not found" in why:
                self._smi_off = True
            counters = {k: v for k, v in found.items() if v is not None}
        return base, counters

    def lists(self, job: set[int]) -> tuple[Optional[GpuProcesses], dict[int, Optional[int]]]:
        """(the GPU's other processes as G6's judge reads them, the job's own pids -> their GPU memory);
        (None, {}) without a device."""
        if self.handle is None:
            return None, {}
        dev = DeviceProcessLists(index=self.index or 0)
        rows: dict[int, dict] = {}
        for list_name, func in LISTS:
            procs = nvml.query(func, self.handle)
            if isinstance(procs, nvml.NotAvailable):
                dev.errors[list_name] = procs.reason
                continue
            for proc in procs or []:
                row = rows.setdefault(int(proc.pid), {"memory": None, "lists": []})
                used = getattr(proc, "usedGpuMemory", None)
                if used is not None:
                    row["memory"] = max(row["memory"] or 0, int(used))
                row["lists"].append(list_name)
        now = time.monotonic()
        # the device's figures are read again whenever the lists change: a process that left took its
        # memory with it, and figures read while it was there, beside lists without it, would show that
        # memory held by no listed process (a process outside this container, for the 10 s until the next read)
        if now >= self._next_use or set(rows) != self._use_pids:
            self._next_use = now + USE_EVERY_S
            self._use = device_use(self.handle)
            self._use_pids = set(rows)
        dev.use = self._use
        mine = {pid: row["memory"] for pid, row in rows.items() if pid in job}
        out = GpuProcesses(devices=[dev], own_excluded=len(mine), own_on_gpu=len(job),
                           cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                           nvml_error=None if len(dev.errors) < len(LISTS) else "; ".join(dev.errors.values()))
        for pid, row in sorted(rows.items()):
            if pid in job:
                continue
            known = self._described.get(pid)
            if known is None:
                known = describe(self._psutil, pid) if self._psutil is not None else GpuProcess(pid=pid)
                self._described[pid] = known
            proc = GpuProcess(**{**known.__dict__, "gpu_memory_bytes": row["memory"], "gpu_devices": [dev.index],
                                 "nvml_lists": row["lists"]})
            out.processes.append(proc)
        if dev.use is not None:
            dev.use.listed = len(rows)
            known_memory = [row["memory"] for row in rows.values()]
            dev.use.listed_bytes = sum(known_memory) if None not in known_memory and not dev.errors else None
            dev.use.own_listed = len(mine)
            dev.use.not_visible = sum(1 for p in out.processes if not p.visible)
        for pid in [p for p in self._described if p not in rows]:
            del self._described[pid]  # gone: a later process with its pid is described anew
        return out, mine
