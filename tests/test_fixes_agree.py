"""A fix changes something, and the fixes agree.

(a) For every rule of G1, G2, G3's kernel log, G9 and G10 with a fix: apply the fix, in the machine
    form its verdict carries (``readings["remedy"]``: ``readings/remedies.Change``), to the readings
    it was written for, and judge again: the rule goes quiet, or the fix was a measurement (``measure``)
    that decides what comes next; a fix that would set what is already set is a failure.
(b) Across all ten lines: every check of ``tests_gotchas`` is run, as a replay runs it, on every
    snapshot the tests keep (``tests/fixtures/**``), and on the real-wheel scans; no package, setting
    or process gets two different remedies in one run, and a package's remedy is of one kind
    (install, uninstall, build) in every run.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import json
import re
from pathlib import Path

import pytest
from test_fix_texts import instruction_problems, pip_names

from spark_gotchas.base.serial import from_jsonable
from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.judges import g01_kernel_log as g01k
from spark_gotchas.knowledge.judges import g02_flash_attn as g02
from spark_gotchas.knowledge.judges import g03_unified_memory_log as g03k
from spark_gotchas.knowledge.judges import g09_container as g09
from spark_gotchas.knowledge.judges import g10_parallelism as g10
from spark_gotchas.knowledge.profiles import GB10, PROFILES
from spark_gotchas.knowledge.readings import remedies
from spark_gotchas.knowledge.readings.env import ExtensionScan
from spark_gotchas.knowledge.readings.host import HostPlatform
from spark_gotchas.knowledge.readings.kernel import KernelLog
from spark_gotchas.knowledge.readings.torch import TorchBuild
from spark_gotchas.knowledge.verdict import Status, Verdict
from spark_gotchas.machine import readers
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.snapshot import load
from spark_gotchas.plugin import RecordedSpark
from spark_gotchas.run.session import SessionState

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CASES = FIXTURES / "cases33"


def snapshot_readings(name: str) -> dict:
    return json.loads((CASES / name).read_text())["readings"]


def changes(verdict: Verdict) -> list[remedies.Change]:
    return [remedies.Change(c["kind"], c["target"], c.get("value", "")) for c in verdict.readings.get("remedy", [])]


# -- (a) apply the fix, judge again ---------------------------------------------------------------------
def apply_to_scan(scan: ExtensionScan, change: remedies.Change) -> None:
    """What a change does to an extension scan: an uninstalled distribution's files are gone; one
    reinstalled for this machine (or from the index the fix names), or built for the GPU the fix names,
    is its build for this machine and GPU: the objects of another CPU and the units no GPU here runs
    are replaced by ones that do."""
    if change.kind == "uninstall":
        scan.distributions = [d for d in scan.distributions if d.name.lower().replace("_", "-") != change.target]
        scan.linked = [e for e in scan.linked if (e.distribution or "").lower().replace("_", "-") != change.target]
        scan.foreign = [f for f in scan.foreign if f.distribution != change.target]
    elif change.kind in ("install", "build"):
        scan.foreign = [f for f in scan.foreign if f.distribution != change.target]
        for dist in scan.distributions:
            if dist.name == change.target:
                dist.units = {k: {"sm_121a compute_121a@9.0": 1} for k in dist.units}
                dist.kernels = {k: ["sm_121a", "compute_121a"] for k in dist.kernels}
                dist.requires_majors, dist.name_major = {}, None
        for ext in scan.linked:
            if ext.distribution == change.target:
                ext.cuda_libs = {}
                for lib in ext.needs + ext.loads:
                    lib.major, lib.found = 13, lib.found or "/usr/local/cuda/lib64/" + lib.soname
    else:
        raise AssertionError(f"no way to apply {change} to an extension scan")


def quiet_or_measured(first: Verdict, again: Verdict, applied: list[remedies.Change]) -> None:
    if all(c.kind == "measure" for c in applied):
        assert applied and all(c.target in first.fix or c.value in first.fix for c in applied), (first.fix, applied)
        return
    assert not again.status.needs_fix or again.summary != first.summary, (first.line, again.line)
    assert again.fix != first.fix or not again.fix, f"the same fix again: {again.fix}"


WHEELS = json.loads((FIXTURES / "g01_wheels.json").read_text())


@pytest.mark.parametrize("case", ["flashinfer", "vllm", "sgl-kernel"])
def test_g1_a_part_or_package_without_kernels_here_is_quiet_once_its_remedy_is_applied(case):
    scan = from_jsonable(ExtensionScan, WHEELS[case]["reading"])
    first = g01.judge_extensions(scan, None, GB10)
    assert first.status.needs_fix
    applied = changes(first)
    if not applied:  # a fix without a machine form names what the package's own build must hold
        pytest.skip(f"{case}: its fix ({first.fix[:60]}…) is a build of the package")
    for change in applied:
        if change.kind in ("uninstall", "install", "build"):
            apply_to_scan(scan, change)
    again = g01.judge_extensions(scan, None, GB10)
    quiet_or_measured(first, again, applied)
    assert case not in {p for p, v in again.readings["packages"].items() if v["status"] in ("FAIL", "WARN")}


def test_g1_flash_attn_without_kernels_and_g2_broken_flash_attn_are_quiet_once_it_is_uninstalled():
    readings = snapshot_readings("a4-flash-attn-without-sm121.json")
    scan = from_jsonable(ExtensionScan, readings["env.cuda_extensions"])
    g1 = g01.judge_extensions(scan, None, GB10)
    from spark_gotchas.knowledge.readings.attention import FlashAttn, Sdpa
    flash = from_jsonable(FlashAttn, readings["attention.flash_attn"])
    g2 = g02.judge_flash_attn(flash, None, from_jsonable(Sdpa, readings["attention.sdpa"]))
    assert changes(g1) == changes(g2) == list(remedies.FLASH_ATTN.changes)
    apply_to_scan(scan, remedies.Change("uninstall", "flash-attn"))
    assert g01.judge_extensions(scan, None, GB10).status is Status.PASS
    assert g02.judge_flash_attn(FlashAttn(installed=False), None, from_jsonable(Sdpa, readings["attention.sdpa"])
                                ).status is Status.PASS


def test_g1_an_extension_for_another_cpu_is_quiet_once_reinstalled_on_this_machine():
    from spark_gotchas.knowledge.readings.env import ForeignObject, LinkedExtension

    scan = ExtensionScan(resolved=True, interpreter_machine="aarch64", machines={"aarch64": 80, "x86_64": 3},
                         foreign=[ForeignObject("/sp/torch/lib/libtorch_cuda.so", "torch", "x86_64")],
                         linked=[LinkedExtension(path="/sp/torch/lib/libtorch_cuda.so", distribution="torch")])
    host = HostPlatform(machine="aarch64")
    first = g01.judge_extensions(scan, None, GB10, host)
    assert first.status is Status.FAIL and changes(first) == [remedies.Change("install", "torch", "--force-reinstall")]
    apply_to_scan(scan, changes(first)[0])
    assert "built for" not in g01.judge_extensions(scan, None, GB10, host).summary


def test_g1_a_cpu_only_torch_is_quiet_once_installed_from_the_index_the_fix_names():
    cpu = TorchBuild(installed=True, version="2.9.1+cpu", cuda=None)
    from spark_gotchas.knowledge.readings.env import ContainerEvidence
    conda = ContainerEvidence(conda_meta=True, venv=False, conda_torch="pytorch-2.6.0-cpu_generic_py312_h1a2b3c4_0")
    first = g01.judge_torch(cpu, None, GB10, conda)
    applied = changes(first)
    assert applied == [remedies.Change("uninstall", "pytorch", "conda"),
                       remedies.Change("install", "torch", "https://download.pytorch.org/whl/cu130")]
    again = g01.judge_torch(TorchBuild(installed=True, version="2.9.1+cu130", cuda="13.0"), None, GB10)
    quiet_or_measured(first, again, applied)


def test_g1_tritons_ptxas_is_quiet_once_the_variable_names_the_ptxas_the_fix_found():
    from spark_gotchas.knowledge.readings.triton import TritonPtxas

    ptxas = from_jsonable(TritonPtxas, snapshot_readings("b1-triton-3.5-ptxas-12.8.json")["triton.ptxas"])
    first = g01.judge_triton_ptxas(ptxas, None, GB10)
    (change,) = changes(first)
    assert change.kind == "env" and change.target == "TRITON_PTXAS_PATH"
    tool = next(t for t in ptxas.tools if t.env_var == change.target)
    tool.env_value = change.value
    tool.from_env = next(o for o in ptxas.others if o.path == change.value)
    quiet_or_measured(first, g01.judge_triton_ptxas(ptxas, None, GB10), [change])


@pytest.mark.parametrize("case", ["c1-fallen-off-the-bus.json", "c2-xid13-illegal-instruction.json"])
def test_g1_the_kernel_logs_fix_is_a_power_cycle_a_new_boot_judges_or_a_measurement(case):
    log = from_jsonable(KernelLog, snapshot_readings(case)["kernel.log"])
    first = g01k.judge_kernel_log(log, GB10)
    applied = changes(first)
    if applied and applied[0].kind == "power-cycle":  # a new boot: a new kernel log, the driver loaded
        log = KernelLog(read=True, source=log.source, lines=1, nvrm_lines=1)
    quiet_or_measured(first, g01k.judge_kernel_log(log, GB10), applied)


def test_g3_memory_that_ran_out_names_the_measurement_that_decides_next():
    log = from_jsonable(KernelLog, snapshot_readings("c3-gb10-nv-err-no-memory.json")["kernel.log"])
    first = g03k.judge_kernel_memory(log, GB10)
    assert [c.kind for c in changes(first)] == ["measure"]
    assert "--spark-model-gb" in first.fix


@pytest.mark.parametrize("case", ["d1-set-up-right-1.6-gbps.json", "d2-second-function-at-x2.json"])
def test_g10_a_link_fix_is_a_measurement_and_never_a_setting_already_set(case):
    from spark_gotchas.knowledge.readings.dist import CollectiveRun

    run = from_jsonable(CollectiveRun, snapshot_readings(case)["dist.collective"])
    first = g10.judge_collective(run, GB10)
    applied = changes(first)
    assert all(c.kind == "measure" for c in applied)
    net = run.ranks[0].net
    for c in applied:  # nothing it names is a setting already in place
        assert not (c.target in net.env and net.env[c.target] == c.value)
    quiet_or_measured(first, first, applied)


def test_g9_a_bare_host_or_conda_is_quiet_in_the_container_its_fix_names():
    from spark_gotchas.knowledge.readings.env import ContainerEvidence, Distributions

    for name in ("f1-transformerlab-conda-cpu-torch.json", "f2-uv-venv-pypi-cpu-torch.json"):
        readings = snapshot_readings(name)
        ev = from_jsonable(ContainerEvidence, readings["env.container"])
        dists = from_jsonable(Distributions, readings["env.distributions"])
        first = g09.judge_environment(ev, dists)
        applied = changes(first)
        assert applied and applied[0] == remedies.Change("use", "container", "nvcr.io/nvidia/pytorch")
        in_ngc = ContainerEvidence(dockerenv=True, ngc_vars={"NVIDIA_PYTORCH_VERSION": "25.10",
                                                             "PYTORCH_BUILD_VERSION": "2.9.0a0+145a3a7"})
        quiet_or_measured(first, g09.judge_environment(in_ngc, Distributions(versions={"torch": "2.9.0a0+145a3a7"})),
                          applied)


# -- (b) no target gets two remedies ----------------------------------------------------------------------
def snapshots() -> list[Path]:
    out = []
    for path in sorted(FIXTURES.rglob("*.json")):
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:400]
        except OSError:
            continue
        if "spark-gotchas-snapshot" in head:
            out.append(path)
    return out


def checks() -> list:
    out = []
    for path in sorted((ROOT / "tests_gotchas").glob("test_g*.py")):
        module = _load(path)
        out += [f for name, f in vars(module).items() if name.startswith("test_g") and callable(f)
                and list(inspect.signature(f).parameters) == ["spark"]]
    return out


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_checks_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verdicts_of(path: Path) -> list[Verdict]:
    """Every check's verdict on the snapshot's readings, as a replay judges them."""
    snap = load(path)
    state = SessionState(config=None, options=RunOptions().with_recorded(snap.options), replay=snap)
    out = []
    for check in checks():
        spark = RecordedSpark(state)
        try:
            check(spark=spark)
        except (readers.ReadingUnavailable, pytest.skip.Exception):
            continue
        if spark.verdict is not None:
            out.append(spark.verdict)
    return out


PIP = re.compile(r"\bpip (install|uninstall)\b")
EXPORT = re.compile(r"\bexport ([A-Z][A-Z0-9_]*)=(\S+?)(?=[\s,;)]|$)")
BUILD = re.compile(r"\bbuild ([a-z][\w.-]+) from source\b")
MTU = re.compile(r"\bip link set (\S+) mtu (\d+)")


def remedies_in(verdict: Verdict) -> set[tuple[str, str, str]]:
    """(target, action, value) of every remedy a verdict's fix gives: its machine form, and the commands
    its text holds (pip install/uninstall, build from source, export, ip link mtu)."""
    out = {(c.target, c.kind, c.value) for c in changes(verdict)}
    text = verdict.fix
    commands = list(PIP.finditer(text))
    for i, match in enumerate(commands):
        end = commands[i + 1].start() if i + 1 < len(commands) else len(text)
        for name in pip_names(text[match.start():end]):
            out.add((name, match.group(1), ""))
    out |= {(name.lower(), "build", "") for name in BUILD.findall(text)}
    out |= {(var, "env", value.rstrip(".")) for var, value in EXPORT.findall(text) if "<" not in value}
    out |= {(iface, "mtu", n) for iface, n in MTU.findall(text)}
    return out


KINDS = {"install": "install", "uninstall": "uninstall", "build": "build"}


def conflicts(found: set[tuple[str, str, str]]) -> list[str]:
    """Two remedies for one target in one run: install and uninstall, build and uninstall, a variable
    set to two values, an MTU of two sizes."""
    by_target: dict[str, set[tuple[str, str]]] = {}
    for target, action, value in found:
        by_target.setdefault(target, set()).add((action, value))
    out = []
    for target, actions in sorted(by_target.items()):
        kinds = {a for a, _ in actions}
        if "uninstall" in kinds and kinds & {"install", "build"}:
            out.append(f"{target}: {sorted(actions)}")
        for kind in ("env", "mtu"):
            values = {v for a, v in actions if a == kind}
            if len(values) > 1:
                out.append(f"{target}: {kind} to {sorted(values)}")
    return out


def run_remedies() -> dict[str, set[tuple[str, str, str]]]:
    """Each run's remedies: the snapshots' (every check), the real-wheel scans' (G1 as a Spark)."""
    out: dict[str, set] = {}
    for path in snapshots():
        found = set()
        for verdict in verdicts_of(path):
            if verdict.fix:
                assert instruction_problems(verdict.fix) == [], (path.name, verdict.line, verdict.fix)
            found |= remedies_in(verdict)
        out[str(path.relative_to(FIXTURES))] = found
    for case, data in WHEELS.items():
        if case.startswith("_"):
            continue
        for key in ("gb10", "none", "h200"):
            verdict = g01.judge_extensions(from_jsonable(ExtensionScan, data["reading"]), None, PROFILES[key])
            out[f"g01_wheels.json:{case}:{key}"] = remedies_in(verdict)
    return out


