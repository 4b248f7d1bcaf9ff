"""The fast DT_NEEDED reader against pyelftools, on ELF files built here and on this machine's own."""

from __future__ import annotations

import subprocess

import elf_build as eb
import pytest
from elftools.elf.elffile import ELFFile

from spark_gotchas.machine import elf
from spark_gotchas.machine.readers import env as ex


def reference(path) -> list[str] | None:
    with open(path, "rb") as fh:
        return elf.needed_pyelftools(fh)


def soname(path) -> str | None:
    with open(path, "rb") as fh:
        dynamic = ELFFile(fh).get_section_by_name(".dynamic")
        return next((t.soname for t in dynamic.iter_tags("DT_SONAME")), None) if dynamic else None


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    eb.need_gcc()
    d = tmp_path_factory.mktemp("elf")
    cudart12 = eb.cuda_stub(d / "lib", 12)
    cublaslt13 = eb.cuda_stub(d / "lib", 13, "cublasLt")
    return {
        "cudart12": cudart12,
        "ext_cu12": eb.extension(d / "pkg", "_C", [cudart12]),
        "ext_mixed": eb.extension(d / "pkg", "_mixed", [cudart12, cublaslt13]),
        "plain": eb.plain_shared(d / "plain"),
        "nolibc": eb.plain_shared(d / "nolibc", "nolibc.so", nolibc=True),
        "static": eb.static_executable(d / "static"),
        "object": eb.object_file(d / "obj"),
    }


def test_the_stub_carries_the_cuda_12_soname(built):
    assert soname(built["cudart12"]) == "libcudart.so.12"


@pytest.mark.parametrize("name,expected", [
    ("ext_cu12", ["libcudart.so.12", "libc.so.6"]),
    ("ext_mixed", ["libcudart.so.12", "libcublasLt.so.13", "libc.so.6"]),
    ("plain", ["libc.so.6"]),
    ("nolibc", []),  # a shared object that needs nothing
    ("static", []),  # no dynamic segment at all
    ("object", []),  # a relocatable object has no program headers
])
def test_fast_reader_matches_pyelftools_on_built_files(built, name, expected):
    assert elf.needed(str(built[name])) == reference(built[name]) == expected


def test_not_elf_empty_missing_and_truncated(tmp_path, built):
    text = tmp_path / "notes.so"
    text.write_text("not an ELF file, only named like one\n")
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    assert elf.needed(str(text)) is None and reference(text) is None
    assert elf.needed(str(empty)) is None
    assert elf.needed(str(tmp_path / "missing.so")) is None
    whole = built["ext_cu12"].read_bytes()
    for size in (16, 64, 200, len(whole) // 2):
        cut = tmp_path / f"cut{size}.so"
        cut.write_bytes(whole[:size])
        assert elf.needed(str(cut)) in (None, [], ["libcudart.so.12", "libc.so.6"])  # never raises


def test_cuda_sonames_name_their_major():
    assert ex.cuda_majors(["libcudart.so.12", "libcublasLt.so.13", "libc.so.6", "libnvrtc.so.13",
                           "libcublas.so.12.8", "libcufft.so.11", "libcudnn.so.9", "libnccl.so.2",
                           "libcudart-9335f6a2.so.12", "libcudart.faf08d9a.so.13"]) == {
        "libcudart.so.12": 12, "libcublasLt.so.13": 13, "libnvrtc.so.13": 13, "libcublas.so.12.8": 12,
        "libcudart-9335f6a2.so.12": 12, "libcudart.faf08d9a.so.13": 13}  # vendored copies keep their major


def test_nvcc_shared_cudart_links_libcudart_13_and_static_links_none(tmp_path):
    if eb.NVCC is None:
        pytest.skip("nvcc is not installed")
    (tmp_path / "k.cu").write_text("__global__ void k(float *x) { x[threadIdx.x] += 1.0f; }\n"
                                   "extern \"C\" int launch(float *x) { k<<<1, 32>>>(x); return 0; }\n")
    out = {}
    for mode in ("shared", "static"):
        proc = subprocess.run([eb.NVCC, "-shared", "-Xcompiler", "-fPIC", "-cudart", mode, "-arch=sm_90",
                               "-o", f"k_{mode}.so", "k.cu"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        if proc.returncode:
            pytest.skip(f"nvcc could not build here: {proc.stderr.strip()[:200]}")
        out[mode] = tmp_path / f"k_{mode}.so"
        assert elf.needed(str(out[mode])) == reference(out[mode])
    major = int(subprocess.run([eb.NVCC, "--version"], capture_output=True, text=True).stdout
                .split("release ")[1].split(".")[0])
    assert ex.cuda_majors(elf.needed(str(out["shared"]))) == {f"libcudart.so.{major}": major}
    assert ex.cuda_majors(elf.needed(str(out["static"]))) == {}  # static cudart: no finding


def test_both_readers_agree_on_every_shared_object_of_this_machine():
    files = [f for d in ex.site_dirs() for f in ex.find_shared_objects(d)]
    assert files, "no shared object in site-packages?"
    disagree = [(f, elf.needed(f), reference(f)) for f in files if elf.needed(f) != reference(f)]
    assert not disagree, disagree[:5]
