"""G1 — CUDA 12/13 ABI mismatch: will torch, and every package that uses CUDA, load and run here?

Rules:

- The expected CUDA major is the driver's (NVML `nvmlSystemGetCudaDriverVersion`, 13000 -> 13);
  without a driver, the profile's (gb10 -> 13), and the line then says "the gb10 profile expects
  CUDA 13", never "the driver's".
- torch's CUDA major (`torch.version.cuda`) must equal the expected major: PASS. A fix that reinstalls
  torch from PyTorch's index first removes a torch conda installed (`conda remove --force pytorch`),
  where `env.container` recorded conda's own record of it. Built for a newer
  CUDA than the driver: FAIL everywhere. Built for an older one: FAIL under the gb10 profile (the
  Spark failure), WARN elsewhere (the driver's backward compatibility usually carries it). The
  `+cuXXX` tag is not used: NGC builds carry none.
- A CPU build of torch is a FAIL where a CUDA major is expected, a SKIP where none is.
- torch not installed is a WARN where a CUDA major is expected ("the CUDA ABI of torch cannot be
  checked": the preflight may be running in another environment than the training one), a SKIP
  where none is. It is never hidden behind a PASS of the other checks.
- `import torch` raising, crashing or hanging is a FAIL; an import that fails in another package's
  file (a foreign pynvml) names that file, not torch.
- Each distribution that uses CUDA is judged by whether it will load and run here. It uses CUDA when
  a shared object of it (any file its RECORD lists, in `<name>.libs/` too, named `*.so` or
  `*.so.4.8.5`) links a CUDA library (`DT_NEEDED`), names a versioned CUDA soname in its strings
  (`libcublas.so.12`, `libnvjpeg.so.12`: it loads it by name; ctranslate2, whose name and
  requirements say nothing of CUDA, is searched when its file imports `dlopen`), has an
  RPATH/RUNPATH into CUDA's folders (`nvidia/cu13/lib`, `/usr/local/cuda-12.8`, `nvidia/cublas/lib`,
  the layout of the -cu12 wheels), carries GPU code (`.nv_fatbin`), requires `nvidia-*-cuNN` wheels,
  or carries a CUDA tag in its name (`cupy-cuda12x`).
- Evidence from the binaries for this platform outranks metadata. Its CUDA major is, in this order:
  the one its linked sonames name (`DT_NEEDED`); the one the sonames it loads by name name (dlopen
  strings); the CUDA version of a build record it ships (tensorflow's `build_info.py`, open3d's
  `_build_config.py`, paddle's `version/__init__.py`); the CUDA that built its PTX (its ISA version:
  9.x is CUDA 13, 8.x CUDA 12); the major its RPATH/RUNPATH folders name; then its requirements,
  else its name or version. The report says which evidence decided. The libraries it needs are those
  it links, those it names, those its RPATH folders into the -cu12 layout hold (`nvidia/cublas/lib`:
  libcublas.so.12, libcublasLt.so.12) and those of its requirements. Metadata alone (an extra that is
  not installed, a version) never makes a FAIL: with no evidence in its binaries, a package of
  another major is at most a WARN "by its metadata alone".
- A package people install for the GPU (tensorflow, open3d) whose build has no GPU code and no CUDA
  library, or whose build record says it is not a CUDA build (PyPI's aarch64 wheels): "a CPU-only
  build: it will never use the GPU", WARN on a Spark (gb10 profile or its GPU: the GPU is why it was
  bought), INFO elsewhere (in the PASS line's detail); the fix names the real way to a GPU build
  (NVIDIA's container for that framework, `nvcr.io/nvidia/tensorflow`; open3d built with
  `-DBUILD_CUDA_MODULE=ON`). Its and-cuda extra is no CUDA 12 need.
- NVIDIA's CUDA library wheels (`nvidia-cublas-cu12`, `nvidia-cublas`, `nvidia-nccl-cu13` …) and
  files that are CUDA libraries themselves are never judged: they are what makes a package loadable.
  Installing the libraries a package needs moves it from FAIL to WARN, never to a FAIL naming them.
- Several builds picked at run time: files of one folder whose names differ only by a CUDA tag
  (`libbitsandbytes_cuda121.so` … `_cuda130.so`) are one package's builds. The run loads the
  build of torch's CUDA (read from torch/version.py, without importing torch; `BNB_CUDA_VERSION`
  overrides it for bitsandbytes), else of the expected major; the exact version's build when there
  is one, else the newest of that major. That build is judged as the package; the line names it.
  No build for that major: FAIL. The other builds are not judged.
- A library counts as found where the loader would find it: the file's RPATH (when it has no
  RUNPATH), the interpreter's RPATH, `LD_LIBRARY_PATH`, its RUNPATH (`$ORIGIN` expanded), the
  loader's cache (`/etc/ld.so.cache`, what `ldconfig -p` prints), the system library folders;
  or where a package or torch loads it from first: the NVIDIA wheels' `nvidia/*/lib` folders,
  folders other packages' RPATHs name, the CUDA toolkit's folders (`/usr/local/cuda*`,
  `CUDA_HOME`, `CUDA_PATH`).
- Judged for another machine (a profile, no driver read), only libraries inside the Python
  environment count for a package of another major (this machine's `/usr/local/cuda-12.8` is not
  the Spark's), and the profile's own CUDA libraries are taken as that machine's.
- A package that links a CUDA toolkit library found nowhere: FAIL naming the package and the library
  (its import will fail). A package that loads CUDA by name: FAIL when a runtime or BLAS library its
  binaries name (cuDART, cuBLAS, cuBLASLt, NVRTC, nvJitLink, by string or RPATH folder) is found
  nowhere, or none of its libraries is; installing one of its other libraries (cuDNN beside x86_64
  tensorflow) does not change that. A library that only an extra not installed brings (nvimgcodec's
  `nvjpeg`) is noted, not failed. NCCL, cuDNN, cuSPARSELt, cuFile and NVSHMEM missing alone are noted
  in the report, not failed (packages load them in optional modules; torch's own check fails an
  import they break).
- A package of another CUDA major whose libraries are found: WARN (two CUDA runtimes in one process,
  and its kernels must reach this GPU).
- No kernel for this GPU is a FAIL however the package reaches CUDA, of any major. The GPU code of
  every object that has any is read (fatbin; not torch's own: its arch list is `torch.build`'s), unit
  by unit (one unit per translation unit), against the GPU's compute capability (the device's, else
  the profile's: sm_121 on GB10). A cubin runs on the same major with a minor at or below the GPU's
  (`sm_120`, `sm_120f` run on sm_121); an arch-specific one only on that GPU (`sm_120a`, `sm_90a`
  do not run on sm_121, nor does `sm_100f`). PTX runs where its virtual arch is at or below the GPU
  when the driver compiles its ISA version: the driver's CUDA (NVML), judged for another machine the
  oldest driver of the expected major (13.0); ISA 9.N is CUDA 13.N, 8.8 CUDA 12.9 (NVIDIA's PTX ISA
  release history), so a CUDA 13.0 driver refuses ISA 9.3, and the report says so where cubins run
  instead. FAIL when no unit runs ("no kernel for sm_121", before any missing library: installing
  those would not help), or when most of its units made for no GPU in particular lack code for it
  ("kernels for sm_121 in 7 of 857 units only": paddlepaddle-gpu 2.6.2). Objects whose code is only
  for other GPUs (`sm_90a`, `sm_100f`: vLLM's FA3, FlashMLA) beside a core that runs are optional
  parts: named in the report, never a FAIL. The fix of another major's package says which of its
  kernels reach the GPU (a cubin, or PTX compiled at first use); a build of the right CUDA without
  kernels for the GPU is told to build from source for the GPU's target.
- A package's files with GPU code are its parts; a part none of whose units runs here (while the
  package's core does) is judged by how the package reaches it, read from its Python sources as
  text (`machine/readers/sources.py`: the modules that name it quoted, import it by its own name, or call
  `torch.ops.<name>`; among its own sources, those of the distributions that require it and those
  of the package its top-level name extends, `flashinfer_jit_cache` → `flashinfer`). Loaded at
  import (a module the package's import runs names it in module-level code) → **FAIL**: "vllm: _C,
  which importing it loads, has no kernel for sm_121". Loaded only by a feature → **WARN** naming
  the part in the line ("flashinfer-jit-cache: moe_utils has no kernel for sm_121 (sm_100f only)")
  and, in the `-v` block, its file, targets and the modules that load it; the fix names them, or is
  the package's one remedy. A part whose name ends in a GPU tag (`fused_moe_100`, `gemm_sm120`) is
  one build of a feature: covered when a build of the same feature for this GPU runs
  (`fused_moe_120`), built for another GPU when none does (`fused_moe_trtllm_sm100`); both are
  named in the `-v` block and the report, never warned.
- A package named in `readings/remedies.py` gets that one remedy from every judge, whatever kept
  it from running: flash-attn is uninstalled for SDPA (G2's fix), never built from source;
  flashinfer-jit-cache is uninstalled so that flashinfer-python builds its modules for this GPU.
- A shared object built for another CPU than the machine's (ELF `e_machine`; the machine is the
  recorded `host.platform`, which a replay keeps, else this Python's own build where a driver was
  read here; judged for another machine with none recorded, not judged) → **FAIL** per
  distribution ("torch: built for x86_64, not for this aarch64 machine: libtorch_cuda.so +3"), fix:
  reinstall it on this machine. A Python built for another CPU (an emulated x86_64 one on a Spark)
  → one **FAIL** for the interpreter.
- Triton's ptxas (`test_g1_triton_ptxas`, `triton.ptxas`): Triton compiles its kernels with the
  ptxas it bundles (`triton/backends/nvidia/bin/ptxas`; from the SM its compiler names on,
  `ptxas-blackwell`: sm_90 in Triton 3.9), or the one `TRITON_PTXAS_PATH`
  (`TRITON_PTXAS_BLACKWELL_PATH`) names when that one runs. Its CUDA release (`ptxas --version`, in
  a child with a timeout) older than the first release that knows the GPU's SM (12.9 for sm_121,
  12.8 for sm_100/sm_120, 13.0 for sm_110) → **FAIL** "triton 3.5.0's ptxas is CUDA 12.8: it cannot
  compile for sm_121a"; fix: export the variable to a newer ptxas found here (a CUDA toolkit's, a
  wheel's, PATH's), else install CUDA 13's toolkit and point it there. A ptxas that does not run
  (another CPU's, missing) → **FAIL**. Recent enough → **PASS**; triton not installed → **INFO**;
  no GPU and no profile → **INFO**. A replayed snapshot recorded before this check (it holds no
  `triton.ptxas`: the check's `reads` marker) leaves the check out, so that its G1 line stays what
  it was.
- Library files that distributions of two CUDA majors both install (nvidia-cudnn-cu12 and -cu13:
  `nvidia/cudnn/lib/libcudnn.so.9`; nvidia-nccl-cu12 and -cu13: `nvidia/nccl/lib/libnccl.so.2`),
  read from the installed RECORDs: one finding per pair naming both and the one whose copy is on disk
  (the file's size, else its sha256, against each RECORD). FAIL when the copy on disk is not of the
  expected major while that major's distribution is installed (torch for CUDA 13 then loads cuDNN for
  CUDA 12), WARN otherwise; the fix uninstalls the other and reinstalls the expected one with
  `--no-deps`.
- Its fix names only projects PyPI has, and promises only what holds. It names what the user
  installed: the requested distribution that brought the package (pip's `REQUESTED` marker and the
  requirements of the installed distributions: cudf-cu12 brought libcudf-cu12), and its CUDA 13
  build found by the naming patterns CUDA packages use (`-cu12` -> `-cu13`, `cuda12x` -> `cuda13x`,
  `cuda120` -> `cuda130`, `-cuda12-` -> `-cuda13-`) checked against PyPI's names (shipped with the
  suite, `readings/cuda_builds.py`, written from PyPI's list by `devscripts/pypi_names.py`: there is
  no `faiss-gpu-cu13`); the cu130 index for torch, torchvision and torchaudio; for several builds
  chosen by torch's CUDA, torch from the cu130 index; a CUDA 13 release for
  `cuda-bindings`/`cuda-python`; else, saying PyPI has no CUDA 13 build, only after that check, a
  build from source for the GPU's target (`-DCMAKE_CUDA_ARCHITECTURES=121`,
  `TORCH_CUDA_ARCH_LIST=12.1`), e.g. in an NGC PyTorch container, which ships CUDA 13's nvcc. A
  missing library's fix also names the wheels that ship it (`pip install nvidia-cublas-cu12`, only
  those PyPI has for that major), and "keep this build and add its libraries" only when some of its
  kernels run on the GPU (or none were read).
- No driver and no CUDA major from the profile: packages of different majors between them are judged
  against the majority's major (WARN or FAIL as above); otherwise INFO listing the majors found.
- A snapshot of an older suite (libraries not resolved): a package linking another major is a FAIL.
- The first CUDA launch, tried in a child process, must run and give the right answer: a crash
  (signal), a hang (timeout) or an exception is a FAIL; not tried (no torch, CPU build, no device) is
  a SKIP with the reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Optional

from ...base.scrub import mask_text
from ...base.text import printable
from ..profiles import Profile
from ..readings import cuda_builds, cuda_libs, gpu_code, remedies
from ..readings.env import (
    ContainerEvidence,
    CudaDistribution,
    CudaLibrary,
    ExtensionScan,
    LinkedExtension,
    SharedFile,
    entry_from_target,
)
from ..readings.gpu import GpuInventory
from ..readings.host import HostPlatform
from ..readings.torch import FirstLaunch, TorchBuild
from ..readings.triton import PTXAS_FIRST, TritonPtxas
from ..readings.triton import release as _release
from ..verdict import Status, Verdict, fitting

G = 1


def _outside_torch(path: Optional[str]) -> str:
    """``path`` when an import of torch failed in a file of another package (a broken pynvml that
    torch imports, say), else ''."""
    if not path or path.startswith("<"):
        return ""
    parts = PurePath(path).parts
    return "" if "torch" in parts or "torchgen" in parts else path


def shadow_fix(path: str) -> str:
    """What to do about a foreign module named pynvml (not the driver, not torch)."""
    return (f"remove or rename {path}: a module named pynvml there hides nvidia-ml-py's, which torch "
            f"imports too (look in the current folder and on PYTHONPATH); reinstalling torch or the driver "
            f"will not help")


def _is_pynvml(path: str) -> bool:
    """True for the file of a module named pynvml (``pynvml.py`` or ``pynvml/__init__.py``)."""
    parts = PurePath(path).parts
    return parts[-1:] == ("pynvml.py",) or parts[-2:] == ("pynvml", "__init__.py")


INDEX_OF_MAJOR = {12: "cu128", 13: "cu130"}  # PyTorch's wheel index for a CUDA major (12.8 runs on any 12.x driver)


def index_fix(major: Optional[int]) -> str:
    """Reinstall torch from the index of the CUDA major the run expects (13 where none is known)."""
    major = major if major in INDEX_OF_MAJOR else 13
    return (f"reinstall torch built for CUDA {major}: pip install --force-reinstall torch "
            f"--index-url https://download.pytorch.org/whl/{INDEX_OF_MAJOR[major]} (or use a matched NGC container)")


FIX_INDEX = index_fix(13)


FIX_NO_TORCH = (
    "run the preflight with the Python of the environment you train in (its torch is the one to check), "
    "or install torch built for CUDA {major}: pip install torch --index-url https://download.pytorch.org/whl/{index}"
)


def expected_major(inventory: Optional[GpuInventory], profile: Profile) -> tuple[Optional[int], str]:
    """The CUDA major this environment must match, and where that figure came from."""
    if inventory is not None and inventory.cuda_driver_major is not None:
        return inventory.cuda_driver_major, f"driver {inventory.driver_version} supports CUDA {inventory.cuda_driver_text}"
    if profile.cuda_major is not None:
        return profile.cuda_major, f"no driver read; the {profile.key} profile expects CUDA {profile.cuda_major}"
    return None, ""


def _expected_short(inventory: Optional[GpuInventory], profile: Profile) -> str:
    """``the driver's CUDA 13.0`` or ``the gb10 profile's CUDA 13 (no driver read)``, for the line."""
    if inventory is not None and inventory.cuda_driver_major is not None:
        return f"the driver's CUDA {inventory.cuda_driver_text}"
    return f"the {profile.key} profile's CUDA {profile.cuda_major} (no driver read)"


def conda_first(env: Optional[ContainerEvidence], fix: str) -> str:
    """A torch conda installed is removed by conda before pip puts the right one in (two torches in one
    environment, the last installed winning, is what G9 warns of)."""
    if env is not None and env.python_env == "conda" and env.conda_torch:
        name = env.conda_torch.split("-", 1)[0]
        return f"remove conda's {env.conda_torch.rsplit('-', 1)[0]} first (conda remove --force {name}), then " + fix
    return fix


def judge_torch(build: TorchBuild, inventory: Optional[GpuInventory], profile: Profile,
                env: Optional[ContainerEvidence] = None) -> Verdict:
    verdict = _judge_torch(build, inventory, profile)
    if not verdict.status.needs_fix:
        return verdict
    major = expected_major(inventory, profile)[0] or 13
    changes = [remedies.Change("install", "torch", f"https://download.pytorch.org/whl/{INDEX_OF_MAJOR.get(major, 'cu130')}")]
    if env is not None and env.python_env == "conda" and env.conda_torch:
        changes.insert(0, remedies.Change("uninstall", env.conda_torch.split("-", 1)[0], "conda"))
    fix = conda_first(env, verdict.fix) if "download.pytorch.org" in verdict.fix else verdict.fix
    return Verdict(G, verdict.status, verdict.summary, fix=fix, detail=verdict.detail,
                   readings={**verdict.readings, "remedy": remedies.changes_json(changes)}
                   if "download.pytorch.org" in verdict.fix else verdict.readings)


def _judge_torch(build: TorchBuild, inventory: Optional[GpuInventory], profile: Profile) -> Verdict:
    major, source = expected_major(inventory, profile)
    readings = {"torch": build.version, "torch_cuda": build.cuda, "expected_cuda_major": major, "source": source}
    if not build.installed:
        if major is None:
            return Verdict(G, Status.SKIP, "torch is not installed: no torch CUDA build to check", readings=readings)
        return Verdict(G, Status.WARN, "torch is not installed: the CUDA ABI of torch cannot be checked",
                       fix=FIX_NO_TORCH.format(major=major, index=INDEX_OF_MAJOR.get(major, "cu130")),
                       readings=readings)
    shadow = inventory.pynvml_shadow if inventory is not None else None
    if build.worker_problem:
        if shadow:  # torch imports pynvml: the foreign one is the likelier culprit
            return Verdict(G, Status.FAIL, f"import torch crashed or hung in a child process: {build.worker_problem} "
                                           f"(torch imports pynvml, and {shadow} is not nvidia-ml-py's)"[:300],
                           fix=shadow_fix(shadow), readings=readings)
        return Verdict(G, Status.FAIL, f"import torch crashed or hung in a child process: {build.worker_problem}",
                       fix=index_fix(major), readings=readings)
    if build.import_error:
        elsewhere = _outside_torch(build.import_error_file)
        if elsewhere and shadow and _is_pynvml(elsewhere):
            return Verdict(G, Status.FAIL, f"import torch fails in {elsewhere}: {build.import_error}"[:300],
                           fix=shadow_fix(elsewhere), readings=readings)
        if elsewhere:
            return Verdict(G, Status.FAIL, f"import torch fails in {elsewhere}: {build.import_error}"[:300],
                           fix=f"repair or remove the package that {elsewhere} belongs to (pip show -f lists a "
                               f"package's files; pip uninstall removes it): it is not part of torch, and "
                               f"reinstalling torch will not help",
                           readings=readings)
        hint = " (a CUDA 12 build on a CUDA 13 system)" if "so.12" in build.import_error else ""
        return Verdict(G, Status.FAIL, f"import torch fails{hint}: {build.import_error}"[:300], fix=index_fix(major),
                       readings=readings)
    if build.cuda_major is None:
        if major is None:
            return Verdict(G, Status.SKIP, f"torch {build.version} is a CPU build and no NVIDIA driver is present",
                           readings=readings)
        return Verdict(G, Status.FAIL, f"torch {build.version} is a CPU build; {source}", fix=index_fix(major),
                       readings=readings)
    if major is None:
        return Verdict(G, Status.SKIP,
                       f"torch {build.version} is built for CUDA {build.cuda}; no NVIDIA driver to compare with",
                       detail="--spark-profile gb10 judges it against a Spark's CUDA 13", readings=readings)
    short = _expected_short(inventory, profile)
    if build.cuda_major == major:
        return Verdict(G, Status.PASS, f"torch {build.version} (CUDA {build.cuda}) matches {short}",
                       detail=source, readings=readings)
    if build.cuda_major > major or profile.key == "gb10":
        return Verdict(G, Status.FAIL, f"torch {build.version} is built for CUDA {build.cuda} but {source}",
                       fix=index_fix(major), readings=readings)
    return Verdict(G, Status.WARN, f"torch {build.version} is built for CUDA {build.cuda}, older than {short}",
                   detail=f"{source}: torch runs through backward compatibility, but extensions built for the "
                          "driver's CUDA will not match it",
                   fix=index_fix(major), readings=readings)


# -- extensions: will each package that uses CUDA load? ----------------------------------------------
PYTORCH = ("torch", "torchvision", "torchaudio")
# Libraries outside the CUDA toolkit that a package often uses in one optional module (cupy's nccl):
# missing alone, they are noted, not failed. torch's own check fails an import they break.
ADD_ONS = ("nccl", "cudnn", "cusparseLt", "cufile", "nvshmem_host")
MULTI_BUILD_OVERRIDE = {"bitsandbytes": "BNB_CUDA_VERSION"}  # the variable that picks another build


@dataclass
class Package:
    """The files of one distribution that use CUDA (or one file no RECORD names), with its metadata."""

    name: str
    dist: Optional[CudaDistribution]
    files: list[LinkedExtension] = field(default_factory=list)


@dataclass
class Finding:
    """What one package will do: its status, the CUDA major it uses, a clause for the line, a fix."""

    package: str
    status: Status
    major: Optional[int]
    clause: str  # "cupy-cuda12x: CUDA 12 libraries not found: libcublas.so.12 +5"
    short: str  # "cupy-cuda12x (libcublas.so.12 +5 not found)", for a list of several
    fix: str = ""
    detail: dict = field(default_factory=dict)
    more: str = ""  # what the -v block adds under the line (the parts that cannot run here, their users)
    changes: tuple = ()  # the fix's machine form (readings.remedies.Change), where it has one


@dataclass
class Context:
    """What every package is judged against."""

    expected: Optional[int]  # the driver's CUDA major, else the profile's
    expect_text: str  # "the driver supports CUDA 13.0" / "the gb10 profile expects CUDA 13"
    local: bool  # this machine is the one judged (a driver was read)
    capability: Optional[tuple[int, int]]
    torch_cuda: Optional[str]
    overrides: dict[str, str]
    resolved: bool
    driver_cuda: Optional[tuple[int, int]] = None  # the driver's CUDA (13, 0); PTX newer than it is refused
    spark: bool = False  # judged as a Spark (gb10 profile or its GPU): the user bought the GPU


def packages(scan: ExtensionScan) -> list[Package]:
    """The scan's CUDA users grouped by distribution; NVIDIA library wheels are never among them."""
    out: dict[str, Package] = {}
    for ext in scan.linked:
        name = ext.distribution or f"(no distribution) {ext.path}"
        dist = scan.distribution(ext.distribution)
        if dist is not None and dist.library_wheel:
            continue
        out.setdefault(name, Package(name, dist)).files.append(ext)
    for dist in scan.distributions:  # CUDA users by their metadata alone (they load CUDA at run time)
        if dist.library_wheel or dist.name in out:
            continue
        if _framework(dist) or (dist.shared_objects and (dist.name_major is not None or dist.requires_majors)):
            out[dist.name] = Package(dist.name, dist)
    return list(out.values())


