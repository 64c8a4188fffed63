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
   call (t_launch) and around the whole pass (wall). No events here, so nothing perturbs it.

After the last repetition one timeline pass (events after each op) lays the ops out in time
for the trace. Module load (and PTX JIT) and the noise floor are measured once.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..decompose import NoiseFloor, OpSamples, decompose
from ..report.trace import Span, Timeline
from ..errors import NvstageError
from ..workload import BufferArg, Launch, Workload, initial_contents, run_check
from .results import GpuRunFailed, RunResult

HOLD_TIMEOUT_NS = 2_000_000_000  # a released hold ends in microseconds; this is a safety net
FLOOR_SAMPLES = 21
# Dynamic shared memory above this needs the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES raised
# first (CUDA C++ Programming Guide, compute capabilities: "more than 48 KB ... opt-in").
DEFAULT_DYNAMIC_SHARED = 48 * 1024


@dataclass
class Loaded:
    """What the engine needs from the compile step."""

    kind: str  # "cubin" | "fatbin" | "ptx"
    image: bytes
    mangled: dict[str, str]  # kernel name as the workload wrote it -> symbol to load
    helper_cubin: bytes


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
        self.stream.sync()
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
        obj = self._step(f"loading the {self.loaded.kind}",
                         lambda: ctor(image, name=self.w.name))
        for name in dict.fromkeys(lz.kernel for lz in self.w.launches):
            symbol = self.loaded.mangled.get(name, name)
            try:
                self._kernels[name] = obj.get_kernel(symbol)
            except Exception as e:
                self.result.status = "failed"
                raise GpuRunFailed(f"cannot load kernel {name} ({symbol}) from the "
                                   f"{self.loaded.kind}: {e}", op=f"load {name}",
                                   result=self.result) from None
        t1 = time.perf_counter_ns()
        self.result.load = {
            "kind": self.loaded.kind, "bytes": len(self.loaded.image),
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
            if n != len(lz.args):
                from ..workload import WorkloadError

                raise WorkloadError(f"kernel {lz.kernel} takes {n} argument(s) (from the "
                                    f"loaded module), the workload passes {len(lz.args)}",
                                    where=self.w._where(f"launch[{i}]", "args"))
        self._opt_in_shared()

    def _opt_in_shared(self) -> None:
        """Raise each kernel's dynamic shared memory limit where a launch asks for more."""
        need: dict[str, int] = {}
        for i, lz in enumerate(self.w.launches):
            shared = self.w.dims(i, self.values)["shared"]
            if shared > DEFAULT_DYNAMIC_SHARED:
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
        self._step("initialising the buffers", self.stream.sync)

    def _ops(self) -> list[_Op]:
        from cuda.core import LaunchConfig, launch

        ops: list[_Op] = []
        s = self.stream
        for kind, name, li in self.w.operations():
            idx = len(ops)
            if kind == "launch":
                lz = self.w.launches[li]
                d = self.w.dims(li, self.values)
                cfg = LaunchConfig(grid=d["grid"], block=d["block"], shmem_size=d["shared"])
                args = kernel_args(self.w, li, self.values, self._dev_bufs)
                kernel = self._kernels[lz.kernel]
                ops.append(_Op(idx, "launch", lz.kernel,
                               lambda c=cfg, k=kernel, a=args: launch(s, c, k, *a)))
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
    def _held(self, issue: Callable[[], None]) -> tuple[float, float, bool]:
        """(GPU ns, host ns of the issue call, hold held) for one op."""
        import numpy as np
        from cuda.core import launch

        self.flag[:] = 0
        launch(self.stream, self.one, self.k_hold, self.flag_buf, np.uint64(HOLD_TIMEOUT_NS))
        try:
            e0 = self.stream.record(options=self.timing)
            h0 = time.perf_counter_ns()
            issue()
            h1 = time.perf_counter_ns()
            e1 = self.stream.record(options=self.timing)
        finally:
            self.flag[0] = 1  # release: e0, the op and e1 are all queued now (or it failed)
        e1.sync()
        return (e1 - e0) * 1e6, float(h1 - h0), bool(self.flag[1] == 0)

    def noise_floor(self) -> NoiseFloor:
        return self._step("measuring the noise floor (empty kernel, 4-byte copy)",
                          self._noise_floor)

    def _noise_floor(self) -> NoiseFloor:
        import numpy as np
        from cuda.core import launch

        timer = min(self._timer_cost() for _ in range(FLOOR_SAMPLES))
        diffs = []
        for _ in range(FLOOR_SAMPLES):
            self.stream.sync()
            a = self.stream.record(options=self.timing)
            b = self.stream.record(options=self.timing)
            b.sync()
            diffs.append((b - a) * 1e6)
        nonzero = [d for d in diffs if d > 0]
        empty = [self._held(lambda: launch(self.stream, self.one, self.k_empty))[0]
                 for _ in range(FLOOR_SAMPLES)]
        small_dev = self.dev.allocate(4, stream=self.stream)
        small_pin = self.pinned_mr.allocate(4, stream=self.stream)
        _host_view(small_pin, 4)[:] = np.zeros(4, np.uint8)
        copy = [self._held(lambda: small_dev.copy_from(small_pin, stream=self.stream))[0]
                for _ in range(FLOOR_SAMPLES)]
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

    def _sync_or_fail(self, what: str) -> None:
        self._step(what, self.stream.sync)

    def _gpu_pass(self, ops: list[_Op], samples: list[OpSamples], expired: list[int]) -> None:
        for op in ops:
            gpu, _host, held = self._step(_label(op), lambda op=op: self._held(op.issue))
            samples[op.index].gpu_ns.append(gpu)
            if not held:
                expired.append(op.index)
            self.result.completed_ops += 1

    def _wall_pass(self, ops: list[_Op], samples: list[OpSamples] | None) -> float:
        serialized = self.mode == "serialized"
        self._sync_or_fail("synchronising before a pass")
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
                self._sync_or_fail(_label(op))
        if not serialized:
            self._sync_or_fail("the pipelined sequence")
        return float(time.perf_counter_ns() - t0)

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
        ref = self.stream.record(options=self.timing)
        ref.sync()
        t_ref = time.perf_counter_ns()
        ends = []
        prev_end = 0.0
        for op in ops:
            h0 = time.perf_counter_ns()
            self._step(f"{_label(op)} (timeline pass)", op.issue)
            h1 = time.perf_counter_ns()
            ends.append(self.stream.record(options=self.timing))
            tl.host.append(Span(op.index, op.kind, _label(op), h0 - t_ref, h1 - h0))
            if self.mode == "serialized":
                self._sync_or_fail(f"{_label(op)} (timeline pass)")
        self._sync_or_fail("the timeline pass")
        for op, e in zip(ops, ends):
            end = (e - ref) * 1e6
            dur = kernel_medians.get(op.index, end - prev_end)
            start = max(prev_end, end - dur)
            tl.gpu.append(Span(op.index, op.kind, op.name, start, end - start,
                               {"bytes": op.nbytes} if op.nbytes else {}))
            prev_end = end
        return tl

    def _cupti_passes(self, ops: list[_Op], reps: int) -> dict | None:
        """CUPTI records from passes of their own, after the measured ones: its driver-API
        tracing adds host time to every call, which must not reach t_launch."""
        from .cupti import CuptiSession

        cupti = CuptiSession.start()
        if cupti is None:
            self.result.notes.append("CUPTI requested but not available "
                                     "(install nvstage[cupti])")
            return None
        try:
            for rep in range(reps):
                self.log(f"CUPTI pass {rep + 1}/{reps}")
                cupti.mark_pass()
                self._wall_pass(ops, None)
                cupti.end_pass()
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
