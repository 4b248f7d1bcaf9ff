"""G3 on a machine that is not the profile's platform (``--spark-profile gb10`` on a CI box or an
H200): its memory stands for nothing there, so no FAIL or WARN comes from it; a plan is still
weighed against the profile's own memory."""

from __future__ import annotations

import json
from pathlib import Path

from spark_gotchas.knowledge.judges import g03_unified_memory as g03
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import GB10, H200, SAME, Machine
from spark_gotchas.knowledge.readings.gpu import GpuInventory
from spark_gotchas.knowledge.readings.mem import CudaMemory
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers.mem import from_result, parse_meminfo

MEMINFO = json.loads((Path(__file__).parent / "fixtures" / "g03_meminfo.json").read_text())
CI_BOX = parse_meminfo("MemTotal: 24683664 kB\nMemFree: 21800000 kB\nMemAvailable: 23900000 kB\nCached: 1560000 kB\n"
                       "Buffers: 0 kB\nShmem: 0 kB\n")  # 25.3 GB: a 30 GB plan is '36 GB short' of it as a Spark
NO_GPU = Machine(is_profile=False, device="no GPU")


def test_a_ci_box_judged_as_a_gb10_never_fails_from_its_own_memory():
    plan = Plan(model_gb=30)
    assert g03.judge_headroom(CI_BOX, GB10, plan).status is Status.FAIL  # what it said before: the box's 24 GB
    v = g03.judge_headroom(CI_BOX, GB10, plan, None, GpuInventory(nvml_error="NVML library not found"), NO_GPU)
    assert v.line == "G3 INFO: not a GB10 (no GPU): 30 GB of weights would peak at ~60.0 GB (x2) of a GB10's 130.7 GB"
    assert v.readings["profile_memory_bytes"] == 130_663_821_312 and v.readings["planned_peak_bytes"] == 60e9
    for verdict in (g03.judge_page_cache(CI_BOX, GB10, plan, NO_GPU), g03.judge_gpu_memory_view(CI_BOX, GB10, None, None, NO_GPU)):
        assert verdict.line == "G3 INFO: not a GB10 (no GPU): memory not judged"
        assert verdict.detail == "this machine is not a GB10 (no GPU): its memory cannot stand for a Spark's"
    no_plan = g03.judge_headroom(CI_BOX, GB10, Plan(), here=NO_GPU)
    assert no_plan.line == "G3 INFO: not a GB10 (no GPU): memory not judged"
    assert no_plan.detail == "this machine is not a GB10 (no GPU): its memory cannot stand for a Spark's"


def test_a_plan_larger_than_any_gb10_warns_wherever_it_is_judged():
    v = g03.judge_headroom(CI_BOX, GB10, Plan(model_gb=70), here=NO_GPU)
    assert v.line == "G3 WARN: 70 GB of weights would peak at ~140.0 GB (x2), more than all of a GB10's 130.7 GB"
    assert v.fix == "plan a smaller or quantized model: this one cannot load on a GB10. " + g03.QLORA_NOTE


def test_a_gb10_judged_as_an_h200_weighs_the_weights_against_the_h200s_own_memory():
    here = Machine(is_profile=False, device="NVIDIA GB10")
    info = parse_meminfo(MEMINFO["gb10_after_60g_write"]["text"])
    assert g03.judge_headroom(info, H200, Plan(model_gb=100), here=here).line == \
        "G3 INFO: not an H200 (NVIDIA GB10): 100 GB of weights would take 100.0 GB of an H200's 150.8 GB"
    assert g03.judge_headroom(info, H200, Plan(model_gb=160), here=here).status is Status.WARN


def test_the_load_probe_elsewhere_is_information_and_on_the_platform_judged_as_before():
    probe = from_result({"attempted": True, "ok": True, "size_bytes": 8_000_000_000, "cold": True, "integrated": False,
                         "load_seconds": 9.0, "peak_extra_ratio": 2.4, "cache_ratio": 1.0, "rss_ratio": 0.4,
                         "cuda_ratio": 1.0})
    elsewhere = g03.judge_load_probe(probe, Plan(), GB10, Machine(False, "NVIDIA H200"))
    assert elsewhere.line == "G3 INFO: not a GB10 (NVIDIA H200): load peak not judged"
    assert elsewhere.detail == "this machine is not a GB10 (NVIDIA H200): its load peak cannot stand for a Spark's"
    assert g03.judge_load_probe(probe, Plan(), H200, SAME).status is Status.INFO  # discrete: both shares, as before


def test_a_gb10_judged_as_itself_is_judged_in_full():
    info = parse_meminfo(MEMINFO["gb10_after_60g_write"]["text"])
    cuda = CudaMemory(attempted=True)
    assert g03.judge_page_cache(info, GB10, Plan(model_gb=50), SAME).status is Status.WARN
    assert g03.judge_headroom(info, GB10, Plan(model_gb=70), cuda, None, SAME).status is Status.FAIL
