"""The Python environment: container evidence, installed distributions and broken requirements, the
known-good baseline, compiled extensions that link CUDA, and the GPU targets of FP4 kernel libraries.

Keys: ``env.container``, ``env.distributions``, ``env.baseline`` (G9); ``env.cuda_extensions`` (G1):
compiled extensions in site-packages that link a CUDA library whose soname names a major;
``env.fp4_kernels`` (G7): for each FP4-capable distribution that is installed, every shared object
and cubin its RECORD lists is read with :mod:`spark_gotchas.machine.fatbin` (headers only).
``TORCH_CUDA_ARCH_LIST`` is read too: it decides the targets of anything built from source in this
environment.

Their types are in :mod:`spark_gotchas.knowledge.readings.env`.
"""

from __future__ import annotations

import base64
import csv
import glob
import hashlib
import importlib.metadata as md
import os
import re
import site
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...base import scrub
from ...knowledge.readings import cuda_libs
from ...knowledge.readings.env import (
    UNLIMITED,
    Baseline,
    ContainerEvidence,
    CudaDistribution,
    CudaLibrary,
    Distributions,
    ExtensionScan,
    FileOwner,
    ForeignObject,
    Fp4KernelScan,
    LibraryKernels,
    LinkedExtension,
    PartUse,
    RequirementProblem,
    Rlimit,
    SharedFile,
    entry_from_target,
)
from .. import elf, fatbin
from . import ReadContext, reader, sources

# -- env.container, env.distributions, env.baseline -----------------------------------------------
# Image variables: NGC's (nvcr.io/nvidia/pytorch, nemo), the CUDA base image's (NVIDIA_PRODUCT_NAME=CUDA)
# and Unsloth's image (unsloth/unsloth sets UNSLOTH_LLAMA_CPP_PATH=/opt/unsloth/llama.cpp; :latest
# also UNSLOTH_STUDIO_HOME).
NGC_VARS = ("NVIDIA_PRODUCT_NAME", "NVIDIA_PYTORCH_VERSION", "PYTORCH_BUILD_VERSION", "NVIDIA_BUILD_ID",
            "NVIDIA_PRODUCT_VERSION", "NVIDIA_NEMO_VERSION", "NEMO_VERSION", "CUDA_VERSION",
            "NVIDIA_REQUIRE_CUDA", "TORCH_CUDA_ARCH_LIST", "NVIDIA_VISIBLE_DEVICES", "UNSLOTH_VERSION",
            "UNSLOTH_LLAMA_CPP_PATH", "UNSLOTH_STUDIO_HOME")
SHM = "/dev/shm"
CAP_IPC_LOCK = 14  # bit in /proc/<pid>/status CapEff (linux/capability.h)


