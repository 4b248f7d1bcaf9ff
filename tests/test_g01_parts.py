"""G1 on packages that split their GPU code into parts: which module loads a part, whether importing
the package loads it (spark_gotchas.sources), and the verdict: FAIL for a part the import loads,
WARN naming an optional part and its users, nothing for a part a build for this GPU covers.
Sites are laid out from the fatbin fixtures (tests/fixtures/fatbin: sm120a_sm90.so runs on no
sm_121, plain_sm120_sm121_ptx121.so does)."""

from __future__ import annotations

import base64
import hashlib
import shutil
import textwrap
from pathlib import Path

from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.profiles import GB10
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers import env as ex
from spark_gotchas.machine.readers import sources

FATBIN = Path(__file__).parent / "fixtures" / "fatbin"
OTHER_GPU, SPARK_FAMILY = FATBIN / "sm120a_sm90.so", FATBIN / "plain_sm120_sm121_ptx121.so"


def site(root: Path, name: str, files: dict[str, str | Path]) -> Path:
    """A site folder holding one distribution ``name`` with ``files`` (text, or a file to copy)."""
    sp = root / "site-packages"
    rows = []
    for rel, content in files.items():
        target = sp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_text(textwrap.dedent(content))
        data = target.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
    info = sp / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_text("\n".join(rows + [f"{info.name}/RECORD,,"]) + "\n")
    return sp


def scan(sp: Path, monkeypatch):
    monkeypatch.setattr(ex, "site_dirs", lambda: [str(sp)])
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    return ex.read_cuda_extensions(None)


LAZY = {
    "gpukit/__init__.py": '"""gpukit"""\nfrom . import ops\n',
    "gpukit/ops.py": "def run():\n    from . import _core_C\n    return _core_C\n",
    "gpukit/mla.py": "def mla():\n    import gpukit._mla_C\n",
    "gpukit/_core_C.so": SPARK_FAMILY,
    "gpukit/_mla_C.so": OTHER_GPU,
}


def test_a_part_only_a_feature_loads_is_a_warn_naming_it_and_its_user(tmp_path, monkeypatch):
    reading = scan(site(tmp_path, "gpukit-cu13", LAZY), monkeypatch)
    (dist,) = [d for d in reading.distributions if d.name == "gpukit-cu13"]
    assert dist.parts["gpukit/_mla_C.so"].users == ["gpukit.mla"]
    assert dist.parts["gpukit/_mla_C.so"].at_import is False
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.line == "G1 WARN: gpukit-cu13: _mla_C has no kernel for sm_121 (sm_90, sm_120a only)"
    assert verdict.detail.startswith("_mla_C (gpukit/_mla_C.so: sm_90, sm_120a): gpukit.mla loads it, "
                                     "when that feature is first used")
    assert verdict.fix.startswith("use only gpukit-cu13's features that do not load _mla_C on this GPU "
                                  "(gpukit.mla loads it); to use them, build gpukit-cu13 from source for sm_121")


def test_a_part_the_package_imports_at_import_is_a_fail(tmp_path, monkeypatch):
    eager = {**LAZY, "gpukit/ops.py": "from . import _mla_C\n\ndef run():\n    return _mla_C\n"}
    reading = scan(site(tmp_path, "gpukit-cu13", eager), monkeypatch)
    (dist,) = [d for d in reading.distributions if d.name == "gpukit-cu13"]
    assert dist.parts["gpukit/_mla_C.so"].at_import is True  # __init__ -> ops -> _mla_C, all at module level
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.status is Status.FAIL
    assert verdict.line == "G1 FAIL: gpukit-cu13: _mla_C, which importing it loads, has no kernel for sm_121"
    assert "when the package is imported" in verdict.detail


def test_an_import_under_type_checking_or_in_a_module_the_import_does_not_reach_is_no_load_at_import(tmp_path,
                                                                                                       monkeypatch):
    files = {**LAZY,
             "gpukit/__init__.py": "import typing\nif typing.TYPE_CHECKING:\n    from . import mla\nfrom . import ops\n",
             "gpukit/mla.py": "import gpukit._mla_C\n"}  # module level, but nothing the import runs imports mla
    reading = scan(site(tmp_path, "gpukit-cu13", files), monkeypatch)
    (dist,) = [d for d in reading.distributions if d.name == "gpukit-cu13"]
    assert dist.parts["gpukit/_mla_C.so"].at_import is False
    assert g01.judge_extensions(reading, None, GB10).status is Status.WARN


def test_a_build_of_the_same_feature_for_this_gpu_covers_one_for_another(tmp_path, monkeypatch):
    """fused_moe_100 beside fused_moe_120 (FlashInfer's layout): the package loads the build for the GPU."""
    files = {"kit/__init__.py": "", "kit/fused_moe_90.so": OTHER_GPU, "kit/fused_moe_120.so": SPARK_FAMILY}
    verdict = g01.judge_extensions(scan(site(tmp_path, "kit-cu13", files), monkeypatch), None, GB10)
    assert verdict.status is Status.PASS, verdict.line
    parts = verdict.readings["packages"]["kit-cu13"]["parts_without_kernels"]
    assert parts == {"fused_moe_90": {"file": "kit/fused_moe_90.so", "targets": ["sm_90", "sm_120a"],
                                      "how": "covered", "users": [], "covered_by": "fused_moe_120"}}


