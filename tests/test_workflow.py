"""The CI workflow: valid for GitHub, wired as docs/ci.md says, and its commands work here."""

from __future__ import annotations

import http.server
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
import training_venv
from ci_preflight import (
    BASH,
    ROOT,
    WORKFLOW,
    fresh_dir,
    job,
    preflight,
    replayed_as_gb10,
    run_step,
    shell_text,
    step,
    workflow,
)

from spark_gotchas.machine.options import declared, kind

DOCS = ROOT / "docs" / "ci.md"
VALUE_FLAGS = {f.metadata["flag"] for f in declared() if kind(f) is not bool}


def _scripts() -> dict[str, str]:
    return {str(s.get("name", s.get("uses"))): s["run"] for s in job()["steps"] if "run" in s}


# -- GitHub's own schema ----------------------------------------------------------------------------
def _validate(path: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is in the test extra: pip install -e .[test]")
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           str(path)], capture_output=True, text=True, timeout=120)


def test_workflow_passes_githubs_workflow_schema():
    result = _validate(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = WORKFLOW.read_text(encoding="utf-8").replace("    runs-on:", "    run-on:", 1)
    path = tmp_path / "broken.yml"
    path.write_text(broken, encoding="utf-8")
    result = _validate(path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "runs-on" in result.stdout + result.stderr


# -- triggers and the runner ----------------------------------------------------------------------
def test_preflight_on_push_pull_request_and_dispatch_soak_nightly():
    on = workflow()["on"]
    assert {"push", "pull_request", "workflow_dispatch", "schedule"} <= set(on)
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    assert len(cron.split()) == 5 and cron.split()[2:] == ["*", "*", "*"]  # every night
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["mode"]["options"] == ["preflight", "soak"] and inputs["mode"]["default"] == "preflight"
    assert inputs["strict"]["type"] == "boolean" and inputs["strict"]["default"] is False
    assert {"soak_duration", "image", "venv", "pytest_args"} <= set(inputs)
    mode = job()["env"]["MODE"]
    assert "github.event_name == 'schedule'" in mode and "inputs.mode == 'soak'" in mode


def test_runs_only_on_a_spark_runner_and_never_for_forks():
    labels = job()["runs-on"]
    assert "self-hosted" in labels and "dgx-spark" in labels
    docs = DOCS.read_text(encoding="utf-8")
    for label in labels:  # the docs tell people to register exactly these labels
        assert f"`{label}`" in docs, f"docs/ci.md does not name the runner label {label}"
    assert "github.event.pull_request.head.repo.full_name == github.repository" in job()["if"]


def test_runs_in_the_environment_under_test_and_never_installs_torch():
    image = job()["container"]["image"]
    assert "inputs.image" in image and "vars.SPARK_CONTAINER_IMAGE" in image and "''" in image
    assert "--gpus all" in job()["container"]["options"]
    assert not [s for s in job()["steps"] if "setup-python" in str(s.get("uses", ""))]
    commands = "\n".join(line for script in _scripts().values() for line in script.splitlines()
                         if not line.lstrip().startswith("#"))
    assert not re.search(r"-m venv|virtualenv|conda create|uv venv", commands)
    assert not re.search(r"pip install[^\n]*\btorch\b", commands)
    install = step("Install spark-gotchas")["run"]
    assert "torch changed from" in install  # the guard that stops the job if torch moved
    assert 'VIRTUAL_ENV=$SPARK_VENV' in step("Enter the environment")["run"]


def test_nothing_is_installed_into_the_environment_under_test():
    """Every pip install writes to the job's own folder (--target) or only asks (--dry-run); no editable
    install, no --user: the training venv or image is what it was when the job ends."""
    text = shell_text(step("Install spark-gotchas")["run"]).replace("\\\n", " ")
    installs = re.findall(r"pip install [^\n|]*", text)
    assert len(installs) == 4, installs  # the suite, its fallback build, the dry run, what is missing
    for call in installs:
        assert '--target "$site"' in call or "--dry-run" in call, call
        assert not re.search(r"\s(-e|--editable|--user)\s", call + " "), call
    assert 'site="$RUNNER_TEMP/spark-gotchas-site"' in text
    assert 'echo "PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}" >> "$GITHUB_ENV"' in text


# -- the pytest commands ----------------------------------------------------------------------------
def _pytest_args(script: str) -> list[str]:
    command = shell_text(script).replace("\\\n", " ")
    return shlex.split(command[command.index("python3 -m pytest"):])


@pytest.mark.parametrize("name, marks", [("Preflight (", "fast"), ("Preflight and soak", "fast or soak")])
def test_pytest_writes_every_report_and_the_job_summary(name, marks):
    args = _pytest_args(step(name)["run"])
    assert args[:3] == ["python3", "-m", "pytest"] and args[args.index("-m", 3) + 1] == marks
    for wanted in ("--junitxml=$REPORTS/junit.xml", "--json-report", "--json-report-file=$REPORTS/report.json",
                   "--spark-snapshot=$REPORTS/snapshot.json", "--spark-summary-md=$GITHUB_STEP_SUMMARY",
                   "$STRICT_FLAG", "$EXTRA_ARGS"):
        assert wanted in args, f"{name}: {wanted} missing from {args}"
    if "soak" in marks:
        assert "--soak-duration=$SOAK_DURATION" in args and "--soak-dir=$REPORTS/soak" in args


def test_every_suite_option_exists_and_takes_its_value_with_equals():
    """``--opt value`` would let pytest read an absolute value as a test path (rootdir) before the
    plugin is loaded; ``--opt=value`` cannot be mistaken."""
    known = {f.metadata["flag"] for f in declared()}
    for name, script in _scripts().items():
        if "python3 -m pytest" not in script:
            continue
        args = _pytest_args(script)
        for _i, arg in enumerate(args):
            flag = arg.split("=", 1)[0]
            if flag.startswith(("--spark-", "--soak-")):
                assert flag in known, f"{name}: {flag} is not an option of the suite"
                if flag in VALUE_FLAGS:
                    assert "=" in arg, f"{name}: write {flag}=VALUE"
            if flag in ("--junitxml", "--json-report-file"):
                assert "=" in arg, f"{name}: write {flag}=VALUE"


def test_strict_input_and_variable_turn_warn_into_failure():
    strict = job()["env"]["STRICT_FLAG"]
    assert "inputs.strict" in strict and "vars.SPARK_STRICT" in strict and "'--spark-strict'" in strict


def test_artifacts_are_uploaded_even_when_the_job_fails():
    (upload,) = [s for s in job()["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()"
    paths = upload["with"]["path"].split()
    assert {"reports/junit.xml", "reports/report.json", "reports/snapshot.json", "reports/soak/"} <= set(paths)
    assert job()["env"]["REPORTS"] == "reports"  # where the pytest steps write them
    assert "github.run_id" in upload["with"]["name"] and "env.MODE" in upload["with"]["name"]


def test_the_report_is_checked_whenever_pytest_ran_in_either_mode():
    """After the preflight and after the soak, also when pytest failed or was cut short; not when the
    job stopped before pytest could run (a refused setting, a failed install)."""
    names = [str(s.get("name", s.get("uses"))) for s in job()["steps"]]
    check = names.index("Check that the report is whole")
    assert check > names.index("Preflight (pytest -m fast)") and check > names.index('Preflight and soak (pytest -m "fast or soak")')
    assert step("Check that the report is whole")["if"] == "always() && steps.install.outcome == 'success'"
    assert "if" not in step("Install spark-gotchas") and step("Install spark-gotchas")["id"] == "install"


def test_the_report_check_step_passes_a_whole_report_and_fails_an_empty_one():
    whole = run_step("Check that the report is whole", preflight().reports.parent)
    assert whole.returncode == 0, whole.output
    assert "a G-line for each of G1, G2" in whole.output
    base = fresh_dir()
    (base / "reports").mkdir()
    (base / "reports" / "report.json").write_text("{}")  # a file that exists and says nothing
    empty = run_step("Check that the report is whole", base)
    assert empty.returncode == 1
    assert "the report holds no tests" in empty.output
    assert "no whole report" in empty.summary.read_text() and "the report holds no tests" in empty.summary.read_text()


def test_every_step_script_is_valid_bash():
    assert job()["defaults"]["run"]["shell"] == "bash"  # the shell the tests run the steps with (BASH)
    for name, script in _scripts().items():
        result = subprocess.run(["bash", "-n", "-c", shell_text(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_expressions_name_only_declared_inputs_and_steps():
    text = WORKFLOW.read_text(encoding="utf-8")
    declared = set(workflow()["on"]["workflow_dispatch"]["inputs"])
    used = set(re.findall(r"\binputs\.([A-Za-z_][\w-]*)", text))
    assert used <= declared, f"undeclared inputs: {used - declared}"
    ids = {s["id"] for s in job()["steps"] if "id" in s}
    assert set(re.findall(r"\bsteps\.([A-Za-z_][\w-]*)\.", text)) <= ids


# -- the scripts, run here ----------------------------------------------------------------------------
def _heredoc(script: str, tag: str = "PY") -> str:
    match = re.search(rf"<<'{tag}'[^\n]*\n(.*?)\n{tag}\n", script, re.S)
    assert match, "the step has no python heredoc"
    return match.group(1)


def test_previous_night_lookup_skips_the_current_run():
    """The lookup script against a local stand-in for the GitHub API (loopback only)."""
    seen = {}

    class Api(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            seen["path"], seen["auth"] = self.path, self.headers.get("Authorization")
            body = json.dumps({"workflow_runs": [{"id": 42}, {"id": 41}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {"GITHUB_API_URL": f"http://127.0.0.1:{server.server_port}", "GITHUB_REPOSITORY": "acme/model",
               "GITHUB_RUN_ID": "42", "GH_TOKEN": "t0ken-for-test", "PATH": "/usr/bin:/bin"}
        code = _heredoc(step("Find the previous night")["run"])
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "run_id=41"
    assert seen["path"].startswith("/repos/acme/model/actions/workflows/spark-preflight.yml/runs?event=schedule")
    assert seen["auth"] == "Bearer t0ken-for-test"


def test_the_preflight_step_runs_here_and_leaves_every_report():
    run = preflight()
    assert run.returncode in (0, 1), run.output[-3000:]
    assert "Traceback" not in run.output
    report = json.loads(run.report.read_text())
    snapshot = json.loads(run.snapshot.read_text())
    gotchas = report["spark_gotchas"]["gotchas"]
    assert gotchas and set(gotchas) == {v["id"] for v in snapshot["verdicts"]}
    # the job fails exactly when a gotcha FAILs (pytest's exit status)
    assert (run.returncode == 1) == any(g["status"] == "FAIL" for g in gotchas.values())
    cases = ET.parse(run.reports / "junit.xml").getroot().iter("testcase")
    assert {c.get("name") for c in cases} >= {"test_g9_container_and_consistency"}
    summary = run.summary.read_text()
    assert summary.startswith("## ") and "spark-gotchas" in summary.splitlines()[0]
    for gid, entry in gotchas.items():
        assert f"**{gid} {entry['status']}**" in summary


def _bare_host_snapshot(tmp: Path) -> Path:
    """This machine's snapshot as if no container marker were there: G9 then WARNs."""
    snap = json.loads(preflight().snapshot.read_text())
    snap["readings"]["env.container"] = {"dockerenv": False, "containerenv": False, "proc1_cgroup": ["0::/"],
                                         "root_fstype": "ext4", "ngc_vars": {}}
    snap["readings"]["env.distributions"]["problems"] = []
    path = tmp / "bare.json"
    path.write_text(json.dumps(snap))
    return path


@pytest.mark.parametrize("strict, code", [("", 0), ("--spark-strict", 1)])
def test_warn_fails_the_job_only_under_strict(strict, code):
    base = fresh_dir()
    extra = f"-p no:hypothesispytest --spark-replay={_bare_host_snapshot(base)} " \
            "tests_gotchas/test_g09_container.py"
    run = run_step("Preflight (", base, STRICT_FLAG=strict, EXTRA_ARGS=extra)
    assert run.returncode == code, run.output[-3000:]
    assert "G9 WARN: " in run.output
    assert "⚠️ **G9 WARN**" in run.summary.read_text()


def test_the_soak_step_accepts_its_options_and_writes_its_reports():
    base = fresh_dir()
    extra = f"-p no:hypothesispytest --spark-replay={preflight().snapshot} " \
            "tests_gotchas/test_g09_container.py"
    run = run_step("Preflight and soak", base, MODE="soak", EXTRA_ARGS=extra)
    assert run.returncode == 0, run.output[-3000:]
    assert {"junit.xml", "report.json", "snapshot.json"} <= {p.name for p in run.reports.iterdir()}
    assert json.loads(run.report.read_text())["spark_gotchas"]["options"]["soak_duration"] == "20s"


@pytest.mark.parametrize("name", ["Install spark-gotchas", "Preflight (", "Preflight and soak"])
def test_the_gpu_devscript_runs_the_workflows_steps_verbatim(name):
    """devscripts/ci.sh shows on the GPU machine what the workflow runs; it must not drift."""
    script = (ROOT / "devscripts" / "ci.sh").read_text(encoding="utf-8")
    wanted = [line.strip() for line in step(name)["run"].strip().splitlines()]
    got = [line.strip() for line in script.splitlines()]
    starts = [i for i, line in enumerate(got) if line == wanted[0]]
    assert any(got[i:i + len(wanted)] == wanted for i in starts), f"devscripts/ci.sh lacks the step {name!r}"


FAKE_PYTHON = """#!/usr/bin/env bash
# python3 as the install step meets it: pip calls are logged (one argument a line, then '--'), a build
# of '.' leaves the suite's dist-info in the --target folder, a dry run writes the report the test
# chose, torch's version comes from a file, and the step's own Python scripts run for real.
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  printf '%s\\n' "${@:3}" -- >> "$STATE/pip.log"
  args=("$@")
  for i in "${!args[@]}"; do
    case "${args[$i]}" in
      --report) cp "$STATE/resolved.json" "${args[$((i + 1))]}" ;;
      --target) target="${args[$((i + 1))]}" ;;
    esac
  done
  if [ "${args[-1]}" = "." ]; then
    mkdir -p "$target/spark_gotchas-0.1.0.dist-info" && cp "$STATE/METADATA" "$target/spark_gotchas-0.1.0.dist-info/"
  fi
  exit 0
fi
if [ "$1" = "-c" ]; then v=$(head -n 1 "$STATE/torch"); sed -i 1d "$STATE/torch"; echo "$v"; exit 0; fi
if [ "$1" = "--version" ]; then echo "Python 3.12.3"; exit 0; fi
exec "$REAL_PYTHON" "$@"
"""
SUITE_METADATA = """Metadata-Version: 2.1
Name: spark-gotchas
Version: 0.1.0
Requires-Dist: pytest>=8
Requires-Dist: pytest-json-report>=1.5
Requires-Dist: nvidia-ml-py>=12
Requires-Dist: tomli>=2; python_version < "3.11"
Requires-Dist: hypothesis>=6.100; extra == "test"
"""


@dataclass
class InstallRun:
    result: subprocess.CompletedProcess
    pip_calls: list[list[str]]
    site: Path
    github_env: str


def _install_step(tmp_path: Path, resolved: list[tuple[str, str]], torch_versions: list[str],
                  **env: str) -> InstallRun:
    """The install step against a fake python3 whose pip resolves to ``resolved`` (name, version)."""
    state = tmp_path / "state"
    (state / "bin").mkdir(parents=True)
    fake = state / "bin" / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    (state / "torch").write_text("\n".join(torch_versions) + "\n")
    (state / "METADATA").write_text(SUITE_METADATA)
    report = {"version": "1", "install": [{"metadata": {"name": n, "version": v}} for n, v in resolved]}
    (state / "resolved.json").write_text(json.dumps(report))
    work, temp = tmp_path / "work", tmp_path / "runner-temp"
    work.mkdir()
    temp.mkdir()
    github_env = tmp_path / "github_env"
    github_env.touch()
    full_env = {"PATH": f"{state / 'bin'}:/usr/bin:/bin", "STATE": str(state), "REAL_PYTHON": sys.executable,
                "RUNNER_TEMP": str(temp), "GITHUB_ENV": str(github_env), **env}
    result = subprocess.run([*BASH, shell_text(step("Install spark-gotchas")["run"])], cwd=work,
                            env=full_env, capture_output=True, text=True, timeout=60)
    assert not [p.name for p in work.iterdir()], "the step wrote files where it ran (a shell redirect?)"
    log = (state / "pip.log").read_text() if (state / "pip.log").exists() else ""
    calls = [call.strip("\n").split("\n") for call in log.split("--\n") if call.strip("\n")]
    return InstallRun(result, calls, temp / "spark-gotchas-site", github_env.read_text())


def test_install_step_installs_the_suite_into_its_own_folder_then_only_what_is_missing(tmp_path):
    run = _install_step(tmp_path, [("pytest-json-report", "1.5.0"), ("pytest-metadata", "3.1.1")],
                        ["2.11.0 /venv/lib/python3.12/site-packages"] * 2)
    assert run.result.returncode == 0, run.result.stdout + run.result.stderr
    site = str(run.site)
    build, dry_run, missing = run.pip_calls
    assert build == ["install", "--no-deps", "--target", site, "."]
    # the suite's requirements, one argument each, extras left out, markers left for pip to judge
    assert dry_run == ["install", "--dry-run", "--quiet", "--report", str(tmp_path / "runner-temp" /
                       "spark-gotchas-resolved.json"), "pytest>=8", "pytest-json-report>=1.5", "nvidia-ml-py>=12",
                       'tomli>=2; python_version < "3.11"']
    assert missing == ["install", "--no-deps", "--target", site, "pytest-json-report==1.5.0", "pytest-metadata==3.1.1"]
    assert "installing for this job only what the environment lacks: pytest-json-report==1.5.0" in run.result.stdout
    assert run.github_env == f"PYTHONPATH={site}\n"


def test_install_step_with_nothing_missing_installs_only_the_suite(tmp_path):
    run = _install_step(tmp_path, [], ["2.11.0 /venv/lib"] * 2, PYTHONPATH="/opt/team-site")
    assert run.result.returncode == 0, run.result.stdout + run.result.stderr
    assert [call[:2] for call in run.pip_calls] == [["install", "--no-deps"], ["install", "--dry-run"]]
    assert run.github_env == f"PYTHONPATH={run.site}:/opt/team-site\n"  # the job's own folder first


def test_install_step_refuses_a_resolution_that_wants_torch(tmp_path):
    run = _install_step(tmp_path, [("nvidia-ml-py", "13.0"), ("torch", "2.9.1")], ["2.11.0 /venv/lib"] * 2)
    assert run.result.returncode == 1
    assert "::error::the suite's dependencies would pull in torch (nvidia-ml-py==13.0 torch==2.9.1)" \
        in run.result.stdout
    assert len(run.pip_calls) == 2 and run.github_env == ""  # nothing installed, nothing exported


def test_install_step_stops_the_job_when_torch_changed(tmp_path):
    run = _install_step(tmp_path, [], ["2.11.0 /venv/lib", "2.11.0 /tmp/spark-gotchas-site"])
    assert run.result.returncode == 1
    assert "::error::torch changed from 2.11.0 /venv/lib to 2.11.0 /tmp/spark-gotchas-site" in run.result.stdout
    assert run.github_env == ""


def test_the_nightly_diff_step_adds_the_comparison_to_the_summary(tmp_path):
    night = tmp_path / "night"
    (night / "previous" / "spark-gotchas-soak-7-1").mkdir(parents=True)
    (night / "reports").mkdir()
    (night / "previous" / "spark-gotchas-soak-7-1" / "snapshot.json").write_bytes(preflight().snapshot.read_bytes())
    (night / "reports" / "snapshot.json").write_bytes(replayed_as_gb10().read_bytes())
    run = run_step("Diff with the previous night", tmp_path, cwd=night, REPORTS="reports", PREVIOUS_RUN="7")
    assert run.returncode == 0, run.output  # a worse status warns; the G-lines already decide the job
    assert "::warning::a gotcha's status got worse since the previous night" in run.output
    summary = run.summary.read_text()
    assert summary.startswith("### Since the previous night (run 7)\n```text\nspark-gotchas diff\n")
    assert "WORSE" in summary and summary.rstrip().endswith("```")
    assert (night / "reports" / "diff-previous-night.txt").exists()


def test_the_nightly_diff_step_without_a_previous_snapshot(tmp_path):
    night = tmp_path / "night"
    night.mkdir()
    run = run_step("Diff with the previous night", tmp_path, cwd=night, REPORTS="reports", PREVIOUS_RUN="7")
    assert run.returncode == 0, run.output
    assert "previous night's run 7 left no snapshot to compare with" in run.output


# -- pinning ----------------------------------------------------------------------------------------
PINNED_USES = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)\s*$")


def test_every_action_is_pinned_to_a_commit_with_its_version_in_a_comment():
    """A tag can be moved to other code; a commit SHA cannot. The comment says which release it is."""
    lines = [line for line in WORKFLOW.read_text(encoding="utf-8").splitlines() if re.search(r"^\s*(-\s+)?uses:", line)]
    assert len(lines) == len([s for s in job()["steps"] if "uses" in s]) == 3
    pinned = {}
    for line in lines:
        match = PINNED_USES.match(line)
        assert match, f"not pinned to a full commit SHA with '# vX.Y.Z' after it: {line.strip()}"
        pinned[match.group(1)] = match.group(3)
    assert set(pinned) == {"actions/checkout", "actions/upload-artifact", "actions/download-artifact"}
    docs = DOCS.read_text(encoding="utf-8")
    for line in lines:  # docs/ci.md lists the same pins, to update them together
        action, sha = PINNED_USES.match(line).group(1, 2)
        assert f"`{action}`" in docs and sha in docs, f"docs/ci.md does not list {action}@{sha}"


def test_checkout_leaves_no_token_in_the_checkout():
    (checkout,) = [s for s in job()["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False


def test_the_container_image_is_the_one_the_settings_step_checks():
    assert job()["container"]["image"] == job()["env"]["SPARK_IMAGE"]
    line = next(x for x in WORKFLOW.read_text(encoding="utf-8").splitlines() if x.strip().startswith("image: ${{"))
    assert line.rstrip().endswith("# zizmor: ignore[unpinned-images]")  # justified by the warning below


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("image, warned", [
    ("nvcr.io/nvidia/pytorch:25.10-py3", True),
    ("nvcr.io/nvidia/pytorch", True),
    (f"nvcr.io/nvidia/pytorch:25.10-py3@{DIGEST}", False),
    (f"nvcr.io/nvidia/pytorch@{DIGEST}", False),
    (f"nvcr.io/nvidia/pytorch@{DIGEST[:-1]}", True),  # a digest one digit short is no digest
    ("", False),  # no container: the runner host
])
def test_an_image_without_a_digest_gets_a_warning(image, warned):
    run = run_step("Check the run's settings", fresh_dir(), SPARK_IMAGE=image)
    assert run.returncode == 0, run.output  # a warning, not a failure: the value is the repository's choice
    assert ("::warning::the container image" in run.output) is warned, run.output
    if warned:
        assert f"::warning::the container image {image} has no digest" in run.output
        assert "pin it as name@sha256:<digest>" in run.output


def test_a_hostile_image_reference_cannot_write_workflow_commands():
    run = run_step("Check the run's settings", fresh_dir(), SPARK_IMAGE="evil\n::error::forged%0A::add-mask::x")
    assert run.returncode == 0
    (line,) = [x for x in run.output.splitlines() if x.startswith("::")]
    assert line.startswith("::warning::the container image evil?::error::forged?0A::add-mask::x has no digest")


# -- the soak's length against the job's timeout ------------------------------------------------------
def _soak_timeout_minutes() -> int:
    match = re.fullmatch(r"\$\{\{ \(github\.event_name == 'schedule' \|\| inputs\.mode == 'soak'\) && (\d+) \|\| \d+ \}\}",
                         job()["timeout-minutes"])
    assert match, job()["timeout-minutes"]
    return int(match.group(1))


def test_the_soak_limit_leaves_room_in_the_job_for_everything_else():
    """timeout-minutes cannot be computed from a duration like '8h', so the limit is a number beside it:
    the soak's own pytest timeout (duration + 15 min) and half an hour for the rest must fit."""
    from spark_gotchas.plugin import SOAK_TIMEOUT_MARGIN_S

    limit = int(job()["env"]["SOAK_MAX_MINUTES"])
    assert (_soak_timeout_minutes(), limit) == (720, 660)  # the rule docs/ci.md states: 11 h of soak in 12 h
    assert limit + SOAK_TIMEOUT_MARGIN_S / 60 + 30 <= _soak_timeout_minutes()
    docs = DOCS.read_text(encoding="utf-8")
    assert "at most 11 h (660 minutes)" in docs and f"`SOAK_MAX_MINUTES: \"{limit}\"`" in docs


@pytest.mark.parametrize("duration, ok", [
    ("1h", True), ("8h", True), ("11h", True), ("660m", True), ("39600s", True), ("39600", True),
    ("1.5h", True), (" 20s ", True), ("8 h", True), ("10.99H", True), ("0.4d", True),
    ("11.01h", False), ("12h", False), ("661m", False), ("39601s", False), ("1d", False),
    ("999999999999999999999h", False),
])
def test_a_soak_longer_than_the_job_allows_is_refused_before_anything_runs(duration, ok):
    run = run_step("Check the run's settings", fresh_dir(), MODE="soak", SOAK_DURATION=duration, SPARK_IMAGE="")
    assert (run.returncode == 0) is ok, run.output
    if ok:
        assert "fits the job's limit of 660 minutes of soak" in run.output
    else:
        assert f"::error::soak_duration {duration} is longer than the soak job allows: at most 660 minutes (11h)" \
            in run.output
        assert "raise timeout-minutes and SOAK_MAX_MINUTES together" in run.output


@pytest.mark.parametrize("duration", ["banana", "-1h", "1w", "h", "1.h", "", "8h; rm -rf /", "1e3s"])
def test_a_soak_duration_that_is_no_duration_is_refused(duration):
    run = run_step("Check the run's settings", fresh_dir(), MODE="soak", SOAK_DURATION=duration, SPARK_IMAGE="")
    assert run.returncode == 1
    (line,) = [x for x in run.output.splitlines() if x.startswith("::")]
    assert line.startswith("::error::soak_duration '") and line.endswith("' is not a duration: write it as 20s, 30m, 8h or 1.5h")


def test_the_preflight_ignores_the_soak_duration():
    run = run_step("Check the run's settings", fresh_dir(), MODE="preflight", SOAK_DURATION="99h", SPARK_IMAGE="")
    assert run.returncode == 0 and "::" not in run.output, run.output


@pytest.mark.parametrize("duration", ["20s", "30m", "8h", "1.5h", "90", " 2h ", "8 h", "10.99H", "0.5d", "12h",
                                      "banana", "-1h", "1w", "1.h", "", "1e3s", ".5h"])
def test_the_settings_step_reads_a_duration_as_the_suite_does(duration):
    """The step refuses what --soak-duration would refuse, and measures the rest the same way."""
    from spark_gotchas.machine.options import parse_duration

    run = run_step("Check the run's settings", fresh_dir(), MODE="soak", SOAK_DURATION=duration, SPARK_IMAGE="")
    try:
        seconds = parse_duration(duration)
    except ValueError:
        assert "is not a duration" in run.output, run.output
        return
    assert "is not a duration" not in run.output
    assert (run.returncode == 0) is (seconds <= 660 * 60), run.output


# -- zizmor, the GitHub Actions linter --------------------------------------------------------------
def _zizmor() -> str:
    found = Path(sys.executable).with_name("zizmor")
    if not found.exists():
        found = shutil.which("zizmor")
    if not found:
        pytest.skip("zizmor is not installed (pip install 'zizmor>=1.33')")
    return str(found)


def test_zizmor_finds_nothing_in_the_workflow():
    """zizmor's default ('regular') persona, offline, every severity from low up: no finding, ignored
    ones aside (each ignore comment in the workflow says why). The 'auditor' persona also reports that
    the job runs on a self-hosted runner, which is the point of this workflow."""
    result = subprocess.run([_zizmor(), "--offline", "--no-config", "--min-severity=low", "--format=json",
                             str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    findings = json.loads(result.stdout or "[]")
    assert findings == [], json.dumps(findings, indent=1)[:4000]
    assert result.returncode == 0, result.stderr[-2000:]


def test_zizmor_would_catch_an_unpinned_action(tmp_path):
    """The check above can fail: a tag instead of the commit is a finding."""
    text = re.sub(r"actions/checkout@[0-9a-f]{40} # v[\d.]+", "actions/checkout@v4", WORKFLOW.read_text(encoding="utf-8"))
    path = tmp_path / "unpinned.yml"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([_zizmor(), "--offline", "--no-config", "--min-severity=low", "--format=json", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert [f["ident"] for f in json.loads(result.stdout)] == ["unpinned-uses"]
    assert result.returncode != 0


# -- the install step for real, against a venv like a runner's training venv ------------------------
def test_the_install_step_leaves_the_training_venv_as_it_was_and_pytest_finds_the_suite(tmp_path):
    """The workflow's install step, then its preflight and report check, in a real venv that holds the
    suite's dependencies but not the suite (offline: pip builds from a copy of this checkout with the
    venv's own setuptools). The venv's ``pip freeze`` and files are the same before and after; pytest
    finds the suite's plugin through the entry point in the job's folder on PYTHONPATH."""
    why = training_venv.can_build_offline()
    if why:
        pytest.skip(f"cannot build the suite offline here: {why}")
    venv = training_venv.make(tmp_path)
    checkout = training_venv.checkout_copy(tmp_path / "checkout")
    frozen, files = venv.freeze(), venv.files()
    assert "spark-gotchas" not in frozen and "pytest==" in frozen

    runner_temp, github_env = tmp_path / "runner-temp", tmp_path / "github_env"
    runner_temp.mkdir()
    github_env.touch()
    job_env = venv.env(RUNNER_TEMP=str(runner_temp), GITHUB_ENV=str(github_env))
    install = run_step("Install spark-gotchas", tmp_path, cwd=checkout, environ=job_env, PATH=job_env["PATH"])
    assert install.returncode == 0, install.output[-4000:]
    site = runner_temp / "spark-gotchas-site"
    assert "torch: none" in install.output and "installing for this job only" not in install.output  # all there
    assert github_env.read_text() == f"PYTHONPATH={site}\n"
    assert (site / "spark_gotchas" / "plugin.py").is_file()  # a copy, not a link back to the checkout
    assert venv.freeze() == frozen and venv.files() == files

    # the later steps see what $GITHUB_ENV says
    job_env["PYTHONPATH"] = str(site)
    outside = tmp_path / "elsewhere"  # no checkout, no conftest.py: only the entry point can load the plugin
    outside.mkdir()
    found = subprocess.run([str(venv.bin / "python3"), "-c", "import importlib.metadata as m, spark_gotchas; "
                            "print(spark_gotchas.__file__); print([e.value for e in m.entry_points(group='pytest11')])"],
                           cwd=outside, env=job_env, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0] == str(site / "spark_gotchas" / "__init__.py")
    assert "spark_gotchas.plugin" in found.stdout.splitlines()[1]
    helped = subprocess.run([str(venv.bin / "python3"), "-m", "pytest", "--help"], cwd=outside, env=job_env,
                            capture_output=True, text=True, timeout=120)
    assert "--spark-snapshot" in helped.stdout, helped.stdout[-2000:] + helped.stderr[-2000:]

    preflight_run = run_step("Preflight (", tmp_path, cwd=checkout, environ=job_env, PATH=job_env["PATH"])
    assert preflight_run.returncode in (0, 1), preflight_run.output[-4000:]
    assert re.search(r"^G9 (PASS|WARN|FAIL|INFO|SKIP): ", preflight_run.output, re.M), preflight_run.output[-3000:]
    check = run_step("Check that the report is whole", tmp_path, cwd=checkout, environ=job_env, PATH=job_env["PATH"])
    assert check.returncode == 0, check.output
    assert venv.freeze() == frozen and venv.files() == files  # pytest left nothing in the venv either
