"""G6 on real GB10/H200 process tables and each server's command lines: the line, the status, the fix."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g06_contention as g06
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import GB10, H200, NONE, Machine
from spark_gotchas.knowledge.readings.gpu import (
    DeviceProcessLists,
    GpuDevice,
    GpuInventory,
    GpuProcess,
    GpuProcesses,
    ServerStart,
)
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.knowledge.workloads import AT_LOAD, FRACTION, FREE_FRACTION, KV_BYTES, ON_REQUEST, UNKNOWN, classify
from spark_gotchas.knowledge.workloads import NONE as UNBOUNDED
from spark_gotchas.machine import nvml
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers.gpu import collect, mask_cmdline
from spark_gotchas.machine.readers.mem import parse_meminfo

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = json.loads((FIXTURES / "g06_process_tables.json").read_text())
MEMINFO = json.loads((FIXTURES / "g03_meminfo.json").read_text())
GB10_MEM = parse_meminfo(MEMINFO["gb10_before_60g_write"]["text"])  # MemTotal 127600524 kB = 130.7 GB
H200_MEM = parse_meminfo(MEMINFO["h200"]["text"])
GB = 1e9


def table(case: str, **kw) -> GpuProcesses:
    procs = [from_jsonable(GpuProcess, p) for p in TABLES[case]["processes"]]
    return GpuProcesses(processes=procs, scanned=412, **kw)


def proc(pid, argv, held_gb=None, **kw) -> GpuProcess:
    held = None if held_gb is None else int(held_gb * GB)
    found_by = "nvml" if held is not None else "scan"
    return GpuProcess(pid=pid, name=kw.pop("name", argv[0].rsplit("/", 1)[-1]), cmdline=argv, gpu_memory_bytes=held,
                      gpu_devices=kw.pop("gpu_devices", [0] if held is not None else []),
                      nvml_lists=["compute"] if held is not None else [], found_by=found_by, **kw)


def judge(reading, profile=GB10, meminfo=GB10_MEM, inventory=None, **options):
    return g06.judge_contention(reading, profile, RunOptions(**options).plan, meminfo, inventory)


# -- the classifier: each server's documented command lines ---------------------------------------
V20 = ServerStart(environ={}, version="0.20.0")  # a vLLM 0.20.0 whose environment and version were read


@pytest.mark.parametrize("argv, start, kind, bound, value, source", [
    (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.85"], None,
     "vllm", FRACTION, 0.85, "flag"),
    (["vllm", "serve", "m", "--gpu-memory-utilization=0.5"], None, "vllm", FRACTION, 0.5, "flag"),
    (["vllm", "serve", "m", "--gpu_memory_utilization", "0.4"], None, "vllm", FRACTION, 0.4, "flag"),  # _ read as -
    (["vllm", "serve", "m", "--gpu-mem", "0.3"], None, "vllm", FRACTION, 0.3, "flag"),  # an argparse abbreviation
    (["vllm", "serve", "m", "--device-memory-utilization", "0.6"], None, "vllm", FRACTION, 0.6, "flag"),  # 0.34's alias
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], V20, "vllm", FRACTION, 0.92, "default"),
    (["vllm", "serve", "m"], ServerStart(version="0.11.0"), "vllm", FRACTION, 0.9, "default"),
    (["vllm", "serve", "m"], ServerStart(version="0.34.0"), "vllm", FRACTION, 1.0, "default"),
    (["vllm", "serve", "m", "--no-enable-extensible-kv-cache"], ServerStart(version="0.34.0"), "vllm", FRACTION, 0.92,
     "default"),
    (["vllm", "serve", "m"], None, "vllm", FRACTION, 0.9, "default"),  # version not recorded: the least any release takes
    (["vllm", "serve", "m", "--kv-cache-memory-bytes", "30g"], None, "vllm", KV_BYTES, 30e9, "flag"),
    (["vllm", "serve", "m", "--kv_cache_memory_bytes=30G", "--gpu-memory-utilization", "0.9"], None, "vllm", KV_BYTES,
     30 * 2**30, "flag"),
    (["vllm", "serve", "m", "--kv-cache-mem", "36864M"], None, "vllm", KV_BYTES, 36864 * 2**20, "flag"),
    (["vllm", "serve", "m", "--kv-cache-memory-bytes=abc"], None, "vllm", UNKNOWN, None, "unknown"),
    (["vllm", "serve", "m", "--kv-cache-memory-bytes", "1.5G"], None, "vllm", UNKNOWN, None, "unknown"),  # no decimals
    (["vllm", "serve", "m", "--gpu-memory-utilization", "lots"], None, "vllm", UNKNOWN, None, "unknown"),
    (["vllm", "serve", "m", "--gpu-memory-utilization", "1.5"], None, "vllm", UNKNOWN, None, "unknown"),
    (["python3", "-c", "import torch; ...", "vllm", "serve", "some/model", "--gpu-memory-utilization", "0.9"], None,
     "vllm", FRACTION, 0.9, "flag"),
    (["trl", "vllm-serve", "--model", "m", "--gpu_memory_utilization", "0.3"], None, "vllm", FRACTION, 0.3, "flag"),
    (["trl", "vllm-serve", "--model", "m", "--gpu-memory-utilization", "0.35"], None, "vllm", FRACTION, 0.35, "flag"),
    (["trl", "vllm-serve", "--model", "m"], None, "vllm", FRACTION, 0.9, "default"),
    (["VLLM::EngineCore"], None, "vllm", UNKNOWN, None, "child"),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--mem-fraction-static", "0.5"], None, "sglang",
     FRACTION, 0.5, "flag"),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--mem-frac=0.45"], None, "sglang", FRACTION, 0.45,
     "flag"),
    (["sglang::scheduler"], None, "sglang", UNKNOWN, None, "child"),
    (["trtllm-serve", "m", "--kv_cache_free_gpu_memory_fraction", "0.7"], None, "trtllm", FREE_FRACTION, 0.7, "flag"),
    (["trtllm-serve", "m", "--free_gpu_memory_fraction=0.6"], None, "trtllm", FREE_FRACTION, 0.6, "flag"),
    (["trtllm-serve", "m", "--kv-cache-free-gpu-memory-fraction", "0.2"], None, "trtllm", FREE_FRACTION, 0.9,
     "default"),  # click declares no such spelling
    (["trtllm-serve", "m"], None, "trtllm", FREE_FRACTION, 0.9, "default"),
    (["text-generation-launcher", "--model-id", "m", "--cuda-memory-fraction", "0.4"], None, "tgi", FRACTION, 0.4,
     "flag"),
    (["text-generation-launcher", "--model-id", "m"], ServerStart(environ={}), "tgi", FRACTION, 1.0, "default"),
    (["text-generation-launcher", "--model-id", "m"], ServerStart(environ={"CUDA_MEMORY_FRACTION": "0.3"}), "tgi",
     FRACTION, 0.3, "env"),
    (["text-generation-launcher", "--model-id", "m"], None, "tgi", UNKNOWN, None, "unknown"),  # it reads its environment
    (["/usr/local/bin/ollama", "serve"], None, "ollama", ON_REQUEST, None, "none"),
    (["/usr/local/bin/ollama", "runner", "--ollama-engine", "--port", "40213"], None, "ollama", ON_REQUEST, None, "none"),
    (["llama-server", "-m", "model.gguf", "-ngl", "99", "-c", "131072"], None, "llama.cpp", AT_LOAD, None, "none"),
    (["llama-server", "--models-dir", "/models", "--models-max", "2"], None, "llama.cpp", ON_REQUEST, None, "none"),
    (["python3", "-m", "llama_cpp.server", "--model", "m.gguf"], None, "llama.cpp", AT_LOAD, None, "none"),
    (["torchrun", "--nproc_per_node=1", "train.py"], None, "trainer", UNBOUNDED, None, "none"),
    (["python3", "-m", "torch.distributed.run", "train.py"], None, "trainer", UNBOUNDED, None, "none"),
    (["/usr/bin/python3", "/usr/local/bin/accelerate", "launch", "train.py"], None, "trainer", UNBOUNDED, None, "none"),
    (["deepspeed", "--num_gpus", "1", "train.py"], None, "trainer", UNBOUNDED, None, "none"),
])
def test_classify_reads_every_bound_as_the_server_does(argv, start, kind, bound, value, source):
    workload = classify(argv, start=start)
    assert workload is not None
    got = workload.bound
    assert (workload.kind, got.kind, got.value, got.source) == (kind, bound, value, source), got


@pytest.mark.parametrize("argv", [["python3", "train.py"], ["pgrep", "-f", "vllm serve"], ["vim", "vllm_serve.md"],
                                  ["grep", "ollama"], ["bash"], [], ["tail", "-f", "llama-server.log"]])
def test_classify_leaves_other_programs_alone(argv):
    assert classify(argv) is None


def test_cap_text_says_where_the_cap_came_from():
    assert classify(["vllm", "serve", "m"], start=V20).cap_text == "default --gpu-memory-utilization 0.92 (vLLM 0.20.0)"
    assert classify(["vllm", "serve", "m", "--gpu-memory-utilization", "0.5"]).cap_text == "--gpu-memory-utilization 0.5"
    assert classify(["ollama", "serve"]).cap_text == "no memory cap"
    assert classify(["VLLM::EngineCore"]).cap_text.startswith("bound unknown: an engine process whose launcher")


def test_secret_flags_in_command_lines_are_masked():
    argv = ["vllm", "serve", "m", "--api-key", "sk-live-123", "--hf-token=hf_abc", "HF_TOKEN=hf_xyz", "--port", "8000"]
    assert mask_cmdline(argv) == ["vllm", "serve", "m", "--api-key", "***", "--hf-token=***", "HF_TOKEN=***",
                                  "--port", "8000"]


# -- the judgement on real GB10 readings ---------------------------------------------------------
def test_two_vllm_engines_whose_launchers_are_not_visible_fail_by_what_they_hold_no_cap_assumed():
    verdict = judge(table("gb10_two_vllm"))
    assert verdict.status is Status.FAIL
    assert verdict.summary == "2 workloads in the way: pid 6008 vLLM, pid 44757 vLLM"
    assert verdict.detail.startswith(
        "pid 6008 vLLM (cannot tell how far pid 6008 may grow: an engine process whose launcher (the command line with "
        "the flags that bound it) is not visible here; holds 59.2 GB); pid 44757 vLLM (")
    assert "0.9" not in verdict.detail  # no default is assumed for an engine whose flags are not visible
    assert verdict.fix == ("run one heavy job at a time: see how each vLLM engine was started (its launcher's flags: "
                           "ps -o args= -p $(ps -o ppid= -p PID)) and restart it with --gpu-memory-utilization 0.5 or "
                           "lower; or stop what you do not need (kill 6008 44757)")
    assert [w["pids"] for w in verdict.readings["workloads"]] == [[3154], [3359], [6008], [44757]]


def test_engines_join_their_launcher_and_two_capped_servers_together_fail():
    reading = table("gb10_two_vllm")
    reading.processes[2].ppid, reading.processes[3].ppid = 6001, 44700
    reading.processes += [proc(6001, ["vllm", "serve", "Qwen/Qwen3.6-27B", "--gpu-memory-utilization", "0.45"]),
                          proc(44700, ["vllm", "serve", "Qwen/Qwen3.8-27B", "--gpu-memory-utilization", "0.4"])]
    verdict = judge(reading)
    assert verdict.status is Status.FAIL
    assert verdict.summary == "together they claim 111.5 GB of 130.7 GB, more than half: pid 6001 vLLM, pid 44700 vLLM"
    assert verdict.detail == (
        "pid 6001 vLLM +1 process (--gpu-memory-utilization 0.45 = 58.8 GB of 130.7 GB; holds 59.2 GB); "
        "pid 44700 vLLM +1 process (--gpu-memory-utilization 0.4 = 52.3 GB of 130.7 GB; holds 51.2 GB); "
        "together they claim 111.5 GB of 130.7 GB, more than half")
    assert verdict.fix.endswith("(kill 6001 44700)")


def test_sglang_scheduler_holding_96_gib_fails():
    verdict = judge(table("gb10_sglang"))
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 6330 SGLang (holds 100.7 GB, bound unknown)"
    assert verdict.detail.startswith("pid 6330 SGLang (cannot tell how far pid 6330 may grow: an engine process")
    assert "holds 100.7 GB" in verdict.detail and "--mem-fraction-static 0.5 or lower" in verdict.fix


def test_an_unknown_process_holding_most_of_the_pool_fails():
    verdict = judge(table("gb10_stress"))
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 452072 dgx-spark-stress (holds 91.2 GB)"
    assert verdict.fix == "run one heavy job at a time: let the other job finish, or stop it (kill 452072)"


def test_an_ollama_runner_holding_34_gb_fails_as_uncapped():
    verdict = judge(table("gb10_ollama"))
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 1790 Ollama +1 process (holds 34.5 GB, no memory cap)"
    assert verdict.detail == "pid 1790 Ollama +1 process (holds 34.5 GB; user ollama): no memory cap"
    assert verdict.fix.startswith("run one heavy job at a time: stop Ollama while training (sudo systemctl stop ollama)")


def test_an_idle_ollama_server_warns_it_loads_models_on_request():
    reading = table("gb10_ollama")
    reading.processes = reading.processes[:1]
    verdict = judge(reading)
    assert verdict.line == "G6 WARN: pid 1790 Ollama (no memory cap, loads models on request)"
    assert verdict.detail == ("pid 1790 Ollama (no GPU memory listed by NVML; user ollama): no memory cap, loads models "
                              "on request")


def test_vllm_capped_at_half_beside_a_small_lora_passes_but_not_beside_a_big_plan():
    reading = GpuProcesses(processes=[proc(900, ["vllm", "serve", "m", "--gpu-memory-utilization", "0.5"], 64.0)],
                           scanned=300)
    small = judge(reading, spark_model_gb=4)  # the gotcha's own example: a < 4 GB LoRA beside vLLM at 0.5
    assert small.line == ("G6 PASS: 1 workload beside this run, small or capped: pid 900 vLLM "
                          "(cap 0.5 = 65.3 GB of 130.7 GB)")
    assert small.detail == "pid 900 vLLM (--gpu-memory-utilization 0.5 = 65.3 GB of 130.7 GB; holds 64.0 GB)"
    big = judge(reading, spark_model_gb=40)
    assert big.status is Status.FAIL
    assert big.summary == "14.7 GB short of the 80.0 GB load peak: pid 900 vLLM (cap 0.5 = 65.3 GB of 130.7 GB)"
    assert big.detail.endswith("they claim 65.3 GB of 130.7 GB, leaving 65.3 GB for the planned load peak of 80.0 GB "
                               "(14.7 GB short)")


def test_a_vllm_still_starting_is_caught_from_its_command_line_at_its_releases_default():
    verdict = judge(GpuProcesses(processes=[proc(77, ["vllm", "serve", "m"], start=ServerStart(version="0.11.0"))],
                                 scanned=200))
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 77 vLLM (default cap 0.9 = 117.6 GB of 130.7 GB)"
    assert verdict.detail == ("pid 77 vLLM (default --gpu-memory-utilization 0.9 (vLLM 0.11.0) = 117.6 GB of 130.7 GB; "
                              "no GPU memory listed by NVML)")
    unknown = judge(GpuProcesses(processes=[proc(77, ["vllm", "serve", "m"])], scanned=200))  # an older snapshot
    assert unknown.line == "G6 FAIL: 1 workload in the way: pid 77 vLLM (default cap 0.9 or more = 117.6 GB of 130.7 GB)"
    assert "0.9 to 0.19, 0.92 from 0.20, all from 0.34); its version was not recorded" in unknown.detail


def test_a_trainer_and_its_worker_are_one_uncapped_workload():
    reading = GpuProcesses(processes=[proc(100, ["torchrun", "--nproc_per_node=1", "train.py"]),
                                      proc(101, ["/usr/bin/python3", "-u", "train.py"], 30.0, ppid=100)], scanned=90)
    verdict = judge(reading)
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 100 torchrun +1 process (holds 30.0 GB, no memory cap)"
    assert verdict.detail == "pid 100 torchrun +1 process (holds 30.0 GB): no memory cap"


def test_a_process_we_may_not_inspect_is_still_judged_by_its_memory():
    hidden = GpuProcess(pid=4242, gpu_memory_bytes=int(20 * GB), gpu_devices=[0], nvml_lists=["compute"],
                        problem="no permission to read its cmdline (another user's process; run as root to see it)")
    verdict = judge(GpuProcesses(processes=[hidden], scanned=10, scan_denied=3))
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 4242 unknown process (holds 20.0 GB, no memory cap)"
    assert verdict.detail == ("pid 4242 unknown process (holds 20.0 GB; no permission to read its cmdline (another "
                              "user's process; run as root to see it)): no memory cap (3 command line(s) unreadable)")


def test_a_pid_outside_this_container_with_no_figures_at_rest_names_only_what_it_holds():
    outside = GpuProcess(pid=99, gpu_memory_bytes=int(21.5 * GB), gpu_devices=[0], nvml_lists=["compute"],
                         problem="pid not visible here", visible=False)
    verdict = judge(GpuProcesses(processes=[outside], scanned=10))
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 99 outside this container (holds 21.5 GB, no memory cap)"
    assert verdict.detail.startswith("pid 99 outside this container (holds 21.5 GB): no memory cap; ")


def test_without_nvml_a_llama_server_is_found_by_its_command_line_and_warns():
    reading = GpuProcesses(nvml_error="NVML library not found", scanned=150,
                           processes=[proc(55, ["llama-server", "-m", "model.gguf", "-ngl", "99", "-c", "131072"])])
    verdict = judge(reading)
    assert verdict.line == "G6 WARN: pid 55 llama.cpp server (no memory cap, GPU memory unknown)"
    assert verdict.detail == ("pid 55 llama.cpp server (takes what its model and context need when it loads (-ngl 99, "
                              "-c 131072)): no memory cap, GPU memory unknown (NVML unavailable: NVML library not found; "
                              "judged from command lines)")


def test_workloads_too_many_words_for_the_line_are_named_by_pid_and_program():
    reading = GpuProcesses(nvml_error="NVML library not found", scanned=150,
                           processes=[proc(55, ["llama-server", "-m", "model.gguf", "-ngl", "99"]),
                                      proc(56, ["/usr/local/bin/ollama", "serve"])])
    verdict = judge(reading)
    assert verdict.line == "G6 WARN: 2 workloads with no memory cap: pid 55 llama.cpp server, pid 56 Ollama"
    assert verdict.detail.startswith("pid 55 llama.cpp server (takes what its model and context need when it loads (-ngl "
                                     "99)): no memory cap, GPU memory unknown; pid 56 Ollama: no memory cap, loads models "
                                     "on request")
    assert verdict.fix.endswith("(kill 55 56)")


def test_nothing_else_running_passes_and_says_how_it_looked():
    quiet = judge(GpuProcesses(scanned=81), NONE)
    assert quiet.line == "G6 PASS: no other GPU workload among NVML's processes and 81 command lines"
    assert quiet.detail == "NVML lists no other process, and none of 81 command lines is a known server or trainer"
    no_nvml = judge(GpuProcesses(nvml_error="NVML library not found", scanned=81), NONE)
    assert no_nvml.line == "G6 PASS: no other GPU workload: none of 81 command lines is a known server or trainer"
    assert no_nvml.detail == "NVML unavailable: NVML library not found"


def test_no_nvml_and_no_process_table_skips():
    verdict = judge(GpuProcesses(nvml_error="NVML library not found", scan_error="psutil is not installed: no command lines"))
    assert verdict.line == ("G6 SKIP: no process list: NVML NVML library not found; psutil is not installed: no command "
                            "lines")


def h200_inventory(n=8) -> GpuInventory:
    return GpuInventory(devices=[GpuDevice(index=i, name="NVIDIA H200", uuid=f"GPU-{i:04d}-aaaa",
                                           memory_total_bytes=150754820096) for i in range(n)])


def test_h200_idle_python_is_small_and_passes():
    verdict = judge(table("h200_idle"), H200, H200_MEM, h200_inventory(1))
    assert verdict.line == "G6 PASS: 1 workload beside this run, small or capped: pid 419 python3 (holds 0.64 GB)"


def test_on_a_discrete_box_only_visible_gpus_are_judged():
    vllm = proc(3000, ["vllm", "serve", "m"], 130.0, gpu_devices=[3])
    devices = [DeviceProcessLists(index=i, uuid=f"GPU-{i:04d}-aaaa") for i in range(8)]
    elsewhere = GpuProcesses(processes=[vllm], devices=devices, cuda_visible_devices="GPU-0000", scanned=40)
    verdict = judge(elsewhere, H200, H200_MEM, h200_inventory())
    assert verdict.line == "G6 PASS: no other GPU workload among NVML's processes and 40 command lines"
    assert verdict.detail == ("NVML lists no other process, and none of 40 command lines is a known server or trainer "
                              "(1 on GPUs outside CUDA_VISIBLE_DEVICES not judged)")
    same = GpuProcesses(processes=[vllm], devices=devices, cuda_visible_devices="3", scanned=40)
    verdict = judge(same, H200, H200_MEM, h200_inventory())
    assert verdict.line == "G6 FAIL: 1 workload in the way: pid 3000 vLLM (default cap 0.9 or more = 135.7 GB of 150.8 GB)"
    assert verdict.detail.startswith("pid 3000 vLLM (no --gpu-memory-utilization: vLLM takes 0.9 to all of the GPU")


# -- the reader, with psutil and NVML stood in for ------------------------------------------------
class FakePsutil:
    """Just enough of psutil: a process table with a denied command line and a pid from elsewhere."""

    class Error(Exception):
        pass

    class NoSuchProcess(Error):
        pass

    class AccessDenied(Error):
        pass

    class ZombieProcess(NoSuchProcess):
        pass

    def __init__(self, table):
        self.table = table  # pid -> dict(name, ppid, username, cmdline, rss, denied=set())
        psutil = self

        class Process:
            def __init__(self, pid):
                if pid not in psutil.table:
                    raise psutil.NoSuchProcess(pid)
                self.pid = pid
                self.row = psutil.table[pid]

            def _get(self, key):
                if key in self.row.get("denied", ()):
                    raise psutil.AccessDenied(self.pid)
                return self.row[key]

            def name(self):
                return self._get("name")

            def ppid(self):
                return self._get("ppid")

            def username(self):
                return self._get("username")

            def cmdline(self):
                return self._get("cmdline")

            def memory_info(self):
                return SimpleNamespace(rss=self._get("rss"))

            def children(self, recursive=False):
                return [Process(p) for p, r in psutil.table.items() if r["ppid"] == self.pid]

            def parents(self):
                out, cur = [], self.row["ppid"]
                while cur in psutil.table:
                    out.append(Process(cur))
                    cur = psutil.table[cur]["ppid"]
                return out

            @property
            def info(self):
                row = self.row
                return {"pid": self.pid, "name": row["name"],
                        "cmdline": None if "cmdline" in row.get("denied", ()) else row["cmdline"]}

        self.Process = Process

    def process_iter(self, attrs):
        return [self.Process(p) for p in sorted(self.table)]


def row(name, ppid, cmdline, user="me", rss=100 * 2**20, denied=()):
    return {"name": name, "ppid": ppid, "cmdline": cmdline, "username": user, "rss": rss, "denied": set(denied)}


PS_TABLE = {
    1: row("systemd", 0, ["/sbin/init"], "root"),
    10: row("bash", 1, ["bash"]),
    20: row("pytest", 10, ["python3", "-m", "pytest", "-m", "fast"]),
    21: row("python3", 20, ["python3", "-m", "spark_gotchas.runtime.worker_main", "torch"]),  # our GPU worker
    30: row("vllm", 1, ["vllm", "serve", "m", "--api-key", "sk-1", "--gpu-memory-utilization", "0.5"], "svc"),
    31: row("VLLM::EngineCore", 30, ["VLLM::EngineCore"], "svc"),
    40: row("python3", 1, ["python3", "train.py"], "alice", denied=("cmdline",)),
    50: row("llama-server", 1, ["llama-server", "-m", "x.gguf"], "bob"),
}


DEVICE_CALLS = ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                "nvmlDeviceGetClockInfo", "nvmlDeviceGetMemoryInfo")


def fake_nvml(rows, not_supported=(), device=None):
    """query() answering NVML's process lists from ``rows``: {list name: [(pid, bytes)]}, and the
    device's own figures from ``device`` ({function: value}; the rest Not Supported, as on a GB10)."""
    def query(func, *args):
        if func == "nvmlDeviceGetUUID":
            return "GPU-1643007d"
        if func in DEVICE_CALLS:
            value = (device or {}).get(func, nvml.NotAvailable("Not Supported"))
            return value(*args[1:]) if callable(value) else value
        for list_name, fname in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                                 ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
            if func == fname:
                if list_name in not_supported:
                    return nvml.NotAvailable("Not Supported")
                return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in rows.get(list_name, [])]
        raise AssertionError(func)
    return query


