"""G5's probe without torch (the head start's ``g5_probe``): the CUDA driver's kernels in the load
worker while torch imports, through torch in the GPU worker where that cannot run."""

from __future__ import annotations

import array
import struct
import subprocess
import sys
from pathlib import Path

import bench_fakes as fk
import pytest
from bench_fakes import torch_in_the_fake_worker  # noqa: F401  a fixture

from spark_gotchas.microbench import _stream_cuda, _stream_ptx, bandwidth
from spark_gotchas.runtime import headstart
from spark_gotchas.runtime.headstart import HeadStart
from spark_gotchas.runtime.worker import TaskResult

pytestmark = pytest.mark.usefixtures("torch_in_the_fake_worker")  # its GPU worker is a fake with torch

CUDA = "spark_gotchas.microbench.bandwidth:probe_cuda"
TORCH = "spark_gotchas.microbench.bandwidth:probe"
BUILD = "spark_gotchas.runtime.tasks:torch_build"


def provider(gpu, load, inventory=..., parts=frozenset({"g4_load", "g5_probe", "g7_rates"})):
    """An H200 run unless ``inventory`` says otherwise (None: NVML could not list the GPUs)."""
    return fk.provider_with_load(gpu, load, fk.h200_inventory() if inventory is ... else inventory, parts)


def workers(cuda_answer=None):
    gpu = fk.FakeWorker({BUILD: fk.torch_build_value(), TORCH: fk.h200_bandwidth()})
    cuda = fk.h200_bandwidth() if cuda_answer is None else cuda_answer
    return gpu, fk.FakeWorker({CUDA: cuda})


def test_an_h200_measures_its_bandwidth_in_the_load_worker_without_waiting_for_torch():
    gpu, load = workers()
    reading = provider(gpu, load).read("bench.bandwidth")
    assert load.calls == [CUDA] and gpu.calls == ["paused"]  # no GPU task meanwhile; torch.build not asked for
    assert load.args[CUDA] == {"mode": "fast", "unified_memory": None}
    assert reading.result.method("copy").gbps == fk.h200_bandwidth().method("copy").gbps and reading.backend_note == ""


def test_a_spark_sizes_its_arrays_from_unified_memory_in_the_load_worker_too():
    gpu, load = workers(fk.gb10_bandwidth())
    provider(gpu, load, inventory=fk.gb10_inventory()).read("bench.bandwidth")
    assert load.args[CUDA] == {"mode": "fast", "unified_memory": True}


def test_mixed_gpus_no_nvml_or_the_part_turned_off_measure_through_torch():
    mixed = fk.h200_inventory()
    mixed.devices = [*mixed.devices, *fk.gb10_inventory().devices]
    for inventory, parts in ((mixed, {"g5_probe"}), (None, {"g5_probe"}), (..., {"g4_load"})):
        gpu, load = workers()
        reading = provider(gpu, load, inventory=inventory, parts=frozenset(parts)).read("bench.bandwidth")
        assert load.calls == [] and TORCH in gpu.calls and reading.result is not None


def test_a_driver_that_refuses_the_kernels_falls_back_to_torch_and_says_why():
    why = "CudaUnavailable: cuModuleLoadDataEx failed: a PTX JIT compilation failed (218)"
    gpu, load = workers(TaskResult(ok=False, error=why))
    reading = provider(gpu, load).read("bench.bandwidth")
    assert load.calls == [CUDA] and TORCH in gpu.calls and reading.result is not None
    assert reading.backend_note == f"CUDA driver kernels without torch: {why}"


def test_a_crashed_or_hung_torch_free_probe_is_the_finding():
    for answer, said in ((TaskResult(ok=False, timed_out=True, seconds=120.0), "timed out after 120 s"),
                         (TaskResult(ok=False, crashed=True, signal="SIGSEGV"), "SIGSEGV")):
        gpu, load = workers(answer)
        reading = provider(gpu, load).read("bench.bandwidth")
        assert reading.crashed and said in reading.problem and gpu.calls == ["paused"]


def test_the_head_start_starts_the_probe_only_where_it_needs_no_torch():
    for inventory, early in ((..., True), (None, False)):
        gpu, load = workers()
        p = provider(gpu, load, inventory=inventory)
        h = HeadStart(p, lambda gpu=gpu: gpu)
        h.plan({5})
        h.begin()
        thread = p._prefetching.get("bench.bandwidth")
        if thread is not None:
            thread.join(10)
        assert (thread is not None) is early and (CUDA in load.calls) is early and TORCH not in gpu.calls


def test_g5_probe_is_a_part_that_can_be_turned_off():
    assert "g5_probe" in headstart.PARTS and "g5_probe" in headstart.TORCH_FREE
    assert not headstart.enabled("g5_probe", {headstart.ENV: "-g5_probe"})


