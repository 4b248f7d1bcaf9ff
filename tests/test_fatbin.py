"""The fatbin walker on real fatbins: nvcc 13.0 builds (tests/fixtures/fatbin), fresh nvcc
builds when nvcc is on PATH, and the installed torch wheel's own libraries."""

import importlib.metadata as md
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from spark_gotchas.knowledge.readings.env import FLAG_ARCH_SPECIFIC, FLAG_FAMILY, entry_from_target
from spark_gotchas.machine import fatbin
from spark_gotchas.machine.readers.env import scan_distribution

# file -> the targets its -gencode flags asked for (tests/fixtures/fatbin/build.sh)
BUILT = {
    "plain_sm120_sm121_ptx121.so": {"sm_120": 1, "sm_121": 1, "compute_121": 1},
    "sm121a_ptx121a.so": {"sm_121a": 1, "compute_121a": 1},
    "sm120f.so": {"sm_120f": 1},
    "sm120a_sm90.so": {"sm_120a": 1, "sm_90": 1},
    "compressed_sm121a_sm120.so": {"sm_121a": 1, "sm_120": 1},
    "mixed_sm120_sm121_sm121a_ptx121.o": {"sm_120": 1, "sm_121": 1, "sm_121a": 1, "compute_121": 1},
}


@pytest.fixture
def fb() -> Path:
    return Path(__file__).parent / "fixtures" / "fatbin"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_every_gencode_target_is_named_with_its_variant(fb, name):
    found = fatbin.read_file(str(fb / name))
    assert found.error is None and found.has_fatbin
    assert found.counts() == BUILT[name]


def test_flags_tell_arch_specific_and_family_apart_where_e_flags_cannot(fb):
    entries = {e.target: e for e in fatbin.read_file(str(fb / "mixed_sm120_sm121_sm121a_ptx121.o")).entries}
    assert entries["sm_121a"].sm == entries["sm_121"].sm == 121
    assert entries["sm_121a"].flags & FLAG_ARCH_SPECIFIC and not entries["sm_121"].flags & 0x300000
    assert entries["compute_121"].kind == "ptx" and entries["sm_121"].kind == "cubin"
    family = fatbin.read_file(str(fb / "sm120f.so")).entries[0]
    assert family.flags & FLAG_FAMILY and family.suffix == "f"


def test_compressed_entries_are_walked_by_their_headers(fb):
    entries = fatbin.read_file(str(fb / "compressed_sm121a_sm120.so")).entries
    assert all(e.compressed for e in entries)
    assert [e.target for e in entries] == ["sm_121a", "sm_120"]


def test_a_raw_fatbin_file_parses_from_bytes(fb):
    entries = fatbin.parse((fb / "sm121a_sm120f.fatbin").read_bytes())
    assert [e.target for e in entries] == ["sm_121a", "sm_120f"]


def test_a_standalone_cubin_names_its_target_from_the_ptxas_note(fb):
    found = fatbin.read_file(str(fb / "standalone_sm121a.cubin"))
    assert not found.has_fatbin and found.counts() == {"sm_121a": 1}


def test_a_cubin_without_the_note_falls_back_to_e_flags():
    class Elf:
        def get_section_by_name(self, name):
            return None

        def __getitem__(self, key):
            return 0x6007902  # what nvcc 13.0 writes for sm_121 and sm_121a alike

    entry = fatbin.cubin_target(Elf())
    assert entry.target == "sm_121"  # the variant is unknowable from e_flags


@pytest.mark.parametrize("damage,message", [
    (lambda d: d[:40], "past the end"),
    (lambda d: d[:10], "stray bytes"),
    (lambda d: b"\x00\x00\x00\x01" + d[4:], "bad magic"),
    (lambda d: d[:16] + struct.pack("<HHIQ", 2, 0x101, 8, 1 << 40) + d[32:], "bad size"),
])
def test_damaged_fatbins_raise_one_clear_error(fb, damage, message):
    data = (fb / "sm121a_sm120f.fatbin").read_bytes()
    with pytest.raises(fatbin.FatbinError, match=message):
        fatbin.parse(damage(data))


