"""G6's fixes change something: each one, applied as written to the command line, config file or
environment of the server it names, and the server restarted with it, leaves G6 quiet about that
server; or the fix names the measurement that decides next (a re-check, ``ollama ps``,
``nvidia-smi``, how its launcher was started, its config read as root).

The fix is read the way a user reads it: the instruction before ``; or stop what you do not need``,
its knob and figure taken from its words. A restart is modelled as the server taking what its new
bound lets it (a fraction of the pool, or its old weights beside the new KV cache)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from spark_gotchas.base.serial import from_jsonable
from spark_gotchas.knowledge.judges import g06_contention as g06
from spark_gotchas.knowledge.profiles import GB10
from spark_gotchas.knowledge.readings.gpu import GpuProcess, GpuProcesses, ServerConfig, ServerStart
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.knowledge.workloads import FRACTION, KV_BYTES, classify, vllm_bytes
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers.mem import parse_meminfo

FIXTURES = Path(__file__).parent / "fixtures"
MEMINFO = parse_meminfo(json.loads((FIXTURES / "g03_meminfo.json").read_text())["gb10_before_60g_write"]["text"])
POOL = MEMINFO.mem_total_bytes
MEASURES = ("run this check again", "ollama ps", "nvidia-smi", "ps -o args=", "sudo cat", "run this check as root")
GB = 1e9


def snapshot(name: str) -> tuple[GpuProcesses, dict]:
    doc = json.loads((FIXTURES / "g06_bounds" / name).read_text())
    return from_jsonable(GpuProcesses, doc["readings"]["gpu.processes"]), doc["options"]


def proc(pid, argv, held=None, ppid=1, start=None, name=None):
    return GpuProcess(pid=pid, ppid=ppid, name=name or argv[0], cmdline=argv, start=start,
                      gpu_memory_bytes=None if held is None else int(held * GB), gpu_devices=[0] if held else [],
                      nvml_lists=["compute"] if held else [], found_by="nvml" if held else "scan")


# cases of the unit tests' kind beside the snapshots: one of each knob the fixes name
INLINE = {
    "vLLM at 0.9 by its flag": [proc(10, ["vllm", "serve", "m", "--gpu-memory-utilization", "0.9"], start=ServerStart(
        version="0.20.0")), proc(11, ["VLLM::EngineCore"], 110.0, ppid=10)],
    "vLLM with a 70 GB KV cache": [proc(20, ["vllm", "serve", "m", "--kv-cache-memory-bytes", "70g"]),
                                  proc(21, ["VLLM::EngineCore"], 90.0, ppid=20)],
    "vLLM, a KV cache in its YAML": [
        proc(30, ["vllm", "serve", "m", "--config", "/etc/v.yaml"],
             start=ServerStart(configs=[ServerConfig("/etc/v.yaml", "kv_cache_memory_bytes: 80G\n")])),
        proc(31, ["VLLM::EngineCore"], 100.0, ppid=30)],
    "TGI by its variable": [
        proc(40, ["text-generation-launcher", "--model-id", "m"], start=ServerStart(environ={"CUDA_MEMORY_FRACTION": "0.95"})),
        proc(41, ["text-generation-server", "serve", "m"], 120.0, ppid=40,
             start=ServerStart(environ={"CUDA_MEMORY_FRACTION": "0.95"}))],
    "an engine alone": [proc(50, ["VLLM::EngineCore"], 70.0)],
    "a llama-server": [proc(60, ["llama-server", "-m", "x.gguf", "-c", "131072"], 40.0)],
    "Ollama already bounded": [proc(70, ["ollama", "serve"], 30.0, start=ServerStart(
        environ={"OLLAMA_MAX_LOADED_MODELS": "1", "OLLAMA_KEEP_ALIVE": "0"}))],
    "a llama-cpp-python server by its config file": [proc(80, ["python3", "-m", "llama_cpp.server", "--config_file",
                                                              "/srv/models.json"], 70.0, start=ServerStart(
        environ={}, configs=[ServerConfig("/srv/models.json", '{"models": [{"model": "a.gguf", "n_gpu_layers": -1}]}')]))],
}
SNAPSHOTS = sorted(p.name for p in (FIXTURES / "g06_bounds").glob("g06-*.json"))


def judge(reading: GpuProcesses, options: dict | None = None):
    plan = RunOptions(spark_model_gb=(options or {}).get("spark_model_gb")).plan
    return g06.judge_contention(reading, GB10, plan, MEMINFO, None)


def groups_named(reading: GpuProcesses, verdict) -> list[g06.Group]:
    pids = {int(p) for p in re.findall(r"kill ([\d ]+)\)", verdict.fix)[0].split()} if "(kill " in verdict.fix else set()
    return [g for g in g06.group_processes(reading.processes) if g.root.pid in pids]


def restart(group: g06.Group, new: GpuProcess) -> None:
    """The group's memory after a restart with its launcher as ``new`` says: what the new bound lets it take."""
    old = group.workload.bound
    bound = classify(new.cmdline, new.name or "", new.start).bound
    held = group.held_bytes or 0
    if bound.kind == FRACTION and bound.fraction_for(POOL) is not None:
        target = min(held, bound.fraction_for(POOL) * POOL)
    elif bound.kind == KV_BYTES and old.kind == KV_BYTES:
        target = held - old.value + bound.value
    else:
        return
    for member in group.members:
        if member.gpu_memory_bytes:
            member.gpu_memory_bytes = int(member.gpu_memory_bytes * target / held)


