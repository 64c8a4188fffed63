"""Run a validated workload on the GPU with cuda.core, and measure it.

Import only after ``driver.require()`` said yes: without a driver, cuda.core's module loading
raised a SystemError and a second call hung (shared/TOOLCHAIN_FACTS.md).

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
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..decompose import NoiseFloor, OpSamples, decompose
from ..report.trace import Span, Timeline
from ..workload import BufferArg, Workload, initial_contents, run_check
from .results import GpuRunFailed, RunResult

HOLD_TIMEOUT_NS = 2_000_000_000  # a released hold ends in microseconds; this is a safety net
FLOOR_SAMPLES = 21


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

    # -- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        from cuda.core import Device, LegacyPinnedMemoryResource

        self.dev = Device(0)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        from cuda.core import EventOptions

        self.timing = EventOptions(timing_enabled=True)
        self.pinned_mr = LegacyPinnedMemoryResource()
        self._load_helpers()
        self._load_module()
        self._allocate()

    def _load_helpers(self) -> None:
        from cuda.core import LaunchConfig, ObjectCode

        obj = ObjectCode.from_cubin(self.loaded.helper_cubin, name="nvstage_helpers")
        self.k_empty = obj.get_kernel("nvstage_empty")
        self.k_hold = obj.get_kernel("nvstage_hold")
        self.one = LaunchConfig(grid=1, block=1)
        self.flag_buf = self.pinned_mr.allocate(8, stream=self.stream)
        self.flag = _host_view(self.flag_buf, 8).view("uint32")
        self.flag[:] = 0

    def _load_module(self) -> None:
        """Load the workload's code and every kernel: timed apart (includes any PTX JIT)."""
        from cuda.core import ObjectCode

        ctor = {"cubin": ObjectCode.from_cubin, "fatbin": ObjectCode.from_fatbin,
                "ptx": ObjectCode.from_ptx}[self.loaded.kind]
        t0 = time.perf_counter_ns()
        obj = ctor(self.loaded.image, name=self.w.name)
        for name in {lz.kernel for lz in self.w.launches}:
            symbol = self.loaded.mangled.get(name, name)
            try:
                self._kernels[name] = obj.get_kernel(symbol)
            except Exception as e:
                raise GpuRunFailed(f"cannot load kernel {name} ({symbol}) from the "
                                   f"{self.loaded.kind}: {e}", op=f"load {name}",
                                   result=self.result) from None
        t1 = time.perf_counter_ns()
        self.result.load = {
            "kind": self.loaded.kind, "bytes": len(self.loaded.image),
            "seconds": (t1 - t0) / 1e9,
            "includes_ptx_jit": self.loaded.kind == "ptx",
            "note": "module load and kernel lookup, measured once; not one of the terms of T",
        }
        for i, lz in enumerate(self.w.launches):  # the driver's own parameter list
            k = self._kernels[lz.kernel]
            n = k.num_arguments
            if n != len(lz.args):
                from ..workload import WorkloadError

                raise WorkloadError(f"kernel {lz.kernel} takes {n} argument(s) (from the "
                                    f"loaded module), the workload passes {len(lz.args)}",
                                    where=self.w._where(f"launch[{i}]", "args"))

    def _allocate(self) -> None:
        import numpy as np

        self.initial = initial_contents(self.w, self.values)
        for b in self.w.buffers:
            nbytes = self.w.nbytes(b, self.values)
            what = f"buffer {b.name} ({nbytes} bytes)"
            try:
                self._dev_bufs[b.name] = self.dev.allocate(nbytes, stream=self.stream)
                if b.name in self.w.to_device:
                    pin = self.pinned_mr.allocate(nbytes, stream=self.stream)
                    _host_view(pin, nbytes)[:] = self.initial[b.name].view(np.uint8)
                    self._pin_in[b.name] = pin
                if b.name in self.w.from_device:
                    pin = self.pinned_mr.allocate(nbytes, stream=self.stream)
                    self._pin_out[b.name] = pin
                    self._views_out[b.name] = _host_view(pin, nbytes).view(b.dtype)
            except GpuRunFailed:
                raise
            except Exception as e:
                raise GpuRunFailed(f"allocating {what} failed: {e}", op=f"allocate {b.name}",
                                   result=self.result) from None
            if b.name not in self.w.to_device:  # defined contents for buffers not copied in
                self._dev_bufs[b.name].fill(0, stream=self.stream)
        self.stream.sync()

    def _ops(self) -> list[_Op]:
        import numpy as np
        from cuda.core import LaunchConfig, launch

        ops: list[_Op] = []
        s = self.stream
        for kind, name, li in self.w.operations():
            idx = len(ops)
            if kind == "launch":
                lz = self.w.launches[li]
                d = self.w.dims(li, self.values)
                cfg = LaunchConfig(grid=d["grid"], block=d["block"], shmem_size=d["shared"])
                args = []
                for j, a in enumerate(lz.args):
                    if isinstance(a, BufferArg):
                        args.append(self._dev_bufs[a.buffer])
                    else:  # numpy scalars keep their width; a Python int would be 8 bytes
                        v = self.w.scalar_value(a, self.values, f"launch[{li}] args[{j}]")
                        args.append(np.dtype(a.dtype).type(v))
                kernel = self._kernels[lz.kernel]
                ops.append(_Op(idx, "launch", lz.kernel,
                               lambda c=cfg, k=kernel, a=tuple(args): launch(s, c, k, *a)))
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
        e0 = self.stream.record(options=self.timing)
        h0 = time.perf_counter_ns()
        issue()
        h1 = time.perf_counter_ns()
        e1 = self.stream.record(options=self.timing)
        self.flag[0] = 1  # release: e0, the op and e1 are all queued now
        e1.sync()
        return (e1 - e0) * 1e6, float(h1 - h0), bool(self.flag[1] == 0)

    def noise_floor(self) -> NoiseFloor:
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
        try:
            self.stream.sync()
        except Exception as e:
            raise GpuRunFailed(f"{what} failed: {e}", op=what, result=self.result) from None

    def _gpu_pass(self, ops: list[_Op], samples: list[OpSamples], expired: list[int]) -> None:
        for op in ops:
            try:
                gpu, _host, held = self._held(op.issue)
            except Exception as e:
                raise GpuRunFailed(f"{_label(op)} failed: {e}", op=_label(op),
                                   result=self.result) from None
            samples[op.index].gpu_ns.append(gpu)
            if not held:
                expired.append(op.index)
            self.result.completed_ops += 1

    def _wall_pass(self, ops: list[_Op], samples: list[OpSamples] | None) -> float:
        serialized = self.mode == "serialized"
        self.stream.sync()
        t0 = time.perf_counter_ns()
        for op in ops:
            h0 = time.perf_counter_ns()
            try:
                op.issue()
            except Exception as e:
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
        self.stream.sync()
        ref = self.stream.record(options=self.timing)
        ref.sync()
        t_ref = time.perf_counter_ns()
        ends = []
        prev_end = 0.0
        for op in ops:
            h0 = time.perf_counter_ns()
            op.issue()
            h1 = time.perf_counter_ns()
            ends.append(self.stream.record(options=self.timing))
            tl.host.append(Span(op.index, op.kind, _label(op), h0 - t_ref, h1 - h0))
            if self.mode == "serialized":
                self.stream.sync()
        self.stream.sync()
        for op, e in zip(ops, ends):
            end = (e - ref) * 1e6
            dur = kernel_medians.get(op.index, end - prev_end)
            start = max(prev_end, end - dur)
            tl.gpu.append(Span(op.index, op.kind, op.name, start, end - start,
                               {"bytes": op.nbytes} if op.nbytes else {}))
            prev_end = end
        return tl

    # -- the run -----------------------------------------------------------------------
    def run(self, reps: int | None = None, warmup: int | None = None,
            timeline: bool = True, profile: bool = True) -> RunResult:
        reps = self.w.reps if reps is None else reps
        warmup = self.w.warmup if warmup is None else warmup
        r = self.result
        ops = self._ops()
        if not profile:  # run, time the whole sequence, check: no per-op instrumentation
            for _ in range(warmup):
                self._wall_pass(ops, None)
            r.walls_ns = [self._wall_pass(ops, None) for _ in range(reps)]
            r.completed_ops = len(ops) * (reps + warmup)
            return self._finish(r, ops, None)
        samples = [OpSamples(op.index, op.kind, op.name, nbytes=op.nbytes) for op in ops]
        walls: list[float] = []
        expired: list[int] = []
        self.log("measuring the noise floor")
        floor = self.noise_floor()
        r.decomposition = decompose([], [], floor, self.mode)
        for _ in range(warmup):
            self._wall_pass(ops, None)
        cupti = None
        if self.use_cupti:
            from .cupti import CuptiSession

            cupti = CuptiSession.start()
            if cupti is None:
                r.notes.append("CUPTI requested but not available (install nvstage[cupti])")
        try:
            for rep in range(reps):
                self.log(f"repetition {rep + 1}/{reps}")
                self._gpu_pass(ops, samples, expired)
                if cupti:
                    cupti.mark_pass()
                walls.append(self._wall_pass(ops, samples))
                if cupti:
                    cupti.end_pass()
        except GpuRunFailed:
            done = len(walls)
            if done:
                kept = [OpSamples(s.index, s.kind, s.name, s.host_ns[:done], s.gpu_ns[:done],
                                  s.nbytes) for s in samples]
                r.decomposition = decompose(kept, walls, floor, self.mode)
            r.status = "failed"
            raise
        finally:
            if cupti:
                r.cupti = cupti.finish([(op.index, op.kind, op.name) for op in ops],
                                       helper_prefix="nvstage_")
        r.decomposition = decompose(samples, walls, floor, self.mode)
        r.walls_ns = walls
        if expired:
            r.notes.append(f"the hold kernel expired before {len(expired)} op sample(s) were "
                           "released: those GPU times may include launch latency")
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


def _label(op: _Op) -> str:
    if op.kind == "launch":
        return f"kernel {op.name} (op {op.index})"
    return f"copy {op.name} {'host->device' if op.kind == 'h2d' else 'device->host'} " \
           f"(op {op.index})"
