"""The offline estimator: T = sum launch + sum kernel + sum transfer, with no GPU.

Every figure here is an ESTIMATE, built from:

- the workload (``nvstage.run.workload``) and its per-launch counts (``nvstage.model.costfile``):
  bytes read and written, FLOPs, launch dimensions, copies;
- the GPU's datasheet figures (``nvstage.hw.gpus.GpuSpec``);
- the kernels' real resources (registers, shared memory, barriers from ptxas and cuobjdump,
  after compiling the workload through the nvstage pipeline) and so their theoretical
  occupancy (``nvstage.hw.occupancy``);
- a few presets, each with its source, which ``nvstage.model.calibrate`` refits from a
  measured run.

The rules, per term:

- launch: each launch costs the host ``launch_cost_s``.
- kernel: roofline, max(bytes / achieved bandwidth, FLOPs / achieved FLOP rate, floor).
  Achieved bandwidth = datasheet bandwidth x ``dram_efficiency`` x parallelism factor, where
  (HEURISTIC) the parallelism factor is min(1, resident warps / (SMs x max warps) /
  ``occupancy_knee``): a kernel keeps the memory system busy only with enough warps in
  flight; below the knee, achieved bandwidth is taken to fall in proportion. Resident warps
  count both the theoretical occupancy per SM and grids too small to fill every SM.
- transfer: ``copy_latency_s`` + bytes / (PCIe per-direction bandwidth x efficiency for
  pinned or pageable host memory).
- sequential T: the sum. Pipelined (one stream, as ``nvstage run --mode pipelined``): the host
  issues launches back to back while the GPU runs them, so a launch's cost is hidden behind
  the kernels before it; copies and kernels stay in stream order (no copy/compute overlap, as
  the data depends on them). A bound for copies chunked over streams is shown apart.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

from nvstage.errors import MissingCounts, ModelError
from nvstage.hw.gpus import GpuSpec
from nvstage.inspect.kernels import KernelRecord
from nvstage.model.costfile import CostSpec, LaunchCounts, intermediates, launch_counts
from nvstage.run.prepare import Prepared, prepare
from nvstage.run.workload import Workload

LABEL = "estimate"
_PR1959 = "https://github.com/NVIDIA/cuda-python/pull/1959"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/h200)"


# ---------------------------------------------------------------------------------------
# Presets
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Presets:
    """The model's free parameters. Defaults carry a source each (``PRESET_SOURCES``)."""

    launch_cost_s: float = 3.1e-6
    kernel_floor_s: float = 1.0e-6
    dram_efficiency: float = 4.3 / 4.8
    compute_efficiency: float = 1.0
    occupancy_knee: float = 0.5
    pcie_pinned_efficiency: float = 25.7 / 31.5
    pcie_pageable_efficiency: float = 10.0 / 31.5
    copy_latency_s: float = 0.5e-6
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def source(self, name: str) -> str:
        return self.sources.get(name) or PRESET_SOURCES[name]

    def names(self) -> list[str]:
        return [f.name for f in fields(self) if f.name != "sources"]

    def to_json(self) -> dict:
        return {n: {"value": getattr(self, n), "source": self.source(n)} for n in self.names()}


PRESET_SOURCES = {
    "launch_cost_s": f"host time of one cuLaunchKernel from Python cuda.bindings, about 3.1 us "
                     f"(C++ about 1.6 us, 16 arguments), NVIDIA/cuda-python {_PR1959}",
    "kernel_floor_s": "ASSUMPTION: about 1 us of GPU time for an empty kernel on recent "
                      "NVIDIA GPUs; nvstage run --profile measures it (noise floor)",
    "dram_efficiency": f"4.8 TB/s from the {_H200}; 4.3 TB/s is a device-to-device copy "
                       "measured on one H200 (unpublished: an ASSUMPTION), applied to every "
                       "GPU; --calibrate fits it",
    "compute_efficiency": "none published for plain FP32 kernels: the roofline peak, not "
                          "derated (an upper bound on speed); --calibrate fits it",
    "occupancy_knee": "HEURISTIC, not a measured figure: below half the SM's warps, achieved "
                      "bandwidth is taken to fall in proportion (CUDA C++ Best Practices "
                      "Guide: low occupancy hinders hiding memory latency)",
    "pcie_pinned_efficiency": "ASSUMPTION: pinned copies reach about 80% of the PCIe link "
                              "(25.7 of 31.5 GB/s, Gen4 x16, as once measured on a DGX A100; "
                              "source not published); --calibrate fits it",
    "pcie_pageable_efficiency": "ASSUMPTION: pageable copies about 10 of 31.5 GB/s (Gen4 x16), "
                                "far below pinned (CUDA C++ Best Practices Guide, pinned "
                                "memory); --calibrate fits it",
    "copy_latency_s": "ASSUMPTION: about 0.5 us of GPU time for a tiny host-to-device copy; "
                      "nvstage run --profile measures it (noise floor, 4-byte copy)",
}
DEFAULT_PRESETS = Presets()


