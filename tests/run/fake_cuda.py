"""A stand-in for the parts of cuda.core 1.2.2 that nvstage's engine uses, for machines with
no GPU. It executes every operation at once on host memory, on a simulated GPU clock.

What is real here: ``LaunchConfig`` and ``EventOptions`` (cuda.core's own classes, which need
no driver), and the argument packing: ``launch`` hands the arguments to cuda.core's own
``ParamHolder`` and the fake kernels read their parameters back from the packed bytes, so a
scalar of the wrong width or a mis-packed buffer shows up as a wrong value or a width error.
The method signatures are checked against the installed cuda.core by
``test_engine_offline.test_fake_signatures_match_cuda_core``.

What is not: timing (a made-up clock), concurrency, the hold kernel's wait (it is treated as
released in time), and how the driver reports a fault (here a ``CUDAError`` at the next
synchronisation, as cuda.core raises one for CUDA_ERROR_ILLEGAL_ADDRESS).
"""

from __future__ import annotations

import ctypes
import types
from collections import namedtuple

import numpy as np
from cuda.core import Buffer as RealBuffer
from cuda.core import EventOptions, LaunchConfig
from cuda.core._kernel_arg_handler import ParamHolder
from cuda.core._utils.cuda_utils import CUDAError

ComputeCapability = namedtuple("ComputeCapability", "major minor")
ParamInfo = namedtuple("ParamInfo", "offset size")

KERNEL_NS = 5_000.0
EMPTY_NS = 1_000.0
COPY_GBS = 25.0  # bytes per ns


class FakeGPU:
    """The simulated device: memory by address, a clock, a sticky fault, the kernels."""

    def __init__(self):
        self.clock_ns = 0.0
        self.mem: dict[int, np.ndarray] = {}
        self.fault: str | None = None
        self.kernels: dict[str, FakeKernelDef] = {}
        self.launches: list[tuple[str, LaunchConfig]] = []
        self.loaded: list[tuple[str, bytes, str]] = []  # (kind, image, name)
        self.alloc_limit = 1 << 40
        self.fail_launch: str | None = None  # a kernel whose launch call raises
        self.hang = False  # work that never finishes: no event is ever done
        self.bad_image: str | None = None  # an image the driver refuses at the first lookup

    def array(self, ptr: int) -> np.ndarray:
        if ptr not in self.mem:
            self.fault = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
            raise KeyError(ptr)
        return self.mem[ptr]

    def check(self) -> None:
        if self.fault:
            raise CUDAError(self.fault)


class FakeKernelDef:
    def __init__(self, name, sizes, fn, ns=KERNEL_NS, static_shared=0):
        self.name, self.sizes, self.fn, self.ns = name, tuple(sizes), fn, ns
        self.static_shared = static_shared


GPU = FakeGPU()


class _Props:
    multiprocessor_count = 132
    clock_rate = 1_980_000
    memory_clock_rate = 2_619_000
    global_memory_bus_width = 6144
    l2_cache_size = 50 * 1024 * 1024
    max_shared_memory_per_block_optin = 232_448
    async_engine_count = 3


class Device:
    def __init__(self, device_id=0):
        self.device_id = device_id
        self.name = "Fake H200"
        self.pci_bus_id = "0000:00:00.0"
        self.compute_capability = ComputeCapability(9, 0)
        self.properties = _Props()

    def set_current(self, ctx=None):
        return None

    def create_stream(self, obj=None, options=None):
        return Stream()

    def allocate(self, size, *, stream):
        _stream(stream)
        if size > GPU.alloc_limit:
            raise CUDAError("CUDA_ERROR_OUT_OF_MEMORY: out of memory")
        return Buffer(size)


class LegacyPinnedMemoryResource:
    def allocate(self, size, *, stream=None):
        if stream is not None:
            _stream(stream)
        return Buffer(size)


def _stream(s) -> Stream:
    if not isinstance(s, Stream):
        raise TypeError(f"stream must be a Stream, not {type(s).__name__}")
    return s


class Buffer:
    def __init__(self, size):
        self._arr = np.zeros(max(size, 1), np.uint8)
        self._size = size
        GPU.mem[self.handle] = self._arr

    @property
    def handle(self) -> int:
        return int(self._arr.ctypes.data)

    @property
    def size(self) -> int:
        return self._size

    def copy_from(self, src, *, stream, options=None):
        _stream(stream)
        if src.size != self.size:
            raise ValueError("buffer sizes differ")
        self._arr[: self.size] = src._arr[: self.size]
        GPU.clock_ns += 500 + self.size / COPY_GBS

    def copy_to(self, dst=None, *, stream, options=None):
        _stream(stream)
        dst.copy_from(self, stream=stream)
        return dst

    def fill(self, value, *, stream):
        _stream(stream)
        self._arr[:] = value


class Event:
    def __init__(self, t, timing):
        self.t, self.timing = t, timing

    def sync(self):
        GPU.check()

    @property
    def is_done(self) -> bool:
        GPU.check()  # a sticky error is raised by the query, as cuEventQuery returns it
        return not GPU.hang

    def __sub__(self, other):
        if not (self.timing and other.timing):
            raise RuntimeError("timing_enabled is False on an event")
        return (self.t - other.t) / 1e6  # milliseconds, as cuda.core returns


class Stream:
    def record(self, event=None, options=None):
        GPU.clock_ns += 10
        return Event(GPU.clock_ns, bool(options and options.timing_enabled))

    def sync(self):
        GPU.check()


