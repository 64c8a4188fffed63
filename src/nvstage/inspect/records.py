"""The records the PTX and fatbin readers produce (the kernel record is ``inspect.kernels``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from nvstage.inspect.kernels import KernelNames


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
        return KernelNames(self.entries, lambda e: (e.name, e.demangled)).get(name)

    def to_json(self) -> dict:
        return asdict(self)


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
