"""What a Triton build records beyond nvcc's (``TritonInfo``): the kernel and the arguments it
was compiled for, Triton's metadata (warps, stages, shared memory, scratch, the target, FP
fusion), which ptxas ran, and the launch convention a runner needs. Written as the manifest's
``triton`` section (``record.TritonBuild.to_json``), read back by ``read_info`` beside it.

Standard library only: ``load_build``, ``show``, ``diff`` and workloads read Triton builds
without Triton installed. A manifest is a document: every field is checked for its type and
bounds, and none of it runs or picks anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvstage.errors import ArtifactError

SECTION = "triton"
# Triton 3.9 appends two pointers to every kernel's parameters, after the user's own: the
# global scratch and the profile scratch (backends/nvidia/driver.c, ``launch``: "Number of
# parameters passed to kernel. + 2 for global & profile scratch"). Each is null when the
# kernel's metadata asks for no such memory (``global_scratch_size``/``profile_scratch_size``).
EXTRA_PARAMS = ("global_scratch", "profile_scratch")

_MAX_TEXT = 4096  # a name, a path, a version: far above real ones
_MAX_ENTRIES = 1000  # signature, constexprs, environment
_MAX_INT = 1 << 48
_ARCH = re.compile(r"^sm_\d+[af]?$")
# Triton's scalar and pointer type names as ASTSource's signature takes them (3.9).
SCALAR_TYPES = ("i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
                "fp8e4nv", "fp8e5", "fp8e4b15", "fp16", "bf16", "fp32", "fp64")
# Their C spelling, for parameter lists a workload is validated against.
C_TYPES = {"i1": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
           "u1": "bool", "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int",
           "u64": "unsigned long long", "fp16": "__half", "bf16": "__nv_bfloat16",
           "fp32": "float", "fp64": "double", "fp8e4nv": "__nv_fp8_e4m3",
           "fp8e5": "__nv_fp8_e5m2", "fp8e4b15": "unsigned char"}


def valid_type(t: str) -> bool:
    """A type ``--signature`` may give a parameter: a scalar, or ``*``/``*k`` and a scalar."""
    base = t[2:] if t.startswith("*k") else t[1:] if t.startswith("*") else t
    return base in SCALAR_TYPES


def c_type(t: str) -> str:
    """``*fp32`` -> ``float*``, ``i32`` -> ``int``: the C type Triton passes."""
    if t.startswith("*"):
        return f"{C_TYPES[t.lstrip('*k')]}*"
    return C_TYPES[t]


@dataclass(frozen=True)
class TritonInfo:
    """One Triton kernel as built: what was asked, what Triton decided, what ran."""

    version: str  # triton.__version__
    kernel: str  # the Python function
    name: str  # the kernel's symbol in the PTX and cubin (Triton's metadata "name")
    signature: tuple[tuple[str, str], ...]  # every parameter, in order; constexprs too
    constexprs: tuple[tuple[str, object], ...]
    arch: str  # what ptxas built: "sm_90a" (Triton targets the "a" arch from sm_90 on)
    warp_size: int
    num_warps: int
    num_ctas: int
    num_stages: int
    shared: int  # dynamic shared memory every launch passes, bytes (metadata "shared")
    global_scratch_size: int  # per program (block), bytes
    profile_scratch_size: int
    fp_fusion: bool  # multiplies and adds fused into FMA (ptxas without --fmad=false)
    fp_fusion_from: str  # why: the option, the environment, or Triton 3.9's default
    ptxas: str  # "triton" (the one Triton ships) or "toolkit"
    ptxas_path: str
    ptxas_version: str
    ptx_version: str  # .version of the PTX: what a driver must support to JIT it
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    tmem_size: int = 0
    env: tuple[tuple[str, str], ...] = ()  # Triton's cache-invalidating variables that were set
    notes: tuple[str, ...] = ()  # what Triton warned about while compiling

    @property
    def threads(self) -> int:
        """The block size every launch of this kernel has: num_warps x the warp size."""
        return self.num_warps * self.warp_size

    @property
    def params(self) -> list[tuple[str, str]]:
        """The parameters the kernel takes from a caller (constexprs are compiled in)."""
        return [(n, t) for n, t in self.signature if t != "constexpr"]

    def to_json(self) -> dict:
        return {
            "version": self.version, "kernel": self.kernel, "name": self.name,
            "signature": dict(self.signature), "constexprs": dict(self.constexprs),
            "arch": self.arch, "warp_size": self.warp_size, "num_warps": self.num_warps,
            "num_ctas": self.num_ctas, "num_stages": self.num_stages, "shared": self.shared,
            "global_scratch_size": self.global_scratch_size,
            "profile_scratch_size": self.profile_scratch_size,
            "fp_fusion": self.fp_fusion, "fp_fusion_from": self.fp_fusion_from,
            "ptxas": self.ptxas, "ptxas_path": self.ptxas_path,
            "ptxas_version": self.ptxas_version, "ptx_version": self.ptx_version,
            "launch_cooperative_grid": self.launch_cooperative_grid,
            "launch_pdl": self.launch_pdl, "tmem_size": self.tmem_size,
            "extra_params": list(EXTRA_PARAMS), "env": dict(self.env),
            "notes": list(self.notes),
        }


# --- the section read back ------------------------------------------------------------------

class _Reader:
    def __init__(self, d: dict, where: str):
        self.d, self.where = d, where

    def bad(self, key: str, want: str):
        v = self.d.get(key)
        shown = repr(v) if isinstance(v, (str, int, float, bool, type(None))) \
            else f"a {type(v).__name__}"
        return ArtifactError(f"{self.where}.{key} must be {want}, not {shown[:60]}")

    def text(self, key: str, default=...) -> str:
        v = self.d.get(key, default)
        if v is ... or not isinstance(v, str) or len(v) > _MAX_TEXT or "\0" in v:
            raise self.bad(key, f"a string of at most {_MAX_TEXT} characters")
        return v

    def int(self, key: str, default=..., low: int = 0) -> int:
        v = self.d.get(key, default)
        if v is ... or isinstance(v, bool) or not isinstance(v, int) or not low <= v < _MAX_INT:
            raise self.bad(key, f"a whole number from {low} to 2**48")
        return v

    def bool(self, key: str, default=...) -> bool:
        v = self.d.get(key, default)
        if not isinstance(v, bool):
            raise self.bad(key, "true or false")
        return v

    def table(self, key: str, values, default=...) -> tuple:
        v = self.d.get(key, default)
        if v is ... or not isinstance(v, dict) or len(v) > _MAX_ENTRIES:
            raise self.bad(key, f"an object of at most {_MAX_ENTRIES} entries")
        for k, x in v.items():
            if len(k) > _MAX_TEXT or not values(x):
                raise ArtifactError(f"{self.where}.{key}: the entry {k[:60]!r} holds a value "
                                    "of the wrong type")
        return tuple(v.items())


def _constant(x) -> bool:
    return (isinstance(x, (bool, float)) or (isinstance(x, int) and abs(x) < _MAX_INT)
            or (isinstance(x, str) and len(x) <= _MAX_TEXT) or x is None)


def read_info(d, where: str = SECTION) -> TritonInfo:
    """The ``triton`` section of a manifest; ``ArtifactError`` naming the field otherwise."""
    if not isinstance(d, dict):
        raise ArtifactError(f"{where} must be an object (a Triton build's metadata)")
    r = _Reader(d, where)
    signature = r.table("signature", lambda t: isinstance(t, str)
                        and (t == "constexpr" or valid_type(t)))
    arch = r.text("arch")
    if not _ARCH.match(arch):
        raise r.bad("arch", "an arch such as sm_90a")
    notes = d.get("notes", [])
    if not (isinstance(notes, list) and len(notes) <= 100
            and all(isinstance(n, str) and len(n) <= _MAX_TEXT for n in notes)):
        raise r.bad("notes", "a list of at most 100 strings")
    return TritonInfo(
        version=r.text("version"), kernel=r.text("kernel"), name=r.text("name"),
        signature=signature, constexprs=r.table("constexprs", _constant),
        arch=arch, warp_size=r.int("warp_size", low=1), num_warps=r.int("num_warps", low=1),
        num_ctas=r.int("num_ctas", low=1), num_stages=r.int("num_stages"),
        shared=r.int("shared"), global_scratch_size=r.int("global_scratch_size", 0),
        profile_scratch_size=r.int("profile_scratch_size", 0), fp_fusion=r.bool("fp_fusion"),
        fp_fusion_from=r.text("fp_fusion_from", ""), ptxas=r.text("ptxas", ""),
        ptxas_path=r.text("ptxas_path", ""), ptxas_version=r.text("ptxas_version", ""),
        ptx_version=r.text("ptx_version", ""),
        launch_cooperative_grid=r.bool("launch_cooperative_grid", False),
        launch_pdl=r.bool("launch_pdl", False), tmem_size=r.int("tmem_size", 0),
        env=r.table("env", lambda x: isinstance(x, str) and len(x) <= _MAX_TEXT, {}),
        notes=tuple(notes))


def triton_info(build) -> TritonInfo | None:
    """The Triton section of a build (None for nvcc's and NVRTC's)."""
    return getattr(build, "triton", None) if getattr(build, "via", None) == "triton" else None
