"""One command from a cold page cache: its wall time and the bytes its process tree read from disk.

    python3 devscripts/cold_bytes.py NAME COMMAND...      # e.g. floor python3 -c "import torch"
    EVICT=0 python3 devscripts/cold_bytes.py NAME COMMAND...   # warm: nothing dropped first

Before the command, devscripts/evict.py drops what a preflight reads (site-packages, the standard
library, the interpreter, /usr/local/cuda*, the CUDA driver's libraries as ldconfig lists them,
~/.triton, ~/.nv and this tree) and TRITON_CACHE_DIR points at a fresh empty folder. Bytes read
are ``getrusage(RUSAGE_CHILDREN).ru_inblock`` x 512 (it counts page faults on mapped libraries,
which is how most of an ``import torch`` reads) and, beside it, /proc/diskstats' sectors read on
whole disks (the whole machine's). The command's output goes to $LOGDIR/NAME.txt (default /tmp).
Prints one JSON line: name, wall, rc, inblock_MB, disk_MB, majflt, cpu_s. A benchmark: nothing
here asserts a figure (docs/benchmarks.md has the current figures; docs/benchmarks-history.md,
"Where the time went: the cold disk", the run that led to them).
"""

import glob
import json
import os
import resource
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drop_paths() -> list[str]:
    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")}
    paths.update(site.getsitepackages() + [os.path.realpath(sys.executable)])
    paths.update(glob.glob(os.path.join(sysconfig.get_config_var("LIBDIR") or "/nonexistent", "libpython*")))
    paths.update(glob.glob("/usr/local/cuda*"))
    home = os.path.expanduser("~")
    paths.update([os.path.join(home, ".triton"), os.path.join(home, ".nv"), REPO])
    try:
        listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    for line in listed.splitlines():
        if any(f"lib{n}.so" in line for n in ("cuda", "nvidia-ml", "nvidia-ptxjitcompiler", "nvidia-nvvm")):
            paths.add(line.rsplit(" ", 1)[-1])
    return sorted(p for p in paths if os.path.exists(p))


def disk_bytes() -> int:
    """Bytes read by every whole disk since boot (/proc/diskstats' field 6, in 512-byte sectors)."""
    whole = {d for d in os.listdir("/sys/block") if not d.startswith(("loop", "ram", "zram"))}
    total = 0
    with open("/proc/diskstats") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 6 and parts[2] in whole:
                total += int(parts[5]) * 512
    return total


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, cmd = sys.argv[1], sys.argv[2:]
    found = shutil.which(cmd[0])  # the command runs from an empty folder: resolve it from here
    if found is None:
        print(f"cold_bytes.py: no command {cmd[0]!r}", file=sys.stderr)
        return 2
    cmd[0] = os.path.abspath(found)
    env = dict(os.environ)
    if os.environ.get("EVICT", "1") == "1":
        subprocess.run([sys.executable, os.path.join(REPO, "devscripts", "evict.py"), *drop_paths()],
                       capture_output=True)
        env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-bytes-triton.")
    log_dir = os.environ.get("LOGDIR", tempfile.gettempdir())
    before, disk0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), disk_bytes(), time.perf_counter()
    with open(os.path.join(log_dir, f"{name}.txt"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tempfile.mkdtemp()).returncode
    wall, disk1, after = time.perf_counter() - t0, disk_bytes(), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "name": name, "wall": round(wall, 2), "rc": rc,
        "inblock_MB": round((after.ru_inblock - before.ru_inblock) * 512 / 1e6, 1),
        "disk_MB": round((disk1 - disk0) / 1e6, 1), "majflt": after.ru_majflt - before.ru_majflt,
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
