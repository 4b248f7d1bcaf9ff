"""Time the G1 extension scan (the ``env.cuda_extensions`` reader) the way a preflight runs it.

    python devscripts/g01_scan_bench.py                 # this environment's site-packages
    python devscripts/g01_scan_bench.py --copies 4      # a tree of 4 copies of every shared object here
    python devscripts/g01_scan_bench.py --copies 3 --with-site   # site-packages plus 3 copies (~4x the objects)
    python devscripts/g01_scan_bench.py --cold ...      # also drop the page cache first (root only)
    python devscripts/g01_scan_bench.py --naive         # also time a byte search of every file, for comparison
    python devscripts/g01_scan_bench.py --reader-cold 3 DIR   # the reader alone, page cache dropped before each of 3 runs

Prints one line per run (``scan:`` shared objects, seconds) and a summary: the first run, the
median of the warm repeats, and where the time goes (directory walk, ELF reads, RECORD owners).
Writes nothing. Runs here as it is (about 1 s; a few seconds with --copies); on the GPU machine,
after the suite's dependencies are installed, in one command with the installer:

    bash devscripts/batch.sh && python3 devscripts/g01_scan_bench.py --cold --repeat 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_gotchas.machine import elf  # noqa: E402
from spark_gotchas.machine.readers import env as ex  # noqa: E402


def drop_caches() -> str:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return "cold (page cache dropped)"
    except OSError as exc:
        return f"first run (could not drop the page cache: {exc.strerror})"


def build_tree(copies: int, into: Path) -> list[str]:
    """``copies`` copies of every shared object of this environment, each in its own folder tree,
    hard-linked where possible (the scan reads headers, so links time the same as copies)."""
    sources = [(d, f) for d in ex.site_dirs() for f in ex.find_shared_objects(d)]
    for i in range(copies):
        for site_dir, path in sources:
            target = into / f"copy{i}" / os.path.relpath(path, site_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:
                shutil.copy(path, target)
    return [str(into)]


def one_scan(dirs: list[str]) -> dict[str, float]:
    t0 = time.perf_counter()
    files = [f for d in dirs for f in ex.find_shared_objects(d)]
    t1 = time.perf_counter()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
        needed = list(pool.map(elf.needed, files))
    t2 = time.perf_counter()
    linked = [f for f, n in zip(files, needed, strict=True) if n and ex.cuda_majors(n)]
    owners = ex.owners(linked, dirs) if linked else {}
    t3 = time.perf_counter()
    return {"files": len(files), "linked": len(linked), "owned": len(owners), "walk_s": t1 - t0, "elf_s": t2 - t1,
            "owners_s": t3 - t2, "total_s": t3 - t0}


def naive_scan(dirs: list[str]) -> tuple[int, float]:
    """What the reader replaces: read every shared object whole and search it for ``libcudart.so.``."""
    t0 = time.perf_counter()
    hits = 0
    for path in (f for d in dirs for f in ex.find_shared_objects(d)):
        try:
            with open(path, "rb") as fh:
                hits += b"libcudart.so." in fh.read()
        except OSError:
            pass
    return hits, time.perf_counter() - t0


def reader_scan(dirs: list[str]) -> float:
    """The reader itself, as the check calls it (its own clock)."""
    saved = ex.site_dirs
    ex.site_dirs = lambda: dirs
    try:
        return ex.read_cuda_extensions(None).seconds
    finally:
        ex.site_dirs = saved


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=0, help="scan a tree of N copies of every shared object here")
    ap.add_argument("--repeat", type=int, default=5, help="warm repeats after the first run")
    ap.add_argument("--with-site", action="store_true", help="with --copies: scan site-packages too")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before the first run (root)")
    ap.add_argument("--naive", action="store_true", help="also time a whole-file byte search (warm)")
    ap.add_argument("dirs", nargs="*", help="folders to scan (default: this environment's site-packages)")
    ap.add_argument("--reader-cold", type=int, default=0, metavar="N",
                    help="only time the reader, N runs each after dropping the page cache (root), then warm")
    args = ap.parse_args(argv)
    if args.reader_cold:
        dirs = args.dirs or ex.site_dirs()
        cold = []
        for _ in range(args.reader_cold):
            label = drop_caches()
            cold.append(reader_scan(dirs))
            print(f"reader {label}: {cold[-1]:.3f} s", flush=True)
        print(f"summary: reader cold median of {len(cold)}: {statistics.median(cold):.3f} s; warm: "
              f"{reader_scan(dirs):.3f} s")
        return 0

    tmp = None
    dirs = args.dirs or ex.site_dirs()
    if args.copies:
        tmp = Path(tempfile.mkdtemp(prefix="g01-scan-"))
        dirs = build_tree(args.copies, tmp) + (dirs if args.with_site else [])
    try:
        print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, "
              f"python {platform.python_version()}, {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
        print(f"dirs: {' '.join(dirs)}")
        first_label = drop_caches() if args.cold else "first run"
        runs = [one_scan(dirs)]
        for _ in range(args.repeat):
            runs.append(one_scan(dirs))
        for i, r in enumerate(runs):
            print(f"scan {i}: {r['files']} shared objects, {r['linked']} link a CUDA runtime ({r['owned']} owned), "
                  f"{r['total_s']:.3f} s (walk {r['walk_s']:.3f}, ELF {r['elf_s']:.3f}, owners {r['owners_s']:.3f})")
        warm = [r["total_s"] for r in runs[1:]] or [runs[0]["total_s"]]
        print(f"summary: {runs[0]['files']} shared objects; {first_label}: {runs[0]['total_s']:.3f} s; "
              f"warm median of {len(warm)}: {statistics.median(warm):.3f} s; "
              f"reader as the check calls it: {reader_scan(dirs):.3f} s")
        if args.naive:
            hits, seconds = naive_scan(dirs)
            print(f"naive byte search of every file: {seconds:.3f} s ({hits} files name libcudart.so.)")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
