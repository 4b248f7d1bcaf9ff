"""G9 — container first, not bare pip.

Rules:

**Container or not.** Evidence, strongest first: image variables (NGC's, the CUDA base image's,
Unsloth's), `/.dockerenv`, `/run/.containerenv`, `container=…`, Kubernetes, a container runtime
in `/proc/1/cgroup` (cgroup v1 paths naming docker, containerd, kubepods, lxc, libpod, crio,
podman), an overlay root filesystem. Under cgroup v2 with a private namespace (Docker's default)
`/proc/1/cgroup` is just `0::/`, which proves nothing either way; the other evidence decides. No
evidence → bare host; `/proc/1/cgroup` unreadable and no other marker → unknown.

**Which image.**

- *NGC PyTorch*: `NVIDIA_PYTORCH_VERSION` or `PYTORCH_BUILD_VERSION` set, or `NVIDIA_PRODUCT_NAME`
  PyTorch. Named with its release and build: `NGC PyTorch 25.10 (build 222161059)`. An image of
  another NGC product that carries `NVIDIA_PYTORCH_VERSION` is built on NGC PyTorch and counts:
  `NGC <product> (PyTorch 25.10, build …)`.
- *NGC NeMo*: `NVIDIA_PRODUCT_NAME` "NeMo Framework" (or NeMo), or `NVIDIA_NEMO_VERSION` /
  `NEMO_VERSION` set: `NGC NeMo Framework (PyTorch 25.11, build …)`.
- *Unsloth's image* (`unsloth/unsloth`, built from `docker/Dockerfile` of unslothai/unsloth: a
  venv at `/opt/unsloth-venv` first on `PATH`, and `UNSLOTH_LLAMA_CPP_PATH=/opt/unsloth/llama.cpp`
  set in the image): this Python's `sys.prefix` is `/opt/unsloth-venv`, or
  `UNSLOTH_LLAMA_CPP_PATH` points under `/opt/unsloth/`; and unsloth is installed in this Python.
  Named with unsloth's version: `Unsloth image (unsloth 2026.5.1)`. Its base is NVIDIA's CUDA
  base image, so its `NVIDIA_PRODUCT_NAME` is CUDA.
- *NVIDIA's CUDA base image* (`nvidia/cuda`, `NVIDIA_PRODUCT_NAME=CUDA`, no Unsloth marker): it
  ships no torch, so a torch in it came from pip. A generic container, named `nvidia/cuda 13.0.2`.
  Another product name without `NVIDIA_PYTORCH_VERSION` (an NGC JAX image, say) is no PyTorch
  image either: `NVIDIA JAX image`.
- An NGC image whose torch is not its own build (a PyTorch wheel's tag such as `+cu130`, `+cpu`,
  or another release than `PYTORCH_BUILD_VERSION`: pip replaced it), or an image whose Python
  lacks the image's package (torch for NGC, unsloth for Unsloth's image: a venv beside it), does
  not run the image's stack: bare pip inside the image.

**Verdicts.**

- any unmet requirement → **FAIL** naming them (the first in the line with the count of the rest,
  three in the detail), those touching the key packages first (torch, triton, torchvision,
  torchaudio, xformers, flash-attn, unsloth, transformers, vllm, bitsandbytes, accelerate, peft,
  trl: the torch ↔ triton and torchvision/xformers ↔ torch pins);
- consistent, in an NGC PyTorch/NeMo or Unsloth image running its own stack → **PASS** naming the
  image;
- an NGC or Unsloth image whose stack pip replaced, or whose Python is not the image's → **WARN**
  (`NGC PyTorch 25.10 (build 222161059), but pip replaced its torch with 2.9.0+cu130`);
- consistent, in any other container → **WARN** "not an NGC or Unsloth container" with the image
  or marker that told, and torch's version (`bare pip: torch 2.11.0`);
- consistent, on a bare host (or unknown) → **WARN** with the container advice.
- a conda environment (a `conda-meta/` folder in `sys.prefix`) is named so, never "bare pip":
  `conda: torch 2.5.1 from conda (pytorch-2.5.1-cuda126_…)` when conda's own record of torch is
  there, `conda: torch 2.11.0 from pip` when pip put it in; the fix then says to take torch and what
  pins to it from one installer, PyTorch's index with pip as G1's fix does, none of them from a conda
  channel beside it.

**How the container was started** (`test_g9_shm_and_ulimits`; in containers only: on a bare host
`/dev/shm` is a tmpfs of half the RAM and the limits are the login's):

| reading | warns when | why |
| --- | --- | --- |
| `/dev/shm` size | below 1 GiB (Docker's default is 64 MiB) | DataLoader workers pass batches through shared memory and die with a bus error |
| locked-memory soft limit | not unlimited, and no `CAP_IPC_LOCK` | NCCL over InfiniBand/RoCE registers its buffers with `ibv_reg_mr`, which fails under the limit (two Sparks, G10) |
| stack soft limit | never alone; shown, and named in the flags when another flag is missing | 8 MiB is every Linux default and training runs with it; NGC and Unsloth ask for 64 MiB |

Either warning → **WARN** with the `docker run` flags NGC's start-up note asks for
(`--ipc=host` or a large `--shm-size`, `--ulimit memlock=-1`, `--ulimit stack=67108864`), the
missing ones named; both fine → **PASS**; the readings not recorded (a snapshot of an older
suite) or unreadable → **SKIP** saying so; not a container → **SKIP**.

Baseline: none given → **SKIP**; the file unusable (missing, not a snapshot, no
`env.distributions`) → **FAIL** saying why; distributions changed, added or removed since →
**WARN** listing them (key packages first); the same → **PASS**.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..readings.env import UNLIMITED, Baseline, ContainerEvidence, Distributions, Rlimit
from ..readings.remedies import Change, changes_json
from ..verdict import Status, Verdict, fitting

G = 9
KEY_PACKAGES = ("torch", "triton", "torchvision", "torchaudio", "xformers", "flash-attn", "unsloth",
                "unsloth-zoo", "transformers", "vllm", "bitsandbytes", "accelerate", "peft", "trl")
CONTAINER_FIX = ("run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container "
                 "(unsloth/unsloth); if bare pip is unavoidable, follow NVIDIA's install order and install "
                 "Unsloth with --no-deps")
RUNTIME_WORDS = ("docker", "containerd", "kubepods", "lxc", "libpod", "crio", "podman")
UNSLOTH_VENV = "/opt/unsloth-venv"
UNSLOTH_OPT = "/opt/unsloth/"
PIP_TAG = re.compile(r"^(cu\d+|cpu|rocm[\d.]*|xpu)")  # local version tags of PyTorch's own wheels
LABEL_CHARS = 40  # an image variable's value in the line is cut here

SHM_MIN = 1 << 30  # /dev/shm below this warns (Docker's default is 64 MiB)
STACK_ASKED = 64 << 20  # NGC's --ulimit stack=67108864
NGC_RUN = "docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864"


def _short(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= LABEL_CHARS else value[:LABEL_CHARS - 1] + "…"


# -- is this a container ----------------------------------------------------------------------------
def container_kind(ev: ContainerEvidence) -> tuple[str, list[str]]:
    """("container" | "bare" | "unknown", the evidence that decided)."""
    found: list[str] = []
    if ev.ngc_vars.get("NVIDIA_PYTORCH_VERSION") or ev.ngc_vars.get("PYTORCH_BUILD_VERSION"):
        found.append("NGC image variables (NVIDIA_PYTORCH_VERSION/PYTORCH_BUILD_VERSION)")
    elif ev.ngc_vars.get("NVIDIA_BUILD_ID") or ev.ngc_vars.get("NVIDIA_PRODUCT_NAME"):
        found.append("NVIDIA image variables (NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME)")
    if ev.ngc_vars.get("UNSLOTH_LLAMA_CPP_PATH", "").startswith(UNSLOTH_OPT):
        found.append("Unsloth image variable (UNSLOTH_LLAMA_CPP_PATH)")
    if ev.dockerenv:
        found.append("/.dockerenv")
    if ev.containerenv:
        found.append("/run/.containerenv")
    if ev.container_var:
        found.append(f"container={_short(ev.container_var)}")
    if ev.kubernetes:
        found.append("KUBERNETES_SERVICE_HOST")
    runtime = [(w, line) for line in ev.proc1_cgroup for w in RUNTIME_WORDS if w in line]
    if runtime:
        found.append(f"{runtime[0][0]} in /proc/1/cgroup")
    if ev.root_fstype == "overlay":
        found.append("overlay root filesystem")
    if found:
        return "container", found
    if ev.proc1_cgroup_error:
        return "unknown", [f"/proc/1/cgroup unreadable ({ev.proc1_cgroup_error}) and no other marker"]
    return "bare", ["no container marker"]


# -- which image ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Image:
    """The image a container runs, as its variables and paths name it."""

    kind: str  # "ngc-pytorch" | "ngc-nemo" | "unsloth" | "cuda-base" | "other"
    label: str  # "NGC PyTorch 25.10 (build 222161059)"
    short: str = ""  # for the line: "NGC PyTorch 25.10", "Unsloth 2026.5.1 image"
    package: Optional[str] = None  # the package whose presence says this Python is the image's
    replaced: Optional[str] = None  # why the image's stack is not what runs (bare pip inside it)

    @property
    def tested(self) -> bool:
        """An NGC PyTorch/NeMo or Unsloth image whose own stack is what this Python runs."""
        return self.kind in ("ngc-pytorch", "ngc-nemo", "unsloth") and self.replaced is None


def _ngc(ev: ContainerEvidence) -> Optional[Image]:
    var = ev.ngc_vars
    product = var.get("NVIDIA_PRODUCT_NAME", "").strip()
    nemo_version = var.get("NVIDIA_NEMO_VERSION") or var.get("NEMO_VERSION")
    pytorch = var.get("NVIDIA_PYTORCH_VERSION")
    build = var.get("NVIDIA_BUILD_ID")
    built = f"build {_short(build)}" if build else None
    if product.lower().startswith("nemo") or nemo_version:
        name = _short(product or "NeMo")
        release = _short(nemo_version or var.get("NVIDIA_PRODUCT_VERSION") or "")
        detail = ", ".join(p for p in (f"PyTorch {_short(pytorch)}" if pytorch else None, built) if p)
        label = " ".join(p for p in (f"NGC {name}", release, f"({detail})" if detail else "") if p)
        return Image("ngc-nemo", label)
    if pytorch or var.get("PYTORCH_BUILD_VERSION") or product.lower() == "pytorch":
        if product and product.lower() != "pytorch":  # another NGC product built on NGC PyTorch
            detail = ", ".join(p for p in (f"PyTorch {_short(pytorch)}" if pytorch else None, built) if p)
            return Image("ngc-pytorch", f"NGC {_short(product)}" + (f" ({detail})" if detail else ""))
        release = f" {_short(pytorch)}" if pytorch else ""
        return Image("ngc-pytorch", f"NGC PyTorch{release}" + (f" ({built})" if built else ""))
    if product.upper() == "CUDA":
        cuda = var.get("CUDA_VERSION")
        return Image("cuda-base", f"nvidia/cuda {_short(cuda)}" if cuda else "nvidia/cuda")
    if product:
        return Image("other", f"NVIDIA {_short(product)} image")
    return None


def _unsloth(ev: ContainerEvidence) -> Optional[Image]:
    prefix = (ev.python_prefix or "").rstrip("/")
    if prefix == UNSLOTH_VENV or ev.ngc_vars.get("UNSLOTH_LLAMA_CPP_PATH", "").startswith(UNSLOTH_OPT):
        return Image("unsloth", "Unsloth image")
    return None


def _public(version: str) -> str:
    return version.split("+", 1)[0].strip()


def torch_replaced(build: Optional[str], installed: str) -> Optional[str]:
    """Why the installed torch is not the NGC image's own build (None when it is, or cannot be told):
    a PyTorch wheel's tag (+cu130, +cpu), or another release than ``PYTORCH_BUILD_VERSION``."""
    local = installed.split("+", 1)[1] if "+" in installed else ""
    if PIP_TAG.match(local) or (build and _public(build) != _public(installed)):
        return f"pip replaced its torch with {_short(installed)}"
    return None