def apply(reading: GpuProcesses, verdict) -> GpuProcesses | None:
    """The reading after the fix's instruction for each named server, or None where no instruction sets a
    figure on a knob (the fix must then name a measurement)."""
    after = copy.deepcopy(reading)
    instruction = verdict.fix.removeprefix("run one heavy job at a time: ").split("; or stop what you do not need")[0]
    changed = False
    for group in groups_named(after, verdict):
        root = group.root
        w = group.workload
        name = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "trtllm": "trtllm-serve"}.get(w.kind, w.program)
        flag = re.search(rf"restart {re.escape(name)} with (--[\w-]+) ([\d.]+g?) or (?:lower|less)", instruction)
        yaml = re.search(r"set ([\w.-]+): ([\d.]+g?) or (?:lower|less) in (\S+)", instruction)
        env = re.search(r"set ([A-Z_]+)=([\d.]+) or lower in its environment", instruction)
        if flag:
            root.cmdline = [*root.cmdline, flag.group(1), flag.group(2)]
        elif yaml and root.start is not None and any(c.path == yaml.group(3) for c in root.start.configs):
            for c in root.start.configs:
                if c.path == yaml.group(3):
                    kept = [line for line in (c.text or "").splitlines() if not line.startswith(yaml.group(1) + ":")]
                    c.text = "\n".join([*kept, f"{yaml.group(1)}: {yaml.group(2)}"]) + "\n"
        elif env and root.start is not None and root.start.environ is not None:
            for member in group.members:
                if member.start is not None and member.start.environ is not None:
                    member.start.environ[env.group(1)] = env.group(2)
        else:
            continue
        restart(group, root)
        changed = True
    return after if changed else None


@pytest.mark.parametrize("case", SNAPSHOTS + list(INLINE))
def test_a_fix_applied_leaves_g6_quiet_or_names_what_to_measure_next(case):
    if case in INLINE:
        reading, options = GpuProcesses(processes=INLINE[case], scanned=20), {}
    else:
        reading, options = snapshot(case)
    verdict = judge(reading, options)
    if verdict.status not in (Status.FAIL, Status.WARN):
        return
    after = apply(reading, verdict)
    if after is None:
        assert any(m in verdict.fix for m in MEASURES), verdict.fix
        return
    again = judge(after, options)
    assert again.status is Status.PASS or any(m in verdict.fix for m in MEASURES), (verdict.fix, again.line)


def test_the_fixes_set_figures_that_quiet_the_rule():
    """The cases where a figure decides: applied, the rule is quiet (not merely a measurement named)."""
    quiet = []
    for case in ("vLLM at 0.9 by its flag", "vLLM with a 70 GB KV cache", "vLLM, a KV cache in its YAML",
                 "TGI by its variable"):
        reading = GpuProcesses(processes=INLINE[case], scanned=20)
        verdict = judge(reading)
        assert verdict.status is Status.FAIL, case
        quiet.append((case, judge(apply(reading, verdict)).status))
    for name in ("g06-vllm-abbreviated-flag.json", "g06-sglang-config.json", "g06-vllm-0.27-default.json",
                 "g06-vllm-0.34-default.json", "g06-sglang-auto-fraction.json"):
        reading, options = snapshot(name)
        quiet.append((name, judge(apply(reading, judge(reading, options)), options).status))
    reading, _ = snapshot("g06-vllm-kv-bytes-underscore.json")
    planned = {"spark_model_gb": 35}
    quiet.append(("a fixed KV cache beside a 35 GB plan", judge(apply(reading, judge(reading, planned)), planned).status))
    assert [c for c, status in quiet if status is not Status.PASS] == []


def test_a_kv_cache_fix_sets_a_size_vllm_reads():
    reading = GpuProcesses(processes=INLINE["vLLM with a 70 GB KV cache"], scanned=20)
    fix = judge(reading).fix
    size = re.search(r"--kv-cache-memory-bytes (\S+) or less", fix).group(1)
    assert size == "45g" and vllm_bytes(size) == 45 * 10**9


def test_a_llama_cpp_python_fix_names_the_settings_it_reads_where_they_are_set():
    verdict = judge(GpuProcesses(processes=INLINE["a llama-cpp-python server by its config file"], scanned=20))
    assert "or set a smaller n_gpu_layers or n_ctx for its models in /srv/models.json and restart it" in verdict.fix
    assert "-c/--ctx-size" not in verdict.fix  # llama.cpp's flag, which llama_cpp.server does not take