def _framework(dist: Optional[CudaDistribution]) -> bool:
    return dist is not None and dist.name.lower() in cuda_libs.GPU_FRAMEWORKS


def _major(text: Optional[str]) -> Optional[int]:
    try:
        return int(str(text).split(".")[0]) if text else None
    except ValueError:
        return None


def _override_major(value: str) -> Optional[int]:
    """BNB_CUDA_VERSION=130 -> 13 (also 13.0)."""
    digits = value.replace(".", "").strip()
    return cuda_libs.tag_major(digits) if digits.isdigit() and 2 <= len(digits) <= 3 else None


def builds(pkg: Package) -> dict[str, list[LinkedExtension]]:
    """Several builds of one library picked at run time: files of one folder whose names differ only
    by a CUDA build tag (libbitsandbytes_cuda121.so, _cuda130.so). Key: the name with the tag taken out."""
    groups: dict[str, list[LinkedExtension]] = {}
    for ext in pkg.files:
        if ext.build_tag:
            key = os.path.join(os.path.dirname(ext.path), os.path.basename(ext.path).replace(ext.build_tag, "{}", 1))
            groups.setdefault(key, []).append(ext)
    return {k: v for k, v in groups.items() if len({e.build_tag for e in v}) > 1}


def _tag_major(ext: LinkedExtension) -> int:
    majors = {lib.major for lib in ext.needs if lib.major is not None}
    if len(majors) == 1:
        return majors.pop()
    found = cuda_libs.build_tag(ext.build_tag or "")
    return found[1] if found else 0


