"""Reading types of ``spark-gotchas watch`` (G3, G4, G6 over a user's own run): one sample a tick, the
events its states made, the processes seen on the GPU, how the job ended, and the heartbeat the next
watch reads.

Command line equivalent of a sample: ``nvidia-smi --query-gpu=temperature.gpu,power.draw,clocks.sm,
clocks.mem,utilization.gpu,clocks_event_reasons.active --format=csv -l 1`` beside ``grep -E
'MemAvailable|MemFree|Cached|Dirty|Swap' /proc/meminfo; cat /proc/pressure/memory`` and the job's
``ps -o rss= --ppid PID``; of the processes: ``nvidia-smi --query-compute-apps=pid,used_memory
--format=csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import (
    Bytes,
    Celsius,
    Count,
    Epoch,
    Fraction,
    IntEpoch,
    MHz,
    Microseconds,
    Percent,
    Seconds,
    Watts,
)

HEARTBEAT_FORMAT = "spark-gotchas-watch-heartbeat"


@dataclass
class WatchSample:
    """One tick of the watch. None = not read (no NVML, no cgroup limit, no rate printed this tick)."""

    t_s: Seconds  # since the watch started
    epoch_s: Epoch
    temperature_c: Optional[Celsius] = None
    power_w: Optional[Watts] = None
    sm_clock_mhz: Optional[MHz] = None
    mem_clock_mhz: Optional[MHz] = None
    utilization_pct: Optional[Percent] = None
    reasons_mask: Optional[int] = None
    sw_power_cap_us: Optional[Microseconds] = None  # NVML violation status, cumulative
    thermal_us: Optional[Microseconds] = None
    sw_thermal_us: Optional[Microseconds] = None  # nvidia-smi's split, read now and then
    hw_thermal_us: Optional[Microseconds] = None
    hw_power_brake_us: Optional[Microseconds] = None
    job_gpu_memory_bytes: Optional[Bytes] = None  # what NVML lists for the job's processes
    gpu_others: Optional[Count] = None  # other processes NVML lists on the GPU (None: lists not read)
    mem_total_bytes: Optional[Bytes] = None
    mem_available_bytes: Optional[Bytes] = None
    mem_free_bytes: Optional[Bytes] = None
    page_cache_bytes: Optional[Bytes] = None  # Buffers + Cached - Shmem
    dirty_bytes: Optional[Bytes] = None
    swap_used_bytes: Optional[Bytes] = None
    psi_some_avg10: Optional[Percent] = None  # /proc/pressure/memory
    psi_full_avg10: Optional[Percent] = None
    cgroup_limit_bytes: Optional[Bytes] = None  # the job's memory cgroup (None: no limit)
    cgroup_used_bytes: Optional[Bytes] = None  # its working set: usage minus inactive file pages
    job_rss_bytes: Optional[Bytes] = None  # RSS summed over the job's process tree (shared pages counted per process)
    job_processes: Optional[Count] = None
    rate: Optional[float] = None  # the last rate the log printed in this tick
    watch_rss_bytes: Optional[Bytes] = None
    job_stopped: bool = False  # the job was stopped (Ctrl-Z, SIGSTOP) at this tick

    @property
    def busy(self) -> Optional[float]:
        return None if self.utilization_pct is None else self.utilization_pct / 100.0


@dataclass
class WatchEvent:
    """A state that began (and maybe ended) during the run, or an instant (an OOM kill)."""

    gotcha: int
    status: str  # FAIL, WARN or INFO
    kind: str  # low_memory, cgroup, page_cache, oom_kill, throttle, stuck, rate_drop, gpu_process, outside
    start_s: Seconds
    text: str  # the finding as the onset line said it
    end_s: Optional[Seconds] = None  # None: it lasted to the end of the run
    end_text: str = ""
    key: str = ""  # which state of its kind (a pid for gpu_process)
    cause: str = ""  # rate_drop: "throttle", "gpu_process" or "none"
    sign: str = ""  # what showed it, in a few words ("SW thermal slowdown active")
    pid: Optional[int] = None
    figures: dict[str, float] = field(default_factory=dict)  # the numbers the line quoted

    def seconds(self, elapsed_s: float) -> float:
        end = elapsed_s if self.end_s is None else self.end_s
        return max(0.0, end - self.start_s)


@dataclass
class WatchProcess:
    """Another process on the watched GPU, as G6 judged it when it was seen."""

    pid: int
    label: str  # "pid 5123 vLLM"
    first_s: Seconds
    last_s: Seconds
    status: str  # what G6's judge said of the GPU with it there: FAIL, WARN or PASS
    summary: str = ""  # G6's finding then
    fix: str = ""
    cap: str = ""  # "no memory cap", "--gpu-memory-utilization 0.5"
    held_bytes: Optional[Bytes] = None
    before_job: bool = False  # already on the GPU when the watch began
    gone: bool = False  # it left the GPU before the end


@dataclass
class JobEnd:
    """How the job ended (or that it was still running when the watch stopped)."""

    how: str = ""  # "exited 0", "killed by SIGKILL", "still running (watch interrupted)"
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    oom_kill: bool = False  # the kernel's OOM killer killed the job or one of its processes
    oom_evidence: str = ""  # what says so: a kernel log line, the cgroup's oom_kill counter
    oom_pid: Optional[int] = None
    t_s: Optional[Seconds] = None


@dataclass
class WatchReading:
    """A whole watched run: what G3, G4 and G6 are judged from at its end (and by a replay)."""

    mode: str  # "child" (watch -- CMD) or "attach" (watch --pid N)
    command: list[str] = field(default_factory=list)  # credentials masked
    job_pid: Optional[int] = None
    started_epoch: Optional[Epoch] = None
    elapsed_s: Seconds = 0.0
    every_s: Seconds = 1.0
    samples: Count = 0
    stopped_s: Seconds = 0.0  # time the job spent stopped
    rate_regex: str = ""
    rate_unit: str = ""  # what the log writes beside the rate ("it/s", "tokens/s")
    rate_values: Count = 0
    rate_first: Optional[float] = None
    rate_reference: Optional[float] = None  # the highest rolling median: what a fall is measured from
    rate_last: Optional[float] = None
    max_drop_fraction: Fraction = 0.10
    device: Optional[str] = None
    gpu_index: Optional[int] = None
    nvml_error: str = ""
    max_sm_clock_mhz: Optional[MHz] = None
    power_limit_w: Optional[Watts] = None
    sm_clock_busy_min_mhz: Optional[MHz] = None  # while the GPU was busy (80 % or more)
    sm_clock_busy_max_mhz: Optional[MHz] = None
    temperature_max_c: Optional[Celsius] = None
    power_max_w: Optional[Watts] = None
    mem_total_bytes: Optional[Bytes] = None
    lowest_available_bytes: Optional[Bytes] = None
    lowest_available_s: Optional[Seconds] = None
    swap_used_max_bytes: Optional[Bytes] = None
    cgroup_limit_bytes: Optional[Bytes] = None
    job_rss_max_bytes: Optional[Bytes] = None
    job_gpu_memory_max_bytes: Optional[Bytes] = None
    events: list[WatchEvent] = field(default_factory=list)
    others: list[WatchProcess] = field(default_factory=list)
    lists_error: str = ""  # NVML could not list the GPU's processes
    end: JobEnd = field(default_factory=JobEnd)
    previous: list[str] = field(default_factory=list)  # what the start said of earlier watched runs
    sampler_busy_s: Seconds = 0.0
    sampler_errors: Count = 0
    sampler_last_error: str = ""
    watch_cpu_s: Seconds = 0.0  # the watch's own CPU time, user + system
    watch_rss_max_bytes: Optional[Bytes] = None
    csv_path: str = ""
    png_path: str = ""
    plot_note: str = ""
    notes: list[str] = field(default_factory=list)  # what could not be read, once each


@dataclass
class WatchHeartbeat:
    """A watch's record of itself, rewritten as it runs: a reboot or a kill leaves one without an end."""

    boot_id: Optional[str]
    btime_s: Optional[IntEpoch]
    watch_pid: int
    host: str
    started_epoch: Epoch
    last_sample_epoch: Epoch
    command: list[str] = field(default_factory=list)
    job_pid: Optional[int] = None
    out_dir: str = ""
    samples: Count = 0
    ended_epoch: Optional[Epoch] = None
    end_reason: Optional[str] = None  # how the job ended, once the watch ended under control
    oom_kill: bool = False
    format: str = HEARTBEAT_FORMAT


@dataclass
class EarlierWatch:
    """One heartbeat an earlier watch left in the state folder: a watch killed, a reboot under it, or a
    job the kernel's OOM killer ended (a watch whose job ended by itself removes its heartbeat)."""

    path: str
    heartbeat: Optional[WatchHeartbeat] = None
    problem: str = ""  # why the file cannot be used (then ``heartbeat`` is None)
    watch_alive: bool = False  # this boot's, and its watch's process runs: a watch running now


@dataclass
class EarlierWatches:
    """The heartbeats earlier watches left, beside this boot's id and start, for the preflight's G3 and
    G4. By hand: ``ls ~/.local/state/spark-gotchas/watch-*.json; cat /proc/sys/kernel/random/boot_id``."""

    state_dir: str
    boot_id: Optional[str] = None
    btime_s: Optional[IntEpoch] = None
    watches: list[EarlierWatch] = field(default_factory=list)
    problem: str = ""  # the folder exists but cannot be listed
