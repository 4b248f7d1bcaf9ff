"""The metrics file (``--spark-prometheus PATH``) against the real thing: Debian's
prometheus-node-exporter serving it from its textfile directory on loopback, scraped and read
back; ``promtool check metrics`` on it; the alerting rules of docs/prometheus tested with
``promtool test rules`` on the series a replay with a FAIL wrote. Tests that need those binaries
skip where they are absent (a CI box without the Debian packages)."""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml
from door_runs import H200, REPO, VLLM, h200_doors, replay, vllm_doors  # noqa: F401  the h200 and vllm fixtures
from fs_limits import locked, small_disk
from prometheus_client.parser import text_string_to_metric_families

from spark_gotchas.knowledge.verdict import Status, Verdict
from spark_gotchas.outputs import prometheus

RULES = REPO / "docs" / "prometheus" / "spark-gotchas.rules.yml"
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian: apt-get install prometheus)")
needs_node_exporter = pytest.mark.skipif(NODE_EXPORTER is None,
                                         reason="needs node_exporter (Debian: apt-get install prometheus-node-exporter)")


def series(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(name, sorted labels): value} of an exposition text."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def status_of(found: dict, gotcha: str) -> str:
    """The status whose series is 1 for ``gotcha``; exactly one of the five must be."""
    values = {dict(labels)["status"]: v for (name, labels), v in found.items()
              if name == "spark_gotchas_status" and dict(labels).get("gotcha") == gotcha}
    assert sorted(values) == sorted(s.value for s in Status), values
    (one,) = [s for s, v in values.items() if v == 1]
    assert sorted(values.values()) == [0, 0, 0, 0, 1]
    return one


def test_one_series_per_status_value_and_the_line_s_status_is_1(h200):
    found = series(h200.metrics.read_text())
    assert {g: status_of(found, g) for g in h200.statuses} == h200.statuses
    assert "Prometheus metrics written to " + str(h200.metrics) in h200.stdout


def test_key_readings_in_base_units_from_the_verdicts(h200):
    found = series(h200.metrics.read_text())

    def value(name, **labels):
        return found[(f"spark_gotchas_{name}", tuple(sorted(labels.items())))]

    assert value("bandwidth_bytes_per_second", gotcha="G5", check="bandwidth", method="read") == 4613.9e9
    assert value("bandwidth_floor_bytes_per_second", gotcha="G5", check="bandwidth", method="read") == 4264e9
    assert value("sm_clock_under_load_hertz", gotcha="G4", check="clocks under load") == 1515e6
    assert value("gpu_temperature_celsius", gotcha="G4", check="clocks under load") == 60.0
    assert value("gemm_flop_per_second", gotcha="G7", check="NVFP4 rate", precision="fp8") == pytest.approx(1257.9e12)
    assert value("memory_free_bytes", gotcha="G3", check="GPU memory view", source="cuda") == 149345665024
    assert value("run_timestamp_seconds") == 1796233722.0  # the snapshot's run, 2026-12-02T17:48:42+00:00
    info = dict(next(labels for (name, labels) in found if name == "spark_gotchas_info"))
    assert info == {"version": info["version"], "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130",
                    "torch_cuda": "13.0", "profile": "h200", "gpu": "NVIDIA H200", "mode": "replay"}


@needs_promtool
def test_promtool_checks_the_file(h200, vllm):
    for run in (h200, vllm):
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=run.metrics.read_text(), capture_output=True,
                               text=True, timeout=60)
        assert check.returncode == 0 and check.stdout + check.stderr == "", check.stdout + check.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def node_exporter(tmp_path):
    """node_exporter on loopback with only its textfile collector, reading ``tmp_path/textfile``."""
    folder = tmp_path / "textfile"
    folder.mkdir()
    port = free_port()
    proc = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.textfile", f"--collector.textfile.directory={folder}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"node_exporter did not serve {url}: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
    yield folder, url
    proc.terminate()
    proc.wait(timeout=10)


def scrape(url: str) -> dict:
    return series(urllib.request.urlopen(url, timeout=5).read().decode())


