"""Reading types of the ``env.*`` keys (G1, G7, G9): container evidence, installed distributions and
the baseline's, compiled extensions that link CUDA, the GPU targets of FP4 kernel libraries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Bytes, Seconds

# -- env.container --------------------------------------------------------------------------------
UNLIMITED = -1  # an Rlimit value with no limit (RLIM_INFINITY, as ``ulimit`` prints "unlimited")


@dataclass
class Rlimit:
    """One resource limit of this process (``resource.getrlimit``), in bytes; ``UNLIMITED`` for none."""

    soft: int
    hard: int


@dataclass
class ContainerEvidence:
    """Raw container markers and how the container was started; the G9 judge decides. Check by
    hand: ``ls -a /.dockerenv /run/.containerenv; cat /proc/1/cgroup; grep ' / ' /proc/self/mountinfo;
    env | grep -E 'NVIDIA|UNSLOTH'; df -h /dev/shm; ulimit -l -s``

    The fields after ``ngc_vars`` came later: a snapshot without them replays with None, "not
    recorded", and the judge says so instead of guessing.
    """

    dockerenv: bool = False
    containerenv: bool = False
    proc1_cgroup: list[str] = field(default_factory=list)
    proc1_cgroup_error: Optional[str] = None
    root_fstype: Optional[str] = None
    container_var: Optional[str] = None
    kubernetes: bool = False
    ngc_vars: dict[str, str] = field(default_factory=dict)  # NVIDIA, NGC and Unsloth image variables
    python_prefix: Optional[str] = None  # sys.prefix: /opt/unsloth-venv in Unsloth's image
    shm_bytes: Optional[Bytes] = None  # size of the /dev/shm filesystem (os.statvfs)
    shm_error: Optional[str] = None  # why /dev/shm could not be read
    memlock: Optional[Rlimit] = None  # RLIMIT_MEMLOCK (docker run --ulimit memlock=-1)
    stack: Optional[Rlimit] = None  # RLIMIT_STACK (docker run --ulimit stack=67108864)
    cap_ipc_lock: Optional[bool] = None  # CAP_IPC_LOCK in /proc/self/status CapEff: memlock does not bind
    limits_error: Optional[str] = None  # why the limits could not be read
    # What kind of Python environment this is (None: a snapshot of an older suite): sys.prefix holds a
    # conda-meta/ folder (conda, mamba, micromamba, miniforge), CONDA_PREFIX as set, sys.prefix differs
    # from sys.base_prefix (a venv), and the conda record of torch when conda installed it
    # (conda-meta/pytorch-2.5.1-cuda126_….json: ``conda list pytorch``)
    conda_meta: Optional[bool] = None
    conda_prefix: Optional[str] = None
    venv: Optional[bool] = None
    conda_torch: Optional[str] = None

    @property
    def python_env(self) -> Optional[str]:
        """``conda`` / ``venv`` / ``system`` (pip into the system's Python); None when not recorded."""
        if self.conda_meta is None and self.venv is None:
            return None
        if self.conda_meta:
            return "conda"
        return "venv" if self.venv else "system"


# -- env.distributions ----------------------------------------------------------------------------
@dataclass
class RequirementProblem:
    distribution: str
    version: str
    requirement: str  # as declared, e.g. "triton==3.6.0; platform_system == 'Linux'"
    required: str  # canonical name of what is required
    found: Optional[str]  # installed version, None when missing

    @property
    def text(self) -> str:
        got = f"{self.required} {self.found} is installed" if self.found else f"{self.required} is missing"
        spec = self.requirement.split(";")[0].strip()
        return f"{self.distribution} {self.version} requires {spec}, but {got}"


@dataclass
class Distributions:
    """``pip list`` plus ``pip check``, read through importlib.metadata."""

    versions: dict[str, str] = field(default_factory=dict)  # canonical name -> version
    problems: list[RequirementProblem] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # unparseable metadata, named


# -- env.baseline ---------------------------------------------------------------------------------
@dataclass
class Baseline:
    """The distributions of a known-good run (``--spark-baseline`` snapshot)."""

    path: Optional[str] = None
    created: Optional[str] = None
    versions: Optional[dict[str, str]] = None
    error: Optional[str] = None


# -- env.cuda_extensions --------------------------------------------------------------------------
@dataclass
class CudaLibrary:
    """One CUDA library a shared object needs, and where this environment would find it."""

    soname: str
    major: Optional[int] = None  # the CUDA major its soname names (libcublas.so.12); None for libcufft.so.11
    found: Optional[str] = None  # the file it resolves to; None when nowhere
    via: Optional[str] = None  # RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.cache, system folder, nvidia wheel ...
    in_environment: bool = False  # found inside the Python environment (a wheel, an RPATH into it)


@dataclass
class LinkedExtension:
    """A shared object that uses CUDA: it links a CUDA library (DT_NEEDED), names one it loads by
    name (a string in the binary), or carries a CUDA build tag in its file name (``_cuda130.so``)."""

    path: str  # as found on disk
    distribution: Optional[str]  # who installed it (importlib.metadata RECORD), None if unknown
    cuda_libs: dict[str, int] = field(default_factory=dict)  # DT_NEEDED soname -> CUDA major it names
    needs: list[CudaLibrary] = field(default_factory=list)  # every CUDA library in DT_NEEDED, resolved
    loads: list[CudaLibrary] = field(default_factory=list)  # versioned CUDA sonames in its strings, resolved
    rpath_majors: list[int] = field(default_factory=list)  # CUDA majors its RPATH/RUNPATH folders name
    # the libraries its RPATH/RUNPATH folders into the -cu12 wheels' layout name (nvidia/cublas/lib ->
    # libcublas.so.12, libcublasLt.so.12), resolved: what it expects to load from there
    rpath_libs: list[CudaLibrary] = field(default_factory=list)
    build_tag: Optional[str] = None  # "cuda130" when its file name carries a CUDA build tag


@dataclass
class PartUse:
    """How a package reaches one of its files with GPU code, from its Python sources (read as text,
    never imported). Check by hand: ``grep -rn -e '"moe_utils"' -e 'import _flashmla_C' $(dirname
    $(python -c 'import vllm; print(vllm.__file__)'))``"""

    module: str  # its import name (vllm._flashmla_C), or the name its loaders give it (moe_utils)
    at_import: Optional[bool] = None  # importing the package loads it: a module its import runs imports it
    users: list[str] = field(default_factory=list)  # Python modules whose source names it (they load it)
    searched: bool = False  # its users were looked for (False: not searched, users unknown)


@dataclass
class CudaDistribution:
    """A distribution that uses CUDA (or an NVIDIA library wheel): what its metadata says."""

    name: str
    version: str
    library_wheel: bool = False  # an NVIDIA CUDA library wheel: provides libraries, needs none
    name_major: Optional[int] = None  # the CUDA major its name or version carries (cupy-cuda12x: 12)
    requires_majors: dict[str, int] = field(default_factory=dict)  # Requires-Dist name -> CUDA major
    declared: list[CudaLibrary] = field(default_factory=list)  # what its CUDA requirements ship, resolved
    optional: list[str] = field(default_factory=list)  # sonames only an extra not installed brings (nvjpeg)
    shared_objects: int = 0
    strings_scanned: int = 0  # files searched for library names (it links no CUDA library)
    kernels: dict[str, list[str]] = field(default_factory=dict)  # file (from its RECORD) -> kernel targets
    # file -> {the targets of one translation unit, "sm_80 sm_90 compute_90@8.3" (PTX with its ISA): units}
    units: dict[str, dict[str, int]] = field(default_factory=dict)
    build_info: dict[str, str] = field(default_factory=dict)  # what a build record it ships says (see cuda_libs.BUILD_INFO)
    requested: Optional[bool] = None  # pip's REQUESTED marker: the user named it (None: not recorded)
    brought_by: list[str] = field(default_factory=list)  # the requested distributions whose requirements brought it
    # file (the key of ``units``) -> how the package reaches it, for a package of several files with GPU
    # code ({} in a snapshot of an older suite: whether a part is loaded at import is then unknown)
    parts: dict[str, PartUse] = field(default_factory=dict)
    parts_note: str = ""  # why some parts' users were not looked for (the search's time bound)


@dataclass
class FileOwner:
    """One distribution whose RECORD lists a file: ``path,sha256=<urlsafe b64>,size``."""

    distribution: str
    version: str
    cuda_major: Optional[int]
    sha256: Optional[str] = None
    size: Optional[int] = None


@dataclass
class SharedFile:
    """A library file that distributions of different CUDA majors both install (nvidia-cudnn-cu12 and
    -cu13 both ship ``nvidia/cudnn/lib/libcudnn.so.9``): the last one installed wins, pip does not
    notice. Check by hand: ``pip show -f nvidia-cudnn-cu12 nvidia-cudnn-cu13``, ``sha256sum FILE``."""

    path: str  # as the RECORDs write it, relative to the site folder
    owners: list[FileOwner] = field(default_factory=list)
    on_disk: Optional[str] = None  # the owner whose RECORD matches the file now; None when none does
    how: str = ""  # "size" | "sha256" | "missing" | "unread: <why>"


@dataclass
class ForeignObject:
    """A shared object built for another CPU than this Python (``readelf -h FILE | grep Machine``)."""

    path: str
    distribution: Optional[str]
    machine: str  # e_machine as uname -m names it: x86_64, aarch64


@dataclass
class ExtensionScan:
    """``for f in $(find site-packages -name '*.so*'); do readelf -d $f | grep -E 'NEEDED|RPATH|RUNPATH'; done``,
    ``ldconfig -p``, and ``pip show`` of the distributions that use CUDA."""

    site_dirs: list[str] = field(default_factory=list)
    shared_objects: int = 0
    seconds: Seconds = 0.0
    linked: list[LinkedExtension] = field(default_factory=list)
    unreadable: int = 0
    distributions: list[CudaDistribution] = field(default_factory=list)
    resolved: bool = False  # libraries were looked up (False in snapshots of older suites)
    torch_version: Optional[str] = None  # torch/version.py, read without importing torch
    torch_cuda: Optional[str] = None  # torch.version.cuda as that file says; None for a CPU build or no torch
    overrides: dict[str, str] = field(default_factory=dict)  # BNB_CUDA_VERSION and the like, when set
    ld_library_path: list[str] = field(default_factory=list)
    strings_seconds: Seconds = 0.0
    shared_files: list[SharedFile] = field(default_factory=list)
    # the CPU the interpreter was built for (its ELF e_machine), the shared objects by the CPU they were
    # built for, and those built for another CPU than the interpreter (None/{}: a snapshot of an older suite)
    interpreter_machine: Optional[str] = None
    machines: dict[str, int] = field(default_factory=dict)
    foreign: list[ForeignObject] = field(default_factory=list)

    def distribution(self, name: Optional[str]) -> Optional[CudaDistribution]:
        for dist in self.distributions:
            if dist.name == name:
                return dist
        return None


# -- env.fp4_kernels ------------------------------------------------------------------------------
@dataclass
class LibraryKernels:
    """One distribution's kernel images: target -> number of entries (``sm_121a``: 3)."""

    distribution: str
    label: str
    version: str
    role: str  # "fp4" (its NVFP4 kernels are its own) | "context"
    files_scanned: int = 0
    files_with_kernels: int = 0
    targets: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # unreadable files, named
    seconds: Seconds = 0.0


@dataclass
class Fp4KernelScan:
    """Check by hand: ``cuobjdump --list-elf --list-ptx $(python -c 'import vllm,os;
    print(os.path.dirname(vllm.__file__))')/_C.abi3.so``; ``echo $TORCH_CUDA_ARCH_LIST``"""

    libraries: list[LibraryKernels] = field(default_factory=list)
    torch_cuda_arch_list: Optional[str] = None  # the environment variable, None when unset
    seconds: Seconds = 0.0

    def library(self, distribution: str) -> Optional[LibraryKernels]:
        for lib in self.libraries:
            if lib.distribution == distribution:
                return lib
        return None


# -- kernel targets in fatbins (spark_gotchas.machine.fatbin reads them) ---------------------------------------
FLAG_ARCH_SPECIFIC = 0x100000  # the "a" in sm_121a
FLAG_FAMILY = 0x200000  # the "f" in sm_120f

@dataclass(frozen=True)
class FatbinEntry:
    """One kernel image in a fatbin: a cubin for one SM, or PTX for one virtual arch."""

    kind: str  # "cubin" | "ptx" | "kind N"
    sm: int  # 121 for sm_121 / compute_121
    flags: int
    payload_bytes: Bytes
    compressed: bool = False
    isa: str = ""  # PTX's ISA version ("9.0": nvcc 13.0); "" for a cubin

    @property
    def suffix(self) -> str:
        if self.flags & FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & FLAG_FAMILY:
            return "f"
        return ""

    @property
    def target(self) -> str:
        """``sm_121a`` for a cubin, ``compute_121a`` for PTX."""
        prefix = "compute" if self.kind == "ptx" else "sm"
        return f"{prefix}_{self.sm}{self.suffix}"

def entry_from_target(target: str) -> Optional[FatbinEntry]:
    """``sm_121a`` / ``compute_120f`` -> an entry description (used for cubins and tests)."""
    prefix, _, rest = target.partition("_")
    if prefix not in ("sm", "compute") or not rest:
        return None
    suffix = rest[-1] if rest[-1] in "af" else ""
    digits = rest[:-1] if suffix else rest
    if not digits.isdigit():
        return None
    flags = {"a": FLAG_ARCH_SPECIFIC, "f": FLAG_FAMILY, "": 0}[suffix]
    return FatbinEntry(kind="ptx" if prefix == "compute" else "cubin", sm=int(digits), flags=flags, payload_bytes=0)