def _pick(group: list[LinkedExtension], major: int, version: Optional[str]) -> Optional[LinkedExtension]:
    """The build a run of CUDA ``major`` loads: the exact version's tag (13.0 -> cuda130) when there is
    one, else the newest build of that major."""
    same = sorted((e for e in group if _tag_major(e) == major), key=lambda e: e.build_tag or "")
    if not same:
        return None
    digits = (version or "").replace(".", "")
    exact = [e for e in same if digits and (e.build_tag or "").endswith(digits)]
    return exact[0] if exact else same[-1]


def _available(lib: CudaLibrary, major: Optional[int], ctx: Context) -> bool:
    """A library counts as found where this machine is the one judged; judged for another machine (a
    profile, no driver), only inside the Python environment, and the profile's CUDA libraries are
    taken as that machine's own."""
    if ctx.local:
        return lib.found is not None
    if (lib.found is not None and lib.in_environment) or ctx.expected is None:
        return True
    return major is not None and major == ctx.expected and lib.major in (None, ctx.expected)


def _runs_on(target: str, capability: tuple[int, int]) -> bool:
    entry = entry_from_target(target)
    if entry is None:
        return False
    have = capability[0] * 10 + capability[1]
    if entry.suffix == "a":
        return entry.sm == have
    same_family = entry.sm // 10 == capability[0] and entry.sm <= have
    if entry.kind == "ptx" and not entry.suffix:
        return entry.sm <= have
    return same_family


def _kernel_note(targets: list[str], capability: Optional[tuple[int, int]]) -> tuple[Optional[bool], str]:
    """(do its kernels run on this GPU, a few words); (None, '') when there is nothing to tell."""
    if not targets or capability is None:
        return None, ""
    sm = f"sm_{capability[0]}{capability[1]}"
    runs = [t for t in targets if _runs_on(t, capability)]
    if not runs:
        return False, f"no kernel for {sm} (it has {', '.join(targets[:3])}{' …' if len(targets) > 3 else ''})"
    cubins = [t for t in runs if t.startswith("sm_")]
    if cubins:
        return True, f"its kernels include {cubins[-1]}, which runs on {sm}"
    return True, f"its kernels reach {sm} only through PTX {runs[-1]} (compiled at first use)"