def image_of(ev: ContainerEvidence, dists: Distributions) -> Optional[Image]:
    """The image this Python runs in, from its variables and paths; None when none is named."""
    image = _ngc(ev)
    unsloth = _unsloth(ev)
    if unsloth is not None and (image is None or image.kind in ("cuda-base", "other")):
        version = dists.versions.get("unsloth")
        if version is None:
            return Image("unsloth", unsloth.label, unsloth.label, "unsloth",
                         "this Python has no unsloth: it is not the image's")
        return Image("unsloth", f"Unsloth image (unsloth {_short(version)})", f"Unsloth {_short(version)} image",
                     "unsloth")
    if image is None or image.kind not in ("ngc-pytorch", "ngc-nemo"):
        return image
    torch = dists.versions.get("torch")
    short = image.label.split(" (")[0]
    if torch is None:
        return Image(image.kind, image.label, short, "torch", "this Python has no torch: it is not the image's")
    why = torch_replaced(ev.ngc_vars.get("PYTORCH_BUILD_VERSION"), torch)
    return Image(image.kind, image.label, short, "torch", why)


# -- the environment ---------------------------------------------------------------------------------
def _priority(problem) -> tuple[int, str]:
    names = {problem.required, problem.distribution.lower()}
    return (0 if names & set(KEY_PACKAGES) else 1, problem.distribution.lower())


