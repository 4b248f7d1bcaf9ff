"""G3 counts memory already gone: swap in use, and this process's own cgroup memory limit (a
container's), read from fake cgroup trees (v2 and the v1 memory controller), from this machine's own,
and from a real v1 child cgroup where this machine lets one be made (root, the v1 memory hierarchy)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from spark_gotchas.knowledge.judges import g03_unified_memory as g03
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import GB10, H200, NONE
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.knowledge.readings.mem import CudaDeviceMemory, CudaMemory, MemCgroup
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers.mem import parse_meminfo, read_cgroup

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
# a Spark at rest (unslothai/unsloth PR #10704's baseline), then with 8 GiB of its 16 GiB swap in use
AT_REST = ("MemTotal: 127600524 kB\nMemFree: 108265472 kB\nMemAvailable: 121477530 kB\nBuffers: 0 kB\n"
           "Cached: 13254001 kB\nShmem: 0 kB\n")
SWAPPED = AT_REST + f"SwapTotal: {16 * 1024 * 1024} kB\nSwapFree: {8 * 1024 * 1024} kB\n"


def cgroup(limit: int | None, usage: int = 0, inactive: int = 0, error: str | None = None) -> MemCgroup:
    return MemCgroup(version=2, path="/", directory="/sys/fs/cgroup", limit_bytes=limit,
                     limit_file="/sys/fs/cgroup/memory.max", usage_bytes=usage, inactive_file_bytes=inactive,
                     error=error)


# -- the judge -------------------------------------------------------------------------------------------
def test_swap_in_use_is_taken_from_what_a_load_may_have():
    plain = g03.judge_headroom(parse_meminfo(AT_REST), GB10, Plan(model_gb=58))
    assert plain.line == "G3 PASS: 58 GB of weights peak at ~116.0 GB (x2); MemAvailable 124.4 GB leaves 8.4 GB to spare"
    swapped = g03.judge_headroom(parse_meminfo(SWAPPED), GB10, Plan(model_gb=58))
    assert swapped.line == "G3 FAIL: 58 GB of weights peak at ~116.0 GB (x2): 0.20 GB short of MemAvailable less swap"
    assert "8.6 GB in swap (SwapTotal - SwapFree) counts as gone" in swapped.detail
    assert swapped.readings["swap_used_bytes"] == 8 * GIB
    assert swapped.readings["usable_bytes"] == 121477530 * 1024 - 8 * GIB
    info = g03.judge_headroom(parse_meminfo(SWAPPED), GB10, Plan())
    assert info.line == "G3 INFO: MemAvailable less swap in use (115.8 GB): up to 57.9 GB of weights fit a load (x2)"


def test_a_container_limit_bounds_the_host_side_of_the_load_not_the_cuda_copy_on_a_unified_gpu():
    info = parse_meminfo(AT_REST)
    room = cgroup(64 * GIB, usage=34_000_000_000, inactive=4_000_000_000)  # working set 30 GB: 38.7 GB left
    fits = g03.judge_headroom(info, GB10, Plan(model_gb=38), cgroup=room)
    assert fits.status is Status.PASS  # 38 GB of page cache fit; the 38 GB CUDA copy is the pool's
    assert fits.detail.endswith("; the container's room covers the load's host side (~38.0 GB)")
    short = g03.judge_headroom(info, GB10, Plan(model_gb=50), cgroup=room)
    assert short.line == "G3 FAIL: 50 GB of weights need ~50.0 GB of host memory; the container's limit leaves 38.7 GB"
    assert short.fix.startswith("give this container a memory limit of at least 80.0 GB")
    assert short.readings["cgroup_room_bytes"] == 64 * GIB - 30_000_000_000


def test_a_limit_above_memtotal_or_none_bounds_nothing_and_an_unreadable_one_is_said():
    info = parse_meminfo(AT_REST)
    plain = g03.judge_headroom(info, GB10, Plan(model_gb=50))
    for cg in (cgroup(None), cgroup(1 << 50)):
        assert g03.judge_headroom(info, GB10, Plan(model_gb=50), cgroup=cg).line == plain.line
    unread = g03.judge_headroom(info, GB10, Plan(model_gb=50), cgroup=cgroup(None, error="cannot read the cgroup: "
                                                                                           "Permission denied"))
    assert unread.line == plain.line
    assert "container memory limit unknown (cannot read the cgroup: Permission denied)" in unread.detail


def test_a_discrete_gpu_in_a_container_needs_the_host_side_in_the_container():
    info = parse_meminfo("MemTotal: 131961788 kB\nMemFree: 127727824 kB\nMemAvailable: 130566320 kB\n"
                         "Buffers: 0 kB\nCached: 3014644 kB\nShmem: 0 kB\n")
    cuda = CudaMemory(attempted=True, devices=[CudaDeviceMemory(0, "NVIDIA H200", 149_345_665_024, 150_109_880_320,
                                                                False)])
    room = cgroup(64 * GIB, usage=3_000_000_000, inactive=1_000_000_000)
    v = g03.judge_headroom(info, H200, Plan(model_gb=70), cuda, cgroup=room)
    assert v.line == "G3 FAIL: the load's host side (~70.0 GB) exceeds the container's 66.7 GB left: 3.3 GB short"
    assert v.fix.startswith("give this container a memory limit of at least 72.0 GB")
    ok = g03.judge_headroom(info, H200, Plan(model_gb=60), cuda, cgroup=room)
    assert ok.status is Status.PASS and "the container's 66.7 GB left cover the load's host side (~60.0 GB)" in ok.detail


def test_with_no_gpu_the_whole_load_is_charged_to_the_container():
    info = parse_meminfo("MemTotal: 24683772 kB\nMemFree: 21800000 kB\nMemAvailable: 23599148 kB\nBuffers: 0 kB\n"
                         "Cached: 1560000 kB\nShmem: 0 kB\n")
    v = g03.judge_headroom(info, NONE, Plan(model_gb=3), cgroup=cgroup(5 * GIB, usage=120_000_000))
    assert v.line == "G3 FAIL: 3 GB of weights need ~6.0 GB of host memory; the container's limit leaves 5.2 GB"
    assert v.detail.startswith("with no GPU the whole load (~6.0 GB) is host memory, charged to this container")


# -- the reader, on fake trees -----------------------------------------------------------------------------
def v2_tree(tmp_path: Path, own: str, files: dict[str, str], root: str = "/") -> tuple[str, str]:
    mount = tmp_path / "cgroup"
    for rel, text in files.items():
        (mount / rel).parent.mkdir(parents=True, exist_ok=True)
        (mount / rel).write_text(text)
    (mount / own.lstrip("/")).mkdir(parents=True, exist_ok=True)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"25 30 0:26 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n"
                         f"32 25 0:27 {root} {mount} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n")
    proc = tmp_path / "cgroup.self"
    proc.write_text(f"0::{own}\n")
    return str(proc), str(mountinfo)


def test_v2_the_tightest_limit_of_the_cgroup_and_its_ancestors(tmp_path):
    proc, mounts = v2_tree(tmp_path, "/system.slice/docker-abc.scope", {
        "system.slice/memory.max": f"{32 * GIB}\n",
        "system.slice/docker-abc.scope/memory.max": f"{64 * GIB}\n",
        "system.slice/docker-abc.scope/memory.current": "3000000000\n",
        "system.slice/docker-abc.scope/memory.stat": "anon 2000000000\nfile 1000000000\ninactive_file 600000000\n",
        "system.slice/docker-abc.scope/memory.swap.max": "max\n",
        "system.slice/docker-abc.scope/memory.swap.current": "0\n"})
    cg = read_cgroup(proc, mounts)
    assert (cg.version, cg.path, cg.error) == (2, "/system.slice/docker-abc.scope", None)
    assert cg.limit_bytes == 32 * GIB and cg.limit_file.endswith("system.slice/memory.max")
    assert (cg.usage_bytes, cg.inactive_file_bytes, cg.swap_limit_bytes) == (3_000_000_000, 600_000_000, None)
    assert cg.room_bytes == 32 * GIB - 2_400_000_000


def test_v2_inside_a_container_its_own_cgroup_is_the_mount_root(tmp_path):
    """Docker's private cgroup namespace: /proc/self/cgroup is 0::/ and /sys/fs/cgroup is the container's."""
    proc, mounts = v2_tree(tmp_path, "/", {"memory.max": f"{64 * GIB}\n", "memory.current": "1000\n",
                                           "memory.stat": "inactive_file 0\n"}, root="/")
    cg = read_cgroup(proc, mounts)
    assert (cg.limit_bytes, cg.usage_bytes, cg.directory) == (64 * GIB, 1000, str(tmp_path / "cgroup"))


def test_v2_a_mount_rooted_at_the_cgroup_itself(tmp_path):
    """--cgroupns=host with the container's cgroup mounted at /sys/fs/cgroup: its path lies under the mount's root."""
    proc, mounts = v2_tree(tmp_path, "/docker/aa86ac98", {"memory.max": "max\n", "memory.current": "5\n"},
                           root="/docker/aa86ac98")
    cg = read_cgroup(proc, mounts)
    assert (cg.limit_bytes, cg.usage_bytes, cg.error) == (None, 5, None)


def test_v1_the_memory_controller_and_its_hierarchical_limit(tmp_path):
    mount = tmp_path / "memory"
    (mount / "job").mkdir(parents=True)
    (mount / "job" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    (mount / "job" / "memory.usage_in_bytes").write_text("4000000\n")
    (mount / "job" / "memory.stat").write_text("cache 10\nhierarchical_memory_limit 1073741824\n"
                                               "total_inactive_file 1000000\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"41 31 0:38 / {tmp_path}/unified rw,relatime - cgroup2 cgroup2 rw\n"
                         f"35 31 0:32 / {mount} rw,relatime - cgroup cgroup rw,memory\n")
    proc = tmp_path / "self"
    proc.write_text("9:name=systemd:/\n4:memory:/job\n0::/\n")
    cg = read_cgroup(str(proc), str(mountinfo))
    assert (cg.version, cg.limit_bytes, cg.usage_bytes, cg.inactive_file_bytes) == (1, GIB, 4_000_000, 1_000_000)
    assert cg.limit_file.endswith("memory.stat (hierarchical_memory_limit)")


def test_a_tree_that_cannot_be_read_is_said_in_the_reading(tmp_path):
    assert read_cgroup(str(tmp_path / "none"), str(tmp_path / "no-mountinfo")).error.endswith(
        "not found: no cgroup file system to read")
    mounts = tmp_path / "mountinfo"
    mounts.write_text("25 30 0:26 / /sys rw - sysfs sysfs rw\n")
    assert read_cgroup(str(tmp_path / "none"), str(mounts)).error.startswith("no cgroup memory controller mounted")
    proc, mounts2 = v2_tree(tmp_path / "gone", "/a/b", {})
    os.rmdir(tmp_path / "gone" / "cgroup" / "a" / "b")
    cg = read_cgroup(proc, mounts2)
    assert cg.error.endswith("not found: this cgroup is not visible here") and cg.limit_bytes is None


# -- the reader, on this machine ---------------------------------------------------------------------------
def test_this_machines_own_cgroup_is_read_or_the_reason_given():
    cg = read_cgroup()
    assert cg.error or cg.version in (1, 2), cg
    if not cg.error:
        assert cg.directory and os.path.isdir(cg.directory)


V1 = Path("/sys/fs/cgroup/memory")


@pytest.mark.skipif(not (V1.is_dir() and os.access(V1, os.W_OK)), reason="needs root and the v1 memory hierarchy")
def test_a_real_v1_cgroup_with_a_limit_is_read_from_inside_it():
    child = V1 / f"spark-gotchas-test-{uuid.uuid4().hex[:8]}"
    child.mkdir()
    try:
        (child / "memory.limit_in_bytes").write_text(str(3 * GIB))
        code = ("import json, os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
                "from spark_gotchas.machine.readers.mem import read_cgroup; from spark_gotchas.base.serial import to_jsonable; "
                "print(json.dumps(to_jsonable(read_cgroup())))")
        run = subprocess.run(["sh", "-c", f'echo $$ > {shlex.quote(str(child / "cgroup.procs"))} && exec "$0" -c "$1" "$2"', sys.executable,
                              code, str(child / "cgroup.procs")], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert run.returncode == 0, run.stderr
        seen = json.loads(run.stdout)
        assert seen["version"] == 1 and seen["limit_bytes"] == 3 * GIB and seen["path"] == f"/{child.name}"
        assert seen["usage_bytes"] > 0 and seen["error"] is None
    finally:
        child.rmdir()


def test_an_inventory_of_another_gpu_is_no_spoiler_of_a_unified_pools_headroom():
    """The headroom of a unified pool weighs MemTotal and MemAvailable only: NVML's device memory spoils the
    memory view that reads it, not this check."""
    inventory = GpuInventory(devices=[GpuDevice(0, "NVIDIA GB10", capability=(12, 1), memory_total_bytes=400 * 10**9)])
    v = g03.judge_headroom(parse_meminfo(AT_REST), GB10, Plan(model_gb=20), None, inventory)
    assert v.status is Status.PASS
    view = g03.judge_gpu_memory_view(parse_meminfo(AT_REST), GB10, inventory, None)
    assert view.line == "G3 WARN: NVML device memory 400.0 GB: not a GB10 reading; memory not judged"


@pytest.mark.skipif(not (V1.is_dir() and os.access(V1, os.W_OK)), reason="needs root and the v1 memory hierarchy")
def test_the_checks_run_inside_a_real_2_gib_cgroup_fail_a_load_it_cannot_hold(tmp_path):
    child = V1 / f"spark-gotchas-test-{uuid.uuid4().hex[:8]}"
    child.mkdir()
    try:
        (child / "memory.limit_in_bytes").write_text(str(2 * GIB))
        report = tmp_path / "report.json"
        run = subprocess.run(["sh", "-c", f'echo $$ > {shlex.quote(str(child / "cgroup.procs"))} && exec "$@"', "sh", sys.executable, "-m",
                              "pytest", "-m", "fast", "-k", "g3_load_headroom", "-p", "no:cacheprovider",
                              "--spark-model-gb", "2", "--json-report", f"--json-report-file={report}"],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert "Traceback" not in run.stdout + run.stderr, run.stdout[-2000:]
        line = next(line for line in run.stdout.splitlines() if line.startswith("G3 "))
        assert line.startswith("G3 FAIL: 2 GB of weights") and "the container's limit leaves" in line, line
        verdict = next(t["metadata"]["gotcha"] for t in json.loads(report.read_text())["tests"]
                       if t.get("metadata", {}).get("gotcha", {}).get("id") == "G3")
        assert verdict["readings"]["cgroup_limit_bytes"] == 2 * GIB
    finally:
        child.rmdir()


def test_a_cgroup_file_this_user_may_not_read_is_said_not_raised(tmp_path, monkeypatch):
    proc, mounts = v2_tree(tmp_path, "/", {"memory.max": f"{GIB}\n"})
    real = open

    def refusing(path, *args, **kwargs):
        if str(path).endswith("memory.max"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    cg = read_cgroup(proc, mounts)
    assert cg.error.startswith("cannot read the cgroup: Permission denied (") and cg.limit_bytes is None


def test_nvml_memory_on_a_gb10_within_its_pool_is_judged_and_said_to_be_unconfirmed():
    inventory = GpuInventory(devices=[GpuDevice(0, "NVIDIA GB10", capability=(12, 1), memory_total_bytes=130_662_936_576,
                                                memory_free_bytes=110_000_000_000, memory_used_bytes=20_662_936_576)])
    v = g03.judge_gpu_memory_view(parse_meminfo(AT_REST), GB10, inventory, None)
    assert v.line == "G3 INFO: NVML reports 110.0 GB free of 130.7 GB (the shared pool)"
    assert v.detail.startswith("no GB10 driver measured so far reports device memory (NotSupported); this one does")