def _targets(pkg: Package, only: Optional[LinkedExtension], others: set[str]) -> list[str]:
    found: set[str] = set()
    for targets in _mine(pkg.dist.kernels if pkg.dist else {}, only, others).values():
        found.update(targets)
    return sorted(found, key=lambda t: (t.startswith("compute"), entry_from_target(t).sm if entry_from_target(t)
                                        else 0, t))


def _mine(by_file: dict, only: Optional[LinkedExtension], others: set[str]) -> dict:
    """The entries of ``by_file`` (keyed by a file of the RECORD) of the build judged: ``only`` that file,
    else every file but the other builds."""
    out = {}
    for rel, value in by_file.items():
        path = rel.replace("\\", "/")
        if only is not None and not only.path.endswith(path):
            continue
        if only is None and any(o.endswith(path) for o in others):
            continue
        out[path] = value
    return out


def _kernels(pkg: Package, only: Optional[LinkedExtension], others: set[str],
             ctx: Context) -> tuple[Optional[bool], str, dict]:
    """(does its GPU code run on this GPU, a few words for the line, what the report keeps). Units
    read: each unit judged by the cubin and PTX rules (``gpu_code``); an older snapshot's targets
    alone: any target that runs."""
    units = _mine(pkg.dist.units if pkg.dist else {}, only, others)
    if not units or ctx.capability is None:
        ok, note = _kernel_note(_targets(pkg, only, others), ctx.capability)
        return ok, note, {}
    seen = gpu_code.view(units, ctx.capability, ctx.driver_cuda)
    sm = f"sm_{ctx.capability[0]}{ctx.capability[1]}"
    report = {"units": seen.units, "units_for_this_gpu": seen.runnable}
    if seen.refused:
        report["ptx_refused"] = seen.refused
    if seen.other_gpus:
        report["other_gpus_only"] = {os.path.basename(k): v for k, v in seen.other_gpus.items()}
    have = _first(seen.targets, 3)
    if not seen.runnable:
        why = f"; {seen.refused[0]}" if seen.refused else ""
        return False, f"no kernel for {sm} (it has {have}{why})", report
    if not seen.runs:
        return False, (f"kernels for {sm} in {seen.general_runnable} of {seen.general} units only "
                       f"(it has {have})"), report
    if seen.cubins:
        note = f"its kernels include {seen.cubins[-1]}, which runs on {sm}"
    else:
        isa = seen.ptx[-1].split("@")
        note = (f"its kernels reach {sm} only through PTX {isa[0]}" + (f" (ISA {isa[1]}, " if len(isa) > 1 else " (")
                + "compiled at first use)")
    if seen.other_gpus:
        parts = [f"{os.path.basename(k).split('.')[0]} ({', '.join(v)})" for k, v in sorted(seen.other_gpus.items())]
        report["note"] = f"kernels for other GPUs only: {'; '.join(parts)}"
    if seen.refused and seen.cubins:
        report["note_ptx"] = f"{seen.refused[0]}: its cubins run instead"
    dead = dead_parts(pkg, seen)
    if dead:
        report["parts_without_kernels"] = {d.name: d.to_json() for d in dead}
    return True, note, report


# -- parts: a package's files with GPU code, one feature each -----------------------------------------
# A GPU architecture tag at the end of a file's name (fused_moe_120, gemm_sm120, fp4_quantization_120f):
# files that differ only by it are one feature's builds for different GPUs, the package loading the one
# for the GPU (FlashInfer's fused_moe_100 beside fused_moe_120).
SM_TAG = re.compile(r"^(?P<base>.+?)_(?:sm_?)?(?P<sm>\d{2,3})(?P<suffix>[af]?)$")
KNOWN_SMS = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 107, 110, 120, 121}


def gpu_tag(stem: str) -> Optional[tuple[str, str]]:
    """(the feature's name, the GPU it is built for) when a file's name ends in a GPU tag:
    ``fused_moe_120`` -> ("fused_moe", "sm_120"); None for ``moe_utils``."""
    match = SM_TAG.match(stem)
    if match is None or int(match.group("sm")) not in KNOWN_SMS:
        return None
    return match.group("base"), f"sm_{match.group('sm')}{match.group('suffix')}"


@dataclass
class DeadPart:
    """A file of a package whose GPU code has no unit for this GPU, and what that means for the package."""

    key: str
    name: str  # moe_utils
    module: str  # flashinfer_jit_cache.jit_cache.moe_utils.moe_utils
    targets: list[str]
    how: str  # "loaded at import" | "optional" | "covered" | "for another GPU"
    users: list[str] = field(default_factory=list)
    known: bool = False  # the sources were read for its users (a snapshot of an older suite: not)
    by: str = ""  # the build for this GPU that covers it (fused_moe_120)

    def to_json(self) -> dict:
        out = {"file": self.key, "targets": self.targets, "how": self.how, "users": self.users}
        return {**out, **({"covered_by": self.by} if self.by else {}),
                **({} if self.known else {"users_known": False})}


def dead_parts(pkg: Package, seen: gpu_code.CodeView) -> list[DeadPart]:
    """The package's files with GPU code none of whose units runs here, each judged: loaded when the
    package is imported (its sources import it in code the import runs: the package cannot work here),
    covered (a file of the same feature built for this GPU runs: the package picks it), for another GPU
    (its name carries another GPU's tag and nothing of the feature is built for this one), or
    optional (what loads it breaks here, the rest of the package does not)."""
    if len(seen.dead) + len(seen.live) < 2 or not seen.dead:
        return []
    parts = pkg.dist.parts if pkg.dist else {}
    live = {os.path.basename(k).split(".")[0] for k in seen.live}
    tags = {os.path.basename(k).split(".")[0]: gpu_tag(os.path.basename(k).split(".")[0])
            for k in list(seen.live) + list(seen.dead)}
    out = []
    for key, targets in sorted(seen.dead.items()):
        name = os.path.basename(key).split(".")[0]
        use = parts.get(key)
        module = use.module if use is not None else key.rsplit(".so", 1)[0].split(".")[0].replace("/", ".")
        tag = tags.get(name)
        siblings = [other for other, t in tags.items() if tag and t and t[0] == tag[0] and other != name]
        cover = [other for other in siblings if other in live]
        if cover:
            how, by = "covered", cover[0]
        elif use is not None and use.at_import:
            how, by = "loaded at import", ""
        elif tag:
            how, by = "for another GPU", ""
        else:
            how, by = "optional", ""
        out.append(DeadPart(key, name, module, targets, how, list(use.users) if use else [],
                            known=use is not None and use.searched, by=by))
    return out


def judge_package(pkg: Package, ctx: Context) -> Finding:
    groups = builds(pkg)
    grouped = {e.path for g in groups.values() for e in g}
    singles = [e for e in pkg.files if e.path not in grouped]
    chosen: list[LinkedExtension] = []
    picked = []  # (group key, file picked, majors held, the version it was picked for)
    for key, group in sorted(groups.items()):
        held = sorted({_tag_major(e) for e in group})
        variable = MULTI_BUILD_OVERRIDE.get(pkg.name)
        forced = _override_major(ctx.overrides[variable]) if variable and variable in ctx.overrides else None
        run = forced or _major(ctx.torch_cuda) or ctx.expected
        if run is None:
            return Finding(pkg.name, Status.INFO, None, f"{pkg.name} holds builds for CUDA {_list(held)}",
                           f"{pkg.name} (builds for CUDA {_list(held)})", detail={"builds": held})
        version = ctx.overrides.get(variable or "") if forced else ctx.torch_cuda
        pick = _pick(group, run, version)
        if pick is None:
            why = f"{variable}={ctx.overrides[variable]}" if forced else (
                f"torch is built for CUDA {ctx.torch_cuda}" if _major(ctx.torch_cuda) else ctx.expect_text)
            return Finding(pkg.name, Status.FAIL, run,
                           f"{pkg.name} has no CUDA {run} build (it holds {_list(held)}; {why})",
                           f"{pkg.name} (no CUDA {run} build)",
                           fix=f"install a release of {pkg.name} that ships a CUDA {run} build "
                               f"(pip install -U {pkg.name}), or build it from source against CUDA {run}",
                           detail={"builds": held})
        picked.append((key, pick, held, version))
        chosen.append(pick)
    return _one_remedy(pkg, _judge_files(pkg, singles + chosen, ctx, picked), ctx)


def _one_remedy(pkg: Package, finding: Finding, ctx: Context) -> Finding:
    """A package the remedies module names gets its one remedy, whatever kept it from running
    (flash-attn: uninstall it, use SDPA, as G2 says), not a build of it."""
    remedy = remedies.for_package(pkg.name, ctx.capability)
    if remedy is None or not finding.status.needs_fix:
        return finding
    return Finding(finding.package, finding.status, finding.major, finding.clause, finding.short, fix=remedy.text,
                   detail=finding.detail, more=finding.more, changes=remedy.changes)


