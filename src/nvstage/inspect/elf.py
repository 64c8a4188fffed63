"""Cubin ELF reading with pyelftools: arch, which tool made it, its kernels. Pure (bytes in)."""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ArtifactError

EM_CUDA = 190
ELF_MAGIC = b"\x7fELF"
# Fatbins inside host objects and executables: the loadable one and the one kept for nvlink.
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")


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
    try:
        elf = ELFFile(io.BytesIO(data))
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
        # The SM version sits in bits 8-15 of e_flags (0x5a04: sm_90) since CUDA 12.
        arch = f"sm_{(elf['e_flags'] >> 8) & 0xFF}"
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


def host_fatbins(data: bytes, what: str) -> list[tuple[str, bytes]]:
    """The fatbin sections of a host object or executable, in file order."""
    elf = _elf(data, what)
    out = []
    try:
        for s in elf.iter_sections():
            if s.name in FATBIN_SECTIONS and s["sh_type"] != "SHT_NOBITS":
                out.append((s.name, s.data()))
    except Exception as e:
        raise ArtifactError(f"{what} is a damaged ELF file: {e}") from e
    return out
