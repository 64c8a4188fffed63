"""Is there a CUDA driver and a GPU? Asked through ctypes, before cuda-python is touched.

Without a driver, cuda.core 1.2.2's ``ObjectCode.get_kernel`` raised a confusing SystemError and
a second call hung (seen on a machine with no GPU), so nothing that loads code may run unless
this probe says yes. The probe itself only dlopens libcuda and calls cuInit, cuDeviceGetCount
and cuDeviceGetAttribute (GPU 0's compute capability, for the default arch).

Before cuInit the probe asks for eager module loading (``CUDA_MODULE_LOADING=EAGER``) unless
the user chose a mode: module load time is then measured where nvstage reports it (apart from
T), and no first launch waits on a loader while nvstage's hold kernel occupies the stream
(CUDA C++ Programming Guide, "Lazy Loading": loading may need a context synchronisation).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from dataclasses import asdict, dataclass

from nvstage.errors import NoDriver

_LIBS = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")


@dataclass(frozen=True)
class DriverProbe:
    available: bool  # a driver answered and at least one GPU is visible
    reason: str  # one line: why not, or what was found
    driver_version: str | None = None  # "13.0" (the CUDA version the driver supports)
    device_count: int = 0
    arch: str | None = None  # GPU 0's, "sm_90", from cuDeviceGetAttribute

    def to_json(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def probe() -> DriverProbe:
    if os.environ.get("NVSTAGE_NO_GPU"):  # behave as a machine without a GPU (tests, CI)
        return DriverProbe(False, "NVSTAGE_NO_GPU is set: GPU use is turned off")
    lib = None
    for name in _LIBS:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return DriverProbe(False, "no CUDA driver on this machine (libcuda not found)")
    version = ctypes.c_int(0)
    try:
        lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        return DriverProbe(False, "libcuda was found but is not a CUDA driver library")
    ver = f"{version.value // 1000}.{(version.value % 1000) // 10}" if version.value else None
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")  # read by cuInit
    rc = lib.cuInit(0)
    if rc != 0:
        return DriverProbe(False, f"the CUDA driver {ver or ''} did not initialise "
                                  f"(cuInit returned {rc}: no usable GPU)".replace("  ", " "), ver)
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        return DriverProbe(False, f"the CUDA driver {ver} sees no GPU", ver, 0)
    arch = _arch_of_gpu0(lib)
    return DriverProbe(True, f"CUDA driver {ver}, {count.value} GPU(s)", ver, count.value,
                       arch)


_CC_MAJOR, _CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR


def _arch_of_gpu0(lib) -> str | None:
    dev = ctypes.c_int(0)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    try:
        if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return None
        if (lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, dev) != 0
                or lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, dev) != 0):
            return None
    except AttributeError:
        return None
    return f"sm_{major.value}{minor.value}" if major.value else None


def require() -> DriverProbe:
    """The probe, or ``NoDriver`` with a one-line reason and what still works."""
    p = probe()
    if not p.available:
        raise NoDriver(
            f"cannot run on a GPU: {p.reason}",
            hint="compile, show, occupancy, model and the other offline commands still work; "
                 "run this on a machine with an NVIDIA GPU and driver (nvstage doctor checks)",
        )
    return p