def _evidence(pkg: Package, files: list[LinkedExtension]) -> tuple[list[int], str]:
    """(the CUDA majors it uses, the evidence that decided): what a
    binary for this machine carries outranks what its metadata declares. In order: the libraries it
    links (DT_NEEDED), names it loads (dlopen strings), its build record, its PTX's ISA version (the
    toolkit that built it), its RPATH/RUNPATH into a CUDA folder; then its metadata (requirements,
    its name or version)."""
    dist = pkg.dist
    linked = sorted({lib.major for e in files for lib in e.needs if lib.major is not None}
                    | {m for e in files for m in e.cuda_libs.values()})
    if linked:
        names = sorted({lib.soname for e in files for lib in e.needs if lib.major is not None} | {
            s for e in files for s in e.cuda_libs})
        return linked, f"it links {_first(names, 2)}"
    strings = sorted({lib.major for e in files for lib in e.loads if lib.major is not None})
    if strings:
        names = sorted({lib.soname for e in files for lib in e.loads if lib.major is not None})
        return strings, f"it loads {_first(names, 2)} by name"
    info = dist.build_info if dist else {}
    built = _major(info.get("cuda_version"))
    if built and info.get("cuda_build") != "False":
        return [built], f"its {info.get('file', 'build record')} says CUDA {info['cuda_version']}"
    isas = sorted({t.split("@")[1] for by_key in (dist.units.values() if dist else ()) for key in by_key
                   for t in key.split() if "@" in t}, key=lambda v: tuple(int(x) for x in v.split(".")))
    ptx = sorted({cuda[0] for v in isas if (cuda := cuda_libs.ptx_cuda(v))})
    if ptx:
        return ptx, f"its PTX is ISA {isas[-1]} (built with CUDA {ptx[-1]})"
    rpath = sorted({m for e in files for m in e.rpath_majors})
    if rpath:
        return rpath, f"its RPATH/RUNPATH names a CUDA {_list(rpath)} folder"
    if dist and dist.requires_majors:
        return sorted(set(dist.requires_majors.values())), f"it requires {_first(sorted(dist.requires_majors), 2)}"
    if dist and dist.name_major:
        return [dist.name_major], f"its name or version says CUDA {dist.name_major}"
    return [], ""


def _cpu_only(pkg: Package, files: list[LinkedExtension], ctx: Context) -> Optional[Finding]:
    """A package people install for the GPU, in a build with no GPU code and no CUDA library (PyPI's
    tensorflow and open3d for aarch64): it will never use the GPU. WARN on a Spark (its GPU is why it
    was bought), INFO elsewhere."""
    dist = pkg.dist
    if not _framework(dist):
        return None
    info = dist.build_info
    says = info.get("cuda_build") == "False"
    uses = any(e.needs or e.loads or e.rpath_majors for e in files) or dist.units or dist.kernels
    if uses and not says:
        return None
    why = f"its {info['file']} says it is not a CUDA build" if says else "it holds no GPU code and no CUDA library"
    status = Status.WARN if ctx.spark else Status.INFO
    return Finding(pkg.name, status, None, f"{pkg.name} {dist.version} is a CPU-only build: it will never use the GPU",
                   f"{pkg.name} (CPU-only build)", fix=FRAMEWORK_FIX.get(dist.name.lower(), ""),
                   detail={"mode": "cpu only", "evidence": why, "build_info": dict(info)})


# How to get a GPU build of a framework PyPI ships CPU-only for some machines.
FRAMEWORK_FIX = {
    "tensorflow": ("run TensorFlow in NVIDIA's container for it (nvcr.io/nvidia/tensorflow), whose TensorFlow is a "
                   "CUDA build for this machine: PyPI's tensorflow for aarch64 is built without CUDA, and its "
                   "and-cuda extra does not change that"),
    "open3d": ("build open3d from source with -DBUILD_CUDA_MODULE=ON and CUDA 13's nvcc, e.g. in an NGC container "
               "(nvcr.io/nvidia/pytorch:25.10-py3 or later): PyPI's open3d for aarch64 is built without CUDA"),
}


def _judge_files(pkg: Package, files: list[LinkedExtension], ctx: Context, picked: list) -> Finding:
    cpu = _cpu_only(pkg, files, ctx)
    if cpu is not None:
        return cpu
    dist = pkg.dist
    direct = [e for e in files if e.needs or e.cuda_libs]
    detail: dict = {}
    majors, evidence = _evidence(pkg, direct or files)
    binary = bool(direct) or any(e.loads or e.rpath_majors for e in files) or bool(dist and dist.units) \
        or bool(dist and dist.build_info.get("cuda_build") == "True")  # its binaries show it uses CUDA
    if direct:
        mode = "links"
        libs = [lib for e in direct for lib in e.needs]
        if not ctx.resolved:  # an older snapshot: only the sonames that name a major were recorded
            libs = [CudaLibrary(s, m) for e in direct for s, m in e.cuda_libs.items()]
    else:
        mode = "loads at run time"
        libs = [lib for e in files for lib in e.loads] + (dist.declared if dist else [])
        libs += [lib for e in files if set(e.rpath_majors) & set(majors) for lib in e.rpath_libs]
    libs = list({lib.soname: lib for lib in libs}.values())
    major = majors[0] if len(majors) == 1 else (ctx.expected if ctx.expected in majors else
                                                 (majors[-1] if majors else None))
    selected = [p[1] for p in picked]
    words = [_build_words(pkg, p[1], p[3]) for p in picked]
    label = pkg.name + "".join(f" ({short})" for _, short in words)
    missing = sorted((lib for lib in libs if not _available(lib, major, ctx)) if ctx.resolved else [],
                     key=lambda lib: (lib.major is None, lib.soname))
    detail["not_found"] = [lib.soname for lib in missing]
    named = {lib.soname for e in files for lib in e.loads + e.rpath_libs}  # what its binaries name
    core = [lib for lib in missing if lib.soname in named and _core(lib)]
    if mode != "links" and len(missing) < len(libs) and not core:
        missing = []  # a package that loads by name needs one of them, not all (the others may be optional)
    optional = set(dist.optional) if dist else set()  # an extra the user did not choose brings them
    missing = [lib for lib in missing if not _add_on(lib) and lib.soname not in optional]
    others = {e.path for p in picked for e in pkg.files if e.build_tag and e is not p[1]}
    only = selected[0] if len(files) == 1 and files == selected else None
    ok_kernels, note, kernel_report = _kernels(pkg, only, others, ctx)
    detail.update({"mode": mode, "cuda_majors": majors, "evidence": evidence,
                   "libraries": {lib.soname: (f"{lib.found} ({lib.via})" if lib.found else None) for lib in libs},
                   "builds": {os.path.basename(k).replace("{}", "*"): held for k, _, held, _ in picked},
                   "selected": [os.path.basename(p.path) for p in selected], "kernels": note, **kernel_report})
    if dist and dist.brought_by:
        detail["brought_by"] = dist.brought_by
    mismatched = ctx.expected is not None and bool(majors) and ctx.expected not in majors
    if ok_kernels is False and ctx.resolved:  # no kernel for this GPU: its libraries would not help, say it first
        built = f"is built for CUDA {major} with {note}" if mismatched else f"has {note}"
        sm = f"sm_{ctx.capability[0]}{ctx.capability[1]}" if ctx.capability else ""
        return Finding(pkg.name, Status.FAIL, major, f"{label} {built}",
                       f"{pkg.name} ({f'CUDA {major}, ' if mismatched else ''}{note.split(' (')[0]})",
                       fix=_remedy(pkg, ctx.expected, ctx.capability) if mismatched else
                       build_for_gpu(_top(pkg), ctx.capability, major), detail=detail,
                       changes=() if mismatched else (remedies.Change("build", _top(pkg), sm),))
    if missing and binary:
        of = f"CUDA {major} " if major else "CUDA "
        what = f"{of}libraries it loads" if mode != "links" else f"{of}libraries"
        clause = _fit(f"{label}: {what} not found: ", [lib.soname for lib in missing])
        return Finding(pkg.name, Status.FAIL, major, clause,
                       f"{pkg.name} ({_first([lib.soname for lib in missing], 1)} not found)",
                       fix=_fix_missing(pkg, major, missing, ctx, ok_kernels), detail=detail)
    if not ctx.resolved and mismatched:
        return Finding(pkg.name, Status.FAIL, major,
                       f"{label} links CUDA {_list(majors)} ({_first(sorted({lib.soname for lib in libs}), 2)})",
                       f"{pkg.name} ({', '.join(sorted({lib.soname for lib in libs}))})",
                       fix=_remedy(pkg, ctx.expected, ctx.capability), detail=detail)
    if mismatched:
        installed = libs and not missing and not optional.intersection(detail["not_found"])
        where = "its libraries are installed" if installed else (
            "loaded by name at run time" if binary else "by its metadata alone")
        text = f"{label} uses CUDA {major} ({where}); {ctx.expect_text}"
        fix = _remedy(pkg, ctx.expected, ctx.capability) + (f"; as it is, {note}" if note else "")
        return Finding(pkg.name, Status.WARN, major, text, f"{pkg.name} (CUDA {major})", fix=fix, detail=detail)
    parts = _parts_finding(pkg, label, major, kernel_report, ctx, detail)
    if parts is not None:
        return parts
    if len(words) == 1:
        clause = f"{pkg.name} {words[0][0]}"
    elif major is None:  # it names only libraries numbered on their own (libnccl.so.2)
        clause = f"{label} uses {_first(sorted(lib.soname for lib in libs), 2) or 'CUDA'}"
    else:
        clause = f"{label} uses CUDA {major}"
    return Finding(pkg.name, Status.PASS, major, clause, label, detail=detail)