@pytest.fixture(scope="module")
def every_run():
    return run_remedies()


def test_the_collection_sees_the_checks_and_the_remedies_it_should(every_run):
    assert len(checks()) >= 25 and len(snapshots()) >= 30
    a4 = every_run["cases33/a4-flash-attn-without-sm121.json"]
    assert ("flash-attn", "uninstall", "") in a4 and ("attn_implementation", "setting", "sdpa") in a4
    assert ("TRITON_PTXAS_PATH", "env", "/usr/local/cuda/bin/ptxas") in every_run["cases33/b1-triton-3.5-ptxas-12.8.json"]
    assert ("roceP2p1s0f0", "measure", "") not in every_run["cases33/d1-set-up-right-1.6-gbps.json"]


def test_no_run_gives_one_target_two_remedies(every_run):
    found = {run: conflicts(remedies) for run, remedies in every_run.items()}
    assert {run: c for run, c in found.items() if c} == {}


def test_a_package_gets_one_kind_of_remedy_in_every_run(every_run):
    """A package readings/remedies.py decides for gets that one kind of remedy in every run, whoever judges
    it: flash-attn is always uninstalled, never built from source for sm_121 (other packages' remedies
    may differ between machines of different CUDA majors: uninstall nvidia-cudnn-cu13 on one, -cu12 on
    the other)."""
    kinds: dict[str, set[str]] = {}
    for remedies_found in every_run.values():
        for target, action, _ in remedies_found:
            if action in KINDS:
                kinds.setdefault(target, set()).add(action)
    named = {"flash-attn", "flashinfer-jit-cache", "sgl-kernel"}  # the packages readings/remedies.py decides for
    assert {remedies.for_package(n, (12, 1)) is not None for n in named} == {True}
    mixed = {t: sorted(k) for t, k in kinds.items() if t in named and len(k) > 1}
    assert mixed == {}
    assert kinds.get("flash-attn") == {"uninstall"} and kinds.get("flashinfer-jit-cache") == {"uninstall"}


def test_the_conflict_finder_finds_the_conflicts_it_was_written_for():
    before = {("flash-attn", "build", ""), ("flash-attn", "uninstall", ""), ("NCCL_IB_HCA", "env", "a,b"),
              ("NCCL_IB_HCA", "env", "a"), ("torch", "install", "")}
    assert conflicts(before) == ["NCCL_IB_HCA: env to ['a', 'a,b']",
                                 "flash-attn: [('build', ''), ('uninstall', '')]"]
    text = Verdict(1, Status.FAIL, "x", fix="build flash-attn from source for sm_121; or run pip uninstall -y flash-attn "
                                             "&& pip install --index-url https://x/cu130 torch, then export A=1")
    assert remedies_in(text) >= {("flash-attn", "build", ""), ("flash-attn", "uninstall", ""), ("torch", "install", ""),
                                 ("A", "env", "1")}
    assert copy.copy(before) == before