def test_the_reader_joins_nvml_and_psutil_and_leaves_out_its_own_tree():
    query = fake_nvml({"compute": [(21, 500 * 2**20), (31, 60 * 10**9), (40, 3 * 10**9), (999, None)]},
                      not_supported=("graphics",))
    reading = collect(FakePsutil(PS_TABLE), query, lambda: ["h0"], init=lambda: None, self_pid=20)
    assert reading.own_excluded == 1 and reading.devices[0].errors == {"graphics": "Not Supported"}
    by_pid = {p.pid: p for p in reading.processes}
    assert sorted(by_pid) == [30, 31, 40, 50, 999]  # worker 21 and our ancestors left out; no unknown scanned program
    assert by_pid[30].cmdline == ["vllm", "serve", "m", "--api-key", "***", "--gpu-memory-utilization", "0.5"]
    assert by_pid[30].found_by == "scan" and by_pid[31].found_by == "nvml+scan" and by_pid[31].gpu_memory_bytes == 60 * 10**9
    assert by_pid[40].cmdline is None and by_pid[40].username == "alice"
    assert by_pid[40].problem.startswith("no permission to read its cmdline")
    assert by_pid[999].problem.startswith("pid not visible here") and by_pid[999].gpu_memory_bytes is None
    assert reading.scan_denied == 1 and reading.scanned == 3  # 30, 31, 50 (our tree 1, 10, 20, 21 is skipped)
    verdict = judge(reading)  # vLLM capped at 0.5 (65.3 GB) plus alice's 3 GB: more than half the pool together
    assert verdict.summary == "together they claim 68.3 GB of 130.7 GB, more than half: pid 30 vLLM +1 process (cap 0.5)"
    assert verdict.detail == (
        "pid 30 vLLM +1 process (--gpu-memory-utilization 0.5 = 65.3 GB of 130.7 GB; holds 60.0 GB; user svc); "
        "together they claim 68.3 GB of 130.7 GB, more than half (1 command line(s) unreadable)")
    assert from_jsonable(GpuProcesses, json.loads(json.dumps(to_jsonable(reading)))) == reading


