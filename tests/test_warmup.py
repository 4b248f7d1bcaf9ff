"""The worker's warm-ups beside the torch import: best effort, and they say what they did."""

from spark_gotchas import warmup


def test_read_ahead_counts_the_libraries_it_advised(tmp_path):
    (tmp_path / "libcublas.so.13").write_bytes(b"\0" * 4096)
    (tmp_path / "libtorch_cuda.so").write_bytes(b"\0" * 1024)
    (tmp_path / "README.txt").write_text("not a library")
    results = {}
    warmup.page_cache(results, [str(tmp_path), str(tmp_path / "missing")])
    assert results["page_cache"]["bytes"] == 5120 and results["page_cache"]["seconds"] >= 0


def test_without_a_driver_the_cuda_context_says_why(monkeypatch):
    def no_driver(name):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(warmup.ctypes, "CDLL", no_driver)
    results = {}
    warmup.cuda_context(results)
    assert results["cuda_context"].startswith("not available: libcuda.so.1: cannot open shared object file")


def test_library_folders_are_found_without_importing_torch(tmp_path, monkeypatch):
    import sys

    (tmp_path / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (tmp_path / "nvidia" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = "torch" in sys.modules
    assert str(tmp_path / "nvidia" / "cu13" / "lib") in warmup.library_dirs()
    assert ("torch" in sys.modules) == before
