"""ELF dynamic sections of shared objects, fast enough for a preflight.

A preflight scans every extension in site-packages (~850 files on a CUDA machine, some over a
GB). pyelftools takes ~1.5 ms a file; this reader reads only the ELF and program headers, the
dynamic segment and the strings it names (~0.1 ms a file). Files it does not understand
(big-endian, 32-bit, odd layouts) go to pyelftools, which is also the reference the tests
compare it with. Equivalent: ``readelf -d FILE`` (``NEEDED``, ``SONAME``, ``RPATH``, ``RUNPATH``).

:func:`strings` is the bounded search for library names a binary loads by name (``dlopen``):
it reads ``.dynstr`` and ``.rodata`` only, at most ``limit`` bytes of each. Equivalent:
``strings -a FILE | grep libcublas.so``. Which files are worth that read the dynamic section already
says: those whose dynamic strings name ``dlopen`` (``Dynamic.dlopen``).

``Dynamic.machine`` is the CPU the object was built for (the header's ``e_machine``, ``readelf -h``'s
"Machine"): an x86_64 extension copied onto an aarch64 Spark fails to load with "wrong ELF class" or
"cannot open shared object file" whatever CUDA it links.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Optional

ELF_MAGIC = b"\x7fELF"
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
STRING_SECTIONS = (".dynstr", ".rodata")
DLOPEN = b"\0dlopen\0"  # the symbol a shared object imports to load a library by name
# e_machine values (the ELF specification's EM_* constants) -> the names ``uname -m`` gives those CPUs
MACHINES = {3: "i686", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390x", 40: "arm", 62: "x86_64", 183: "aarch64",
            243: "riscv64", 258: "loongarch64"}
PYELFTOOLS_MACHINES = {"EM_386": 3, "EM_MIPS": 8, "EM_PPC": 20, "EM_PPC64": 21, "EM_S390": 22, "EM_ARM": 40,
                       "EM_X86_64": 62, "EM_AARCH64": 183, "EM_RISCV": 243, "EM_LOONGARCH": 258}


def machine_name(e_machine: int) -> str:
    """``x86_64`` for 62, ``aarch64`` for 183; ``EM_<n>`` for a value this table does not name."""
    return MACHINES.get(e_machine, f"EM_{e_machine}")


class NotElf(Exception):
    pass


@dataclass(frozen=True)
class Dynamic:
    """What the dynamic loader reads of a shared object: ``readelf -d FILE``."""

    needed: list[str] = field(default_factory=list)
    soname: Optional[str] = None
    rpath: list[str] = field(default_factory=list)  # DT_RPATH, split at ':' ($ORIGIN as written)
    runpath: list[str] = field(default_factory=list)  # DT_RUNPATH
    dlopen: bool = False  # its dynamic strings name dlopen: it may load a library by name (nm -D FILE | grep dlopen)
    # the sections that hold GPU code (.nv_fatbin, __nv_relfatbin) as (file offset, size), and the size of
    # .rodata: read from the section headers in the same open (readelf -S)
    gpu_code: tuple[tuple[int, int], ...] = ()
    rodata: int = 0
    machine: str = ""  # the CPU it was built for (e_machine as uname -m names it: x86_64, aarch64); "" unread


def needed(path: str) -> Optional[list[str]]:
    """The DT_NEEDED sonames of ``path``; [] for a static object; None when not an ELF file."""
    found = dynamic(path)
    return None if found is None else found.needed


def dynamic(path: str) -> Optional[Dynamic]:
    """The dynamic section of ``path``; an empty one for a static object; None when not ELF."""
    try:
        with open(path, "rb") as fh:
            try:
                return _dynamic_fast(fh)
            except NotElf:
                return None
            except (struct.error, ValueError, IndexError, OSError):
                fh.seek(0)
                return dynamic_pyelftools(fh)
    except OSError:
        return None


def _split(text: Optional[str]) -> list[str]:
    return [part for part in (text or "").split(":") if part]


def _dynamic_fast(fh: BinaryIO) -> Dynamic:
    ident = fh.read(64)
    if len(ident) < 64 or ident[:4] != ELF_MAGIC:
        raise NotElf()
    if ident[4] != 2 or ident[5] != 1:  # not ELF64 little-endian: let pyelftools do it
        raise ValueError("not ELF64 LE")
    e_phoff, = struct.unpack_from("<Q", ident, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", ident, 54)
    machine = machine_name(struct.unpack_from("<H", ident, 18)[0])
    fh.seek(e_phoff)
    table = fh.read(e_phentsize * e_phnum)
    loads = []
    segment = None
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", table, i * e_phentsize)
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            segment = (p_offset, p_filesz)
    if segment is None:
        return Dynamic(machine=machine, **_code_sections(fh))
    fh.seek(segment[0])
    raw = fh.read(segment[1])
    offsets: dict[int, list[int]] = {DT_NEEDED: [], DT_SONAME: [], DT_RPATH: [], DT_RUNPATH: []}
    strtab = strsz = None
    for tag, val in struct.iter_unpack("<qQ", raw[: len(raw) // 16 * 16]):
        if tag == DT_NULL:
            break
        if tag in offsets:
            offsets[tag].append(val)
        elif tag == DT_STRTAB:
            strtab = val
        elif tag == DT_STRSZ:
            strsz = val
    if strtab is None or strsz is None:
        if not any(offsets.values()):
            return Dynamic(machine=machine, **_code_sections(fh))
        raise ValueError("no string table")
    for vaddr, offset, size in loads:
        if vaddr <= strtab < vaddr + size:
            file_offset = strtab - vaddr + offset
            break
    else:
        raise ValueError("string table outside every load segment")
    fh.seek(file_offset)
    strings = fh.read(strsz)

    def text(off: int) -> str:
        return strings[off:strings.index(b"\0", off)].decode(errors="replace")

    return Dynamic(
        needed=[text(off) for off in offsets[DT_NEEDED]],
        soname=text(offsets[DT_SONAME][0]) if offsets[DT_SONAME] else None,
        rpath=[p for off in offsets[DT_RPATH] for p in _split(text(off))],
        runpath=[p for off in offsets[DT_RUNPATH] for p in _split(text(off))],
        dlopen=DLOPEN in strings,
        machine=machine,
        **_code_sections(fh),
    )


GPU_CODE_SECTIONS = (".nv_fatbin", "__nv_relfatbin")  # where nvcc puts fatbins (spark_gotchas.machine.fatbin reads them)


def _code_sections(fh: BinaryIO) -> dict:
    """``gpu_code`` and ``rodata`` of :class:`Dynamic`, from the section headers."""
    fh.seek(0)
    table = _section_table(fh)
    return {"gpu_code": tuple((off, size) for name, off, size in table if name in GPU_CODE_SECTIONS and size),
            "rodata": sum(size for name, _off, size in table if name == ".rodata")}


def dynamic_pyelftools(fh: BinaryIO) -> Optional[Dynamic]:
    """The reference reader (pyelftools); None when the file is not ELF."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(fh)
        raw = elf["e_machine"]
        machine = machine_name(raw if isinstance(raw, int) else PYELFTOOLS_MACHINES.get(raw, 0))
        for segment in elf.iter_segments():
            if segment["p_type"] == "PT_DYNAMIC":
                tags = list(segment.iter_tags())
                names = [t.soname for t in tags if t.entry.d_tag == "DT_SONAME"]
                dynstr = elf.get_section_by_name(".dynstr")
                code = [elf.get_section_by_name(n) for n in GPU_CODE_SECTIONS]
                rodata = elf.get_section_by_name(".rodata")
                return Dynamic(
                    gpu_code=tuple((c["sh_offset"], c["sh_size"]) for c in code
                                   if c is not None and c["sh_type"] != "SHT_NOBITS" and c["sh_size"]),
                    rodata=rodata["sh_size"] if rodata is not None else 0,
                    needed=[t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"],
                    soname=names[0] if names else None,
                    rpath=[p for t in tags if t.entry.d_tag == "DT_RPATH" for p in _split(t.rpath)],
                    runpath=[p for t in tags if t.entry.d_tag == "DT_RUNPATH" for p in _split(t.runpath)],
                    dlopen=dynstr is not None and DLOPEN in b"\0" + dynstr.data(),
                    machine=machine,
                )
        return Dynamic(machine=machine)
    except (ELFError, OSError, ValueError, struct.error):
        return None


def needed_pyelftools(fh: BinaryIO) -> Optional[list[str]]:
    """DT_NEEDED by the reference reader; None when the file is not ELF."""
    found = dynamic_pyelftools(fh)
    return None if found is None else found.needed


def strings(path: str, pattern: re.Pattern[bytes], limit: int = 32 << 20) -> list[str]:
    """Distinct matches of ``pattern`` in the ``.dynstr`` and ``.rodata`` sections of ``path``,
    reading at most ``limit`` bytes of each; [] for a file that is not ELF64 little-endian. Read, not
    mapped: a file that shrinks while it is searched (a pip install beside the run) must give a
    short read, not the SIGBUS a mapped page past its end would send to this process."""
    try:
        with open(path, "rb") as fh:
            found: set[str] = set()
            for offset, size in _sections(fh, STRING_SECTIONS):
                fh.seek(offset)
                data = fh.read(min(size, limit))
                found.update(m.group(0).decode(errors="replace") for m in pattern.finditer(data))
            return sorted(found)
    except (OSError, struct.error, ValueError, IndexError):
        return []


def sections(path: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """(file offset, size) of the named sections of ``path`` that hold bytes; [] when there are none
    or the file is not ELF64 little-endian. Reads the section headers only (``readelf -S``)."""
    try:
        with open(path, "rb") as fh:
            return _sections(fh, names)
    except (OSError, struct.error, ValueError, IndexError):
        return []


def _sections(fh: BinaryIO, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """(file offset, size) of the named sections that hold bytes in the file."""
    return [(offset, size) for name, offset, size in _section_table(fh) if name in names]


def section_sizes(path: str) -> dict[str, int]:
    """name -> size of the sections of ``path`` that hold bytes (``readelf -S``); {} when not ELF64 LE."""
    try:
        with open(path, "rb") as fh:
            return {name: size for name, _offset, size in _section_table(fh)}
    except (OSError, struct.error, ValueError, IndexError):
        return {}


def _section_table(fh: BinaryIO) -> list[tuple[str, int, int]]:
    """(name, file offset, size) of every section that holds bytes in the file."""
    ident = fh.read(64)
    if len(ident) < 64 or ident[:4] != ELF_MAGIC or ident[4] != 2 or ident[5] != 1:
        return []
    e_shoff, = struct.unpack_from("<Q", ident, 40)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", ident, 58)
    if not e_shoff or not e_shnum or e_shstrndx >= e_shnum or e_shentsize < 64:
        return []
    fh.seek(e_shoff)
    table = fh.read(e_shentsize * e_shnum)
    headers = [struct.unpack_from("<IIQQQQ", table, i * e_shentsize) for i in range(e_shnum)]
    SHT_NOBITS = 8
    _name, _type, _flags, _addr, str_off, str_size = headers[e_shstrndx]
    fh.seek(str_off)
    names_blob = fh.read(min(str_size, 1 << 20))
    out = []
    for sh_name, sh_type, _f, _a, sh_offset, sh_size in headers:
        end = names_blob.find(b"\0", sh_name)
        name = names_blob[sh_name:end].decode(errors="replace") if end >= 0 else ""
        if sh_type != SHT_NOBITS:
            out.append((name, sh_offset, sh_size))
    return out