def test_the_reader_without_nvml_still_scans():
    reading = collect(FakePsutil(PS_TABLE), fake_nvml({}), lambda: [],
                      init=lambda: nvml.NotAvailable("NVML library not found (no NVIDIA driver on this machine)"),
                      self_pid=20)
    assert reading.nvml_error.startswith("NVML library not found") and [p.pid for p in reading.processes] == [30, 31, 50]


@pytest.mark.live_machine
def test_the_reader_on_this_machine_never_raises():
    reading = collect()
    assert reading.scanned > 0 or reading.scan_error
    assert all(p.pid != __import__("os").getpid() for p in reading.processes)


def test_small_processes_that_together_leave_too_little_for_the_plan_fail():
    reading = GpuProcesses(processes=[proc(p, ["python3", f"job{p}.py"], 3.9) for p in (11, 12, 13)], scanned=30)
    plenty = judge(reading, spark_model_gb=20)  # 40 GB peak: plenty left
    assert plenty.line == "G6 PASS: 3 workloads beside this run, small or capped: pid 11 python3, pid 12 python3 +1 more"
    assert plenty.detail == "pid 11 python3 (holds 3.9 GB); pid 12 python3 (holds 3.9 GB); pid 13 python3 (holds 3.9 GB)"
    verdict = judge(reading, spark_model_gb=60)  # 120 GB peak in a 130.7 GB pool
    assert verdict.line == "G6 FAIL: 1.0 GB short of the 120.0 GB load peak: pid 11 python3, pid 12 python3 +1 more"
    assert verdict.detail == ("pid 11 python3 (holds 3.9 GB); pid 12 python3 (holds 3.9 GB); pid 13 python3 (holds "
                              "3.9 GB); they claim 11.7 GB of 130.7 GB, leaving 119.0 GB for the planned load peak of "
                              "120.0 GB (1.0 GB short)")
    assert verdict.fix.endswith("(kill 11 12 13)")


