"""Is there a CUDA driver and a GPU? Asked through ctypes, before cuda-python is touched.

Without a driver, cuda.core's module loading raised a confusing SystemError and a second call
hung (see shared/TOOLCHAIN_FACTS.md), so nothing that loads code may run unless this probe
says yes. The probe itself only dlopens libcuda and calls cuInit / cuDeviceGetCount.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from dataclasses import asdict, dataclass

from ..errors import NoDriver

_LIBS = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")


@dataclass(frozen=True)
class DriverProbe:
    available: bool  # a driver answered and at least one GPU is visible
    reason: str  # one line: why not, or what was found
    driver_version: str | None = None  # "13.0" (the CUDA version the driver supports)
    device_count: int = 0

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
    rc = lib.cuInit(0)
    if rc != 0:
        return DriverProbe(False, f"the CUDA driver {ver or ''} did not initialise "
                                  f"(cuInit returned {rc}: no usable GPU)".replace("  ", " "), ver)
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        return DriverProbe(False, f"the CUDA driver {ver} sees no GPU", ver, 0)
    return DriverProbe(True, f"CUDA driver {ver}, {count.value} GPU(s)", ver, count.value)


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