# -- the probe itself, where there is no GPU ------------------------------------------------------
def test_without_a_driver_the_probe_says_so_and_never_imports_torch():
    code = ("import sys\nfrom spark_gotchas.microbench import bandwidth as b, _stream_cuda as s\n"
            "import ctypes\nreal = ctypes.CDLL\n"
            "def refuse(name, *a, **k):\n"
            "    if 'libcuda' in str(name): raise OSError(name + ': cannot open shared object file')\n"
            "    return real(name, *a, **k)\n"
            "ctypes.CDLL = refuse\n"
            "try:\n    b.probe_cuda()\nexcept s.CudaUnavailable as exc:\n    print('unavailable:', exc)\n"
            "print('torch imported:', 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == [
        "unavailable: libcuda.so.1 not loadable: libcuda.so.1: cannot open shared object file",
        "torch imported: False"], out.stderr


def test_asking_for_the_cuda_kernels_without_a_driver_is_an_error_auto_falls_back(monkeypatch):
    def refuse(vectors):
        raise _stream_cuda.CudaUnavailable("libcuda.so.1 not loadable")

    monkeypatch.setattr(_stream_cuda, "open_device", refuse)
    with pytest.raises(RuntimeError, match="CUDA driver's kernels asked for but not usable: libcuda.so.1"):
        bandwidth.probe(backend="cuda")


def entries(ptx: str) -> set[str]:
    return {line.split()[2].split("(")[0] for line in ptx.splitlines() if line.startswith(".visible .entry")}


@pytest.mark.parametrize("v", sorted(_stream_ptx.PTX))
def test_each_ptx_module_has_its_methods_and_loads_on_old_drivers(v):
    text = _stream_ptx.PTX[v]
    assert entries(text) == {f"stream_{m}_v{v}" for m in bandwidth.METHODS}
    assert ".version 7.0" in text.splitlines()[:3] and ".target sm_75" in text


def test_the_ptx_is_package_data_and_no_source_file_holds_it():
    """The kernels are data files (microbench/ptx/, built by devscripts/stream_ptx.py), read as they
    are: the module that serves them is a few lines of code people edit."""
    folder = Path(_stream_ptx.__file__).parent / "ptx"
    assert sorted(p.name for p in folder.glob("*.ptx")) == [f"stream_{n}.ptx" for n in ("helpers", "v1", "v2", "v4", "v8")]
    assert _stream_ptx.HELPERS == (folder / "stream_helpers.ptx").read_text()
    assert all(_stream_ptx.PTX[v] == (folder / f"stream_v{v}.ptx").read_text() for v in _stream_ptx.VS)
    assert len(Path(_stream_ptx.__file__).read_text().splitlines()) < 40


def test_the_helpers_are_one_module_of_their_own():
    assert entries(_stream_ptx.HELPERS) == {"stream_init", "stream_check", "stream_sum"}
    assert ".version 7.0" in _stream_ptx.HELPERS.splitlines()[:3]


def test_every_default_launch_shape_has_its_module():
    assert {c.vectors for c in bandwidth.CUDA_CONFIGS.values()} <= set(_stream_ptx.PTX)
    assert {c.vectors for c in bandwidth.CUDA_TUNE_GRID} <= set(_stream_ptx.PTX)
    assert bandwidth.CUDA_CONFIGS["read"].label == "cuda 128 threads x 8 float4, 1 tile/block"


def test_blocks_cover_every_float4_of_an_array():
    config = _stream_cuda.StreamConfig(threads=128, vectors=8)
    assert _stream_cuda.blocks_for(1 << 28, config) == (1 << 26) // 1024
    assert _stream_cuda.blocks_for(4 * 1025, _stream_cuda.StreamConfig(threads=1024, vectors=1)) == 2


