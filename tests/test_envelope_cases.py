"""Memory already gone and readings no machine of their platform can give, replayed through the real
plugin and checks (``python -m pytest -m fast --spark-replay ...``): the lines
tests/fixtures/envelope/README.md expects, each written down before the case was first run."""

from __future__ import annotations

import pytest
from replay_run import REPO, replay

FIXTURES = REPO / "tests" / "fixtures" / "envelope"
NOT_JUDGED = ("re-run on the machine the snapshot names (spark-gotchas -m fast --spark-snapshot FILE there) and replay "
              "that; if this was a live run, the GPU is not what the profile describes: check its name (nvidia-smi -L) "
              "and judge it with --spark-profile generic, which takes NVML's own figures")


def fix_of(r, gotcha: int) -> list[str]:
    return [line.strip() for line in r.of(gotcha)[1:]]


# -- memory already gone ------------------------------------------------------------------------------
def test_swap_in_use_is_memory_a_small_load_cannot_have(tmp_path):
    r = replay(FIXTURES / "spark-swap-8gib.json", tmp_path, "--spark-model-gb", "2")
    assert r.of(3)[0] == "G3 FAIL: 2 GB of weights peak at ~4.0 GB (x2), but MemAvailable less swap is 0.0 GB: 4.0 GB short"
    assert "8.6 GB in swap (SwapTotal - SwapFree) counts as gone" in r.detail(r.of(3)[0])


def test_swap_in_use_is_counted_in_a_pass_too(tmp_path):
    r = replay(FIXTURES / "spark-swap-928mib.json", tmp_path, "--spark-model-gb", "50")
    line = "G3 PASS: 50 GB of weights peak at ~100.0 GB (x2); MemAvailable less swap leaves 17.1 GB to spare"
    assert line in r.checks
    assert "MemAvailable 118.1 GB leaves 117.1 GB" in r.detail(line)


def test_a_spark_container_limited_to_64_gib_fails_a_load_the_pool_would_hold(tmp_path):
    r = replay(FIXTURES / "spark-container-64g.json", tmp_path, "--spark-model-gb", "50")
    assert r.of(3)[0] == "G3 FAIL: 50 GB of weights need ~50.0 GB of host memory; the container's limit leaves 38.7 GB"
    assert fix_of(r, 3)[0].startswith("fix: give this container a memory limit of at least 80.0 GB (docker run "
                                      "--memory, a Kubernetes memory limit, Slurm --mem)")
    detail = r.detail(r.of(3)[0])
    assert "68.7 GB (/sys/fs/cgroup/memory.max), 30.0 GB of it in use: 38.7 GB left" in detail
    assert "the CUDA copy is not charged to it" in detail
    # without the plan the largest load that fits is the container's, not the pool's
    plain = replay(FIXTURES / "spark-container-64g.json", tmp_path)
    assert "G3 INFO: the container's limit leaves 38.7 GB: up to 38.7 GB of weights fit a load (x2)" in plain.checks


def test_the_recorded_h200_in_a_64_gib_container_fails_the_host_side_of_a_load(tmp_path):
    r = replay(FIXTURES / "h200-container-64g.json", tmp_path, "--spark-model-gb", "70")
    assert r.of(3)[0] == "G3 FAIL: the load's host side (~70.0 GB) exceeds the container's 66.7 GB left: 3.3 GB short"
    assert fix_of(r, 3)[0].startswith("fix: give this container a memory limit of at least 72.0 GB")


