"""G10 config review: every launch format, the judge's lines, bad files, the launch environment."""

import json
from pathlib import Path

import pytest

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g10_parallelism as g10
from spark_gotchas.knowledge.profiles import GB10, GENERIC, H200
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.knowledge.readings.launch import LaunchReview
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext
from spark_gotchas.machine.readers.launch import parse_file, read_launch_review, review_files

FIX = Path(__file__).parent / "fixtures" / "g10"


def one(name):
    parsed, _ = parse_file(str(FIX / name))
    return parsed


def review(*names, env=None):
    return LaunchReview(files=review_files([str(FIX / n) for n in names]), environment=env or {})


@pytest.mark.parametrize("name, fmt, tp, nodes, strategy", [
    ("accelerate_ddp.yaml", "accelerate", None, 2, "MULTI_GPU"),
    ("accelerate_fsdp.yaml", "accelerate", None, 2, "FSDP"),
    ("accelerate_megatron_tp2.yaml", "accelerate", 2, 1, "MEGATRON_LM"),
    ("deepspeed_zero2.json", "deepspeed", None, None, "DeepSpeed ZeRO-2"),
    ("deepspeed_autotp.json", "deepspeed", 2, None, "DeepSpeed ZeRO-2"),
    ("nemo_megatron_gpt.yaml", "megatron", 2, 2, "auto"),
    ("vllm_tp2.sh", "script", 2, None, None),
    ("vllm_config.yaml", "vllm", 2, None, None),
    ("sglang_args.txt", "arguments", 2, 2, None),
    ("torchrun_ddp.sh", "script", 1, 2, None),
    ("deepspeed_launch.sh", "script", None, 2, None),
])
def test_each_format_is_read_for_its_parallelism(name, fmt, tp, nodes, strategy):
    f = one(name)
    assert f.error is None and f.format == fmt
    assert (f.tp.value if f.tp else None) == tp and f.nodes == nodes and f.strategy == strategy


def test_settings_carry_key_and_line():
    tp = one("accelerate_megatron_tp2.yaml").tp
    assert (tp.key, tp.raw, tp.line) == ("megatron_lm_config.megatron_lm_tp_degree", "2", 16)
    assert one("deepspeed_autotp.json").tp.where == "tensor_parallel.autotp_size, line 5"
    assert one("nemo_megatron_gpt.yaml").procs_per_node == 1
    assert one("accelerate_megatron_tp2.yaml").procs_per_node == 8  # num_processes / num_machines


def test_script_variables_and_defaults_are_expanded():
    f = one("torchrun_ddp.sh")
    assert f.launchers == ["torchrun"]
    assert [(s.key, s.value) for s in f.settings if s.role in ("nodes", "tp")] == [
        ("--nnodes", 2), ("--tensor-model-parallel-size", 1)]