def _pip_tail(dists: Distributions, pinned: bool = False, ev: Optional[ContainerEvidence] = None) -> str:
    """``bare pip: torch 2.11.0`` (``, nothing pins it to this GPU`` on a bare host); in a conda
    environment ``conda: torch 2.5.1 from conda (pytorch-2.5.1-cuda126_…)`` or ``conda: torch 2.11.0
    from pip``: conda solves its own packages together, pip's beside them drift."""
    torch = dists.versions.get("torch")
    what = f"torch {_short(torch)}" if torch else f"{len(dists.versions)} distributions"
    if ev is not None and ev.python_env == "conda":
        if torch and ev.conda_torch:
            return f"conda: {what} from conda ({_short(ev.conda_torch)})"
        return f"conda: {what} from pip" if torch else f"conda: {what}"
    pins = (", nothing pins it to this GPU" if torch else ", nothing pins them to this GPU") if pinned else ""
    return f"bare pip: {what}{pins}"


CONDA_FIX = ("run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container (unsloth/unsloth); "
             "staying in conda, take torch and what pins to it (triton, xformers) from one installer, PyTorch's index "
             "with pip (as G1 says), none of them from a conda channel beside it, and keep a --spark-baseline "
             "snapshot of the working set")


def _fix_for(ev: ContainerEvidence) -> str:
    return CONDA_FIX if ev.python_env == "conda" else CONTAINER_FIX