def _parts_finding(pkg: Package, label: str, major: Optional[int], report: dict, ctx: Context,
                   detail: dict) -> Optional[Finding]:
    """A package whose core runs here but one of whose parts has no kernel for this GPU: FAIL when its
    import loads that part, WARN when only a feature loads it (the line names the part, the -v block
    what loads it); None when every such part is covered or built for another GPU by name."""
    dead = report.get("parts_without_kernels") or {}
    sm = f"sm_{ctx.capability[0]}{ctx.capability[1]}" if ctx.capability else "this GPU"
    required = {n: d for n, d in dead.items() if d["how"] == "loaded at import"}
    optional = {n: d for n, d in dead.items() if d["how"] == "optional"}
    bad = required or optional
    if not bad:
        return None
    status = Status.FAIL if required else Status.WARN
    names = sorted(bad)
    top = _top(pkg)

    def who(d: dict) -> str:
        return ", ".join(d["users"][:2]) if d["users"] else ""

    if len(names) == 1:
        one = bad[names[0]]
        targets = ", ".join(one["targets"][:3])
        if required:
            clause = fitting(G, status, f"{label}: {names[0]}, which importing it loads, has no kernel for {sm}",
                             f"{pkg.name}: {names[0]}, loaded at import, has no kernel for {sm}")
        else:
            clause = fitting(G, status, f"{label}: {names[0]} has no kernel for {sm} ({targets} only)",
                             f"{pkg.name}: {names[0]} has no kernel for {sm}")
    else:
        clause = _fit(f"{pkg.name}: {len(names)} parts have no kernel for {sm}: ", names)
    lines = []
    for name in names:
        d = bad[name]
        users = who(d)
        loads = (f"{users} load{'s' if len(d['users']) == 1 else ''} it" if users else
                 "no Python module of the package names it" if d.get("users_known", True) is not False else
                 "what loads it is not known (its sources were not searched)")
        when = "when the package is imported" if d["how"] == "loaded at import" else "when that feature is first used"
        lines.append(f"{name} ({d['file']}: {', '.join(d['targets'][:4])}): {loads}, {when}")
    others = [f"{n} ({d['how']}{', by ' + d['covered_by'] if d.get('covered_by') else ''})"
              for n, d in sorted(dead.items()) if n not in bad]
    more = "; ".join(lines) + ("; the rest: " + ", ".join(others) if others else "") + (
        f"; what loads {'them' if len(names) > 1 else 'it'} dies with 'no kernel image is available' on {sm}")
    remedy = remedies.for_package(pkg.name, ctx.capability)
    if remedy is not None:
        fix, changes = remedy.text, remedy.changes
    else:
        users = sorted({u for n in names for u in bad[n]["users"]})
        fix = (f"use only {top}'s features that do not load {', '.join(names[:3])} on this GPU"
               + (f" ({', '.join(users[:3])} load{'s' if len(users) == 1 else ''} "
                  f"{'them' if len(names) > 1 else 'it'})" if users else "")
               + "; to use them, " + build_for_gpu(top, ctx.capability, major))
        changes = (remedies.Change("build", top, sm),)
    short = f"{pkg.name} ({names[0]}{' +' + str(len(names) - 1) if len(names) > 1 else ''} without a kernel for {sm})"
    return Finding(pkg.name, status, major, clause, short, fix=fix, detail=detail, more=more, changes=changes)


CORE = ("cudart", "cublas", "cublasLt", "nvrtc", "nvJitLink")  # a loader that names one of these cannot work without it


def _core(lib: CudaLibrary) -> bool:
    found = cuda_libs.library(lib.soname)
    return found is not None and found[0] in CORE


def _add_on(lib: CudaLibrary) -> bool:
    found = cuda_libs.library(lib.soname)
    return found is not None and (found[0] in ADD_ONS or found[0].startswith("cudnn"))


def _build_words(pkg: Package, pick: LinkedExtension, version: Optional[str]) -> tuple[str, str]:
    """Which build a package of several will load, long and short: ("loads libbitsandbytes_cuda130.so",
    "cuda130 build") when torch (or an override) names the exact version or there is one build of
    that major, else ("holds CUDA 13 builds (cuda130, cuda132)", "cuda130/cuda132 builds")."""
    same = sorted(e.build_tag or "" for e in pkg.files if e.build_tag and _tag_major(e) == _tag_major(pick)
                  and os.path.dirname(e.path) == os.path.dirname(pick.path))
    digits = (version or "").replace(".", "")
    if (digits and (pick.build_tag or "").endswith(digits)) or len(same) == 1:
        return f"loads {os.path.basename(pick.path)}", f"{pick.build_tag} build"
    return f"holds CUDA {_tag_major(pick)} builds ({', '.join(same)})", f"{'/'.join(same)} builds"


def _fit(head: str, names: list[str], width: int = 91) -> str:
    """``head`` and as many of ``names`` as fit in ``width`` columns (one at least), "+N" for the rest."""
    for n in range(min(3, len(names)), 0, -1):
        text = head + _first(names, n)
        if len(text) <= width or n == 1:
            return text
    return head


def _list(majors) -> str:
    return ", ".join(str(m) for m in majors)


def _first(names: list[str], n: int) -> str:
    return ", ".join(names[:n]) + (f" +{len(names) - n}" if len(names) > n else "")


def sibling(name: str, major: int) -> Optional[str]:
    """The distribution's CUDA ``major`` build when PyPI has one by name: the name by the patterns CUDA
    packages use (``-cu12`` -> ``-cu13``, ``cuda12x`` -> ``cuda13x``, ``cuda120`` -> ``cuda130``,
    ``-cuda12-`` -> ``-cuda13-``), checked against PyPI's names (``cuda_builds.NAMES``, written from
    PyPI's list: there is no faiss-gpu-cu13); None when PyPI has none."""
    return next((n for n in cuda_libs.sibling_names(name, major) if n in cuda_builds.NAMES), None)


def _top(pkg: Package) -> str:
    """What the user installed: the package, or the requested distribution that brought it
    (cudf-cu12 brought libcudf-cu12)."""
    dist = pkg.dist
    return dist.brought_by[0] if dist is not None and len(dist.brought_by) == 1 and not dist.requested else pkg.name


def _remedy(pkg: Package, major: Optional[int], capability: Optional[tuple[int, int]] = None) -> str:
    """What a user can do so that ``pkg`` uses CUDA ``major`` (on a GPU of ``capability``): a sentence
    naming only distributions PyPI has."""
    if major is None:
        return f"install {pkg.name} built for the CUDA major the rest of the environment uses"
    name = pkg.name
    if name in PYTORCH:
        return (f"reinstall {name} for CUDA {major}: pip install --force-reinstall {name} "
                f"--index-url https://download.pytorch.org/whl/{INDEX_OF_MAJOR.get(major, f'cu{major}0')}")
    if name.startswith("(no distribution)"):
        path = name.split(" ", 2)[-1]
        return f"rebuild {path} against CUDA {major} or remove it (no installed distribution owns it)"
    if any(_tag_major(e) == major for group in builds(pkg).values() for e in group):
        return (f"reinstall torch for CUDA {major} (pip install --force-reinstall torch --index-url "
                f"https://download.pytorch.org/whl/{INDEX_OF_MAJOR.get(major, f'cu{major}0')}): {name} then loads "
                f"its CUDA {major} build")
    top = _top(pkg)
    for installed in dict.fromkeys((top, name)):
        other = sibling(installed, major)
        if other and other != installed:
            leave = " ".join(dict.fromkeys((installed, name)))
            which = f"the CUDA {major} build of {installed} instead ({name} came with it)" if installed != name \
                else f"its CUDA {major} build instead"
            return f"install {which}: pip uninstall -y {leave} && pip install {other}"
    if name in cuda_libs.VERSIONED_BY_MAJOR:
        return f"install its CUDA {major} release: pip install '{name}>={major},<{major + 1}'"
    return build_yourself(top, major, capability)


def build_for_gpu(name: str, capability: Optional[tuple[int, int]], major: Optional[int]) -> str:
    """The remedy for a build of the right CUDA whose kernels do not reach this GPU."""
    arch = ""
    if capability:
        arch = (f" for sm_{capability[0]}{capability[1]} (CMake: -DCMAKE_CUDA_ARCHITECTURES={capability[0]}"
                f"{capability[1]}; torch extensions: TORCH_CUDA_ARCH_LIST={capability[0]}.{capability[1]})")
    where = (", e.g. in an NGC container: nvcr.io/nvidia/pytorch:25.10-py3 or later ships CUDA 13 and its nvcc"
             if major in (None, 13) else "")
    return (f"build {name} from source{arch}{where}, or look for a release of it with kernels for this GPU "
            f"(pip index versions {name}): this build cannot run its kernels here")