@needs_node_exporter
def test_node_exporter_serves_the_file_and_the_series_read_back(node_exporter, tmp_path):
    folder, url = node_exporter
    run = replay(VLLM, tmp_path, f"--spark-prometheus={folder / 'spark_gotchas.prom'}", junit=False)
    found = scrape(url)
    assert found[("node_textfile_scrape_error", ())] == 0
    assert {g: status_of(found, g) for g in run.statuses} == run.statuses
    assert run.statuses["G6"] == "FAIL" and run.statuses["G5"] == "WARN"
    read = found[("spark_gotchas_bandwidth_bytes_per_second",
                  (("check", "bandwidth"), ("gotcha", "G5"), ("method", "read")))]
    assert read == 186e9  # "G5 WARN: read 186 GB/s, below GB10's 231-253"
    assert sorted(p.name for p in folder.iterdir()) == ["spark_gotchas.prom"]  # no temporary file for it to read


@needs_promtool
def test_the_alerting_rules_fire_on_a_real_replay_s_series(vllm, tmp_path):
    """A FAIL held for 10 minutes fires SparkGotchaFail (not at 9), a bandwidth under the floor fires
    SparkBandwidthBelowFloor: the series are the replay's, as node_exporter serves them."""
    found = series(vllm.metrics.read_text())
    base = {"instance": "spark-01:9100", "job": "node"}
    inputs = []
    for (name, labels), value in found.items():
        if name.startswith("spark_gotchas_") and name != "spark_gotchas_run_timestamp_seconds":
            body = ",".join(f'{k}="{v}"' for k, v in sorted({**dict(labels), **base}.items()))
            inputs.append({"series": f"{name}{{{body}}}", "values": f"{value:g}x20"})
    stale = {"instance": "spark-02:9100", "job": "node"}  # promtool's clock starts at 0: 30 hours before it
    inputs += [{"series": f'spark_gotchas_run_timestamp_seconds{{instance="{base["instance"]}",job="node"}}',
                "values": "0x20"},
               {"series": f'spark_gotchas_run_timestamp_seconds{{instance="{stale["instance"]}",job="node"}}',
                "values": f"{-30 * 3600}x20"}]
    fails = sorted(g for g, s in vllm.statuses.items() if s == "FAIL")
    assert fails == ["G3", "G6"]
    # G5 WARN: read 186 GB/s, below GB10's 231-253 (detail: copy 160, read 186, write 168, triad 160 GB/s)
    under = {"copy": "159.6", "read": "186", "write": "168", "triad": "159.6"}
    fail_alerts = [{"exp_labels": {"severity": "critical", "gotcha": g, "status": "FAIL", **base},
                    "exp_annotations": {"summary": f"{g} FAIL on spark-01:9100",
                                        "description": f"spark-gotchas has reported {g} FAIL on spark-01:9100 for 10 "
                                                       "minutes: run spark-gotchas -m fast there and follow the fix "
                                                       "under the line"}} for g in fails]
    floor_alerts = [{"exp_labels": {"severity": "warning", "gotcha": "G5", "check": "bandwidth", "method": m, **base},
                     "exp_annotations": {"summary": f"{m} bandwidth below the profile's floor on spark-01:9100",
                                         "description": f"{m} bandwidth {gbs}GB/s is below the low end of the profile's "
                                                        "measured range (G5 warns under 0.9 of it, fails under 0.75)"}}
                    for m, gbs in under.items()]
    stale_alert = {"exp_labels": {"severity": "warning", **stale},
                   "exp_annotations": {"summary": "no spark-gotchas run on spark-02:9100 for more than 26 hours",
                                       "description": "the metrics file holds readings from 1d 6h 1m 0s ago: the "
                                                      "nightly preflight did not run or could not write it"}}
    test = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": [
                {"eval_time": "9m", "alertname": "SparkGotchaFail", "exp_alerts": []},  # FAIL for 9 minutes: pending
                {"eval_time": "10m", "alertname": "SparkGotchaFail", "exp_alerts": fail_alerts},
                {"eval_time": "1m", "alertname": "SparkBandwidthBelowFloor", "exp_alerts": floor_alerts},
                {"eval_time": "1m", "alertname": "SparkGotchasStale", "exp_alerts": [stale_alert]}]}]}
    path = tmp_path / "rules_test.yml"
    path.write_text(yaml.safe_dump(test))
    check = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout


@needs_promtool
def test_the_rules_file_is_valid():
    check = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 3 rules found" in check.stdout, check.stdout + check.stderr


# -- wrong inputs --------------------------------------------------------------------------


def test_a_path_that_is_a_directory_is_one_line_and_exit_1(tmp_path):
    folder = tmp_path / "metrics.prom"
    folder.mkdir()
    run = replay(H200, tmp_path, f"--spark-prometheus={folder}", junit=False, metrics=False)
    assert run.returncode == 1
    (line,) = [line for line in run.stdout.splitlines() if "Prometheus metrics" in line]
    assert line == (f"could not write the Prometheus metrics {folder}: Is a directory "
                    "(the run fails: an output it was asked for is missing)")
    assert folder.is_dir() and not list(folder.iterdir())


@pytest.fixture
def unwritable_folder(tmp_path):
    """A folder holding last run's metrics that this process cannot create files in."""
    folder = tmp_path / "textfile"
    folder.mkdir()
    (folder / "spark.prom").write_text("spark_gotchas_status 1\n")
    with locked(folder):
        yield folder


def test_an_unwritable_folder_is_one_line_and_exit_1_and_the_old_file_stays(unwritable_folder, tmp_path):
    path = unwritable_folder / "spark.prom"
    run = replay(H200, tmp_path, f"--spark-prometheus={path}", junit=False, metrics=False)
    assert run.returncode == 1
    (line,) = [line for line in run.stdout.splitlines() if "Prometheus metrics" in line]
    assert line.startswith(f"could not write the Prometheus metrics {path}: ")
    assert f"(cannot create a file in {unwritable_folder})" in line
    assert path.read_text() == "spark_gotchas_status 1\n"
    assert sorted(p.name for p in unwritable_folder.iterdir()) == ["spark.prom"]


