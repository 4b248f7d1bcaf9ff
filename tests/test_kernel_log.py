"""The kernel log since boot (kernel.log): its parser on lines public reports quote, its sources
(unreadable ones say why), and the G1 and G3 judges of what the NVIDIA driver said."""

from __future__ import annotations

import os
import stat

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g01_kernel_log as g01k
from spark_gotchas.knowledge.judges import g03_unified_memory_log as g03k
from spark_gotchas.knowledge.profiles import GB10, H200
from spark_gotchas.knowledge.readings.kernel import KernelLog
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers import kernel

LOADED = (3.1, "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build")
# leptonai/gpud#46 (Xid 13, pid unknown), NVIDIA/open-gpu-kernel-modules#1151 (Xid 79),
# NVIDIA/NVSentinel#155 (fallen off the bus without an Xid), NVIDIA/open-gpu-kernel-modules#1358 (GB10)
XID13 = (3600.5, "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
                 "(GPC 7, TPC 7, SM 0): Illegal Instruction Parameter")
XID31 = (4100.0, "NVRM: Xid (PCI:000f:01:00): 31, pid=2646416, name=python, channel 0x0000001a, intr 00000000. "
                 "MMU Fault: ENGINE GRAPHICS GPC10 GPCCLIENT_T1_5 faulted @ 0x725f_fb800000. Fault is of type "
                 "FAULT_PDE ACCESS_TYPE_VIRT_READ")
XID79 = (7200.0, "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.")
OFF_BUS = [(1843.3, "NVRM: The NVIDIA GPU 0000:b3:00.0"), (1843.3, "NVRM: (PCI ID: 10de:26b5) installed in this system has"),
           (1843.3, "NVRM: fallen off the bus and is not responding to commands.")]
NO_MEMORY = (512.0, "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned "
                    "from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")
OOM = (900.0, "Out of memory: Killed process 4242 (python3) total-vm:120000000kB, anon-rss:110000000kB")


def log_of(*lines) -> KernelLog:
    log = kernel.parse(list(lines))
    log.read, log.source = True, "journalctl -k -b"
    return from_jsonable(KernelLog, to_jsonable(log))  # as a replay gives it


def test_xid_lines_are_parsed_with_their_pid_process_and_time():
    log = log_of(LOADED, XID13, XID31, XID79)
    assert log.xid_counts == {"13": 1, "31": 1, "79": 1} and log.nvrm_lines == 4
    x13, x31, x79 = log.xids
    assert (x13.pid, x13.process, x13.text.startswith("Graphics SM Warp Exception")) == (None, None, True)
    assert (x31.pid, x31.process, x31.bus, x31.uptime_s) == (2646416, "python", "PCI:000f:01:00", 4100.0)
    assert x79.text == "GPU has fallen off the bus." and x79.pid is None


def test_a_gpu_fallen_off_the_bus_fails_g1_with_a_power_cycle_on_a_spark():
    verdict = g01k.judge_kernel_log(log_of(LOADED, XID31, XID79), GB10)
    assert verdict.line == ("G1 FAIL: the GPU fell off the bus (Xid 79) at 7200 s after boot: it runs nothing until "
                            "a power cycle")
    assert verdict.fix.startswith("power-cycle the Spark fully: shut it down, unplug AC power for about 60 s")
    assert "also Xid 31 x1 (GPU memory page fault)" in verdict.detail
    assert verdict.readings["remedy"] == [{"kind": "power-cycle", "target": "machine"}]
    elsewhere = g01k.judge_kernel_log(log_of(LOADED, XID79), H200)
    assert elsewhere.fix.startswith("restart the machine (the GPU alone: nvidia-smi -r")


def test_fallen_off_the_bus_without_an_xid_counts_as_79():
    verdict = g01k.judge_kernel_log(log_of(LOADED, *OFF_BUS), GB10)
    assert verdict.status is Status.FAIL and verdict.summary.startswith("the GPU fell off the bus (Xid 79) at 1843 s")


def test_a_program_whose_kernel_faulted_is_a_g1_warn_naming_it():
    verdict = g01k.judge_kernel_log(log_of(LOADED, XID13, XID31, XID31), GB10)
    assert verdict.line == ("G1 WARN: a CUDA program faulted on the GPU since boot: Xid 13, Xid 31 x2, last "
                            "(pid 2646416 python)")
    assert verdict.fix.startswith("re-run the program that faulted with CUDA_LAUNCH_BLOCKING=1")


def test_a_clean_log_passes_and_a_machine_without_the_driver_says_so():
    assert g01k.judge_kernel_log(log_of(LOADED), GB10).line == (
        "G1 PASS: no Xid in the kernel log since boot (journalctl -k -b, 1 lines)")
    none = g01k.judge_kernel_log(log_of((1.0, "Linux version 6.17.0")), GB10)
    assert none.status is Status.INFO and "no GPU driver ran here" in none.summary


def test_an_unreadable_log_is_a_skip_saying_why_and_how_to_read_it():
    log = KernelLog(read=False, dmesg_restrict=1, tried={
        "/dev/kmsg": "permission denied (kernel.dmesg_restrict)",
        "journalctl -k -b": "no kernel lines for this boot (the journal shows them to root and to the adm and "
                            "systemd-journal groups; journald may not run here)",
        "dmesg": "dmesg: read kernel buffer failed: Operation not permitted"})
    verdict = g01k.judge_kernel_log(log, GB10)
    assert verdict.line == ("G1 SKIP: kernel log unreadable here (kernel.dmesg_restrict = 1): no Xid line could be "
                            "looked for")
    assert "sudo dmesg | grep -E 'NVRM|Xid'" in verdict.detail
    assert g03k.judge_kernel_memory(log, GB10).status is Status.SKIP


def test_the_driver_out_of_memory_and_the_oom_killer_are_a_g3_warn():
    verdict = g03k.judge_kernel_memory(log_of(LOADED, NO_MEMORY, NO_MEMORY, OOM), GB10)
    assert verdict.line == ("G3 WARN: memory ran out since boot: NV_ERR_NO_MEMORY x2, OOM killer killed python3 "
                            "(pid 4242)")
    assert verdict.fix.startswith("plan the next run for the memory that is left")
    assert "power-cycle the Spark fully" in verdict.fix
    assert g03k.judge_kernel_memory(log_of(LOADED), GB10).status is Status.PASS


def test_the_sources_say_why_they_gave_nothing(tmp_path, monkeypatch):
    lines, why, cut = kernel.read_kmsg(str(tmp_path / "absent"))
    assert (lines, why, cut) == ([], "not present", False)
    fake = tmp_path / "dmesg"
    fake.write_text("#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert kernel.read_command([str(fake)])[1] == "dmesg: read kernel buffer failed: Operation not permitted"
    fake.write_text(f"#!/bin/sh\necho '[ {XID79[0]}] {XID79[1]}'\necho 'no stamp here'\n")
    lines, why, _cut = kernel.read_command([str(fake)])
    assert lines == [XID79, (None, "no stamp here")] and why == ""
    assert kernel.read_command([str(tmp_path / "none")])[1] == "not installed"


def test_kmsg_records_are_read_one_per_read_until_the_buffer_ends():
    """/dev/kmsg as the kernel serves it: one record a read, EAGAIN at the end (here a pipe)."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"6,100,3100000,-;" + LOADED[1].encode() + b"\n")
    os.close(write_end)
    path = f"/proc/self/fd/{read_end}"
    lines, why, _ = kernel.read_kmsg(path)
    os.close(read_end)
    assert lines == [(3.1, LOADED[1])] and why == ""