# -- readings no machine of their platform can give -------------------------------------------------------
def test_the_impossible_gb10_of_the_example_passes_nothing(tmp_path):
    r = replay(FIXTURES / "gb10-impossible.json", tmp_path)
    assert r.of(3) == ["G3 WARN: NVML device memory 400.0 GB: not a GB10 reading; memory not judged",
                       f"    fix: {NOT_JUDGED}"]
    assert r.of(4)[0] == "G4 WARN: power limit 240 W is no GB10's: not a GB10 reading; clocks not judged (+1 more WARN)"
    assert "G4 WARN: BF16 181 TFLOP/s is 1.4x GB10's 125 TFLOP/s: not a GB10's; clocks not judged" in r.checks
    assert r.of(5)[0] == "G5 WARN: read 905 GB/s is 3.3x GB10's 273 GB/s: not a GB10's; bandwidth not judged"
    assert r.of(7)[0] == "G7 WARN: BF16 181 TFLOP/s: not a GB10 reading; GEMM rates not judged"
    detail = r.detail("G3 WARN: NVML device memory 400.0 GB: not a GB10 reading; memory not judged")
    assert detail.startswith("NVML device memory 400.0 GB is 2.9x all GB10 can have (137.4 GB) (NVIDIA DGX Spark "
                             "datasheet")
    assert not [line for line in r.checks if line.split(":")[0] in ("G3 FAIL", "G4 PASS", "G5 PASS", "G7 PASS")]


def test_an_x86_64_gb10_has_no_live_state_judged(tmp_path):
    r = replay(FIXTURES / "x86-gb10.json", tmp_path)
    assert r.of(3)[0] == "G3 WARN: machine x86_64 is no GB10's (aarch64): not a GB10 reading; memory not judged (+2 more WARN)"
    assert r.of(4)[0] == "G4 WARN: machine x86_64 is no GB10's (aarch64): not a GB10 reading; clocks not judged (+1 more WARN)"
    assert r.of(5)[0] == "G5 WARN: machine x86_64 is no GB10's (aarch64): not a GB10's; bandwidth not judged"
    assert r.of(7)[0] == "G7 WARN: machine x86_64 is no GB10's (aarch64): not a GB10's; GEMM rates not judged"
    assert ", machine x86_64 is no GB10's (aarch64): not a GB10, its live state not judged, profile gb10" in r.stdout
    assert r.platform["machine"] == "x86_64" and r.platform["kernel"] == "6.8.0-49-generic"
    assert r.platform["beyond_envelope"] == "machine x86_64 is no GB10's (aarch64)"


def test_a_bandwidth_above_the_datasheet_is_no_gb10_reading(tmp_path):
    r = replay(FIXTURES / "gb10-with-h100-bandwidth.json", tmp_path)
    assert r.of(5)[0] == "G5 WARN: write 3269 GB/s is 12.0x GB10's 273 GB/s: not a GB10's; bandwidth not judged"


def test_a_sparse_counted_nvfp4_rate_is_above_the_dense_peak(tmp_path):
    r = replay(FIXTURES / "gb10-nvfp4-sparse.json", tmp_path)
    assert r.of(7)[0] == "G7 WARN: NVFP4 1000 TFLOP/s: not a GB10 reading; GEMM rates not judged"
    assert r.detail(r.of(7)[0]).startswith("NVFP4 1000 TFLOP/s is 2.0x GB10's 500 TFLOP/s dense peak")


@pytest.mark.parametrize("plan", [("--spark-model-gb", "30")])
def test_an_h100_pcie_is_judged_by_its_own_figures_and_an_sxm_power_limit_is_none_of_its(tmp_path, plan):
    r = replay(FIXTURES / "h100-pcie-sxm-power.json", tmp_path, *plan)
    assert r.of(4)[0] == "G4 WARN: power limit 700 W: not an H100 PCIe reading; clocks not judged"
    assert r.detail(r.of(4)[0]).startswith("power limit 700 W is 2.0x H100 PCIe's 350 W maximum")
    assert "G5 PASS: best write 1950 GB/s is 96% of NVML's theoretical 2039" in r.checks
    ceiling = "G5 INFO: batch-1 decode of 30 GB of weights tops out at 63.3 tokens/s (read 1900 GB/s)"
    assert "(a plan from the datasheet's 2039 GB/s would expect 68.0)" in r.detail(ceiling)
    assert "G3 PASS: page cache 3.1 GB is host memory only: the NVIDIA H100 PCIe has its own" in r.checks
