"""The G4 soak's engine: plan a soak, run it, return what it measured (it never judges).

- The load (``spark_gotchas.microbench.soak_load:run``) runs in the GPU worker and reports each
  window's throughput through progress messages.
- A sampler thread in this process reads NVML every second (nvidia-smi's counters every
  10 s) and appends each sample to the CSV at once (:mod:`spark_gotchas.runtime.soak.record`); it also
  rewrites the heartbeat the next run's reboot check reads.
- SIGINT/SIGTERM stop the load (``Worker.interrupt()``); the run then closes the CSV and returns
  what it measured, marked as cut short. A second Ctrl-C aborts at once (the CSV keeps every
  sample so far).
- About once a minute a progress line goes to the terminal (past pytest's capture):
  elapsed/remaining, temperature, power, clock, throughput and drift from the first window.

The check judges the reading (:func:`spark_gotchas.knowledge.judges.g04_thermal.judge_soak`), then
:func:`spark_gotchas.outputs.soak_finish.finish` draws the PNG titled with the verdict and names the files.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ...base.units import hms, pct
from ...knowledge.readings.thermal import DEFAULT_MAX_DROP, SoakReading, SoakWindow
from ...machine import nvml
from ...machine.readers import ReadContext
from ...machine.readers.thermal.reboot import heartbeat_path, new_heartbeat
from ...machine.readers.thermal.snapshot import cuda0_handle, smi_counters, snapshot_of, take_sample
from ...machine.readers.thermal.spot_check import no_cuda_reason
from ...machine.sampler import Sampler
from .record import Recorder, SoakSample, downsample, drop_fraction, format_meta

LOAD_TASK = "spark_gotchas.microbench.soak_load:run"
LOAD_TIMEOUT_MARGIN_S = 300.0  # torch/cuBLAS start-up and the last window, beyond the duration
MAX_DROP_ENV = "SPARK_GOTCHAS_SOAK_MAX_DROP"


def window_for(duration_s: float) -> float:
    """Load window length: 5 s up to 10 min, then duration/120 up to 60 s; short test runs less."""
    if duration_s < 20:
        return max(0.25, duration_s / 4)
    return min(60.0, max(5.0, duration_s / 120))


def max_drop_fraction(environ: Optional[dict[str, str]] = None) -> tuple[float, str]:
    """The throughput fall that fails a soak: ``SPARK_GOTCHAS_SOAK_MAX_DROP`` (``0.1`` or ``10%``)."""
    text = (environ if environ is not None else os.environ).get(MAX_DROP_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_DROP, ""
    try:
        return drop_fraction(text), ""
    except ValueError as exc:
        return DEFAULT_MAX_DROP, f"{MAX_DROP_ENV}={exc}; using {DEFAULT_MAX_DROP:.0%}"


def _rss_bytes() -> Optional[int]:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


@dataclass
class SoakPlan:
    duration_s: float
    soak_dir: Path
    stem: str = field(default_factory=lambda: time.strftime("g4-soak-%Y%m%d-%H%M%S"))
    window_s: float = 0.0
    sample_interval_s: float = 1.0
    progress_every_s: float = 60.0
    max_drop_fraction: float = DEFAULT_MAX_DROP
    load_task: str = LOAD_TASK
    load_args: dict[str, Any] = field(default_factory=lambda: {"device": "cuda", "dtype": "bf16"})

    def __post_init__(self) -> None:
        self.soak_dir = Path(self.soak_dir).expanduser().resolve()
        if not self.window_s:
            self.window_s = window_for(self.duration_s)

    @property
    def csv_path(self) -> Path:
        return self.soak_dir / f"{self.stem}.csv"

    @property
    def heartbeat_path(self) -> Path:
        return heartbeat_path(str(self.soak_dir))


class SampleSource:
    """One soak sample: NVML through :func:`take_sample`, nvidia-smi's counters every ``smi_every_s``."""

    def __init__(self, handle: Any, index: Optional[int], t0: float, smi_every_s: float = 10.0,
                 smi: Optional[Callable[[Optional[int]], tuple[dict, Optional[str]]]] = smi_counters):
        self.handle, self.index, self.t0 = handle, index, t0
        self.smi = smi if handle is not None else None
        self.smi_every_s = smi_every_s
        self.smi_note = ""
        self._next_smi = 0.0

    def __call__(self) -> SoakSample:
        base = take_sample(self.handle, self.t0)
        sample = SoakSample(**dataclasses.asdict(base), epoch_s=self.t0 + base.t_s, parent_rss_bytes=_rss_bytes())
        now = time.monotonic()
        if self.smi is not None and now >= self._next_smi:
            self._next_smi = now + self.smi_every_s
            counters, why = self.smi(self.index)
            if why and "not found" in why:
                self.smi = None  # no nvidia-smi here: stop trying
            self.smi_note = why or ""
            sample.sw_thermal_us = counters.get("sw_thermal")
            sample.hw_thermal_us = counters.get("hw_thermal")
            sample.hw_power_brake_us = counters.get("hw_power_brake")
            if sample.sw_power_cap_us is None:
                sample.sw_power_cap_us = counters.get("sw_power_cap")
        return sample


