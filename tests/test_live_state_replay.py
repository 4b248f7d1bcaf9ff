"""Snapshots of machines that misbehave, or are not the platform judged, replayed through the real
plugin and checks (``python -m pytest -m fast --spark-replay ...`` from the checkout): the lines
tests/fixtures/live_state/README.md expects."""

from __future__ import annotations

import json

from replay_run import REPO, replay

FIXTURES = REPO / "tests" / "fixtures" / "live_state"
H200 = REPO / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"


def test_a_spark_stuck_at_600_mhz_under_load_fails_g4_with_the_power_cycle(tmp_path):
    r = replay(FIXTURES / "spark-stuck-600mhz.json", tmp_path)
    assert r.of(4) == [
        "G4 FAIL: SM clock 600 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state",
        "    fix: power-cycle the Spark fully: shut it down, unplug AC power for about 60 s, then boot (a reboot does "
        "not clear the low-power state); if it comes back, contact NVIDIA support"]
    assert "SM clock 600 MHz under 2.5 s of BF16 GEMM (8192^3)" in r.detail(r.of(4)[0])
    assert "gb10 profile" in r.detail(r.of(4)[0])
    assert r.of(3) == ["G3 PASS: page cache 13.6 GB (10% of 130.7 GB); CUDA sees 110.9 GB free (MemFree)"]
    assert r.detail(r.of(3)[0]) == "MemAvailable 124.4 GB"
    assert r.of(6) == ["G6 PASS: no other GPU workload among NVML's processes and 311 command lines"]
    assert r.detail(r.of(6)[0]) == "NVML lists no other process, and none of 311 command lines is a known server or trainer"
    assert r.platform["profile"] == "gb10" and r.platform["machine_is_profile"] is True


def test_an_ngc_container_without_gpus_fails_g1_and_says_so_on_the_platform_line(tmp_path):
    r = replay(FIXTURES / "spark-ngc-without-gpus.json", tmp_path)
    assert r.of(1) == [
        "G1 FAIL: an NVIDIA GPU is in this machine (000f:01:00.0) but not visible in this environment",
        "    fix: start the container with --gpus all (or --runtime nvidia), e.g. docker run --gpus all --ipc=host "
        "IMAGE; in Kubernetes request nvidia.com/gpu with runtimeClassName: nvidia"]
    assert ": NVIDIA GPU present but not visible here (10de:2e12 at 000f:01:00.0), torch 2.9.0a0+145a3a7bda.nv25.10, " \
           "profile none" in r.stdout
    assert r.platform["gpu_hidden"] == "10de:2e12 at 000f:01:00.0"


def test_a_ci_box_judged_as_a_gb10_reports_its_live_state_as_information_only(tmp_path):
    r = replay(FIXTURES / "ci-box-as-gb10.json", tmp_path)
    assert r.of(3) == ["G3 INFO: not a GB10 (no GPU): memory not judged (+2 more INFO)"]
    assert r.of(5) == ["G5 INFO: not a GB10 (no GPU): bandwidth not judged (+1 more INFO)"]
    assert r.of(6) == ["G6 INFO: not a GB10 (no GPU): processes not judged"]
    assert r.of(4) == ["G4 INFO: not a GB10 (no GPU): clocks not judged; not checked: clocks at rest, last soak"]
    for gotcha, thing in (("G3", "memory"), ("G4", "clocks under load"), ("G5", "bandwidth"), ("G6", "processes")):
        line = f"{gotcha} INFO: not a GB10 (no GPU): {thing.split()[0]} not judged"
        assert (line, f"this machine is not a GB10 (no GPU): its {thing} cannot stand for a Spark's") in r.details
    assert "G3 INFO: not a GB10 (no GPU): 30 GB of weights would peak at ~60.0 GB (x2) of a GB10's 130.7 GB" in r.checks
    assert "G5 INFO: on a GB10, batch-1 decode of 30 GB of weights tops out at 7.7-8.4 tokens/s (read 231-253 GB/s)" \
        in r.checks
    assert not [line for line in r.checks if line.split(":")[0] in ("G3 FAIL", "G3 WARN", "G4 FAIL", "G4 WARN",
                                                                    "G5 FAIL", "G5 WARN", "G6 FAIL", "G6 WARN")]
    assert r.lines[0].startswith("G1 FAIL: torch 2.13.0+cpu is a CPU build")  # the software is still judged as a Spark's
    assert ", not a GB10: its live state not judged, profile gb10" in r.stdout
    assert r.platform["machine_is_profile"] is False


