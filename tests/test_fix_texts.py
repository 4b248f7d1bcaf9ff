"""Every fix a judge gives is an instruction a user can follow as written: the whole text of each
fix constant, and the fixes judges build (G6's, G1's remedies, G10's NCCL steps) read the same way."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import spark_gotchas.knowledge.judges as judges
from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.judges import g06_contention as g06
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import GB10, H100
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory, GpuProcess, GpuProcesses

FIXES = [
    ("g01_cuda_abi", "FIX_INDEX",
     "reinstall torch built for CUDA 13: pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu130 (or use a matched NGC container)"),
    ("g01_cuda_abi", "FIX_NO_TORCH",
     'run the preflight with the Python of the environment you train in (its torch is the one to check), or install torch built for CUDA {major}: pip install torch --index-url https://download.pytorch.org/whl/{index}'),
    ("g01_visibility", "FIX_CONTAINER",
     'start the container with --gpus all (or --runtime nvidia), e.g. docker run --gpus all --ipc=host IMAGE; in Kubernetes request nvidia.com/gpu with runtimeClassName: nvidia'),
    ("g01_visibility", "FIX_HOST",
     'load the NVIDIA driver (sudo modprobe nvidia), or reinstall the driver package and reboot, until nvidia-smi lists the GPU'),
    ("g01_visibility", "FIX_CUDA_VISIBLE",
     'unset CUDA_VISIBLE_DEVICES, or set it to GPU indices or UUIDs that nvidia-smi -L lists (e.g. CUDA_VISIBLE_DEVICES=0)'),
    ("g01_visibility", "FIX_DEV_NODES",
     "give this environment the GPU's device files: start the container with --gpus all (not only --device /dev/nvidia0), or allow /dev/nvidia* in its device cgroup"),
    ("g01_kernel_log", "FIX_APP_FAULT",
     "re-run the program that faulted with CUDA_LAUNCH_BLOCKING=1 (or under compute-sanitizer) to find the kernel that faults, and read G1's extension line: a kernel built for another GPU or CUDA faults like this"),
    ("g02_flash_attn", "FIX_BROKEN",
     'run pip uninstall -y flash-attn and load models with attn_implementation="sdpa" (bare pip has no working flash-attn for this GPU; NGC containers ship one that works)'),
    ("g02_flash_attn", "FIX_UNSLOTH",
     'call spark_gotchas.fixes.force_sdpa() before `import unsloth` (it hides flash_attn, so Unsloth sets HAS_FLASH_ATTENTION = False), then check that model.config._attn_implementation == "sdpa"; or run pip uninstall -y flash-attn'),
    ("g03_unified_memory", "DROP_CACHES_FIX",
     'drop the page cache between runs, as root: sync; echo 3 > /proc/sys/vm/drop_caches (never in the middle of training; the suite never does this itself)'),
    ("g03_unified_memory_log", "FIX_RAN_OUT",
     'plan the next run for the memory that is left (spark-gotchas -m fast --spark-model-gb N judges a plan against it) and cap or stop what else holds memory (G6 names it)'),
    ("g04_thermal", "FIX_STUCK_GB10",
     'power-cycle the Spark fully: shut it down, unplug AC power for about 60 s, then boot (a reboot does not clear the low-power state); if it comes back, contact NVIDIA support'),
    ("g04_thermal", "FIX_STUCK",
     'look for an applied clock or power cap with nvidia-smi -q -d CLOCK,POWER (locked or applications clocks, a lowered power limit), then check cooling and power delivery and re-run'),
    ("g04_thermal", "FIX_COOLING",
     'improve cooling (clear intake and exhaust, cooler room, nothing stacked on or against the unit) or cap run length and checkpoint before throttling sets in'),
    ("g04_thermal", "FIX_REBOOT_COMMON",
     "improve cooling and cap run length (checkpoint often); read the last boot's kernel log (journalctl -k -b -1 | tail -50) for a thermal or power event"),
    ("g04_thermal", "FIX_REBOOT",
     "improve cooling and cap run length (checkpoint often); read the last boot's kernel log (journalctl -k -b -1 | tail -50) for a thermal or power event; then run a new soak (spark-gotchas -m soak), which replaces this record"),
    ("g04_thermal", "FIX_LOAD",
     're-run with no other GPU job; if it repeats, look for Xid errors (sudo dmesg | grep -i xid) and check the G1 lines'),
    ("g04_thermal", "FIX_UNEXPLAINED",
     'look for other GPU or CPU jobs that ran during the soak (G6, nvidia-smi, top), stop them, then run the soak again'),
    ("g04_thermal", "FIX_CUT_SHORT",
     'run the soak again for its whole planned length (spark-gotchas -m soak --soak-duration {planned}) before trusting a long run to this machine'),
    ("g04_thermal", "FIX_SPOT_BUSY",
     'stop or pause {names} (G6 says how), then re-run spark-gotchas -m fast -k g04'),
    ("g04_thermal", "FIX_SPOT_UNSEEN",
     'find what else uses the GPU (G6, nvidia-smi): NVML could not list its processes while the load ran; then re-run spark-gotchas -m fast -k g04'),
    ("g04_thermal", "FIX_SPOT_ALONE",
     'update or reinstall the NVIDIA driver and re-run (nothing else ran on the GPU during either load); if the rate stays low with healthy clocks, contact NVIDIA support: the GPU or its cooling needs service'),
    ("g04_thermal", "FIX_SPOT_SUITE",
     "re-run spark-gotchas -m fast -k g04 when no other run is measuring: {names} shared the GPU with this one, so no rate is the GPU's own"),
    ("g04_thermal", "FIX_SPOT_ONCE",
     're-run spark-gotchas -m fast -k g04: this rate was measured once; if it stays far below with healthy clocks and nothing else on the GPU, update or reinstall the NVIDIA driver'),
    ("g05_bandwidth", "FIX_SLOW",
     'find what else uses the GPU or its memory (G6, nvidia-smi, other servers) and check the SM clock under load (G4, nvidia-smi -q -d PERFORMANCE,CLOCK); a GB10 stuck in a low-power state clears only after removing AC power for about 60 s; then re-run spark-gotchas -m fast -k g05'),
    ("g05_bandwidth", "FIX_HARDWARE",
     'check the SM clock under load (G4, nvidia-smi -q -d PERFORMANCE,CLOCK), since nothing else ran on the GPU during either measurement; a GB10 stuck in a low-power state clears only after removing AC power for about 60 s; then update or reinstall the driver, and if it persists, contact NVIDIA support'),
    ("g05_bandwidth", "FIX_REMEASURE",
     're-run spark-gotchas -m fast -k g05: this figure was measured once; if it stays far below with nothing else on the GPU, check the SM clock under load (G4)'),
    ("g05_bandwidth", "FIX_SHARED_SUITE",
     "re-run spark-gotchas -m fast -k g05 when no other run is measuring: {names} shared the GPU with this one, so no figure is the GPU's own"),
    ("g05_bandwidth", "FIX_WRONG",
     're-run; if it repeats, the GPU or its memory is faulty: check nvidia-smi -q -d ECC,ROW_REMAPPER and look for Xid errors in dmesg'),
    ("g05_bandwidth", "FIX_CRASH",
     'run the G1 checks (first CUDA launch) and look for Xid errors in dmesg, then re-run'),
    ("g05_bandwidth", "FIX_BUDGET",
     'budget memory-bound work from these measured figures, not the datasheet'),
    ("g06_contention", "OUTSIDE_FIX",  # readings.gpu's, shared with G4, G5 and G7 through Sharing.fix
     "find it from the host, where nvidia-smi names its pid and program (or start this container with --pid=host), and stop it or let it finish"),
    ("g07_nvfp4", "FIX_FP8",
     'stay on FP8 unless the kernels target sm_121a: build extensions with TORCH_CUDA_ARCH_LIST="12.1a" (FlashInfer: FLASHINFER_CUDA_ARCH_LIST="12.1a") or install builds that ship sm_121a kernels'),
    ("g07_nvfp4", "FIX_PLANNED",
     'plan a precision that runs on this GPU and torch build (the line lists those that ran), or move the run to a GPU that runs the planned one'),
    ("g07_nvfp4", "FIX_SHARED",
     "re-run spark-gotchas -m fast -k g07 when nothing else uses the GPU: {names} shared it with this run, so no rate is the GPU's own"),
    ("g07_nvfp4", "FIX_WRONG",
     're-run; if it repeats, a broken kernel or a faulty GPU is the cause: look for Xid errors in dmesg'),
    ("g07_nvfp4", "FIX_CRASH",
     'run the G1 checks (first CUDA launch) and look for Xid errors in dmesg, then re-run'),
    ("g09_container", "CONDA_FIX",
     "run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container (unsloth/unsloth); staying in conda, take torch and what pins to it (triton, xformers) from one installer, PyTorch's index with pip (as G1 says), none of them from a conda channel beside it, and keep a --spark-baseline snapshot of the working set"),
    ("g09_container", "CONTAINER_FIX",
     "run training in an NGC container (nvcr.io/nvidia/pytorch) or Unsloth's container (unsloth/unsloth); if bare pip is unavoidable, follow NVIDIA's install order and install Unsloth with --no-deps"),
    ("g10_parallelism", "FIX_TP",
     'use DDP or FSDP on two Sparks, never tensor parallelism across nodes: set the tensor parallel size to 1 (--tensor-parallel-size 1, tensor_model_parallel_size: 1, megatron_lm_tp_degree: 1) and shard with FSDP (accelerate distributed_type: FSDP) or DeepSpeed ZeRO; to serve a model that fits one Spark, run one replica per Spark'),
    ("g10_parallelism", "FIX_PARSE",
     'fix the file (the error names the line), or pass the config the launch really uses'),
    ("g10_parallelism", "FIX_LIMIT",
     "review it by hand, or pass the launcher's own command line or config (a regular file of at most 1 MiB, as the launch reads it)"),
    ("g10_parallelism", "FIX_PROBE",
     "run the same command on every node with its own node rank; check that MASTER_ADDR is reachable on the link (ping it), that NCCL_SOCKET_IFNAME names the link's interface, and rerun with NCCL_DEBUG=INFO"),
]

# What a fix may start with: an instruction (a verb), or "for X, <verb>" / "on X, <verb>" / "in X, <verb>".
VERBS = {"add", "bring", "budget", "build", "call", "check", "choose", "contact", "drop", "export", "find", "fix", "free",
         "give", "improve", "install", "judge", "let", "load", "look", "move", "name", "pass", "plan", "power-cycle",
         "read", "rebuild", "reinstall", "remove", "repair", "reproduce", "re-run", "re-validate", "restart", "review",
         "run", "set", "start", "stay", "stop", "unset", "update", "use"}
BROKEN = (": :", ": or ", ";;", "; ;", ": ;", ", ,", " or;", " or.", " and;", "..")


def instruction_problems(fix: str) -> list[str]:
    """What keeps ``fix`` from reading as an instruction: empty, an opening that is no verb, a
    dangling ':' / 'or', doubled punctuation."""
    if not fix.strip():
        return ["empty"]
    out = []
    first = fix.split()[0].rstrip(",:;")
    opening = first.lower()
    if opening in ("for", "on", "in", "if") and ", " in fix:
        opening = fix.split(", ", 1)[1].split()[0].lower()
    if not (fix[0].isupper() or opening in VERBS):
        out.append(f"does not open with an instruction: {first!r}")
    out += [f"contains {mark!r}" for mark in BROKEN if mark in fix]
    if re.search(r"(?<!\w)::|::(?!\w)", fix):  # VLLM::EngineCore is a name, "x:: y" a slip
        out.append("contains '::'")
    if re.search(r"[:;,]\s*$", fix) or re.search(r"\b(or|and)\s*$", fix):
        out.append("dangles at the end")
    return out


def all_constants() -> dict[tuple[str, str], str]:
    out = {}
    for info in pkgutil.iter_modules(judges.__path__):
        module = importlib.import_module(f"spark_gotchas.knowledge.judges.{info.name}")
        for name, value in vars(module).items():
            if "FIX" in name and isinstance(value, str):
                out[(info.name, name)] = value
    return out


@pytest.mark.parametrize(("module", "name", "text"), FIXES, ids=[f"{m}.{n}" for m, n, _ in FIXES])
def test_each_fix_constant_is_this_instruction(module, name, text):
    value = getattr(importlib.import_module(f"spark_gotchas.knowledge.judges.{module}"), name)
    assert value == text
    assert instruction_problems(value) == []


def test_the_table_names_every_fix_constant():
    assert set(all_constants()) == {(m, n) for m, n, _ in FIXES}


def proc(pid, argv, gb, ppid=1, user="spark"):
    return GpuProcess(pid=pid, ppid=ppid, name=argv[0], cmdline=argv, gpu_memory_bytes=int(gb * 1e9),
                      username=user, nvml_lists=["compute"], gpu_devices=[0])


G6_CASES = {
    "vllm": ([proc(5990, ["vllm", "serve", "Qwen/Qwen3-32B", "--gpu-memory-utilization", "0.9"], 59.2)],
             "run one heavy job at a time: restart vLLM with --gpu-memory-utilization 0.5 or lower; or stop what "
             "you do not need (kill 5990)"),
    "a llama-cpp-python server": (  # its own settings, --n_gpu_layers and --n_ctx: llama.cpp's -c it refuses
        [proc(8000, ["python3", "-m", "llama_cpp.server", "--model", "m.gguf", "--n_gpu_layers", "-1"], 40)],
        "run one heavy job at a time: stop the llama.cpp server while training, or restart it with a smaller "
        "--n_gpu_layers or --n_ctx (it keeps what it takes when it loads) and run this check again; or stop what you "
        "do not need (kill 8000)"),
    "one uncapped job": ([proc(452072, ["dgx-spark-stress"], 91.2)],
                         "run one heavy job at a time: let the other job finish, or stop it (kill 452072)"),
    "two uncapped jobs": ([proc(7001, ["python", "a.py"], 70), proc(7002, ["python", "b.py"], 40)],
                          "run one heavy job at a time: let the other jobs finish, or stop them (kill 7001 7002)"),
    "a process outside this container": ([GpuProcess(pid=2093311, gpu_memory_bytes=20 << 30, gpu_devices=[0],
                                                     nvml_lists=["compute"], visible=False)],
                                         "find it from the host, where nvidia-smi names its pid and program (or start "
                                         "this container with --pid=host), and stop it or let it finish before "
                                         "training"),
}


@pytest.mark.parametrize("case", G6_CASES)
def test_g6_fixes_say_what_to_do_with_the_workloads_found(case):
    processes, fix = G6_CASES[case]
    v = g06.judge_contention(GpuProcesses(processes=processes, scanned=10), GB10, Plan())
    assert v.fix == fix
    assert instruction_problems(v.fix) == []


@pytest.mark.parametrize("plan_gb, fix", [
    (None, "if the planned run needs more than the 80.7 GB left on the GPU (or all of its compute for a timed run), "
           "let the other job finish, or stop it (kill 7001); --spark-model-gb N checks a plan against what is left"),
    (40, "for a run that needs all of the GPU's compute, let the other job finish, or stop it (kill 7001)"),
])
def test_g6_fixes_on_a_gpu_with_its_own_memory_are_instructions(plan_gb, fix):
    inventory = GpuInventory(devices=[GpuDevice(index=0, memory_total_bytes=85_520_809_984)])
    v = g06.judge_contention(GpuProcesses(processes=[proc(7001, ["python3", "job.py"], 4.8)], scanned=10), H100,
                             Plan(model_gb=plan_gb), None, inventory)
    assert v.fix == fix
    assert instruction_problems(v.fix) == []


@pytest.mark.parametrize(("name", "major", "fix"), [
    ("torch", 13, "reinstall torch for CUDA 13: pip install --force-reinstall torch "
                  "--index-url https://download.pytorch.org/whl/cu130"),
    ("cupy-cuda12x", 13, "install its CUDA 13 build instead: pip uninstall -y cupy-cuda12x && pip install cupy-cuda13x"),
    ("cuda-python", 13, "install its CUDA 13 release: pip install 'cuda-python>=13,<14'"),
    ("somepkg", 13, "build somepkg from source with CUDA 13's nvcc, e.g. in an NGC container: "
                    "nvcr.io/nvidia/pytorch:25.10-py3 or later ships CUDA 13 and its nvcc; PyPI has no CUDA 13 build of it"),
    ("faiss-gpu-cu12", 13, "build faiss-gpu-cu12 from source with CUDA 13's nvcc, e.g. in an NGC container: "
                           "nvcr.io/nvidia/pytorch:25.10-py3 or later ships CUDA 13 and its nvcc; PyPI has no CUDA 13 "
                           "build of it"),
    ("cupy-cuda13x", 12, "install its CUDA 12 build instead: pip uninstall -y cupy-cuda13x && pip install cupy-cuda12x"),
    ("somepkg", 12, "build somepkg from source with CUDA 12's nvcc; PyPI has no CUDA 12 build of it"),
    ("(no distribution) /opt/ext/_C.so", 13, "rebuild /opt/ext/_C.so against CUDA 13 or remove it (no installed "
                                             "distribution owns it)"),
    ("somepkg", None, "install somepkg built for the CUDA major the rest of the environment uses"),
])
def test_g1_remedies_are_instructions(name, major, fix):
    text = g01._remedy(g01.Package(name, None), major)
    assert text == fix
    assert instruction_problems(text) == []


def test_the_check_itself_catches_what_it_is_for():
    assert instruction_problems("one heavy job at a time: or stop what is not needed") != []
    assert instruction_problems("as root, between runs: sync") != []
    assert instruction_problems("run it again; or") != []
    assert instruction_problems("stop it:: now") != [] and instruction_problems("stop pid 1 VLLM::EngineCore") == []
    assert instruction_problems("for cupy-cuda12x, install cupy-cuda13x") == []


# -- every project a fix names exists on PyPI ---------------------------------------------------------------
FIXTURES = Path(__file__).parent / "fixtures"
PYPI = {line for line in (FIXTURES / "pypi_names.txt").read_text().splitlines() if line and not line.startswith("#")}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
TAKES_VALUE = ("--index-url", "-i", "--extra-index-url", "-c", "-r", "--target", "-t")
PROSE = {"and", "or", "for", "then", "to", "from", "with", "in", "on", "if", "so", "as", "the", "a", "once", "before",
         "after", "until", "when", "which", "that", "removes", "lists"}  # a word of the sentence after the command


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_names(text: str) -> list[str]:
    """The projects each ``pip install`` / ``pip uninstall`` in ``text`` names (flags and their values
    skipped; ``NAME==VERSION``, a placeholder in capitals, is not a name); the list stops at the first
    word that ends the command (``)``, ``;``, ``:``, ``&&``, a ``(``, a word of prose such as "and")."""
    out = []
    for match in re.finditer(r"\bpip (?:install|uninstall)\b", text):
        words = text[match.end():].split()
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word in TAKES_VALUE:
                skip = True
                continue
            if word.startswith("-"):
                continue
            bare = word.strip("'\"")
            name = NAME.match(bare)
            if word == "&&" or not name or bare[:1] in "(./" or bare.lower() in PROSE:
                break
            if not re.sub(r"[<>=!~\[].*", "", name.group(0)).isupper():
                out.append(canonical(re.sub(r"[<>=!~\[;:,)].*", "", name.group(0))))
            if re.search(r"[),;:]['\"]?$", word):
                break
    return out


def judge_string_constants() -> list[str]:
    """Every string literal of every judge module but the docstrings (an f-string's literal parts one by one)."""
    out = []
    for info in pkgutil.iter_modules(judges.__path__):
        module = importlib.import_module(f"spark_gotchas.knowledge.judges.{info.name}")
        tree = ast.parse(inspect.getsource(module))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                out.append(node.value)
    return out


def g01_fixes() -> list[str]:
    """G1's fixes for every package it knows by name, for every library it can name, and from the
    recorded and real-wheel scans the tests judge."""
    from spark_gotchas.base.serial import from_jsonable
    from spark_gotchas.knowledge.readings import cuda_libs
    from spark_gotchas.knowledge.readings.cuda_builds import NAMES
    from spark_gotchas.knowledge.readings.env import CudaLibrary, ExtensionScan
    from spark_gotchas.knowledge.readings.gpu import GpuInventory

    names = {n for n in NAMES if n.startswith(("cupy-", "jax-", "nvidia-dali", "cudf-", "libcudf-", "kvikio-",
                                               "transformer-engine-", "tensorrt-cu", "cvcuda-", "faiss-gpu-"))} \
        | set(g01.PYTORCH) | set(cuda_libs.VERSIONED_BY_MAJOR) | {"somepkg"}
    out = [g01._remedy(g01.Package(n, None), m, GB10.capability) for n in sorted(names) for m in (11, 12, 13)]
    sonames = sorted({s for by_major in cuda_libs.WHEEL_SONAMES.values() for names in by_major.values() for s in names}
                     | {"libcudart.so.11.0", "libcublas.so.11", "libnvrtc.so.11.2", "libcupti.so.11.8", "libcufft.so.10",
                        "libnppc.so.12", "libnvjpeg.so.12", "libnvToolsExt.so.1", "libcusparseLt.so.0",
                        "libcudnn_ops.so.9", "libcusolverMg.so.11"})  # what real wheels link (readelf -d)
    ctx = g01.Context(expected=13, expect_text="", local=False, capability=GB10.capability, torch_cuda=None,
                      overrides={}, resolved=True)
    for major in (11, 12, 13):
        missing = [CudaLibrary(s, major) for s in sonames if cuda_libs.library(s)]
        out += [g01._fix_missing(g01.Package("somepkg", None), major, [lib], ctx, None) for lib in missing]
    real = json.loads((FIXTURES / "g01_readings.json").read_text())
    snapshot = json.loads((FIXTURES / "h200" / "preflight-snapshot.json").read_text())["readings"]
    scans = [from_jsonable(ExtensionScan, s["reading"]) for s in real["extension_scans"].values()]
    scans.append(from_jsonable(ExtensionScan, snapshot["env.cuda_extensions"]))
    for scan in scans:
        for inventory in (None, from_jsonable(GpuInventory, snapshot["gpu.inventory"])):
            out.append(g01.judge_extensions(scan, inventory, GB10).fix)
    return out


def every_fix_text() -> list[str]:
    return list(all_constants().values()) + judge_string_constants() + g01_fixes() + [
        fix for _, fix in G6_CASES.values()]


def test_every_project_a_fix_tells_to_install_exists_on_pypi():
    named = {name for text in every_fix_text() for name in pip_names(text)}
    assert {"torch", "cupy-cuda13x", "nvidia-cublas-cu12", "flash-attn", "unsloth-zoo"} <= named  # the search works
    assert sorted(named - PYPI) == [], "not on PyPI (or not in tests/fixtures/pypi_names.txt: see devscripts/pypi_names.py)"


def test_the_name_search_reads_pip_commands_as_pip_does():
    assert pip_names("pip uninstall -y cupy-cuda12x && pip install cupy-cuda13x; or keep") == ["cupy-cuda12x",
                                                                                              "cupy-cuda13x"]
    assert pip_names("pip install 'cuda-bindings>=13,<14'; or") == ["cuda-bindings"]
    assert pip_names("pip install --force-reinstall torch --index-url https://x/cu130 (or use") == ["torch"]
    assert pip_names("(pip install nvidia-cublas-cu12 nvidia-cuda-runtime-cu12): it then") == [
        "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"]
    assert pip_names("pip install --no-deps NAME==VERSION for each") == []
    assert pip_names("pip install --no-deps (NVIDIA's playbook: pip install --no-deps unsloth unsloth_zoo x)") == [
        "unsloth", "unsloth-zoo", "x"]
    assert "faiss-gpu-cu13" not in PYPI and "cupy-cuda13x" in PYPI
