"""Cubin ELF reading with pyelftools: arch, which tool made it, its kernels. Pure (bytes in)."""

from __future__ import annotations

import io
import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from nvstage.errors import ArtifactError, InputTooLarge
from nvstage.files import MAX_ARTIFACT_BYTES, size_text

EM_CUDA = 190
ELF_MAGIC = b"\x7fELF"
# Fatbins inside host objects and executables: the loadable one and the one kept for nvlink.
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# pyelftools reads each section name 64 bytes at a time up to its NUL, and does not stop at
# the end of the name table: a damaged table (no NULs, every name at the same offset) made
# one header read crawl through the whole file once per section. Names are checked first
# to end inside their table, and all of them together to stay under this many bytes.
MAX_NAME_BYTES = 64 << 20
MAX_SECTIONS = 1 << 20  # extended numbering allows billions; real binaries have thousands


@dataclass(frozen=True)
class Cubin:
    arch: str  # "sm_90"
    relocatable: bool  # ET_REL: built with -rdc, still to be device-linked
    producer: str | None  # "ptxas" or "nvlink", from .note.nv.tkinfo
    kernels: tuple[str, ...]  # entry functions (mangled), in section order
    functions: tuple[str, ...]  # every function with code, kernels included
    size: int
    # Block barriers per kernel, from EIATTR_NUM_BARRIERS in .nv.info.<kernel> (what ptxas -v
    # prints as "used N barriers"); a kernel without the attribute uses none.
    barriers: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def from_device_link(self) -> bool:
        return self.producer == "nvlink"


def _elf(data: bytes, what: str):
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    if data[:4] != ELF_MAGIC:
        raise ArtifactError(f"{what} is not an ELF file")
    _check_names(data, what)
    try:
        # A mapped file is its own stream (seek, read, tell): BytesIO would copy all of it.
        elf = ELFFile(data if isinstance(data, mmap.mmap) else io.BytesIO(data))
        end = elf["e_shoff"] + elf["e_shnum"] * elf["e_shentsize"]
        if end > len(data):
            raise ArtifactError(f"{what} is truncated: its section table ends at byte {end}, "
                                f"the file has {len(data)}")
        for s in elf.iter_sections():
            if s["sh_type"] != "SHT_NOBITS" and s["sh_offset"] + s["sh_size"] > len(data):
                raise ArtifactError(f"{what} is truncated: section {s.name or '?'} runs past "
                                    f"the end of the file")
        return elf
    except ArtifactError:
        raise
    except (ELFError, struct.error, ValueError, KeyError, IndexError, TypeError,
            UnicodeDecodeError, AssertionError, OverflowError) as e:
        raise ArtifactError(f"{what} is a damaged ELF file: {e}") from e


def _check_names(data, what: str) -> None:
    """Every section name ends (a NUL) inside the section-name table, and all of them add
    up to at most ``MAX_NAME_BYTES``: read straight from the headers, before pyelftools."""
    if len(data) < 0x40 or data[4] not in (1, 2) or data[5] not in (1, 2):
        return  # pyelftools rejects these itself
    o = "<" if data[5] == 1 else ">"
    wide = data[4] == 2
    hdr, sh = (("Q", 0x28, 0x3A), "IIQQQQIIQQ") if wide else (("I", 0x20, 0x2E), "IIIIIIIIII")
    (shoff,) = struct.unpack_from(o + hdr[0], data, hdr[1])
    entsize, shnum, shstrndx = struct.unpack_from(o + "HHH", data, hdr[2])
    layout = struct.Struct(o + sh)
    if shoff == 0 or entsize < layout.size:
        return

    def section(i: int):  # (sh_name, sh_type, sh_offset, sh_size, sh_link) or None
        at = shoff + i * entsize
        if at + layout.size > len(data):
            return None
        f = layout.unpack_from(data, at)
        return f[0], f[1], f[4], f[5], f[6]

    first = section(0)
    if first is None:
        return  # the section table runs past the end: _elf says so
    if shnum == 0:
        shnum = first[3]  # extended numbering: the count is section 0's sh_size
    if shstrndx == 0xFFFF:
        shstrndx = first[4]
    if shnum * entsize > len(data) or shnum > MAX_SECTIONS:
        raise ArtifactError(f"{what} is damaged: it claims {shnum} sections"
                            + (", more than fit in the file" if shnum <= MAX_SECTIONS else
                               f", more than the {MAX_SECTIONS} nvstage reads"))
    table = section(shstrndx) if shstrndx < shnum else None
    if table is None:
        return
    start, size = table[2], table[3]
    if start + size > len(data):
        return  # truncated: _elf says so
    total = 0
    for i in range(shnum):
        sec = section(i)
        if sec is None:
            return
        name_at = sec[0]
        if name_at >= size:
            raise ArtifactError(f"{what} is damaged: section {i}'s name lies outside the "
                                "section-name table")
        end = data.find(b"\0", start + name_at, start + size)
        if end < 0:
            raise ArtifactError(f"{what} is damaged: section {i}'s name does not end inside "
                                "the section-name table")
        total += end - start - name_at
        if total > MAX_NAME_BYTES:
            raise ArtifactError(f"{what} is damaged: its section names add up to more than "
                                f"{MAX_NAME_BYTES >> 20} MiB")