def test_a_config_named_by_a_script_is_read_too():
    files = review_files([str(FIX / "deepspeed_launch.sh")])
    assert [Path(f.path).name for f in files] == ["deepspeed_launch.sh", "deepspeed_autotp.json"]
    assert files[1].referenced_by == str(FIX / "deepspeed_launch.sh") and files[1].tp.value == 2
    v = g10.judge_launch(LaunchReview(files=files), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G10 FAIL: deepspeed_autotp.json: tensor parallel 2 spans nodes (a Spark has one GPU) (+1 more)"
    assert v.detail.startswith(f"{FIX}/deepspeed_autotp.json (named by {FIX}/deepspeed_launch.sh): tensor parallel 2 "
                               "(tensor_parallel.autotp_size, line 5) spans nodes")


def test_tp2_vllm_on_sparks_fails_naming_file_key_and_line():
    v = g10.judge_launch(review("vllm_tp2.sh"), GB10)
    assert v.status is Status.FAIL
    assert v.line == "G10 FAIL: vllm_tp2.sh: tensor parallel 2 spans nodes (a Spark has one GPU)"
    assert v.detail == f"{FIX}/vllm_tp2.sh: tensor parallel 2 (--tensor-parallel-size, line 6) spans nodes (a Spark has one GPU)"
    assert v.fix.startswith("use DDP or FSDP on two Sparks, never tensor parallelism across nodes")


def test_ddp_and_fsdp_pass(monkeypatch):
    monkeypatch.chdir(FIX)  # the names as given: the detail names each file as given
    v = g10.judge_launch(LaunchReview(files=review_files(["accelerate_ddp.yaml", "accelerate_fsdp.yaml",
                                                          "deepspeed_zero2.json", "torchrun_ddp.sh"])), GB10)
    assert v.status is Status.PASS
    assert v.line == "G10 PASS: accelerate_ddp.yaml: DDP (distributed_type MULTI_GPU) across 2 nodes (+3 more)"
    assert v.detail == ("accelerate_ddp.yaml: DDP (distributed_type MULTI_GPU) across 2 nodes; "
                        "accelerate_fsdp.yaml: FSDP across 2 nodes; deepspeed_zero2.json: DeepSpeed ZeRO-2; "
                        "torchrun_ddp.sh: data parallel across 2 nodes (tensor parallel 1)")


def test_the_worst_file_decides_and_comes_first():
    v = g10.judge_launch(review("accelerate_ddp.yaml", "nemo_megatron_gpt.yaml"), GB10)
    assert v.status is Status.FAIL
    assert v.summary == "nemo_megatron_gpt.yaml: tensor parallel 2 spans nodes (a Spark has one GPU) (+1 more)"
    assert v.detail == (f"{FIX}/nemo_megatron_gpt.yaml: tensor parallel 2 (model.tensor_model_parallel_size, line 11) "
                        f"spans nodes (a Spark has one GPU); {FIX}/accelerate_ddp.yaml: DDP (distributed_type "
                        "MULTI_GPU) across 2 nodes")


def test_elsewhere_tp_is_compared_with_gpus_per_node():
    eight = GpuInventory(devices=[GpuDevice(index=i, name="NVIDIA H200") for i in range(8)])
    one_gpu = GpuInventory(devices=[GpuDevice(index=0, name="NVIDIA H200")])
    assert g10.judge_launch(review("vllm_tp2.sh"), H200, eight).status is Status.PASS
    assert g10.judge_launch(review("vllm_tp2.sh"), H200, eight).line == (
        "G10 PASS: vllm_tp2.sh: tensor parallel 2 stays inside one node (this node has 8 GPU(s))")
    v = g10.judge_launch(review("vllm_tp2.sh"), H200, one_gpu)
    assert v.status is Status.FAIL and v.line == "G10 FAIL: vllm_tp2.sh: tensor parallel 2 spans nodes (this node has 1 GPU(s))"
    megatron = g10.judge_launch(review("accelerate_megatron_tp2.yaml"), H200, one_gpu)
    assert megatron.line == ("G10 PASS: accelerate_megatron_tp2.yaml: tensor parallel 2 stays inside one node "
                             "(8 processes per no…")  # 90 characters of the file's finding: the detail has it whole
    assert megatron.detail.endswith(": tensor parallel 2 (megatron_lm_config.megatron_lm_tp_degree, line 16) stays "
                                    "inside one node (8 processes per node in the file)")
    both = g10.judge_launch(review("accelerate_megatron_tp2.yaml", "vllm_tp2.sh"), H200, eight)
    assert both.line == ("G10 PASS: accelerate_megatron_tp2.yaml: tensor parallel 2 stays inside one node "
                         "(8 proces… (+1 more)")  # the count fits in the 100 columns too
    assert len(both.line) == 100 and both.detail.endswith("stays inside one node (this node has 8 GPU(s))")
    unknown = g10.judge_launch(review("vllm_tp2.sh"), GENERIC, None)
    assert unknown.status is Status.INFO
    assert unknown.line == ("G10 INFO: vllm_tp2.sh: tensor parallel 2; GPUs per node unknown (--spark-profile gb10 "
                            "judges for Sp…")
    assert unknown.detail.endswith("GPUs per node unknown (--spark-profile gb10 judges for Sparks)")


@pytest.mark.parametrize("name, error, shown", [
    ("broken.yaml", "YAML error: mapping values are not allowed here at line 3, column 15", None),
    ("broken.json", "JSON error: Expecting property name enclosed in double quotes at line 4, column 1",
     "JSON error: Expecting property name enclosed in double quotes at line 4, col…"),  # 90 characters in the line
    ("broken_quote.sh", "line 1: No closing quotation (cannot split the command)", None),
    ("no_such_file.yaml", "cannot read: No such file or directory", None),
])
def test_a_malformed_or_unreadable_file_fails_naming_file_and_error(name, error, shown):
    v = g10.judge_launch(review(name), GB10)
    assert v.status is Status.FAIL and v.line == f"G10 FAIL: {name}: {shown or error}"
    assert v.detail == f"{FIX}/{name}: {error}"
    assert v.fix.startswith("fix the file")


def test_binary_file_is_a_reading_not_a_crash(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\x00\xff\xfe" * 10)
    v = g10.judge_launch(LaunchReview(files=review_files([str(path)])), GB10)
    assert v.status is Status.FAIL and "cannot read: not UTF-8 text" in v.line


def test_a_file_with_nothing_recognised_is_info(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("remember to drop caches\n")
    v = g10.judge_launch(LaunchReview(files=review_files([str(path)])), GB10)
    assert v.status is Status.INFO and "no launch command or parallelism setting recognised" in v.line


def test_nothing_to_review_is_info():
    v = g10.judge_launch(LaunchReview(), GB10)
    assert v.line == "G10 INFO: no launch config given (--spark-launch-config PATH)"
    assert v.detail == ("PATH: accelerate or Megatron/NeMo YAML, DeepSpeed JSON, a vLLM/SGLang command or args file, "
                        "a torchrun script")


def test_the_launch_environment_is_read(monkeypatch):
    for key in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "NNODES", "PET_NNODES", "PARALLELISM_CONFIG_TP_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_ADDR", "192.168.100.10")
    ctx = ReadContext(options=RunOptions(spark_launch_config=(str(FIX / "accelerate_ddp.yaml"),)),
                      worker_factory=lambda: None)
    reading = read_launch_review(ctx)
    assert reading.environment["WORLD_SIZE"] == "2" and reading.environment["MASTER_ADDR"] == "192.168.100.10"
    v = g10.judge_launch(reading, GB10)
    assert v.status is Status.PASS
    assert v.line == "G10 PASS: accelerate_ddp.yaml: DDP (distributed_type MULTI_GPU) across 2 nodes (+1 more)"
    assert v.detail.endswith("; environment: launched as 2 node(s) (WORLD_SIZE=2, LOCAL_WORLD_SIZE=1)")
    tp_env = g10.judge_launch(LaunchReview(environment={"PARALLELISM_CONFIG_TP_SIZE": "2", "WORLD_SIZE": "2",
                                                        "LOCAL_WORLD_SIZE": "1"}), GB10)
    assert tp_env.status is Status.FAIL
    assert tp_env.line == ("G10 FAIL: environment: PARALLELISM_CONFIG_TP_SIZE=2 spans nodes (WORLD_SIZE=2, "
                           "LOCAL_WORLD_SIZE=1)")


def test_the_review_round_trips_through_json():
    reading = review("vllm_tp2.sh", "accelerate_megatron_tp2.yaml", "broken.yaml", "deepspeed_launch.sh")
    back = from_jsonable(LaunchReview, json.loads(json.dumps(to_jsonable(reading))))
    assert back == reading
    assert g10.judge_launch(back, GB10).line == g10.judge_launch(reading, GB10).line


def test_without_pyyaml_a_yaml_file_is_skipped_not_failed(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "yaml", None)
    v = g10.judge_launch(review("accelerate_ddp.yaml"), GB10)
    assert v.line == "G10 SKIP: accelerate_ddp.yaml: not read: PyYAML is not installed (pip install PyYAML)"
    assert v.detail == f"{FIX}/accelerate_ddp.yaml: not read: PyYAML is not installed (pip install PyYAML)"
    both = g10.judge_launch(review("accelerate_ddp.yaml", "vllm_tp2.sh"), GB10)
    assert both.status is Status.FAIL
    assert both.detail.endswith(f"; {FIX}/accelerate_ddp.yaml: not read: PyYAML is not installed (pip install PyYAML)")