def build_yourself(name: str, major: int, capability: Optional[tuple[int, int]]) -> str:
    """The remedy when PyPI has no CUDA ``major`` build of ``name``: build it for this GPU, where CUDA
    ``major``'s nvcc is (an NGC PyTorch container ships CUDA 13's)."""
    arch = ""
    if capability:
        major_cc, minor_cc = capability
        arch = (f" for sm_{major_cc}{minor_cc} (CMake: -DCMAKE_CUDA_ARCHITECTURES={major_cc}{minor_cc}; "
                f"torch extensions: TORCH_CUDA_ARCH_LIST={major_cc}.{minor_cc})")
    where = (", e.g. in an NGC container: nvcr.io/nvidia/pytorch:25.10-py3 or later ships CUDA 13 and its nvcc"
             if major == 13 else "")
    return f"build {name} from source with CUDA {major}'s nvcc{arch}{where}; PyPI has no CUDA {major} build of it"


def _fix_missing(pkg: Package, major: Optional[int], missing: list[CudaLibrary], ctx: Context,
                 kernels_run: Optional[bool]) -> str:
    """Install what is missing; for a package of another major, its CUDA 13 build first, and keeping
    this build only when some of its kernels can run on the GPU (``kernels_run`` is not False)."""
    wheels = sorted({w for lib in missing if (w := cuda_libs.wheel_for(lib.soname, major))})
    install = f"pip install {' '.join(wheels)}" if wheels else f"install the CUDA {major} toolkit's libraries"
    if ctx.expected is not None and major is not None and major != ctx.expected:
        remedy = _remedy(pkg, ctx.expected, ctx.capability)
        if kernels_run is False:
            return remedy
        return f"{remedy}; or keep this build and add its libraries ({install}): it then runs beside CUDA {ctx.expected}"
    if wheels:
        return f"install the CUDA libraries it needs: {install}"
    return f"install the CUDA {major} toolkit's libraries it needs" if major else "install the CUDA libraries it needs"


