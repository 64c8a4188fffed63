"""A Triton kernel as ``show`` sets it out: Triton's metadata (``TritonInfo``) and the
theoretical occupancy of its one launch shape, which Triton fixes itself (num_warps x 32
threads, its metadata's dynamic shared memory), on the arch it was built for."""

from __future__ import annotations

from nvstage.inspect.kernels import KernelRecord
from nvstage.compiler.manifest.triton_info import triton_info
from nvstage.errors import NvstageError
from nvstage.hw.occupancy import occupancy
from nvstage.inspect.resources import build_resources


def launch_occupancy(arch: str, threads: int, dynamic_shared: int, r: KernelRecord):
    """The ``hw.occupancy.Occupancy`` of ``r`` launched with ``threads`` and
    ``dynamic_shared``; None where it cannot be told (no registers, an arch without limits)."""
    if r.registers is None:
        return None
    try:
        return occupancy(arch, block_size=threads, registers=r.registers,
                         shared_static=r.shared_bytes or 0, shared_dynamic=dynamic_shared,
                         barriers=r.barriers or 0)
    except NvstageError:
        return None


def triton_section(build, toolkit) -> dict | None:
    """``show``'s ``triton`` section of a Triton build: its metadata, and per kernel record
    the occupancy at its launch. None for other builds."""
    info = triton_info(build)
    if info is None:
        return None
    launches = []
    for r in build_resources(build, toolkit):
        occ = launch_occupancy(r.arch, info.threads, info.shared, r)
        launches.append({"kernel": r.kernel, "arch": r.arch, "block": info.threads,
                         "dynamic_shared": info.shared,
                         "occupancy": occ.to_json() if occ is not None else None})
    return {**info.to_json(), "launches": launches}
