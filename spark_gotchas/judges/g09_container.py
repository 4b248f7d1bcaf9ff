"""G9 — container first, not bare pip.

Rules:
- Container evidence, strongest first: NGC variables (an NGC image), /.dockerenv,
  /run/.containerenv, the ``container`` variable, a container runtime in /proc/1/cgroup
  (v1 paths naming docker/containerd/kubepods/lxc), an overlay root filesystem. cgroup v2's
  bare ``0::/`` proves nothing either way. No evidence -> "bare host (no container marker)".
- Any installed distribution whose declared requirement is not met -> FAIL naming them, the
  pins that matter first (torch <-> triton, torchvision/torchaudio/xformers <-> torch).
- Consistent in a container -> PASS; consistent on a bare host -> WARN with the container advice.
- With ``--spark-baseline``: distributions added, removed or changed since -> WARN listing them.
"""

from __future__ import annotations

from ..readings.env import Baseline, ContainerEvidence, Distributions
from ..verdict import Status, Verdict

G = 9
KEY_PACKAGES = ("torch", "triton", "torchvision", "torchaudio", "xformers", "flash-attn", "unsloth",
                "unsloth-zoo", "transformers", "vllm", "bitsandbytes", "accelerate", "peft", "trl")
CONTAINER_FIX = ("run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container; if bare pip is "
                 "unavoidable, follow NVIDIA's install order and install Unsloth with --no-deps")
RUNTIME_WORDS = ("docker", "containerd", "kubepods", "lxc", "libpod", "crio", "podman")


def container_kind(ev: ContainerEvidence) -> tuple[str, list[str]]:
    """("container" | "bare" | "unknown", the evidence that decided)."""
    found: list[str] = []
    if ev.ngc_vars.get("NVIDIA_PYTORCH_VERSION") or ev.ngc_vars.get("PYTORCH_BUILD_VERSION"):
        found.append("NGC image variables (NVIDIA_PYTORCH_VERSION/PYTORCH_BUILD_VERSION)")
    elif ev.ngc_vars.get("NVIDIA_BUILD_ID") or ev.ngc_vars.get("NVIDIA_PRODUCT_NAME"):
        found.append("NVIDIA image variables (NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME)")
    if ev.dockerenv:
        found.append("/.dockerenv")
    if ev.containerenv:
        found.append("/run/.containerenv")
    if ev.container_var:
        found.append(f"container={ev.container_var}")
    if ev.kubernetes:
        found.append("KUBERNETES_SERVICE_HOST")
    runtime = [line for line in ev.proc1_cgroup if any(w in line for w in RUNTIME_WORDS)]
    if runtime:
        found.append(f"/proc/1/cgroup: {runtime[0]}")
    if ev.root_fstype == "overlay":
        found.append("overlay root filesystem")
    if found:
        return "container", found
    if ev.proc1_cgroup_error:
        return "unknown", [f"/proc/1/cgroup unreadable ({ev.proc1_cgroup_error}) and no other marker"]
    return "bare", ["no container marker (/.dockerenv, /run/.containerenv, cgroup, overlay root, NGC variables)"]


def is_ngc(ev: ContainerEvidence) -> bool:
    return bool(ev.ngc_vars.get("NVIDIA_PYTORCH_VERSION") or ev.ngc_vars.get("PYTORCH_BUILD_VERSION"))


def _priority(problem) -> tuple[int, str]:
    names = {problem.required, problem.distribution.lower()}
    return (0 if names & set(KEY_PACKAGES) else 1, problem.distribution.lower())


def judge_environment(ev: ContainerEvidence, dists: Distributions) -> Verdict:
    kind, evidence = container_kind(ev)
    problems = sorted(dists.problems, key=_priority)
    readings = {
        "container": kind,
        "evidence": evidence,
        "ngc": is_ngc(ev),
        "distributions": len(dists.versions),
        "problems": [p.text for p in problems],
        "key_versions": {k: dists.versions[k] for k in KEY_PACKAGES if k in dists.versions},
    }
    where = {"container": "in a container", "bare": "on a bare host", "unknown": "container status unknown"}[kind]
    why = f" ({evidence[0]})"
    if problems:
        shown = "; ".join(p.text for p in problems[:3])
        more = f"; +{len(problems) - 3} more" if len(problems) > 3 else ""
        return Verdict(G, Status.FAIL, f"{len(problems)} broken requirement(s) {where}: {shown}{more}",
                       fix="reinstall the named packages at versions their dependents accept "
                           "(e.g. the triton that torch pins), or start from a container: " + CONTAINER_FIX,
                       readings=readings)
    consistent = f"{len(dists.versions)} distributions, every declared requirement met"
    if kind == "container":
        label = "NGC container" if is_ngc(ev) else "container"
        return Verdict(G, Status.PASS, f"{label}{why}; {consistent}", readings=readings)
    return Verdict(G, Status.WARN, f"{where}{why}; {consistent}, but nothing pins them to this GPU",
                   fix=CONTAINER_FIX, readings=readings)


def judge_baseline(baseline: Baseline, dists: Distributions) -> Verdict:
    if not baseline.path:
        return Verdict(G, Status.SKIP, "no known-good baseline given (--spark-baseline SNAPSHOT)")
    if baseline.error or baseline.versions is None:
        return Verdict(G, Status.FAIL, f"baseline unusable: {baseline.error}",
                       fix="pass a snapshot written by --spark-snapshot on a known-good run")
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
    return Verdict(G, Status.WARN, f"{n} distribution(s) differ from the baseline: {'; '.join(parts)}",
                   fix="re-validate before a long run, or restore the baseline's versions "
                       "(pip install the listed versions with --no-deps)",
                   readings=readings)


def diff_versions(before: dict[str, str], after: dict[str, str]) -> dict[str, list[str]]:
    changed = [f"{k} {before[k]} -> {after[k]}" for k in sorted(before) if k in after and before[k] != after[k]]
    added = [f"{k} {after[k]}" for k in sorted(after) if k not in before]
    removed = [f"{k} {before[k]}" for k in sorted(before) if k not in after]
    return {"changed": changed, "added": added, "removed": removed}
