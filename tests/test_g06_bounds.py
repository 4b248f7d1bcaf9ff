"""G6 on servers bounded by a flag spelled another way, a config file, an environment variable or their
release's default, each a snapshot of a public report or the server's own documentation
(tests/fixtures/g06_bounds/README.md), replayed through the real plugin as a user replays it:
the line, its fix and what the detail says of each bound."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from gline_block import glines
from inner_runs import inner_runs, run_checks  # noqa: F401  inner_runs: a fixture

from spark_gotchas.machine.readers import load_all

HERE = Path(__file__).parent / "fixtures" / "g06_bounds"
load_all()  # every reader and reading type imported before the in-process runs, which drop what they import

CASES = {
    # a flag spelled another way
    "g06-vllm-kv-bytes-underscore.json": (
        "G6 PASS: 1 workload beside this run, small or capped: pid 2101 vLLM", None,
        "--kv_cache_memory_bytes=36864M: a 38.7 GB KV cache beside its weights; --max-num-seqs 64; holds 64.3 GB"),
    "g06-vllm-abbreviated-flag.json": (
        "G6 FAIL: 1 workload in the way: pid 3300 vLLM +1 process (cap 0.85 = 111.1 GB of 130.7 GB)",
        "run one heavy job at a time: restart vLLM with --gpu-memory-utilization 0.5 or lower; or stop what you do not "
        "need (kill 3300)", "--gpu-memory-utilization 0.85 = 111.1 GB of 130.7 GB; --max-num-seqs 4"),
    "g06-trl-vllm-serve-abbreviated.json": (
        "G6 PASS: 1 workload beside this run, small or capped: pid 2500 vLLM (trl vllm-serve)", None,
        "--gpu_memory_utilization 0.25 = 32.7 GB of 130.7 GB; holds 30.0 GB"),
    # a config file
    "g06-trtllm-yaml-over-flag.json": (
        "G6 FAIL: together they claim 79.6 GB of 130.7 GB, more than half: pid 7120 TensorRT-LLM +1 more",
        "run one heavy job at a time: set kv_cache_config.free_gpu_memory_fraction lower (now 0.3, the share of the "
        "memory still free after its weights it takes for its KV cache) in /opt/stack/gpt-oss-120b.yaml or cap "
        "kv_cache_config.max_tokens, restart trtllm-serve and run this check again; set "
        "kv_cache_config.free_gpu_memory_fraction lower (now 0.15, the share of the memory still free after its weights "
        "it takes for its KV cache) in /opt/stack/gpt-oss-20b.yaml or cap kv_cache_config.max_tokens, restart "
        "trtllm-serve and run this check again; or stop what you do not need (kill 7120 7220)",
        "kv_cache_config.free_gpu_memory_fraction 0.3 in /opt/stack/gpt-oss-120b.yaml (of the memory free after its "
        "weights) = 39.2 GB of 130.7 GB free at its start; kv_cache_config.max_tokens 131072; holds 60.0 GB"),
    "g06-vllm-two-configs-kv-bytes.json": (
        "G6 PASS: 2 workloads beside this run, small or capped: pid 4100 vLLM, pid 4200 vLLM", None,
        "kv-cache-memory-bytes: 2G in /opt/xr/omni.yaml: a 2.1 GB KV cache beside its weights; max-num-seqs: 4 in "
        "/opt/xr/omni.yaml; holds 33.9 GB"),
    "g06-sglang-config.json": (
        "G6 FAIL: 1 workload in the way: pid 5150 SGLang +1 process (cap 0.9 = 117.6 GB of 130.7 GB)",
        "run one heavy job at a time: set mem-fraction-static: 0.5 or lower in /opt/sglang/qwen38.yaml and restart "
        "SGLang; or stop what you do not need (kill 5150)",
        "mem-fraction-static: 0.9 in /opt/sglang/qwen38.yaml = 117.6 GB of 130.7 GB; holds 107.4 GB"),
    # an environment variable
    "g06-ollama-max-loaded-3.json": (
        "G6 FAIL: 1 workload in the way: pid 1790 Ollama +2 processes (holds 67.3 GB)",
        "run one heavy job at a time: stop Ollama while training (sudo systemctl stop ollama) or unload its models "
        "(ollama stop MODEL); to keep it beside training, set OLLAMA_MAX_LOADED_MODELS=1 (it is 3) and "
        "OLLAMA_KEEP_ALIVE=0 in its service's environment (sudo systemctl edit ollama) and see what it holds with "
        "ollama ps; or stop what you do not need (kill 1790)",
        "OLLAMA_MAX_LOADED_MODELS=3, OLLAMA_KEEP_ALIVE unset: 5m; holds 67.3 GB"),
    "g06-tgi-env-fraction.json": (
        "G6 PASS: 1 workload beside this run, small or capped: pid 700 TGI", None,
        "CUDA_MEMORY_FRACTION=0.4 = 52.3 GB of 130.7 GB; holds 51.0 GB"),
    "g06-llama-server-env.json": (
        "G6 FAIL: 1 workload in the way: pid 2222 llama.cpp server (holds 11.2 GB, no memory cap)",
        "run one heavy job at a time: stop the llama.cpp server while training, or restart it with a smaller "
        "LLAMA_ARG_CTX_SIZE (it keeps what it takes when it loads) and run this check again; or stop what you do not "
        "need (kill 2222)", "(LLAMA_ARG_N_GPU_LAYERS=99, LLAMA_ARG_CTX_SIZE=16384); holds 11.2 GB"),
    # what the installed release defaults to
    "g06-vllm-0.27-default.json": (
        "G6 FAIL: 1 workload in the way: pid 812 vLLM +1 process (default cap 0.92 = 120.2 GB of 130.7 GB)",
        "run one heavy job at a time: restart vLLM with --gpu-memory-utilization 0.5 or lower; or stop what you do not "
        "need (kill 812)", "default --gpu-memory-utilization 0.92 (vLLM 0.27.1) = 120.2 GB of 130.7 GB"),
    "g06-vllm-0.34-default.json": (
        "G6 FAIL: 1 workload in the way: pid 905 vLLM +1 process (default cap 1 = 130.7 GB of 130.7 GB)",
        "run one heavy job at a time: restart vLLM with --gpu-memory-utilization 0.5 or lower; or stop what you do not "
        "need (kill 905)", "default --gpu-memory-utilization of vLLM 0.34.0: all of the GPU"),
    "g06-sglang-auto-fraction.json": (
        "G6 FAIL: 1 workload in the way: pid 5300 SGLang",
        "run one heavy job at a time: restart SGLang with --mem-fraction-static 0.5 or lower; or stop what you do not "
        "need (kill 5300)", "sized by SGLang 0.5.10.post1 from the GPU's memory, less what it leaves for activations "
                            "and CUDA graphs: 0.892 = 116.6 GB of 130.7 GB"),
    # from outside
    "g06-vllm-config-unreadable.json": (
        "G6 FAIL: 1 workload in the way: pid 6100 vLLM +1 process (holds 40.0 GB, bound unknown)",
        "run one heavy job at a time: read its config as root (sudo cat /home/alice/serve.yaml) or run this check as "
        "root; or restart vLLM with --gpu-memory-utilization 0.5 or lower; or stop what you do not need (kill 6100)",
        "cannot tell how far pid 6100 may grow: its config /home/alice/serve.yaml could not be read: no permission "
        "(another user's process; run as root to read it)"),
    "g06-vllm-kv-bytes-abc.json": (
        "G6 FAIL: 1 workload in the way: pid 6200 vLLM +1 process (holds 30.0 GB, bound unknown)",
        "run one heavy job at a time: see how vLLM pid 6200 was started (ps -o args= -p 6200: it would not have "
        "started with what its command line reads here) and restart it with --gpu-memory-utilization 0.5 or lower; or "
        "stop what you do not need (kill 6200)",
        "cannot tell how far pid 6200 may grow: '--kv-cache-memory-bytes=abc' is no size vLLM accepts"),
}


def replay(pytester, name: str, *args: str):
    return run_checks(pytester, ("test_g06_contention.py",), "-m", "fast", "-v", "--spark-replay", str(HERE / name),
                      *args)


@pytest.mark.parametrize("name", list(CASES))
def test_each_case_replays_to_the_line_written_down_before_it_was_built(pytester, name):
    line, fix, detail = CASES[name]
    result = replay(pytester, name)
    lines = glines(result)
    assert lines[0] == line
    if fix is None:
        assert len(lines) == 1 or not lines[1].startswith("    fix:")
    else:
        assert lines[1] == f"    fix: {fix}"
    assert detail in result.stdout.str()


def test_a_fixed_kv_cache_beside_a_plan_it_leaves_too_little_for_names_the_size_that_fits(pytester):
    result = replay(pytester, "g06-vllm-kv-bytes-underscore.json", "--spark-model-gb", "35")
    assert glines(result)[:2] == [
        "G6 FAIL: 3.6 GB short of the 70.0 GB load peak: pid 2101 vLLM",
        "    fix: run one heavy job at a time: restart vLLM with --kv-cache-memory-bytes 35g or less (its KV cache is "
        "38.7 GB; its weights and buffers take 25.6 GB beside it); or stop what you do not need (kill 2101)"]


def test_the_snapshots_are_what_make_snapshots_writes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("g06_bounds_make", HERE / "make_snapshots.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    monkeypatch.setattr(make, "OUT", tmp_path)
    make.main()
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(CASES)
    assert [n for n in written if (tmp_path / n).read_text() != (HERE / n).read_text()] == []
