"""Kernel parameter lists from PTX (sizes and PTX types), with the C types of the demangled
name where the kernel's name is mangled: what ``validate`` checks each launch against."""

from __future__ import annotations

from dataclasses import dataclass

from nvstage.inspect.kernels import KernelNames, bare, top_level
from nvstage.errors import ArtifactError
from nvstage.inspect.ptx import parse_ptx


@dataclass(frozen=True)
class ParamSig:
    index: int
    size: int  # bytes, from the PTX
    ptx_type: str
    c_type: str | None = None  # from the demangled name ("float const*"), None if unmangled

    @property
    def is_pointer(self) -> bool | None:
        if self.c_type is not None:
            return self.c_type.rstrip().endswith("*")
        return None  # an unmangled .u64 could be a pointer or a 64-bit integer

    @property
    def pointee(self) -> str | None:
        if not self.is_pointer:
            return None
        base = self.c_type.rstrip().rstrip("*").replace("__restrict__", "")
        words = [w for w in base.split() if w not in ("const", "volatile")]
        return " ".join(words)

    def describe(self) -> str:
        return self.c_type or f".{self.ptx_type} ({self.size} bytes)"


@dataclass(frozen=True)
class KernelSig:
    name: str  # as the workload wrote it
    mangled: str
    demangled: str
    params: tuple[ParamSig, ...]


def split_c_args(demangled: str) -> list[str] | None:
    """``void scale<float>(float*, float, int)`` -> ["float*", "float", "int"]."""
    demangled = bare(demangled)  # "clock.cu: f(int*) (static)": its own parameters
    if "(" not in demangled or not demangled.endswith(")"):
        return None
    start = next((i + 1 for i, c in top_level(demangled) if c == "("), None)
    inner = demangled[start:-1] if start else ""
    if not inner.strip() or inner.strip() == "void":
        return []
    cuts = [i for i, c in top_level(inner) if c == ","]
    return [inner[a + 1:b].strip() for a, b in zip([-1, *cuts], [*cuts, len(inner)])]


def kernel_signatures(ptx_text: str, path: str | None = None) -> KernelNames:
    """Every entry in a PTX module, by every name ``inspect.kernels`` gives a kernel (mangled,
    demangled, ``ns::scale<float>``, ``scale<float>``, ``scale``): a workload names its kernels
    as ``show --kernel`` does.
    ``path``: the file the PTX came from, named in the error when it cannot be read (the
    PTX parser knows no file name)."""
    try:
        module = parse_ptx(ptx_text)
    except ArtifactError as e:
        if path is None:
            raise
        raise ArtifactError(f"{path}: {e.message}", hint=e.hint) from None
    sigs = []
    for e in module.entries:
        c_args = split_c_args(e.demangled) if e.demangled != e.name else None
        if c_args is not None and len(c_args) != len(e.params):
            c_args = None  # an aggregate split across params: trust the PTX alone
        params = tuple(ParamSig(i, p.size, p.ptx_type, c_args[i] if c_args else None)
                       for i, p in enumerate(e.params))
        sigs.append(KernelSig(e.name, e.name, e.demangled, params))
    return KernelNames(sigs, lambda s: (s.mangled, s.demangled))
