"""What the process survey records of a known server beyond its command line, read from a /proc of
our own making (``$SPARK_GOTCHAS_SYS_ROOT``): its bounding variables, the config files it names, its
installed version; and every way that reading can go wrong ends in a reason, never a hang."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time

import pytest

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.readings.gpu import GpuProcess, ServerStart
from spark_gotchas.knowledge.workloads import KV_BYTES, UNKNOWN, classify, parse_yaml
from spark_gotchas.machine.readers import gpu as reader

PID = 4321


def fake_proc(tmp_path, monkeypatch, environ: dict[str, str] | bytes = b"", exe="/usr/bin/python3.12",
              cwd="/home/spark"):
    """A /proc/PID with an environ file, and root, cwd and exe links into a fake file system; returns that root."""
    monkeypatch.setenv(reader.SYS_ROOT_ENV, str(tmp_path))
    fs = tmp_path / "fs"
    (fs / cwd.lstrip("/")).mkdir(parents=True)
    proc = tmp_path / "proc" / str(PID)
    proc.mkdir(parents=True)
    data = environ if isinstance(environ, bytes) else b"".join(f"{k}={v}".encode() + b"\0" for k, v in environ.items())
    (proc / "environ").write_bytes(data)
    (proc / "root").symlink_to(fs)
    (proc / "cwd").symlink_to(fs / cwd.lstrip("/"))
    (proc / "exe").symlink_to(exe)
    return fs


def site(fs, prefix="/usr/local", python="python3.12", kind="dist-packages"):
    path = fs / prefix.lstrip("/") / "lib" / python / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_a_servers_bounding_variables_are_kept_masked_and_the_rest_left_out(tmp_path, monkeypatch):
    fake_proc(tmp_path, monkeypatch, {"OLLAMA_MAX_LOADED_MODELS": "2", "OLLAMA_KEEP_ALIVE": "-1", "HOME": "/root",
                                      "HF_TOKEN": "hf_abcdefghijklmnop", "LLAMA_ARG_API_KEY": "sk-live-123456",
                                      "CUDA_MEMORY_FRACTION": "0.4"})
    kept, every, why = reader.read_environ(PID)
    assert why is None and every["HOME"] == "/root"
    assert kept == {"CUDA_MEMORY_FRACTION": "0.4", "LLAMA_ARG_API_KEY": "***", "OLLAMA_KEEP_ALIVE": "-1",
                    "OLLAMA_MAX_LOADED_MODELS": "2"}


def test_an_environment_it_may_not_read_is_said_and_the_bound_it_holds_is_unknown(tmp_path, monkeypatch):
    fake_proc(tmp_path, monkeypatch)

    def denied(path, kind):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(reader.bounded_read, "read_bytes", denied)
    start = reader.server_start(PID, ["text-generation-launcher", "--model-id", "m"], "text-generation-launcher")
    assert start.environ is None
    assert start.environ_error == "no permission to read its environment (another user's process; run as root to read it)"
    bound = classify(["text-generation-launcher", "--model-id", "m"], start=start).bound
    assert bound.kind == UNKNOWN and bound.why == (
        "TGI also reads CUDA_MEMORY_FRACTION from its environment: its environment could not be read (no permission to "
        "read its environment (another user's process; run as root to read it))")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX processes")
def test_another_users_environ_on_this_machine_is_a_permission_error_said_in_words():
    """A real /proc: a reader without privileges asks for a process it does not own (as root, a forked
    child that drops to nobody reads a process of ours; otherwise init's)."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    target = victim.pid if os.geteuid() == 0 else 1
    out, inp = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.close(out)
            reader.bounded_read._IDLE = queue.SimpleQueue()  # a forked child has none of its parent's reader threads
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            os.write(inp, str(reader.read_environ(target)[2]).encode())
        finally:
            os._exit(0)
    os.close(inp)
    try:
        said = os.read(out, 4096).decode()
        os.waitpid(child, 0)
    finally:
        os.close(out)
        victim.kill()
        victim.wait()
    assert said == "no permission to read its environment (another user's process; run as root to read it)"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, make, reason", [
    ("a FIFO with no writer", lambda p: os.mkfifo(p), "not a regular file (a FIFO or pipe)"),
    ("a link to /dev/zero", lambda p: p.symlink_to("/dev/zero"), "not a regular file (a character device)"),
    ("a 2 MiB file", lambda p: p.write_bytes(b"#" * (2 << 20)), "larger than 1 MiB"),
    ("a folder", lambda p: p.mkdir(), "not a regular file (a directory)"),
    ("Latin-1 bytes", lambda p: p.write_bytes(b"gpu-memory-utilization: 0.5 # \xe9t\xe9\n"),
     "not UTF-8 text (invalid continuation byte at byte 30)"),
])
def test_a_hostile_server_config_is_a_reason_not_a_hang(tmp_path, monkeypatch, case, make, reason):
    fs = fake_proc(tmp_path, monkeypatch)
    (fs / "etc").mkdir()
    make(fs / "etc" / "vllm.yaml")
    t0 = time.monotonic()
    read = reader.read_config(PID, "/etc/vllm.yaml")
    assert time.monotonic() - t0 < 10
    assert read.text is None and read.error == reason
    argv = ["vllm", "serve", "m", "--config", "/etc/vllm.yaml"]
    bound = classify(argv, start=ServerStart(environ={}, configs=[read], version="0.20.0")).bound
    assert bound.kind == UNKNOWN and bound.why == f"its config /etc/vllm.yaml could not be read: {reason}"


