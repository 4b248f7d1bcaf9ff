"""Real ELF files built with gcc (and nvcc when present) at test time; no binary is committed.

``cuda_stub`` makes a stub CUDA library (``libcudart.so.12``, its soname set with ``-Wl,-soname``);
``extension`` a shared object that links stubs, with an RPATH/RUNPATH and strings as a wheel's
extension has them; ``install_distribution`` puts files into a site folder as pip leaves a wheel.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

GCC = shutil.which("gcc")
NVCC = shutil.which("nvcc")
EXT_SUFFIX = ".cpython-311-x86_64-linux-gnu.so"

STUB_C = "int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }\n"
EXT_C = ("extern int cudaRuntimeGetVersion(int *v);\n"
         "int spark_probe(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }\n")
PLAIN_C = "#include <string.h>\nint spark_len(const char *s) { return (int)strlen(s); }\n"
MAIN_C = "int main(void) { return 0; }\n"


def need_gcc() -> str:
    if GCC is None:
        pytest.skip("gcc is not installed: the ELF fixtures are built at test time")
    return GCC


def gcc(*args: str | Path, cwd: Path) -> None:
    proc = subprocess.run([need_gcc(), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode:
        raise RuntimeError(f"gcc {' '.join(map(str, args))} failed: {proc.stderr.strip()}")


def cuda_stub(folder: Path, major: int = 12, lib: str = "cudart") -> Path:
    """``lib<lib>.so.<major>`` with that soname, as a wheel of a CUDA <major> build ships it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stub.c").write_text(STUB_C)
    name = f"lib{lib}.so.{major}"
    gcc("-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", name, "stub.c", cwd=folder)
    return folder / name


def extension(folder: Path, name: str, links: list[Path], *, suffix: str = EXT_SUFFIX, rpath: str = "",
              runpath: str = "", strings: tuple[str, ...] = (), dlopen: bool = False) -> Path:
    """A Python-extension-like shared object whose DT_NEEDED names each of ``links`` (by soname), with
    an RPATH or a RUNPATH as given (``$ORIGIN/...`` kept as written), and ``strings`` in its .rodata
    (the names a binary that loads a library with dlopen carries); with ``dlopen``, it calls dlopen
    on the first of them, as ctranslate2's library loads libcublas.so.12."""
    folder.mkdir(parents=True, exist_ok=True)
    source = EXT_C if links else PLAIN_C
    for i, text in enumerate(strings):
        source += f'const char *spark_name_{i} = "{text}";\n'
    if dlopen:
        source = "#include <dlfcn.h>\n" + source + "void *spark_load(void) { return dlopen(spark_name_0, RTLD_NOW); }\n"
    (folder / f"{name}.c").write_text(source)
    out = folder / f"{name}{suffix}"
    flags = ["-Wl,--no-as-needed"] + [f"-L{p.parent}" for p in links] + [f"-l:{p.name}" for p in links]
    if rpath:
        flags += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    if runpath:
        flags += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    if dlopen:
        flags += ["-ldl"]
    gcc("-shared", "-fPIC", "-o", out.name, f"{name}.c", *flags, cwd=folder)
    return out


def plain_shared(folder: Path, name: str = "plain.so", nolibc: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plain.c").write_text(PLAIN_C)
    if nolibc:
        (folder / "plain.c").write_text("int spark_add(int a, int b) { return a + b; }\n")
    gcc("-shared", "-fPIC", *(["-nostdlib"] if nolibc else []), "-o", name, "plain.c", cwd=folder)
    return folder / name


def static_executable(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.c").write_text(MAIN_C)
    gcc("-static", "-o", "static_main", "main.c", cwd=folder)
    return folder / "static_main"


def object_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plain.c").write_text(PLAIN_C)
    gcc("-c", "-fPIC", "-o", "plain.o", "plain.c", cwd=folder)
    return folder / "plain.o"


def install_distribution(site: Path, dist: str, version: str, files: dict[str, Path],
                         requires: tuple[str, ...] = ()) -> Path:
    """Copy ``files`` (relative path in site -> built file) into ``site`` as distribution ``dist``
    with a ``.dist-info`` whose RECORD lists them, as pip leaves a wheel; ``requires`` become its
    ``Requires-Dist`` lines."""
    site.mkdir(parents=True, exist_ok=True)
    records = []
    for rel, src in files.items():
        target = site / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, target)
        records.append(f"{rel},,")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    (info / "INSTALLER").write_text("pip\n")
    records += [f"{info.name}/METADATA,,", f"{info.name}/INSTALLER,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(records) + "\n")
    return info
