"""ELF dynamic dependencies (``DT_NEEDED``) of shared objects, fast enough for a preflight.

A preflight scans every extension in site-packages (~850 files on a CUDA machine, some over a
GB). pyelftools takes ~1.5 ms a file; this reader reads only the ELF and program headers, the
dynamic segment and the strings it names (~0.1 ms a file). Files it does not understand
(big-endian, 32-bit, odd layouts) go to pyelftools, which is also the reference the tests
compare it with. Equivalent: ``readelf -d FILE | grep NEEDED``.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Optional

ELF_MAGIC = b"\x7fELF"
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10


class NotElf(Exception):
    pass


def needed(path: str) -> Optional[list[str]]:
    """The DT_NEEDED sonames of ``path``; [] for a static object; None when not an ELF file."""
    try:
        with open(path, "rb") as fh:
            try:
                return _needed_fast(fh)
            except NotElf:
                return None
            except (struct.error, ValueError, IndexError, OSError):
                fh.seek(0)
                return needed_pyelftools(fh)
    except OSError:
        return None


def _needed_fast(fh: BinaryIO) -> list[str]:
    ident = fh.read(64)
    if len(ident) < 64 or ident[:4] != ELF_MAGIC:
        raise NotElf()
    if ident[4] != 2 or ident[5] != 1:  # not ELF64 little-endian: let pyelftools do it
        raise ValueError("not ELF64 LE")
    e_phoff, = struct.unpack_from("<Q", ident, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", ident, 54)
    fh.seek(e_phoff)
    table = fh.read(e_phentsize * e_phnum)
    loads = []
    dynamic = None
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", table, i * e_phentsize)
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    fh.seek(dynamic[0])
    raw = fh.read(dynamic[1])
    needed_offsets, strtab, strsz = [], None, None
    for tag, val in struct.iter_unpack("<qQ", raw[: len(raw) // 16 * 16]):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed_offsets.append(val)
        elif tag == DT_STRTAB:
            strtab = val
        elif tag == DT_STRSZ:
            strsz = val
    if not needed_offsets:
        return []
    if strtab is None or strsz is None:
        raise ValueError("no string table")
    for vaddr, offset, size in loads:
        if vaddr <= strtab < vaddr + size:
            file_offset = strtab - vaddr + offset
            break
    else:
        raise ValueError("string table outside every load segment")
    fh.seek(file_offset)
    strings = fh.read(strsz)
    out = []
    for off in needed_offsets:
        end = strings.index(b"\0", off)
        out.append(strings[off:end].decode(errors="replace"))
    return out


def needed_pyelftools(fh: BinaryIO) -> Optional[list[str]]:
    """The reference reader (pyelftools); None when the file is not ELF."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(fh)
        for segment in elf.iter_segments():
            if segment["p_type"] == "PT_DYNAMIC":
                return [tag.needed for tag in segment.iter_tags("DT_NEEDED")]
        return []
    except (ELFError, OSError, ValueError, struct.error):
        return None