def test_a_plan_no_gb10_can_hold_warns_even_from_a_ci_box(tmp_path):
    r = replay(FIXTURES / "ci-box-as-gb10.json", tmp_path, "--spark-model-gb", "70")
    assert r.of(3)[0] == "G3 WARN: 70 GB of weights would peak at ~140.0 GB (x2), more than all of a GB10's 130.7 GB"
    assert r.of(3)[1] == ("    fix: plan a smaller or quantized model: this one cannot load on a GB10. QLoRA peaks "
                          "earlier than bf16 (dequantization adds transient copies): leave more room than the factor says")


def test_vllm_at_its_default_beside_a_planned_load_is_named_by_g3_g4_g5_and_g6(tmp_path):
    r = replay(FIXTURES / "spark-vllm-0.9-plan-40gb.json", tmp_path)
    assert r.of(3)[0] == "G3 FAIL: 40 GB of weights peak at ~80.0 GB (x2), but MemAvailable is 6.1 GB: 73.9 GB short"
    assert r.detail(r.of(3)[0]) == "the peak is while loading safetensors, in the unified pool"
    assert r.of(4) == ["G4 WARN: 52.4 TFLOP/s at 2450 MHz, far below GB10's 94-98: pid 6008 VLLM::EngineCore busy (see G6)",
                       "    fix: stop or pause pid 6008 VLLM::EngineCore (G6 says how), then re-run spark-gotchas -m fast "
                       "-k g04"]
    assert "2.5 s of BF16 GEMM (8192^3): SM clock 2450 MHz, 62 W, 63 °C, 52.4 TFLOP/s" in r.detail(r.of(4)[0])
    assert r.of(5)[0] == "G5 WARN: read 186 GB/s, below GB10's 231-253: pid 6008 VLLM::EngineCore busy (see G6)"
    assert r.detail(r.of(5)[0]).startswith("copy 160, read 186, write 168, triad 160 GB/s (1 GiB arrays): copy, read, "
                                           "triad below GB10's measured range (copy 180-210, read 231-253, triad "
                                           "180-210 GB/s)")
    assert r.of(6) == [
        "G6 FAIL: 1 workload in the way: pid 5990 vLLM +1 process (cap 0.9)",
        "    fix: run one heavy job at a time: restart vLLM with --gpu-memory-utilization 0.38 or lower; or stop what you "
        "do not need (kill 5990)"]  # 0.38: what the planned 80 GB load peak leaves of the 130.7 GB pool
    assert ("pid 5990 vLLM +1 process (--gpu-memory-utilization 0.9 = 117.6 GB of 130.7 GB; holds 59.2 GB; user "
            "spark); they claim 117.6 GB of 130.7 GB, leaving 13.0 GB for the planned load peak of 80.0 GB (67.0 GB "
            "short)") in r.detail(r.of(6)[0])


DROP_CACHES_FIX = ("    fix: drop the page cache between runs, as root: sync; echo 3 > /proc/sys/vm/drop_caches (never in "
                   "the middle of training; the suite never does this itself)")
VIEW_DETAIL_END = ("CUDA free 3.2 GB of 130.7 GB, MemFree 3.2 GB, MemAvailable 41.1 GB: CUDA counts 37.9 GB that the "
                   "kernel could reclaim as used")


def test_a_planned_load_that_fits_memavailable_but_not_memfree_warns_g3_though_the_headroom_passes(tmp_path):
    r = replay(FIXTURES / "spark-page-cache-fills-pool.json", tmp_path, "--spark-model-gb", "16")
    assert r.of(3) == [
        "G3 WARN: the 32.0 GB load peak exceeds what CUDA sees free (3.2 GB): page cache holds 38.6 GB", DROP_CACHES_FIX]
    assert r.detail(r.of(3)[0]) == ("the planned load peak fits MemAvailable (41.1 GB) but not MemFree (3.2 GB): page "
                                    "cache 38.6 GB (30% of 130.7 GB) stands between")
    # MemAvailable alone would let the plan through: the headroom check passes, the page-cache check is the finding
    headroom = "G3 PASS: 16 GB of weights peak at ~32.0 GB (x2); MemAvailable 41.1 GB leaves 9.1 GB to spare"
    assert headroom in r.checks
    assert r.detail(headroom) == "the peak is while loading safetensors, in the unified pool"
    view = "G3 INFO: NVML device memory is Not Supported: the GPU shares the 130.7 GB system pool"
    assert view in r.checks and r.detail(view).endswith(VIEW_DETAIL_END)
    assert r.platform["profile"] == "gb10" and r.platform["machine_is_profile"] is True