# -- a machine that is not the profile's, or has no GPU ----------------------------------------------------
VLLM_DEFAULT = ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-32B"]


def test_a_server_on_a_machine_without_a_gpu_is_listed_not_failed():
    reading = GpuProcesses(nvml_error=nvml.NotAvailable("NVML library not found").reason, scanned=79,
                           processes=[proc(4242, VLLM_DEFAULT, username="ci")])
    v = g06.judge_contention(reading, NONE, Plan(model_gb=30), GB10_MEM)
    assert v.line == "G6 INFO: no GPU visible here: 1 workload seen, holding no GPU memory on this machine"
    assert v.detail == ("seen, not judged: pid 4242 vLLM (no --gpu-memory-utilization: vLLM takes 0.9 to all of the GPU "
                        "by release (0.9 to 0.19, 0.92 from 0.20, all from 0.34); its version was not recorded; user ci)")
    assert v.readings["workloads"][0]["program"] == "vLLM" and v.readings["workloads"][0]["cap_fraction"] == 0.9
    empty = g06.judge_contention(GpuProcesses(nvml_error="NVML library not found", scanned=79), NONE, Plan(), GB10_MEM)
    assert empty.status is Status.PASS and "none of 79 command lines" in empty.summary


def test_another_machine_judged_as_a_gb10_lists_what_it_saw_as_information():
    here = Machine(is_profile=False, device="NVIDIA H200")
    busy = table("gb10_two_vllm")
    v = g06.judge_contention(busy, GB10, Plan(model_gb=40), H200_MEM, None, here)
    assert v.status is Status.INFO
    assert v.summary == "not a GB10 (NVIDIA H200): processes not judged"
    assert v.detail == ("this machine is not a GB10 (NVIDIA H200): its processes cannot stand for a Spark's; seen, "
                        "not judged: pid 6008 vLLM (cannot tell how far pid 6008 may grow: an engine process whose "
                        "launcher (the command line with the flags that bound it) is not visible here; holds 59.2 GB); "
                        "pid 44757 vLLM (cannot tell how far pid 44757 may grow: an engine process whose launcher (the "
                        "command line with the flags that bound it) is not visible here; holds 51.2 GB); pid 3154 "
                        "Xorg (holds 0.02 GB; graphics); +1 more")
    quiet = g06.judge_contention(GpuProcesses(scanned=177), GB10, Plan(), H200_MEM, None, here)
    assert quiet.line == "G6 INFO: not a GB10 (NVIDIA H200): processes not judged"
    assert quiet.detail == "this machine is not a GB10 (NVIDIA H200): its processes cannot stand for a Spark's"