def elf_machine(data: bytes) -> tuple[int, int] | None:
    """(e_machine, e_type) straight from the header, or None when too short to say."""
    if len(data) < 20 or data[:4] != ELF_MAGIC:
        return None
    order = "<" if data[5] == 1 else ">"
    e_type, e_machine = struct.unpack_from(order + "HH", data, 16)
    return e_machine, e_type


def _producer(elf) -> str | None:
    note = elf.get_section_by_name(".note.nv.tkinfo")
    if note is None:
        return None
    blob = note.data()
    # The first tool named in the note made this file; a linked cubin names nvlink first.
    found = [(blob.find(b"\x00" + t + b"\x00"), t.decode())
             for t in (b"nvlink", b"ptxas", b"nvJitLink", b"nvrtc")]
    found = [f for f in found if f[0] >= 0]
    return min(found)[1] if found else None


def read_cubin(data: bytes, what: str = "cubin") -> Cubin:
    """Read a cubin's ELF. Raises ``ArtifactError`` if it is not one, or is cut short."""
    elf = _elf(data, what)
    try:
        if elf["e_machine"] != "EM_CUDA" and elf["e_machine"] != EM_CUDA:
            raise ArtifactError(f"{what} is an ELF file for {elf['e_machine']}, not a CUDA "
                                "cubin")
        arch = _arch(elf)
        names = [s.name for s in elf.iter_sections()]
        functions = tuple(n[len(".text."):] for n in names if n.startswith(".text."))
        # A kernel has a parameter bank (.nv.constant0.<name>); a device function has none.
        banks = {n[len(".nv.constant0."):] for n in names if n.startswith(".nv.constant0.")}
        kernels = tuple(f for f in functions if f in banks)
        barriers = {k: _num_barriers(elf.get_section_by_name(f".nv.info.{k}")) for k in kernels}
        return Cubin(arch, elf["e_type"] == "ET_REL", _producer(elf), kernels, functions,
                     _elf_end(elf), barriers)
    except ArtifactError:
        raise
    except Exception as e:  # pyelftools raises many kinds on damaged input
        raise ArtifactError(f"{what} is a damaged ELF file: {e}") from e


_EIATTR_NUM_BARRIERS = 0x4C
_EIFMT_BVAL, _EIFMT_SVAL = 2, 4
# In .nv.compat, as cuobjdump -elf names it: 1 in an arch-specific (sm_90a, sm_100a) cubin.
_EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET = 0x09
# e_flags (LLVM's ELF.h): ABI version 8 (CUDA 13) puts the SM in bits 8-15, with
# EF_CUDA_ACCELERATORS at bit 3; the older layout (ABI 7) in the low byte, with
# EF_CUDA_ACCELERATORS_V1 at bit 11. ptxas 13.x leaves the bit clear in sm_90a and sm_100a
# cubins (seen, CUDA 13.5): .nv.compat is where it says so.
_EF_CUDA_ACCELERATORS, _EF_CUDA_ACCELERATORS_V1 = 0x8, 0x800


