"""What ptxas wrote into a cubin about each kernel: the figures ``ptxas -v`` prints, read
back from the file itself, so the build runs ptxas exactly as nvcc does (a ``-v`` nvcc did
not pass lands in the cubin's ``.note.nv.tkinfo`` and changes the object's bytes).

Pure and standard library only (it runs on the cold path, after each ptxas stage): bytes in,
``KernelFigures`` out. Where each figure lives (seen, CUDA 13.0 and 13.5, sm_75 to sm_121):

- ``.nv.info`` (per symbol): EIATTR_REGCOUNT (registers), EIATTR_FRAME_SIZE ("bytes stack
  frame"), EIATTR_MIN_STACK_SIZE ("bytes cumulative stack size"; absent in ``-rdc -c``
  cubins, whose ptxas line has none either).
- ``.nv.info.<kernel>``: EIATTR_MAXREG_COUNT, EIATTR_NUM_BARRIERS ("used N barriers"; absent:
  none), EIATTR_ANNOTATIONS, whose SpillRefill entries are the offsets of the instructions
  ptxas wrote to spill and refill registers (nvdisasm prints them as ``(*"SpillRefill"*)``).
- ``.nv.shared.<kernel>`` and ``.nv.constant0.<kernel>`` sizes (smem, cmem[0]); from sm_90
  on a loadable cubin's shared section also holds the 1 KiB the system reserves per block.
- ``.text.<kernel>``: 128-bit instructions. STL is opcode 0x187 and LDL 0x183 in bits 0-8 of
  the first little-endian 64-bit word (bits 9-11 are the address form: 0x387, 0x987, 0x983
  seen); bits 73-75 (bits 9-11 of the second word) are the access size. No other
  instruction of a corpus of every arch nvcc 13.5 lists matched those opcodes.

Spills: ptxas -v's spill stores and loads are the bytes (by each instruction's access size:
STL.64 is 8, STL.128 16) of the annotated STL and LDL in the kernel's own code. A kernel's
``.text`` section also holds the subroutines it calls that ptxas placed after its ``EXIT``:
the toolkit's internal routines (``$__internal_0_$__cuda_sm20_div_rn_f64_full`` for a double
division, ``..._div_s64``, ``..._div_rn_noftz_f32_slowpath``) and, in a whole-program build, a
``__noinline__`` device function (``$kernel$callee``), each a local FUNC symbol whose value and
size are its place in the section. ptxas -v leaves their spills out of the kernel's line (a
named device function gets its own "Function properties" line, the internal routines none), so
they are counted apart (``subroutine_spill_stores``/``_loads``). Held to ptxas -v on a corpus of
kernels that spill under -maxrregcount 24 to 64 on sm_75, sm_80 and sm_90
(tests/compiler/nvcc/test_spill_corpus.py). A local array's STL and LDL carry no annotation. Where
the kernel has local-memory instructions without annotations and ptxas is not one seen to mark
every spill (CUDA 13.0 and 13.5 are), the figures are every local store and load, called
"spill or local array".
"""

from __future__ import annotations

import re
import struct
from collections import namedtuple
from dataclasses import asdict, dataclass, fields

from nvstage.errors import ArtifactError

SPILL = "spill"  # ptxas marked every spill: the figures are its spill stores and loads
SPILL_OR_LOCAL = "spill or local array"  # every local store and load: spills among them
SOURCE = "cubin (.nv.info, SASS)"

_EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 2, 3, 4
_EIATTR_FRAME_SIZE = 0x11
_EIATTR_MIN_STACK_SIZE = 0x12
_EIATTR_MAXREG_COUNT = 0x1B
_EIATTR_REGCOUNT = 0x2F
_EIATTR_NUM_BARRIERS = 0x4C
_EIATTR_ANNOTATIONS = 0x55
_ANNOTATION_SPILL_REFILL = 1
_OP_MASK, _OP_STL, _OP_LDL = 0x1FF, 0x187, 0x183
# By the access-size field: U8, S8, U16, S16, 32, 64, 128; 7 (not seen) read as 128.
_ACCESS_BYTES = (1, 1, 2, 2, 4, 8, 16, 16)
# The ptxas releases seen to annotate every spill (the corpus test holds them to ptxas -v).
_MARKS_EVERY_SPILL = re.compile(rb"Cuda compilation tools, release 13\.\d+")
_SM = re.compile(r"^sm_(\d+)")
SM90_RESERVED_SHARED = 1024  # the system's shared memory per block from sm_90 on


