"""G1 — what the NVIDIA driver logged since boot: a GPU that fell off the bus, kernels that faulted.

A GPU the driver lost runs nothing until the machine is power-cycled, though a check that only
asks NVML may see a device; a program whose kernel faulted (an illegal address, a kernel built for
another GPU) leaves an Xid line and nothing else. Which Xid means what comes from NVIDIA's Xid
catalogue (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): its "immediate
action" says whether the GPU (RESET_GPU, RESTART_BM) or the application (RESTART_APP) is at fault.

Rules:

The kernel log since boot (`test_g1_kernel_log`, `kernel.log`: `/dev/kmsg`, else `journalctl -k -b`,
else `dmesg`, each bounded):
- none of the three readable → **SKIP** naming why each gave nothing (`kernel.dmesg_restrict = 1`
  keeps the ring buffer from users; the journal shows kernel lines to root and the `adm` and
  `systemd-journal` groups), with how to read it by hand.
- an Xid whose catalogue action is to reset the GPU or restart the machine — 79 (GPU has fallen off
  the bus), 62 (internal micro-controller halt), 119 and 120 (GSP timeout, GSP error), 154 (GPU
  recovery action changed), 48, 95 and 140 (uncorrected ECC) → **FAIL** naming the Xid, when it came
  (seconds since boot) and what the catalogue calls it (the driver's "has fallen off the bus and is
  not responding to commands" without an Xid counts as 79); fix: a full power cycle (on a Spark: shut
  down, unplug AC power for about 60 s, boot), and if it comes back, the GPU's power and cooling
  (G4) and NVIDIA support.
- an Xid the catalogue puts on the application — 13 (graphics engine exception), 31 (GPU memory
  page fault), 43 (GPU stopped processing), 8, 11, 69 — → **WARN** naming the Xid, how many, the last
  process (pid, name); fix: re-run that program with `CUDA_LAUNCH_BLOCKING=1` (or under
  `compute-sanitizer`) to find the faulting kernel, and read G1's extension line: kernels built for
  another GPU or CUDA fault like this.
- Xid 45 (preemptive cleanup after an earlier error, which the catalogue says to ignore) and other
  Xids → **INFO** listing them.
- no Xid since boot → **PASS** naming the source and how many lines were read; a read cut at its
  bound says older lines may be missing. No line of the NVIDIA driver at all (no `NVRM:`: no GPU
  driver ran since boot) → **INFO** saying so, never a PASS about a GPU that is not there.
- a replayed snapshot recorded before this check (it holds no `kernel.log`: the check's `reads`
  marker) leaves the check out, so that its G1 line stays what it was.
"""

from __future__ import annotations

from ..profiles import Profile
from ..readings import remedies
from ..readings.kernel import KernelLog, XidEvent
from ..verdict import Status, Verdict, fitting

G = 1
# NVIDIA's Xid catalogue: the GPU must be reset or the machine restarted (RESET_GPU, RESTART_BM)
GPU_LOST = {79: "GPU has fallen off the bus", 62: "internal micro-controller halt", 119: "GSP RPC timeout",
            120: "GSP error", 154: "GPU recovery action changed", 48: "double-bit ECC error",
            95: "uncontained ECC error", 140: "unrecovered ECC error"}
# the application is at fault (RESTART_APP)
APP_FAULT = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
             8: "GPU stopped processing", 11: "invalid or corrupted push buffer stream", 69: "graphics engine class error"}
LOST_SHORT = {79: "the GPU fell off the bus", 62: "the GPU's micro-controller halted", 119: "the GPU's GSP timed out",
              120: "the GPU's GSP failed", 154: "the GPU asks for a recovery action", 48: "uncorrected ECC error",
              95: "uncorrected ECC error", 140: "uncorrected ECC error"}
IGNORED = {45: "preemptive cleanup after an earlier error"}
FIX_APP_FAULT = ("re-run the program that faulted with CUDA_LAUNCH_BLOCKING=1 (or under compute-sanitizer) to find "
                 "the kernel that faults, and read G1's extension line: a kernel built for another GPU or CUDA "
                 "faults like this")
HOW_TO_READ = ("sudo dmesg | grep -E 'NVRM|Xid', or journalctl -k -b as a member of the adm or systemd-journal "
               "group")


def _when(event: XidEvent) -> str:
    return f" at {event.uptime_s:.0f} s after boot" if event.uptime_s is not None else ""


def _who(event: XidEvent) -> str:
    if event.pid is None and not event.process:
        return ""
    return f" (pid {event.pid}{' ' + event.process if event.process else ''})" if event.pid is not None else \
        f" ({event.process})"


def lost_fix(profile: Profile) -> remedies.Remedy:
    """A full power cycle: the machine's, as the catalogue's RESTART_BM asks (a Spark's GPU is not reset alone)."""
    return remedies.power_cycle(profile.key == "gb10")


