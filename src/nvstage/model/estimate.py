"""The offline estimator: T = sum launch + sum kernel + sum transfer, with no GPU.

Every figure here is an ESTIMATE, built from:

- the workload (``nvstage.run.workload``) and its per-launch counts (``nvstage.model.costfile``):
  bytes read and written, FLOPs, loop trip counts, launch dimensions, copies;
- the GPU's figures (``nvstage.hw``): datasheet bandwidth, SMs and clock, a published memory
  latency, the Programming Guide's per-SM throughput per instruction class;
- the kernels as compiled (``nvstage.model.compiled``): their real resources and so their
  theoretical occupancy, and their SASS: the instruction mix per thread and the global loads
  each warp keeps in flight (``nvstage.inspect.inflight``);
- a few presets, each with its source (``nvstage.model.presets``), which
  ``nvstage.model.calibrate`` refits from a measured run.

The rules, per term:

- launch: each launch costs the host ``launch_cost_s``.
- kernel: per launch, a bound for each limiter (``nvstage.model.bounds``: DRAM, memory latency,
  issue, each pipe, shared memory, waves and tail, the launch floor); the estimate is the
  largest of DRAM + latency and the others, and the limiter is named with its numbers.
- transfer: ``copy_latency_s`` + bytes / (PCIe per-direction bandwidth x efficiency for
  pinned or pageable host memory).
- sequential T: the sum. Pipelined (one stream, as ``nvstage run --mode pipelined``): the host
  issues launches back to back while the GPU runs them, so a launch's cost is hidden behind
  the kernels before it; copies and kernels stay in stream order (no copy/compute overlap, as
  the data depends on them). A bound for copies chunked over streams is shown apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from nvstage.errors import MissingCounts, ModelError
from nvstage.hw.gpus import GpuSpec
from nvstage.inspect.kernels import KernelRecord
from nvstage.model.banks import bank_conflicts
from nvstage.model.bounds import FLOOR, KernelBounds, LaunchShape, Machine, is_peak, kernel_bounds
from nvstage.model.compiled import (LaunchFacts, kernel_code, kernel_facts, kernel_ptx,
                                    kernel_resources)
from nvstage.model.costfile import (
    CostSpec,
    LaunchCounts,
    intermediates,
    launch_counts,
    load_model_input,
)
from nvstage.model.kernelcode import DynamicCode, declared_code, finite
from nvstage.model.loop_table import loop_table
from nvstage.model.presets import DEFAULT_PRESETS, Presets
from nvstage.run.workload import Workload
from nvstage.run.workload.spec import BufferArg, Scalar
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.hw.pipes import sm_throughput

LABEL = "estimate"


@dataclass(frozen=True)
class LaunchEstimate:
    index: int
    kernel: str
    repeat: int
    counts: LaunchCounts
    facts: LaunchFacts
    code: DynamicCode | None  # None: no SASS to read (a PTX workload)
    bounds: KernelBounds
    t_launch_s: float  # one launch

    @property
    def t_kernel_s(self) -> float:  # one launch
        return self.bounds.seconds

    @property
    def limiter(self) -> str:
        return self.bounds.limiter

    def to_json(self) -> dict:
        return {
            "index": self.index, "kernel": self.kernel, "repeat": self.repeat,
            "counts": self.counts.to_json(), "resources": self.facts.to_json(),
            "code": self.code.to_json() if self.code else None,
            "bounds": self.bounds.to_json(), "limiter": self.limiter,
            "t_kernel_s": self.t_kernel_s, "t_launch_s": self.t_launch_s, "label": LABEL,
        }


@dataclass(frozen=True)
class TransferEstimate:
    kind: str  # "h2d" | "d2h"
    buffer: str
    nbytes: int
    host_memory: str
    bandwidth: float  # bytes/s (estimate)
    t_s: float

    def to_json(self) -> dict:
        return {**asdict(self), "label": LABEL}


@dataclass(frozen=True)
class Estimate:
    """One repetition of a workload on one GPU, every figure an estimate."""

    workload: str
    file: str | None
    gpu: GpuSpec
    presets: Presets
    launches: tuple[LaunchEstimate, ...]
    transfers: tuple[TransferEstimate, ...]
    intermediates: tuple[str, ...]
    intermediate_bytes_written: int
    intermediate_bytes_read: int
    pipelined_s: float
    overlapped_bound_s: float
    notes: tuple[str, ...] = ()
    label: str = LABEL
    calibration: object = None  # the ``Calibration`` the presets were fitted by, if any

    @property
    def n_launches(self) -> int:
        return sum(e.repeat for e in self.launches)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.kernel for e in self.launches))

    @property
    def launch_s(self) -> float:
        return sum(e.t_launch_s * e.repeat for e in self.launches)

    @property
    def kernel_s(self) -> float:
        return sum(e.t_kernel_s * e.repeat for e in self.launches)

    @property
    def transfer_s(self) -> float:
        return sum(t.t_s for t in self.transfers)

    @property
    def total_s(self) -> float:
        return self.launch_s + self.kernel_s + self.transfer_s

    @property
    def kernel_bytes(self) -> int:
        return sum(e.counts.bytes * e.repeat for e in self.launches)

    @property
    def flops(self) -> float:
        return sum(e.counts.flops * e.repeat for e in self.launches)

    @property
    def transfer_bytes(self) -> int:
        return sum(t.nbytes for t in self.transfers)

    def terms(self) -> dict[str, float]:
        return {"launch": self.launch_s, "kernel": self.kernel_s, "transfer": self.transfer_s}

    def to_json(self) -> dict:
        return {
            "schema": "nvstage.model/1", "label": self.label,
            "workload": {"name": self.workload, "file": self.file},
            "gpu": {"name": self.gpu.name, "display_name": self.gpu.display_name,
                    "arch": self.gpu.arch, "memory_bandwidth_Bps": self.gpu.memory_bandwidth,
                    "fp32_flops": self.gpu.fp32_flops, "sm_count": self.gpu.sm_count,
                    "boost_clock_mhz": self.gpu.boost_clock_mhz,
                    "memory_latency_s": self.gpu.memory_latency_s,
                    "pcie_bandwidth_Bps": self.gpu.pcie_bandwidth,
                    "sources": {k: self.gpu.source(k) for k in (
                        "memory_bandwidth", "fp32_flops", "sm_count", "boost_clock_mhz",
                        "memory_latency_s", "pcie_gen", "pcie_width")}},
            "presets": self.presets.to_json(),
            "units": "s",
            "definition": "T = sum launch (host) + sum kernel (GPU) + sum transfer (GPU), "
                          "one repetition; every figure an estimate",
            "launches": self.n_launches, "kernels": list(self.kernels),
            "kernel_bytes": self.kernel_bytes, "flops": self.flops,
            "transfer_bytes": self.transfer_bytes,
            "intermediates": list(self.intermediates),
            "intermediate_bytes_written": self.intermediate_bytes_written,
            "intermediate_bytes_read": self.intermediate_bytes_read,
            "launch_s": self.launch_s, "kernel_s": self.kernel_s,
            "transfer_s": self.transfer_s, "total_s": self.total_s,
            "pipelined_s": self.pipelined_s, "overlapped_bound_s": self.overlapped_bound_s,
            "per_launch": [e.to_json() for e in self.launches],
            "per_transfer": [t.to_json() for t in self.transfers],
            "notes": list(self.notes),
            "calibration": self.calibration.to_json() if self.calibration else None,
        }


def require_figures(gpu: GpuSpec) -> None:
    """The datasheet figures the estimate needs, or one message naming those missing."""
    missing = [n for n in ("sm_count", "memory_bandwidth", "fp32_flops")
               if getattr(gpu, n) is None]
    if gpu.pcie_bandwidth is None:
        missing.append("pcie_gen and pcie_width")
    if missing:
        raise ModelError(f"GPU {gpu.name} has no {', '.join(missing)}: the estimate needs them",
                         hint="name a GPU (h200, h100, a100, l4, l40s, rtx4090, b200) or give "
                              "a spec file with --gpu-spec (base = \"h100\" to start from one)")


def machine(gpu: GpuSpec, presets: Presets) -> Machine:
    """The GPU and the presets as the kernel bounds read them."""
    sm = sm_throughput(gpu.arch)
    eff = presets.compute_efficiency
    pipes = {c: sm.warp_instructions_per_clock(c) * eff for c in sm.results_per_clock}
    return Machine(
        sms=gpu.sm_count, clock_hz=gpu.boost_clock_mhz * 1e6 if gpu.boost_clock_mhz else None,
        bandwidth=gpu.memory_bandwidth * presets.dram_efficiency,
        latency_s=gpu.memory_latency_s, issue_per_clock=sm.issue_per_clock * eff,
        pipe_per_clock=pipes, shared_bytes_per_clock=sm.shared_bytes_per_clock * eff,
        floor_s=presets.kernel_floor_s, warp_size=gpu.limits.warp_size,
        peaks=peaks(gpu), dram_peak=gpu.memory_bandwidth)


def peaks(gpu: GpuSpec) -> dict:
    """Each pipe's peak FLOP/s on ``gpu``, with its source: FP32 and the tensor cores (dense
    BF16) from the datasheet; FP16 and FP64 from the guide's results per clock per SM x 2
    (an FMA) x SMs x the boost clock."""
    out = {"fp32": (gpu.fp32_flops, f"FP32 peak: {gpu.source('fp32_flops')}")}
    if gpu.bf16_flops:
        out["tensor"] = (gpu.bf16_flops, "tensor peak, dense BF16: "
                                         f"{gpu.source('bf16_flops')}")
    if gpu.boost_clock_mhz:
        sm = sm_throughput(gpu.arch)
        for cls, label in (("fp16", "FP16"), ("fp64", "FP64")):
            per = sm.results_per_clock.get(cls)
            if per:
                out[cls] = (per * 2 * gpu.sm_count * gpu.boost_clock_mhz * 1e6,
                            f"{label} peak: {per} results per clock per SM x 2 x "
                            f"{gpu.sm_count} SMs x {gpu.boost_clock_mhz:g} MHz "
                            f"({sm.sources.get('results_per_clock', '')})")
    return out


def work(c: LaunchCounts, f: LaunchFacts, code: DynamicCode | None) -> tuple[float, str, str]:
    """The launch's FLOPs for the peak bound, the pipe they run on and where they come from:
    the larger of the cost file's and what the SASS does with its trip counts."""
    threads = f.grid_blocks * f.block_size
    derived = code.flops * threads if code is not None else 0.0
    if code is not None and code.classes.get("tensor"):
        # 8-bit, 4-bit and integer MMAs run faster than the dense BF16 peak: no floor from it.
        pipe = "tensor" if not code.fast_tensor else "tensor, 8-bit or narrower"
    elif code is not None and code.flops_by_class:
        pipe = max(code.flops_by_class, key=code.flops_by_class.get)
    else:
        pipe = "fp32"
    if code is None:
        return c.flops, pipe, "declared; no SASS: the FP32 pipe assumed"
    if derived > c.flops:
        return derived, pipe, "the SASS's, with its trip counts"
    return c.flops, pipe, "declared"


