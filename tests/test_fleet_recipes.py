"""The many-machines recipes (docs/fleet.md): the GitHub Actions fleet workflow is valid and pinned,
its preflight step runs here and leaves its files where its artifact takes them, and its fleet
step, run for real over a folder laid out as download-artifact's merge-multiple leaves it, writes
the table into the job summary and exits as documented; the Slurm script is valid bash."""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_preflight import BASH, EXPRESSION, ROOT, shell_text
from ci_preflight import job as preflight_job
from ci_preflight import step as preflight_step
from test_workflow import PINNED_USES, _validate, _zizmor

FLEET_WORKFLOW = ROOT / ".github" / "workflows" / "spark-fleet.yml"
PREFLIGHT_WORKFLOW = ROOT / ".github" / "workflows" / "spark-preflight.yml"
DOCS = ROOT / "docs" / "fleet.md"
H200 = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())


def workflow() -> dict[str, Any]:
    data = yaml.safe_load(FLEET_WORKFLOW.read_text(encoding="utf-8"))
    if True in data and "on" not in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def job(name: str) -> dict[str, Any]:
    return workflow()["jobs"][name]


def step(job_name: str, name_prefix: str) -> dict[str, Any]:
    (found,) = [s for s in job(job_name)["steps"] if str(s.get("name", "")).startswith(name_prefix)]
    return found


def uses(job_name: str, action: str) -> dict[str, Any]:
    (found,) = [s for s in job(job_name)["steps"] if str(s.get("uses", "")).startswith(f"{action}@")]
    return found


@dataclass
class StepRun:
    returncode: int
    output: str
    summary: str
    github_env: str