def judge_kernel_log(log: KernelLog, profile: Profile) -> Verdict:
    readings = {"source": log.source, "read": log.read, "tried": dict(log.tried), "lines": log.lines,
                "nvrm_lines": log.nvrm_lines, "xid_counts": dict(log.xid_counts), "truncated": log.truncated,
                "dmesg_restrict": log.dmesg_restrict}
    if not log.read:
        why = "; ".join(f"{k}: {v}" for k, v in log.tried.items()) or "no source tried"
        restrict = " (kernel.dmesg_restrict = 1)" if log.dmesg_restrict == 1 else ""
        return Verdict(G, Status.SKIP, f"kernel log unreadable here{restrict}: no Xid line could be looked for",
                       detail=f"{why}; by hand: {HOW_TO_READ}", readings=readings)
    by_xid: dict[int, list[XidEvent]] = {}
    for event in log.xids:
        by_xid.setdefault(event.xid, []).append(event)
    counts = {int(k): v for k, v in log.xid_counts.items() if k.isdigit()}
    cut = "; the read stopped at its bound: older lines may be missing" if log.truncated else ""
    lost = sorted(x for x in counts if x in GPU_LOST)
    off_bus = [e for e in log.events if e.kind == "fallen_off_bus"]
    if off_bus and 79 not in counts:  # "has fallen off the bus and is not responding", said without an Xid
        counts[79] = log.event_counts.get("fallen_off_bus", len(off_bus))
        by_xid[79] = [XidEvent(79, text=e.text, uptime_s=e.uptime_s) for e in off_bus]
        lost = sorted(set(lost) | {79})
    if lost:
        xid = 79 if 79 in lost else lost[0]
        last = by_xid.get(xid, [XidEvent(xid)])[-1]
        many = f" (x{counts[xid]})" if counts[xid] > 1 else ""
        remedy = lost_fix(profile)
        what = LOST_SHORT.get(xid, GPU_LOST[xid])
        summary = fitting(G, Status.FAIL, f"{what} (Xid {xid}{many}){_when(last)}: it runs nothing until a power cycle",
                          f"{what} (Xid {xid}{many}): it runs nothing until a power cycle")
        others = [f"Xid {x} x{counts[x]} ({GPU_LOST.get(x) or APP_FAULT.get(x) or 'see the catalogue'})"
                  for x in sorted(counts) if x != xid]
        return Verdict(G, Status.FAIL, summary,
                       detail=f"{log.source}: Xid {xid} ({GPU_LOST[xid]}): {last.text or GPU_LOST[xid]}" + (
                           f"; also {', '.join(others)}"
                                                                             if others else "") + cut,
                       fix=remedy.text, readings={**readings, "remedy": remedies.changes_json(remedy.changes)})
    faults = sorted(x for x in counts if x in APP_FAULT)
    if faults:
        last = max((e for x in faults for e in by_xid.get(x, [])), key=lambda e: e.uptime_s or 0.0,
                   default=XidEvent(faults[0]))
        listed = ", ".join(f"Xid {x} x{counts[x]}" if counts[x] > 1 else f"Xid {x}" for x in faults)
        who = f", last{_who(last)}" if _who(last) else ""
        summary = fitting(G, Status.WARN, f"a CUDA program faulted on the GPU since boot: {listed}{who}",
                          f"a CUDA program faulted on the GPU since boot: {listed}",
                          f"CUDA programs faulted since boot: {len(faults)} kinds of Xid")
        also = [f"Xid {x} x{n} ({IGNORED.get(x, 'see the catalogue')})" for x, n in sorted(counts.items())
                if x not in APP_FAULT]
        detail = "; ".join(f"Xid {x} ({APP_FAULT[x]}) x{counts[x]}" for x in faults) + \
            f"; the last{_when(last)}{_who(last)}: {last.text}" + (f"; also {', '.join(also)}" if also else "") + cut
        return Verdict(G, Status.WARN, summary, detail=detail, fix=FIX_APP_FAULT,
                       readings={**readings, "remedy": [remedies.Change("measure", "CUDA_LAUNCH_BLOCKING", "1")
                                                        .to_json()]})
    if counts:
        listed = ", ".join(f"Xid {x} x{n} ({IGNORED.get(x, 'see the catalogue')})" for x, n in sorted(counts.items()))
        return Verdict(G, Status.INFO, fitting(G, Status.INFO, f"kernel log since boot: {listed}",
                                               f"kernel log since boot: {len(counts)} kinds of Xid, none a fault"),
                       detail=f"{log.source}, {log.lines} lines{cut}", readings=readings)
    if not log.nvrm_lines:
        return Verdict(G, Status.INFO, f"the NVIDIA driver logged nothing since boot ({log.source}, {log.lines} "
                                       "lines): no GPU driver ran here", detail=cut[2:], readings=readings)
    return Verdict(G, Status.PASS, f"no Xid in the kernel log since boot ({log.source}, {log.lines} lines)",
                   detail=cut[2:], readings=readings)