def _read_lines(path: str, limit: int = 20) -> tuple[list[str], Optional[str]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return [line.rstrip("\n") for _, line in zip(range(limit), fh, strict=False)], None
    except OSError as exc:
        return [], f"{type(exc).__name__}: {exc.strerror or exc}"


def root_fstype(mountinfo_lines: list[str]) -> Optional[str]:
    """The filesystem type mounted at / (``overlay`` inside most containers)."""
    for line in mountinfo_lines:
        parts = line.split()
        if len(parts) > 4 and parts[4] == "/" and " - " in line:
            return line.split(" - ", 1)[1].split()[0]
    return None


def shm_size(path: str = SHM) -> tuple[Optional[int], Optional[str]]:
    """(bytes, None) or (None, why): the size of the shared-memory filesystem (``df /dev/shm``)."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError) as exc:  # AttributeError: no statvfs on this platform
        return None, f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
    return st.f_blocks * st.f_frsize, None


def _rlimits() -> tuple[Optional[Rlimit], Optional[Rlimit], Optional[str]]:
    """RLIMIT_MEMLOCK and RLIMIT_STACK of this process (``ulimit -l -s``), RLIM_INFINITY as UNLIMITED."""
    try:
        import resource
    except ImportError as exc:  # not a POSIX system
        return None, None, f"ImportError: {exc}"

    def limit(which: int) -> Rlimit:
        soft, hard = resource.getrlimit(which)
        return Rlimit(*(UNLIMITED if v == resource.RLIM_INFINITY else int(v) for v in (soft, hard)))

    try:
        return limit(resource.RLIMIT_MEMLOCK), limit(resource.RLIMIT_STACK), None
    except (OSError, ValueError, AttributeError) as exc:
        return None, None, f"{type(exc).__name__}: {exc}"


def has_cap_ipc_lock(status_lines: list[str]) -> Optional[bool]:
    """CAP_IPC_LOCK in the effective set (``CapEff:`` of /proc/self/status); None when not there."""
    for line in status_lines:
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split(":", 1)[1].strip(), 16) >> CAP_IPC_LOCK & 1)
            except ValueError:
                return None
    return None


@reader("env.container")
def read_container(ctx: ReadContext) -> ContainerEvidence:
    cgroup, error = _read_lines("/proc/1/cgroup")
    mountinfo, _ = _read_lines("/proc/self/mountinfo", limit=400)
    status, _ = _read_lines("/proc/self/status", limit=80)
    env = scrub.scrub_env({k: os.environ[k] for k in NGC_VARS if k in os.environ})
    shm_bytes, shm_error = shm_size()
    memlock, stack, limits_error = _rlimits()
    return ContainerEvidence(
        dockerenv=os.path.exists("/.dockerenv"),
        containerenv=os.path.exists("/run/.containerenv"),
        proc1_cgroup=cgroup,
        proc1_cgroup_error=error,
        root_fstype=root_fstype(mountinfo),
        container_var=os.environ.get("container"),
        kubernetes="KUBERNETES_SERVICE_HOST" in os.environ,
        ngc_vars=env,
        python_prefix=sys.prefix,
        shm_bytes=shm_bytes,
        shm_error=shm_error,
        memlock=memlock,
        stack=stack,
        cap_ipc_lock=has_cap_ipc_lock(status),
        limits_error=limits_error,
        **python_environment(),
    )


def python_environment(prefix: Optional[str] = None, base_prefix: Optional[str] = None) -> dict:
    """What kind of environment this Python is: conda (a conda-meta/ folder in sys.prefix, as conda,
    mamba and micromamba make), a venv (sys.prefix is not sys.base_prefix), or the system's; and
    the conda record of torch (pytorch-*.json, or torch-*.json from another channel) when conda
    installed it."""
    prefix = sys.prefix if prefix is None else prefix
    base = sys.base_prefix if base_prefix is None else base_prefix
    meta = os.path.join(prefix, "conda-meta")
    conda = os.path.isdir(meta)
    record = None
    if conda:
        try:
            names = sorted(os.listdir(meta))[:20000]
        except OSError:
            names = []
        record = next((n[:-5] for n in names if n.endswith(".json") and re.match(r"(py)?torch-\d", n)), None)
    return {"conda_meta": conda, "conda_prefix": os.environ.get("CONDA_PREFIX"),
            "venv": os.path.realpath(prefix) != os.path.realpath(base), "conda_torch": record}


def installed_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name and canonicalize_name(name) not in out:
            out[canonicalize_name(name)] = dist.version
    return out


def _satisfied(req: Requirement, found: str) -> bool:
    if not req.specifier:
        return True
    try:
        return req.specifier.contains(Version(found), prereleases=True)
    except InvalidVersion:
        return True  # cannot judge a non-PEP 440 version


@reader("env.distributions")
def read_distributions(ctx: ReadContext) -> Distributions:
    versions = installed_versions()
    problems: list[RequirementProblem] = []
    invalid: list[str] = []
    seen: set[str] = set()
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if not name or canonicalize_name(name) in seen:
            continue
        seen.add(canonicalize_name(name))
        for raw in dist.requires or ():
            try:
                req = Requirement(raw)
            except InvalidRequirement:
                invalid.append(f"{name}: {raw}")
                continue
            if req.marker is not None:
                try:
                    if not req.marker.evaluate({"extra": ""}):
                        continue
                except Exception:
                    continue
            required = canonicalize_name(req.name)
            found = versions.get(required)
            if found is None or not _satisfied(req, found):
                problems.append(RequirementProblem(name, dist.version, raw, required, found))
    return Distributions(versions=dict(sorted(versions.items())), problems=problems, invalid=invalid)


def _baseline_named_in_replay(ctx: ReadContext, recorded: Baseline) -> Baseline:
    """A replay given --spark-baseline compares the recorded versions with that baseline: the
    baseline is a file, not this machine, so it is read now in place of the one recorded."""
    return read_baseline(ctx)


@reader("env.baseline", replay_input=("spark_baseline", _baseline_named_in_replay))
def read_baseline(ctx: ReadContext) -> Baseline:
    from ..snapshot import SnapshotError, load

    path = ctx.options.spark_baseline
    if not path:
        return Baseline()
    try:
        snap = load(path)
    except SnapshotError as exc:
        return Baseline(path=path, error=str(exc))
    dists = snap.readings.get("env.distributions")
    if not isinstance(dists, dict) or not isinstance(dists.get("versions"), dict):
        return Baseline(path=path, created=snap.created, error="the baseline snapshot has no env.distributions reading")
    return Baseline(path=path, created=snap.created, versions=dists["versions"])


# -- env.cuda_extensions --------------------------------------------------------------------------
# The CUDA libraries whose soname names the CUDA major (libcudart.so.12 is CUDA 12); the others
# (cuFFT, cuRAND, cuSPARSE, cuSOLVER, cuDNN, NCCL) are resolved too, but say nothing of the major.
# Wheels that vendor the runtime rename it with a hash (auditwheel: libcudart-9335f6a2.so.12).
CUDA_SONAME = re.compile(r"^lib(cudart|cublas|cublasLt|nvrtc|nvJitLink|cupti|npp[a-z]*)(?:[-.][0-9a-f]{8})?\.so\.(\d+)")
# Distributions that may load CUDA by name although no file of theirs links it: their name or their
# requirements mention CUDA. Only their files are searched for library names.
CUDA_RELATED = re.compile(r"cuda|(?:^|[-_])cu\d|nvidia|gpu|jax-plugin|xla", re.IGNORECASE)
RPATH_MAJOR = re.compile(r"(?:^|/)(?:cu|cuda-?)(\d{2}(?:\.\d+)?)(?:/|$)")
CU12_LAYOUT = re.compile(r"(?:^|/)nvidia/(?!cu\d)([a-z_]+)/lib/?$")  # nvidia/cublas/lib: the -cu12 wheels' layout
PYTORCH = ("torch", "torchvision", "torchaudio")
STRING_SCAN_FILES = 64  # most files of one distribution searched for library names
UNRELATED_RODATA = 8 << 20  # most read-only data searched in a file without kernels of a distribution not CUDA-related
OVERRIDES = ("BNB_CUDA_VERSION",)


def site_dirs() -> list[str]:
    """The environment's site-packages folders (venv, system, user, and any folder on sys.path,
    from PYTHONPATH too, whose name ends in site-packages or dist-packages), existing ones only."""
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
    wanted: dict[str, str] = {}  # path relative to its site dir (as RECORD writes it) -> path
    for path in paths:
        for root in roots:
            if path.startswith(root + os.sep):
                wanted[os.path.relpath(path, root)] = path
                break
    result: dict[str, str] = {}
    for dist in md.distributions(path=roots):
        if not wanted:
            break
        record = dist.read_text("RECORD") or dist.read_text("installed-files.txt") or ""
        if not record:
            continue
        for rel in [r for r in wanted if r in record]:
            result[wanted.pop(rel)] = dist.metadata["Name"]
    return result


# -- where the loader finds a library -------------------------------------------------------------
def _expand(entry: str, origin: str) -> str:
    return os.path.normpath(entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin))


def ld_cache(path: str = "/etc/ld.so.cache") -> dict[str, str]:
    """soname -> file, from the loader's cache (what ``ldconfig -p`` prints): the cache's strings
    that are absolute paths, by their file name (the soname's link)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(64 << 20)
    except OSError:
        return {}
    out: dict[str, str] = {}
    for raw in data.split(b"\0"):
        if raw.startswith(b"/") and b".so" in raw:
            text = raw.decode(errors="replace")
            out.setdefault(os.path.basename(text), text)
    return out


class Resolver:
    """Where a shared object's CUDA library would come from, in the loader's order (RPATH,
    LD_LIBRARY_PATH, RUNPATH, ld.so.cache, the system folders), then the places a package or torch
    loads from before it (the NVIDIA wheels' lib folders, folders other packages' RPATHs name, the
    CUDA toolkit's folders)."""

    def __init__(self, dirs: list[str], rpath_dirs: set[str]):
        self.site_dirs = dirs
        self.ld_library_path = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
        self.interpreter_rpath = self._interpreter_rpath()
        self._cache: Optional[dict[str, str]] = None
        self.system = [d for d in ("/lib64", "/usr/lib64", "/lib", "/usr/lib") if os.path.isdir(d)]
        self.system += sorted(glob.glob("/lib/*-linux-gnu") + glob.glob("/usr/lib/*-linux-gnu"))
        self.wheels = sorted({d for s in dirs for d in glob.glob(os.path.join(s, "nvidia", "*", "lib"))})
        self.others = sorted(d for d in rpath_dirs if os.path.isdir(d) and d not in self.wheels)
        toolkit = [os.environ.get(v, "") for v in ("CUDA_HOME", "CUDA_PATH")]
        toolkit += glob.glob("/usr/local/cuda*")
        self.toolkit = [os.path.join(t, sub) for t in dict.fromkeys(toolkit) if t
                        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
                        if os.path.isdir(os.path.join(t, sub))]
        self.inside = [os.path.realpath(sys.prefix)] + dirs

    @staticmethod
    def _interpreter_rpath() -> list[str]:
        exe = os.path.realpath(sys.executable or "")
        info = elf.dynamic(exe) if exe else None
        return [_expand(p, os.path.dirname(exe)) for p in info.rpath] if info else []

    def cache(self) -> dict[str, str]:
        if self._cache is None:
            self._cache = ld_cache()
        return self._cache

    def resolve(self, soname: str, origin: str, rpath: list[str], runpath: list[str]) -> CudaLibrary:
        major = cuda_libs.soname_major(soname)
        own_rpath = [] if runpath else [_expand(p, origin) for p in rpath]
        places = [("RPATH", own_rpath), ("the interpreter's RPATH", [] if runpath else self.interpreter_rpath),
                  ("LD_LIBRARY_PATH", self.ld_library_path), ("RUNPATH", [_expand(p, origin) for p in runpath])]
        for via, folders in places:
            for folder in folders:
                if os.path.exists(os.path.join(folder, soname)):
                    return self._found(soname, major, os.path.join(folder, soname), via)
        cached = self.cache().get(soname)
        if cached and os.path.exists(cached):
            return self._found(soname, major, cached, "ld.so.cache")
        for via, folders in (("system folder", self.system), ("nvidia wheel", self.wheels),
                             ("another package's RPATH folder", self.others), ("CUDA toolkit folder", self.toolkit)):
            for folder in folders:
                if os.path.exists(os.path.join(folder, soname)):
                    return self._found(soname, major, os.path.join(folder, soname), via)
        return CudaLibrary(soname=soname, major=major)

    def _found(self, soname: str, major: Optional[int], path: str, via: str) -> CudaLibrary:
        real = os.path.realpath(path)
        inside = any(real.startswith(d + os.sep) or path.startswith(d + os.sep) for d in self.inside)
        return CudaLibrary(soname=soname, major=major, found=path, via=via, in_environment=inside)


def rpath_majors(entries: list[str]) -> list[int]:
    """CUDA majors that RPATH/RUNPATH folders name: nvidia/cu13/lib -> 13, /usr/local/cuda-12.4/… -> 12,
    nvidia/cublas/lib (the layout of the -cu12 wheels) -> 12."""
    found = set()
    for entry in entries:
        match = RPATH_MAJOR.search(entry)
        if match:
            found.add(int(match.group(1).split(".")[0]))
        elif CU12_LAYOUT.search(entry):
            found.add(12)
    return sorted(found)


def is_library_file(path: str, info: elf.Dynamic, dirs: list[str]) -> bool:
    """A file that is itself a CUDA library (its soname is one, or it lies in an NVIDIA library
    wheel's lib folder): a provider, never a package that needs CUDA."""
    if info.soname and cuda_libs.library(info.soname):
        return True
    for d in dirs:  # nvidia/<lib>/lib/ or nvidia/cu13/lib/ inside the site folder (whose own path has a lib/)
        rel = path[len(d) + 1:] if path.startswith(d + os.sep) else ""
        if rel.startswith("nvidia" + os.sep) and f"{os.sep}lib{os.sep}" in rel:
            return True
    return False


# -- distributions -------------------------------------------------------------------------------
# One line each: [ \t], never \s, so a bare "Requires-Dist: numpy" does not take the next line as its
# specifier, and an unclosed "[" is not read to the end of the file from every line (quadratic).
REQUIRES = re.compile(r"^Requires-Dist:[ \t]*([A-Za-z0-9._-]+)[ \t]*(?:\[[^\]\n]*\])?[ \t]*([^;\n]*)(?:;([^\n]*))?",
                      re.MULTILINE)
EXTRA = re.compile(r"""\bextra\s*==\s*['"]?([\w.-]+)""")
HEADER = re.compile(r"^(Name|Version):\s*(.+?)\s*$", re.MULTILINE)


def _metadata(dist: md.Distribution, installed: set[str]) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """Name, version and requirements (name, specifier) from METADATA, without the email parser.
    A requirement of an extra (``; extra == "cu12"``) counts when it is installed, and otherwise
    only when one extra alone brings CUDA libraries, of one major: numba-cuda offers a cu12 and a
    cu13 extra, and what it needs is the one the user chose; jax-cuda12-plugin's one with-cuda
    extra names the CUDA 12 libraries it loads, installed from pip or not. Last, the sonames that only
    an extra not counted would bring (nvimgcodec's ``nvjpeg`` extra: libnvjpeg.so.12): optional."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    head = dict(HEADER.findall(text[:4000]))
    base: list[tuple[str, str]] = []
    extras: list[tuple[str, str, str]] = []  # (name, specifier, the extra's name)
    for n, spec, marker in REQUIRES.findall(text):
        req = (canonicalize_name(n), spec.strip().strip("()"))
        extra = EXTRA.search(marker or "")
        if extra:
            extras.append((*req, extra.group(1)))
        else:
            base.append(req)
    cuda_extras = {x for name, _, x in extras if CUDA_RELATED.search(name)}
    majors = {m for name, spec, _ in extras if (m := cuda_libs.requirement_major(name, spec)) is not None}
    one_choice = len(cuda_extras) == 1 and len(majors) == 1  # no other CUDA to choose instead
    requires = base + [(name, spec) for name, spec, _ in extras if name in installed
                       or (one_choice and cuda_libs.requirement_major(name, spec) is not None)]
    optional = sorted({s for name, spec, _ in extras if (name, spec) not in requires
                       and (m := cuda_libs.requirement_major(name, spec)) is not None
                       for s in cuda_libs.wheel_sonames(name, m)})
    return head.get("Name", ""), head.get("Version", ""), requires, optional


def _dist_files(dist: md.Distribution, record: str) -> list[str]:
    """The shared objects a distribution installed, from its RECORD text (``path,hash,size`` lines):
    parsing only the lines that name a shared object is ~10x cheaper than ``dist.files`` for a wheel
    of thousands of files. Other layouts (installed-files.txt) go through ``dist.files``."""
    if not dist.read_text("RECORD"):
        rows = [str(entry) for entry in dist.files or ()]
    else:
        rows = [next(csv.reader([line]))[0] if line.startswith('"') else line.rsplit(",", 2)[0]
                for line in record.splitlines() if ".so" in line]
    base = str(dist.locate_file(""))
    out = []
    for rel in rows:
        name = os.path.basename(rel)
        if name.endswith(".so") or ".so." in name:
            path = os.path.normpath(os.path.join(base, rel))
            if os.path.isfile(path):
                out.append(path)
    return sorted(set(out))


def _kernels(paths: list[str], root: str, by_path: dict[str, Optional[elf.Dynamic]]
             ) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """file -> the targets of its kernels (``cuobjdump --list-elf --list-ptx``), and file -> its
    translation units by their targets (PTX with its ISA: ``compute_90@8.3``), for files that have
    any: the fatbin sections the ELF pass found, their entry headers read."""
    kernels, units = {}, {}
    todo = [(path, info.gpu_code) for path in paths if (info := by_path.get(path)) is not None and info.gpu_code]
    # one thread a file: cold, the headers are thousands of small reads spread over the file (paddle's
    # libphi.so: 673 units in 1.8 GB), and reads of several files overlap on the disk
    with ThreadPoolExecutor(max_workers=min(8, len(todo) or 1)) as pool:
        for path, found in zip([p for p, _ in todo], pool.map(_units_of, todo), strict=True):
            if found:
                rel = os.path.relpath(path, root)
                units[rel] = found
                kernels[rel] = sorted({t.split("@")[0] for key in found for t in key.split()}, key=target_order)
    return kernels, units


def _units_of(task: tuple[str, tuple[tuple[int, int], ...]]) -> dict[str, int]:
    """One file's units by their targets; {} when its fatbin cannot be read."""
    path, sections = task
    found: dict[str, int] = {}
    try:
        with open(path, "rb") as fh:
            for offset, size in sections:
                for unit in fatbin.read_units(fh, offset, size, path):
                    key = unit_key(unit)
                    if key:
                        found[key] = found.get(key, 0) + 1
    except (OSError, ValueError):  # FatbinError is a ValueError: that file's targets stay unread
        return {}
    return found


def unit_key(unit: list) -> str:
    """One translation unit's targets, sorted, PTX with its ISA: ``sm_80 sm_90 compute_90@8.3``."""
    return " ".join(sorted({e.target + (f"@{e.isa}" if e.isa else "") for e in unit},
                           key=lambda t: target_order(t.split("@")[0])))


def torch_build_file(dirs: list[str]) -> tuple[Optional[str], Optional[str]]:
    """torch's version and CUDA (``torch.version.cuda``) from torch/version.py, without importing torch."""
    for d in dirs:
        try:
            with open(os.path.join(d, "torch", "version.py"), encoding="utf-8", errors="replace") as fh:
                text = fh.read(20000)
        except OSError:
            continue
        version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        return (version.group(1) if version else None), (cuda.group(1) if cuda else None)
    return None, None


@dataclass
class _Owners:
    """What one pass over the distributions found."""

    distributions: list[CudaDistribution] = field(default_factory=list)
    who: dict[str, str] = field(default_factory=dict)  # CUDA-using file -> distribution name
    runtime: dict[str, tuple[elf.Dynamic, list[str]]] = field(default_factory=dict)  # file -> (ELF, names in it)
    strings_seconds: float = 0.0
    shared: list[SharedFile] = field(default_factory=list)  # library files of two CUDA majors' distributions


@reader("env.cuda_extensions")
def read_cuda_extensions(ctx: ReadContext) -> ExtensionScan:
    """Every ``*.so`` under site-packages, its CUDA libraries and where each resolves, its
    distribution; for CUDA-related distributions that link none, the library names in their
    binaries; the kernel targets of the packages that use CUDA."""
    t0 = time.perf_counter()
    dirs = site_dirs()
    files: list[str] = []
    for d in dirs:
        files += find_shared_objects(d)
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
        infos = list(pool.map(elf.dynamic, files))
    by_path = dict(zip(files, infos, strict=True))
    unreadable = 0
    users: dict[str, elf.Dynamic] = {}  # files that link a CUDA library or carry a build tag
    library_files: set[str] = set()
    rpath_dirs: set[str] = set()
    for path, info in by_path.items():
        if info is None:
            unreadable += 1
            continue
        origin = os.path.dirname(path)
        rpath_dirs.update(_expand(p, origin) for p in info.rpath + info.runpath)
        if is_library_file(path, info, dirs):
            library_files.add(path)
        elif any(cuda_libs.library(s) for s in info.needed) or cuda_libs.build_tag(os.path.basename(path)):
            users[path] = info
    resolver = Resolver(dirs, rpath_dirs)
    t_strings = time.perf_counter()
    runtime = loads_by_name(by_path, set(users) | library_files)
    strings_seconds = time.perf_counter() - t_strings
    found = _cuda_distributions(dirs, {**users, **{p: i for p, (i, _) in runtime.items()}}, by_path, library_files,
                                resolver)
    found.runtime.update(runtime)
    linked = [_extension(path, info, found.who.get(path), resolver, loads=[]) for path, info in sorted(users.items())]
    linked += [_extension(path, info, found.who.get(path), resolver, loads=names)
               for path, (info, names) in sorted(found.runtime.items())]
    torch_version, torch_cuda = torch_build_file(dirs)
    interpreter, machines, foreign = _machines(by_path, dirs)
    return ExtensionScan(
        site_dirs=dirs, shared_objects=len(files), seconds=time.perf_counter() - t0,
        linked=linked, unreadable=unreadable, distributions=found.distributions, resolved=True,
        torch_version=torch_version, torch_cuda=torch_cuda,
        overrides={k: os.environ[k] for k in OVERRIDES if k in os.environ},
        ld_library_path=resolver.ld_library_path, strings_seconds=found.strings_seconds + strings_seconds,
        shared_files=found.shared, interpreter_machine=interpreter, machines=machines, foreign=foreign,
    )


FOREIGN_NAMED = 50  # shared objects of another CPU named in the reading (all are counted)
# The interpreter's CPU as a recording of wheels laid out for another machine gives it
# (devscripts/g01_wheels.py record --machine=aarch64); None: this Python's own, from its ELF header.
INTERPRETER_MACHINE: Optional[str] = None


def _machines(by_path: dict[str, Optional[elf.Dynamic]], dirs: list[str]
              ) -> tuple[Optional[str], dict[str, int], list[ForeignObject]]:
    """The CPU this Python was built for (its ELF header), the shared objects by the CPU they were
    built for, and those of another CPU than this Python with the distribution that installed them."""
    exe = os.path.realpath(sys.executable or "")
    own = elf.dynamic(exe) if exe and INTERPRETER_MACHINE is None else None
    interpreter = INTERPRETER_MACHINE or (own.machine if own is not None and own.machine else None)
    machines: dict[str, int] = {}
    for info in by_path.values():
        if info is not None and info.machine:
            machines[info.machine] = machines.get(info.machine, 0) + 1
    odd = sorted(p for p, info in by_path.items() if info is not None and info.machine and interpreter
                 and info.machine != interpreter)
    who = owners(odd[:FOREIGN_NAMED], dirs) if odd else {}
    foreign = [ForeignObject(path=p, distribution=who.get(p), machine=by_path[p].machine) for p in odd[:FOREIGN_NAMED]]
    return interpreter, dict(sorted(machines.items())), foreign


def loads_by_name(by_path: dict[str, Optional[elf.Dynamic]], known: set[str]) -> dict[str, tuple[elf.Dynamic, list[str]]]:
    """Shared objects of any distribution that load CUDA by name: those that import ``dlopen`` and name
    a versioned CUDA soname in their strings (ctranslate2's ``libctranslate2-*.so.4.8.5`` loads
    ``libcublas.so.12``), and those whose RPATH/RUNPATH names a CUDA folder. ``known`` (files that link
    CUDA, CUDA's own libraries) are passed over; the files of CUDA-related distributions are searched
    later, every one. To keep the cost that of a few files, only a file that imports dlopen is
    searched, and only when it carries CUDA kernels of its own (``.nv_fatbin``: CUDA linked
    statically) or at most ``UNRELATED_RODATA`` bytes of read-only data (LLVM's and Triton's 40-60 MB
    are passed over)."""
    out: dict[str, tuple[elf.Dynamic, list[str]]] = {}
    for path, info in by_path.items():
        if info is None or path in known:
            continue
        worth = info.gpu_code or info.rodata <= UNRELATED_RODATA
        names = elf.strings(path, cuda_libs.IN_BINARY) if info.dlopen and worth else []
        if names or info.gpu_code or rpath_majors(info.rpath + info.runpath):
            out[path] = (info, names)
    return out


def _extension(path: str, info: elf.Dynamic, dist: Optional[str], resolver: Resolver,
               loads: list[str]) -> LinkedExtension:
    origin = os.path.dirname(path)
    needs = [resolver.resolve(s, origin, info.rpath, info.runpath) for s in info.needed if cuda_libs.library(s)]
    tag = cuda_libs.build_tag(os.path.basename(path))
    return LinkedExtension(
        path=path, distribution=dist, cuda_libs=cuda_majors(info.needed), needs=needs,
        loads=[resolver.resolve(s, origin, info.rpath, info.runpath) for s in loads],
        rpath_majors=rpath_majors(info.rpath + info.runpath), build_tag=tag[0] if tag else None,
        rpath_libs=[resolver.resolve(s, origin, info.rpath, info.runpath) for s in layout_sonames(info)],
    )


def layout_sonames(info: elf.Dynamic) -> list[str]:
    """The CUDA 12 libraries the RPATH/RUNPATH folders of the -cu12 wheels' layout name
    (``$ORIGIN/../nvidia/cublas/lib`` -> libcublas.so.12, libcublasLt.so.12)."""
    out: set[str] = set()
    for entry in info.rpath + info.runpath:
        match = CU12_LAYOUT.search(entry)
        if match:
            out.update(cuda_libs.WHEEL_SONAMES.get(match.group(1).replace("_", "-"), {}).get(12, []))
    return sorted(out)


def _cuda_distributions(dirs: list[str], users: dict[str, elf.Dynamic], by_path: dict[str, Optional[elf.Dynamic]],
                        library_files: set[str], resolver: Resolver) -> _Owners:
    """One pass over the distributions of ``dirs``: who owns each CUDA-using file (a text search of
    each RECORD), and for every distribution that uses CUDA, looks CUDA-related (its name or its
    requirements mention CUDA/NVIDIA) or is a framework people install for the GPU, what its metadata
    and its build record say, which requested distributions brought it, and its kernels; the binaries
    of a related one that links no CUDA library are searched for library names it would load by name.
    On the way, the library files that distributions of different CUDA majors both install."""
    wanted: dict[str, str] = {}
    for path in users:
        for root in dirs:
            if path.startswith(root + os.sep):
                wanted[os.path.relpath(path, root)] = path
                break
    out = _Owners()
    dists = list(md.distributions(path=dirs))
    installed = {canonicalize_name(d.name) for d in dists if d.name}
    graph = _Graph()
    libraries = _LibraryRows()
    split: list[tuple[CudaDistribution, md.Distribution, str]] = []
    for dist in dists:
        record = dist.read_text("RECORD") or dist.read_text("installed-files.txt") or ""
        mine = [rel for rel in wanted if rel in record] if record else []
        name, version, requires, optional = _metadata(dist, installed)
        if not name:
            continue
        cname = canonicalize_name(name)
        graph.add(cname, [r for r, _ in requires], dist)
        libraries.add(dist, cname, version, record)
        if not mine and cname not in cuda_libs.GPU_FRAMEWORKS and not (
                CUDA_RELATED.search(cname) or any(CUDA_RELATED.search(r) for r, _ in requires)):
            continue
        for rel in mine:
            out.who[wanted.pop(rel)] = name
        tag = cuda_libs.build_tag(cname)
        entry = CudaDistribution(
            name=name, version=version, library_wheel=cuda_libs.is_library_wheel(cname),
            name_major=tag[1] if tag else cuda_libs.requirement_major(cname, version),
            requires_majors={r: m for r, spec in requires if (m := cuda_libs.requirement_major(r, spec)) is not None},
            optional=optional, build_info=build_info(dist, record))
        if entry.library_wheel:
            out.distributions.append(entry)
            continue
        graph.entries[cname] = entry
        files = [f for f in _dist_files(dist, record) if f not in library_files]
        entry.shared_objects = len(files)
        if not files:
            if entry.build_info or cname in cuda_libs.GPU_FRAMEWORKS:
                out.distributions.append(entry)
            continue
        if not mine:  # it uses CUDA, if at all, by loading it at run time: search its binaries
            t0 = time.perf_counter()
            for path in files[:STRING_SCAN_FILES]:
                info = by_path.get(path) or elf.dynamic(path)
                if info is None:
                    continue
                names = elf.strings(path, cuda_libs.IN_BINARY)
                entry.strings_scanned += 1
                if names or info.gpu_code or rpath_majors(info.rpath + info.runpath):
                    out.runtime[path] = (info, names)
                    out.who[path] = name
            out.strings_seconds += time.perf_counter() - t0
        places = [(os.path.dirname(f), info.rpath, info.runpath) for f in files if (info := by_path.get(f))]
        declared = sorted({s for r, m in entry.requires_majors.items() for s in cuda_libs.wheel_sonames(r, m)})
        entry.declared = [_resolve_any(s, places, resolver) for s in declared]
        if cname != "torch":  # its arch list is torch.build's; libtorch_cuda's thousands of units cost seconds cold
            root = next((d for d in dirs if files[0].startswith(d + os.sep)), os.path.dirname(files[0]))
            entry.kernels, entry.units = _kernels(files, root, by_path)
            if len(entry.units) > 1:  # its GPU code split over several files: how the package reaches each
                split.append((entry, dist, record))
        out.distributions.append(entry)
    graph.bring()
    for entry, dist, record in split:
        _parts(entry, dist, record, graph, {canonicalize_name(d.name): d for d in dists if d.name})
    out.shared = libraries.shared()
    return out


def top_packages(record: str) -> list[str]:
    """The top-level packages and modules a RECORD installs (the first folder of its ``.py`` rows)."""
    out = set()
    for line in record.splitlines():
        path = (next(csv.reader([line]))[0] if line.startswith('"') else line.rsplit(",", 2)[0]).replace("\\", "/")
        if not path.endswith(".py"):
            continue
        first = path.split("/", 1)[0]
        if first in ("", "..") or first.endswith((".dist-info", ".data", ".egg-info")):
            continue
        out.add(first[:-3] if first.endswith(".py") else first)
    return sorted(out)


def _parts(entry: CudaDistribution, dist: md.Distribution, record: str, graph: _Graph,
           dists: dict[str, md.Distribution]) -> None:
    """How the package reaches each of its files with GPU code (:mod:`spark_gotchas.machine.readers.sources`): the modules
    that name it, among its own sources, those of the distributions that require it and those of the
    package its top-level name extends (flashinfer_jit_cache -> flashinfer); whether its import loads it."""
    site = str(dist.locate_file(""))
    mine = top_packages(record)
    tops = list(mine)
    for parent in sorted(graph.parents.get(canonicalize_name(entry.name), ())):
        other = dists.get(parent)
        if other is not None and str(other.locate_file("")) == site:
            tops += top_packages(other.read_text("RECORD") or "")
    for top in mine:  # flashinfer_jit_cache is loaded by flashinfer, a package of another distribution
        pieces = top.split("_")
        for i in range(len(pieces) - 1, 0, -1):
            if os.path.isfile(os.path.join(site, "_".join(pieces[:i]), "__init__.py")):
                tops.append("_".join(pieces[:i]))
    tops = list(dict.fromkeys(tops))
    roots = [os.path.join(site, t) for t in tops]
    roots += [os.path.join(site, f"{t}.py") for t in tops if os.path.isfile(os.path.join(site, f"{t}.py"))]
    found, problem = sources.find([sources.part_of(k) for k in entry.units], site, tops, roots,
                                  own=mine[0] if mine else "")
    entry.parts = {key: PartUse(module=sources.part_of(key).module, at_import=f.at_import, users=f.users,
                                searched=f.searched) for key, f in found.items()}
    entry.parts_note = problem


class _Graph:
    """Who requires whom among the installed distributions, and which the user asked for (pip's
    REQUESTED marker), to name the distribution that brought a package (cudf-cu12 brings libcudf-cu12)."""

    def __init__(self) -> None:
        self.parents: dict[str, set[str]] = {}
        self.requested: dict[str, bool] = {}
        self.entries: dict[str, CudaDistribution] = {}

    def add(self, name: str, requires: list[str], dist: md.Distribution) -> None:
        for required in requires:
            self.parents.setdefault(required, set()).add(name)
        self.requested[name] = dist.read_text("REQUESTED") is not None

    def bring(self) -> None:
        marked = any(self.requested.values())
        for name, entry in self.entries.items():
            entry.requested = self.requested.get(name) if marked else None
            if entry.requested:
                continue
            seen, todo, tops = {name}, [name], set()
            while todo:
                for parent in sorted(self.parents.get(todo.pop(), ())):
                    if parent in seen or parent not in self.requested:
                        continue
                    seen.add(parent)
                    if (self.requested[parent] if marked else not self.parents.get(parent)):
                        tops.add(parent)
                    else:
                        todo.append(parent)
            entry.brought_by = sorted(tops)


class _LibraryRows:
    """The RECORD rows of library files (``<dir>/lib/<name>.so*``) of distributions whose name or
    version carries a CUDA major, to find a file two of different majors both install."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], list[FileOwner]] = {}  # (site folder, path) -> owners

    def add(self, dist: md.Distribution, cname: str, version: str, record: str) -> None:
        tag = cuda_libs.build_tag(cname)
        major = tag[1] if tag else cuda_libs.requirement_major(cname, version)
        if major is None or "/lib/" not in record:
            return
        base = str(dist.locate_file(""))
        for line in record.splitlines():
            path, _, rest = line.partition(",")
            if "/lib/" not in path or not (path.endswith(".so") or ".so." in os.path.basename(path)):
                continue
            digest, _, size = rest.partition(",")
            owner = FileOwner(dist.metadata["Name"] or cname, version, major,
                              sha256=digest[7:] if digest.startswith("sha256=") else None,
                              size=int(size) if size.isdigit() else None)
            self.rows.setdefault((base, path), []).append(owner)

    def shared(self) -> list[SharedFile]:
        out = []
        for (base, path), owners in sorted(self.rows.items()):
            if len({o.cuda_major for o in owners}) > 1:
                on_disk, how = on_disk_owner(os.path.join(base, path), owners)
                out.append(SharedFile(path=path, owners=owners, on_disk=on_disk, how=how))
        return out


def on_disk_owner(path: str, owners: list[FileOwner]) -> tuple[Optional[str], str]:
    """Which owner's RECORD matches the file on disk: by its size when the owners' sizes differ (a
    stat), else by its sha256 (RECORD's urlsafe base64, unpadded)."""
    try:
        st = os.stat(path)
    except OSError:
        return None, "missing"
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block the read or never end
        return None, "unread: not a regular file"
    size = st.st_size
    sizes = [o.size for o in owners]
    if None not in sizes and len(set(sizes)) == len(sizes):
        match = [o.distribution for o in owners if o.size == size]
        return (match[0] if match else None), "size"
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        return None, f"unread: {type(exc).__name__}"
    text = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    match = [o.distribution for o in owners if o.sha256 == text]
    return (match[0] if match else None), "sha256"


BUILD_INFO_BYTES = 64 << 10


def build_info(dist: md.Distribution, record: str) -> dict[str, str]:
    """What a build record the distribution ships says (``cuda_libs.BUILD_INFO``): ``file``,
    ``cuda_build`` ("True"/"False") and ``cuda_version``, as far as the file says them. Read as text,
    never imported."""
    for rel, (flag, version) in cuda_libs.BUILD_INFO.items():
        path = str(dist.locate_file(rel))
        if rel not in record or not os.path.isfile(path):  # a FIFO there would block the read
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read(BUILD_INFO_BYTES)
        except OSError:
            continue
        out = {"file": rel}
        found = re.search(flag, text, re.MULTILINE)
        if found:
            out["cuda_build"] = "True" if found.group(1) in ("True", "ON") else "False"
        found = re.search(version, text, re.MULTILINE)
        if found and found.group(1) not in ("", "False"):
            out["cuda_version"] = found.group(1)
        elif found and "cuda_build" not in out:
            out["cuda_build"] = "False"
        return out
    return {}


def _resolve_any(soname: str, places: list[tuple[str, list[str], list[str]]], resolver: Resolver) -> CudaLibrary:
    """A library a distribution loads by name, from the folders of any of its files."""
    best = resolver.resolve(soname, "", [], [])
    for origin, rpath, runpath in places:
        if best.found:
            break
        found = resolver.resolve(soname, origin, rpath, runpath)
        if found.found:
            best = found
    return best


# -- env.fp4_kernels ------------------------------------------------------------------------------
# Distributions whose NVFP4 paths are their own CUDA kernels: on GB10 they need sm_121a
# (or a family sm_12Xf) entries, else FP4 runs without cvt.e2m1x2 and block-scaled MMA.
FP4_KERNEL_LIBRARIES = {
    "vllm": "vLLM",
    "flashinfer-python": "FlashInfer",
    "flashinfer-cubin": "FlashInfer cubins",
    "flashinfer-jit-cache": "FlashInfer JIT cache",
    "tensorrt-llm": "TensorRT-LLM",
    "transformer-engine": "Transformer Engine",
    "transformer-engine-cu12": "Transformer Engine (cu12)",
    "transformer-engine-cu13": "Transformer Engine (cu13)",
    "transformer-engine-torch": "Transformer Engine (torch)",
    "sgl-kernel": "SGLang kernels",
}
# Read for context, not required: torch's FP4 GEMM goes through cuBLAS (measured instead),
# and bitsandbytes' 4-bit formats (nf4, its own fp4) dequantise in software.
CONTEXT_LIBRARIES = {"torch": "PyTorch", "bitsandbytes": "bitsandbytes"}
SUFFIXES = (".so", ".cubin")


def kernel_files(dist: md.Distribution) -> list[str]:
    """Shared objects and cubins a distribution installed (from its RECORD)."""
    out = []
    for entry in dist.files or ():
        name = entry.name
        if name.endswith(SUFFIXES) or ".so." in name:
            path = str(entry.locate())
            if os.path.isfile(path):
                out.append(path)
    return sorted(set(out))


def scan_distribution(name: str, label: str, role: str) -> Optional[LibraryKernels]:
    """The kernel targets of one installed distribution; None when it is not installed."""
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return None
    t0 = time.perf_counter()
    lib = LibraryKernels(distribution=name, label=label, version=dist.version, role=role)
    for path in kernel_files(dist):
        lib.files_scanned += 1
        found = fatbin.read_file(path)
        if found.error and found.error != "not an ELF file":
            lib.errors.append(f"{os.path.basename(path)}: {found.error}")
        if found.entries:
            lib.files_with_kernels += 1
            for target, count in found.counts().items():
                lib.targets[target] = lib.targets.get(target, 0) + count
    lib.targets = dict(sorted(lib.targets.items(), key=lambda kv: target_order(kv[0])))
    lib.seconds = time.perf_counter() - t0
    return lib


def target_order(target: str) -> tuple:
    """Sort sm_* before compute_*, then by SM number, plain before a before f."""
    entry = entry_from_target(target)
    if entry is None:
        return (2, 0, target)
    return (entry.kind == "ptx", entry.sm, entry.suffix)


@reader("env.fp4_kernels")
def read_fp4_kernels(ctx: ReadContext) -> Fp4KernelScan:
    """Kernel targets of installed FP4-capable libraries, and TORCH_CUDA_ARCH_LIST."""
    t0 = time.perf_counter()
    libraries = []
    for table, role in ((FP4_KERNEL_LIBRARIES, "fp4"), (CONTEXT_LIBRARIES, "context")):
        for name, label in table.items():
            lib = scan_distribution(name, label, role)
            if lib is not None:
                libraries.append(lib)
    return Fp4KernelScan(libraries=libraries, torch_cuda_arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST"),
                         seconds=time.perf_counter() - t0)