def _arch(elf) -> str:
    """"sm_90", or "sm_90a" for an arch-specific cubin. A family-specific one (sm_100f) is
    the same cubin as sm_100 (the fatbin header or the build record says "f":
    ``refine_arch``)."""
    flags = elf["e_flags"]
    if elf["e_ident"]["EI_ABIVERSION"] == 7:  # CUDA 12 and before
        sm, accel = flags & 0xFF, bool(flags & _EF_CUDA_ACCELERATORS_V1)
    else:  # the SM version sits in bits 8-15 of e_flags (0x5a04: sm_90)
        sm, accel = (flags >> 8) & 0xFF, bool(flags & _EF_CUDA_ACCELERATORS)
    if not accel:
        accel = _compat_attr(elf.get_section_by_name(".nv.compat"),
                             _EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET) == 1
    return f"sm_{sm}{'a' if accel else ''}"


def refine_arch(read: str, declared: str | None) -> str:
    """The arch read from a cubin's ELF, with the suffix ``declared`` (a fatbin image header,
    a build record's artifact) adds for the same SM: "sm_100" declared "sm_100f" is
    "sm_100f". A declaration for another SM changes nothing."""
    if not declared:
        return read
    d = declared.strip().lower().replace("compute_", "sm_")
    if d != read and d.rstrip("af") == read.rstrip("af") and not read.endswith(("a", "f")):
        return d
    return read


def _compat_attr(section, attr: int) -> int | None:
    """A byte or half value from ``.nv.compat`` (the format of ``.nv.info``), or None."""
    if section is None:
        return None
    data, i = section.data(), 0
    while i + 4 <= len(data):
        fmt, at = data[i], data[i + 1]
        if at == attr and fmt in (_EIFMT_BVAL, _EIFMT_BVAL + 1):
            return data[i + 2] if fmt == _EIFMT_BVAL else int.from_bytes(data[i + 2:i + 4],
                                                                          "little")
        i += 4 + (int.from_bytes(data[i + 2:i + 4], "little") if fmt == _EIFMT_SVAL else 0)
    return None


def _num_barriers(info) -> int:
    """EIATTR_NUM_BARRIERS from a kernel's ``.nv.info.<kernel>`` section (0 when absent).

    Each attribute is a format byte, an attribute byte, then two bytes: the value itself for
    byte/half values, or the size of the data that follows for EIFMT_SVAL."""
    if info is None:
        return 0
    data, i = info.data(), 0
    while i + 4 <= len(data):
        fmt, attr = data[i], data[i + 1]
        if attr == _EIATTR_NUM_BARRIERS and fmt == _EIFMT_BVAL:
            return data[i + 2]
        i += 4 + (int.from_bytes(data[i + 2:i + 4], "little") if fmt == _EIFMT_SVAL else 0)
    return 0


def _elf_end(elf) -> int:
    """Where the ELF file ends: a fatbin pads each image to 8 bytes, the cubin itself not."""
    end = elf["e_shoff"] + elf["e_shnum"] * elf["e_shentsize"]
    end = max(end, elf["e_phoff"] + elf["e_phnum"] * elf["e_phentsize"])
    for s in elf.iter_sections():
        if s["sh_type"] != "SHT_NOBITS":
            end = max(end, s["sh_offset"] + s["sh_size"])
    for seg in elf.iter_segments():
        end = max(end, seg["p_offset"] + seg["p_filesz"])
    return end


def host_fatbins(data: bytes, what: str, *, names_only: bool = False
                 ) -> list[tuple[str, bytes]]:
    """The fatbin sections of a host object or executable, in file order (``names_only``:
    with empty contents, to ask whether there are any). At most ``MAX_ARTIFACT_BYTES`` of
    them are read: the rest of a large host binary is never touched."""
    elf = _elf(data, what)
    found = []
    try:
        for s in elf.iter_sections():
            if s.name in FATBIN_SECTIONS and s["sh_type"] != "SHT_NOBITS":
                found.append(s)
        total = sum(s["sh_size"] for s in found)
        if total > MAX_ARTIFACT_BYTES and not names_only:
            raise InputTooLarge(f"{what} holds {size_text(total)} of device code: more than "
                                f"the {size_text(MAX_ARTIFACT_BYTES)} nvstage reads "
                                "(MAX_ARTIFACT_BYTES)")
        return [(s.name, b"" if names_only else s.data()) for s in found]
    except ArtifactError:
        raise
    except Exception as e:
        raise ArtifactError(f"{what} is a damaged ELF file: {e}") from e