def test_a_yaml_alias_bomb_or_a_deep_nest_parses_small_or_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)) + \
        "gpu-memory-utilization: 0.4\n"
    data, why = parse_yaml(bomb)  # 10^9 leaves once expanded; PyYAML keeps one object per anchor
    assert why == "" and data["gpu-memory-utilization"] == 0.4
    start = ServerStart(configs=[reader.ServerConfig("/etc/v.yaml", bomb)], version="0.20.0")
    assert classify(["vllm", "serve", "m", "--config", "/etc/v.yaml"], start=start).bound.value == 0.4
    deep = "a: " + "[" * 50_000 + "]" * 50_000
    assert parse_yaml(deep) == (None, "nested too deeply to read")
    huge = "".join(f"k{i}: [1, 2, 3]\n" for i in range(6_000))
    data, why = parse_yaml(huge)
    assert data is None and why.startswith("not YAML it can read: more than 20000 values")
    assert parse_yaml("- 1\n- 2\n") == (None, "not a mapping of settings")
    assert parse_yaml("!!python/object:os.system ls\n")[0] is None  # the safe loader builds no objects


def test_a_relative_config_is_read_from_the_process_working_folder_and_masked(tmp_path, monkeypatch):
    fs = fake_proc(tmp_path, monkeypatch, cwd="/srv/llm")
    (fs / "srv" / "llm" / "serve.yaml").write_text("kv-cache-memory-bytes: 30g\napi-key: sk-live-abcdef123456\n")
    read = reader.read_config(PID, "serve.yaml")
    assert read.error is None and read.text == 'kv-cache-memory-bytes: 30g\napi-key: "***"\n'
    # the masked value quoted, the file still parses (bare, *** is a YAML alias)
    bound = classify(["vllm", "serve", "m", "--config", "serve.yaml"], start=ServerStart(configs=[read])).bound
    assert (bound.kind, bound.value) == (KV_BYTES, 30e9)
    assert reader.read_config(PID, "missing.yaml").error == "no such file as the process sees it"


def test_the_version_is_read_from_the_dist_info_beside_the_python_the_process_runs(tmp_path, monkeypatch):
    fs = fake_proc(tmp_path, monkeypatch, {"VIRTUAL_ENV": "/opt/venv"})
    (site(fs, "/opt/venv", kind="site-packages") / "vllm-0.24.0.dist-info").mkdir()
    (site(fs, "/usr/local") / "vllm-0.11.0.dist-info").mkdir()  # the system's, not the one it runs
    _, every, _ = reader.read_environ(PID)
    assert reader.read_version(PID, ["/opt/venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server"], every,
                               "vllm") == ("0.24.0", "/opt/venv/lib/python3.12/site-packages/vllm-0.24.0.dist-info", None)
    # no virtual environment: the interpreter /proc/PID/exe names (Debian's Python also looks in /usr/local)
    assert reader.read_version(PID, ["python3", "-m", "vllm.entrypoints.openai.api_server"], {}, "vllm")[0] == "0.11.0"
    assert reader.read_version(PID, ["python3", "-m", "sglang.launch_server"], {}, "sglang") == (
        None, None, "no sglang-*.dist-info (/usr/local/lib/python3.12/dist-packages)")


