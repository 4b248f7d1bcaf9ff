"""The watch's engine: sample the machine every ``--every`` seconds while the job runs, say each state as
it begins and ends, write the CSV and the heartbeat, and return the run's reading (it never judges a
verdict: :mod:`spark_gotchas.knowledge.watch_judge` does, from what it returns).

The sampler is one thread (:class:`spark_gotchas.machine.sampler.Sampler`: a fixed grid, a slow tick is not
followed by a burst, an error in a tick is counted and never ends the watch); the job's output is
copied by another (:mod:`.stream`); the main thread waits for the job and forwards signals
(:mod:`.child`). A tick reads NVML (:mod:`.gpu`), /proc and the job's cgroup (:mod:`.host`); the
job's process tree is refound every 10 s, the kernel log only when an OOM count grew.
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ...knowledge.readings.watch import JobEnd, WatchHeartbeat, WatchReading, WatchSample
from ...knowledge.watch_judge import Context, OomHit, Tracker
from ...machine import watch_host as host
from ...machine.readers.gpu import collect
from ...machine.readers.thermal.reboot import boot_id, boot_time_s
from ...machine.sampler import Sampler
from ...machine.watch_gpu import GpuProbe
from .child import Ended, Job, signal_name
from .record import Recorder, remove_heartbeat, write_heartbeat
from .stream import RateScanner

HEARTBEAT_EVERY_S = 10.0


@dataclass
class WatchPlan:
    every_s: float
    out_dir: Path
    command: list[str]
    rate_regex: str = ""
    attach_pid: Optional[int] = None
    cuda_visible_devices: Optional[str] = None  # the job's, where it differs from the watch's
    notes: list[str] = field(default_factory=list)


class Engine:
    """Samples one job until :meth:`stop`; ``say`` gets each line to show (without the prefix)."""

    def __init__(self, plan: WatchPlan, job: Job, ctx: Context, scanner: Optional[RateScanner],
                 say: Callable[[str], None], on_tick: Optional[Callable[[Engine], None]] = None):
        self.plan, self.job, self.ctx, self.scanner, self.say, self.on_tick = plan, job, ctx, scanner, say, on_tick
        self.t0 = time.time()
        self.tracker = Tracker(ctx)
        self.last: Optional[WatchSample] = None
        self.lock = threading.Lock()
        self.reading = WatchReading(mode="attach" if plan.attach_pid else "child", command=list(plan.command),
                                    job_pid=job.pid, started_epoch=self.t0, every_s=plan.every_s,
                                    rate_regex=plan.rate_regex, max_drop_fraction=ctx.max_drop,
                                    notes=list(plan.notes))
        self.gpu = GpuProbe(plan.cuda_visible_devices)
        self.reading.device, self.reading.gpu_index = self.gpu.name, self.gpu.index
        self.reading.nvml_error = self.gpu.error
        self.reading.max_sm_clock_mhz, self.reading.power_limit_w = self.gpu.max_sm_clock_mhz, self.gpu.power_limit_w
        ctx.max_sm_clock_mhz, ctx.nvml_ok = self.gpu.max_sm_clock_mhz, not self.gpu.error
        self.tree = host.Tree(job.pid)
        self.cgroup = host.Cgroup(job.pid)
        if self.cgroup.why:
            self._note(f"no cgroup memory limit read: {self.cgroup.why}")
        self.oom_vmstat = host.vmstat_oom_kills()
        self.oom_cgroup = self.cgroup.read().oom_kills
        self.boot_s = host.uptime_s()
        self.recorder = Recorder(plan.out_dir / "watch.csv", {
            "command": " ".join(plan.command)[:2000], "pid": job.pid, "every_s": plan.every_s,
            "rate_regex": plan.rate_regex, "device": self.gpu.name, "max_sm_clock_mhz": self.gpu.max_sm_clock_mhz,
            "power_limit_w": self.gpu.power_limit_w, "nvml_error": self.gpu.error,
            "profile": ctx.profile.key, "max_drop_fraction": ctx.max_drop})
        self.reading.csv_path = str(self.recorder.path)
        self.beat = WatchHeartbeat(boot_id=boot_id(), btime_s=boot_time_s(), watch_pid=os.getpid(),
                                   host=socket.gethostname(), started_epoch=self.t0, last_sample_epoch=self.t0,
                                   command=list(plan.command), job_pid=job.pid, out_dir=str(plan.out_dir))
        why = write_heartbeat(self.beat, fsync=True)
        if why:
            self._note(why)
        self._next_beat = time.monotonic() + HEARTBEAT_EVERY_S
        self._oom_told: set[Optional[int]] = set()
        self.sampler = Sampler(self._tick_safely, lambda _: None, plan.every_s, "watch-sampler")

    # -- starting and stopping ----------------------------------------------------------------------
    def start(self) -> Engine:
        survey = None
        try:
            survey = collect(self_pid=self.job.pid, own_on_gpu=None) if not self.gpu.error else None
        except Exception as exc:  # the survey is one reading: without it the lists still follow
            self._note(f"the first survey of the GPU's processes failed: {type(exc).__name__}: {exc}")
        if survey is not None:
            survey.processes = [p for p in survey.processes if p.nvml_lists]  # scanned, not on the GPU: not in the way
            self._say_all(self.tracker.start_gpu(survey))
            for proc in self.tracker.others.values():
                proc.before_job = True
        self.sampler.start()
        return self

    def stop(self, ended: Optional[Ended]) -> WatchReading:
        """Stop sampling, take one last sample, find how the job ended; the reading of the run."""
        self.sampler.stop(timeout=30.0)
        with self.lock:
            end = self._job_end(ended)
            self.reading.end = end
            self.reading.elapsed_s = max(0.0, (ended.t if ended is not None else time.time()) - self.t0)
            if end.oom_kill and not any(e.kind == "oom_kill" and e.status == "FAIL" for e in self.tracker.events):
                self.tracker.t = end.t_s or self.reading.elapsed_s
                hit = OomHit(end.oom_pid, "", True, end.oom_evidence, job=True)
                self._say_all(self.tracker._ooms((hit,)))
            self.reading.events = self.tracker.finish()
            self.reading.others = list(self.tracker.others.values())
            self.reading.stopped_s = self.job.stopped_s
            t = self.tracker
            self.reading.rate_values, self.reading.rate_first = t.rate_values, t.rate_first
            self.reading.rate_reference, self.reading.rate_last = t.rate_reference, t.rate_now
            self.reading.sampler_busy_s, self.reading.sampler_errors = self.sampler.busy_s, self.sampler.errors
            self.reading.sampler_last_error = self.sampler.last_error or ""
            usage = resource.getrusage(resource.RUSAGE_SELF)
            self.reading.watch_cpu_s = usage.ru_utime + usage.ru_stime
            self.recorder.finish(self.reading.elapsed_s, end.how)
        self.beat.ended_epoch = time.time()
        self.beat.end_reason = end.how
        self.beat.oom_kill = end.oom_kill
        if end.oom_kill:
            write_heartbeat(self.beat, fsync=True)  # the next watch says it too
        else:
            remove_heartbeat(self.beat)
        return self.reading

    # -- one tick -------------------------------------------------------------------------------------
    def _note(self, text: str) -> None:
        if text not in self.reading.notes:
            self.reading.notes.append(text)

    def _say_all(self, lines: list[str]) -> None:
        for line in lines:
            self.say(line)
            self.recorder.event(self.tracker.t, line)

    def _tick_safely(self) -> None:
        with self.lock:
            self._tick()

    def _tick(self) -> None:
        t = time.time() - self.t0
        members = self.tree.refresh()
        gpu, smi = self.gpu.sample(self.t0)
        others, mine = self.gpu.lists(members)
        if mine.keys() - members:
            members = self.tree.refresh(force=True)
        info = host.meminfo()
        some, full = host.psi_memory()
        cg = self.cgroup.read()
        rss, read = self.tree.rss()
        rates = self.scanner.take() if self.scanner is not None else []
        if rates and not self.ctx.rate_unit and self.scanner is not None:
            self.ctx.rate_unit = self.reading.rate_unit = self.scanner.unit
        held = [m for m in mine.values() if m is not None]
        s = WatchSample(
            t_s=t, epoch_s=self.t0 + t, temperature_c=gpu.temperature_c, power_w=gpu.power_w,
            sm_clock_mhz=gpu.sm_clock_mhz, mem_clock_mhz=gpu.mem_clock_mhz, utilization_pct=gpu.utilization_pct,
            reasons_mask=gpu.reasons_mask, sw_power_cap_us=gpu.sw_power_cap_us, thermal_us=gpu.thermal_us,
            sw_thermal_us=smi.get("sw_thermal"), hw_thermal_us=smi.get("hw_thermal"),
            hw_power_brake_us=smi.get("hw_power_brake"), job_gpu_memory_bytes=sum(held) if held else None,
            gpu_others=len(others.processes) if others is not None else None,
            mem_total_bytes=info.mem_total_bytes, mem_available_bytes=info.mem_available_bytes,
            mem_free_bytes=info.mem_free_bytes, page_cache_bytes=info.page_cache_bytes if info.ok else None,
            dirty_bytes=info.dirty_bytes,
            swap_used_bytes=(info.swap_total_bytes - info.swap_free_bytes)
            if info.swap_total_bytes is not None and info.swap_free_bytes is not None else None,
            psi_some_avg10=some, psi_full_avg10=full, cgroup_limit_bytes=cg.limit_bytes, cgroup_used_bytes=cg.used_bytes,
            job_rss_bytes=rss, job_processes=read or None, rate=rates[-1] if rates else None,
            watch_rss_bytes=host.own_rss(), job_stopped=self.job.stopped)
        if not info.ok:
            self._note(f"memory not read: {info.error}")
        if others is not None and others.nvml_error:
            self.reading.lists_error = others.nvml_error
        ooms = self._ooms(cg.oom_kills, members)
        self._say_all(self.tracker.add(s, others, ooms, rates))
        self.recorder.sample(s)
        if self.recorder.failed and self.recorder.failed not in self.reading.notes:
            self._note(self.recorder.failed)
            self.say(self.recorder.failed)
        self._aggregate(s)
        self.last = s
        self.reading.samples += 1
        if time.monotonic() >= self._next_beat:
            self._next_beat = time.monotonic() + HEARTBEAT_EVERY_S
            self.beat.last_sample_epoch, self.beat.samples = s.epoch_s, self.reading.samples
            write_heartbeat(self.beat)
        if self.on_tick is not None:
            self.on_tick(self)

    def _aggregate(self, s: WatchSample) -> None:
        r = self.reading
        r.mem_total_bytes = s.mem_total_bytes or r.mem_total_bytes
        if s.mem_available_bytes is not None and (r.lowest_available_bytes is None
                                                 or s.mem_available_bytes < r.lowest_available_bytes):
            r.lowest_available_bytes, r.lowest_available_s = s.mem_available_bytes, s.t_s
        for attr, value in (("swap_used_max_bytes", s.swap_used_bytes), ("job_rss_max_bytes", s.job_rss_bytes),
                            ("job_gpu_memory_max_bytes", s.job_gpu_memory_bytes),
                            ("temperature_max_c", s.temperature_c), ("power_max_w", s.power_w),
                            ("watch_rss_max_bytes", s.watch_rss_bytes)):
            if value is not None and (getattr(r, attr) is None or value > getattr(r, attr)):
                setattr(r, attr, value)
        if s.cgroup_limit_bytes is not None:
            r.cgroup_limit_bytes = s.cgroup_limit_bytes
        if s.sm_clock_mhz is not None and s.busy is not None and s.busy >= 0.8:
            r.sm_clock_busy_min_mhz = min(s.sm_clock_mhz, r.sm_clock_busy_min_mhz or s.sm_clock_mhz)
            r.sm_clock_busy_max_mhz = max(s.sm_clock_mhz, r.sm_clock_busy_max_mhz or s.sm_clock_mhz)

    # -- OOM kills --------------------------------------------------------------------------------------
    def _ooms(self, cgroup_kills: Optional[int], members: set[int]) -> tuple[OomHit, ...]:
        vm = host.vmstat_oom_kills()
        grew = (vm is not None and self.oom_vmstat is not None and vm > self.oom_vmstat) or \
            (cgroup_kills is not None and self.oom_cgroup is not None and cgroup_kills > self.oom_cgroup)
        in_cgroup = cgroup_kills is not None and self.oom_cgroup is not None and cgroup_kills > self.oom_cgroup
        self.oom_vmstat = vm if vm is not None else self.oom_vmstat
        self.oom_cgroup = cgroup_kills if cgroup_kills is not None else self.oom_cgroup
        if not grew:
            return ()
        lines, why = host.kernel_oom_lines(self.boot_s or 0.0)
        hits = []
        for line in lines:
            if line.pid in self._oom_told:
                continue
            self._oom_told.add(line.pid)
            hits.append(OomHit(line.pid, line.name, line.pid in members or line.pid == self.job.pid, line.text,
                               job=line.pid == self.job.pid))
        if not hits:
            self._oom_told.add(None)
            evidence = "the job's cgroup counted an OOM kill" if in_cgroup else "the kernel counted an OOM kill"
            hits.append(OomHit(None, "", in_cgroup, f"{evidence} ({why or 'the kernel log names no pid'})"))
        return tuple(hits)

    def _job_end(self, ended: Optional[Ended]) -> JobEnd:
        t = self.reading.elapsed_s if ended is None else max(0.0, ended.t - self.t0)
        if ended is None:
            why = self.job.interrupted or "the watch stopped"
            return JobEnd(how=f"still running (the watching ended by {why})", t_s=t)
        if self.job.attached:
            end = JobEnd(how="ended (its exit status is its parent's to read)", t_s=t)
        else:
            end = JobEnd(how=ended.how, exit_code=ended.code, signal=ended.signal, t_s=t)
        killed = ended.signal == 9 or self.job.attached
        hits = [e for e in self.tracker.events if e.kind == "oom_kill" and e.pid in (self.job.pid, None)
                and e.status == "FAIL"]
        if not hits and killed:
            tail = self._ooms(self.cgroup.read().oom_kills, self.tree.members | {self.job.pid or -1})
            own = [h for h in tail if h.pid == self.job.pid or (h.pid is None and h.in_job)]
            if own:
                end.oom_kill, end.oom_pid, end.oom_evidence = True, own[0].pid, own[0].evidence
        else:
            own = [e for e in hits if e.pid == self.job.pid]
            if own:
                end.oom_kill, end.oom_pid, end.oom_evidence = True, own[0].pid, own[0].end_text
        if end.oom_kill and ended.signal is not None:
            end.how = f"killed by {signal_name(ended.signal)}: the kernel's OOM killer"
        return end

