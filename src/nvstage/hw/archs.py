"""What every GPU of one compute capability shares: the SM's limits (warps, blocks, registers,
shared memory), as the occupancy formulas use them, each number with where it came from.

``ARCHS`` is the table; ``arch_limits`` looks an arch up (``sm_90a`` and ``sm_100f`` share
their base arch's SM); ``parse_arch`` reads the ways an arch is written. Product facts (SM
count, clocks, memory) are ``nvstage.hw.gpus``'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from nvstage.errors import UnknownArch, UsageError

# ---------------------------------------------------------------------------------------------
# Sources. Short names keep the table readable; ``sources`` on each record spells them out.
# ---------------------------------------------------------------------------------------------
GUIDE = ("CUDA C++ Programming Guide (CUDA 13.x), Compute Capabilities, Technical "
         "Specifications per Compute Capability")
OCC_H = ("cuda_occupancy.h shipped with CUDA 13.5 (nvidia-cuda-runtime wheel, "
         "__CUDA_OCC_MAJOR__ 12.1)")
CCCL = ("NVIDIA CCCL 3.5.0 libcudacxx include/cuda/__device/arch_traits.h shipped with "
        "CUDA 13.5 (nvidia-cuda-cccl wheel, include/cccl; traits for sm_50..sm_121)")


def _occ(fn: str) -> str:
    return f"{OCC_H}, {fn}()"


KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """The per-SM resources of one compute capability, as the occupancy formulas use them."""

    arch: str  # "sm_90"
    major: int
    minor: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int  # bytes: the largest shared-memory carveout an SM can be configured to
    shared_per_block_optin: int  # bytes: the most one block may opt in to (dynamic smem)
    reserved_shared_per_block: int  # bytes the driver keeps per block (1 KB from sm_80 on)
    shared_alloc_unit: int  # bytes: a block's shared memory is rounded up to this
    barrier_factor: int | None = None  # block barriers per SM = factor x max blocks (sm_90+)
    warp_size: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 64 * KB  # 32-bit registers
    max_registers_per_block: int = 64 * KB
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256  # registers; allocated per warp, rounded up to this
    register_alloc_granularity: str = "warp"
    register_sub_partitions: int = 4  # the register file is split in 4 per SM sub-partition
    shared_per_block_default: int = 48 * KB  # without the opt-in attribute
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size

    @property
    def compute_capability(self) -> str:
        return f"{self.major}.{self.minor}"

    def source(self, name: str) -> str:
        return self.sources.get(name, "")

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        d["max_threads_per_sm"] = self.max_threads_per_sm
        d["compute_capability"] = self.compute_capability
        d["sources"] = dict(self.sources)
        return d


# Fields whose value and source are the same on every arch in the table.
_COMMON_SOURCES = {
    "warp_size": GUIDE,
    "max_threads_per_block": GUIDE,
    "registers_per_sm": f"{GUIDE} (64K 32-bit registers per SM)",
    "max_registers_per_block": f"{GUIDE} (64K)",
    # cuda_occupancy.h's cudaOccRegAllocationMaxPerThread says 256 for cc 7+, but ptxas and
    # the guide cap a thread at 255: the compiler never emits more.
    "max_registers_per_thread": f"{GUIDE} (255); ptxas never allocates more",
    "register_alloc_unit": _occ("cudaOccRegAllocationGranularity") + ": 256 for cc 3..12",
    "register_alloc_granularity": _occ("cudaOccMaxBlocksPerSMRegsLimit") + ": per warp",
    "register_sub_partitions": _occ("cudaOccSubPartitionsPerMultiprocessor") + ": 4",
    "shared_per_block_default": f"{GUIDE} (48 KB without opt-in)",
}


def _arch(arch: str, major: int, minor: int, *, warps: tuple[int, str], blocks: tuple[int, str],
          smem_sm: tuple[int, str], smem_optin: tuple[int, str], reserved: tuple[int, str],
          smem_unit: tuple[int, str], barrier_factor: tuple[int | None, str]) -> ArchLimits:
    sources = dict(_COMMON_SOURCES)
    sources.update(max_warps_per_sm=warps[1], max_blocks_per_sm=blocks[1],
                   shared_per_sm=smem_sm[1], shared_per_block_optin=smem_optin[1],
                   reserved_shared_per_block=reserved[1], shared_alloc_unit=smem_unit[1],
                   barrier_factor=barrier_factor[1])
    return ArchLimits(arch=arch, major=major, minor=minor, max_warps_per_sm=warps[0],
                      max_blocks_per_sm=blocks[0], shared_per_sm=smem_sm[0],
                      shared_per_block_optin=smem_optin[0], reserved_shared_per_block=reserved[0],
                      shared_alloc_unit=smem_unit[0], barrier_factor=barrier_factor[0],
                      sources=sources)


_BLOCKS = _occ("cudaOccMaxBlocksPerMultiprocessor")
_SMEM_UNIT = _occ("cudaOccSMemAllocationGranularity")
_CARVE = _occ("cudaOccAlignUpShmemSizeVoltaPlus") + " (largest carveout step)"
_BARRIERS = _occ("cudaOccMaxBlocksPerSMBlockBarrierLimit")
_NO_BARRIER = "the block-barrier limit applies from cc 9.0 on (cudaOccMaxActiveBlocks...)"
_RESERVED = f"{CCCL} reserved_shared_memory_per_block; {GUIDE} (1 KB reserved per block)"
_OPTIN = f"{GUIDE}; {CCCL} (= shared per SM - reserved per block)"
# For archs the guide's tables have no column for (8.8, 10.7): the toolkit's headers only.
_RESERVED_CCCL = f"{CCCL} reserved_shared_memory_per_block (1 KB from cc 8.0 on)"
_NO_GUIDE = "the Programming Guide's tables have no {} column"

ARCHS: dict[str, ArchLimits] = {a.arch: a for a in (
    _arch("sm_75", 7, 5,
          warps=(32, f"{GUIDE}; {CCCL} (1024 threads per SM)"),
          blocks=(16, f"{_BLOCKS}: 16 for Turing"),
          smem_sm=(64 * KB, f"{GUIDE}; {_CARVE}: Turing 32 or 64 KB"),
          smem_optin=(64 * KB, _OPTIN),
          reserved=(0, f"{CCCL}: 0 before sm_80"),
          smem_unit=(256, f"{_SMEM_UNIT}: 256 for cc 7.x"),
          barrier_factor=(None, _NO_BARRIER)),
    _arch("sm_80", 8, 0,
          warps=(64, f"{GUIDE}; {CCCL} (2048 threads per SM)"),
          blocks=(32, f"{_BLOCKS}: 32 for 8.0"),
          smem_sm=(164 * KB, f"{GUIDE}; {_CARVE}: 8.0 up to 164 KB"),
          smem_optin=(163 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(None, _NO_BARRIER)),
    _arch("sm_86", 8, 6,
          warps=(48, f"{GUIDE}; {CCCL} (1536 threads per SM)"),
          blocks=(16, f"{_BLOCKS}: 16 for 8.x other than 8.0 and 8.9"),
          smem_sm=(100 * KB, f"{GUIDE}; {_CARVE}: 8.6 up to 100 KB"),
          smem_optin=(99 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(None, _NO_BARRIER)),
    _arch("sm_87", 8, 7,
          warps=(48, f"{GUIDE} (1536 threads per SM for 8.7)"),
          blocks=(16, f"{_BLOCKS}: 16 for 8.x other than 8.0 and 8.9"),
          smem_sm=(164 * KB, f"{GUIDE}; {_CARVE}: 8.7 up to 164 KB"),
          smem_optin=(163 * KB, f"{GUIDE} (shared per SM - 1 KB reserved)"),
          reserved=(1 * KB, f"{GUIDE} (1 KB reserved per block from 8.0 on)"),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(None, _NO_BARRIER)),
    _arch("sm_88", 8, 8,
          warps=(48, f"{CCCL} (sm_88 = sm_86 traits: 1536 threads per SM); "
                     + _NO_GUIDE.format("8.8")),
          blocks=(16, f"{_BLOCKS}: 16 for 8.x other than 8.0 and 8.9; {CCCL} agrees"),
          smem_sm=(100 * KB, f"{CCCL} (sm_88 = sm_86 traits); {_CARVE}: 8.x other than 8.0 "
                             "and 8.7 up to 100 KB"),
          smem_optin=(99 * KB, f"{CCCL} (= shared per SM - reserved per block)"),
          reserved=(1 * KB, _RESERVED_CCCL),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(None, _NO_BARRIER)),
    _arch("sm_89", 8, 9,
          warps=(48, f"{GUIDE}; {CCCL} (1536 threads per SM)"),
          blocks=(24, f"{_BLOCKS}: 24 for 8.9; {CCCL} agrees"),
          smem_sm=(100 * KB, f"{GUIDE}; {CCCL}; {_CARVE}: up to 100 KB"),
          smem_optin=(99 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(None, _NO_BARRIER)),
    _arch("sm_90", 9, 0,
          warps=(64, f"{GUIDE}; {CCCL} (2048 threads per SM)"),
          blocks=(32, f"{_BLOCKS}: 32 for 9.x"),
          smem_sm=(228 * KB, f"{GUIDE}; {CCCL}; {_CARVE}: 9.x up to 228 KB"),
          smem_optin=(227 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(2, f"{_BARRIERS}: 2 x max blocks for 9.x")),
    _arch("sm_100", 10, 0,
          warps=(64, f"{GUIDE}; {CCCL} (2048 threads per SM)"),
          blocks=(32, f"{_BLOCKS}: 32 for 10.0; {CCCL} agrees"),
          smem_sm=(228 * KB, f"{GUIDE}; {CCCL}; {_CARVE}: 10.0 up to 228 KB"),
          smem_optin=(227 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(2, f"{_BARRIERS}: 2 x max blocks for 10.0")),
    _arch("sm_103", 10, 3,
          warps=(64, f"{GUIDE}; {CCCL} (sm_103 = sm_100 traits)"),
          blocks=(32, f"{_BLOCKS}: 32 for 10.3 (default case of cc 10)"),
          smem_sm=(228 * KB, f"{CCCL} (sm_103 = sm_100 traits); {_CARVE}: 10.3 up to 228 KB"),
          smem_optin=(227 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(1, f"{_BARRIERS}: 1 x max blocks for 10.x other than 10.0")),
    # sm_107: the guide has no 10.7 column, so every figure comes from the toolkit's two
    # headers, and they disagree on shared memory per SM. CCCL's sm_107 traits copy sm_100's
    # (228 KB; only blocks and threads are overridden); cuda_occupancy.h gives 10.7 alone a
    # 328 KB carveout step. As for sm_12x below, the occupancy header wins: 328 KB. The
    # per-block opt-in maximum is in CCCL only (sm_100's 227 KB): kept as CCCL gives it.
    _arch("sm_107", 10, 7,
          warps=(32, f"{CCCL} (sm_107: 1024 threads per SM); " + _NO_GUIDE.format("10.7")),
          blocks=(16, f"{_BLOCKS}: 16 for 10.7; {CCCL} agrees"),
          smem_sm=(328 * KB, f"{_CARVE}: 10.7 up to 328 KB ({CCCL} says 228 KB, "
                             "sm_100's, for sm_107)"),
          smem_optin=(227 * KB, f"{CCCL} (sm_107 keeps sm_100's 227 KB); cuda_occupancy.h "
                                "takes it from the device"),
          reserved=(1 * KB, _RESERVED_CCCL),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(1, f"{_BARRIERS}: 1 x max blocks for 10.x other than 10.0")),
    _arch("sm_110", 11, 0,
          warps=(48, f"{GUIDE} (11.0: 1536 threads per SM); {CCCL} agrees"),
          blocks=(24, f"{_BLOCKS}: 24 for 11.0; {GUIDE} and {CCCL} agree"),
          smem_sm=(228 * KB, f"{GUIDE}; {CCCL}; {_CARVE}: 11.0 up to 228 KB"),
          smem_optin=(227 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(1, f"{_BARRIERS}: 1 x max blocks for 11.0")),
    # sm_12x: the toolkit's occupancy header says 24 resident blocks, as do the guide and the
    # CCCL shipped with CUDA 13.5 (an earlier CCCL arch_traits.h said 32). Where the header
    # and CCCL disagree, the header is what the occupancy calculator itself computes with.
    _arch("sm_120", 12, 0,
          warps=(48, f"{GUIDE}; {CCCL} (1536 threads per SM)"),
          blocks=(24, f"{_BLOCKS}: 24 for 12.x; {GUIDE} and {CCCL} agree"),
          smem_sm=(100 * KB, f"{GUIDE}; {CCCL}; {_CARVE}: 12.x up to 100 KB"),
          smem_optin=(99 * KB, _OPTIN),
          reserved=(1 * KB, _RESERVED),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(1, f"{_BARRIERS}: 1 x max blocks for 12.x")),
    _arch("sm_121", 12, 1,
          warps=(48, f"{GUIDE} (12.x column: 1536 threads per SM)"),
          blocks=(24, f"{_BLOCKS}: 24 for 12.x"),
          smem_sm=(100 * KB, f"{GUIDE} (12.x); {_CARVE}: 12.1 up to 100 KB"),
          smem_optin=(99 * KB, f"{GUIDE} (12.x: shared per SM - 1 KB reserved)"),
          reserved=(1 * KB, f"{GUIDE} (1 KB reserved per block from 8.0 on)"),
          smem_unit=(128, f"{_SMEM_UNIT}: 128 for cc 8..12"),
          barrier_factor=(1, f"{_BARRIERS}: 1 x max blocks for 12.x")),
)}

_ARCH_RE = re.compile(r"^(?:sm_|compute_|lto_)?(\d{2,3})([af]?)$")
_CC_RE = re.compile(r"^(\d{1,2})\.(\d)$")


def parse_arch(text: str) -> tuple[int, int, str]:
    """``"sm_90a"`` -> (9, 0, "a"); accepts sm_/compute_/lto_ prefixes, "90" and "9.0"."""
    t = text.strip().lower()
    m = _CC_RE.match(t)
    if m:
        return int(m.group(1)), int(m.group(2)), ""
    m = _ARCH_RE.match(t)
    if not m:
        raise UsageError(f"not an architecture: {text!r}",
                         hint="write it as sm_90, sm_90a, compute_90, 90 or 9.0")
    num = int(m.group(1))
    return num // 10, num % 10, m.group(2)


def arch_limits(arch: str) -> ArchLimits:
    """The SM limits of an arch; ``sm_90a`` and ``sm_100f`` share their base arch's SM."""
    major, minor, _suffix = parse_arch(arch)
    key = f"sm_{major}{minor}"
    try:
        return ARCHS[key]
    except KeyError:
        read_as = f" (read as {key})" if key != arch.strip().lower() else ""
        raise UnknownArch(f"no SM limits known for {arch}{read_as}",
                          hint=f"nvstage's arch table has {', '.join(ARCHS)}") from None
