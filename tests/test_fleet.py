"""``spark-gotchas fleet``: many nodes' files judged as a group, from the recorded H200 snapshot
copied into a fleet with planted differences (a slow node, an old driver, a slow GEMM)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from spark_gotchas.commands import fleet

H200 = json.loads((Path(__file__).parent / "fixtures" / "h200" / "preflight-snapshot.json").read_text())


def node(tmp_path: Path, name: str, *, read_factor: float = 1.0, bf16_factor: float = 1.0, driver: str = "",
         created: str = "", host: bool = True, jitter: float = 0.0) -> Path:
    doc = copy.deepcopy(H200)
    if host:
        doc["readings"]["host.identity"] = {"hostname": name, "boot_id": f"boot-{name}"}
    for method in doc["readings"]["bench.bandwidth"]["result"]["methods"]:
        method["gbps"] *= (1 + jitter) * (read_factor if method["method"] == "read" else 1.0)
    for result in doc["readings"]["bench.gemm"]["result"]["results"]:
        if result["precision"] == "bf16":
            result["tflops"] *= bf16_factor
    if driver:
        doc["platform"]["driver"] = driver
    if created:
        doc["created"] = created
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def lab(tmp_path):
    """Six nodes of one profile, within 2% of each other, but: spark-04 reads 14% slower, spark-05
    runs another driver and its BF16 GEMM is 18% slow."""
    return [node(tmp_path, "spark-00"), node(tmp_path, "spark-01", jitter=0.01), node(tmp_path, "spark-02", jitter=-0.01),
            node(tmp_path, "spark-03", jitter=0.02), node(tmp_path, "spark-04", read_factor=0.86),
            node(tmp_path, "spark-05", driver="580.95.05", bf16_factor=0.82)]


def test_the_planted_differences_are_found_and_nothing_else(lab, capsys):
    assert fleet.main([str(p) for p in lab]) == 1
    out = capsys.readouterr().out
    findings = [line for line in out.splitlines() if line[:2] == "G1" or line.startswith(("G5 ", "G7 ", "G9 "))]
    assert findings == [
        "G1 WARN: spark-05: driver 580.95.05 where 5 other h200 node(s) run 580.159.04",
        "G5 WARN: spark-04: read bandwidth 3968 GB/s, 14% below the median 4614 GB/s of 6 h200 nodes",
        "G7 WARN: spark-05: bf16 GEMM rate 564 TFLOP/s, 18% below the median 688 TFLOP/s of 6 h200 nodes",
    ]
    assert "spark-03  h200     PASS PASS PASS PASS PASS PASS INFO INFO PASS INFO" in out


def test_drift_is_a_fail_when_a_launch_config_says_the_nodes_train_together(lab, tmp_path, capsys):
    config = tmp_path / "accelerate.yaml"
    config.write_text("distributed_type: MULTI_GPU\nnum_machines: 6\nnum_processes: 6\n")
    assert fleet.main([str(p) for p in lab] + ["--spark-launch-config", str(config)]) == 1
    assert "G1 FAIL: spark-05: driver 580.95.05 where 5 other h200 node(s) run 580.159.04 (these nodes train together)" \
        in capsys.readouterr().out


def test_json_and_markdown(lab, tmp_path, capsys):
    summary = tmp_path / "summary.md"
    fleet.main([str(p) for p in lab] + ["--json", "--summary-md", str(summary)])
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["nodes"]] == [f"spark-0{i}" for i in range(6)]
    assert {(f["node"], f["gotcha"], f["status"]) for f in doc["findings"]} == {
        ("spark-05", "G1", "WARN"), ("spark-04", "G5", "WARN"), ("spark-05", "G7", "WARN")}
    assert "| spark-04 | h200 | PASS |" in summary.read_text()


def test_bad_input_is_one_line_each_and_the_rest_is_judged(lab, tmp_path, capsys):
    other = tmp_path / "notes.json"
    other.write_text('{"hello": 1}')
    gotchaless = tmp_path / "no-gotchas.json"  # a row of "-" would have read as a node without findings
    gotchaless.write_text(json.dumps({"tests": [], "spark_gotchas": {"gotchas": ["G1"]}}))
    older = node(tmp_path, "spark-00-old", created="2020-01-01T00:00:00+00:00")
    doc = json.loads(older.read_text())
    doc["readings"]["host.identity"]["hostname"] = "spark-00"  # a second file of spark-00, older
    older.write_text(json.dumps(doc))
    nameless = node(tmp_path, "from-an-older-suite", host=False)
    code = fleet.main([str(other), str(older), str(nameless), "/dev/zero", str(tmp_path / "missing.json"),
                       str(gotchaless)] + [str(p) for p in lab])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert f"spark-gotchas fleet: {other} is neither a pytest JSON report with a spark_gotchas section nor a snapshot: left out" in out
    assert "spark-gotchas fleet: /dev/zero is not a regular file (a character device): left out" in out
    assert f"spark-gotchas fleet: {gotchaless} has a spark_gotchas section whose gotchas are not an object of verdicts: " \
        "left out" in out
    assert f"spark-gotchas fleet: {tmp_path / 'missing.json'} does not exist: left out" in out
    assert f"spark-gotchas fleet: {older} and {lab[0]} are the same node (spark-00): {lab[0]} is judged" in out
    assert any(line.startswith("from-an-older-suite  h200") for line in out)  # named by its file


def test_a_single_node_is_judged_and_says_there_is_nothing_to_compare(tmp_path, capsys):
    assert fleet.main([str(node(tmp_path, "alone"))]) == 0
    assert "spark-gotchas fleet: one node (alone): nothing to compare it with" in capsys.readouterr().out


def test_nothing_readable_is_exit_2(tmp_path, capsys):
    assert fleet.main([str(tmp_path / "nope.json")]) == 2


def test_the_command_and_a_real_run_of_this_machine(pytester, tmp_path):
    """`spark-gotchas fleet` over a snapshot and a report of one real run here: one node, named
    by its host reading, judged once."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    snap, report = tmp_path / "s.json", tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-q", str(root / "tests_gotchas"),
                          f"--spark-snapshot={snap}", "--json-report", f"--json-report-file={report}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert snap.exists() and report.exists(), run.stdout[-2000:]
    host = json.loads(snap.read_text())["readings"]["host.identity"]["hostname"]
    assert json.loads(report.read_text())["spark_gotchas"]["platform"]["host"]["hostname"] == host
    out = subprocess.run([sys.executable, "-m", "spark_gotchas", "fleet", str(snap), str(report)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"are the same node ({host})" in out.stdout and f"one node ({host}): nothing to compare it with" in out.stdout


def test_several_runs_of_one_machine_count_as_nodes_when_named_by_file(tmp_path, capsys):
    """Three runs of one H200 (one host, one boot): one node by host; three nodes by file, where
    the folders CI artifacts come in name them."""
    for run in ("runner-a", "runner-b", "runner-c"):
        (tmp_path / run).mkdir()
        doc = copy.deepcopy(H200)
        doc["readings"]["host.identity"] = {"hostname": "3f2a9c1d0e7b", "boot_id": "same"}  # a container's id
        (tmp_path / run / "snapshot.json").write_text(json.dumps(doc))
    files = [str(tmp_path / run / "snapshot.json") for run in ("runner-a", "runner-b", "runner-c")]
    fleet.main(files)
    assert "one node (3f2a9c1d0e7b): nothing to compare it with" in capsys.readouterr().out
    assert fleet.main(files + ["--name-by", "file"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("runner-")] == [
        "runner-a", "runner-b", "runner-c"]
