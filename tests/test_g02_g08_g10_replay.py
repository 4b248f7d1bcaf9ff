"""G2, G8 and G10 end to end: a live run of the real checks (G8 against a loopback GitHub, G10 with real
launch files and the torchrun rehearsal) writes a snapshot; its replay gives the same verdicts without
network, files or torch."""

import json
import os
import re
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from needs import requires_torch

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


class Recorded(SimpleHTTPRequestHandler):
    """GitHub's two endpoints the G8 reader uses, answered from tests/fixtures/g08."""

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        path = self.path.split("?")[0]
        name = {"/repos/NVIDIA/dgx-spark-playbooks/issues": "issues_page1.json",
                "/repos/NVIDIA/dgx-spark-playbooks/contents/nvidia": "contents_nvidia.json"}.get(path)
        if name is None:
            self.send_error(404)
            return
        body = (FIXTURES / "g08" / name).read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def run_suite(tmp_path, *args, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_"))}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), **env_extra)
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "fast or multinode",
                           "-k", "g02 or g08 or g10", "--json-report", f"--json-report-file={report}", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())
    verdicts = {t["nodeid"].split("::")[-1]: t["metadata"]["gotcha"] for t in data["tests"]
                if "gotcha" in t.get("metadata", {})}
    return verdicts, proc.stdout


@pytest.fixture
def github():
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Recorded))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@requires_torch
def test_live_then_replay_gives_the_same_verdicts(tmp_path, github):
    snap = tmp_path / "snap.json"
    live, out = run_suite(
        tmp_path, "--spark-profile", "gb10", "--spark-playbook", "unsloth", "--spark-playbook", "nccl",
        "--spark-launch-config", "tests/fixtures/g10/vllm_tp2.sh",  # relative: the detail names each file
        "--spark-launch-config", "tests/fixtures/g10/accelerate_ddp.yaml",  # by the path given here
        "--spark-snapshot", str(snap), SPARK_GOTCHAS_GITHUB_API=github)
    assert set(live) == {"test_g2_flash_attn_and_unsloth", "test_g8_playbook_open_issues",
                         "test_g10_launch_config_review", "test_g10_collective_probe"}, out[-3000:]
    import torch  # a CPU-only torch runs no GPU attention: G2 says so rather than pass SDPA as "the right choice"

    g2 = live["test_g2_flash_attn_and_unsloth"]["summary"]
    if torch.version.cuda is None:
        assert g2 == f"torch {torch.__version__} is a CPU build: no attention runs on a GPU here; flash-attn not installed"
    else:
        assert g2 == "flash-attn is not installed: attention uses torch SDPA, the right choice on bare pip"
    g8 = live["test_g8_playbook_open_issues"]
    assert g8["status"] == "WARN" and g8["summary"] == "unsloth: 1 open issue (#85); nccl: 1 open issue (#102)"
    assert g8["detail"].startswith('unsloth: #85 2026-07-17 "') and '; nccl: #102 2026-08-17 "' in g8["detail"]
    g10 = live["test_g10_launch_config_review"]
    assert g10["status"] == "FAIL"
    assert g10["summary"] == "vllm_tp2.sh: tensor parallel 2 spans nodes (a Spark has one GPU) (+1 more)"
    assert "vllm_tp2.sh: tensor parallel 2 (--tensor-parallel-size, line 6) spans nodes" in g10["detail"]
    assert "accelerate_ddp.yaml: DDP (distributed_type MULTI_GPU) across 2 nodes" in g10["detail"]
    probe = live["test_g10_collective_probe"]
    assert probe["status"] == "INFO" and re.fullmatch(
        r"loopback rehearsal \(2 processes, gloo on cpu\): [0-9]+\.[0-9]{2} GB/s all-reduce bus bandwidth; not the link",
        probe["summary"]), probe["summary"]
    assert probe["detail"].startswith("all-reduce bus bandwidth ")
    assert "G10 FAIL: vllm_tp2.sh: " in out and "G8 WARN: unsloth: 1 open issue (#85)" in out

    # replay: no GitHub, no launch files on the command line, no torchrun: the same verdicts
    replay, out = run_suite(tmp_path, "--spark-replay", str(snap),
                            SPARK_GOTCHAS_GITHUB_API="http://127.0.0.1:9", PYTHONPATH="")
    assert {k: (v["status"], v["summary"], v.get("detail"), v["fix"]) for k, v in replay.items()} == \
        {k: (v["status"], v["summary"], v.get("detail"), v["fix"]) for k, v in live.items()}
    assert "replayed " in out

    # replay with inputs named anew: G10 reviews the newly named file against the recorded machine,
    # G8 narrows to a recorded playbook and says it cannot answer for one the run did not look up
    again, out = run_suite(tmp_path, "--spark-replay", str(snap),
                           "--spark-launch-config", str(FIXTURES / "g10" / "broken.yaml"),
                           "--spark-playbook", "nccl", SPARK_GOTCHAS_GITHUB_API="http://127.0.0.1:9", PYTHONPATH="")
    review = again["test_g10_launch_config_review"]["summary"]
    assert "broken.yaml" in review and "vllm_tp2.sh" not in review, review
    assert not again["test_g8_playbook_open_issues"]["summary"].startswith("unsloth")
    narrowed, out = run_suite(tmp_path, "--spark-replay", str(snap), "--spark-playbook", "vllm",
                              SPARK_GOTCHAS_GITHUB_API="http://127.0.0.1:9", PYTHONPATH="")
    assert narrowed["test_g8_playbook_open_issues"]["status"] == "SKIP"
    assert narrowed["test_g8_playbook_open_issues"]["summary"] == (
        "could not read github.playbook_issues: the snapshot did not look up vllm")
    assert narrowed["test_g8_playbook_open_issues"]["detail"] == "it holds unsloth, nccl; run live to look them up"
