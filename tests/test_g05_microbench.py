"""The bandwidth probe's parts without a GPU: do_bench-style timing on a fake clock, sizing,
byte accounting, output checks and the torch path on CPU tensors, the table and its JSON."""

import importlib.util
import json

import pytest
from bench_fakes import WallClock

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.microbench import bandwidth
from spark_gotchas.microbench._timing import Timing, bench, quantile, summarize
from spark_gotchas.microbench.bandwidth import GIB, MIB, BandwidthResult, MethodResult


# -- timing --------------------------------------------------------------------------------------
class FakeClock:
    """A GPU stream in miniature: events take the stream's time when recorded."""

    def __init__(self):
        self.now_ms = 0.0
        self.syncs: list[float] = []
        self.events = 0

    def event(self):
        clock = self

        class Event:
            def record(self):
                self.t = clock.now_ms

            def elapsed_time(self, other):
                return other.t - self.t

        self.events += 1
        return Event()

    def synchronize(self):
        self.syncs.append(self.now_ms)


def test_bench_excludes_the_first_call_and_turns_budgets_into_counts():
    clock = FakeClock()
    calls = []

    def fn():
        clock.now_ms += 500.0 if not calls else 1.0  # compilation, then 1 ms a call
        calls.append(clock.now_ms)

    t = bench(fn, warmup_ms=10, rep_ms=50, clock=clock)
    assert t.max_ms == pytest.approx(1.0)  # the 500 ms first call is not a repetition
    assert t.estimate_ms == pytest.approx(1.0) and t.warmup_reps == 10 and t.reps == 50
    assert len(calls) == 1 + 5 + 10 + 50
    assert len(clock.syncs) == 3  # after the first call, after the estimate, once at the very end
    assert clock.syncs[-1] == clock.now_ms


def test_bench_flushes_outside_the_event_pairs_and_keeps_min_reps():
    clock = FakeClock()
    flushes = []

    def flush():
        clock.now_ms += 7.0
        flushes.append(1)

    def fn():
        clock.now_ms += 40.0

    t = bench(fn, warmup_ms=1, rep_ms=10, min_reps=5, flush=flush, clock=clock)
    assert t.reps == 5 and t.median_ms == pytest.approx(40.0)  # the flush's 7 ms are not timed
    assert len(flushes) == 5 + 5  # estimate and repetitions; none during warm-up


def test_quantiles_match_torch():
    torch = pytest.importorskip("torch")
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3]
    t = summarize(values)
    want = torch.quantile(torch.tensor(values, dtype=torch.float64), torch.tensor([0.1, 0.2, 0.5, 0.8, 0.9],
                                                                                    dtype=torch.float64))
    assert [t.quantiles_ms[k] for k in ("0.1", "0.2", "0.5", "0.8", "0.9")] == pytest.approx(want.tolist())
    assert t.median_ms == pytest.approx(3.0) and t.min_ms == 1.0 and t.max_ms == 9.0
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_rates_use_the_median_or_the_best_repetition():
    t = Timing(median_ms=2.0, min_ms=1.0, max_ms=3.0)
    assert t.rate(4e9) == pytest.approx(2e12) and t.rate(4e9, at="min") == pytest.approx(4e12)


# -- sizing -------------------------------------------------------------------------------------
def test_fast_arrays_are_1_gib_or_16x_l2_within_a_quarter_of_free_memory():
    assert bandwidth.choose_array_bytes(60 * MIB, 140 * GIB) == (GIB, "1.00 GiB per array (17x the 60 MiB L2)")
    size, why = bandwidth.choose_array_bytes(128 * MIB, 140 * GIB)
    assert size == 2 * GIB and "16x" in why
    size, why = bandwidth.choose_array_bytes(24 * MIB, 2 * GIB)  # a Spark with little left
    assert size == 170 * MIB and why == "170 MiB per array (capped at 25% of 2.00 GiB free; 7x L2)"


def test_too_little_memory_is_an_error_naming_the_figures():
    with pytest.raises(ValueError, match=r"not enough free memory for a bandwidth probe: 512 MiB free"):
        bandwidth.choose_array_bytes(60 * MIB, 512 * MIB)


def test_unified_memory_takes_the_smaller_of_cuda_free_and_memavailable():
    # GB10: cudaMemGetInfo tracks MemFree; the kernel's MemAvailable can be lower under pressure
    assert bandwidth.available_bytes(101 * GIB, 60 * GIB, unified=True) == 60 * GIB
    assert bandwidth.available_bytes(40 * GIB, 115 * GIB, unified=True) == 40 * GIB
    assert bandwidth.available_bytes(140 * GIB, 10 * GIB, unified=False) == 140 * GIB


def test_sweep_sizes_span_the_cache_to_the_budget():
    sizes = bandwidth.sweep_sizes(24 * MIB, 100 * GIB)
    assert sizes[0] == 12 * MIB and sizes[-1] <= 100 * GIB * 0.25 / 3
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))


def test_byte_accounting_is_named():
    assert bandwidth.ARRAYS_COUNTED == {"read": 1, "write": 1, "copy": 2, "triad": 3}
    assert bandwidth.ACCOUNTING["copy"] == "1 array read + 1 written"
    assert "a = b + s*c" in bandwidth.ACCOUNTING["triad"]


