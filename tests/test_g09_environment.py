"""G9 on fixture files: container evidence, broken requirements of real .dist-info folders, baseline diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spark_gotchas.judges import g09_container as g09
from spark_gotchas.options import RunOptions
from spark_gotchas.readers import ReadContext
from spark_gotchas.readers import env as envr
from spark_gotchas.readings.env import Baseline, ContainerEvidence, Distributions, RequirementProblem
from spark_gotchas.snapshot import Snapshot, save
from spark_gotchas.verdict import Status

G09 = Path(__file__).parent / "fixtures" / "g09"
NGC_ENV = json.loads((G09 / "ngc_env.json").read_text())
CONSISTENT = Distributions(versions={"torch": "2.9.0a0+145a3a7", "triton": "3.5.0", "numpy": "2.1.0"})


@pytest.fixture
def machine(monkeypatch):
    """Point the container reader at fixture files instead of /proc, /.dockerenv and the environment."""
    for name in envr.NGC_VARS + ("container", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    real_exists = os.path.exists
    state = {"files": {}, "markers": set()}

    def read_lines(path, limit=20):
        fixture = state["files"].get(path)
        if fixture is None:
            return [], "FileNotFoundError: No such file or directory"
        return (G09 / fixture).read_text().splitlines()[:limit], None

    monkeypatch.setattr(envr, "_read_lines", read_lines)
    monkeypatch.setattr(envr.os.path, "exists",
                        lambda p: p in state["markers"] if p in ("/.dockerenv", "/run/.containerenv") else real_exists(p))

    def setup(cgroup=None, mountinfo=None, markers=(), env=None):
        state["files"] = {"/proc/1/cgroup": cgroup, "/proc/self/mountinfo": mountinfo}
        state["markers"] = set(markers)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        return envr.read_container(ReadContext(options=RunOptions(), worker_factory=lambda: None))

    return setup


# -- container evidence ----------------------------------------------------------------------------
def test_cgroup_v1_docker_path(machine):
    ev = machine(cgroup="cgroup_v1_docker.txt", mountinfo="mountinfo_ext4.txt")
    kind, evidence = g09.container_kind(ev)
    assert kind == "container"
    assert evidence == ["docker in /proc/1/cgroup"]
    verdict = g09.judge_environment(ev, CONSISTENT)  # no image variables: a generic image with pip's torch
    assert verdict.line == ("G9 WARN: a container, but not an NGC or Unsloth image (docker in /proc/1/cgroup); "
                            "bare pip: torch 2.9.0a0+145a3a7")
    assert verdict.readings["image"] is None


def test_cgroup_v2_bare_root_with_an_overlay_root_is_a_container(machine):
    ev = machine(cgroup="cgroup_v2_private.txt", mountinfo="mountinfo_overlay.txt")
    assert ev.proc1_cgroup == ["0::/"] and ev.root_fstype == "overlay"
    assert g09.container_kind(ev) == ("container", ["overlay root filesystem"])


def test_cgroup_v2_bare_root_alone_proves_nothing(machine):
    ev = machine(cgroup="cgroup_v2_private.txt", mountinfo="mountinfo_ext4.txt")
    assert ev.root_fstype == "ext4"
    assert g09.container_kind(ev)[0] == "bare"


def test_ngc_variables_decide_first(machine):
    ev = machine(cgroup="cgroup_v2_private.txt", mountinfo="mountinfo_overlay.txt", markers={"/.dockerenv"},
                 env=NGC_ENV)
    assert ev.ngc_vars["NVIDIA_PYTORCH_VERSION"] == "25.10"
    kind, evidence = g09.container_kind(ev)
    assert kind == "container" and evidence[0].startswith("NGC image variables")
    assert evidence[1:] == ["/.dockerenv", "overlay root filesystem"]
    verdict = g09.judge_environment(ev, CONSISTENT)
    assert verdict.line == "G9 PASS: NGC PyTorch 25.10 (build 222161059); 3 distributions, every declared requirement met"
    assert verdict.readings["ngc"] is True and verdict.readings["image_kind"] == "ngc-pytorch"


def test_the_h200_machine_is_a_container_by_dockerenv(machine):
    ev = machine(cgroup="cgroup_h200.txt", mountinfo="mountinfo_overlay.txt", markers={"/.dockerenv"})
    assert g09.container_kind(ev) == ("container", ["/.dockerenv", "overlay root filesystem"])


def test_a_bare_host_warns_with_the_container_advice(machine):
    ev = machine(cgroup="cgroup_v2_host.txt", mountinfo="mountinfo_ext4.txt")
    verdict = g09.judge_environment(ev, CONSISTENT)
    assert verdict.status is Status.WARN
    assert verdict.line == ("G9 WARN: a bare host (no container marker); bare pip: torch 2.9.0a0+145a3a7, nothing pins "
                            "it to this GPU")
    assert verdict.fix.startswith("run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container")
    assert "--no-deps" in verdict.fix


def test_unreadable_cgroup_and_no_marker_is_unknown(machine):
    ev = machine(cgroup=None, mountinfo=None)
    kind, evidence = g09.container_kind(ev)
    assert kind == "unknown" and "unreadable" in evidence[0]
    assert g09.judge_environment(ev, CONSISTENT).line.startswith("G9 WARN: container status unknown (/proc/1/cgroup")


@pytest.mark.parametrize("markers,env,evidence", [
    ({"/run/.containerenv"}, {"container": "podman"}, ["/run/.containerenv", "container=podman"]),
    ((), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, ["KUBERNETES_SERVICE_HOST"]),
])
def test_podman_and_kubernetes_markers(machine, markers, env, evidence):
    assert g09.container_kind(machine(markers=markers, env=env)) == ("container", evidence)


def test_secret_looking_ngc_values_are_masked(machine):
    ev = machine(env={"NVIDIA_BUILD_ID": "222161059"})
    assert ev.ngc_vars == {"NVIDIA_BUILD_ID": "222161059"}  # not secret-looking: kept
    assert g09.container_kind(ev)[1] == ["NVIDIA image variables (NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME)"]


def test_this_machine_reads_without_error():
    ev = envr.read_container(ReadContext(options=RunOptions(), worker_factory=lambda: None))
    assert isinstance(ev, ContainerEvidence)
    assert g09.container_kind(ev)[0] in ("container", "bare", "unknown")


# -- broken requirements -----------------------------------------------------------------------------------
def fake_dist(site: Path, name: str, version: str, requires: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"] + [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


@pytest.fixture
def broken_site(tmp_path, monkeypatch):
    fake_dist(tmp_path, "needs-missing", "1.0", ["spark-gotchas-no-such-package>=1"])
    fake_dist(tmp_path, "wrong-pin", "2.0", ["packaging==0.1"])
    fake_dist(tmp_path, "torchvision", "0.99.0", ["torch==2.1.0"])
    fake_dist(tmp_path, "extras-only", "1.0", ['spark-gotchas-no-such-package; extra == "test"',
                                               'spark-gotchas-no-such-package; python_version < "3.0"'])
    fake_dist(tmp_path, "bad-metadata", "1.0", ["this is not (a requirement"])
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def ours(dists: Distributions) -> list[RequirementProblem]:
    return [p for p in dists.problems if p.distribution in ("needs-missing", "wrong-pin", "torchvision", "extras-only")]


def test_requirements_of_installed_distributions_are_checked(broken_site):
    dists = envr.read_distributions(None)
    texts = sorted(p.text for p in ours(dists))
    torch = dists.versions.get("torch")
    assert texts == [
        "needs-missing 1.0 requires spark-gotchas-no-such-package>=1, but spark-gotchas-no-such-package is missing",
        "torchvision 0.99.0 requires torch==2.1.0, but " + (f"torch {torch} is installed" if torch else "torch is missing"),
        f"wrong-pin 2.0 requires packaging==0.1, but packaging {dists.versions['packaging']} is installed",
    ]  # extras and other platforms' markers are not requirements here
    assert dists.invalid == ["bad-metadata: this is not (a requirement"]
    assert dists.versions["torchvision"] == "0.99.0"


def test_broken_requirements_fail_naming_the_key_pins_first(broken_site):
    dists = envr.read_distributions(None)
    dists = Distributions(versions=dists.versions, problems=ours(dists))
    verdict = g09.judge_environment(ContainerEvidence(dockerenv=True), dists)
    assert verdict.status is Status.FAIL
    assert verdict.summary.startswith("3 broken requirement(s) in a container: torchvision 0.99.0 requires torch==2.1.0")
    assert "the triton that torch pins" in verdict.fix


def test_more_than_three_problems_are_counted():
    problems = [RequirementProblem(f"pkg{i}", "1", "x>=2", "x", "1") for i in range(5)]
    verdict = g09.judge_environment(ContainerEvidence(), Distributions(versions={"x": "1"}, problems=problems))
    assert verdict.summary.endswith("; +2 more")


# -- baseline ------------------------------------------------------------------------------------------------
def baseline_snapshot(path: Path, versions: dict[str, str] | None) -> str:
    readings = {"env.distributions": {"versions": versions, "problems": []}} if versions is not None else {}
    save(Snapshot(readings=readings, created="2026-01-05T10:00:00+00:00"), path)
    return str(path)


def read_baseline(path: str | None) -> Baseline:
    return envr.read_baseline(ReadContext(options=RunOptions(spark_baseline=path), worker_factory=lambda: None))


def test_baseline_diff_names_changes_key_packages_first(tmp_path):
    path = baseline_snapshot(tmp_path / "good.json", {"torch": "2.9.0", "triton": "3.5.0", "numpy": "2.1.0",
                                                     "aiohttp": "3.9.0", "flash-attn": "2.8.3"})
    now = Distributions(versions={"torch": "2.9.1", "triton": "3.5.0", "numpy": "2.2.0", "aiohttp": "3.9.0",
                                  "xformers": "0.0.33"})
    verdict = g09.judge_baseline(read_baseline(path), now)
    assert verdict.line == ("G9 WARN: 4 distribution(s) differ from the baseline: changed torch 2.9.0 -> 2.9.1, "
                            "numpy 2.1.0 -> 2.2.0; added xformers 0.0.33; removed flash-attn 2.8.3")
    assert verdict.readings["baseline_created"] == "2026-01-05T10:00:00+00:00"


def test_same_as_baseline_passes(tmp_path):
    path = baseline_snapshot(tmp_path / "good.json", dict(CONSISTENT.versions))
    assert g09.judge_baseline(read_baseline(path), CONSISTENT).line == (
        "G9 PASS: same 3 distributions as the baseline of 2026-01-05T10:00:00+00:00")


def test_no_baseline_skips_and_a_bad_one_fails(tmp_path):
    assert g09.judge_baseline(read_baseline(None), CONSISTENT).line == (
        "G9 SKIP: no known-good baseline given (--spark-baseline SNAPSHOT)")
    missing = g09.judge_baseline(read_baseline(str(tmp_path / "nope.json")), CONSISTENT)
    assert missing.status is Status.FAIL and "baseline unusable: snapshot not found" in missing.summary
    empty = g09.judge_baseline(read_baseline(baseline_snapshot(tmp_path / "empty.json", None)), CONSISTENT)
    assert empty.summary == "baseline unusable: the baseline snapshot has no env.distributions reading"
    (tmp_path / "text.json").write_text("not json")
    assert "is not JSON" in g09.judge_baseline(read_baseline(str(tmp_path / "text.json")), CONSISTENT).summary