# -- a GPU with its own memory: a neighbour's memory is in the way only of a plan it leaves too little for --
H100_80GB = GpuInventory(devices=[GpuDevice(index=0, name="NVIDIA H100 80GB HBM3", memory_total_bytes=85_520_809_984)])


def discrete(*procs, profile=H200, inventory=None, **options):
    return judge(GpuProcesses(processes=list(procs), scanned=120), profile, H200_MEM, inventory or H100_80GB, **options)


def test_an_uncapped_job_over_4_gb_on_a_discrete_gpu_warns_with_what_it_leaves_where_a_spark_fails():
    job = proc(51234, ["python3", "stream_triad.py"], 4.8, username="bob")
    v = discrete(job)
    assert v.line == "G6 WARN: pid 51234 python3 (holds 4.8 GB, no memory cap, leaves 80.7 GB)"
    assert "its compute is shared (G4, G5 and G7 name it where it slowed a measurement)" in v.detail
    assert v.readings["workloads"][0]["status"] == "WARN"
    spark = judge(GpuProcesses(processes=[job], scanned=120))  # the Spark's rule as it was: one pool
    assert spark.line == "G6 FAIL: 1 workload in the way: pid 51234 python3 (holds 4.8 GB, no memory cap)"


def test_an_uncapped_ollama_on_an_h200_warns_with_its_own_way_to_step_aside():
    runner = proc(1790, ["/usr/local/bin/ollama", "runner", "--ollama-engine"], 10.0, username="ollama")
    v = discrete(runner, inventory=GpuInventory(devices=[GpuDevice(index=0, memory_total_bytes=150754820096)]))
    assert v.line == "G6 WARN: pid 1790 Ollama (holds 10.0 GB, no memory cap, leaves 140.8 GB)"
    assert v.fix == ("if the planned run needs more than the 140.8 GB left on the GPU (or all of its compute for a "
                     "timed run), stop Ollama while training (sudo systemctl stop ollama) or unload its models (ollama "
                     "stop MODEL); to keep it beside training, set OLLAMA_MAX_LOADED_MODELS=1 and OLLAMA_KEEP_ALIVE=0 in "
                     "its service's environment (sudo systemctl edit ollama) and see what it holds with ollama ps; or "
                     "stop what you do not need (kill 1790); --spark-model-gb N checks a plan against what is left")