@dataclass(frozen=True)
class KernelFigures:
    """One kernel of one cubin, in ptxas -v's terms (bytes unless said)."""

    kernel: str  # mangled
    arch: str  # "sm_90", as the ELF says (no "a"/"f" suffix: the build record adds it)
    registers: int
    stack_frame: int
    stack_size: int | None  # cumulative; None in -rdc -c cubins
    max_registers: int | None
    barriers: int
    shared_bytes: int  # the kernel's own static shared memory, as ptxas -v prints it
    shared_section_bytes: int  # the section, the sm_90+ reservation included
    constant_bytes: int | None  # cmem[0]: the parameter bank
    local_bytes: int  # .nv.local.<kernel>
    spill_stores: int
    spill_loads: int
    spill_kind: str  # SPILL or SPILL_OR_LOCAL
    local_stores: int  # every STL's bytes, spills included
    local_loads: int
    final: bool  # False in an -rdc -c cubin: the device link may change them
    # The kernel's SASS: its .text section's bytes (16 per instruction, the NOPs that pad the
    # function included). None in a manifest written before it was kept.
    code_bytes: int | None = None
    # Spills in the subroutines placed in the kernel's section (ptxas -v leaves them out of
    # the kernel's figures). None in a manifest written before they were counted apart: its
    # spill_stores/spill_loads then include them (the SASS's count, not ptxas's).
    subroutine_spill_stores: int | None = None
    subroutine_spill_loads: int | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> KernelFigures:
        """From a manifest's entry; ``ArtifactError`` when a field is missing or of the
        wrong type (a manifest is data)."""
        if not isinstance(d, dict):
            raise ArtifactError("cubin figures must be an object")
        kw = {}
        for f in fields(cls):
            v = d.get(f.name)
            want = {"str": str, "bool": bool}.get(str(f.type), int)
            if v is None and "None" in str(f.type):
                kw[f.name] = None
                continue
            if not isinstance(v, want) or (want is int and isinstance(v, bool)) or \
                    (want is int and not 0 <= v < 1 << 48):
                raise ArtifactError(f"cubin figures: {f.name} is {type(v).__name__}, "
                                    f"not {want.__name__}")
            kw[f.name] = v
        if kw["spill_kind"] not in (SPILL, SPILL_OR_LOCAL):
            raise ArtifactError(f"cubin figures: spill_kind {kw['spill_kind'][:40]!r} is "
                                f"neither {SPILL!r} nor {SPILL_OR_LOCAL!r}")
        return cls(**kw)


# A tuple, not a dataclass: this module is imported on every build's cold path.
_Section = namedtuple("_Section", "name type offset size link")


_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_SHT_NOBITS = 8