class Kernel:
    def __init__(self, d: FakeKernelDef):
        self._d = d
        self.handle = id(d)
        # 48 KB less the kernel's static shared memory, as the driver reports it
        self.attributes = types.SimpleNamespace(
            max_dynamic_shared_size_bytes=48 * 1024 - d.static_shared)

    @property
    def num_arguments(self) -> int:
        return len(self._d.sizes)

    @property
    def arguments_info(self) -> list:
        offsets = np.cumsum((0, *self._d.sizes[:-1])) if self._d.sizes else []
        return [ParamInfo(int(o), s) for o, s in zip(offsets, self._d.sizes)]


class ObjectCode:
    def __init__(self, kind, module, name):
        self.kind, self.module, self.name = kind, module, name

    @staticmethod
    def from_cubin(module, *, name="", symbol_mapping=None):
        GPU.loaded.append(("cubin", module, name))
        return ObjectCode("cubin", module, name)

    @staticmethod
    def from_fatbin(module, *, name="", symbol_mapping=None):
        GPU.loaded.append(("fatbin", module, name))
        return ObjectCode("fatbin", module, name)

    @staticmethod
    def from_ptx(module, *, name="", symbol_mapping=None):
        GPU.loaded.append(("ptx", module, name))
        return ObjectCode("ptx", module, name)

    def get_kernel(self, name):
        if GPU.bad_image and self.name != "nvstage_helpers":
            raise CUDAError(GPU.bad_image)  # cuda.core loads the image at the first lookup
        if name not in GPU.kernels:
            raise CUDAError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name})")
        return Kernel(GPU.kernels[name])


def _width(arg) -> int:
    if isinstance(arg, (Buffer, RealBuffer)):
        return 8
    if isinstance(arg, np.generic):
        return arg.dtype.itemsize
    if isinstance(arg, (int, float)):
        return 8  # cuda.core packs a Python int as intptr_t and a float as a double
    raise TypeError(f"unsupported kernel argument {type(arg).__name__}")


def launch(stream, config, kernel, *kernel_args):
    _stream(stream)
    if not isinstance(config, LaunchConfig):
        raise TypeError("config must be a cuda.core LaunchConfig")
    d = kernel._d
    if d.name == GPU.fail_launch:
        raise CUDAError("CUDA_ERROR_INVALID_VALUE: invalid argument")
    if len(kernel_args) != len(d.sizes):
        raise CUDAError(f"{d.name} takes {len(d.sizes)} arguments, got {len(kernel_args)}")
    for i, (a, size) in enumerate(zip(kernel_args, d.sizes)):
        if _width(a) != size:
            raise CUDAError(f"{d.name} argument {i}: {size} bytes declared, "
                            f"{_width(a)} packed ({type(a).__name__})")
    real = [RealBuffer.from_handle(a.handle, a.size, owner=a) if isinstance(a, Buffer) else a
            for a in kernel_args]
    holder = ParamHolder(real)  # cuda.core's own packing
    n = len(real)
    ptrs = list((ctypes.c_void_p * n).from_address(holder.ptr)) if n else []
    params = [ctypes.string_at(p, s) for p, s in zip(ptrs, d.sizes)]
    GPU.launches.append((d.name, config))
    if GPU.fault is None:
        try:
            d.fn(params, config)
        except KeyError:
            pass  # GPU.fault is set: reported at the next synchronisation
    GPU.clock_ns += d.ns


# -- fake kernels: read their parameters from the packed bytes --------------------------


def _ptr(b: bytes) -> int:
    return int(np.frombuffer(b, np.uint64)[0])


def _i32(b: bytes) -> int:
    return int(np.frombuffer(b, np.int32)[0])


def _f32(b: bytes) -> float:
    return float(np.frombuffer(b, np.float32)[0])


def _view(ptr: int, dtype, n: int) -> np.ndarray:
    arr = GPU.array(ptr).view(dtype)
    if n > arr.size:
        GPU.fault = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
        raise KeyError(ptr)
    return arr[:n]


def _vadd(p, cfg):  # vadd(const float* a, const float* b, float* c, int n)
    n = _i32(p[3])
    a, b, c = (_view(_ptr(x), np.float32, n) for x in p[:3])
    c[:] = a + b


def _saxpy(p, cfg):  # saxpy(int n, float a, const float* x, float* y)
    n, a = _i32(p[0]), _f32(p[1])
    x, y = _view(_ptr(p[2]), np.float32, n), _view(_ptr(p[3]), np.float32, n)
    y[:] = np.float32(a) * x + y


def reset() -> FakeGPU:
    global GPU
    GPU = FakeGPU()
    for d in (FakeKernelDef("nvstage_empty", (), lambda p, c: None, EMPTY_NS),
              FakeKernelDef("nvstage_hold", (8, 8), lambda p, c: None, 0.0),
              FakeKernelDef("vadd", (8, 8, 8, 4), _vadd),
              FakeKernelDef("saxpy", (4, 4, 8, 8), _saxpy)):
        GPU.kernels[d.name] = d
    return GPU


def module() -> types.ModuleType:
    """A module to put in ``sys.modules["cuda.core"]``."""
    m = types.ModuleType("cuda.core")
    for name in ("Device", "LegacyPinnedMemoryResource", "Buffer", "Event", "Stream", "Kernel",
                 "ObjectCode", "launch"):
        setattr(m, name, globals()[name])
    m.LaunchConfig, m.EventOptions = LaunchConfig, EventOptions
    return m
