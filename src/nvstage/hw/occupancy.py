"""Theoretical occupancy, offline: the CUDA occupancy formulas over a table of arch limits.

The arithmetic follows ``cudaOccMaxActiveBlocksPerMultiprocessor`` in the toolkit's
``cuda_occupancy.h`` (the code behind the CUDA Occupancy Calculator), for the default cache
configuration with the kernel opted in to as much shared memory as it asks for:

- warps:      floor(max warps per SM / ceil(block / 32))
- registers:  registers per warp = regs x 32 rounded up to 256; the register file is split
              into 4 sub-partitions, so warps per SM = 4 x floor((64K / 4) / regs per warp);
              blocks = floor(that / warps per block). A block that does not fit the per-block
              register limit (checked with its warps rounded up to a multiple of 4, as the
              hardware does) cannot launch at all.
- shared:     (static + dynamic + reserved per block) rounded up to the allocation unit,
              against the largest shared-memory carveout of the SM; a block needing more than
              the opt-in maximum per block cannot launch.
- blocks:     the max resident blocks per SM.
- barriers:   from sm_90 on, block barriers per SM / barriers the kernel uses.

The result is the minimum, and every factor that attains it is named.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from nvstage.errors import OccupancyError
from nvstage.hw.archs import ArchLimits, arch_limits

WARPS = "warps"
REGISTERS = "registers"
SHARED = "shared memory"
BLOCKS = "blocks"
BARRIERS = "barriers"
_UNLIMITED = 1 << 30  # stands for "this resource sets no limit" (the header's INT_MAX)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    """The theoretical occupancy of one kernel at one block size on one arch."""

    arch: str
    block_size: int
    registers: int  # per thread
    shared_static: int  # bytes
    shared_dynamic: int  # bytes
    barriers: int
    warps_per_block: int
    registers_per_block: int  # allocated: per-warp rounding included
    shared_per_block: int  # allocated: reserved and rounding included
    limit_warps: int
    limit_registers: int
    limit_shared: int
    limit_blocks: int
    limit_barriers: int | None  # None where the barrier limit does not apply
    active_blocks: int
    active_warps: int
    max_warps: int
    limiters: tuple[str, ...]
    needs_opt_in: bool  # the block uses more than 48 KB: cudaFuncSetAttribute is required
    notes: tuple[str, ...] = field(default=())

    @property
    def occupancy(self) -> float:
        """Active warps over the SM's maximum, 0..1."""
        return self.active_warps / self.max_warps

    @property
    def active_threads(self) -> int:
        return self.active_blocks * self.block_size

    @property
    def launchable(self) -> bool:
        return self.active_blocks > 0

    def limits(self) -> dict[str, int | None]:
        """Each factor's block count; ``None`` where it sets no limit."""
        def show(n: int | None) -> int | None:
            return None if n is None or n >= _UNLIMITED else n

        return {WARPS: show(self.limit_warps), REGISTERS: show(self.limit_registers),
                SHARED: show(self.limit_shared), BLOCKS: show(self.limit_blocks),
                BARRIERS: show(self.limit_barriers)}

    def explain(self) -> str:
        lim = " and ".join(self.limiters)
        if not self.launchable:
            why = "; ".join(self.notes) or f"limited by {lim}"
            return f"block {self.block_size} on {self.arch}: cannot launch ({why})"
        return (f"block {self.block_size} on {self.arch}: {self.active_blocks} blocks, "
                f"{self.active_warps}/{self.max_warps} warps per SM "
                f"({self.occupancy:.0%}), limited by {lim}")

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("limit_warps", "limit_registers", "limit_shared", "limit_blocks",
                  "limit_barriers"):
            if d[k] is not None and d[k] >= _UNLIMITED:
                d[k] = None
        d["limiters"] = list(self.limiters)
        d["notes"] = list(self.notes)
        d["occupancy"] = self.occupancy
        d["active_threads"] = self.active_threads
        return d


def _limits(arch: ArchLimits | str) -> ArchLimits:
    return arch if isinstance(arch, ArchLimits) else arch_limits(arch)


def _check(lim: ArchLimits, block_size: int, registers: int, shared_static: int,
           shared_dynamic: int, barriers: int) -> None:
    if block_size <= 0:
        raise OccupancyError(f"block size must be positive, got {block_size}")
    if block_size > lim.max_threads_per_block:
        raise OccupancyError(
            f"block size {block_size} exceeds {lim.max_threads_per_block} threads per block "
            f"on {lim.arch}", hint="a launch with more threads per block fails; use at most "
                                   f"{lim.max_threads_per_block}")
    if registers < 0:
        raise OccupancyError(f"registers per thread must be >= 0, got {registers}")
    if registers > lim.max_registers_per_thread:
        raise OccupancyError(
            f"{registers} registers per thread exceeds the maximum of "
            f"{lim.max_registers_per_thread} on {lim.arch}",
            hint="ptxas never allocates more; the number is probably not a register count")
    if shared_static < 0 or shared_dynamic < 0:
        raise OccupancyError("shared memory sizes must be >= 0 bytes")
    if barriers < 0:
        raise OccupancyError(f"barrier count must be >= 0, got {barriers}")