def launch_shape(c: LaunchCounts, f: LaunchFacts, code: DynamicCode | None) -> LaunchShape:
    flops, pipe, said = work(c, f, code)
    return LaunchShape(
        blocks=f.grid_blocks, warps_per_block=f.warps_per_block,
        blocks_per_sm=f.active_blocks_per_sm, dram_bytes=c.bytes,
        round_trips=code.round_trips if code else 0.0,
        loads_per_trip=code.loads_per_trip if code else 0.0,
        bytes_per_load=code.bytes_per_load if code else 0.0,
        instructions=code.instructions if code else 0.0,
        pipes=dict(code.pipes) if code else {}, shared_bytes=code.shared_bytes if code else 0.0,
        flops=flops, flops_pipe=pipe, flops_said=said,
        shared_said=code.banks.words() if code is not None and code.banks is not None else "")


def estimate(workload, gpu: GpuSpec, *, calibration=None, cost=None,
             resources: Mapping[str, KernelRecord] | None = None, code=None,
             toolkit=None) -> Estimate:
    """Estimate one repetition of ``workload`` (a path or a ``Workload``) on ``gpu``.

    ``cost``: the per-launch counts, a ``CostSpec`` or a cost file's path (default: the cost
    file beside the workload). ``calibration``: a ``Calibration`` or ``Presets`` replacing
    the default presets, or a measured run report (``nvstage run --profile --json FILE``)
    to fit them to. ``resources``: kernel name -> ``KernelRecord``; ``code``: kernel name ->
    ``KernelCode`` or None (both compiled here when not given).
    """
    require_figures(gpu)
    if isinstance(workload, Workload):
        w = workload
        if cost is None:
            if not w.file:
                raise MissingCounts("a Workload object needs cost= (reads, writes and FLOPs "
                                    "per launch) for an estimate")
            _, cost = load_model_input(w.file)
    elif cost is None or isinstance(cost, CostSpec):
        w, found = load_model_input(workload)
        cost = cost or found
    else:
        w, cost = load_model_input(workload, cost)
    if toolkit is None and (resources is None or code is None):

        toolkit = find_toolkit()
    calibration = fitted(calibration, gpu, toolkit)
    presets = _presets(calibration)
    if resources is None:
        resources = kernel_resources(w, gpu.arch, toolkit=toolkit)
    if code is None:
        code = kernel_code(w, gpu.arch, toolkit=toolkit)
        ptx = kernel_ptx(w, gpu.arch, toolkit=toolkit)
    else:  # code given by the caller: its PTX is not known here
        ptx = {}
    facts = kernel_facts(w, gpu.arch, resources)
    counts = launch_counts(w, cost)
    m = machine(gpu, presets)
    launches = []
    notes: list[str] = []
    for c, f in zip(counts, facts):
        if f.active_blocks_per_sm <= 0:
            raise ModelError(f"kernel {f.kernel} cannot launch on {gpu.arch} with its "
                             f"resources (block {f.block_size}, {f.registers} registers)")
        kc = code.get(c.kernel)
        dyn = None
        if kc is not None:
            threads = f.grid_blocks * f.block_size
            rows, banks = followed(w, c.index, kc, ptx.get(c.kernel))
            try:
                dyn = kc.dynamic(c.trips, flops_per_thread=c.flops / threads if threads else 0,
                                 declared=c.instructions, rows=rows, banks=banks)
            except ValueError as e:  # a list of trips that does not fit the loops
                raise ModelError(f"kernel {c.kernel}: {e} in its SASS",
                                 hint="give one trip count for every loop, or one per loop "
                                      "in the order nvstage model --json lists them "
                                      "(per_launch[].code.loops)") from None
            if not finite(dyn):
                raise ModelError(f"kernel {c.kernel}: its trip counts multiply past any "
                                 "number over its nested loops",
                                 hint="give each loop's own trip count (trips = [...])")
            if dyn.asked:
                notes.append(asked_note(c.kernel, dyn))
            elif dyn.trips_source.startswith("unknown"):
                notes.append(f"{c.kernel}: loop trip counts {dyn.trips_source}")
            if dyn.classes.get("tensor"):
                notes.append(f"{c.kernel}: tensor-core instructions take issue slots only "
                             "here (their pipe is not modelled)")
        elif c.instructions:
            dyn = declared_code(c.instructions)
            notes.append(f"{c.kernel}: no SASS for {gpu.arch} read: its declared "
                         "instructions, no latency bound")
        else:
            notes.append(f"{c.kernel}: no SASS for {gpu.arch} read (a PTX workload, or code "
                         "nvdisasm could not read or too large to walk): DRAM and the floor "
                         "only")
        b = kernel_bounds(launch_shape(c, f, dyn), m)
        notes += peak_notes(c, f, dyn, b)
        launches.append(LaunchEstimate(c.index, c.kernel, c.repeat, c, f, dyn, b,
                                       presets.launch_cost_s))
        if f.spill_stores:
            notes.append(f"{f.kernel} spills {f.spill_stores} bytes per thread (stores): the "
                         "spill traffic is not in the byte count")
    if m.clock_hz is None:
        notes.append(f"{gpu.name} has no published clock: no issue, pipe or shared-memory "
                     "bound")
    if gpu.memory_latency_s is None:
        notes.append(f"{gpu.name} has no memory latency figure: no latency bound")
    eff = (presets.pcie_pinned_efficiency if cost.host_memory == "pinned"
           else presets.pcie_pageable_efficiency)
    link = gpu.pcie_bandwidth * eff
    values = w.param_values()
    transfers = []
    for kind, name, _ in w.operations():
        if kind == "launch":
            continue
        nbytes = w.nbytes(w.buffer(name), values)
        transfers.append(TransferEstimate(kind, name, nbytes, cost.host_memory, link,
                                          presets.copy_latency_s + nbytes / link))
    inter = intermediates(w, counts)
    iw = sum(b for c in counts for n, b in c.writes if n in inter for _ in range(c.repeat))
    ir = sum(b for c in counts for n, b in c.reads if n in inter for _ in range(c.repeat))
    pipelined, bound = _pipelined(w, launches, transfers)
    return Estimate(w.name, w.file, gpu, presets, tuple(launches), tuple(transfers), inter,
                    iw, ir, pipelined, bound, tuple(dict.fromkeys(notes)),
                    calibration=None if isinstance(calibration, Presets) else calibration)


