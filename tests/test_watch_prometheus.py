"""``watch --prometheus-textfile``: node_exporter's textfile collector scrapes the run as it goes, and
its end. With the real node_exporter where it is installed (Debian's prometheus-node-exporter), else
with prometheus_client's own parser of the exposition format."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from test_watch import bare_env, job, watch_cmd  # noqa: F401  (job: the fixture)

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


def test_the_metrics_file_is_rewritten_as_the_job_runs_and_says_its_end(job, tmp_path):  # noqa: F811
    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    folder = tmp_path / "textfile"
    prom = folder / "watch.prom"
    exporter, url = None, ""
    if NODE_EXPORTER:
        port = _free_port()
        url = f"http://127.0.0.1:{port}/metrics"
        exporter = subprocess.Popen([NODE_EXPORTER, f"--collector.textfile.directory={folder}",
                                     f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                                     "--collector.textfile"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watch = subprocess.Popen(watch_cmd("--every", "0.2", "--out", "w", "--prometheus-textfile", str(prom),
                                       "--rate-regex", r"([0-9.]+) it/s", "--",
                                       sys.executable, "-u", str(job), "120", "0.05"),
                             env=bare_env(tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def scrape() -> str:
        if url:
            try:
                return urllib.request.urlopen(url, timeout=2).read().decode()
            except OSError:
                return ""
        return prom.read_text() if prom.exists() else ""

    try:
        running = ""
        deadline = time.time() + 30
        while time.time() < deadline and watch.poll() is None:
            text = scrape()
            if _series(text, "spark_gotchas_watch_running 1") and _series(text, "spark_gotchas_watch_rate "):
                running = text
                break
            time.sleep(0.2)
        assert running, "no scrape saw the run while it ran"
        families = {f.name: f for f in text_string_to_metric_families(running)}
        assert families["spark_gotchas_watch_rate"].samples[0].value > 5
        statuses = {(s.labels["gotcha"], s.labels["status"]): s.value for s in families["spark_gotchas_watch_status"].samples}
        assert statuses[("G3", "PASS")] == 1 and statuses[("G3", "FAIL")] == 0
        assert families["spark_gotchas_watch_memory_available_bytes"].samples[0].value > 0
        assert watch.wait(timeout=60) == 0
        ended = scrape() if not url else ""
        for _ in range(20):
            ended = scrape()
            if _series(ended, "spark_gotchas_watch_running 0"):
                break
            time.sleep(0.2)
        assert _series(ended, "spark_gotchas_watch_running 0") and _series(ended, "spark_gotchas_watch_job_exit_status 0")
        if url:
            assert _series(ended, "node_textfile_scrape_error 0")
    finally:
        if watch.poll() is None:
            watch.kill()
        if exporter is not None:
            exporter.terminate()
            exporter.wait(timeout=10)