# ---------------------------------------------------------------------------------------
# The kernels' real resources
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LaunchFacts:
    """One launch entry: its kernel's record (resources from ptxas and cuobjdump) with the
    launch's dimensions and the theoretical occupancy they give."""

    kernel: str  # as the workload names it
    record: KernelRecord
    shared_dynamic: int
    block_size: int
    grid_blocks: int
    occupancy: float  # theoretical, 0..1
    active_blocks_per_sm: int
    warps_per_block: int
    limiters: tuple[str, ...]

    symbol = property(lambda self: self.record.kernel)
    registers = property(lambda self: self.record.registers)
    spill_stores = property(lambda self: self.record.spill_stores)
    spill_loads = property(lambda self: self.record.spill_loads)
    spill_bytes = property(lambda self: self.record.spill_bytes)
    shared_static = property(lambda self: self.record.shared_bytes)
    barriers = property(lambda self: self.record.barriers or 0)
    resource_source = property(lambda self: self.record.source)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "symbol": self.symbol, "registers": self.registers,
                "spill_stores": self.spill_stores, "spill_loads": self.spill_loads,
                "shared_static": self.shared_static, "shared_dynamic": self.shared_dynamic,
                "barriers": self.barriers, "block_size": self.block_size,
                "grid_blocks": self.grid_blocks, "occupancy": self.occupancy,
                "active_blocks_per_sm": self.active_blocks_per_sm,
                "warps_per_block": self.warps_per_block, "limiters": list(self.limiters),
                "resource_source": self.resource_source}


# Compiled resources of the last few (code, file stamp, arch, toolkit): an estimate, a
# comparison and a calibration estimate the same workload more than once in one process.
# Bounded, so a long-lived process (a notebook, the test session) keeps only the latest.
_RESOURCES_KEPT = 32
_resources_memo: OrderedDict[tuple, Prepared] = OrderedDict()


def _prepared(w: Workload, arch: str, toolkit) -> Prepared:
    import os

    code = w.code
    key = (code.kind, code.path, os.stat(code.path).st_mtime_ns, code.ptx, code.stop,
           code.defines, code.include_dirs, arch, toolkit)
    prep = _resources_memo.get(key)
    if prep is None:
        prep = prepare(w, arch, toolkit=toolkit, resources=True)
        _resources_memo[key] = prep
        while len(_resources_memo) > _RESOURCES_KEPT:
            _resources_memo.popitem(last=False)
    _resources_memo.move_to_end(key)
    return prep


def kernel_resources(w: Workload, arch: str, *, toolkit=None) -> dict[str, KernelRecord]:
    """Compile the workload's code for ``arch`` (``nvstage.run.prepare``: resources from ptxas
    -v and cuobjdump), validate every launch against the kernels' parameter lists, and map
    each launched kernel name to its ``KernelRecord`` (``inspect.kernels``: named as
    ``show --kernel`` names it, the final record where an -rdc build has two)."""
    from nvstage.errors import ArtifactError
    from nvstage.inspect.kernels import KernelNames, final_rows
    from nvstage.run.workload.validate import raise_on_errors, validate

    prep = _prepared(w, arch, toolkit)
    raise_on_errors(validate(w, prep.sigs))
    records = KernelNames(final_rows(prep.resources or []))
    symbols = prep.mangled()
    out = {}
    for lz in w.launches:
        symbol = symbols.get(lz.kernel, lz.kernel)
        if symbol not in records:
            raise ArtifactError(f"no resource usage for kernel {lz.kernel} ({symbol}) on {arch}",
                                hint="is the kernel compiled for this arch?")
        out[lz.kernel] = records[symbol]
    return out


def kernel_facts(w: Workload, arch: str, resources: Mapping[str, KernelRecord]
                 ) -> list[LaunchFacts]:
    from nvstage.hw.occupancy import occupancy

    values = w.param_values()
    out = []
    for i, lz in enumerate(w.launches):
        r = resources[lz.kernel]
        d = w.dims(i, values)
        block = math.prod(d["block"])
        occ = occupancy(arch, block_size=block, registers=r.registers,
                        shared_static=r.shared_bytes, shared_dynamic=d["shared"],
                        barriers=r.barriers or 0)
        out.append(LaunchFacts(
            kernel=lz.kernel, record=r, shared_dynamic=d["shared"], block_size=block,
            grid_blocks=math.prod(d["grid"]), occupancy=occ.occupancy,
            active_blocks_per_sm=occ.active_blocks, warps_per_block=occ.warps_per_block,
            limiters=occ.limiters))
    return out


