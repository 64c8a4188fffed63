"""The theoretical occupancy of an artifact's kernels: each kernel's record (``inspect.kernels``)
for the target arch, through the formulas of ``hw.occupancy``. What ``nvstage occupancy``
computes; a kernel may also be given by its numbers alone."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from nvstage.errors import UsageError
from nvstage.hw.occupancy import Occupancy, Sweep, occupancy, sweep as sweep_sizes
from nvstage.inspect.kernels import KernelRecord, for_arch, select
from nvstage.compiler.manifest.model import load_build, partial_note
from nvstage.compiler.manifest.triton_info import triton_info
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.hw.gpus import parse_arch
from nvstage.inspect.fatbin import kind_of_file
from nvstage.inspect.gather import resources_of
from nvstage.inspect.resources import build_resources

GIVEN = "command line"  # the source of a kernel given by its numbers


@dataclass(frozen=True)
class KernelOccupancy:
    record: KernelRecord  # whose registers, shared memory and barriers were used
    arch: str  # the arch the occupancy is for (the record's may be another: borrowed)
    occupancy: Occupancy | None  # at the block size asked for
    sweep: Sweep | None  # over every block size, when asked for

    @property
    def given(self) -> bool:
        return self.record.source == GIVEN

    def to_json(self) -> dict:
        r = self.record
        d = {"kernel": r.kernel, "demangled": r.demangled, "arch": self.arch,
             "registers": r.registers, "shared_static": r.shared_bytes,
             "barriers": r.barriers or 0, "source": r.source,
             "resources_arch": None if self.given else r.arch}
        if not self.given:
            d.update(spills=r.spills, final=r.final)
        return d | {"occupancy": self.occupancy.to_json() if self.occupancy else None,
                    "sweep": self.sweep.to_json() if self.sweep else None}


@dataclass
class OccupancyReport:
    gpu: object  # the target ``GpuSpec``; None: each kernel on its own arch
    block: int | None
    dynamic_shared: int
    kernels: list[KernelOccupancy]
    partial: dict = field(default_factory=dict)  # {"status", "note"}: a build not whole
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"gpu": self.gpu.name if self.gpu else None, "block": self.block,
                "dynamic_shared": self.dynamic_shared,
                "kernels": [k.to_json() for k in self.kernels],
                **({"partial": self.partial} if self.partial else {})}


def kernel_occupancy(artifact: str | os.PathLike | None = None, *, gpu=None,
                     block: int | None = None, dynamic_shared: int = 0, sweep: bool = False,
                     kernel: str | None = None, registers: int | None = None,
                     shared_static: int = 0, barriers: int = 0, toolkit=None,
                     nvcc: str | None = None) -> OccupancyReport:
    """Occupancy at ``block`` threads (and over every block size with ``sweep``) of each
    kernel of ``artifact`` (a cubin, fatbin, object, executable or keep folder; only
    ``kernel`` when named), on ``gpu`` (a ``GpuSpec``; None: each kernel on the arch it was
    built for). Without an artifact, one kernel given by ``registers``, ``shared_static`` and
    ``barriers``, on ``gpu``."""
    launch = _triton_launch(artifact) if artifact is not None else None
    if launch is not None:  # Triton fixes the block and the dynamic shared memory itself
        if block is None and not sweep:
            block = launch[0]
        dynamic_shared = dynamic_shared or launch[1]
    if block is None and not sweep:
        raise UsageError("give a block size with --block N, or --sweep to try them all")
    report = OccupancyReport(gpu, block, dynamic_shared, [])
    if launch is not None:
        report.notes.append(f"a Triton kernel: every launch has {launch[0]} threads (its "
                            f"num_warps x 32) and {launch[1]} bytes of dynamic shared memory")
    if artifact is None:
        if registers is None:
            raise UsageError("give an artifact, or the kernel's numbers with --registers N "
                             "[--shared BYTES]")
        if gpu is None:
            raise UsageError("with --registers, say which GPU: --gpu h200 or --arch sm_90")
        chosen = [(KernelRecord(kernel or "(given)", kernel or "(given)", gpu.arch, registers,
                                shared_bytes=shared_static, barriers=barriers, source=GIVEN),
                   gpu.arch)]
    else:
        if registers is not None:
            raise UsageError("--registers describes a kernel without an artifact; give one "
                             "or the other")
        chosen = _records(artifact, kernel, gpu, toolkit, nvcc, report)
    for r, arch in chosen:
        figures = dict(registers=r.registers, shared_static=r.shared_bytes,
                       shared_dynamic=dynamic_shared, barriers=r.barriers or 0)
        report.kernels.append(KernelOccupancy(
            r, arch, occupancy(arch, block_size=block, **figures) if block is not None else None,
            sweep_sizes(arch, **figures) if sweep else None))
    return report


def _triton_launch(artifact) -> tuple[int, int] | None:
    """(threads, dynamic shared bytes) of a kept Triton build's launches; None otherwise."""
    if kind_of_file(artifact) != "build":
        return None

    info = triton_info(load_build(artifact))
    return (info.threads, info.shared) if info is not None else None


def _records(artifact, kernel: str | None, gpu, toolkit, nvcc, report: OccupancyReport
             ) -> list[tuple[KernelRecord, str]]:
    """(record, arch to compute for) per kernel: on ``gpu`` the record of its arch or the
    nearest older one (``kernels.for_arch``); without one, per kernel and arch."""
    toolkit = toolkit or find_toolkit(nvcc)
    if kind_of_file(artifact) == "build":

        build = load_build(artifact)
        if note := partial_note(build):
            report.notes.append(note)
            report.partial.update(status=build.status, note=note)
        res = build_resources(build, toolkit)
    else:
        res = resources_of(artifact, toolkit)
    if kernel:
        res = select(res, kernel)
        if not res:
            raise UsageError(f"no kernel named {kernel!r} in {artifact}")
    if not res:
        raise UsageError(f"no kernels with resource usage in {artifact}")
    groups: dict = {}
    for r in res:
        groups.setdefault((r.kernel, r.arch if gpu is None else None), []).append(r)
    out, borrowed = [], []
    for group in groups.values():
        chosen = for_arch(group, gpu.arch if gpu else None)
        if gpu and parse_arch(chosen.arch)[:2] != parse_arch(gpu.arch)[:2]:
            borrowed.append(f"{chosen.demangled} ({chosen.arch})")
        out.append((chosen, gpu.arch if gpu else chosen.arch))
    if borrowed:
        # Occupancy still says something useful, but the numbers belong to another build.
        report.notes.append(f"{artifact} has no {gpu.arch} build of {', '.join(borrowed)}; "
                            f"using those builds' registers and shared memory, which an "
                            f"{gpu.arch} build may change")
    return out