# The most a kernel's declared and derived FLOPs may differ before a note says so: a
# formula's useful FLOPs and the instructions doing them differ by its expansion (a tanh
# is a dozen FMAs in the SASS), a missed loop by its trip count.
WORK_DISAGREES = 4.0


def followed(w: Workload, index: int, kc, fn) -> tuple[tuple, object]:
    """The loop table and the bank conflicts of launch ``index``, from following its PTX with
    the workload's values (``model.loop_table``, ``model.banks``); ((), None) with no PTX."""
    values = w.param_values()
    d = w.dims(index, values)
    block = tuple(d["block"]) + (1,) * (3 - len(d["block"]))
    grid = tuple(d["grid"]) + (1,) * (3 - len(d["grid"]))
    args = launch_args(w, index, values, fn)
    rows = tuple(loop_table(kc, fn, args, block, grid, arg_names(w, index, fn)))
    banks = bank_conflicts(fn, args, block, grid) if fn is not None and args else None
    return rows, banks


def launch_args(w: Workload, index: int, values, fn) -> list | None:
    """One value per PTX parameter of launch ``index``: scalars as evaluated, each buffer at
    an address of its own (its contents unknown), pointers Triton appends null; None where
    the parameters do not line up with the launch's arguments."""
    if fn is None:
        return None
    lz = w.launches[index]
    out: list = []
    for k, a in enumerate(lz.args):
        if isinstance(a, BufferArg):
            out.append((k + 1) << 40)  # far apart, 256-byte aligned as cudaMalloc's
        elif a.is_float:
            out.append(None)
        else:
            out.append(w.scalar_value(a, values, f"launch[{index}]") & ((1 << 64) - 1))
    extra = len(fn.params) - len(out)
    if extra < 0:
        return None
    return out + [0] * extra


