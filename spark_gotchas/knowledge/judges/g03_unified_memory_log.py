"""G3 — memory that already ran out since boot, as the kernel log says it.

On a Spark the GPU allocates from the one system pool: when it runs dry the driver logs
``NV_ERR_NO_MEMORY`` (``nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] …
_memdescAllocInternal``, which preceded whole-host wedges that needed a power cycle,
NVIDIA/open-gpu-kernel-modules#1358) or the OOM killer kills a process
(``Out of memory: Killed process 4242 (python)``), often with nothing in the program's own log.

Rules:

Memory that ran out since boot (`test_g3_kernel_log`, `kernel.log`, the reading G1's kernel log
check reads):
- the log unreadable → **SKIP** naming why (`kernel.dmesg_restrict`, the journal's groups).
- the driver's `NV_ERR_NO_MEMORY` since boot → **WARN** naming how many and when the last came;
  fix: plan the next run for the memory left (G3) and cap or stop what else holds memory
  (G6); if the host stopped answering after it, power-cycle it.
- the OOM killer killed a process since boot → **WARN** naming the last one killed (pid, name) and
  how many; the same fix.
- neither → **PASS** naming the source and how many lines were read; **INFO** where no NVIDIA driver
  ran since boot (no `NVRM:` line): nothing is said of a GPU's memory on a machine without one.
- a watched run the kernel's OOM killer ended (`watch.earlier`: the heartbeat its watch left,
  marked; the same reading G4's "last watch" check reads) → **WARN** naming the run and when, the
  same fix; none → **PASS**; no heartbeat, or the state folder unlistable → **SKIP**.
- a replayed snapshot recorded before this check (it holds no `kernel.log`: the check's `reads`
  marker) leaves the check out, so that its G3 line stays what it was.
"""

from __future__ import annotations

from ...base.units import utc
from ..profiles import Profile
from ..readings import remedies
from ..readings.kernel import KernelEvent, KernelLog
from ..readings.watch import EarlierWatches
from ..verdict import Status, Verdict, fitting

G = 3
FIX_RAN_OUT = ("plan the next run for the memory that is left (spark-gotchas -m fast --spark-model-gb N judges a "
               "plan against it) and cap or stop what else holds memory (G6 names it)")


def _when(event: KernelEvent) -> str:
    return f" at {event.uptime_s:.0f} s after boot" if event.uptime_s is not None else ""


def judge_kernel_memory(log: KernelLog, profile: Profile) -> Verdict:
    readings = {"source": log.source, "read": log.read, "lines": log.lines, "events": dict(log.event_counts),
                "truncated": log.truncated}
    if not log.read:
        restrict = " (kernel.dmesg_restrict = 1)" if log.dmesg_restrict == 1 else ""
        why = "; ".join(f"{k}: {v}" for k, v in log.tried.items()) or "no source tried"
        return Verdict(G, Status.SKIP, f"kernel log unreadable here{restrict}: no out-of-memory line could be "
                                       "looked for", detail=why, readings=readings)
    no_memory = [e for e in log.events if e.kind == "nv_err_no_memory"]
    killed = [e for e in log.events if e.kind == "oom_kill"]
    n_memory = log.event_counts.get("nv_err_no_memory", len(no_memory))
    n_killed = log.event_counts.get("oom_kill", len(killed))
    power = remedies.power_cycle(profile.key == "gb10")
    if no_memory or killed:
        parts, detail = [], []
        if no_memory:
            many = f" x{n_memory}" if n_memory > 1 else ""
            parts.append(f"NV_ERR_NO_MEMORY{many}")
            detail.append(f"last{_when(no_memory[-1])}: {no_memory[-1].text}")
        if killed:
            last = killed[-1]
            who = f"{last.process} (pid {last.pid})" if last.process else f"pid {last.pid}"
            parts.append(f"OOM killer killed {who}" + (f" +{n_killed - 1} more" if n_killed > 1 else ""))
            detail.append(f"last kill{_when(last)}: {last.text}")
        summary = fitting(G, Status.WARN, f"memory ran out since boot: {', '.join(parts)}",
                          f"memory ran out since boot: {parts[0]}",
                          "memory ran out since boot (the kernel log says so)")
        fix = FIX_RAN_OUT + ("; if the host stopped answering after it, " + power.text if no_memory else "")
        return Verdict(G, Status.WARN, summary, detail=f"{log.source}: " + "; ".join(detail), fix=fix,
                       readings={**readings, "remedy": [remedies.Change("measure", "mem.meminfo").to_json()]})
    cut = "; the read stopped at its bound: older lines may be missing" if log.truncated else ""
    if not log.nvrm_lines:  # no GPU driver ran: nothing to say of the GPU's memory
        return Verdict(G, Status.INFO, f"no out-of-memory line in the kernel log since boot, and no NVIDIA driver ran "
                                       f"({log.source}, {log.lines} lines)", detail=cut[2:], readings=readings)
    return Verdict(G, Status.PASS, f"no out-of-memory line in the kernel log since boot ({log.source}, "
                                   f"{log.lines} lines)", detail=cut[2:], readings=readings)


def judge_watched_oom(reading: EarlierWatches) -> Verdict:
    """Did the kernel's OOM killer end a watched run? The heartbeat its watch left says so."""
    readings = {"state_dir": reading.state_dir, "heartbeats": [w.path for w in reading.watches]}
    if reading.problem:
        return Verdict(G, Status.SKIP, "earlier watches' heartbeats cannot be read", detail=reading.problem,
                       readings=readings)
    killed = [w.heartbeat for w in reading.watches if w.heartbeat is not None and w.heartbeat.oom_kill]
    if killed:
        beat = killed[-1]
        shown = " ".join(beat.command[:3]) + (" …" if len(beat.command) > 3 else "")
        when = utc(beat.ended_epoch or beat.last_sample_epoch)
        more = f" (+{len(killed) - 1} more)" if len(killed) > 1 else ""
        summary = fitting(G, Status.WARN, f"the OOM killer ended the watched run `{shown}` at {when}{more}",
                          f"the OOM killer ended a watched run at {when}{more}",
                          "the OOM killer ended a watched run")
        files = f"; its files: {beat.out_dir}" if beat.out_dir else ""
        return Verdict(G, Status.WARN, summary,
                       detail=f"`{' '.join(beat.command)}` started {utc(beat.started_epoch)}, job pid {beat.job_pid}"
                              f"{files}; the next spark-gotchas watch says so once and removes its record in "
                              f"{reading.state_dir}", fix=FIX_RAN_OUT,
                       readings={**readings, "remedy": [remedies.Change("measure", "mem.meminfo").to_json()]})
    if not reading.watches:
        return Verdict(G, Status.SKIP, "no earlier watch recorded: nothing to check for an OOM kill",
                       detail=f"no heartbeat in {reading.state_dir}", readings=readings)
    return Verdict(G, Status.PASS, "no watched run was ended by the OOM killer",
                   detail=f"{len(reading.watches)} heartbeat(s) earlier watches left in {reading.state_dir}",
                   readings=readings)