# -- the torch path and the checks, on CPU tensors ------------------------------------------------
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def bufs(torch):
    return bandwidth._Buffers(torch, 1 << 16, device="cpu")


@pytest.mark.parametrize("op", [op for ops in bandwidth.TORCH_OPS.values() for op in ops])
def test_each_torch_op_passes_its_check_and_gets_a_figure(torch, bufs, op):
    r = bandwidth._torch_result(torch, op, bufs, warmup_ms=1, rep_ms=3, clock=WallClock())
    assert r.check == "ok" and r.error == ""
    assert r.gbps > 0 and r.gbps_best >= r.gbps
    assert r.bytes_per_call == bandwidth.ARRAYS_COUNTED[r.method] * (1 << 16) * 4


def test_a_wrong_output_is_named_and_gets_no_figure(torch, bufs):
    def broken_copy():
        bufs.a.copy_(bufs.b)
        bufs.a[12345] += 1

    r = bandwidth._measure(torch, "copy", "broken", broken_copy, bufs, None, 1, 3, clock=WallClock())
    assert r.gbps is None and not r.ok
    assert r.check.startswith("element 12345 is ")


def test_a_reduction_that_skips_a_tile_is_caught(torch, bufs):
    r = bandwidth._measure(torch, "read", "short", lambda: torch.sum(bufs.b[: bufs.n - 4096]), bufs,
                           bufs.b_sum, 1, 3, clock=WallClock())
    assert r.check.startswith("reduction gave") and r.gbps is None


def test_a_failing_kernel_is_an_error_not_a_crash(torch, bufs):
    def boom():
        raise RuntimeError("CUDA error: out of memory\nmore text")

    r = bandwidth._measure(torch, "write", "boom", boom, bufs, bandwidth.FILL_VALUE, 1, 3, clock=WallClock())
    assert r.error == "RuntimeError: CUDA error: out of memory" and r.gbps is None


def test_triad_check_is_exact(torch, bufs):
    torch.add(bufs.b, bufs.c, alpha=bandwidth.SCALAR, out=bufs.a)
    assert bandwidth.check(torch, "triad", bufs, None, None) == "ok"
    bufs.a[-1] = 0.5
    assert bandwidth.check(torch, "triad", bufs, None, None).startswith(f"element {bufs.n - 1} is 0.5")


def test_the_table_and_the_json_round_trip(torch, bufs):
    rows = [bandwidth._torch_result(torch, bandwidth.TORCH_OPS[m][0], bufs, 1, 3, clock=WallClock())
            for m in bandwidth.METHODS]
    res = BandwidthResult(device="cpu test", capability=(0, 0), sms=2, l2_bytes=8 * MIB, unified_memory=False,
                          array_bytes=bufs.n * 4, sizing="256 KiB as asked", mode="sized", methods=rows,
                          backend="torch (asked for)", seconds=0.1)
    back = from_jsonable(BandwidthResult, json.loads(json.dumps(to_jsonable(res))))
    assert back == res and isinstance(back.methods[0].timing, Timing)
    table = bandwidth.format_result(back)
    assert table.splitlines()[1].split()[:3] == ["method", "GB/s", "best"]
    assert [line.split()[0] for line in table.splitlines()[2:6]] == list(bandwidth.METHODS)
    assert "1 array read + 1 written" in table and "GB = 1e9 bytes" in table


