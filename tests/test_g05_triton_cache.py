"""G5's kernels built into Triton's cache by a process without torch: the same cache entries the
GPU worker's own compile looks for. Each side runs in a process of its own (blocking torch is
for a whole process); on a machine without Triton these skip."""

import ctypes.util
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_gotchas.microbench import bandwidth

ROOT = Path(__file__).resolve().parents[1]
needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")

# Torch-free: the hashes the build worker's compile gives, and whether torch was ever imported.
BUILD = """
import json, sys
from spark_gotchas.microbench import _stream_triton, _triton_cache, bandwidth
_triton_cache.block_torch()
n = bandwidth.FAST_ARRAY_BYTES // bandwidth.ELEMENT_BYTES
hashes = {}
for m in bandwidth.METHODS:
    args = _stream_triton.arguments(m, _triton_cache.mock_pointer(), n, bandwidth.SCALAR, bandwidth.FILL_VALUE)
    hashes[m] = _triton_cache.compile_kernel(_stream_triton.KERNELS[m], args,
        _stream_triton._options(m, bandwidth.DEFAULT_CONFIGS[m]), [9, 0]).hash
print(json.dumps({"hashes": hashes, "torch": sys.modules.get("torch") is not None}))
"""

# Triton's own JIT path, as the GPU worker's compile_ahead takes it (warmup with torch.float32),
# with a stand-in driver for the device the machine may not have.
JIT = """
import json
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from spark_gotchas.microbench import _stream_triton, bandwidth

class Device0:
    def get_current_device(self): return 0
    def get_current_stream(self, index=None): return 0
    def get_current_target(self): return GPUTarget("cuda", 90, 32)

driver.set_active(Device0())
n = bandwidth.FAST_ARRAY_BYTES // bandwidth.ELEMENT_BYTES
hashes = {}
for m in bandwidth.METHODS:
    args = _stream_triton.arguments(m, torch.float32, n, bandwidth.SCALAR, bandwidth.FILL_VALUE)
    kernel = _stream_triton.KERNELS[m].warmup(*args, grid=(1,),
        **_stream_triton._options(m, bandwidth.DEFAULT_CONFIGS[m]))
    hashes[m] = kernel.hash
print(json.dumps({"hashes": hashes}))
"""


def _run(code: str, cache: Path) -> dict:
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_triton
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the JIT path's side needs torch")
def test_kernels_built_without_torch_have_the_jit_paths_cache_keys(tmp_path):
    built = _run(BUILD, tmp_path / "cache")
    assert built["torch"] is False
    entries = sorted(p.name for p in (tmp_path / "cache").iterdir())
    jit = _run(JIT, tmp_path / "cache")
    assert jit["hashes"] == built["hashes"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == entries  # found, not compiled again


def test_the_build_refuses_a_process_that_already_has_torch(tmp_path):
    code = ("import json, sys; sys.modules['torch'] = type(sys)('torch')\n"
            "from spark_gotchas.microbench import bandwidth\nprint(json.dumps(bandwidth.fill_triton_cache([12, 1])))")
    out = _run(code, tmp_path / "cache")
    assert out["built"] == [] and "torch is already imported" in out["errors"]["setup"]


@needs_triton
@pytest.mark.skipif(ctypes.util.find_library("cuda") is None, reason="launchers link libcuda (a GPU machine)")
def test_a_second_build_finds_every_part_in_the_cache_and_loads_none(tmp_path):
    code = ("import json\nfrom spark_gotchas.microbench import bandwidth\n"
            "print(json.dumps(bandwidth.fill_triton_cache([9, 0])))")
    first, second = _run(code, tmp_path / "cache"), _run(code, tmp_path / "cache")
    parts = ["driver", *bandwidth.METHODS]
    assert first["errors"] == {} and sorted(first["built"]) == sorted(parts) and first["cached"] == []
    assert second["errors"] == {} and second["built"] == [] and sorted(second["cached"]) == sorted(parts)
