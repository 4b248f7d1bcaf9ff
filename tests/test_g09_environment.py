"""G9 on fixture files: container evidence, broken requirements of real .dist-info folders, baseline diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g09_container as g09
from spark_gotchas.knowledge.readings.env import (
    UNLIMITED,
    Baseline,
    ContainerEvidence,
    Distributions,
    RequirementProblem,
    Rlimit,
)
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext
from spark_gotchas.machine.readers import env as envr
from spark_gotchas.machine.snapshot import Snapshot, save

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
    assert verdict.line == ("G9 WARN: not an NGC or Unsloth container (docker in /proc/1/cgroup); "
                            "bare pip: torch 2.9.0a0+145a3a7")
    assert verdict.detail == "a container: docker in /proc/1/cgroup"
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
    assert verdict.line == "G9 PASS: NGC PyTorch 25.10: every requirement met"
    assert verdict.detail == "NGC PyTorch 25.10 (build 222161059); 3 distributions, every declared requirement met"
    assert verdict.readings["ngc"] is True and verdict.readings["image_kind"] == "ngc-pytorch"


def test_the_h200_machine_is_a_container_by_dockerenv(machine):
    ev = machine(cgroup="cgroup_h200.txt", mountinfo="mountinfo_overlay.txt", markers={"/.dockerenv"})
    assert g09.container_kind(ev) == ("container", ["/.dockerenv", "overlay root filesystem"])


def test_a_bare_host_warns_with_the_container_advice(machine):
    ev = machine(cgroup="cgroup_v2_host.txt", mountinfo="mountinfo_ext4.txt")
    verdict = g09.judge_environment(ev, CONSISTENT)
    assert verdict.status is Status.WARN
    # "…, nothing pins it to this GPU" would take this line to 104 columns: it is left out (verdict.fitting)
    assert verdict.line == "G9 WARN: a bare host (no container marker); bare pip: torch 2.9.0a0+145a3a7"
    assert verdict.fix.startswith("run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container")
    assert "--no-deps" in verdict.fix


def test_a_bare_host_without_torch_keeps_its_line_within_100_columns(machine):
    ev = machine(cgroup="cgroup_v2_host.txt", mountinfo="mountinfo_ext4.txt")
    few = g09.judge_environment(ev, Distributions(versions={f"d{i}": "1" for i in range(9)}))
    assert few.line == "G9 WARN: a bare host (no container marker); bare pip: 9 distributions, nothing pins them to this GPU"
    many = g09.judge_environment(ev, Distributions(versions={f"d{i}": "1" for i in range(146)}))
    assert many.line == "G9 WARN: a bare host (no container marker); bare pip: 146 distributions"
    assert many.status is Status.WARN and many.fix == few.fix


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
    assert verdict.summary == "5 broken requirement(s) on a bare host: pkg0 1 requires x>=2, but x 1 is installed +4 more"
    assert verdict.detail.startswith("pkg0 1 requires x>=2, but x 1 is installed; pkg1 ")
    assert verdict.detail.endswith("; pkg2 1 requires x>=2, but x 1 is installed; +2 more")


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
    assert verdict.line == "G9 WARN: 4 distribution(s) differ from the baseline: changed torch 2.9.0 -> 2.9.1 +3 more"
    assert verdict.detail == ("changed torch 2.9.0 -> 2.9.1, numpy 2.1.0 -> 2.2.0; added xformers 0.0.33; "
                              "removed flash-attn 2.8.3")
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


# -- which image ---------------------------------------------------------------------------------------------
def ngc(env: dict[str, str], **fields) -> ContainerEvidence:
    return ContainerEvidence(dockerenv=True, ngc_vars=env, **fields)


def dists(**versions: str) -> Distributions:
    return Distributions(versions={k.replace("_", "-"): v for k, v in versions.items()})


@pytest.mark.parametrize("torch", ["2.9.0+cu130", "2.9.1", "2.9.0a0+cpu"])
def test_an_ngc_image_whose_torch_pip_replaced_is_bare_pip_inside_it(torch):
    verdict = g09.judge_environment(ngc(NGC_ENV), dists(torch=torch))
    assert verdict.line == f"G9 WARN: NGC PyTorch 25.10 (build 222161059), but pip replaced its torch with {torch}"
    assert verdict.fix == ("start a fresh container of the image and add packages with pip install --no-deps "
                           "(NVIDIA's Unsloth playbook: pip install --no-deps unsloth unsloth_zoo bitsandbytes), so pip "
                           "cannot replace its torch")
    assert verdict.readings["image_torch"] == "2.9.0a0+145a3a7" and verdict.readings["ngc"] is False


def test_an_ngc_image_whose_python_has_no_torch_is_not_the_images_stack():
    verdict = g09.judge_environment(ngc(NGC_ENV), dists(numpy="2.1.0"))
    assert verdict.line == "G9 WARN: NGC PyTorch 25.10 (build 222161059), but this Python has no torch: it is not the image's"
    assert verdict.fix.startswith("run training with the image's own Python (python on its PATH), not a venv beside it")


def test_ngcs_own_torch_build_passes_with_or_without_pytorch_build_version():
    own = "2.9.0a0+145a3a7bda.nv25.10"
    assert g09.judge_environment(ngc(NGC_ENV), dists(torch=own)).status is Status.PASS
    only_release = {"NVIDIA_PRODUCT_NAME": "PyTorch", "NVIDIA_PYTORCH_VERSION": "25.11"}
    verdict = g09.judge_environment(ngc(only_release), dists(torch="2.10.0a0+b558c986e8.nv25.11"))
    assert verdict.line == "G9 PASS: NGC PyTorch 25.11: every requirement met"
    assert verdict.detail == "NGC PyTorch 25.11; 1 distributions, every declared requirement met"


@pytest.mark.parametrize("env,label,short", [
    ({"NVIDIA_PRODUCT_NAME": "NeMo Framework", "NVIDIA_PYTORCH_VERSION": "25.11", "NVIDIA_BUILD_ID": "123"},
     "NGC NeMo Framework (PyTorch 25.11, build 123)", "NGC NeMo Framework"),
    ({"NVIDIA_PRODUCT_NAME": "NeMo Framework", "NEMO_VERSION": "26.02", "NVIDIA_PYTORCH_VERSION": "25.11"},
     "NGC NeMo Framework 26.02 (PyTorch 25.11)", "NGC NeMo Framework 26.02"),
    ({"NVIDIA_NEMO_VERSION": "26.02"}, "NGC NeMo 26.02", "NGC NeMo 26.02"),
    ({"NVIDIA_PRODUCT_NAME": "TensorRT-LLM", "NVIDIA_PYTORCH_VERSION": "25.10", "NVIDIA_BUILD_ID": "7"},
     "NGC TensorRT-LLM (PyTorch 25.10, build 7)", "NGC TensorRT-LLM"),
])
def test_nemo_and_other_images_built_on_ngc_pytorch_pass_by_name(env, label, short):
    verdict = g09.judge_environment(ngc(env), dists(torch="2.10.0a0+nv25.11"))
    assert verdict.line == f"G9 PASS: {short}: every requirement met"
    assert verdict.detail == f"{label}; 1 distributions, every declared requirement met"


@pytest.mark.parametrize("env,why,evidence", [
    ({"NVIDIA_PRODUCT_NAME": "CUDA", "CUDA_VERSION": "13.0.2"}, "nvidia/cuda 13.0.2",
     "NVIDIA image variables (NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME), /.dockerenv"),
    ({"NVIDIA_PRODUCT_NAME": "JAX"}, "NVIDIA JAX image",
     "NVIDIA image variables (NVIDIA_BUILD_ID/NVIDIA_PRODUCT_NAME), /.dockerenv"),
    ({}, "/.dockerenv", "/.dockerenv"),
])
def test_images_that_ship_no_pytorch_stack_are_bare_pip_in_a_container(env, why, evidence):
    verdict = g09.judge_environment(ngc(env), dists(torch="2.11.0"))
    assert verdict.line == f"G9 WARN: not an NGC or Unsloth container ({why}); bare pip: torch 2.11.0"
    assert verdict.detail == f"a container: {evidence}"
    assert len(verdict.line) <= 100


def test_unsloths_image_is_known_by_its_venv_or_its_variable_and_needs_unsloth_in_this_python():
    by_prefix = ngc({"NVIDIA_PRODUCT_NAME": "CUDA"}, python_prefix="/opt/unsloth-venv/")
    by_var = ngc({"UNSLOTH_LLAMA_CPP_PATH": "/opt/unsloth/llama.cpp"}, python_prefix="/usr")
    for ev in (by_prefix, by_var):
        verdict = g09.judge_environment(ev, dists(torch="2.10.0+cu128", unsloth="2026.5.1"))
        assert verdict.line == "G9 PASS: Unsloth 2026.5.1 image: every requirement met"
        assert verdict.detail == "Unsloth image (unsloth 2026.5.1); 2 distributions, every declared requirement met"
    other_python = g09.judge_environment(by_var, dists(torch="2.10.0+cu128"))
    assert other_python.line == "G9 WARN: Unsloth image, but this Python has no unsloth: it is not the image's"
    assert other_python.fix == ("run training with the image's Python (/opt/unsloth-venv/bin/python, first on its "
                                "PATH), not another Python beside it")
    # pip-installed unsloth in a generic image is not Unsloth's image
    assert g09.judge_environment(ngc({}, python_prefix="/usr/local"), dists(unsloth="2026.5.1")).status is Status.WARN


def test_a_broken_requirement_in_an_ngc_image_names_the_image():
    problems = [RequirementProblem("torchvision", "0.24.0", "torch==2.9.0", "torch", "2.9.0a0+145a3a7")]
    verdict = g09.judge_environment(ngc(NGC_ENV), Distributions(versions={"torch": "2.9.0a0+145a3a7"}, problems=problems))
    assert verdict.line == ("G9 FAIL: 1 broken requirement(s) in NGC PyTorch 25.10 (build 222161059): torchvision "
                            "0.24.0 requires torch==2.9.0, but torch 2.9.0a0+145a3a7 is installed")


def test_hostile_image_variables_stay_one_short_line():
    env = {"NVIDIA_PRODUCT_NAME": "\x1b[2J" + "A" * 500, "NVIDIA_BUILD_ID": "1\nG9 PASS: forged"}
    verdict = g09.judge_environment(ngc(env), dists(torch="2.11.0"))
    assert verdict.line == ("G9 WARN: not an NGC or Unsloth container (NVIDIA \\x1b[2J" + "A" * 35
                            + "… image); bare pip: torch 2.11.0")  # cut at 40 characters, ESC shown escaped
    pytorch = {"NVIDIA_PYTORCH_VERSION": "25.10", "NVIDIA_BUILD_ID": "1\nG9 PASS: forged"}
    forged = g09.judge_environment(ngc(pytorch), dists(torch="2.9.0a0"))
    assert forged.line == "G9 PASS: NGC PyTorch 25.10: every requirement met"
    assert forged.detail.startswith("NGC PyTorch 25.10 (build 1 G9 PASS\\x3a forged);")  # one line, its head escaped


# -- how the container was started -------------------------------------------------------------------------
MiB = 1 << 20
DOCKER_DEFAULTS = dict(shm_bytes=64 * MiB, memlock=Rlimit(8 * MiB, 8 * MiB), stack=Rlimit(8 * MiB, UNLIMITED))
NGC_FLAGS = dict(shm_bytes=60 << 30, memlock=Rlimit(UNLIMITED, UNLIMITED), stack=Rlimit(64 * MiB, 64 * MiB))


def test_docker_defaults_warn_with_the_flags_ngc_asks_for():
    verdict = g09.judge_start(ngc(NGC_ENV, **DOCKER_DEFAULTS))
    assert verdict.line == "G9 WARN: container started without NGC's flags: /dev/shm 64 MiB, memlock 8 MiB, stack 8 MiB"
    assert "docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 IMAGE" in verdict.fix
    assert "bus error" in verdict.fix and "ibv_reg_mr" in verdict.fix
    assert verdict.readings["memlock"] == {"soft": 8 * MiB, "hard": 8 * MiB}


def test_ngcs_flags_pass_and_a_short_stack_alone_does_not_warn():
    assert g09.judge_start(ngc({}, **NGC_FLAGS)).line == (
        "G9 PASS: container started with room: /dev/shm 60 GiB, memlock unlimited, stack 64 MiB")
    h200 = json.loads((G09 / "h200_limits.json").read_text())  # measured on the lent H200 machine
    ev = ngc({}, shm_bytes=h200["shm_bytes"], memlock=Rlimit(*h200["memlock"]), stack=Rlimit(*h200["stack"]))
    assert g09.judge_start(ev).line == "G9 PASS: container started with room: /dev/shm 128 GiB, memlock unlimited, stack 8 MiB"


def test_only_the_missing_flags_are_named():
    shm_only = g09.judge_start(ngc({}, **{**NGC_FLAGS, "shm_bytes": 64 * MiB}))
    assert shm_only.status is Status.WARN and "(missing here: --ipc=host (or --shm-size=16g)):" in shm_only.fix
    assert "ibv_reg_mr" not in shm_only.fix
    memlock_only = g09.judge_start(ngc({}, **{**NGC_FLAGS, "memlock": Rlimit(64 * 1024, UNLIMITED)}))
    assert memlock_only.line == ("G9 WARN: container started without NGC's flags: /dev/shm 60 GiB, memlock 64 KiB, "
                                 "stack 64 MiB")
    assert "(missing here: --ulimit memlock=-1) (or run ulimit -l unlimited before the launch: the hard limit " \
           "allows it):" in memlock_only.fix


def test_cap_ipc_lock_lifts_the_memlock_limit():
    ev = ngc({}, **{**NGC_FLAGS, "memlock": Rlimit(8 * MiB, 8 * MiB)}, cap_ipc_lock=True)
    assert g09.judge_start(ev).line == ("G9 PASS: container started with room: /dev/shm 60 GiB, memlock 8 MiB "
                                        "(CAP_IPC_LOCK), stack 64 MiB")


def test_kubernetes_gets_the_pod_spelling_too():
    ev = ContainerEvidence(kubernetes=True, **DOCKER_DEFAULTS)
    assert "in Kubernetes, mount an emptyDir with medium: Memory at /dev/shm" in g09.judge_start(ev).fix


def test_limits_are_judged_in_containers_only_and_never_guessed():
    assert g09.judge_start(ContainerEvidence(**DOCKER_DEFAULTS)).line == (
        "G9 SKIP: not a container: /dev/shm and ulimits are judged in containers only")
    old = from_jsonable(ContainerEvidence, {"dockerenv": True, "ngc_vars": {}})  # a snapshot of an older suite
    assert old.shm_bytes is None and old.memlock is None and old.python_prefix is None
    assert g09.judge_start(old).line == "G9 SKIP: /dev/shm and ulimits not recorded (a snapshot of an older suite)"
    unreadable = ContainerEvidence(dockerenv=True, shm_error="FileNotFoundError: No such file or directory",
                                   limits_error="ImportError: No module named 'resource'")
    assert g09.judge_start(unreadable).line == (
        "G9 SKIP: /dev/shm and ulimits unreadable (/dev/shm: FileNotFoundError: No such file or directory; "
        "limits: ImportError: No module named 'resource')")
    half = ContainerEvidence(dockerenv=True, shm_error="PermissionError: denied", memlock=Rlimit(UNLIMITED, UNLIMITED))
    assert g09.judge_start(half).line == "G9 PASS: container started with room: /dev/shm unreadable, memlock unlimited"


def test_the_new_fields_round_trip():
    ev = ngc(NGC_ENV, python_prefix="/usr", cap_ipc_lock=False, **DOCKER_DEFAULTS)
    assert from_jsonable(ContainerEvidence, to_jsonable(ev)) == ev


# -- the reader, in real processes ----------------------------------------------------------------------------
CHILD = """
import json
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext
from spark_gotchas.machine.readers import env
from spark_gotchas.base.serial import to_jsonable
print(json.dumps(to_jsonable(env.read_container(ReadContext(options=RunOptions(), worker_factory=lambda: None)))))
"""


def read_in_child(**limits: tuple[int, int]) -> dict:
    import resource

    def lower():
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), value)

    proc = subprocess.run([sys.executable, "-c", CHILD], preexec_fn=lower, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_reader_reads_this_processs_limits_and_dev_shm():
    import resource

    _, memlock_hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    _, stack_hard = resource.getrlimit(resource.RLIMIT_STACK)
    soft_stack = 16 * MiB if stack_hard == resource.RLIM_INFINITY or stack_hard >= 16 * MiB else stack_hard
    read = read_in_child(RLIMIT_MEMLOCK=(64 * 1024, 64 * 1024), RLIMIT_STACK=(soft_stack, stack_hard))
    assert read["memlock"] == {"soft": 64 * 1024, "hard": 64 * 1024}
    assert read["stack"]["soft"] == soft_stack
    assert read["stack"]["hard"] == (UNLIMITED if stack_hard == resource.RLIM_INFINITY else stack_hard)
    assert read["python_prefix"] == sys.prefix
    if os.path.isdir("/dev/shm"):
        st = os.statvfs("/dev/shm")
        assert read["shm_bytes"] == st.f_blocks * st.f_frsize and read["shm_error"] is None
    assert memlock_hard is not None


def test_shm_size_of_a_real_folder_and_of_a_missing_one(tmp_path):
    size, error = envr.shm_size(str(tmp_path))
    assert error is None and size > 0
    assert envr.shm_size(str(tmp_path / "missing")) == (None, "FileNotFoundError: No such file or directory")


@pytest.mark.parametrize("lines,expected", [
    (["Name:\tpython3", "CapEff:\t000001ffffffffff"], True),  # root with every capability (--privileged)
    (["CapEff:\t00000000a80425fb"], False),  # Docker's default set: no CAP_IPC_LOCK (bit 14)
    (["CapEff:\t0000000000004000"], True),  # --cap-add IPC_LOCK alone
    (["CapEff:\tnot hex"], None),
    ([], None),
])
def test_cap_ipc_lock_is_read_from_the_effective_set(lines, expected):
    assert envr.has_cap_ipc_lock(lines) is expected


def test_this_processs_status_parses():
    with open("/proc/self/status") as fh:
        assert envr.has_cap_ipc_lock(fh.read().splitlines()) in (True, False)


# -- conda is conda, not bare pip ----------------------------------------------------------------------
def test_a_conda_environment_is_named_so_with_where_its_torch_came_from(tmp_path):
    """A miniforge env (a conda-meta/ folder in sys.prefix) whose torch conda installed, and one whose
    torch pip put in: neither is 'bare pip'."""
    from spark_gotchas.knowledge.readings.env import ContainerEvidence
    from spark_gotchas.machine.readers.env import python_environment

    prefix = tmp_path / "envs" / "train"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "pytorch-2.5.1-cuda126_py312h1234567_303.json").write_text("{}")
    (prefix / "conda-meta" / "python-3.12.8-h9e4cc4f_1_cpython.json").write_text("{}")
    found = python_environment(str(prefix), str(prefix))
    assert found["conda_meta"] is True and found["venv"] is False
    assert found["conda_torch"] == "pytorch-2.5.1-cuda126_py312h1234567_303"
    ev = ContainerEvidence(proc1_cgroup=["0::/init.scope"], python_prefix=str(prefix), **found)
    verdict = g09.judge_environment(ev, dists(torch="2.5.1"))
    assert verdict.line == ("G9 WARN: a bare host (no container marker); conda: torch 2.5.1 from conda "
                            "(pytorch-2.5.1-cuda126_py312h1234567_303)")
    assert verdict.fix == g09.CONDA_FIX and "bare pip" not in verdict.line
    by_pip = ContainerEvidence(proc1_cgroup=["0::/init.scope"], python_prefix=str(prefix),
                               **{**found, "conda_torch": None})
    assert g09.judge_environment(by_pip, dists(torch="2.11.0+cu130")).line == (
        "G9 WARN: a bare host (no container marker); conda: torch 2.11.0+cu130 from pip")
    venv = python_environment(str(tmp_path / "venv"), "/usr")
    assert venv == {"conda_meta": False, "conda_prefix": venv["conda_prefix"], "venv": True, "conda_torch": None}