def occupancy(arch: ArchLimits | str, *, block_size: int, registers: int,
              shared_static: int = 0, shared_dynamic: int = 0,
              barriers: int = 0) -> Occupancy:
    """Theoretical active blocks and warps per SM for one launch configuration.

    ``registers`` per thread and ``shared_static`` as ptxas reports them; ``shared_dynamic``
    is the launch's dynamic shared memory in bytes; ``barriers`` as ptxas reports them
    ("used N barriers"), which only matters from sm_90 on.
    """
    lim = _limits(arch)
    _check(lim, block_size, registers, shared_static, shared_dynamic, barriers)
    notes: list[str] = []
    warps_per_block = -(-block_size // lim.warp_size)

    # Warps.
    limit_warps = lim.max_warps_per_sm // warps_per_block

    # Registers, allocated per warp in units of 256, per sub-partition.
    regs_per_warp = _round_up(registers * lim.warp_size, lim.register_alloc_unit)
    regs_per_block = regs_per_warp * warps_per_block
    # The hardware checks the per-block limit as if warps filled all sub-partitions evenly.
    regs_assumed = regs_per_warp * _round_up(warps_per_block, lim.register_sub_partitions)
    if regs_assumed > lim.max_registers_per_block or regs_per_block > lim.max_registers_per_block:
        limit_regs = 0
        notes.append(f"{registers} registers x {block_size} threads needs "
                     f"{regs_assumed} registers per block, more than the "
                     f"{lim.max_registers_per_block} a block may have")
    elif regs_per_warp == 0:
        limit_regs = _UNLIMITED
    else:
        per_partition = lim.registers_per_sm // lim.register_sub_partitions
        warps_by_regs = (per_partition // regs_per_warp) * lim.register_sub_partitions
        limit_regs = warps_by_regs // warps_per_block

    # Shared memory: the driver's reservation is part of every block's footprint.
    smem_request = shared_static + shared_dynamic
    smem_per_block = _round_up(smem_request + lim.reserved_shared_per_block,
                               lim.shared_alloc_unit)
    needs_opt_in = smem_request > lim.shared_per_block_default
    if smem_per_block > lim.shared_per_block_optin + lim.reserved_shared_per_block:
        limit_smem = 0
        notes.append(f"{smem_request} bytes of shared memory per block is more than the "
                     f"{lim.shared_per_block_optin} a block may opt in to on {lim.arch}")
    elif smem_per_block == 0:
        limit_smem = _UNLIMITED
    else:
        limit_smem = lim.shared_per_sm // smem_per_block

    limit_blocks = lim.max_blocks_per_sm
    overall = min(limit_warps, limit_regs, limit_smem, limit_blocks)

    limit_bars: int | None = None
    if lim.barrier_factor is not None and barriers > 0:
        limit_bars = (lim.barrier_factor * lim.max_blocks_per_sm) // barriers
        overall = min(overall, limit_bars)

    named = [(WARPS, limit_warps), (REGISTERS, limit_regs), (SHARED, limit_smem),
             (BLOCKS, limit_blocks), (BARRIERS, limit_bars)]
    limiters = tuple(n for n, v in named if v is not None and v == overall)
    if needs_opt_in and overall > 0:
        notes.append(f"uses {smem_request} bytes of shared memory per block: more than 48 KB "
                     f"needs cudaFuncSetAttribute(MaxDynamicSharedMemorySize)")

    return Occupancy(
        arch=lim.arch, block_size=block_size, registers=registers,
        shared_static=shared_static, shared_dynamic=shared_dynamic, barriers=barriers,
        warps_per_block=warps_per_block, registers_per_block=regs_per_block,
        shared_per_block=smem_per_block, limit_warps=limit_warps, limit_registers=limit_regs,
        limit_shared=limit_smem, limit_blocks=limit_blocks, limit_barriers=limit_bars,
        active_blocks=overall, active_warps=overall * warps_per_block,
        max_warps=lim.max_warps_per_sm, limiters=limiters, needs_opt_in=needs_opt_in,
        notes=tuple(notes))


@dataclass(frozen=True)
class Sweep:
    """Occupancy over a range of block sizes, and the best of them."""

    results: tuple[Occupancy, ...]
    best: Occupancy | None  # None when no block size can launch

    def to_json(self) -> dict:
        return {"best": self.best.to_json() if self.best else None,
                "results": [r.to_json() for r in self.results]}


def sweep(arch: ArchLimits | str, *, registers: int, shared_static: int = 0,
          shared_dynamic: int = 0, barriers: int = 0,
          block_sizes: list[int] | range | None = None,
          max_block: int | None = None) -> Sweep:
    """Occupancy for each block size (default 32..1024 step 32, capped by ``max_block``,
    e.g. a kernel's ``__launch_bounds__``).

    The best is the one with the most active threads; on a tie the larger block wins, as in
    ``cudaOccMaxPotentialOccupancyBlockSize``, which tries sizes from the largest down.
    """
    lim = _limits(arch)
    cap = min(lim.max_threads_per_block, max_block or lim.max_threads_per_block)
    sizes = list(block_sizes) if block_sizes is not None else list(
        range(lim.warp_size, cap + 1, lim.warp_size))
    if not sizes:
        raise OccupancyError("no block sizes to sweep")
    results = tuple(occupancy(lim, block_size=b, registers=registers,
                              shared_static=shared_static, shared_dynamic=shared_dynamic,
                              barriers=barriers) for b in sizes)
    best: Occupancy | None = None
    for r in sorted(results, key=lambda r: -r.block_size):
        if r.active_threads > 0 and (best is None or r.active_threads > best.active_threads):
            best = r
    return Sweep(results=results, best=best)
