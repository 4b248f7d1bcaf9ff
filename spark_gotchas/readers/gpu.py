"""NVML inventory: driver, CUDA driver version, and each GPU's static facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .. import nvml
from . import ReadContext, reader


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
    memory_total_bytes: Optional[int] = None
    memory_used_bytes: Optional[int] = None
    memory_free_bytes: Optional[int] = None
    bus_width_bits: Optional[int] = None
    max_memory_clock_mhz: Optional[int] = None
    max_sm_clock_mhz: Optional[int] = None
    power_limit_mw: Optional[int] = None
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