def run_step(job_name: str, name_prefix: str, base: Path, cwd: Path, **env_overrides: str) -> StepRun:
    """One step of the fleet workflow as the runner runs it: bash -eo pipefail, the job's plain
    variables, ``$GITHUB_STEP_SUMMARY`` and ``$GITHUB_ENV`` files, ``python3`` this interpreter."""
    bindir = base / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    (bindir / "python3").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    (bindir / "python3").chmod(0o755)
    summary, github_env, runner_temp = base / "step_summary.md", base / "github_env", base / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({k: str(v) for k, v in job(job_name)["env"].items() if not EXPRESSION.search(str(v))})
    env.update({"PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}", "GITHUB_STEP_SUMMARY": str(summary),
                "GITHUB_ENV": str(github_env), "GITHUB_PATH": str(base / "github_path"),
                "RUNNER_TEMP": str(runner_temp), "PYTHONUNBUFFERED": "1"})
    env.update(env_overrides)
    proc = subprocess.run([*BASH, shell_text(step(job_name, name_prefix)["run"])], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    return StepRun(proc.returncode, proc.stdout + proc.stderr,
                   summary.read_text() if summary.exists() else "",
                   github_env.read_text() if github_env.exists() else "")


# -- the workflow's shape ---------------------------------------------------------------------------
def test_the_workflow_passes_githubs_workflow_schema():
    result = _validate(FLEET_WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_manual_run_takes_a_json_list_of_runner_labels_one_job_each():
    on = workflow()["on"]
    assert set(on) == {"workflow_dispatch"}  # never on push: it takes every named machine at once
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["runners"]["required"] is True
    assert json.loads(inputs["runners"]["default"]) == ["spark-01", "spark-02"]
    assert inputs["fail_on_findings"]["type"] == "boolean" and inputs["fail_on_findings"]["default"] is True
    preflight = job("preflight")
    assert preflight["strategy"]["matrix"]["runner"] == "${{ fromJSON(inputs.runners) }}"
    assert preflight["strategy"]["fail-fast"] is False  # one node's failure does not cancel the others
    assert preflight["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    docs = DOCS.read_text(encoding="utf-8")
    for name in inputs:  # docs/fleet.md explains every input
        assert f"`{name}`" in docs, f"docs/fleet.md does not name the input {name}"


def test_the_fleet_job_runs_after_every_node_even_a_failed_one():
    fleet = job("fleet")
    assert fleet["needs"] == "preflight" and fleet["if"] == "always()"
    download = uses("fleet", "actions/download-artifact")
    upload = uses("preflight", "actions/upload-artifact")
    assert upload["if"] == "always()" and upload["with"]["path"] == "fleet/"
    assert upload["with"]["name"] == "spark-gotchas-fleet-${{ matrix.runner }}"
    assert re.fullmatch(r"spark-gotchas-fleet-\*", download["with"]["pattern"])
    assert download["with"]["merge-multiple"] is True and download["with"]["path"] == fleet["env"]["NODES_DIR"]


def test_each_node_runs_the_preflight_as_the_preflight_workflow_does():
    """The same settings check, install and report check as spark-preflight.yml, word for word: one
    way to install the suite into a job (docs/ci.md), so a fix to it cannot miss one workflow."""
    for name in ("Install spark-gotchas", "Check the run's settings"):
        ours = step("preflight", name)["run"]
        theirs = preflight_step(name)["run"]
        assert theirs.startswith(ours) if name.startswith("Check") else ours == theirs, name
    theirs_check = preflight_step("Check that the report is whole")["run"].replace('"$REPORTS/check-report.txt"',
                                                                                  '"$RUNNER_TEMP/check-report.txt"')
    assert step("preflight", "Check that the report is whole")["run"] == theirs_check.replace(
        '"$REPORTS/report.json"', '"$NODE_DIR/report.json"')
    assert job("preflight")["container"] == preflight_job()["container"]
    assert step("preflight", "Check that the report is whole")["if"] == "always() && steps.install.outcome == 'success'"


def test_every_step_script_is_valid_bash():
    for job_name, spec in workflow()["jobs"].items():
        assert spec["defaults"]["run"]["shell"] == "bash"
        for s in spec["steps"]:
            if "run" in s:
                result = subprocess.run(["bash", "-n", "-c", shell_text(s["run"])], capture_output=True, text=True)
                assert result.returncode == 0, f"{job_name}/{s.get('name')}: {result.stderr}"


def test_expressions_name_only_declared_inputs():
    text = FLEET_WORKFLOW.read_text(encoding="utf-8")
    used = set(re.findall(r"\binputs\.([A-Za-z_][\w-]*)", text))
    assert used <= set(workflow()["on"]["workflow_dispatch"]["inputs"])
    ids = {s["id"] for spec in workflow()["jobs"].values() for s in spec["steps"] if "id" in s}
    assert set(re.findall(r"\bsteps\.([A-Za-z_][\w-]*)\.", text)) <= ids


# -- pinning and zizmor ------------------------------------------------------------------------------
def _pins(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if re.search(r"^\s*(-\s+)?uses:", line)]
    pins = {}
    for line in lines:
        match = PINNED_USES.match(line)
        assert match, f"{path.name}: not pinned to a full commit SHA with '# vX.Y.Z' after it: {line.strip()}"
        assert pins.setdefault(match.group(1), match.group(2, 3)) == match.group(2, 3), line
    return pins


def test_every_action_is_pinned_to_the_commit_the_preflight_workflow_uses():
    """A commit SHA with its release in a comment, the same commit as spark-preflight.yml (whose pins
    docs/ci.md lists): one update moves both."""
    ours = _pins(FLEET_WORKFLOW)
    assert set(ours) == {"actions/checkout", "actions/upload-artifact", "actions/download-artifact"}
    theirs = _pins(PREFLIGHT_WORKFLOW)
    assert {action: ours[action] == theirs[action] for action in ours} == {action: True for action in ours}


def test_no_checkout_leaves_a_token_behind():
    for job_name in ("preflight", "fleet"):
        assert uses(job_name, "actions/checkout")["with"]["persist-credentials"] is False


def test_zizmor_finds_nothing():
    """The default persona, offline, every severity from low up (the one ignore comment, on the
    container image expression, is the preflight workflow's and says why)."""
    result = subprocess.run([_zizmor(), "--offline", "--no-config", "--min-severity=low", "--format=json",
                             str(FLEET_WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert json.loads(result.stdout or "[]") == [], result.stdout[:4000]
    assert result.returncode == 0, result.stderr[-2000:]


# -- the steps, run here ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def node_job(tmp_path_factory) -> Path:
    """The preflight job's own steps on this machine, once, as runner label ``gpu-box``: the folder
    its artifact would hold (fleet/, with runner-gpu-box/report.json and snapshot.json)."""
    base = tmp_path_factory.mktemp("node-job")
    workspace = base / "workspace"
    workspace.mkdir()
    enter = run_step("preflight", "Enter the environment", base, workspace, RUNNER_LABEL="gpu-box", SPARK_VENV="")
    assert enter.returncode == 0, enter.output
    assert enter.github_env == "NODE_DIR=fleet/runner-gpu-box\n"
    node_dir = str(workspace / "fleet" / "runner-gpu-box")  # in the checkout, as on the runner
    run = run_step("preflight", "Preflight (", base, ROOT, NODE_DIR=node_dir,
                   EXTRA_ARGS="-p no:hypothesispytest -p no:cacheprovider")
    assert run.returncode in (0, 1), run.output[-3000:]
    assert re.search(r"^G9 (PASS|WARN|FAIL|INFO|SKIP): ", run.output, re.M), run.output[-3000:]
    check = run_step("preflight", "Check that the report is whole", base, ROOT, NODE_DIR=node_dir)
    assert check.returncode == 0, check.output
    return workspace / "fleet"


def h200_node(folder: Path, label: str, host: str, *, read_factor: float = 1.0, driver: str = "",
              as_report_only: bool = False) -> None:
    """A downloaded artifact's folder for one runner: the recorded H200 snapshot with its own host."""
    doc = copy.deepcopy(H200)
    doc["readings"]["host.identity"] = {"hostname": host, "boot_id": f"boot-{host}"}
    for method in doc["readings"]["bench.bandwidth"]["result"]["methods"]:
        if method["method"] == "read":
            method["gbps"] *= read_factor
    if driver:
        doc["platform"]["driver"] = driver
    (folder / f"runner-{label}").mkdir(parents=True)
    (folder / f"runner-{label}" / "snapshot.json").write_text(json.dumps(doc))


@pytest.fixture
def downloaded(tmp_path, node_job) -> Path:
    """The fleet job's workspace after download-artifact (merge-multiple) of four runners' artifacts:
    this machine's real run (gpu-box) and three H200 nodes built from the recorded snapshot."""
    nodes = tmp_path / "fleet-job" / "nodes"
    shutil.copytree(node_job, nodes)  # what fleet/ held on the node is what its artifact holds
    for i in range(3):
        h200_node(nodes, f"h200-{i}", f"h200-node{i}")
    return nodes.parent


def judge(workspace: Path, runners: list[str] | str, **env: str) -> StepRun:
    return run_step("fleet", "Judge the nodes", workspace.parent, workspace,
                    RUNNERS=runners if isinstance(runners, str) else json.dumps(runners),
                    FAIL_ON_FINDINGS=env.pop("FAIL_ON_FINDINGS", "true"), LAUNCH_CONFIG=env.pop("LAUNCH_CONFIG", ""),
                    **env)


RUNNERS = ["gpu-box", "h200-0", "h200-1", "h200-2"]


def test_the_preflight_step_leaves_its_files_where_the_artifact_takes_them(node_job):
    folder = node_job
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "runner-gpu-box/report.json", "runner-gpu-box/snapshot.json"]


def test_the_fleet_step_writes_the_table_into_the_summary_and_passes_a_group_without_findings(downloaded):
    run = judge(downloaded, RUNNERS)
    assert run.returncode == 0, run.output  # a node's own FAIL is its preflight's to report, not the group's
    live = json.loads((downloaded / "nodes" / "runner-gpu-box" / "snapshot.json").read_text())
    own = int(any(v["status"] == "FAIL" for v in live["verdicts"]))  # this machine's run: 1 where it FAILs
    assert f"4 node(s); {own} with a FAIL of its own; 0 finding(s) across the group" in run.output
    assert run.summary.startswith("## spark-gotchas fleet: 4 nodes, 0 findings\n")
    assert "| runner-h200-0 | h200 | PASS | PASS | PASS | PASS | PASS | PASS | INFO | INFO | PASS | INFO |" in run.summary
    assert re.search(r"^\| runner-gpu-box \| \w+ \| ", run.summary, re.M), run.summary  # named by its runner
    assert "::" not in run.output


def test_a_slow_node_fails_the_fleet_job_or_only_warns_when_asked(downloaded):
    nodes = downloaded / "nodes"
    h200_node(nodes, "h200-3", "h200-node3", read_factor=0.86)
    run = judge(downloaded, RUNNERS + ["h200-3"])
    assert run.returncode == 1, run.output
    assert "G5 WARN: runner-h200-3: read bandwidth 3968 GB/s, 14% below the median 4614 GB/s of 4 h200 nodes" in run.output
    assert "::error::spark-gotchas fleet: the group shows a WARN or FAIL finding (see the job summary)" in run.output
    assert "- **G5 WARN**: runner-h200-3: read bandwidth 3968 GB/s" in run.summary
    warned = judge(downloaded, RUNNERS + ["h200-3"], FAIL_ON_FINDINGS="false")
    assert warned.returncode == 0, warned.output
    assert "::warning::spark-gotchas fleet: the group shows a WARN or FAIL finding" in warned.output


def test_drift_is_a_fail_when_the_launch_config_says_the_nodes_train_together(downloaded):
    h200_node(downloaded / "nodes", "h200-3", "h200-node3", driver="580.95.05")
    (downloaded / "accelerate.yaml").write_text("distributed_type: MULTI_GPU\nnum_machines: 4\nnum_processes: 4\n")
    run = judge(downloaded, RUNNERS + ["h200-3"], LAUNCH_CONFIG="accelerate.yaml")
    assert run.returncode == 1, run.output
    assert ("- **G1 FAIL**: runner-h200-3: driver 580.95.05 where 3 other h200 node(s) run 580.159.04 "
            "(these nodes train together)") in run.summary


def test_a_runner_that_sent_nothing_fails_the_job_and_is_named(downloaded):
    run = judge(downloaded, RUNNERS + ["spark-07"])
    assert run.returncode == 1, run.output
    assert ("::error::no report or snapshot from spark-07: its job ended before the preflight ran, "
            "or no runner with that label took it") in run.output
    assert "- **no report or snapshot** from spark-07: the group was judged without it" in run.summary
    assert "| runner-h200-2 | h200 |" in run.summary  # the others are judged all the same


def test_a_node_without_a_snapshot_is_judged_from_its_report(downloaded):
    (downloaded / "nodes" / "runner-gpu-box" / "snapshot.json").unlink()
    run = judge(downloaded, RUNNERS)
    assert run.returncode == 0, run.output
    assert "4 node(s)" in run.output and "left out" not in run.output


def test_no_file_at_all_is_exit_2_not_a_traceback(tmp_path):
    workspace = tmp_path / "fleet-job"
    (workspace / "nodes").mkdir(parents=True)
    run = judge(workspace, ["spark-01", "spark-02"])
    assert run.returncode == 2  # as fleet's own: nothing to judge
    assert "::error::no report or snapshot from spark-01 spark-02" in run.output
    assert run.summary.startswith("## spark-gotchas fleet: no node sent a report or snapshot\n")
    assert "Traceback" not in run.output


@pytest.mark.parametrize("runners", ['"spark-01"', "spark-01, spark-02", "[]", '[1, 2]', '["a", ""]',
                                     '["spark\\n::error::forged"]', "{"])
def test_runners_that_are_no_list_of_labels_are_one_line(tmp_path, runners):
    workspace = tmp_path / "fleet-job"
    (workspace / "nodes").mkdir(parents=True)
    run = judge(workspace, runners)
    assert run.returncode == 1
    (line,) = [x for x in run.output.splitlines() if x.startswith("::")]
    assert line.startswith("::error::runners is not a JSON list of runner labels: ")


def test_a_label_cannot_lead_outside_the_nodes_folder(tmp_path):
    """A label is a folder name once its other characters are _ and it has the runner- prefix: '..'
    names nodes/runner-.., not the workspace."""
    workspace = tmp_path / "fleet-job"
    (workspace / "nodes").mkdir(parents=True)
    (workspace / "snapshot.json").write_text(json.dumps(H200))  # what 'nodes/..' would find
    run = judge(workspace, ["..", "../x"])
    assert run.returncode == 2
    assert "::error::no report or snapshot from .. ../x" in run.output


# -- the Slurm recipe's script ------------------------------------------------------------------------
def test_the_slurm_script_is_valid_bash_and_refuses_a_bad_setting():
    script = ROOT / "devscripts" / "slurm_fleet.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    for setting, message in [({"HOSTNAMES": "banana"}, "slurm_fleet: HOSTNAMES is own or shared, not banana"),
                             ({"NODES": "0"}, "slurm_fleet: NODES is a number of nodes from 1 to 99, not 0"),
                             ({"SLURM_CTLD_PORT": "80; rm -rf /"},
                              "slurm_fleet: SLURM_CTLD_PORT is a port from 1000 to 65400, not 80; rm -rf /")]:
        result = subprocess.run(["bash", str(script)], env={**os.environ, "SLURM_FLEET_DIR": "/nonexistent/x", **setting},
                                capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stderr.strip()) == (2, message)
