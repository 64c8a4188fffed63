"""Run a validated workload on the GPU with cuda.core, and measure it.

Import only after ``driver.require()`` said yes: without a driver, cuda.core 1.2.2's
``ObjectCode.get_kernel`` raised a SystemError and a second call hung (seen here, no GPU).

API used (cuda.core 1.2.2, checked against its stubs): ``Device(0).set_current()``,
``create_stream()``, ``Device.allocate(n, *, stream)``, ``LegacyPinnedMemoryResource().allocate(n,
*, stream=None)``, ``Buffer.copy_from(src, *, stream)`` / ``copy_to(dst, *, stream)`` /
``fill(0, *, stream)``, ``Stream.record(options=EventOptions(timing_enabled=True))``,
``Event - Event`` in milliseconds, ``LaunchConfig(grid=, block=, shmem_size=)``,
``launch(stream, config, kernel, *args)`` (numpy scalars keep their width, a Buffer becomes its
pointer), ``ObjectCode.from_cubin / from_fatbin / from_ptx(bytes, *, name=)`` loaded lazily at
``get_kernel``. Errors from the driver (a fault, an allocation) surface as exceptions at the
call or at the next synchronisation; every one is turned into ``GpuRunFailed`` naming the op.

Per repetition there are two passes over the same sequence of operations:

1. The GPU-time pass: every op is bracketed by a timed event pair while a hold kernel keeps
   the stream busy, then released; the pair measures the op's GPU time alone (t_kernel,
   t_transfer). The hold flag reports when the host was too slow and the hold expired.
2. The wall pass: the ops issued as the mode says (``serialized``: synchronise after each;
   ``pipelined``: one synchronisation at the end), with ``perf_counter_ns`` around each launch
   call (t_launch) and around the whole pass (wall). Plain ``Stream.sync`` here, no events, so
   nothing perturbs it (the ops already ran to completion once under a bounded wait).

After the last repetition one timeline pass (events after each op) lays the ops out in time
for the trace. Module load (and PTX JIT) and the noise floor are measured once.

Until the ops have run to completion once, every wait for the GPU is bounded
(``Engine._wait``: an event polled, as the default spin synchronisation does, for at most
``NVSTAGE_GPU_TIMEOUT_S``): a kernel that never ends is an error that says so, never a hang.
Measured wall passes then use plain ``Stream.sync``: an event and a polling loop per op would
add host time to the serialized wall time.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from nvstage.errors import GpuRunFailed, NvstageError, WorkloadError
from nvstage.run.decompose import NoiseFloor, OpSamples, decompose
from nvstage.run.results import RunResult, Span, Timeline
from nvstage.run.workload.data import initial_contents, run_check
from nvstage.run.workload.spec import BufferArg, Launch, Workload
from nvstage.run.cupti import CuptiSession

# A released hold ends within microseconds of the issue call; the timeout is a safety net that
# costs this much per sample if the host is ever held up, so it stays short.
HOLD_TIMEOUT_NS = 200_000_000
# After this many held samples, if most of them expired, holds are given up (and said so):
# something in the issue path waits for the device, and every sample would cost a timeout.
HOLD_TRIAL, HOLD_GIVE_UP = 5, 0.5
FLOOR_SAMPLES = 21
# Dynamic shared memory above this needs the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES raised
# first (CUDA C++ Programming Guide, compute capabilities: "more than 48 KB ... opt-in"); the
# loaded kernel's own limit (48 KB less its static shared memory) is asked for when it can be.
DEFAULT_DYNAMIC_SHARED = 48 * 1024
# How long one wait for the GPU may take before the run is given up: a kernel that never ends
# must not hang nvstage. Long kernels: raise it through the environment.
WAIT_LIMIT_ENV = "NVSTAGE_GPU_TIMEOUT_S"
WAIT_LIMIT_S = 60.0


@dataclass
class Loaded:
    """What the engine needs from the compile step."""

    kind: str  # "cubin" | "fatbin" | "ptx"
    image: bytes
    mangled: dict[str, str]  # kernel name as the workload wrote it -> symbol to load
    helper_cubin: bytes
    # Kept Triton builds: one module each, (kind, image, kernel symbols); and per kernel the
    # null pointers Triton 3.9 appends to its arguments (global and profile scratch).
    modules: list | None = None
    extra_args: dict | None = None


@dataclass
class _Op:
    index: int
    kind: str  # "launch" | "h2d" | "d2h"
    name: str
    issue: Callable[[], None]
    nbytes: int = 0


def kernel_args(w: Workload, li: int, values, buffers) -> tuple:
    """The arguments of launch ``li`` as ``cuda.core.launch`` takes them.

    A buffer argument is the device ``Buffer`` (cuda.core passes its pointer); a scalar is a
    numpy scalar of the declared width (a plain Python int would be packed as 8 bytes and a
    float as a double, whatever the kernel declares).
    """
    import numpy as np

    lz: Launch = w.launches[li]
    out = []
    for j, a in enumerate(lz.args):
        if isinstance(a, BufferArg):
            out.append(buffers[a.buffer])
        else:
            v = w.scalar_value(a, values, w._where(f"launch[{li}]", f"args[{j}]"))
            out.append(np.dtype(a.dtype).type(v))
    return tuple(out)


def _dims3(v) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    return tuple(int(x) for x in (*t, 1, 1, 1)[:3])  # type: ignore[return-value]


def packed_launch(stream, grid, block, shared: int, kernel, args: tuple) -> Callable[[], None]:
    """One launch as a call of ``cuLaunchKernel`` with its argument array packed once.

    ``cuda.core.launch`` packs the arguments on every call: about 1.6 us more per launch than
    the bare binding on an H200 (docs/measured), which t_launch would count as the workload's.
    The packed call costs what a cuda.bindings loop costs, about what C++ pays. A CUkernel
    (cuda.core loads libraries) is taken where cuLaunchKernel expects a CUfunction (CUDA 12+).
    """
    import numpy as np
    from cuda.bindings import driver as cu

    keep = [np.array([int(a.handle)], dtype=np.uint64) if hasattr(a, "handle")
            else np.array([a]) for a in args]  # numpy scalars keep their width
    argv = np.array([k.ctypes.data for k in keep], dtype=np.uint64)
    fn = cu.CUfunction(int(kernel.handle))
    st = cu.CUstream(int(stream.handle))
    gx, gy, gz = _dims3(grid)
    bx, by, bz = _dims3(block)
    ptr, ok, call = argv.ctypes.data, cu.CUresult.CUDA_SUCCESS, cu.cuLaunchKernel

    def issue(_keep=(keep, argv)) -> None:  # the arrays live as long as the op
        err, = call(fn, gx, gy, gz, bx, by, bz, shared, st, ptr, 0)
        if err != ok:
            name = cu.cuGetErrorName(err)[1]
            raise RuntimeError(f"cuLaunchKernel: {name.decode() if name else err!r}")

    return issue


def _real_cuda_core(kernel) -> bool:
    return type(kernel).__module__.startswith("cuda.core")


def _host_view(buf, nbytes: int):
    """A numpy byte view of a pinned host buffer (through its address: works on 3.11)."""
    import numpy as np

    if nbytes == 0:
        return np.zeros(0, np.uint8)
    raw = (ctypes.c_uint8 * nbytes).from_address(int(buf.handle))
    return np.ctypeslib.as_array(raw)


class Engine:
    def __init__(self, w: Workload, loaded: Loaded, *, mode: str, arch: str,
                 use_cupti: bool = False, log: Callable[[str], None] | None = None):
        if mode not in ("serialized", "pipelined"):
            raise ValueError(f"mode must be serialized or pipelined, not {mode!r}")
        self.w, self.loaded, self.mode, self.arch = w, loaded, mode, arch
        self.use_cupti = use_cupti
        self.log = log or (lambda s: None)
        self.values = w.param_values()
        self.result = RunResult(w.name, mode, arch)
        self._kernels: dict = {}
        self._dev_bufs: dict = {}
        self._pin_in: dict = {}
        self._pin_out: dict = {}
        self._views_out: dict = {}
        self._scratch: list = []  # Triton kernels' scratch buffers, alive as long as the run
        self.use_hold = True
        self._proven = False  # the op sequence has run to completion once (bounded)
        self._holds = [0, 0]  # held samples, of which expired
        try:
            self.wait_limit = float(os.environ.get(WAIT_LIMIT_ENV, WAIT_LIMIT_S))
        except ValueError:
            self.wait_limit = WAIT_LIMIT_S

    def _wait(self, what: str, event=None) -> None:
        """Wait until the stream (or ``event``) is done, as cuStreamSynchronize does by
        default (spinning), but for at most ``wait_limit`` seconds. A driver error (a fault)
        is raised by the query; a wait past the limit is ``GpuRunFailed`` with the context
        marked lost: the work is still running and cannot be taken back."""
        e = self.stream.record() if event is None else event
        if e.is_done:
            return
        deadline = time.perf_counter() + self.wait_limit
        while not e.is_done:
            if time.perf_counter() > deadline:
                self.result.status = "failed"
                raise GpuRunFailed(
                    f"{what} did not finish within {self.wait_limit:g} s: a kernel that "
                    "never ends, or one longer than the limit", op=what, result=self.result,
                    hint=f"for long kernels raise the limit: {WAIT_LIMIT_ENV}=SECONDS",
                    context_lost=True)

    def _step(self, what: str, fn: Callable[[], object]):
        """Run one step; a driver error becomes ``GpuRunFailed`` naming ``what``."""
        try:
            return fn()
        except NvstageError:
            raise
        except Exception as e:
            self.result.status = "failed"
            raise GpuRunFailed(f"{what} failed: {e}", op=what, result=self.result) from None

    # -- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        self._step("creating the CUDA context and stream", self._context)
        self._step("loading nvstage's helper kernels", self._load_helpers)
        self._load_module()
        self._allocate()

    def _context(self) -> None:
        from cuda.core import Device, EventOptions, LegacyPinnedMemoryResource

        self.dev = Device(0)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.timing = EventOptions(timing_enabled=True)
        self.pinned_mr = LegacyPinnedMemoryResource()

    def _load_helpers(self) -> None:
        import numpy as np
        from cuda.core import LaunchConfig, ObjectCode, launch

        obj = ObjectCode.from_cubin(self.loaded.helper_cubin, name="nvstage_helpers")
        self.k_empty = obj.get_kernel("nvstage_empty")
        self.k_hold = obj.get_kernel("nvstage_hold")
        self.one = LaunchConfig(grid=1, block=1)
        self.flag_buf = self.pinned_mr.allocate(8, stream=self.stream)
        self.flag = _host_view(self.flag_buf, 8).view("uint32")
        # Run both helpers once, the hold already released, before any timed use: with lazy
        # loading (the default since CUDA 12.2) a kernel's first launch may wait for the
        # device, which a running hold kernel would keep busy (CUDA C++ Programming Guide,
        # Lazy Loading, "Potential Hazards").
        self.flag[0], self.flag[1] = 1, 0
        launch(self.stream, self.one, self.k_empty)
        launch(self.stream, self.one, self.k_hold, self.flag_buf, np.uint64(HOLD_TIMEOUT_NS))
        self._wait("running nvstage's helper kernels")
        self.flag[:] = 0

    def _load_module(self) -> None:
        """Load the workload's code and every kernel: timed apart (includes any PTX JIT)."""
        from cuda.core import ObjectCode

        ctor = {"cubin": ObjectCode.from_cubin, "fatbin": ObjectCode.from_fatbin,
                "ptx": ObjectCode.from_ptx}[self.loaded.kind]
        image = self.loaded.image
        if self.loaded.kind == "ptx" and not image.endswith(b"\0"):
            image += b"\0"  # the driver reads PTX as a NUL-terminated string
        t0 = time.perf_counter_ns()
        modules = self.loaded.modules or [(self.loaded.kind, image, None)]
        objs = [(self._step(f"loading the {kind}" + (f" of {names[0]}" if names else ""),
                            lambda c=ObjectCode.from_cubin if names else ctor, i=img:
                            c(i, name=self.w.name)), names)
                for kind, img, names in modules]
        for name in dict.fromkeys(lz.kernel for lz in self.w.launches):
            symbol = self.loaded.mangled.get(name, name)
            obj = next((o for o, names in objs if names is None or symbol in names), objs[0][0])
            try:
                self._kernels[name] = obj.get_kernel(symbol)
            except Exception as e:
                self.result.status = "failed"
                raise _load_failure(name, symbol, self.loaded.kind, len(self.loaded.image),
                                    first=not self._kernels, error=e,
                                    result=self.result) from None
        t1 = time.perf_counter_ns()
        self.result.load = {
            "kind": self.loaded.kind, "bytes": sum(len(img) for _, img, _ in modules),
            "seconds": (t1 - t0) / 1e9,
            "includes_ptx_jit": self.loaded.kind == "ptx",
            "module_loading": os.environ.get("CUDA_MODULE_LOADING", "driver default"),
            "note": "module load and kernel lookup, measured once; not one of the terms of T",
        }
        for i, lz in enumerate(self.w.launches):  # the driver's own parameter list
            k = self._kernels[lz.kernel]
            try:
                n = k.num_arguments
            except Exception as e:  # cuKernelGetParamInfo needs a 12.4+ driver
                self.result.notes.append(f"argument count of {lz.kernel} not checked "
                                         f"against the loaded module ({e})")
                continue
            extra = self._extra(lz.kernel)
            if n != len(lz.args) + extra:
                raise WorkloadError(f"kernel {lz.kernel} takes {n} argument(s) (from the "
                                    f"loaded module), the workload passes {len(lz.args)}"
                                    + (f" and Triton's {extra}" if extra else ""),
                                    where=self.w._where(f"launch[{i}]", "args"))
            self._check_widths(i, lz, k)
        self._opt_in_shared()

    def _extra(self, kernel: str) -> int:
        """Arguments appended to the workload's own: Triton's scratch pointers."""
        return (self.loaded.extra_args or {}).get(kernel, 0)

    def _triton_args(self, li: int, d: dict) -> tuple:
        """Triton 3.9's two appended arguments for launch ``li`` (``driver.c``, ``launch``):
        the global and the profile scratch, each null where the kernel asks for none, else
        a device buffer of grid x num_ctas x its size per program (``CudaLauncher``),
        allocated once per launch entry: scratch holds nothing across launches."""
        import math

        import numpy as np

        k = next(k for k in self.w.code.triton if k.name == self.w.launches[li].kernel)
        out = []
        for size in (k.global_scratch_size, k.profile_scratch_size):
            if not size:
                out.append(np.uint64(0))
                continue
            nbytes = math.prod(d["grid"]) * k.num_ctas * size
            buf = self._step(f"allocating {nbytes} bytes of Triton scratch for {k.name}",
                             lambda n=nbytes: self.dev.allocate(n, stream=self.stream))
            self._scratch.append(buf)
            out.append(buf)
        return tuple(out)

    def _check_widths(self, i: int, lz: Launch, kernel) -> None:
        """Each argument's packed width against the loaded kernel's parameter sizes: the
        driver does not check them, and a wrong width passes garbage or faults."""
        import numpy as np

        try:
            sizes = [int(p.size) for p in kernel.arguments_info]  # ParamInfo(offset, size)
        except Exception as e:  # cuKernelGetParamInfo needs a 12.4+ driver
            self.result.notes.append(f"argument sizes of {lz.kernel} not checked against "
                                     f"the loaded module ({e})")
            return
        for j, (a, size) in enumerate(zip(lz.args, sizes)):
            width = 8 if isinstance(a, BufferArg) else np.dtype(a.dtype).itemsize
            if width != size:
                what = "a pointer" if isinstance(a, BufferArg) else a.tag
                raise WorkloadError(f"kernel {lz.kernel} argument {j} is {size} bytes in the "
                                    f"loaded module, the workload passes {what} ({width} "
                                    "bytes)", where=self.w._where(f"launch[{i}]",
                                                                  f"args[{j}]"))

    def _opt_in_shared(self) -> None:
        """Raise each kernel's dynamic shared memory limit where a launch asks for more."""
        need: dict[str, int] = {}
        for i, lz in enumerate(self.w.launches):
            shared = self.w.dims(i, self.values)["shared"]
            if shared > _dynamic_limit(self._kernels[lz.kernel]):
                need[lz.kernel] = max(need.get(lz.kernel, 0), shared)
        for name, nbytes in need.items():
            def opt_in(k=self._kernels[name], n=nbytes):
                from cuda.bindings import driver

                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                err, = driver.cuKernelSetAttribute(attr, n, k.handle,
                                                   driver.CUdevice(self.dev.device_id))
                if err != driver.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"{err.name} (the device allows at most "
                                       f"{_optin_limit(self.dev)} bytes per block)")

            self._step(f"allowing kernel {name} {nbytes} bytes of dynamic shared memory",
                       opt_in)

    def _allocate(self) -> None:
        import numpy as np

        self.initial = initial_contents(self.w, self.values)
        for b in self.w.buffers:
            nbytes = self.w.nbytes(b, self.values)
            what = f"allocating buffer {b.name} ({nbytes} bytes)"

            def alloc(b=b, nbytes=nbytes):
                self._dev_bufs[b.name] = self.dev.allocate(nbytes, stream=self.stream)
                if b.name in self.w.to_device:
                    pin = self.pinned_mr.allocate(nbytes, stream=self.stream)
                    _host_view(pin, nbytes)[:] = self.initial[b.name].view(np.uint8)
                    self._pin_in[b.name] = pin
                if b.name in self.w.from_device:
                    pin = self.pinned_mr.allocate(nbytes, stream=self.stream)
                    self._pin_out[b.name] = pin
                    self._views_out[b.name] = _host_view(pin, nbytes).view(b.dtype)
                if b.name not in self.w.to_device:  # defined contents if not copied in
                    self._dev_bufs[b.name].fill(0, stream=self.stream)

            self._step(what, alloc)
        self._step("initialising the buffers", lambda: self._wait("initialising the buffers"))

    def _ops(self) -> list[_Op]:
        from cuda.core import LaunchConfig, launch

        ops: list[_Op] = []
        s = self.stream
        for kind, name, li in self.w.operations():
            idx = len(ops)
            if kind == "launch":
                lz = self.w.launches[li]
                d = self.w.dims(li, self.values)
                args = kernel_args(self.w, li, self.values, self._dev_bufs)
                if self._extra(lz.kernel):
                    args += self._triton_args(li, d)
                kernel = self._kernels[lz.kernel]
                if _real_cuda_core(kernel):
                    issue = packed_launch(s, d["grid"], d["block"], d["shared"], kernel, args)
                else:  # tests' fake cuda.core: its own launch
                    cfg = LaunchConfig(grid=d["grid"], block=d["block"],
                                       shmem_size=d["shared"])
                    issue = lambda c=cfg, k=kernel, a=args: launch(s, c, k, *a)  # noqa: E731
                ops.append(_Op(idx, "launch", lz.kernel, issue))
            elif kind == "h2d":
                dst, src = self._dev_bufs[name], self._pin_in[name]
                ops.append(_Op(idx, "h2d", name,
                               lambda d=dst, x=src: d.copy_from(x, stream=s), src.size))
            else:
                src, dst = self._dev_bufs[name], self._pin_out[name]
                ops.append(_Op(idx, "d2h", name,
                               lambda d=dst, x=src: x.copy_to(d, stream=s), src.size))
        return ops

    # -- measuring ---------------------------------------------------------------------
    def _held(self, issue: Callable[[], None], what: str = "a timed op"
              ) -> tuple[float, float, bool]:
        """(GPU ns, host ns of the issue call, hold held) for one op."""
        import numpy as np
        from cuda.core import launch

        hold = self.use_hold  # False once given up (see _count_hold): a plain event pair
        if hold:
            self.flag[:] = 0
            launch(self.stream, self.one, self.k_hold, self.flag_buf,
                   np.uint64(HOLD_TIMEOUT_NS))
        try:
            e0 = self.stream.record(options=self.timing)
            h0 = time.perf_counter_ns()
            issue()
            h1 = time.perf_counter_ns()
            e1 = self.stream.record(options=self.timing)
        finally:
            if hold:  # release: e0, the op and e1 are all queued now (or it failed)
                self.flag[0] = 1
        self._wait(what, e1)
        held = hold and bool(self.flag[1] == 0)
        if hold:
            self._count_hold(held)
        return (e1 - e0) * 1e6, float(h1 - h0), held

    def _count_hold(self, held: bool) -> None:
        self._holds[0] += 1
        self._holds[1] += not held
        n, expired = self._holds
        if n >= HOLD_TRIAL and expired / n > HOLD_GIVE_UP:
            self.use_hold = False
            self.result.notes.append(
                f"the hold kernel expired in {expired} of {n} samples (something in the issue "
                "path waits for the GPU): given up, so GPU times from here include launch "
                "latency")

    def noise_floor(self) -> NoiseFloor:
        return self._step("measuring the noise floor (empty kernel, 4-byte copy)",
                          self._noise_floor)

    def _noise_floor(self) -> NoiseFloor:
        import numpy as np
        from cuda.core import launch

        timer = min(self._timer_cost() for _ in range(FLOOR_SAMPLES))
        diffs = []
        what = "measuring the noise floor"
        for _ in range(FLOOR_SAMPLES):
            self._wait(what)
            a = self.stream.record(options=self.timing)
            b = self.stream.record(options=self.timing)
            self._wait(what, b)
            diffs.append((b - a) * 1e6)
        nonzero = [d for d in diffs if d > 0]
        empty = [self._held(lambda: launch(self.stream, self.one, self.k_empty), what)[0]
                 for _ in range(FLOOR_SAMPLES)]
        small_dev = self.dev.allocate(4, stream=self.stream)
        small_pin = self.pinned_mr.allocate(4, stream=self.stream)
        _host_view(small_pin, 4)[:] = np.zeros(4, np.uint8)
        copy = [self._held(lambda: small_dev.copy_from(small_pin, stream=self.stream), what)[0]
                for _ in range(FLOOR_SAMPLES)]
        if self.use_hold:  # the breaker judges the workload's own ops from here on
            self._holds = [0, 0]
        return NoiseFloor(
            event_resolution_ns=min(nonzero) if nonzero else None,
            empty_kernel_ns=statistics.median(empty),
            smallest_copy_ns=statistics.median(copy),
            host_timer_ns=float(timer),
        )

    @staticmethod
    def _timer_cost() -> int:
        a = time.perf_counter_ns()
        b = time.perf_counter_ns()
        return b - a

    def _sync_or_fail(self, what: str, plain: bool = False) -> None:
        """Wait for the stream: bounded, or (``plain``, for measured passes over ops that
        have finished before) ``Stream.sync`` alone."""
        self._step(what, self.stream.sync if plain else lambda: self._wait(what))

    def _gpu_pass(self, ops: list[_Op], samples: list[OpSamples], expired: list[int]) -> None:
        for op in ops:
            gpu, _host, held = self._step(_label(op),
                                          lambda op=op: self._held(op.issue, _label(op)))
            samples[op.index].gpu_ns.append(gpu)
            if not held:
                expired.append(op.index)
            self.result.completed_ops += 1
        self._proven = True

    def _wall_pass(self, ops: list[_Op], samples: list[OpSamples] | None) -> float:
        serialized = self.mode == "serialized"
        plain = self._proven
        self._sync_or_fail("synchronising before a pass", plain)
        t0 = time.perf_counter_ns()
        for op in ops:
            h0 = time.perf_counter_ns()
            try:
                op.issue()
            except Exception as e:
                self.result.status = "failed"
                raise GpuRunFailed(f"{_label(op)} failed: {e}", op=_label(op),
                                   result=self.result) from None
            h1 = time.perf_counter_ns()
            if samples is not None:
                samples[op.index].host_ns.append(float(h1 - h0))
            if serialized:
                self._sync_or_fail(_label(op), plain)
        if not serialized:  # a fault surfaces here (or at a later call): any op may be it
            self._sync_or_fail(f"the pipelined sequence (ops 0-{len(ops) - 1}; run "
                               "--mode serialized to name the op)", plain)
        wall = float(time.perf_counter_ns() - t0)
        self._proven = True
        return wall

    def _timeline(self, ops: list[_Op], kernel_medians: dict[int, float]) -> Timeline:
        """One more pass with an event after each op, placed on the host clock.

        GPU spans end at their end event; a kernel's start is its end minus its measured GPU
        time (its start event may run before the launch arrives when the host is behind).
        """
        tl = Timeline(title=f"nvstage run {self.w.name} ({self.mode})",
                      gpu_placement="GPU spans end at an event recorded after each op, "
                                    "offset from a reference event recorded at the start "
                                    "(host clock alignment approximate, within a few us)")
        self._sync_or_fail("synchronising before the timeline pass")
        ref = self._step("the timeline pass", lambda: self.stream.record(options=self.timing))
        self._step("the timeline pass", lambda: self._wait("the timeline pass", ref))
        t_ref = time.perf_counter_ns()
        ends = []
        prev_end = 0.0
        for op in ops:
            h0 = time.perf_counter_ns()
            self._step(f"{_label(op)} (timeline pass)", op.issue)
            h1 = time.perf_counter_ns()
            ends.append(self._step(f"{_label(op)} (timeline pass)",
                                   lambda: self.stream.record(options=self.timing)))
            tl.host.append(Span(op.index, op.kind, _label(op), h0 - t_ref, h1 - h0))
            if self.mode == "serialized":
                self._sync_or_fail(f"{_label(op)} (timeline pass)")
        self._sync_or_fail("the timeline pass")
        offsets = self._step("the timeline pass", lambda: [(e - ref) * 1e6 for e in ends])
        for op, end in zip(ops, offsets):
            dur = kernel_medians.get(op.index, end - prev_end)
            start = max(prev_end, end - dur)
            tl.gpu.append(Span(op.index, op.kind, op.name, start, end - start,
                               {"bytes": op.nbytes} if op.nbytes else {}))
            prev_end = end
        return tl

    def _cupti_passes(self, ops: list[_Op], reps: int) -> dict | None:
        """CUPTI records from passes of their own, after the measured ones: its driver-API
        tracing adds host time to every call, which must not reach t_launch."""
        cupti, why = CuptiSession.start()
        if cupti is None:
            self.result.notes.append(f"CUPTI requested but not available: {why}")
            return None
        try:
            for rep in range(reps):
                self.log(f"CUPTI pass {rep + 1}/{reps}")
                cupti.mark_pass()
                self._wall_pass(ops, None)
                cupti.end_pass()
        except GpuRunFailed:
            raise
        except Exception as e:  # CUPTI itself failed: the measured run stands without it
            self.result.notes.append(f"CUPTI records abandoned: {type(e).__name__}: {e}")
            return None
        finally:
            out = cupti.finish([(op.index, op.kind, op.name) for op in ops],
                               helper_prefix="nvstage_")
        return out

    # -- the run -----------------------------------------------------------------------
    def run(self, reps: int | None = None, warmup: int | None = None,
            timeline: bool = True, profile: bool = True) -> RunResult:
        reps = self.w.reps if reps is None else reps
        warmup = self.w.warmup if warmup is None else warmup
        r = self.result
        ops = self._ops()
        if not profile:  # run, time the whole sequence, check: no per-op instrumentation
            try:
                for _ in range(warmup):
                    self._wall_pass(ops, None)
                    r.completed_ops += len(ops)
                for _ in range(reps):
                    r.walls_ns.append(self._wall_pass(ops, None))
                    r.completed_ops += len(ops)
            except GpuRunFailed:
                r.status = "failed"
                raise
            return self._finish(r, ops, None)
        samples = [OpSamples(op.index, op.kind, op.name, nbytes=op.nbytes) for op in ops]
        walls: list[float] = []
        expired: list[int] = []
        self.log("measuring the noise floor")
        floor = self.noise_floor()
        r.decomposition = decompose([], [], floor, self.mode)
        try:
            for _ in range(warmup):
                self._wall_pass(ops, None)
            for rep in range(reps):
                self.log(f"repetition {rep + 1}/{reps}")
                self._gpu_pass(ops, samples, expired)
                walls.append(self._wall_pass(ops, samples))
                r.walls_ns = list(walls)
        except GpuRunFailed:
            done = len(walls)
            if done:
                kept = [OpSamples(s.index, s.kind, s.name, s.host_ns[:done], s.gpu_ns[:done],
                                  s.nbytes) for s in samples]
                r.decomposition = decompose(kept, walls, floor, self.mode)
            r.status = "failed"
            raise
        r.decomposition = decompose(samples, walls, floor, self.mode)
        r.walls_ns = walls
        if expired:
            r.notes.append(f"the hold kernel expired before {len(expired)} op sample(s) were "
                           "released: those GPU times may include launch latency")
        if self.use_cupti:
            r.cupti = self._cupti_passes(ops, reps)
        return self._finish(r, ops, r.decomposition if timeline else None)

    def _finish(self, r: RunResult, ops: list[_Op], decomp) -> RunResult:
        results = {name: self._views_out[name].copy() for name in self.w.from_device}
        r.checks = run_check(self.w, self.initial, results, self.values)
        if decomp is not None:
            medians = {o.index: o.gpu.median for o in decomp.ops if o.gpu}
            r.timeline = self._timeline(ops, medians)
        if any(not c.ok for c in r.checks):
            r.status = "check-failed"
        return r


