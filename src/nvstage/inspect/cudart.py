"""Which CUDA runtime a host executable needs, and whether a driver can run it. Pure (bytes in).

How an executable carries the runtime (``nvcc -cudart``):

- ``shared``: a ``DT_NEEDED`` entry ``libcudart.so.N`` (``libcudart.so.10.2`` before CUDA 11);
  the runtime found at run time is of that major version, its minor unknown until then.
- ``static`` (nvcc's default): ``libcudart_static.a`` is linked in. Its version is the
  ``CUDART_VERSION`` its ``cudaRuntimeGetVersion`` stores: the x86-64 code of that function is
  ``test rdi,rdi; je ..; mov dword [rdi], VERSION; xor eax,eax; ret`` (seen in the 13.0 and
  13.5 archives and shared libraries; a stripped executable keeps the code, not the symbol).
  Other ISAs, or a runtime that does not compile to that shape, are "cannot tell".
- ``none`` (``-cudart none``, or a driver-API program): no runtime to judge, unless the file
  names ``libcudart`` as a string, which is a runtime loaded at run time (``dlopen``): "cannot
  tell".

The rules a runtime of version M.m meets a driver supporting CUDA D.d by (NVIDIA, "CUDA
Compatibility", docs.nvidia.com/deploy/cuda-compatibility: "Minor Version Compatibility" and
"Forward Compatibility"):

- D > M: runs (drivers are backward compatible).
- D == M, M >= 11: runs under minor version compatibility, also when d < m; what needs a newer
  driver (new APIs, PTX the driver must JIT) fails at run time, which the image check says.
- D == M, M < 11: needs d >= m (no minor version compatibility before CUDA 11).
- D < M: does not start (``cudaErrorInsufficientDriver``). The forward-compatibility package
  (``cuda-compat-M-m``, on data-center GPUs only, not GeForce) can run it on an older driver
  branch; that is said, not assumed, since it is a package the machine must have installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from nvstage.inspect.elf import _elf

SHARED = "shared"
STATIC = "static"
RUN_TIME = "run-time"  # loaded with dlopen: which version is decided when it runs
NONE = "none"

# cudaRuntimeGetVersion's body in libcudart (x86-64): the stored immediate is CUDART_VERSION.
_STATIC_VERSION = re.compile(rb"\x48\x85\xff\x74.\xc7\x07(....)\x31\xc0\xc3", re.S)
_SONAME = re.compile(r"^libcudart\.so\.(\d+)(?:\.(\d+))?")
_STATIC_MARKS = (b"libcudart_static_", b"cudaRuntimeGetVersion")
MINOR_COMPAT_FROM = 11  # minor version compatibility began with CUDA 11


@dataclass(frozen=True)
class RuntimeNeed:
    """The CUDA runtime an executable needs."""

    linkage: str  # "shared" | "static" | "run-time" | "none"
    major: int | None = None
    minor: int | None = None  # None: decided by the library found at run time
    library: str | None = None  # "libcudart.so.13" for a shared runtime
    note: str = ""  # why the version is unknown

    @property
    def version(self) -> str | None:
        if self.major is None:
            return None
        return f"{self.major}.{self.minor}" if self.minor is not None else f"{self.major}.x"

    def describe(self) -> str:
        if self.linkage == SHARED:
            return f"the shared CUDA runtime {self.library} (CUDA {self.version})"
        if self.linkage == STATIC:
            return (f"the static CUDA {self.version} runtime" if self.major is not None
                    else "a static CUDA runtime of unknown version")
        if self.linkage == RUN_TIME:
            return "a CUDA runtime loaded at run time"
        return "no CUDA runtime"

    def to_json(self) -> dict:
        return {"linkage": self.linkage, "version": self.version, "library": self.library,
                "note": self.note or None}


def runtime_needed(data: bytes, what: str = "executable") -> RuntimeNeed:
    """What runtime the host ELF ``data`` needs (see the module's docstring)."""
    elf = _elf(data, what)
    needed = []
    dyn = elf.get_section_by_name(".dynamic")
    if dyn is not None:
        needed = [t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    for lib in needed:
        m = _SONAME.match(lib)
        if m:
            return RuntimeNeed(SHARED, int(m.group(1)),
                               int(m.group(2)) if m.group(2) is not None else None, lib)
    text = elf.get_section_by_name(".text")
    code = text.data() if text is not None else b""
    versions = [v for v in (int.from_bytes(m.group(1), "little")
                            for m in _STATIC_VERSION.finditer(code))
                if 9000 <= v < 100000 and v % 10 == 0]
    if versions:
        v = max(set(versions), key=versions.count)
        return RuntimeNeed(STATIC, v // 1000, (v % 1000) // 10)
    if any(mark in data for mark in _STATIC_MARKS):
        return RuntimeNeed(STATIC, note="its cudaRuntimeGetVersion is not in the shape "
                                        "nvstage reads (x86-64 libcudart 11 to 13)")
    if b"libcudart" in data:
        return RuntimeNeed(RUN_TIME, note="it names libcudart but does not link it: a "
                                          "runtime loaded at run time (dlopen)")
    return RuntimeNeed(NONE)


@dataclass(frozen=True)
class RuntimeVerdict:
    runs: bool | None  # None: cannot tell
    text: str  # one sentence


def runtime_runs(need: RuntimeNeed, driver: tuple[int, int], *,
                 data_center: bool | None = None) -> RuntimeVerdict:
    """Whether a driver supporting CUDA ``driver`` starts a runtime ``need`` (the rules in the
    module's docstring). ``data_center``: whether the GPU can take the forward-compatibility
    package (None: not known)."""
    d_text = f"{driver[0]}.{driver[1]}"
    if need.linkage == NONE:
        return RuntimeVerdict(True, "it links no CUDA runtime")
    if need.major is None:
        return RuntimeVerdict(None, f"cannot tell which CUDA runtime it needs: {need.note}")
    what = need.describe()
    if driver[0] > need.major:
        return RuntimeVerdict(True, f"{what} runs on a {d_text} driver (newer major)")
    if driver[0] == need.major:
        if need.minor is None or need.minor <= driver[1]:
            return RuntimeVerdict(True, f"{what} runs on a {d_text} driver")
        if need.major >= MINOR_COMPAT_FROM:
            return RuntimeVerdict(True, f"{what} runs on a {d_text} driver by minor version "
                                        f"compatibility (features newer than {d_text} fail "
                                        "at run time)")
        return RuntimeVerdict(False, f"{what} needs a {need.major}.{need.minor} driver or "
                                     f"newer; CUDA {need.major} has no minor version "
                                     "compatibility")
    compat = ""
    if data_center is not False:
        where = "on a data-center GPU" if data_center is None else "on this data-center GPU"
        pkg = (f"cuda-compat-{need.major}-{need.minor}" if need.minor is not None
               else f"cuda-compat-{need.major}-*")
        compat = (f"; the forward-compatibility package ({pkg}) may run it {where} with an "
                  "older driver")
    return RuntimeVerdict(False, f"{what} needs a CUDA {need.major} driver or newer; a "
                                 f"{d_text} driver refuses to start it{compat}")
