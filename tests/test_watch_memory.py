"""G3 as ``spark-gotchas watch`` says it of a real job in a real memory cgroup (root: the test makes a cgroup
with a 600 MiB limit, v2's memory.max or v1's memory.limit_in_bytes, and starts the watch inside it):
the job filling it is a WARN while it runs and at the end; the job growing past it is OOM-killed by the
kernel, a FAIL, exit 137, and the next watch says so again."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_watch import bare_env, g_lines, watch_cmd, watch_lines

LIMIT = 600 << 20

# Fills the cgroup it runs in to a share of its limit (read from the cgroup's own files), then sleeps,
# or ("oom") keeps allocating until the kernel kills it.
FILL = r'''
import os, sys, time
cg, target, then = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def read(name):
    try:
        return open(os.path.join(cg, name)).read()
    except OSError:
        return ""
v2 = bool(read("memory.max"))
limit = int(read("memory.max") if v2 else read("memory.limit_in_bytes"))
stat = lambda: dict(l.split() for l in read("memory.stat").splitlines() if len(l.split()) == 2)
used = lambda: int(read("memory.current" if v2 else "memory.usage_in_bytes")) - \
    int(stat().get("inactive_file" if v2 else "total_inactive_file", 0))
hold = []
def grow():
    b = bytearray(8 << 20)
    b[::4096] = b"\1" * len(b[::4096])
    hold.append(b)
while used() < target * limit:
    grow()
    print(f"step {len(hold)}: {used() / limit:.0%} of the cgroup, 10.0 it/s", flush=True)
    time.sleep(0.05)
if then == "oom":
    while True:
        grow()
time.sleep(float(then))
'''


def _v2_parent() -> Path | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if " - cgroup2 " in line and "memory" in (Path(fields[4]) / "cgroup.subtree_control").read_text().split() \
                if (Path(fields[4]) / "cgroup.subtree_control").exists() else False:
            return Path(fields[4])
    return None


def _v1_parent() -> Path | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount, _, fs = line.partition(" - ")
        if fs.startswith("cgroup ") and "memory" in fs.split()[-1].split(","):
            return Path(mount.split()[4])
    return None


@pytest.fixture
def cgroup():
    """A memory cgroup with a 600 MiB limit that this test may put processes in (skips where none can be made)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a memory cgroup")
    name = f"spark-gotchas-test-{uuid.uuid4().hex[:8]}"
    for parent, limit_file in ((_v2_parent(), "memory.max"), (_v1_parent(), "memory.limit_in_bytes")):
        if parent is None:
            continue
        path = parent / name
        try:
            path.mkdir()
            (path / limit_file).write_text(str(LIMIT))
            if limit_file == "memory.max":
                (path / "memory.swap.max").write_text("0") if (path / "memory.swap.max").exists() else None
        except OSError:
            if path.exists():
                path.rmdir()
            continue
        yield path
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
        try:
            path.rmdir()
        except OSError:
            pass
        return
    pytest.skip("no memory cgroup can be made here (neither v2 with the memory controller nor v1)")


def _watch_in(cgroup: Path, tmp_path: Path, *job: str, out: str = "w") -> subprocess.CompletedProcess:
    fill = tmp_path / "fill.py"
    fill.write_text(FILL)
    inner = shlex.join(watch_cmd("--every", "0.2", "--out", out, "--", sys.executable, str(fill), str(cgroup), *job))
    procs = shlex.quote(str(cgroup / "cgroup.procs"))
    return subprocess.run(["sh", "-c", f"echo $$ > {procs} && exec {inner}"], env=bare_env(tmp_path),
                          cwd=tmp_path, capture_output=True, timeout=120)


def test_a_job_filling_its_cgroup_is_a_g3_warn_as_it_runs_and_at_the_end(cgroup, tmp_path):
    watched = _watch_in(cgroup, tmp_path, "0.93", "3")
    assert watched.returncode == 0, watched.stderr.decode()[-2000:]
    said = watch_lines(watched.stderr)
    warn = [line for line in said if " G3 WARN " in line]
    assert len(warn) == 1, said
    assert re.fullmatch(r"spark-gotchas watch: G3 WARN 0:00:\d\d the job's cgroup uses 0\.[56]\d GB, 9\d% of its 0\.63 GB "
                        r"limit: at 100% the kernel kills inside it", warn[0]), warn
    g3 = g_lines(watched.stderr)[0]
    assert re.fullmatch(r"G3 WARN: the job's cgroup neared its memory limit \(9\d% of 0\.63 GB\) from 0:00:\d\d for \d+% of "
                        r"the run", g3), g3
    assert "raise the job's memory limit" in watched.stderr.decode().split(g3, 1)[1].splitlines()[1]


def test_a_job_the_kernel_oom_kills_is_a_g3_fail_exit_137_and_the_next_watch_says_it(cgroup, tmp_path):
    watched = _watch_in(cgroup, tmp_path, "0.5", "oom")
    assert watched.returncode == 137, watched.stderr.decode()[-2000:]
    said = watch_lines(watched.stderr)
    assert any(re.search(r" G3 FAIL 0:00:\d\d the kernel's OOM killer killed the job \(pid \d+", line) for line in said), said
    assert any("killed by SIGKILL: the kernel's OOM killer after" in line for line in said), said
    g3 = g_lines(watched.stderr)[0]
    assert re.fullmatch(r"G3 FAIL: the kernel's OOM killer killed the job \(pid \d+\) at 0:00:\d\d; its cgroup's limit "
                        r"0\.63 GB", g3), g3
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    end = report["spark_gotchas"]["watch"]["end"]
    assert end["oom_kill"] and end["signal"] == 9
    after = subprocess.run(watch_cmd("--out", "w2", "--", sys.executable, "-c", "pass"), env=bare_env(tmp_path),
                           cwd=tmp_path, capture_output=True, timeout=60)
    told = [line for line in watch_lines(after.stderr) if "OOM killer" in line]
    # judged as the preflight's G3 "last watch" check judges it: a WARN, as the kernel log's OOM kill
    assert len(told) == 1 and re.search(r"G3 WARN the OOM killer ended (the watched run `python.* fill\.py|a watched "
                                        r"run).* at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", told[0]), told
