"""Each microbenchmark's command line, run as a user runs it (``python -m spark_gotchas.microbench
NAME``, a process of its own): its help, one line and exit 2 where there is no torch to measure
with, JSON with ``--json``, and the small readers it uses alone agreeing with the suite's."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_gotchas.machine.readers.mem import fstype_of, read_meminfo_file
from spark_gotchas.microbench import safetensors_load

NAMES = ("attention", "bandwidth", "collective", "gemm", "safetensors_load", "soak_load")
# torch hidden as on a machine without it: ``import torch`` fails, importlib finds no spec
NO_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv[0] = 'microbench'; "
            "runpy.run_module('spark_gotchas.microbench', run_name='__main__')")
requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (CPU is enough)")


def microbench(*args: str, code: str | None = None, env: dict | None = None, cwd: Path | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "spark_gotchas.microbench", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def test_the_list_names_every_microbenchmark():
    done = microbench("--help")
    assert done.returncode == 0 and f"NAME is one of: {', '.join(NAMES)};" in done.stdout


@pytest.mark.parametrize("name", NAMES)
def test_each_says_how_it_is_called_and_offers_json(name):
    done = microbench(name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: spark-gotchas microbench {name} ") and "--json" in done.stdout


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_without_torch_each_says_so_in_one_line_and_exits_2(name, extra, tmp_path):
    done = microbench(name, *extra, code=NO_TORCH, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", "torch is not installed\n")
    assert list(tmp_path.iterdir()) == []  # collective wrote no rank file, safetensors_load no folder


def test_a_torch_that_does_not_import_is_one_line_naming_why(tmp_path):
    (tmp_path / "torch.py").write_text("raise OSError('libcudart.so.13: cannot open shared object file')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    done = microbench("bandwidth", "--json", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "torch does not import: OSError: libcudart.so.13: cannot open shared object file\n"


def test_a_duration_that_is_not_one_is_refused_by_name():
    done = microbench("soak_load", "--seconds", "soon")
    assert done.returncode == 2 and "argument --seconds: not a duration: 'soon'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_net_setup_that_is_not_a_function_is_refused_by_name(tmp_path):
    done = microbench("collective", "--net-setup", "no_such_module_here:describe", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].endswith(
        "--net-setup no_such_module_here:describe: ModuleNotFoundError: No module named 'no_such_module_here'")
    assert list(tmp_path.iterdir()) == []


@requires_torch
def test_the_soak_load_on_the_cpu_prints_its_summary_as_json():
    done = microbench("soak_load", "--device", "cpu", "--seconds", "1", "--window", "0.5", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["device"] == "cpu" and summary["backend"] == "torch" and summary["gemms"] > 0
    assert "windows" not in summary


@requires_torch
def test_the_load_probe_alone_measures_on_the_cpu_and_prints_json(tmp_path):
    pytest.importorskip("safetensors")
    done = microbench("safetensors_load", "--size-gb", "0.08", "--dir", str(tmp_path), "--device", "cpu", "--json")
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["ok"], result.get("reason")
    assert result["fstype"] == fstype_of(str(tmp_path)) and result["sample_count"] >= 2
    assert all(s["mem_free_bytes"] and s["cached_bytes"] is not None for s in result["samples"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", ["/", "/proc", "/dev/shm", "/sys/fs", None])
def test_alone_the_filesystem_is_named_as_the_suite_names_it(path, tmp_path):
    path = path or str(tmp_path)
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    assert safetensors_load.filesystem_type(path) == fstype_of(path)


def test_alone_memory_is_read_as_the_suite_reads_it(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:    2000 kB\n"
                       "Buffers:            5 kB\nCached:           300 kB\nSwapCached:        7 kB\n")
    suite = read_meminfo_file(str(meminfo))
    alone = safetensors_load.host_memory(str(meminfo))
    assert (alone.mem_free_bytes, alone.mem_available_bytes, alone.cached_bytes) == \
        (suite.mem_free_bytes, suite.mem_available_bytes, suite.cached_bytes) == (1000 * 1024, 2000 * 1024, 300 * 1024)


@requires_torch  # safetensors_load asks for torch first: without it, that is its one line
@pytest.mark.parametrize("entry", [["-m", "spark_gotchas.microbench"], ["-m", "spark_gotchas", "microbench"]])
def test_a_folder_it_cannot_use_is_one_line_and_exit_2_from_either_entry(tmp_path, entry):
    """``--dir`` under a file: the user's to mend, said in one line (was a traceback, exit 1)."""
    (tmp_path / "afile").write_text("")
    proc = subprocess.run([sys.executable, *entry, "safetensors_load", "--size-gb", "0.001", "--dir",
                           str(tmp_path / "afile" / "sub")], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("spark-gotchas microbench safetensors_load: Not a directory")