def test_a_full_disk_keeps_the_old_file(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        (disk / "spark.prom").write_text("spark_gotchas_status 1\n")
        (disk / "filler").write_bytes(b"x" * (56 << 10))
        run = replay(H200, tmp_path, f"--spark-prometheus={disk / 'spark.prom'}", junit=False, metrics=False)
        old = (disk / "spark.prom").read_text()
        names = sorted(p.name for p in disk.iterdir())
    assert run.returncode == 1
    (line,) = [line for line in run.stdout.splitlines() if "Prometheus metrics" in line]
    assert line.startswith(f"could not write the Prometheus metrics {disk / 'spark.prom'}: No space left on device")
    assert old == "spark_gotchas_status 1\n" and names == ["filler", "spark.prom"]


def test_without_prometheus_client_the_option_is_refused_before_any_check(pytester, monkeypatch):
    import spark_gotchas.plugin

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr(prometheus, "REQUIREMENT", "prometheus_client_not_installed_here")
    pytester.makepyfile(test_g01_x="def test_g1_x(spark):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--spark-prometheus={pytester.path / 'm.prom'}",
                                plugins=[spark_gotchas.plugin])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == f"ERROR: spark-gotchas: {prometheus.MISSING}"
    assert not (pytester.path / "m.prom").exists()


# -- the rendering itself ------------------------------------------------------------------


def test_only_finite_numbers_become_samples_and_hostile_labels_stay_inside_their_quotes():
    hostile = 'read"} 1\nfake_metric{a="b"} 7\x1b[2J\\'
    verdict = Verdict(5, Status.PASS, "read 4614 GB/s", check="bandwidth",
                      readings={"gbps": {hostile: 4614.0, "copy": float("nan"), "write": "4646", "triad": True,
                                         "big": 10 ** 400, "neg": -1.0}})
    text = prometheus.render([verdict], {"gpu": "GPU\n# TYPE x counter"}, {"driver": None}, None, "live")
    found = series(text)
    assert not [name for name, _ in found if name.startswith("fake_metric")]
    bandwidth = {dict(labels)["method"]: v for (name, labels), v in found.items()
                 if name == "spark_gotchas_bandwidth_bytes_per_second"}
    assert bandwidth == {'read"} 1\\x0afake_metric{a="b"} 7\\x1b[2J\\': 4614e9, "neg": -1e9}
    info = dict(next(labels for (name, labels) in found if name == "spark_gotchas_info"))
    assert info["gpu"] == "GPU\\x0a# TYPE x counter" and info["driver"] == ""
    assert not [line for line in text.splitlines() if line.startswith("# TYPE x")]
    assert all(math.isfinite(v) for v in found.values())


def test_run_epoch_reads_a_snapshot_s_time_with_its_zone_only():
    assert prometheus.run_epoch("2026-12-02T17:48:42+00:00") == 1796233722.0
    assert prometheus.run_epoch("2026-12-02T17:48:42") is None  # no zone: not a point in time
    # a replayed snapshot is a file: a year 1 or 9999 is not the time of a run
    assert prometheus.run_epoch("0001-01-01T00:00:00+00:00") is None
    assert prometheus.run_epoch("9999-12-31T23:59:59+00:00") is None
    assert prometheus.run_epoch("yesterday") is None and prometheus.run_epoch(None) is None


def test_every_figure_of_a_metric_has_the_same_label_names():
    names: dict[str, set] = {}
    for fig in prometheus.FIGURES:
        labels = ("gotcha", "check", *(k for k, _ in fig.labels), *(k for k, _ in fig.label_from),
                  *((fig.by,) if fig.by else ()))
        names.setdefault(fig.metric, set()).add(labels)
        assert fig.metric in prometheus.HELP
    assert all(len(sets) == 1 for sets in names.values()), names



def test_folders_on_the_way_are_made_and_one_under_a_file_is_one_line(tmp_path):
    made = tmp_path / "new" / "textfile" / "spark.prom"
    run = replay(H200, tmp_path, f"--spark-prometheus={made}", junit=False, metrics=False)
    assert run.returncode == 0 and series(made.read_text())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    run = replay(H200, tmp_path, f"--spark-prometheus={blocker / 'textfile' / 'spark.prom'}", junit=False,
                 metrics=False)
    assert run.returncode == 1
    (line,) = [line for line in run.stdout.splitlines() if "Prometheus metrics" in line]
    assert line == (f"could not write the Prometheus metrics {blocker}/textfile/spark.prom: Not a directory (cannot "
                    f"create the folder {blocker}/textfile) (the run fails: an output it was asked for is missing)")


def test_docs_show_each_rule_of_the_rules_file():
    doc = (REPO / "docs" / "operations.md").read_text()
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == ["SparkGotchaFail", "SparkBandwidthBelowFloor", "SparkGotchasStale"]
    for rule in rules:
        assert f"- alert: {rule['alert']}\n" in doc and f"expr: {rule['expr']}\n" in doc, rule["alert"]
    assert "for: 10m" in doc and rules[0]["for"] == "10m"


def test_an_interrupted_run_leaves_the_last_whole_run_s_file(pytester, monkeypatch):
    """A run stopped early (Ctrl-C, a soak that ended the run) judged only some gotchas: written,
    the series of the others would vanish and their alerts resolve. It says so in a line instead."""
    import spark_gotchas.plugin

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    path = pytester.path / "spark.prom"
    path.write_text("spark_gotchas_status 1\n")
    pytester.makepyfile(test_g01_x="import pytest\nfrom spark_gotchas.knowledge.verdict import Verdict\n@pytest.mark.fast\n"
                                   "def test_g1_x(spark):\n    spark.stop_run('stopped')\n"
                                   "    spark.report(Verdict(1, 'PASS', 'judged before the stop'))\n",
                        test_g02_x="import pytest\n@pytest.mark.fast\ndef test_g2_x(spark):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--spark-prometheus={path}", plugins=[spark_gotchas.plugin])
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([prometheus.INTERRUPTED.format(path=path)])
    assert path.read_text() == "spark_gotchas_status 1\n"