def _image_fix(image: Image, dists: Distributions) -> str:
    """What to do when an NGC or Unsloth image does not run its own stack."""
    if image.package == "unsloth":
        return (f"run training with the image's Python ({UNSLOTH_VENV}/bin/python, first on its PATH), "
                "not another Python beside it")
    if image.package not in dists.versions:
        return ("run training with the image's own Python (python on its PATH), not a venv beside it; add "
                "packages to it with pip install --no-deps")
    return ("start a fresh container of the image and add packages with pip install --no-deps (NVIDIA's Unsloth "
            "playbook: pip install --no-deps unsloth unsloth_zoo bitsandbytes), so pip cannot replace its torch")


def judge_environment(ev: ContainerEvidence, dists: Distributions) -> Verdict:
    kind, evidence = container_kind(ev)
    image = image_of(ev, dists) if kind == "container" else None
    problems = sorted(dists.problems, key=_priority)
    readings = {
        "container": kind,
        "evidence": evidence,
        "image": image.label if image else None,
        "image_kind": image.kind if image else None,
        "image_stack_replaced": image.replaced if image else None,
        "image_torch": ev.ngc_vars.get("PYTORCH_BUILD_VERSION"),
        "ngc": bool(image and image.kind.startswith("ngc") and image.replaced is None),
        "python_prefix": ev.python_prefix,
        "distributions": len(dists.versions),
        "problems": [p.text for p in problems],
        "key_versions": {k: dists.versions[k] for k in KEY_PACKAGES if k in dists.versions},
    }
    if image is not None and image.tested:
        where = f"in {image.label}"
    else:
        where = {"container": "in a container", "bare": "on a bare host", "unknown": "with container status unknown"}[kind]
    if problems:
        shown = "; ".join(p.text for p in problems[:3])
        more = f"; +{len(problems) - 3} more" if len(problems) > 3 else ""
        first = problems[0].text + (f" +{len(problems) - 1} more" if len(problems) > 1 else "")
        return Verdict(G, Status.FAIL, f"{len(problems)} broken requirement(s) {where}: {first}",
                       detail=f"{shown}{more}",
                       fix="reinstall the named packages at versions their dependents accept (e.g. the triton that "
                           "torch pins), or " + CONTAINER_FIX,
                       readings=readings)
    if image is not None and image.tested:
        return Verdict(G, Status.PASS, f"{image.short or image.label}: every requirement met",
                       detail=f"{image.label}; {len(dists.versions)} distributions, every declared requirement met",
                       readings=readings)
    if image is not None and image.replaced:
        return Verdict(G, Status.WARN, f"{image.label}, but {image.replaced}", fix=_image_fix(image, dists),
                       readings=readings)
    readings["python_env"] = ev.python_env
    readings["remedy"] = changes_json([Change("use", "container", "nvcr.io/nvidia/pytorch")])
    if kind == "container":
        why = image.label if image else evidence[0]
        return Verdict(G, Status.WARN, f"not an NGC or Unsloth container ({why}); {_pip_tail(dists, ev=ev)}",
                       detail=f"a container: {', '.join(evidence)}", fix=_fix_for(ev), readings=readings)
    host = "a bare host" if kind == "bare" else "container status unknown"
    # without torch the count of distributions stands in its place: 10 or more of them took the line to 101
    # columns, so the clause that nothing pins them goes where the line has no room for it
    summary = fitting(G, Status.WARN, f"{host} ({evidence[0]}); {_pip_tail(dists, pinned=True, ev=ev)}",
                      f"{host} ({evidence[0]}); {_pip_tail(dists, ev=ev)}")
    return Verdict(G, Status.WARN, summary,
                   detail=f"conda environment {ev.python_prefix}" if ev.python_env == "conda" else "",
                   fix=_fix_for(ev), readings=readings)