def arg_names(w: Workload, index: int, fn) -> dict:
    """PTX parameter -> what launch ``index`` passes it, as the workload writes it (a name,
    or an expression in parentheses), for its integer scalars."""
    if fn is None:
        return {}
    out = {}
    for param, a in zip(fn.params, w.launches[index].args):
        if isinstance(a, Scalar) and not a.is_float:
            text = str(a.expr).strip()
            out[param] = text if text.isidentifier() or text.isdigit() else f"({text})"
    return out


def asked_note(kernel: str, dyn: DynamicCode) -> str:
    """The loops whose trip count is not derived, by line, and the one line that gives them."""
    known = {r.index: r.trips for r in dyn.loops}
    said = ", ".join(f"loop {r.index} (line {r.line}, SASS {r.sass_range}: {r.why})"
                     if r.line else f"loop {r.index} (SASS {r.sass_range}: {r.why})"
                     for r in dyn.asked)
    asked = {r.index for r in dyn.asked}
    example = ", ".join(f"N{i}" if i in asked else f"{known[i]:g}" for i in sorted(known))
    return (f"{kernel}: trip count not derived for {said}; counted once: give "
            f"trips = [{example}] in its cost file's [[launch]] (N: that loop's runs per "
            "entry)")


def peak_notes(c: LaunchCounts, f: LaunchFacts, dyn: DynamicCode | None,
               b: KernelBounds) -> list[str]:
    """What the peaks say: that one decided the estimate, and declared and derived work
    disagreeing by more than ``WORK_DISAGREES``."""
    out = []
    if is_peak(b.limiter):
        below = max((x.seconds for x in b.bounds if not is_peak(x.name) and x.name != FLOOR),
                    default=0.0)
        below = max(below, b.memory_s)
        out.append(f"{c.kernel}: its bounds from the code ({below * 1e6:.4g} us) fall below "
                   f"its work at the {b.limiter} ({b.seconds * 1e6:.4g} us: "
                   f"{b.bound(b.limiter).detail}): the peak is the estimate")
    if dyn is not None and not dyn.asked and "unknown" not in dyn.trips_source \
            and c.flops and dyn.flops:
        derived = dyn.flops * f.grid_blocks * f.block_size
        ratio = max(derived, c.flops) / min(derived, c.flops)
        if ratio > WORK_DISAGREES:
            out.append(f"{c.kernel}: its SASS does {derived / 1e9:.4g} GFLOP with its trip "
                       f"counts ({dyn.trips_source}), its cost file declares "
                       f"{c.flops / 1e9:.4g}: {ratio:.3g}x apart (more than "
                       f"{WORK_DISAGREES:g}x)")
    return out