def test_the_command_line_says_why_without_a_gpu(torch, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert bandwidth.main([]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_kernel_configs_are_labelled_for_tuning():
    assert bandwidth.DEFAULT_CONFIGS["read"].label == "triton BLOCK=4096 warps=4 1 tile/program streaming"
    assert bandwidth.KernelConfig(block=1024, streaming=True).label == "triton BLOCK=1024 warps=4 1 tile/program streaming"
    assert len({c.label for c in bandwidth.TUNE_GRID}) == len(bandwidth.TUNE_GRID)


INTERPRETED = """
import json, sys
import torch
from bench_fakes import WallClock
from spark_gotchas.microbench import bandwidth
config = bandwidth.KernelConfig(**json.loads(sys.argv[1]))
bufs = bandwidth._Buffers(torch, 10 * 1024 + 16, device="cpu")  # a partial last tile
print(json.dumps({m: (lambda r: r.check if r.check == "ok" else r.error or r.check)(
    bandwidth._triton_result(torch, m, config, bufs, sms=3, warmup_ms=0.1, rep_ms=0.1, clock=WallClock()))
    for m in bandwidth.METHODS}))
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed here")
@pytest.mark.parametrize("config", [{"block": 1024, "warps": 4}, {"block": 1024, "warps": 4, "streaming": True}])
def test_triton_kernels_in_the_interpreter(torch, config):
    """TRITON_INTERPRET=1 runs the kernels on CPU tensors: every method passes its exact check.
    In a process of its own: Triton reads the variable when it is first imported. (Triton 3.6's
    interpreter cannot run the persistent form, a ``tl.range`` over the program count: only the
    GPU does, in the tuning grid.)"""
    import os
    import subprocess
    import sys

    here = os.path.dirname(__file__)
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([here, os.path.dirname(here), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", INTERPRETED, json.dumps(config)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {m: "ok" for m in bandwidth.METHODS}


def test_the_whole_probe_on_cpu_tensors(torch, monkeypatch):
    """The probe end to end (sizing, backend choice, checks, references) with CPU tensors."""
    monkeypatch.setattr(bandwidth, "_device_facts", lambda torch, unified: {
        "device": "cpu stand-in", "capability": (0, 0), "sms": 2, "l2_bytes": 1 * MIB, "unified_memory": True,
        "available": 64 * MIB})
    res = bandwidth.probe("fast", None, "torch", True, bandwidth.METHODS, 1, 3, None, 0.25, None,
                          device="cpu", clock=WallClock())
    assert res.array_bytes == 5 * MIB and res.sizing == "5 MiB per array (capped at 25% of 64 MiB free; 5x L2)"
    assert [m.method for m in res.methods] == list(bandwidth.METHODS) and all(m.ok for m in res.methods)
    assert res.backend == "torch (asked for)" and all(m.role == "probe" for m in res.methods)
    assert {r.implementation for r in res.references} == {op for ops in bandwidth.TORCH_OPS.values() for op in ops}
    assert all(r.role == "reference" and r.ok for r in res.references)
    assert res.best_method() is not None and res.seconds >= res.setup_seconds > 0


def test_without_triton_auto_says_why_and_uses_torch(monkeypatch):
    monkeypatch.setattr(bandwidth, "_triton_version", lambda: (None, "ModuleNotFoundError: No module named 'triton'"))
    assert bandwidth._pick_backend("auto") == (False, "torch (Triton not usable: ModuleNotFoundError: No module "
                                                      "named 'triton')")
    with pytest.raises(RuntimeError, match="Triton asked for but not usable"):
        bandwidth._pick_backend("triton")


def test_a_failing_triton_kernel_falls_back_to_torch_and_says_so(torch, bufs, monkeypatch):
    def broken(torch, method, config, bufs, sms, warmup_ms, rep_ms, clock=None):
        return MethodResult(method, config.label, "", 0, 0, error="CompilationError: at 12:4")

    monkeypatch.setattr(bandwidth, "_triton_result", broken)
    r = bandwidth._preferred(torch, "copy", True, bufs, 2, 1, 3, bandwidth.DEFAULT_CONFIGS["copy"], WallClock())
    assert r.ok and r.implementation == "Tensor.copy_"
    assert r.fallback == f"{bandwidth.DEFAULT_CONFIGS['copy'].label} failed: CompilationError: at 12:4"


@pytest.fixture
def sweep_on_cpu(monkeypatch):
    """A 2 MiB L2 and 24 MiB free: the sweep's sizes are 1 and 2 MiB."""
    monkeypatch.setattr(bandwidth, "_device_facts", lambda torch, unified: {
        "device": "cpu stand-in", "capability": (0, 0), "sms": 2, "l2_bytes": 2 * MIB, "unified_memory": False,
        "available": 24 * MIB})


def test_the_sweep_on_cpu_tensors_reports_each_size(torch, sweep_on_cpu):
    progress = []
    res = bandwidth.sweep("torch", True, 1, 2, None, 60, progress=progress.append, device="cpu", clock=WallClock())
    assert res.sizes_bytes == [1 * MIB, 2 * MIB] and not res.stopped_early
    assert [p["array_bytes"] for p in progress] == res.sizes_bytes
    assert len(res.points) == 2 * 8 and sum(p.role == "reference" for p in res.points) == 8
    assert all(p.ok for p in res.points)


def test_the_sweep_stops_when_asked(torch, sweep_on_cpu):
    asked = iter([False, True])
    res = bandwidth.sweep("torch", False, 1, 2, None, 60, should_stop=lambda: next(asked), device="cpu",
                          clock=WallClock())
    assert res.sizes_bytes == [1 * MIB] and res.stopped_early


def test_a_reduction_that_writes_nothing_cannot_pass_on_stale_partials(torch, bufs):
    bufs.partials[:4] = torch.tensor([bufs.b_sum, 0.0, 0.0, 0.0])  # a previous run's answer, left behind

    def lazy_read():
        return bufs.partials[:4]

    r = bandwidth._measure(torch, "read", "lazy", lazy_read, bufs, bufs.b_sum, 1, 3, clock=WallClock())
    assert r.check.startswith("reduction gave nan") and r.gbps is None


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_the_cuda_kernels_pass_their_checks_and_agree_with_torch_on_a_gpu():
    res = bandwidth.probe("fast", size_mb=256, backend="cuda", references=True, rep_ms=20)
    assert res.backend.startswith("cuda driver ") and all(m.ok for m in res.methods), \
        [(m.method, m.error or m.check) for m in res.methods]
    best_torch = {m: max(r.gbps for r in res.references if r.method == m and r.ok) for m in bandwidth.METHODS}
    assert all(m.gbps > 0.5 * best_torch[m.method] for m in res.methods)  # the same quantity, not a speed bar
