"""The Python environment: container evidence, installed distributions and broken requirements, the
known-good baseline, compiled extensions that link CUDA, and the GPU targets of FP4 kernel libraries.

Keys: ``env.container``, ``env.distributions``, ``env.baseline`` (G9); ``env.cuda_extensions`` (G1):
compiled extensions in site-packages that link a CUDA library whose soname names a major;
``env.fp4_kernels`` (G7): for each FP4-capable distribution that is installed, every shared object
and cubin its RECORD lists is read with :mod:`spark_gotchas.fatbin` (headers only).
``TORCH_CUDA_ARCH_LIST`` is read too: it decides the targets of anything built from source in this
environment.

Their types are in :mod:`spark_gotchas.readings.env`.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import site
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import elf, fatbin, scrub
from ..readings.env import (
    UNLIMITED,
    Baseline,
    ContainerEvidence,
    Distributions,
    ExtensionScan,
    Fp4KernelScan,
    LibraryKernels,
    LinkedExtension,
    RequirementProblem,
    Rlimit,
    entry_from_target,
)
from . import ReadContext, reader

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
    )


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


@reader("env.baseline")
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