# -- how the container was started ---------------------------------------------------------------------
def size(n: int) -> str:
    """Bytes as ``df -h`` shows them, in binary units: 64 MiB, 125.8 GiB (integers only: a replayed
    value may be any size)."""
    if n >= 1 << 30:
        tenths = (n * 10 + (1 << 29)) >> 30
        return f"{tenths // 10} GiB" if tenths % 10 == 0 else f"{tenths // 10}.{tenths % 10} GiB"
    if n >= 1 << 20:
        return f"{(n + (1 << 19)) >> 20} MiB"
    if n >= 1 << 10:
        return f"{(n + (1 << 9)) >> 10} KiB"
    return f"{n} bytes"


def limit_text(limit: Rlimit) -> str:
    return "unlimited" if limit.soft == UNLIMITED else size(limit.soft)


def judge_start(ev: ContainerEvidence) -> Verdict:
    """/dev/shm and the locked-memory and stack limits against what NGC's start-up note asks for."""
    kind, evidence = container_kind(ev)
    readings = {
        "container": kind,
        "shm_bytes": ev.shm_bytes,
        "shm_error": ev.shm_error,
        "memlock": {"soft": ev.memlock.soft, "hard": ev.memlock.hard} if ev.memlock else None,
        "stack": {"soft": ev.stack.soft, "hard": ev.stack.hard} if ev.stack else None,
        "cap_ipc_lock": ev.cap_ipc_lock,
        "limits_error": ev.limits_error,
        "shm_min_bytes": SHM_MIN,
        "stack_asked_bytes": STACK_ASKED,
    }
    if kind != "container":
        return Verdict(G, Status.SKIP, "not a container: /dev/shm and ulimits are judged in containers only",
                       readings=readings)
    if ev.shm_bytes is None and ev.memlock is None:
        if ev.shm_error or ev.limits_error:
            why = "; ".join(e for e in (ev.shm_error and f"/dev/shm: {ev.shm_error}",
                                        ev.limits_error and f"limits: {ev.limits_error}") if e)
            return Verdict(G, Status.SKIP, f"/dev/shm and ulimits unreadable ({why})", readings=readings)
        return Verdict(G, Status.SKIP, "/dev/shm and ulimits not recorded (a snapshot of an older suite)",
                       readings=readings)
    missing: list[str] = []
    harms: list[str] = []
    shown: list[str] = []
    if ev.shm_bytes is None:
        shown.append("/dev/shm " + ("unreadable" if ev.shm_error else "not recorded"))
    else:
        shown.append(f"/dev/shm {size(ev.shm_bytes)}")
        if ev.shm_bytes < SHM_MIN:
            missing.append("--ipc=host (or --shm-size=16g)")
            harms.append(f"a {size(ev.shm_bytes)} /dev/shm makes DataLoader workers die with a bus error")
    if ev.memlock is None:
        shown.append("memlock " + ("unreadable" if ev.limits_error else "not recorded"))
    else:
        capped = ev.memlock.soft != UNLIMITED
        shown.append(f"memlock {limit_text(ev.memlock)}" + (" (CAP_IPC_LOCK)" if capped and ev.cap_ipc_lock else ""))
        if capped and not ev.cap_ipc_lock:
            missing.append("--ulimit memlock=-1")
            harms.append("a capped memlock makes NCCL over RDMA (two Sparks, G10) fail in ibv_reg_mr")
    if ev.stack is not None:
        stack_short = ev.stack.soft != UNLIMITED and ev.stack.soft < STACK_ASKED
        shown.append(f"stack {limit_text(ev.stack)}")
        if stack_short and missing:
            missing.append("--ulimit stack=67108864")
    readings["missing_flags"] = missing
    if not missing:
        return Verdict(G, Status.PASS, f"container started with room: {', '.join(shown)}", readings=readings)
    hints = []
    if "--ulimit memlock=-1" in missing and ev.memlock is not None and ev.memlock.hard == UNLIMITED:
        hints.append("or run ulimit -l unlimited before the launch: the hard limit allows it")
    if ev.kubernetes:
        hints.append("in Kubernetes, mount an emptyDir with medium: Memory at /dev/shm")
    hint = f" ({'; '.join(hints)})" if hints else ""
    readings["remedy"] = changes_json([Change("setting", "docker run", flag) for flag in missing])
    return Verdict(G, Status.WARN, f"container started without NGC's flags: {', '.join(shown)}",
                   fix=f"start the container with {NGC_RUN} IMAGE (missing here: {', '.join(missing)}){hint}: "
                       + "; ".join(harms),
                   readings=readings)