# ---------------------------------------------------------------------------------------
# The estimate
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LaunchEstimate:
    index: int
    kernel: str
    repeat: int
    counts: LaunchCounts
    facts: LaunchFacts
    parallelism: float  # resident warps / GPU max warps, 0..1
    bandwidth_factor: float  # the heuristic factor on achieved bandwidth, 0..1
    bandwidth: float  # bytes/s achieved (estimate)
    flop_rate: float  # FLOP/s achieved (estimate)
    t_memory_s: float
    t_compute_s: float
    t_kernel_s: float  # one launch
    t_kernel_full_occupancy_s: float  # the same with the bandwidth factor at 1
    bound: str  # "memory" | "compute" | "floor"
    t_launch_s: float  # one launch

    def to_json(self) -> dict:
        return {
            "index": self.index, "kernel": self.kernel, "repeat": self.repeat,
            "counts": self.counts.to_json(), "resources": self.facts.to_json(),
            "parallelism": self.parallelism, "bandwidth_factor": self.bandwidth_factor,
            "bandwidth_Bps": self.bandwidth, "flop_rate": self.flop_rate,
            "t_memory_s": self.t_memory_s, "t_compute_s": self.t_compute_s,
            "t_kernel_s": self.t_kernel_s,
            "t_kernel_full_occupancy_s": self.t_kernel_full_occupancy_s,
            "bound": self.bound, "t_launch_s": self.t_launch_s, "label": LABEL,
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
                    "pcie_bandwidth_Bps": self.gpu.pcie_bandwidth,
                    "sources": {k: self.gpu.source(k) for k in (
                        "memory_bandwidth", "fp32_flops", "sm_count", "pcie_gen",
                        "pcie_width")}},
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


def estimate(workload, gpu: GpuSpec, *, calibration=None, cost=None,
             resources: Mapping[str, KernelRecord] | None = None, toolkit=None) -> Estimate:
    """Estimate one repetition of ``workload`` (a path or a ``Workload``) on ``gpu``.

    ``cost``: the per-launch counts, a ``CostSpec`` or a cost file's path (default: the cost
    file beside the workload). ``calibration``: a ``Calibration`` or ``Presets`` replacing
    the default presets, or a measured run report (``nvstage run --profile --json FILE``)
    to fit them to. ``resources``: kernel name -> ``KernelRecord`` (compiled here when not
    given).
    """
    from nvstage.model.costfile import load_model_input

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
    calibration = fitted(calibration, gpu, toolkit)
    presets = _presets(calibration)
    if resources is None:
        resources = kernel_resources(w, gpu.arch, toolkit=toolkit)
    facts = kernel_facts(w, gpu.arch, resources)
    counts = launch_counts(w, cost)
    lim = gpu.limits
    gpu_warps = gpu.sm_count * lim.max_warps_per_sm
    launches = []
    notes = []
    for c, f in zip(counts, facts):
        resident_blocks = min(f.grid_blocks, gpu.sm_count * f.active_blocks_per_sm)
        parallelism = resident_blocks * f.warps_per_block / gpu_warps
        factor = min(1.0, parallelism / presets.occupancy_knee)
        if factor <= 0:
            raise ModelError(f"kernel {f.kernel} cannot launch on {gpu.arch} with its "
                             f"resources (block {f.block_size}, {f.registers} registers)")
        bw = gpu.memory_bandwidth * presets.dram_efficiency
        rate = gpu.fp32_flops * presets.compute_efficiency
        t_mem = c.bytes / (bw * factor)
        t_cmp = c.flops / (rate * factor)
        t = max(t_mem, t_cmp, presets.kernel_floor_s)
        t_full = max(c.bytes / bw, c.flops / rate, presets.kernel_floor_s)
        bound = ("floor" if t == presets.kernel_floor_s and presets.kernel_floor_s > max(
            t_mem, t_cmp) else "memory" if t_mem >= t_cmp else "compute")
        launches.append(LaunchEstimate(
            c.index, c.kernel, c.repeat, c, f, parallelism, factor, bw * factor, rate * factor,
            t_mem, t_cmp, t, t_full, bound, presets.launch_cost_s))
        if f.spill_stores:
            notes.append(f"{f.kernel} spills {f.spill_stores} bytes per thread (stores): the "
                         "spill traffic is not in the byte count")
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
    if any(e.bound == "floor" for e in launches):
        notes.append("kernels marked 'floor' are shorter than an empty kernel: their time is "
                     "the kernel floor preset")
    return Estimate(w.name, w.file, gpu, presets, tuple(launches), tuple(transfers), inter,
                    iw, ir, pipelined, bound, tuple(notes),
                    calibration=None if isinstance(calibration, Presets) else calibration)


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
