"""Triton's ptxas (triton.ptxas) and G1's judgement of it: which binary Triton runs for this GPU, its
CUDA release from ``ptxas --version`` (bounded, in a child), and whether that release knows sm_121.
The releases are those of the real wheels' binaries (triton 3.5.0: ptxas 12.8; triton 3.9.0: ptxas
12.9 and ptxas-blackwell 13.4, `ptxas --version` run on the x86_64 wheels), served here by scripts."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.profiles import GB10, H200, NONE
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers import triton as reader

COMPILER_39 = '''
def get_ptxas(arch: int) -> knobs.NvidiaTool:
    if arch < 90:
        return knobs.nvidia.ptxas
    # The ptxas-blackwell name is misleading; keep it until legacy ptxas is removed.
    return knobs.nvidia.ptxas_blackwell
'''
COMPILER_35 = "def get_ptxas() -> knobs.NvidiaTool:\n    return knobs.nvidia.ptxas\n"


def tool(path: Path, release: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.86'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def triton(root: Path, version: str, tools: dict[str, str], compiler: str) -> Path:
    """A site folder holding triton ``version`` with ``tools`` (name -> release) in backends/nvidia/bin."""
    pkg = root / "triton"
    (pkg / "backends" / "nvidia").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "backends" / "nvidia" / "compiler.py").write_text(compiler)
    for name, release in tools.items():
        tool(pkg / "backends" / "nvidia" / "bin" / name, release)
    info = root / f"triton-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: triton\nVersion: {version}\n")
    return root


def read(root: Path, monkeypatch, others: list[str] = ()):
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(reader, "other_ptxas", lambda: list(others))
    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH", raising=False)
    return reader.read_triton_ptxas(None)


SPARK = GpuInventory(driver_version="580.95.05", cuda_driver_version=13000,
                     devices=[GpuDevice(index=0, name="NVIDIA GB10", capability=(12, 1))])


def test_triton_3_5_s_ptxas_12_8_cannot_compile_for_a_spark(tmp_path, monkeypatch):
    """triton-lang/triton#8539: pytorch-triton 3.5.0 on a DGX Spark, "ptxas fatal : Value 'sm_121a' is
    not defined for option 'gpu-name'"; the fix there: TRITON_PTXAS_PATH to CUDA 13's ptxas."""
    cuda13 = tool(tmp_path / "cuda-13.0" / "bin" / "ptxas", "13.0")
    reading = read(triton(tmp_path / "site", "3.5.0", {"ptxas": "12.8"}, COMPILER_35), monkeypatch, [str(cuda13)])
    assert reading.blackwell_from_sm is None and [t.name for t in reading.tools] == ["ptxas"]
    assert reading.tools[0].used.release == "12.8"
    verdict = g01.judge_triton_ptxas(reading, SPARK, GB10)
    assert verdict.line == "G1 FAIL: triton 3.5.0's ptxas is CUDA 12.8: it cannot compile for sm_121a (CUDA 12.9 can)"
    assert verdict.fix == (f"export TRITON_PTXAS_PATH={cuda13} (CUDA 13.0's ptxas, found here): Triton then compiles "
                           "for sm_121a with it, whatever ptxas it bundles")
    assert verdict.readings["remedy"] == [{"kind": "env", "target": "TRITON_PTXAS_PATH", "value": str(cuda13)}]
    assert g01.judge_triton_ptxas(reading, None, H200).status is Status.PASS  # 12.8 compiles for sm_90a


def test_triton_3_9_runs_ptxas_blackwell_for_a_spark_and_passes(tmp_path, monkeypatch):
    reading = read(triton(tmp_path / "site", "3.9.0", {"ptxas": "12.9", "ptxas-blackwell": "13.4"}, COMPILER_39),
                   monkeypatch)
    assert reading.blackwell_from_sm == 90 and reading.tool_for(121).name == "ptxas-blackwell"
    assert reading.tool_for(80).name == "ptxas"
    verdict = g01.judge_triton_ptxas(reading, SPARK, GB10)
    assert verdict.line == "G1 PASS: triton 3.9.0 compiles for sm_121a with ptxas-blackwell (CUDA 13.4)"


def test_the_variable_replaces_the_bundled_ptxas_when_its_binary_runs(tmp_path, monkeypatch):
    good = tool(tmp_path / "cuda" / "bin" / "ptxas", "13.0")
    root = triton(tmp_path / "site", "3.5.0", {"ptxas": "12.8"}, COMPILER_35)
    monkeypatch.setattr(reader, "other_ptxas", lambda: [])
    reading = read(root, monkeypatch)
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(good))
    reading = reader.read_triton_ptxas(None)
    assert reading.tools[0].env_value == str(good) and reading.tools[0].used.release == "13.0"
    assert g01.judge_triton_ptxas(reading, SPARK, GB10).line == (
        "G1 PASS: triton 3.5.0 compiles for sm_121a with ptxas (TRITON_PTXAS_PATH) (CUDA 13.0)")
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(tmp_path / "missing"))  # Triton falls back to its own
    reading = reader.read_triton_ptxas(None)
    assert reading.tools[0].from_env.error == "not found" and reading.tools[0].used.release == "12.8"


def test_a_ptxas_built_for_another_cpu_or_hung_is_a_reading_not_a_crash(tmp_path, monkeypatch):
    arm = tmp_path / "ptxas"
    arm.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x02\x00\xb7\x00" + b"\0" * 44)  # an aarch64 header
    arm.chmod(0o755)
    run = reader.ptxas_version(str(arm))
    assert run.release is None and "Exec format error" in run.error
    hung = tmp_path / "hung"
    hung.write_text("#!/bin/sh\nsleep 30\n")
    hung.chmod(0o755)
    run = reader.ptxas_version(str(hung), timeout=0.5)
    assert run.error == "--version did not answer within 0.5 s"


def test_no_triton_and_no_gpu_are_info(tmp_path, monkeypatch):
    from spark_gotchas.knowledge.readings.triton import TritonPtxas

    assert g01.judge_triton_ptxas(TritonPtxas(installed=False), SPARK, GB10).status is Status.INFO
    reading = read(triton(tmp_path / "site", "3.5.0", {"ptxas": "12.8"}, COMPILER_35), monkeypatch)
    assert g01.judge_triton_ptxas(reading, None, NONE).status is Status.INFO