# -- since the baseline ---------------------------------------------------------------------------------
def judge_baseline(baseline: Baseline, dists: Distributions) -> Verdict:
    if not baseline.path:
        return Verdict(G, Status.SKIP, "no known-good baseline given (--spark-baseline SNAPSHOT)")
    if baseline.error or baseline.versions is None:
        return Verdict(G, Status.FAIL, f"baseline unusable: {baseline.error}",
                       fix="pass --spark-baseline a snapshot that --spark-snapshot wrote on a known-good run")
    changes = diff_versions(baseline.versions, dists.versions)
    readings = {"baseline": baseline.path, "baseline_created": baseline.created, **changes}
    n = sum(len(v) for v in changes.values())
    if not n:
        return Verdict(G, Status.PASS, f"same {len(dists.versions)} distributions as the baseline of "
                                       f"{baseline.created or baseline.path}", readings=readings)
    parts = []
    for label in ("changed", "added", "removed"):
        items = changes[label]
        if items:
            key_first = sorted(items, key=lambda s: (s.split(" ")[0] not in KEY_PACKAGES, s))
            parts.append(f"{label} {', '.join(key_first[:5])}" + (f" +{len(items) - 5}" if len(items) > 5 else ""))
    lead = parts[0].split(", ")[0] + (f" +{n - 1} more" if n > 1 else "")
    return Verdict(G, Status.WARN, f"{n} distribution(s) differ from the baseline: {lead}", detail="; ".join(parts),
                   fix="re-validate before a long run (spark-gotchas -m fast), or restore the baseline's versions: "
                       "pip install --no-deps NAME==VERSION for each one listed",
                   readings=readings)


def diff_versions(before: dict[str, str], after: dict[str, str]) -> dict[str, list[str]]:
    changed = [f"{k} {before[k]} -> {after[k]}" for k in sorted(before) if k in after and before[k] != after[k]]
    added = [f"{k} {after[k]}" for k in sorted(after) if k not in before]
    removed = [f"{k} {before[k]}" for k in sorted(before) if k not in after]
    return {"changed": changed, "added": added, "removed": removed}
