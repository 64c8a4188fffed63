"""The records the readers produce, shared by show, occupancy, diff, run and check."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def _without_params(demangled: str) -> str:
    """The signature up to its parameter list (the last top-level ``(...)`` group)."""
    s = demangled.strip()
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                return s[:i].strip()
    return s


def qualified_name(demangled: str) -> str:
    """``void ns::scale<float>(float*, float, int)`` -> ``ns::scale<float>``: the demangled
    signature without its return type (template functions have one) and parameter list."""
    s = _without_params(demangled)
    depth, start = 0, 0
    for i, ch in enumerate(s):  # the return type ends at the last top-level space
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            start = i + 1
    return s[start:].strip()


def unqualified_name(name: str) -> str:
    """``ns::scale<x::y>`` -> ``scale<x::y>``: after the last "::" outside <...> and (...)."""
    depth, start = 0, 0
    for i, ch in enumerate(name):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0 and name.startswith("::", i):
            start = i + 2
    return name[start:]


def base_name(demangled: str) -> str:
    """``void ns::scale<float>(float*, float, int)`` -> ``scale``: what a source file spells."""
    return unqualified_name(qualified_name(demangled)).split("<", 1)[0].strip()


def display_name(demangled: str) -> str:
    """``void ns::scale<unsigned int>(...)`` -> ``scale<unsigned int>``: short, for tables."""
    return unqualified_name(qualified_name(demangled)) or demangled


def short_names(demangled: str) -> tuple[str, ...]:
    """``void ns::scale<float>(float*, float, int)`` -> (``void ns::scale<float>``,
    ``ns::scale<float>``, ``ns::scale``, ``scale<float>``, ``scale``): the shorter ways a user
    may name a kernel. Template arguments may hold blanks (``scale<unsigned int>``)."""
    qualified = qualified_name(demangled)
    names = (_without_params(demangled), qualified, qualified.split("<", 1)[0],
             unqualified_name(qualified), base_name(demangled))
    return tuple(dict.fromkeys(n for n in names if n))


@dataclass(frozen=True)
class PtxParam:
    name: str
    ptx_type: str  # "u64", "f32", "b8" (for .align N .b8 name[M] aggregates) ...
    size: int  # bytes
    align: int  # bytes
    is_pointer: bool = False  # a .u64 with .ptr, or a 64-bit integer that may be a pointer


@dataclass(frozen=True)
class PtxEntry:
    name: str  # mangled, as in the PTX
    demangled: str
    params: tuple[PtxParam, ...] = ()
    line_count: int = 0
    max_ntid: tuple[int, ...] | None = None  # from .maxntid (__launch_bounds__)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PtxModule:
    version: str  # PTX ISA version, "9.5"
    target: str  # "sm_90"
    address_size: int
    entries: tuple[PtxEntry, ...] = ()
    line_count: int = 0

    def entry(self, name: str) -> PtxEntry | None:
        """By mangled name, demangled signature, or bare name (``scale<float>``, ``scale``)."""
        for e in self.entries:
            if name in (e.name, e.demangled) or name in short_names(e.demangled):
                return e
        return None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class KernelResources:
    kernel: str  # mangled
    demangled: str
    arch: str  # "sm_90"
    registers: int
    spill_stores: int | None = 0  # bytes; None: unknown (cuobjdump alone does not say)
    spill_loads: int | None = 0  # bytes; None: unknown
    stack_frame: int = 0  # bytes
    shared_bytes: int = 0  # the kernel's own static shared memory, as ptxas -v prints it
    constant_bytes: int | None = None  # cmem[0]; sm_90+ ptxas omits it, cuobjdump has it
    local_bytes: int | None = None
    barriers: int | None = None
    compile_ms: float | None = None
    source: str = ""  # which tool(s) the numbers came from
    final: bool = True  # False for -rdc per-file numbers before the device link
    # The .nv.shared section as cuobjdump's SHARED (or nvlink -v's smem) prints it: in a linked
    # sm_90+ cubin it also holds the 1 KiB the system reserves per block, which shared_bytes
    # leaves out. None when only ptxas reported.
    shared_section_bytes: int | None = None

    @property
    def spills(self) -> bool:
        return (self.spill_stores or 0) > 0 or (self.spill_loads or 0) > 0

    def to_json(self) -> dict:
        d = asdict(self)
        d["spills"] = self.spills
        return d


@dataclass(frozen=True)
class FatbinImage:
    kind: str  # "cubin" | "ptx" | "ltoir"
    arch: str  # "sm_90" for cubins, "compute_90" for PTX / LTO-IR
    size: int  # bytes
    name: str  # unique within one inventory
    role: str = "kernel"  # "kernel" | "device-link"
    ptx_version: str | None = None  # PTX ISA version for PTX images
    kernels: tuple[str, ...] = field(default=())
    # ".nv_fatbin": what the driver loads; "__nv_relfatbin": relocatable copies for nvlink.
    section: str = ".nv_fatbin"
    compressed: bool = False
    stored_size: int | None = None  # bytes in the container (compressed size if compressed)
    index: int = 0  # position in the file

    @property
    def loadable(self) -> bool:
        return self.section == ".nv_fatbin"

    def to_json(self) -> dict:
        return asdict(self)