def test_the_command_line_cuda_backend_needs_no_torch_and_says_why_it_cannot_run():
    code = ("import sys, ctypes\nreal = ctypes.CDLL\n"
            "def refuse(name, *a, **k):\n"
            "    if 'libcuda' in str(name): raise OSError(name + ': cannot open shared object file')\n"
            "    return real(name, *a, **k)\n"
            "ctypes.CDLL = refuse\n"
            "from spark_gotchas.microbench import bandwidth\n"
            "rc = bandwidth.main(['--backend', 'cuda'])\n"
            "print('rc', rc, 'torch imported:', 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["rc 1 torch imported: False"], out.stderr
    assert out.stderr.strip() == ("bandwidth: the CUDA driver's kernels asked for but not usable: libcuda.so.1 not "
                                  "loadable: libcuda.so.1: cannot open shared object file")


# -- the host side of the CUDA path, against a stand-in device that runs the kernels in Python ------
class StandInDriver:
    """The driver calls StreamArrays makes by name (cuMemsetD32_v2), on the stand-in's memory."""

    def __init__(self, dev):
        self.dev = dev

    def __call__(self, name, *args):
        assert name == "cuMemsetD32_v2", name
        address, bits, count = (a.value for a in args)
        self.dev.memory[address][:count] = array.array("f", struct.pack("<I", bits) * count)

    def check(self, name, rc):
        assert rc == 0


class StandInDevice(fk.WallClock):
    """StreamDevice's methods over Python arrays; ``skip`` names a kernel that leaves its output alone."""

    def __init__(self, skip: str = ""):
        self.memory: dict[int, array.array] = {}
        self.next, self.skip = 1 << 20, skip
        self.driver = StandInDriver(self)
        self.facts = {"sms": 2}

    def alloc(self, nbytes):
        address, self.next = self.next, self.next + (1 << 20) + nbytes
        self.memory[address] = array.array("f", bytes(nbytes))
        return address

    def free(self, address):
        self.memory.pop(address, None)

    def helper_blocks(self):
        return 1

    def to_host(self, address, out):
        base = max(a for a in self.memory if a <= address)
        offset = (address - base) // out.itemsize
        raw = self.memory[base].tobytes()[offset * out.itemsize:(offset + len(out)) * out.itemsize]
        out[:] = array.array(out.typecode, raw)
        return out

    def to_device(self, address, data):
        self.memory[address][:] = array.array("f", data.tobytes() + bytes(len(self.memory[address]) * 4 - len(data.tobytes())))

    def launcher(self, kernel, blocks, threads, *args):
        v = [a.value for a in args]
        mem = self.memory

        def run():
            if kernel.startswith(self.skip or "-"):
                return
            if kernel == "stream_init":
                a, b, c, n, _seed = v
                for i in range(n):
                    mem[a][i], mem[b][i], mem[c][i] = -1.0, float(i % 16), float((i * 7) % 16)
            elif kernel == "stream_sum":
                b, n, total = v
                mem[total][:2] = array.array("f", struct.pack("<Q", int(sum(mem[b][:n]))))
            elif kernel == "stream_check":
                a, b, c, n, mode, value, s, counters = v
                want = [value if mode == 0 else mem[b][i] if mode == 1 else mem[b][i] + s * mem[c][i] for i in range(n)]
                wrong = [i for i in range(n) if mem[a][i] != want[i]]
                mem[counters][:4] = array.array("f", struct.pack("<QQ", len(wrong), wrong[0] if wrong else 2**64 - 1))
            elif kernel.startswith("stream_read"):
                x, partial, n4 = v
                tile = 4 * threads * int(kernel.rsplit("_v", 1)[1])
                for block in range(blocks):
                    mem[partial][block] = sum(mem[x][block * tile:min((block + 1) * tile, 4 * n4)])
            elif kernel.startswith("stream_write"):
                a, value, n4 = v
                mem[a][:4 * n4] = array.array("f", [value] * (4 * n4))
            elif kernel.startswith("stream_copy"):
                b, a, n4 = v
                mem[a][:4 * n4] = mem[b][:4 * n4]
            elif kernel.startswith("stream_triad"):
                b, c, a, s, n4 = v
                mem[a][:4 * n4] = array.array("f", [mem[b][i] + s * mem[c][i] for i in range(4 * n4)])

        return run


@pytest.mark.parametrize("method", bandwidth.METHODS)
def test_each_method_is_checked_then_timed_and_counts_its_bytes(method):
    dev = StandInDevice()
    arrays = _stream_cuda.StreamArrays(dev, 4096)
    assert arrays.b_sum == sum(i % 16 for i in range(4096))
    r = bandwidth._cuda_measure(arrays, method, bandwidth.CUDA_CONFIGS[method], warmup_ms=1, rep_ms=2)
    assert r.check == "ok" and r.ok and r.error == ""
    assert r.bytes_per_call == bandwidth.ARRAYS_COUNTED[method] * 4096 * 4 and r.gbps > 0
    assert r.implementation == bandwidth.CUDA_CONFIGS[method].label


@pytest.mark.parametrize("method, said", [
    ("read", "reduction gave nan, expected 30720"),
    ("write", "element 0 is -1.0, expected 1.5"),
    ("copy", "element 0 is -1.0, expected 0.0"),
    ("triad", "element 0 is -1.0, expected 0.0"),
])
def test_a_kernel_that_skips_its_work_fails_its_check_and_is_not_timed(method, said):
    dev = StandInDevice(skip=f"stream_{method}_")
    arrays = _stream_cuda.StreamArrays(dev, 4096)
    r = bandwidth._cuda_measure(arrays, method, bandwidth.CUDA_CONFIGS[method], warmup_ms=1, rep_ms=2)
    assert r.check == said and r.gbps is None and r.timing is None and not r.ok
