"""Compiled extensions in site-packages that link a CUDA library whose soname names a major."""

from __future__ import annotations

import os
import re
import site
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .. import elf
from ..readings.env import ExtensionScan, LinkedExtension
from . import ReadContext, reader

# Libraries whose soname major is the CUDA major (libcudart.so.12 is CUDA 12). cuFFT, cuRAND,
# cuSPARSE, cuSOLVER, cuDNN and NCCL number their sonames on their own and are left out.
# Wheels that vendor the runtime rename it with a hash (auditwheel: libcudart-9335f6a2.so.12).
CUDA_SONAME = re.compile(r"^lib(cudart|cublas|cublasLt|nvrtc|nvJitLink|cupti|npp[a-z]*)(?:[-.][0-9a-f]{8})?\.so\.(\d+)")


def site_dirs() -> list[str]:
    """The environment's site-packages folders (venv, system, user), existing ones only."""
    dirs: list[str] = []
    candidates = list(getattr(site, "getsitepackages", lambda: [])())
    if getattr(site, "ENABLE_USER_SITE", False):
        candidates.append(site.getusersitepackages())
    candidates += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in dirs:
            dirs.append(real)
    return dirs


def find_shared_objects(root: str) -> list[str]:
    """Every ``*.so``/``*.so.N`` file under ``root``. ``__pycache__`` folders are not entered: Python
    never loads an extension from there, and they are a third of site-packages' folders."""
    found: list[str] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if entry.is_dir(follow_symlinks=False):
                        if name != "__pycache__":
                            stack.append(entry.path)
                    elif (name.endswith(".so") or ".so." in name) and entry.is_file(follow_symlinks=False):
                        found.append(entry.path)
        except OSError:
            continue
    return found


def cuda_majors(sonames: list[str]) -> dict[str, int]:
    out = {}
    for soname in sonames:
        match = CUDA_SONAME.match(soname)
        if match:
            out[soname] = int(match.group(2))
    return out


def owners(paths: list[str], roots: list[str]) -> dict[str, str]:
    """Map files to the distribution whose RECORD lists them (a text search of each RECORD,
    far cheaper than resolving every entry of every distribution)."""
    import importlib.metadata as md

    wanted: dict[str, str] = {}  # path relative to its site dir (as RECORD writes it) -> path
    for path in paths:
        for root in roots:
            if path.startswith(root + os.sep):
                wanted[os.path.relpath(path, root)] = path
                break
    result: dict[str, str] = {}
    for dist in md.distributions():
        if not wanted:
            break
        record = dist.read_text("RECORD") or dist.read_text("installed-files.txt") or ""
        if not record:
            continue
        for rel in [r for r in wanted if r in record]:
            result[wanted.pop(rel)] = dist.metadata["Name"]
    return result


@reader("env.cuda_extensions")
def read_cuda_extensions(ctx: ReadContext) -> ExtensionScan:
    """Every ``*.so`` under site-packages, its DT_NEEDED CUDA sonames, and its distribution."""
    t0 = time.perf_counter()
    dirs = site_dirs()
    files: list[str] = []
    for d in dirs:
        files += find_shared_objects(d)
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
        results = list(pool.map(elf.needed, files))
    linked_paths: dict[str, dict[str, int]] = {}
    unreadable = 0
    for path, sonames in zip(files, results, strict=True):
        if sonames is None:
            unreadable += 1
            continue
        majors = cuda_majors(sonames)
        if majors:
            linked_paths[path] = majors
    who = owners(list(linked_paths), dirs) if linked_paths else {}
    linked = [
        LinkedExtension(path=p, distribution=who.get(p), cuda_libs=m)
        for p, m in sorted(linked_paths.items())
    ]
    return ExtensionScan(
        site_dirs=dirs, shared_objects=len(files), seconds=time.perf_counter() - t0,
        linked=linked, unreadable=unreadable,
    )
