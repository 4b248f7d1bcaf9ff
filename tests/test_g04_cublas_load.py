"""The G4 spot check's torch-free load: its libraries, its data, and what it says without a GPU."""

import os
import struct

import pytest

from spark_gotchas.microbench import _cublas, soak_load
from spark_gotchas.runtime.worker import Worker


def decode(dtype, bits):
    if dtype == "bf16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    if dtype == "fp16":
        return struct.unpack("<e", struct.pack("<H", bits))[0]
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_random_values_are_finite_nonzero_and_both_signs(dtype):
    values = [decode(dtype, b) for b in _cublas.random_block(dtype, 4096)]
    assert all(0.5 <= abs(v) < 2.0 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)
    assert len(set(values)) > 200  # random mantissas (bf16 has 512 such values), not a constant


def test_cublas_is_looked_for_in_the_environments_nvidia_wheels_first(tmp_path, monkeypatch):
    wheel_lib = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    wheel_lib.mkdir(parents=True)
    for name in ("libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13"):
        (wheel_lib / name).write_bytes(b"")
    (tmp_path / "site" / "nvidia" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(_cublas.ctypes.util, "find_library", lambda name: "libcublas.so.12")
    found = _cublas.cublas_candidates()
    assert found[0] == str(wheel_lib / "libcublas.so.13")
    assert "libcublas.so.12" in found and not any("Lt" in os.path.basename(p) for p in found)


def test_without_a_driver_the_load_says_why(monkeypatch):
    def no_driver(*args, **kwargs):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(_cublas.ctypes, "CDLL", no_driver)
    with pytest.raises(_cublas.CublasUnavailable, match="libcuda.so.1 not loadable"):
        soak_load.run(1.0, backend="cublas")


def test_the_cublas_backend_runs_on_the_first_device_only():
    with pytest.raises(ValueError, match="cuda:0 only"):
        soak_load.open_gemm("cublas", "bf16", "cuda:1")


def test_in_a_worker_an_unusable_cublas_is_an_error_result_not_a_crash(monkeypatch):
    env = dict(os.environ, LD_LIBRARY_PATH="/nonexistent")  # on a GPU machine libcuda still loads
    worker = Worker(preload=(), env=env)
    try:
        result = worker.call("spark_gotchas.microbench.soak_load:run", {"seconds": 0.5, "backend": "cublas", "size": 256},
                             timeout=60)
    finally:
        worker.close()
    if result.ok:  # a machine with a GPU and cuBLAS: the load really ran
        assert result.value["backend"].startswith(("/", "libcublas")) and result.value["gemms"] > 0
    else:
        assert not result.crashed and result.error.startswith("CublasUnavailable: ")


def test_the_command_line_refuses_a_device_the_cublas_backend_does_not_offer(capsys, monkeypatch):
    monkeypatch.setattr(soak_load.signal, "signal", lambda *args: None)  # keep pytest's own Ctrl-C handler
    assert soak_load.main(["--backend", "cublas", "--device", "cpu", "--seconds", "1"]) == 2
    assert capsys.readouterr().err.strip() == "soak_load: the cublas backend runs on cuda:0 only, not cpu"
