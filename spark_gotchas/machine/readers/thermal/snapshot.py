"""GPU temperature, power, clocks and throttle evidence: one sample, the counters, the at-rest snapshot.

Everything NVML goes through :func:`spark_gotchas.machine.nvml.query`, so a value the driver does not
report (GB10's power limit, an old driver's counters) is None with the reason, never an error.

Two kinds of throttle evidence are read, because on GB10 the active mask can read 0 while the
clocks are being capped:
- the *active* clock-event reasons (a bit mask, now);
- the *cumulative* counters (time spent in each reason since the driver loaded). NVML's
  violation status gives power and thermal totals cheaply (used at every sample); the finer
  split (SW/HW thermal, HW power brake) comes from ``nvidia-smi -q -d PERFORMANCE``, read
  only now and then because it starts a process.

Key: ``thermal.snapshot``; its types are in :mod:`spark_gotchas.knowledge.readings.thermal`.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import Any, Optional

from ....base.procs import run_bounded
from ....knowledge.readings.thermal import ClockCounters, ThermalSample, ThermalSnapshot
from ... import nvml
from .. import ReadContext, reader

# ``nvidia-smi -q -d PERFORMANCE`` labels in the "Clocks Event Reasons Counters" section.
_SMI_COUNTER_LABELS = {
    "sw power capping": "sw_power_cap",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal",
    "hw thermal slowdown": "hw_thermal",
    "hw power braking": "hw_power_brake",
}
SMI_TIMEOUT_S = 10.0


# -- device selection ----------------------------------------------------------------------
def cuda0_handle() -> tuple[Any, Optional[int], str]:
    """NVML handle, NVML index and how it was chosen, for the device torch calls ``cuda:0``.

    The first ``CUDA_VISIBLE_DEVICES`` entry (an index or a ``GPU-…`` UUID) when set, else 0.
    (CUDA's default order is fastest-first; on mixed-GPU hosts set CUDA_DEVICE_ORDER=PCI_BUS_ID.)
    """
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        handle = nvml.query("nvmlDeviceGetHandleByUUID", first)
        if nvml.is_na(handle):
            return None, None, f"CUDA_VISIBLE_DEVICES={first}: {handle}"
        index = nvml.query("nvmlDeviceGetIndex", handle)
        return handle, None if nvml.is_na(index) else int(index), f"CUDA_VISIBLE_DEVICES={first}"
    index, how = 0, "index 0"
    if first.isdigit():
        index, how = int(first), f"CUDA_VISIBLE_DEVICES={first}"
    handle = nvml.query("nvmlDeviceGetHandleByIndex", index)
    if nvml.is_na(handle):
        return None, index, f"{how}: {handle}"
    return handle, index, how


# -- one sample ----------------------------------------------------------------------------
def _num(value: Any, scale: float = 1.0) -> Optional[float]:
    return None if nvml.is_na(value) else float(value) * scale


def _reasons(handle: Any) -> Any:
    value = nvml.query("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if nvml.is_na(value):  # drivers before the rename only have the old name
        older = nvml.query("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        if not nvml.is_na(older):
            return older
    return value


def _violation_us(handle: Any, policy: int) -> Any:
    value = nvml.query("nvmlDeviceGetViolationStatus", handle, policy)
    if nvml.is_na(value):
        return value
    return float(value.violationTime) / 1000.0  # ns -> µs


def take_sample(handle: Any, t0: float, reasons: Optional[dict[str, str]] = None) -> ThermalSample:
    """One sample of ``handle`` (time relative to ``t0``, a ``time.time()``); NA values -> None.

    ``reasons`` (optional) collects why each missing field is missing.
    """
    if nvml.module() is None or handle is None:
        return ThermalSample(t_s=time.time() - t0)
    values = {
        "temperature_c": nvml.query("nvmlDeviceGetTemperature", handle, nvml.const("NVML_TEMPERATURE_GPU")),
        "power_w": nvml.query("nvmlDeviceGetPowerUsage", handle),
        "sm_clock_mhz": nvml.query("nvmlDeviceGetClockInfo", handle, nvml.const("NVML_CLOCK_SM")),
        "mem_clock_mhz": nvml.query("nvmlDeviceGetClockInfo", handle, nvml.const("NVML_CLOCK_MEM")),
        "utilization_pct": nvml.query("nvmlDeviceGetUtilizationRates", handle),
        "reasons_mask": _reasons(handle),
        "sw_power_cap_us": _violation_us(handle, nvml.const("NVML_PERF_POLICY_POWER")),
        "thermal_us": _violation_us(handle, nvml.const("NVML_PERF_POLICY_THERMAL")),
    }
    if reasons is not None:
        reasons.update({k: v.reason for k, v in values.items() if isinstance(v, nvml.NotAvailable)})
    util = values["utilization_pct"]
    return ThermalSample(
        t_s=time.time() - t0,
        temperature_c=_num(values["temperature_c"]),
        power_w=_num(values["power_w"], 1e-3),  # mW -> W
        sm_clock_mhz=_num(values["sm_clock_mhz"]),
        mem_clock_mhz=_num(values["mem_clock_mhz"]),
        utilization_pct=None if nvml.is_na(util) else float(util.gpu),
        reasons_mask=None if nvml.is_na(values["reasons_mask"]) else int(values["reasons_mask"]),
        sw_power_cap_us=_num(values["sw_power_cap_us"]),
        thermal_us=_num(values["thermal_us"]),
    )


# -- counters ------------------------------------------------------------------------------
def parse_smi_counters(text: str) -> dict[str, Optional[float]]:
    """The "Clocks Event Reasons Counters" block of ``nvidia-smi -q -d PERFORMANCE``, in µs.

    Older drivers title it "Clocks Throttle Reasons Counters"; ``N/A`` values become None.
    """
    out: dict[str, Optional[float]] = {}
    inside = False
    indent = 0
    for line in text.splitlines():
        stripped = line.strip()
        if re.match(r"clocks? (event|throttle) reasons? counters", stripped, re.I):
            inside, indent = True, len(line) - len(line.lstrip())
            continue
        if not inside or not stripped:
            continue
        if len(line) - len(line.lstrip()) <= indent:
            break
        label, _, value = stripped.partition(":")
        key = _SMI_COUNTER_LABELS.get(label.strip().lower())
        if key is None:
            continue
        match = re.match(r"\s*(\d+)\s*us", value)
        out[key] = float(match.group(1)) if match else None
    return out


def smi_counters(index: Optional[int]) -> tuple[dict[str, Optional[float]], Optional[str]]:
    """Run ``nvidia-smi -q -d PERFORMANCE -i <index>``; (counters, why not) — never raises.

    Bounded by ``SMI_TIMEOUT_S``: a hung nvidia-smi is killed with everything it started."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}, "nvidia-smi not found"
    cmd = [exe, "-q", "-d", "PERFORMANCE"] + (["-i", str(index)] if index is not None else [])
    run = run_bounded(cmd, SMI_TIMEOUT_S)
    if not run.ok:
        return {}, run.problem
    counters = parse_smi_counters(run.stdout)
    if not counters:
        return {}, "nvidia-smi printed no clock event reason counters"
    return counters, None


def read_counters(handle: Any, index: Optional[int], use_smi: bool = True) -> ClockCounters:
    """Every cumulative counter this machine gives: NVML's violation status, then nvidia-smi's split.

    nvidia-smi's figure wins for the power cap when both exist (it is the one users quote).
    """
    counters = ClockCounters()
    loaded = nvml.module() is not None
    if loaded and handle is not None:
        for key, policy in (("sw_power_cap", nvml.const("NVML_PERF_POLICY_POWER")), ("thermal", nvml.const("NVML_PERF_POLICY_THERMAL"))):
            value = _violation_us(handle, policy)
            if nvml.is_na(value):
                counters.unavailable[f"nvml.{key}"] = value.reason
            else:
                counters.values_us[key] = value
                counters.sources[key] = "nvml"
    elif not loaded:
        reason = nvml.init()
        counters.unavailable["nvml"] = reason.reason if reason else "no device handle"
    if use_smi:
        found, why = smi_counters(index)
        if why:
            counters.unavailable["nvidia-smi"] = why
        for key, value in found.items():
            if value is None:
                counters.unavailable.setdefault(f"nvidia-smi.{key}", "N/A")
                continue
            counters.values_us[key] = value
            counters.sources[key] = "nvidia-smi"
    return counters


# -- the at-rest snapshot --------------------------------------------------------------------
@reader("thermal.snapshot")
def read_snapshot(ctx: ReadContext) -> ThermalSnapshot:
    """Temperature, power, clocks, active reasons and cumulative counters of cuda:0, at rest."""
    reason = nvml.init()
    if reason is not None:
        return ThermalSnapshot(nvml_error=reason.reason)
    handle, index, how = cuda0_handle()
    if handle is None:
        late = nvml.init()  # the handle's call hung: NVML is unavailable now, not the device missing
        why = late.reason if late is not None else f"no NVML device ({how})"
        return ThermalSnapshot(nvml_error=why, index=index, selected_by=how)
    return snapshot_of(handle, index, how)


def snapshot_of(handle: Any, index: Optional[int], how: str = "") -> ThermalSnapshot:
    """The snapshot of one device (also taken at the start of a soak for its static figures)."""
    missing: dict[str, str] = {}
    sample = take_sample(handle, time.time(), missing)
    static = {
        "name": nvml.query("nvmlDeviceGetName", handle),
        "power_limit_w": nvml.query("nvmlDeviceGetEnforcedPowerLimit", handle),
        "max_sm_clock_mhz": nvml.query("nvmlDeviceGetMaxClockInfo", handle, nvml.const("NVML_CLOCK_SM")),
        "max_mem_clock_mhz": nvml.query("nvmlDeviceGetMaxClockInfo", handle, nvml.const("NVML_CLOCK_MEM")),
        "slowdown_temp_c": nvml.query("nvmlDeviceGetTemperatureThreshold", handle,
                                      nvml.const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN")),
        "shutdown_temp_c": nvml.query("nvmlDeviceGetTemperatureThreshold", handle,
                                      nvml.const("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN")),
    }
    clean, why = nvml.split(static)
    missing.update(why)
    return ThermalSnapshot(
        index=index,
        selected_by=how,
        name=clean["name"],
        sample=sample,
        power_limit_w=_num(clean["power_limit_w"], 1e-3),  # mW -> W
        max_sm_clock_mhz=_num(clean["max_sm_clock_mhz"]),
        max_mem_clock_mhz=_num(clean["max_mem_clock_mhz"]),
        slowdown_temp_c=_num(clean["slowdown_temp_c"]),
        shutdown_temp_c=_num(clean["shutdown_temp_c"]),
        counters=read_counters(handle, index),
        unavailable=missing,
    )