def test_a_module_of_the_same_name_elsewhere_is_not_a_user(tmp_path):
    """``from .moe_utils import f`` in another folder imports a Python module, not the jit-cache's moe_utils.so."""
    sp = site(tmp_path, "fi", {
        "fi/__init__.py": "",
        "fi/moe/moe_utils.py": "X = 1\n",
        "fi/moe/runner.py": "from .moe_utils import X\n",
        "fi/jit/moe_utils.py": 'def spec():\n    return load("moe_utils")\n',
        "fi_cache/jit_cache/moe_utils/moe_utils.so": OTHER_GPU,
    })
    part = sources.part_of("fi_cache/jit_cache/moe_utils/moe_utils.so")
    found, problem = sources.find([part], str(sp), ["fi_cache", "fi"], [str(sp / "fi_cache"), str(sp / "fi")])
    assert problem == ""
    assert found[part.key].users == ["fi.jit.moe_utils"] and found[part.key].at_import is False


def test_torch_ops_namespace_and_relative_imports_name_a_part():
    import ast

    part = sources.part_of("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")
    assert part.module == "vllm.vllm_flash_attn._vllm_fa3_C" and part.stem == "_vllm_fa3_C"
    code = "try:\n    from . import _vllm_fa3_C\nexcept ImportError:\n    pass\n"
    assert sources.uses(ast.parse(code), "vllm.vllm_flash_attn.flash_attn_interface", False, part) == (True, True)
    code = "def f():\n    return torch.ops._vllm_fa3_C.fwd()\n"
    assert sources.uses(ast.parse(code), "vllm.other", False, part) == (True, False)
    assert sources.uses(ast.parse("from . import _vllm_fa3_C\n"), "vllm.other", False, part) == (False, False)


def test_without_grep_the_users_are_unknown_and_the_line_still_names_the_part(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "run_bounded", _no_grep)
    reading = scan(site(tmp_path, "gpukit-cu13", LAZY), monkeypatch)
    (dist,) = [d for d in reading.distributions if d.name == "gpukit-cu13"]
    assert dist.parts_note.startswith("grep could not run")
    assert dist.parts["gpukit/_mla_C.so"].searched is False
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.status is Status.WARN and "_mla_C" in verdict.line
    assert "what loads it is not known (its sources were not searched)" in verdict.detail


def _no_grep(cmd, timeout, **kwargs):
    from spark_gotchas.base.procs import BoundedRun

    return BoundedRun(tuple(cmd), error="FileNotFoundError: [Errno 2] No such file or directory: 'grep'")


# -- built for another CPU than the machine's (ELF e_machine) ----------------------------------------
def test_an_extension_built_for_another_cpu_than_the_machine_fails_naming_its_distribution(tmp_path, monkeypatch):
    """The fixtures are x86_64 builds; read as by an aarch64 Python (a Spark's), they are foreign."""
    from spark_gotchas.knowledge.readings.host import HostPlatform

    monkeypatch.setattr(ex, "INTERPRETER_MACHINE", "aarch64")
    reading = scan(site(tmp_path, "gpukit-cu13", LAZY), monkeypatch)
    assert reading.interpreter_machine == "aarch64" and reading.machines == {"x86_64": 2}
    assert {f.machine for f in reading.foreign} == {"x86_64"} and {f.distribution for f in reading.foreign} == {
        "gpukit-cu13"}
    verdict = g01.judge_extensions(reading, None, GB10, HostPlatform(machine="aarch64"))
    assert verdict.line == ("G1 FAIL: gpukit-cu13: built for x86_64, not for this aarch64 machine: _core_C.so, "
                            "_mla_C.so")
    assert verdict.fix.startswith("reinstall gpukit-cu13 on this aarch64 machine: pip install --force-reinstall")
    assert verdict.readings["machine"] == "aarch64"


def test_a_python_built_for_another_cpu_than_the_machine_is_one_finding(tmp_path, monkeypatch):
    """An x86_64 Python under emulation on an aarch64 host: the recorded machine (host.platform) says
    aarch64, this Python and its extensions x86_64."""
    from spark_gotchas.knowledge.readings.host import HostPlatform

    reading = scan(site(tmp_path, "gpukit-cu13", LAZY), monkeypatch)
    assert reading.interpreter_machine == "x86_64"
    verdict = g01.judge_extensions(reading, None, GB10, HostPlatform(machine="aarch64"))
    assert verdict.line == "G1 FAIL: this Python is built for x86_64, not for this aarch64 machine"
    assert verdict.fix.startswith("run a Python built for aarch64")
    same = g01.judge_extensions(reading, None, GB10, HostPlatform(machine="x86_64"))
    assert "built for" not in same.line  # the machine's own CPU: judged as before