def test_the_survey_records_a_servers_start_and_a_replay_reads_it_back(tmp_path, monkeypatch):
    fs = fake_proc(tmp_path, monkeypatch, {"PATH": "/usr/bin"})
    (site(fs, "/usr/local") / "tensorrt_llm-1.2.0.dist-info").mkdir()
    (fs / "etc").mkdir()
    (fs / "etc" / "extra.yml").write_text("kv_cache_config:\n  free_gpu_memory_fraction: 0.3\n  max_tokens: 65536\n")
    argv = ["/usr/bin/python3", "/usr/local/bin/trtllm-serve", "openai/gpt-oss-120b", "--extra_llm_api_options",
            "/etc/extra.yml"]
    start = reader.server_start(PID, argv, "trtllm-serve")
    assert start.version == "1.2.0" and start.configs[0].error is None and start.environ == {}
    proc = GpuProcess(pid=PID, cmdline=argv, name="trtllm-serve", gpu_memory_bytes=int(70e9), start=start)
    back = from_jsonable(GpuProcess, json.loads(json.dumps(to_jsonable(proc))))
    assert back == proc
    bound = classify(back.cmdline, back.name, back.start).bound
    assert (bound.value, bound.where, bound.notes) == (0.3, "/etc/extra.yml", ("kv_cache_config.max_tokens 65536",))


def test_a_snapshot_of_an_older_suite_without_the_start_still_replays():
    old = {"pid": 6008, "name": "VLLM::EngineCore", "cmdline": ["VLLM::EngineCore"], "gpu_memory_bytes": 59_200_000_000}
    proc = from_jsonable(GpuProcess, old)
    assert proc.start is None
    assert classify(proc.cmdline, proc.name, proc.start).bound.kind == UNKNOWN


def test_a_kv_cache_size_in_a_recorded_config_is_what_bounds_vllm():
    start = ServerStart(configs=[reader.ServerConfig("v.yaml", "kv_cache_memory_bytes: 20G\nmax-num-seqs: 8\n")])
    bound = classify(["vllm", "serve", "m", "--config", "v.yaml"], start=start).bound
    assert (bound.kind, bound.value, bound.where, bound.notes) == (KV_BYTES, 20 * 2**30, "v.yaml", ("max-num-seqs: 8 in v.yaml",))
    # the command line wins over its config, as vLLM inserts the config's options before it
    cli = classify(["vllm", "serve", "m", "--config", "v.yaml", "--kv-cache-memory-bytes", "8g"], start=start).bound
    assert (cli.value, cli.where) == (8e9, "")
    # --config=PATH is an option vLLM parses but never pulls: its file bounds nothing
    ignored = classify(["vllm", "serve", "m", "--config=v.yaml"], start=ServerStart(version="0.20.0", configs=[])).bound
    assert (ignored.kind, ignored.value, ignored.source) == ("fraction", 0.92, "default")


@pytest.mark.parametrize("masked", ["api-key: ***\n", "{api-key: ***, gpu-memory-utilization: 0.5}\n",
                                    "keys:\n- ***\n- ***  # two\n", "url: https://u:***@host\n"])
def test_a_masked_config_still_parses(masked):
    data, why = parse_yaml(reader.yaml_safe_mask(masked))
    assert why == "" and "***" in json.dumps(data)


def test_a_config_its_servers_own_user_may_not_read_is_not_read(tmp_path, monkeypatch):
    """A run as root reads a file a command line names only where the server's own user could."""
    fs = fake_proc(tmp_path, monkeypatch)
    (fs / "etc").mkdir()
    secret = fs / "etc" / "shadow"
    secret.write_text("root:$6$secret:19000:0:99999:7:::\n")
    secret.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(secret, 0, 0)
    proc = tmp_path / "proc" / str(PID)
    (proc / "status").write_text("Name:\ttrtllm-serve\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n"
                                 "Groups:\t27 1000\n")
    if os.stat(secret).st_uid == 1000:  # pragma: no cover - only when the test runs as uid 1000
        pytest.skip("the file is the server user's own here")
    read = reader.read_config(PID, "/etc/shadow")
    assert (read.text, read.error) == (None, "its own user may not read it: not read")
    secret.chmod(0o644)
    assert reader.read_config(PID, "/etc/shadow").text is not None


def test_a_config_vllm_would_refuse_is_not_read_and_its_bound_is_unknown():
    argv = ["vllm", "serve", "m", "--config", "/etc/passwd"]
    assert reader.workloads.config_paths(argv) == []
    bound = classify(argv, start=ServerStart(version="0.20.0")).bound
    assert bound.kind == UNKNOWN and bound.why == ("its config /etc/passwd is no .yaml or .yml file, which the server "
                                                   "refuses (it would not have started with it)")