class SignalGuard:
    """SIGINT/SIGTERM while active: the first calls ``on_signal(name)``; a second SIGINT aborts.

    Off the main thread (where Python cannot install handlers) it does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, on_signal: Callable[[str], None]):
        self.on_signal = on_signal
        self.received: Optional[str] = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self.received = signal.Signals(signum).name
        self.on_signal(self.received)

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()


def _v(value: Optional[float], fmt: str, unit: str) -> str:
    return "N/A" if value is None else f"{value:{fmt}}{unit}"


class ProgressLines:
    """Says a line for the first window, then at most once per ``every_s``."""

    def __init__(self, say: Callable[[str], None], planned_s: float, every_s: float):
        self.say, self.planned_s, self.every_s = say, planned_s, every_s
        self.first: Optional[SoakWindow] = None
        self._next = 0.0

    def window(self, w: SoakWindow) -> None:
        figures = (f"{_v(w.temperature_max_c, '.0f', ' °C')}, {_v(w.power_mean_w, '.0f', ' W')}, "
                   f"SM {_v(w.sm_clock_median_mhz, '.0f', ' MHz')}, {_v(w.tflops, '.1f', ' TFLOP/s')}")
        if self.first is None:
            self.first = w
            self._next = w.t_end_s + self.every_s
            self.say(f"G4 soak {hms(w.t_end_s)} / {hms(self.planned_s)}: first window {figures} "
                     "(drift is measured against it)")
            return
        if w.t_end_s < self._next:
            return
        self._next = w.t_end_s + self.every_s
        drift = ""
        if self.first.tflops and w.tflops is not None:
            drift = f" ({pct(w.tflops / self.first.tflops - 1)} vs first window)"
        left = max(0.0, self.planned_s - w.t_end_s)
        self.say(f"G4 soak {hms(w.t_end_s)} / {hms(self.planned_s)} ({hms(left)} left): {figures}{drift}")


def how_it_ended(result: Any, received: Optional[str]) -> str:
    """The soak's end reason from the load's result and the signal received (None: none). A load
    that ran its whole duration ended ``completed`` even when a signal came as it finished: only
    one that stopped early for it (``stopped_early``) was cut short."""
    if not result.ok:
        return f"load failed: {result.problem}"
    stopped = bool(result.value.get("stopped_early", True)) if isinstance(result.value, dict) else True
    return f"cut short by {received}" if received and stopped else "completed"


def run_soak(worker: Any, plan: SoakPlan, source: Callable[[], SoakSample], t0: float,
             say: Callable[[str], None], meta: dict[str, Any]) -> SoakReading:
    """Run the load for ``plan.duration_s`` while sampling; always close the CSV and heartbeat."""
    plan.soak_dir.mkdir(parents=True, exist_ok=True)
    beat = new_heartbeat(plan.duration_s, str(plan.csv_path), t0)
    meta = {"planned_s": plan.duration_s, "window_s": plan.window_s, "sample_interval_s": plan.sample_interval_s,
            "max_drop_fraction": plan.max_drop_fraction, **meta}
    recorder = Recorder(plan.csv_path, plan.heartbeat_path, beat, t0, meta)
    progress = ProgressLines(say, plan.duration_s, plan.progress_every_s)
    sampler = Sampler(source, recorder.sample, plan.sample_interval_s, "g4-soak-sampler")
    guard = SignalGuard(lambda name: worker.interrupt())
    end_reason = "aborted by an error in the soak itself"
    result = None
    first_note: list[str] = []

    def on_window(msg: dict) -> None:
        note = ""
        if not first_note:
            note = format_meta({"size": msg.get("size"), "dtype": msg.get("dtype"), "device": msg.get("device")})
            first_note.append(note)
        progress.window(recorder.window(msg, note))

    try:
        with guard:
            sampler.start()
            args = {**plan.load_args, "seconds": plan.duration_s, "window_s": plan.window_s}
            result = worker.call(plan.load_task, args, timeout=plan.duration_s + LOAD_TIMEOUT_MARGIN_S,
                                 on_progress=on_window)
        end_reason = how_it_ended(result, guard.received)
    except KeyboardInterrupt:
        end_reason = "aborted by a second SIGINT"
        raise
    finally:
        sampler.stop()
        recorder.finish(end_reason)
    value = result.value if result is not None and result.ok else {}
    windows, merged = downsample(recorder.windows)
    return SoakReading(
        attempted=True,
        planned_s=plan.duration_s,
        window_s=plan.window_s,
        sample_interval_s=plan.sample_interval_s,
        started_epoch=t0,
        elapsed_s=time.time() - t0,
        end_reason=end_reason,
        interrupted=end_reason.startswith("cut short"),
        load_problem="" if result is None or result.ok else result.problem,
        device=value.get("device") or meta.get("device"),
        size=value.get("size"),
        dtype=value.get("dtype", plan.load_args.get("dtype", "bf16")),
        max_sm_clock_mhz=meta.get("max_sm_clock_mhz"),
        power_limit_w=meta.get("power_limit_w"),
        nvml_error=meta.get("nvml_error", ""),
        max_drop_fraction=plan.max_drop_fraction,
        samples=recorder.samples,
        sampler_busy_s=sampler.busy_s,
        sampler_errors=sampler.errors,
        windows=windows,
        merged=merged,
        csv_path=str(plan.csv_path),
        heartbeat_path=str(plan.heartbeat_path),
    )


def run_soak_check(ctx: ReadContext, **overrides: Any) -> SoakReading:
    """The ``thermal.soak`` reading: check the machine, run the soak, name the CSV and heartbeat.

    ``overrides`` replace :class:`SoakPlan` fields (tests use a fake load and faster ticks).
    """
    planned = ctx.options.soak_seconds
    why = no_cuda_reason(ctx)
    if why:
        return SoakReading(attempted=False, reason=why, planned_s=planned)
    drop, drop_note = max_drop_fraction()
    if drop_note:
        ctx.say(f"G4 soak: {drop_note}")
    handle = index = None
    meta: dict[str, Any] = {}
    nvml_reason = nvml.init()
    if nvml_reason is None:
        handle, index, how = cuda0_handle()
        if handle is not None:
            static = snapshot_of(handle, index, how)
            meta = {"device": static.name, "power_limit_w": static.power_limit_w,
                    "max_sm_clock_mhz": static.max_sm_clock_mhz}
    if handle is None:
        meta["nvml_error"] = (nvml_reason.reason if nvml_reason else "no NVML device for cuda:0").replace(";", ",")
    plan = SoakPlan(**{"duration_s": planned, "soak_dir": Path(ctx.options.soak_dir), "max_drop_fraction": drop, **overrides})
    try:  # an unusable --soak-dir is a SKIP line before any load starts, not a crash
        plan.soak_dir.mkdir(parents=True, exist_ok=True)
        probe = plan.soak_dir / f".{plan.stem}.write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        return SoakReading(attempted=False, planned_s=planned,
                           reason=f"cannot write to --soak-dir {plan.soak_dir}: {exc.strerror or exc}")
    t0 = time.time()
    source = SampleSource(handle, index, t0)
    nvml_note = "" if handle is not None else f" (NVML unavailable: {nvml_reason.reason if nvml_reason else 'no device'}; throughput only)"
    ctx.say(f"G4 soak: BF16 GEMM load for {hms(planned)} on {meta.get('device') or 'cuda:0'}, sampling every "
            f"{plan.sample_interval_s:g} s into {plan.csv_path}{nvml_note}; Ctrl-C stops it and still judges")
    reading = run_soak(ctx.worker, plan, source, t0, ctx.say, meta)
    ctx.add_artifact("g4_soak_csv", str(plan.csv_path))
    ctx.add_artifact("g4_soak_heartbeat", str(plan.heartbeat_path))
    return reading