def fitted(calibration, gpu: GpuSpec, toolkit=None):
    """``calibration`` as given, or a run report's path (or loaded dict) fitted into a
    ``Calibration``."""
    import os

    if isinstance(calibration, (str, os.PathLike, dict)):
        from nvstage.model.calibrate import calibrate

        return calibrate(calibration, gpu, toolkit=toolkit)
    return calibration


def _presets(calibration) -> Presets:
    if calibration is None:
        return DEFAULT_PRESETS
    if isinstance(calibration, Presets):
        return calibration
    return calibration.presets  # a Calibration


def _pipelined(w: Workload, launches, transfers) -> tuple[float, float]:
    """One stream in operation order: the host issues each launch (costing it the launch
    cost) without waiting; the GPU starts an operation when the host has issued it and the
    previous one is done. Copy issue time on the host is not modelled (no sourced figure)."""
    host = gpu = 0.0
    by_index = {e.index: e for e in launches}
    copies = iter(transfers)
    h2d = d2h = 0.0
    for kind, _name, li in w.operations():
        if kind == "launch":
            e = by_index[li]
            host += e.t_launch_s
            gpu = max(gpu, host) + e.t_kernel_s
        else:
            t = next(copies)
            gpu = max(gpu, host) + t.t_s
            if kind == "h2d":
                h2d += t.t_s
            else:
                d2h += t.t_s
    # Copies chunked over streams could hide behind the kernels and each other (separate
    # copy engines each way): no schedule beats the longest of the three.
    device = gpu - h2d - d2h
    return gpu, max(h2d, d2h, device)