def test_a_page_cache_of_30_percent_of_the_pool_warns_g3_without_a_plan(tmp_path):
    r = replay(FIXTURES / "spark-page-cache-fills-pool.json", tmp_path)
    assert r.of(3) == ["G3 WARN: page cache 38.6 GB (30% of 130.7 GB): CUDA sees only 3.2 GB free (MemFree)",
                       DROP_CACHES_FIX]
    assert r.detail(r.of(3)[0]) == "MemAvailable is 41.1 GB"
    headroom = "G3 INFO: MemAvailable 41.1 GB: up to 20.6 GB of weights fit a load (x2)"
    assert headroom in r.checks
    assert r.detail(headroom) == ("MemAvailable 41.1 GB of 130.7 GB (MemFree 3.2 GB, page cache 38.6 GB) in the "
                                  "unified pool; --spark-model-gb N judges a plan")
    assert r.detail("G3 INFO: NVML device memory is Not Supported: the GPU shares the 130.7 GB system pool").endswith(
        VIEW_DETAIL_END)


def test_a_spark_hot_at_rest_with_sw_thermal_slowdown_active_warns_g4_with_the_cooling_fix(tmp_path):
    snapshot = FIXTURES / "spark-hot-at-rest.json"
    r = replay(snapshot, tmp_path)
    assert r.of(4) == [
        "G4 WARN: throttling at rest: SW thermal slowdown active",
        "    fix: improve cooling (clear intake and exhaust, cooler room, nothing stacked on or against the unit) or "
        "cap run length and checkpoint before throttling sets in"]
    assert r.detail(r.of(4)[0]) == "91 °C, 13.0 W (no power limit reported), SM 208 MHz of 3003 max"
    assert r.of(3) == ["G3 SKIP: could not read mem.meminfo: not in the snapshot spark-hot-at-rest.json (+2 more SKIP)"]
    # the reason decides: the same sample with no reason active is history, not a finding (GB10's threshold is -2 °C)
    data = json.loads(snapshot.read_text())
    data["readings"]["thermal.snapshot"]["sample"]["reasons_mask"] = 0
    cool = tmp_path / "no-reason.json"
    cool.write_text(json.dumps(data))
    quiet = replay(cool, tmp_path)
    assert quiet.of(4) == ["G4 INFO: at rest: 91 °C, 13.0 W (no power limit reported), SM 208 MHz of 3003 max; "
                           "2 not checked"]
    assert quiet.detail(quiet.of(4)[0]) == "since the driver loaded: SW thermal slowdown 27.6 s"


def test_the_h200_preflight_replayed_as_a_gb10_is_not_judged_as_a_spark(tmp_path):
    r = replay(H200, tmp_path, "--spark-profile", "gb10", "--spark-model-gb", "30")
    assert r.of(3) == ["G3 INFO: not a GB10 (NVIDIA H200): memory not judged (+2 more INFO)"]
    assert r.of(5) == ["G5 INFO: not a GB10 (NVIDIA H200): bandwidth not judged (+1 more INFO)"]
    assert r.of(6) == ["G6 INFO: not a GB10 (NVIDIA H200): processes not judged"]
    for gotcha, thing in (("G3", "memory"), ("G4", "clocks under load"), ("G4", "clocks at rest"), ("G5", "bandwidth"),
                          ("G6", "processes")):
        line = f"{gotcha} INFO: not a GB10 (NVIDIA H200): {thing.split()[0]} not judged"
        assert (line, f"this machine is not a GB10 (NVIDIA H200): its {thing} cannot stand for a Spark's") in r.details
    assert "G3 INFO: not a GB10 (NVIDIA H200): 30 GB of weights would peak at ~60.0 GB (x2) of a GB10's 130.7 GB" \
        in r.checks
    # replayed as what it is, the same snapshot is judged in full
    as_recorded = replay(H200, tmp_path)
    assert as_recorded.of(5)[0] == "G5 PASS: read 4614, copy 4230 GB/s: at or above H200's measured range; not checked: " \
        "decode ceiling"
    assert as_recorded.detail(as_recorded.of(5)[0]).startswith("copy 4230, read 4614, write 4646, triad 4390 GB/s "
                                                               "(1 GiB arrays)")
