"""The Python environment: container evidence, installed distributions, broken requirements."""

from __future__ import annotations

import importlib.metadata as md
import os
from typing import Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import scrub
from ..readings.env import Baseline, ContainerEvidence, Distributions, RequirementProblem
from . import ReadContext, reader

NGC_VARS = ("NVIDIA_PRODUCT_NAME", "NVIDIA_PYTORCH_VERSION", "PYTORCH_BUILD_VERSION", "NVIDIA_BUILD_ID",
            "NVIDIA_PRODUCT_VERSION", "CUDA_VERSION", "NVIDIA_REQUIRE_CUDA", "TORCH_CUDA_ARCH_LIST",
            "NVIDIA_VISIBLE_DEVICES", "UNSLOTH_VERSION")


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


@reader("env.container")
def read_container(ctx: ReadContext) -> ContainerEvidence:
    cgroup, error = _read_lines("/proc/1/cgroup")
    mountinfo, _ = _read_lines("/proc/self/mountinfo", limit=400)
    env = scrub.scrub_env({k: os.environ[k] for k in NGC_VARS if k in os.environ})
    return ContainerEvidence(
        dockerenv=os.path.exists("/.dockerenv"),
        containerenv=os.path.exists("/run/.containerenv"),
        proc1_cgroup=cgroup,
        proc1_cgroup_error=error,
        root_fstype=root_fstype(mountinfo),
        container_var=os.environ.get("container"),
        kubernetes="KUBERNETES_SERVICE_HOST" in os.environ,
        ngc_vars=env,
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