def _sections(data: bytes, what: str) -> tuple[list[_Section], int]:
    """The section table and e_flags of a 64-bit little-endian CUDA ELF (every cubin of
    CUDA 12 and 13 is one)."""
    if len(data) < _EHDR.size or data[:4] != b"\x7fELF":
        raise ArtifactError(f"{what} is not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ArtifactError(f"{what} is not a 64-bit little-endian ELF file")
    h = _EHDR.unpack_from(data)
    e_machine, e_flags, shoff, shentsize, shnum, shstrndx = h[2], h[7], h[6], h[11], h[12], h[13]
    if e_machine != 190:
        raise ArtifactError(f"{what} is not a CUDA cubin (e_machine {e_machine})")
    if shentsize < _SHDR.size or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise ArtifactError(f"{what} is damaged or truncated: its section table does not fit")
    raw = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names = raw[shstrndx]
    out = []
    for s in raw:
        if s[1] != _SHT_NOBITS and s[4] + s[5] > len(data):
            raise ArtifactError(f"{what} is truncated: a section runs past the end of the file")
        start = names[4] + s[0]
        end = data.find(b"\0", start, names[4] + names[5])
        if s[0] >= names[5] or end < 0:
            raise ArtifactError(f"{what} is damaged: a section name lies outside its table")
        out.append(_Section(data[start:end].decode("utf-8", "replace"), s[1], s[4], s[5], s[6]))
    return out, e_flags


def _attributes(blob: bytes):
    """(attribute, format, value or payload) of an ``.nv.info`` section: a format byte, an
    attribute byte, two bytes that are the value (BVAL, HVAL) or the payload's size (SVAL)."""
    i = 0
    while i + 4 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        half = int.from_bytes(blob[i + 2:i + 4], "little")
        if fmt == _EIFMT_SVAL:
            yield attr, fmt, blob[i + 4:i + 4 + half]
            i += 4 + half
        else:
            yield attr, fmt, blob[i + 2] if fmt == _EIFMT_BVAL else half
            i += 4


def _symbols(data: bytes, secs: list[_Section], symtab: int) -> list[tuple]:
    """(name, type, section index, value, size) of each symbol of the table ``symtab``."""
    if not 0 <= symtab < len(secs):
        return []
    st, strtab = secs[symtab], secs[secs[symtab].link] if secs[symtab].link < len(secs) else None
    if strtab is None:
        return []
    out = []
    for off in range(st.offset, st.offset + st.size - _SYM.size + 1, _SYM.size):
        name, info, _, shndx, value, size = _SYM.unpack_from(data, off)
        at = strtab.offset + name
        end = data.find(b"\0", at, strtab.offset + strtab.size)
        out.append((data[at:end].decode("utf-8", "replace") if end >= 0 else "", info & 0xF,
                    shndx, value, size))
    return out


_STT_FUNC = 2


def _subroutines(symbols, section: int, kernel: str) -> list[tuple[int, int]]:
    """[start, end) in section ``section`` of each function placed there but the kernel."""
    return [(value, value + size) for name, kind, shndx, value, size in symbols
            if kind == _STT_FUNC and shndx == section and name != kernel and size > 0]


def _local_traffic(text: bytes, spills: set[int]) -> tuple[int, int, int, int]:
    """(all STL bytes, all LDL bytes, annotated STL bytes, annotated LDL bytes)."""
    stores = loads = spill_stores = spill_loads = 0
    # The opcode's low byte is 0x87 or 0x83 and bit 8 is set: scanning for those two bytes
    # at C speed, then keeping the 16-byte aligned ones, reads a kernel in microseconds.
    for m in _LOCAL_OP.finditer(text):
        at = m.start()
        if at % 16 or at + 16 > len(text):
            continue
        lo, hi = struct.unpack_from("<QQ", text, at)
        size = _ACCESS_BYTES[(hi >> 9) & 7]
        if lo & _OP_MASK == _OP_STL:
            stores += size
            spill_stores += size if at in spills else 0
        elif lo & _OP_MASK == _OP_LDL:
            loads += size
            spill_loads += size if at in spills else 0
    return stores, loads, spill_stores, spill_loads


# Zero-width, so a match at an odd offset cannot swallow the aligned one a byte later.
_LOCAL_OP = re.compile(b"(?=[\\x83\\x87][" + b"".join(b"\\x%02x" % b for b in range(1, 256, 2))
                       + b"])", re.S)


def read_figures(data: bytes, what: str = "cubin") -> list[KernelFigures]:
    """Every kernel's figures, in section order. ``ArtifactError`` on a file that is not a
    cubin or is damaged."""
    secs, e_flags = _sections(data, what)
    by_name = {s.name: s for s in secs}

    def blob(s: _Section) -> bytes:
        return b"" if s.type == _SHT_NOBITS else data[s.offset:s.offset + s.size]

    # ABI 8 (CUDA 13) keeps the SM in bits 8-15 of e_flags, the older layout in the low byte.
    sm = (e_flags >> 8) & 0xFF if data[8] != 7 else e_flags & 0xFF
    arch = f"sm_{sm}"
    relocatable = int.from_bytes(data[16:18], "little") == 1  # ET_REL: -rdc -c
    tkinfo = by_name.get(".note.nv.tkinfo")
    marks_all = tkinfo is not None and bool(_MARKS_EVERY_SPILL.search(blob(tkinfo)))
    per_symbol: dict[tuple[int, int], int] = {}
    info = by_name.get(".nv.info")
    table = _symbols(data, secs, info.link) if info is not None else []
    symbols = [t[0] for t in table]
    if info is not None:
        for attr, fmt, v in _attributes(blob(info)):
            if fmt == _EIFMT_SVAL and len(v) >= 8 and attr in (
                    _EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE, _EIATTR_MIN_STACK_SIZE):
                sym, value = struct.unpack_from("<II", v)
                per_symbol[(attr, sym)] = value
    index = {n: i for i, n in enumerate(symbols) if n}
    out = []
    for n, s in enumerate(secs):
        if not s.name.startswith(".text."):
            continue
        k = s.name[len(".text."):]
        bank = by_name.get(f".nv.constant0.{k}")
        if bank is None:  # a device function: kernels alone have a parameter bank
            continue
        maxreg, barriers, spills = None, 0, set()
        own = by_name.get(f".nv.info.{k}")
        for attr, fmt, v in _attributes(blob(own)) if own is not None else ():
            if attr == _EIATTR_MAXREG_COUNT and fmt in (_EIFMT_BVAL, _EIFMT_HVAL):
                maxreg = v
            elif attr == _EIATTR_NUM_BARRIERS and fmt == _EIFMT_BVAL:
                barriers = v
            elif attr == _EIATTR_ANNOTATIONS and fmt == _EIFMT_SVAL:
                spills |= {o for t, o in struct.iter_unpack("<II", v[:len(v) // 8 * 8])
                           if t == _ANNOTATION_SPILL_REFILL}
        # ptxas -v counts the kernel's own code: the spills of the subroutines placed after
        # it in its section are counted apart.
        subs = _subroutines(table, n, k)
        theirs = {o for o in spills if any(a <= o < b for a, b in subs)}
        stores, loads, sp_st, sp_ld = _local_traffic(blob(s), spills - theirs)
        sub_st, sub_ld = _local_traffic(blob(s), theirs)[2:] if theirs else (0, 0)
        exact = marks_all or (sp_st + sub_st, sp_ld + sub_ld) == (stores, loads)
        sym = index.get(k, -1)
        shared = by_name.get(f".nv.shared.{k}")
        local = by_name.get(f".nv.local.{k}")
        section = shared.size if shared is not None else 0
        m = _SM.match(arch)
        own_shared = section - SM90_RESERVED_SHARED if (
            not relocatable and m and int(m.group(1)) >= 90
            and section >= SM90_RESERVED_SHARED) else section
        out.append(KernelFigures(
            kernel=k, arch=arch, registers=per_symbol.get((_EIATTR_REGCOUNT, sym), 0),
            stack_frame=per_symbol.get((_EIATTR_FRAME_SIZE, sym), 0),
            stack_size=per_symbol.get((_EIATTR_MIN_STACK_SIZE, sym)),
            max_registers=maxreg, barriers=barriers, shared_bytes=own_shared,
            shared_section_bytes=section, constant_bytes=bank.size,
            local_bytes=local.size if local is not None else 0,
            spill_stores=sp_st if exact else stores, spill_loads=sp_ld if exact else loads,
            spill_kind=SPILL if exact else SPILL_OR_LOCAL, local_stores=stores,
            local_loads=loads, final=not relocatable, code_bytes=s.size,
            subroutine_spill_stores=sub_st if exact else 0,
            subroutine_spill_loads=sub_ld if exact else 0))
    return out