def test_unreadable_files_become_errors_not_tracebacks(tmp_path, fb):
    (tmp_path / "empty.so").write_bytes(b"")
    (tmp_path / "text.so").write_text("INPUT(-lc)\n")  # a linker script named .so
    (tmp_path / "cut.so").write_bytes((fb / "sm120f.so").read_bytes()[:300])
    assert fatbin.read_file(str(tmp_path / "empty.so")).error == "not an ELF file"
    assert fatbin.read_file(str(tmp_path / "text.so")).error == "not an ELF file"
    assert fatbin.read_file(str(tmp_path / "cut.so")).error
    assert fatbin.read_file(str(tmp_path / "missing.so")).error.startswith("FileNotFoundError")


def test_a_shared_object_without_kernels_has_no_fatbin(tmp_path):
    # this interpreter's own binary (PATH's python3 may be a pyenv shell shim, not an ELF file)
    found = fatbin.read_file(os.path.realpath(sys.executable))
    assert found.error is None and not found.has_fatbin and found.entries == []


@pytest.mark.parametrize("target", ["sm_121a", "sm_120f", "sm_90", "compute_121a", "compute_120"])
def test_target_names_round_trip(target):
    assert entry_from_target(target).target == target


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH: the committed nvcc 13.0 builds are used")
def test_a_fresh_nvcc_build_matches_its_gencode_flags(tmp_path, fb):
    out = tmp_path / "fresh.o"
    subprocess.run(["nvcc", "-c", "-o", str(out), str(fb / "kernel.cu"),
                    "-gencode", "arch=compute_121a,code=sm_121a", "-gencode", "arch=compute_121,code=sm_121",
                    "-gencode", "arch=compute_120f,code=compute_120f"], check=True, capture_output=True, timeout=120)
    assert fatbin.read_file(str(out)).counts() == {"sm_121a": 1, "sm_121": 1, "compute_120f": 1}


def test_the_installed_torch_wheel(tmp_path):
    """A CPU wheel has shared objects but no GPU kernels; a CUDA wheel's cover its arch list."""
    try:
        dist = md.distribution("torch")
    except md.PackageNotFoundError:
        pytest.skip("torch is not installed")
    version_py = next(f for f in dist.files if str(f).replace("\\", "/") == "torch/version.py")
    cpu_build = re.search(r"^cuda(: Optional\[str\])? = None", version_py.read_text(), re.M) is not None

    lib = scan_distribution("torch", "PyTorch", "context")
    assert lib.files_scanned > 0 and not lib.errors
    if cpu_build:  # read without importing torch (seconds on two cores)
        assert lib.targets == {} and lib.files_with_kernels == 0
    else:
        import torch

        cubins = {t for t in lib.targets if t.startswith("sm_")}
        assert set(torch.cuda.get_arch_list()) & cubins


@pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump not on PATH (it is on the GPU machines)")
@pytest.mark.parametrize("name", sorted(BUILT))
def test_cuobjdump_lists_the_same_images(fb, name):
    """cuobjdump names sm_121a but prints sm_120f as sm_120: compare with the family suffix dropped."""
    out = subprocess.run(["cuobjdump", "--list-elf", "--list-ptx", str(fb / name)], capture_output=True, text=True,
                         timeout=60).stdout
    theirs = sorted(f"{'ptx' if ext == 'ptx' else 'cubin'} {num}{suffix if suffix == 'a' else ''}"
                    for _kind, num, suffix, ext in re.findall(r"(sm|compute)_(\d+)([af]?)\.(cubin|ptx)", out))
    ours = sorted(f"{e.kind} {e.sm}{e.suffix if e.suffix == 'a' else ''}" for e in fatbin.read_file(str(fb / name)).entries)
    assert theirs == ours, out
