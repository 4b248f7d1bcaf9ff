"""NVML inventory: driver, CUDA driver version, and each GPU's static facts."""

from __future__ import annotations

from .. import nvml
from ..readings.gpu import GpuDevice, GpuInventory
from . import ReadContext, reader


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