def _context(scan: ExtensionScan, inventory: Optional[GpuInventory], profile: Profile) -> Context:
    major, _source = expected_major(inventory, profile)
    driver = inventory is not None and inventory.cuda_driver_major is not None
    if driver:
        text = f"the driver supports CUDA {inventory.cuda_driver_text}"
    elif major is not None:
        text = f"the {profile.key} profile expects CUDA {major}"
    else:
        text = ""
    device = inventory.first if inventory is not None else None
    capability = (device.capability if device is not None and device.capability else None) or profile.capability
    if driver and inventory.cuda_driver_version:
        driver_cuda = (inventory.cuda_driver_version // 1000, inventory.cuda_driver_version % 1000 // 10)
    else:  # judged for another machine: the oldest driver of its CUDA major compiles the least PTX
        driver_cuda = (major, 0) if major is not None else None
    return Context(expected=major, expect_text=text, local=driver, capability=capability,
                   torch_cuda=scan.torch_cuda, overrides=dict(scan.overrides), resolved=scan.resolved,
                   driver_cuda=driver_cuda, spark=profile.key == "gb10" or capability == (12, 1))


# -- built for another CPU --------------------------------------------------------------------------
def machine_of(scan: ExtensionScan, host: Optional[HostPlatform], local: bool = True) -> tuple[Optional[str], str]:
    """The CPU the environment must be built for, and where that came from: the machine the run was
    taken on (``host.platform``, which a replay keeps), else this Python's own build where this machine
    is the one judged; None judged for another machine without a recorded one (wheels scanned here for
    a Spark: this Python is not the Spark's)."""
    if host is not None and host.machine:
        return host.machine, "the machine"
    return (scan.interpreter_machine, "this Python") if local else (None, "")



def _a(word: str) -> str:
    """``an aarch64``, ``an x86_64``, ``a ppc64le``: the article a fix's CPU name takes."""
    return f"{'an' if word[:1].lower() in 'aeiox' else 'a'} {word}"

def foreign_findings(scan: ExtensionScan, host: Optional[HostPlatform], ctx: Context) -> list[Finding]:
    """Shared objects built for another CPU than the machine's (ELF e_machine): they do not load
    ("wrong ELF class", "cannot open shared object file"), whatever CUDA they link. A Python built for
    another CPU (run under emulation) is one finding; otherwise one per distribution."""
    machine, _source = machine_of(scan, host, ctx.local)
    if not machine or not scan.interpreter_machine:
        return []
    if scan.interpreter_machine != machine:
        counts = ", ".join(f"{n} {m}" for m, n in sorted(scan.machines.items()))
        return [Finding("(the interpreter)", Status.FAIL, None,
                        f"this Python is built for {scan.interpreter_machine}, not for this {machine} machine",
                        f"Python ({scan.interpreter_machine})",
                        fix=f"run a Python built for {machine} (the system's python3, or {_a(machine)} build from "
                            "uv, conda or pyenv), create the environment anew with it and reinstall its packages: "
                            f"an emulated {scan.interpreter_machine} Python cannot use this machine's GPU driver",
                        detail={"mode": "another CPU", "machine": machine, "interpreter": scan.interpreter_machine,
                                "shared_objects_by_cpu": dict(scan.machines)},
                        more=f"shared objects by the CPU they are built for: {counts}")]
    by_dist: dict[str, list] = {}
    for obj in scan.foreign:
        if obj.machine != machine:
            by_dist.setdefault(obj.distribution or f"(no distribution) {obj.path}", []).append(obj)
    out = []
    for name, objs in sorted(by_dist.items()):
        cpus = sorted({o.machine for o in objs})
        files = [os.path.basename(o.path) for o in objs]
        label = outside(name)
        if name in PYTORCH:
            fix = index_fix(ctx.expected).replace("reinstall torch", f"reinstall {name} on this {machine} machine", 1)
            fix = fix.replace("install --force-reinstall torch", f"install --force-reinstall {name}", 1)
        elif name.startswith("(no distribution)"):
            fix = f"remove {outside(objs[0].path)} or rebuild it on this machine: no installed distribution owns it"
        else:
            fix = (f"reinstall {label} on this {machine} machine: pip install --force-reinstall --no-deps {label} "
                   f"(pip picks the {machine} wheel); an environment copied from another machine must be built "
                   "anew on this one")
        out.append(Finding(label, Status.FAIL, None,
                           _fit(f"{label}: built for {', '.join(cpus)}, not for this {machine} machine: ",
                                [outside(f) for f in files]),
                           f"{label} ({', '.join(cpus)} build)", fix=fix,
                           detail={"mode": "another CPU", "machine": machine, "files": [o.path for o in objs]},
                           more=f"{label}: {len(objs)} file(s) built for {', '.join(cpus)} (ELF e_machine), "
                                f"e.g. {outside(objs[0].path)}: they do not load on {machine}",
                           changes=(remedies.Change("install", name, "--force-reinstall"),)))
    return out


def judge_extensions(scan: ExtensionScan, inventory: Optional[GpuInventory], profile: Profile,
                     host: Optional[HostPlatform] = None) -> Verdict:
    ctx = _context(scan, inventory, profile)
    foreign = foreign_findings(scan, host, ctx)
    elsewhere = {f.package for f in foreign}
    pkgs = [p for p in packages(scan) if p.name not in elsewhere]
    if ctx.expected is None:  # nothing to compare with: the majority's major stands in, when majors differ
        ctx.expected = _majority([judge_package(p, ctx) for p in pkgs])
        if ctx.expected is not None:
            ctx.expect_text = f"most packages here use CUDA {ctx.expected} (no driver read)"
    if any(f.package == "(the interpreter)" for f in foreign):
        pkgs = []  # nothing of this environment loads here: the interpreter's finding says why
    findings = sorted(foreign + [judge_package(p, ctx) for p in pkgs] + shared_findings(scan.shared_files, ctx),
                      key=lambda f: (-f.status.rank, f.package))
    readings = {
        "shared_objects": scan.shared_objects,
        "scan_seconds": round(scan.seconds, 3),
        "expected_cuda_major": ctx.expected,
        "expected_from": ctx.expect_text or ("the majority of the packages" if ctx.expected else None),
        "torch_cuda": scan.torch_cuda,
        "machine": machine_of(scan, host, ctx.local)[0],
        "packages": {f.package: {"status": f.status.value, "cuda_major": f.major, **f.detail} for f in findings},
        "mismatched": [{"distribution": e.distribution, "path": e.path, "libs": e.cuda_libs}
                       for f in findings if f.status in (Status.FAIL, Status.WARN)
                       for p in pkgs if p.name == f.package for e in p.files],
    }
    worst = findings[0].status if findings else Status.PASS
    bad = [f for f in findings if f.status is worst and worst in (Status.FAIL, Status.WARN)]
    if bad:
        fix = "; ".join(f"for {f.package}, {f.fix}" if len(bad) > 1 else f.fix for f in bad)
        more = "; ".join(f"{f.package}: {f.more}" if len(bad) > 1 else f.more for f in bad if f.more)
        changes = [c for f in bad for c in f.changes]
        if changes:
            readings["remedy"] = remedies.changes_json(changes)
        if len(bad) == 1:
            return Verdict(G, worst, bad[0].clause, fix=fix, detail=more, readings=readings)
        what = "will not load" if worst is Status.FAIL else (
            "hold parts that cannot run here" if all(f.more for f in bad) else
            f"use another CUDA than {ctx.expected}" if not any(f.more for f in bad) else "may not run here")
        return Verdict(G, worst, f"{len(bad)} packages {what}: {_names([f.short for f in bad], 3)}",
                       fix=fix, detail=more, readings=readings)
    users = [f for f in findings if f.status is Status.PASS]
    if not ctx.expect_text:
        by_major: dict[str, list[str]] = {}
        for f in findings:
            if f.status is not Status.INFO:
                by_major.setdefault(f"CUDA {f.major if f.major is not None else '?'}", []).append(f.package)
        parts = [f"{k}: {_names(v, 2).replace('; ', ', ')}" for k, v in sorted(by_major.items())]
        several = [f.clause if not parts else f.short for f in findings if f.status is Status.INFO]
        found = "; ".join(parts + several[:2])
        if not found:  # nothing to compare with a driver, whether one was read or not
            return Verdict(G, Status.INFO, "no package uses CUDA", detail=f"{scan.shared_objects} shared objects read",
                           readings=readings)
        hint = "--spark-profile gb10 judges these packages as a Spark would load them" \
            if profile.key in ("none", "generic") else ""
        return Verdict(G, Status.INFO, f"{found}; no driver to compare with", detail=hint, readings=readings)
    notes = "; ".join(f"{f.clause} ({f.detail.get('evidence', '')})" for f in findings if f.status is Status.INFO)
    if not users:
        return Verdict(G, Status.PASS, f"no package uses CUDA ({scan.shared_objects} shared objects read); "
                                       f"{ctx.expect_text}", detail=notes, readings=readings)
    if len(users) == 1:
        return Verdict(G, Status.PASS, f"{users[0].clause}; {ctx.expect_text}", detail=notes, readings=readings)
    head = f"{len(users)} packages use CUDA {ctx.expected} ({ctx.expect_text})"
    every = "; ".join(f.short for f in users)
    for names in ([f.short for f in users], [f.package for f in users]):  # the builds picked stay in the report
        line = f"{head}: {_names(names, 3)}"
        if len(line) <= 91:
            return Verdict(G, Status.PASS, line, detail=every if _names(names, 3) != every else "",
                           readings=readings)
    # no room for a name: the count says it, every package is in the detail (a not-checked tail still fits)
    return Verdict(G, Status.PASS, head, detail=every, readings=readings)


def outside(text: str) -> str:
    """A string read from the environment (a distribution's name, a RECORD path) as a line may show it:
    credentials masked, control characters escaped."""
    return printable(mask_text(text))


def shared_findings(shared: list[SharedFile], ctx: Context) -> list[Finding]:
    """Library files that distributions of two CUDA majors both install (nvidia-cudnn-cu12 and -cu13:
    nvidia/cudnn/lib/libcudnn.so.9), one finding per pair: FAIL when the copy on disk is not of the
    expected major while its build of that major is installed (torch for CUDA 13 loads cuDNN for CUDA
    12 from there), WARN otherwise (the other major's users load the wrong copy, and uninstalling
    either distribution removes the file both own)."""
    pairs: dict[tuple[str, ...], list[SharedFile]] = {}
    for item in shared:
        pairs.setdefault(tuple(sorted({o.distribution for o in item.owners})), []).append(item)
    out = []
    for names, items in sorted(pairs.items()):
        owners = {o.distribution: o for item in items for o in item.owners}
        disk = {item.on_disk for item in items}
        now = disk.pop() if len(disk) == 1 else None
        folder = os.path.dirname(items[0].path)
        what = os.path.basename(items[0].path) if len(items) == 1 else f"{folder} ({len(items)} files)"
        where = f"the copy on disk is {now}'s" if now else "the copies on disk match neither RECORD, or both"
        right = [n for n in names if owners[n].cuda_major == ctx.expected]
        status = Status.FAIL if right and now and owners[now].cuda_major != ctx.expected else Status.WARN
        keep = right[0] if right else (now or names[-1])
        drop = [n for n in names if n != keep]
        fix = (f"pip uninstall -y {' '.join(drop)} && pip install --force-reinstall --no-deps "
               f"{keep}=={owners[keep].version} (uninstalling one removes the files both own; reinstalling "
               f"puts the CUDA {owners[keep].cuda_major} copy back), and keep what needs CUDA "
               f"{', '.join(str(owners[n].cuda_major) for n in drop)} in an environment of its own")
        label = outside(" and ".join(names))
        what, fix = outside(what), outside(fix)
        out.append(Finding(label, status, owners[keep].cuda_major, f"{label} both install {what}; {where}",
                           f"{label} ({what})", fix="run " + fix,
                           detail={"mode": "same file", "files": [item.path for item in items],
                                   "owners": {n: f"CUDA {owners[n].cuda_major}, {owners[n].version}" for n in names},
                                   "on_disk": {item.path: item.on_disk or item.how for item in items}}))
    return out


def _majority(findings: list[Finding]) -> Optional[int]:
    counts: dict[int, int] = {}
    for f in findings:
        if f.major is not None and f.status is not Status.INFO:
            counts[f.major] = counts.get(f.major, 0) + 1
    if len(counts) < 2:
        return None
    return max(sorted(counts, reverse=True), key=lambda m: counts[m])


def _names(items: list[str], n: int) -> str:
    return "; ".join(items[:n]) + (f"; +{len(items) - n} more" if len(items) > n else "")


def judge_first_launch(launch: FirstLaunch) -> Verdict:
    readings = {"attempted": launch.attempted, "ok": launch.ok, "signal": launch.signal,
                "timed_out": launch.timed_out, "seconds": launch.seconds}
    if not launch.attempted:
        return Verdict(G, Status.SKIP, f"first CUDA launch not tried: {launch.reason}", readings=readings)
    if launch.ok:
        took = f" in {launch.seconds:.2f} s" if launch.seconds is not None else ""
        return Verdict(G, Status.PASS, f"first CUDA kernel ran in a child process{took}", readings=readings)
    if launch.signal:
        what = f"crashed with {launch.signal}"
    elif launch.timed_out:
        what = "hung (killed at the timeout)"
    else:
        what = "failed"
    return Verdict(G, Status.FAIL, f"first CUDA launch {what}: {launch.reason}"[:300], fix=FIX_INDEX,
                   readings=readings)


# -- Triton's ptxas ---------------------------------------------------------------------------------
def judge_triton_ptxas(ptxas: TritonPtxas, inventory: Optional[GpuInventory], profile: Profile) -> Verdict:
    """Can Triton compile kernels for this GPU with the ptxas it runs (rules above)?"""
    device = inventory.first if inventory is not None else None
    capability = (device.capability if device is not None and device.capability else None) or profile.capability
    readings = {"triton": ptxas.version, "location": ptxas.location, "blackwell_from_sm": ptxas.blackwell_from_sm,
                "tools": {t.name: {"env": t.env_var, "env_value": t.env_value,
                                   "release": t.used.release if t.used else None,
                                   "path": t.used.path if t.used else None,
                                   "error": t.used.error if t.used else None} for t in ptxas.tools},
                "others": {o.path: o.release or o.error for o in ptxas.others}}
    if not ptxas.installed:
        return Verdict(G, Status.INFO, "triton is not installed: no Triton kernel is compiled here", readings=readings)
    name = f"triton {ptxas.version or '(no metadata)'}"
    if capability is None:
        shown = ", ".join(f"{t.name} {t.used.release or '?'}" for t in ptxas.tools if t.used) or "no ptxas"
        return Verdict(G, Status.INFO, f"{name} ({shown}); no GPU to judge its ptxas against",
                       detail="--spark-profile gb10 judges it for a Spark", readings=readings)
    sm = capability[0] * 10 + capability[1]
    target = f"sm_{sm}a" if capability[0] >= 9 else f"sm_{sm}"
    tool = ptxas.tool_for(sm)
    if tool is None or tool.used is None:
        return Verdict(G, Status.FAIL, f"{name} has no ptxas: it cannot compile a kernel", fix=remedies.ptxas(
            ptxas, "TRITON_PTXAS_PATH", PTXAS_FIRST.get(sm), target).text, readings=readings)
    used = tool.used
    which = f"{tool.name}" + (f" ({tool.env_var})" if used is tool.from_env else "")
    needed = PTXAS_FIRST.get(sm)
    release = _release(used.release)
    if release is None:
        return Verdict(G, Status.FAIL, fitting(G, Status.FAIL, f"{name}'s {which} does not run here: {used.error}",
                                               f"{name}'s {which} does not run here"),
                       detail=f"{used.path}: {used.error}", fix=remedies.ptxas(ptxas, tool.env_var, needed, target).text,
                       readings=readings)
    if needed is None:
        return Verdict(G, Status.INFO, f"{name} compiles with {which} (CUDA {used.release}); sm_{sm} is not in "
                                       "this suite's table", readings=readings)
    if release < needed:
        remedy = remedies.ptxas(ptxas, tool.env_var, needed, target)
        fix = remedy.text
        readings = {**readings, "remedy": remedies.changes_json(remedy.changes)}
        return Verdict(G, Status.FAIL, fitting(G, Status.FAIL, f"{name}'s {which} is CUDA {used.release}: it cannot "
                                                              f"compile for {target} (CUDA {needed[0]}.{needed[1]} can)",
                                               f"{name}'s ptxas is CUDA {used.release}: it cannot compile for {target}"),
                       detail=f"{used.path}: {used.version_text}; Triton stops with \"ptxas fatal : Value '{target}' "
                              "is not defined for option 'gpu-name'\" (triton-lang/triton#8539)",
                       fix=fix, readings=readings)
    return Verdict(G, Status.PASS, f"{name} compiles for {target} with {which} (CUDA {used.release})",
                   detail=used.path, readings=readings)

