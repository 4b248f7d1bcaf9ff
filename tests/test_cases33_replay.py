"""Cases rebuilt from public reports of DGX Sparks (tests/fixtures/cases33, README.md there), replayed
through the real plugin and checks as a user would (``-m fast --spark-replay``): the lines written
down before the first replay, and the fixes that go with them."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_run import replay

CASES = Path(__file__).parent / "fixtures" / "cases33"


def run(tmp_path, name: str, *args: str):
    return replay(next(CASES.glob(f"{name}-*.json")), tmp_path, *args)


def test_b1_triton_3_5_ptxas_cannot_compile_for_a_spark(tmp_path):
    """triton-lang/triton#8539: pytorch-triton 3.5.0's ptxas 12.8 on a DGX Spark."""
    r = run(tmp_path, "b1")
    assert r.of(1)[0] == "G1 FAIL: triton 3.5.0's ptxas is CUDA 12.8: it cannot compile for sm_121a (CUDA 12.9 can)"
    assert " ".join(x.strip() for x in r.of(1)[1:]).startswith(
        "fix: export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (CUDA 13.0's ptxas, found here)")


def test_b2_triton_3_9_compiles_for_a_spark_with_ptxas_blackwell(tmp_path):
    r = run(tmp_path, "b2")
    assert r.of(1)[0].startswith("G1 PASS: triton 3.9.0 compiles for sm_121a with ptxas-blackwell (CUDA 13.4)")


def test_c1_a_gpu_fallen_off_the_bus_without_an_xid_fails_g1_with_a_power_cycle(tmp_path):
    """NVIDIA/NVSentinel#155: 'has fallen off the bus and is not responding to commands', no Xid line."""
    r = run(tmp_path, "c1")
    assert r.of(1)[0] == ("G1 FAIL: the GPU fell off the bus (Xid 79) at 1843 s after boot: it runs nothing until a "
                          "power cycle")
    assert r.of(1)[1].startswith("    fix: power-cycle the Spark fully: shut it down, unplug AC power")


def test_c2_xid_13_from_an_illegal_instruction_is_a_g1_warn(tmp_path):
    """leptonai/gpud#46: three Xid 13 lines with pid unknown, then an Xid 109 (named in the detail)."""
    r = run(tmp_path, "c2")
    assert r.of(1)[0] == "G1 WARN: a CUDA program faulted on the GPU since boot: Xid 13 x3"
    assert "also Xid 109 x1 (see the catalogue)" in r.detail(r.of(1)[0])


def test_c3_a_gb10_nv_err_no_memory_is_a_g3_warn(tmp_path):
    """NVIDIA/open-gpu-kernel-modules#1358: a GB10 host wedged after NV_ERR_NO_MEMORY."""
    r = run(tmp_path, "c3")
    assert r.of(3)[0] == "G3 WARN: memory ran out since boot: NV_ERR_NO_MEMORY"
    assert "power-cycle the Spark fully" in " ".join(r.of(3))


@pytest.mark.parametrize("case,line,fix", [
    # the two Sparks, both HCAs and MTU 9000, 1.6 GB/s: the fix moves to the link
    ("d1", "G10 FAIL: the recorded collective probe FAILs: 2 nodes, nccl; replay with -m multinode",
     "fix: run ib_write_bw on each rail alone (roceP2p1s0f0, rocep1s0f0)"),
    # tonyd2wild/…-2x-DGX-Spark#35: a BIOS before 2026-04 wires the second function at Gen5 x2
    ("d2", "G10 WARN: the recorded collective probe WARNs: 2 nodes, nccl; replay with -m multinode",
     "fix: update the machine's firmware (sudo fwupdmgr refresh && sudo fwupdmgr update"),
    # NVIDIA/dgx-spark-playbooks#102/#103: both set, 3.04 GB/s with a development NCCL
    ("d3", "G10 FAIL: the recorded collective probe FAILs: 2 nodes, nccl; replay with -m multinode",
     "fix: run ib_write_bw on each rail alone"),
])
def test_d_two_sparks_set_up_right_get_a_fix_that_changes_something(tmp_path, case, line, fix):
    r = run(tmp_path, case)
    lines = r.of(10)
    assert lines[0] == line
    text = " ".join(x.strip() for x in lines[1:])
    assert text.startswith(fix) and "NCCL_IB_HCA" not in text and "mtu 9000" not in text


def test_d1_replayed_with_its_multinode_check_prints_the_probes_own_line(tmp_path):
    r = run(tmp_path, "d1", "-m", "fast or multinode")
    assert r.of(10)[0] == ("G10 FAIL: 2 nodes, nccl: 1.60 GB/s all-reduce bus bandwidth: far below the 20-24 GB/s "
                           "expected")


def test_a4_flash_attn_without_sm_121_kernels_gets_one_remedy_from_g1_and_g2(tmp_path):
    r = run(tmp_path, "a4")
    g1, g2 = r.of(1), r.of(2)
    assert g1[0] == "G1 FAIL: flash_attn has no kernel for sm_121 (it has sm_80, sm_90)"
    assert g2[0] == "G2 FAIL: flash-attn 2.7.4 is installed but broken: a causal flash_attn_func call fails"
    assert g1[1:] == g2[1:] and g1[1].startswith("    fix: run pip uninstall -y flash-attn")


@pytest.mark.parametrize("case,g2,g9", [
    ("f1", "G2 INFO: torch 2.9.1+cpu is a CPU build: no attention runs on a GPU here; flash-attn not installed",
     "G9 WARN: a bare host (no container marker); conda: torch 2.9.1+cpu from pip"),
    ("f2", "G2 INFO: torch 2.9.1+cpu is a CPU build: no attention runs on a GPU here; flash-attn not installed",
     "G9 WARN: a bare host (no container marker); bare pip: torch 2.9.1+cpu, nothing pins it to this GPU"),
    ("f3", "G2 INFO: torch 2.6.0 is a CPU build: no attention runs on a GPU here; flash-attn not installed",
     "G9 WARN: a bare host (no container marker); conda: torch 2.6.0 from conda "
     "(pytorch-2.6.0-cpu_generic_py312_h1a2b3c…)"),
])
def test_f_a_cpu_only_torch_and_conda_are_said_so(tmp_path, case, g2, g9):
    """transformerlab-app#1330 (conda, pip's torch 2.9.1+cpu), pollen-robotics/microduck_rl#2 (a uv venv),
    conda/conda#14761 (conda-forge's CPU pytorch chosen by conda)."""
    r = run(tmp_path, case)
    assert r.of(2)[0] == g2 and r.of(9)[0] == g9
    torch_fix = " ".join(x.strip() for x in r.of(1)[1:])
    assert torch_fix.startswith("fix: remove conda's pytorch-2.6.0 first (conda remove --force pytorch), then "
                                "reinstall torch") if case == "f3" else torch_fix.startswith("fix: reinstall torch")