def _dynamic_limit(kernel) -> int:
    """The dynamic shared memory a kernel may use without opting in: the driver's figure for
    the loaded kernel (48 KB less its static shared memory), else 48 KB."""
    try:
        return int(kernel.attributes.max_dynamic_shared_size_bytes)
    except Exception:
        return DEFAULT_DYNAMIC_SHARED


def _load_failure(name: str, symbol: str, kind: str, nbytes: int, *, first: bool, error,
                  result) -> GpuRunFailed:
    """cuda.core loads the image at the first kernel lookup: a failure there that is not a
    missing symbol is the image's (a PTX newer than the driver, no code for this GPU)."""
    text = str(error)
    if first and "NOT_FOUND" not in text:
        hint = ("the driver may be older than the toolkit that wrote the PTX: load a cubin "
                "built for this GPU (--arch)" if kind == "ptx" else
                "build for this GPU's arch (--arch), or include PTX it can JIT")
        return GpuRunFailed(f"loading the {kind} ({nbytes} bytes) failed: {text}",
                            op=f"load the {kind}", hint=hint, result=result)
    return GpuRunFailed(f"cannot load kernel {name} ({symbol}) from the {kind}: {text}",
                        op=f"load {name}", result=result)


def _optin_limit(dev) -> str:
    try:
        return str(int(dev.properties.max_shared_memory_per_block_optin))
    except Exception:
        return "?"


def _label(op: _Op) -> str:
    if op.kind == "launch":
        return f"kernel {op.name} (op {op.index})"
    return f"copy {op.name} {'host->device' if op.kind == 'h2d' else 'device->host'} " \
           f"(op {op.index})"