def test_a_neighbour_holding_most_of_a_discrete_gpu_fails():
    v = discrete(proc(7001, ["python3", "hold.py"], 45.0))
    assert v.line == "G6 FAIL: 1 workload in the way: pid 7001 python3 (holds 45.0 GB)"


def test_two_uncapped_neighbours_holding_most_of_a_discrete_gpu_together_fail():
    v = discrete(proc(7001, ["python3", "a.py"], 25.0), proc(7002, ["python3", "b.py"], 20.0))
    assert v.line == "G6 FAIL: together they claim 45.0 GB of 85.5 GB, more than half: pid 7001 python3, pid 7002 python3"


def test_a_plan_a_discrete_neighbour_leaves_room_for_warns_and_one_it_does_not_fails():
    job = proc(7001, ["python3", "hold.py"], 22.0)
    fits = discrete(job, spark_model_gb=60)
    assert fits.status is Status.WARN and "(the planned 60.0 GB load peak fits)" in fits.detail
    assert fits.fix == "for a run that needs all of the GPU's compute, let the other job finish, or stop it (kill 7001)"
    short = discrete(job, spark_model_gb=70)
    assert short.line == "G6 FAIL: 6.5 GB short of the 70.0 GB load peak: pid 7001 python3"


def test_a_machine_that_is_no_gb10_though_named_one_has_its_processes_not_judged():
    """An x86_64 "GB10" (profiles.beyond): the two vLLM engines would FAIL against a Spark's pool, but the
    pool and the unified-memory rule are a Spark's, which this machine is not."""
    from spark_gotchas.knowledge.profiles import beyond

    here = Machine(beyond=beyond(GB10, arch="x86_64"))
    verdict = g06.judge_contention(table("gb10_two_vllm"), GB10, Plan(), here=here)
    assert verdict.status is Status.WARN
    assert verdict.summary == "machine x86_64 is no GB10's (aarch64): not a GB10's; processes not judged"
    assert verdict.fix.startswith("re-run on the machine the snapshot names")
