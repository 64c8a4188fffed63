"""The occupancy calculator against hand-derived answers and a published example.

Every expected value below was derived by hand from the formulas in nvstage/occupancy.py's
docstring (which follow cudaOccMaxActiveBlocksPerMultiprocessor in cuda_occupancy.h, CUDA
13.5) and the limits in nvstage/gpus.py; the derivation is in each case's comment.
Abbreviations: w/b = warps per block, r/w = registers per warp after rounding to 256,
part = 65536 / 4 = 16384 registers per sub-partition.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvstage.errors import UsageError
from nvstage.errors import OccupancyError
from nvstage.hw.gpus import ARCHS
from nvstage.hw.occupancy import (
    BARRIERS,
    BLOCKS,
    REGISTERS,
    SHARED,
    WARPS,
    occupancy,
    sweep,
)

KB = 1024

# (arch, block, regs, static smem, dynamic smem, blocks/SM, warps/SM, limiters)
CASES = [
    # w/b 8; warps 64/8=8; r/w 1024 -> 16384/1024=16 per part -> 64 warps -> 8; 100%.
    ("sm_90", 256, 32, 0, 0, 8, 64, {WARPS, REGISTERS}),
    # r/w 40*32=1280 -> part 12 warps -> 48 warps -> 48/8=6 blocks; 75%.
    ("sm_90", 256, 40, 0, 0, 6, 48, {REGISTERS}),
    # The sub-partition split matters: a plain 65536/1280 = 51 warps would give 25 blocks of
    # 2 warps; per part 12 warps -> 48 -> 24 blocks.
    ("sm_90", 64, 40, 0, 0, 24, 48, {REGISTERS}),
    # r/w 2048 -> 8 per part -> 32 warps -> 32/4 = 8 blocks; 50%.
    ("sm_80", 128, 64, 0, 0, 8, 32, {REGISTERS}),
    # sm_86: 48 warps. w/b 8 -> 6 blocks; regs allow 8; 100%.
    ("sm_86", 256, 32, 0, 0, 6, 48, {WARPS}),
    # sm_89: one-warp blocks, 16 regs (r/w 512 -> 128 warps); 24 blocks cap -> 24 warps, 50%.
    ("sm_89", 32, 16, 0, 0, 24, 24, {BLOCKS}),
    # sm_75: 32 warps. w/b 32 -> 1 block; regs allow 2; 100%.
    ("sm_75", 1024, 32, 0, 0, 1, 32, {WARPS}),
    # sm_120: w/b 2 -> warps 24, blocks cap 24 (cuda_occupancy.h), regs 64 -> 24 blocks.
    ("sm_120", 64, 16, 0, 0, 24, 48, {WARPS, BLOCKS}),
    # sm_100 like sm_90: r/w 2048 -> 32 warps -> 4 blocks of 8 warps; 50%.
    ("sm_100", 256, 64, 0, 0, 4, 32, {REGISTERS}),
    # Shared: 48 KB dynamic + 1 KB reserved = 50176 B (a multiple of 128);
    # 164 KB = 167936 / 50176 = 3 blocks of 4 warps = 12 warps; 18.75%.
    ("sm_80", 128, 32, 0, 48 * KB, 3, 12, {SHARED}),
    # 100 KB + 1 KB = 103424 B; 228 KB = 233472 / 103424 = 2 blocks of 8 warps; 25%.
    ("sm_90", 256, 32, 0, 100 * KB, 2, 16, {SHARED}),
    # Static and dynamic add up: 20000 + 10000 + 1024 = 31024 -> 31104 (243 x 128);
    # 102400 / 31104 = 3 blocks of 4 warps; 12/48 = 25%.
    ("sm_86", 128, 32, 20000, 10000, 3, 12, {SHARED}),
    # sm_75: unit 256, no reservation: 10000 -> 10240; 65536 / 10240 = 6 blocks of 4 warps.
    ("sm_75", 128, 32, 10000, 0, 6, 24, {SHARED}),
    # 255 regs: 8160 -> r/w 8192; per block 8 x 8192 = 65536 fits; part 16384/8192 = 2 warps
    # -> 8 warps -> 1 block; 12.5%.
    ("sm_90", 256, 255, 0, 0, 1, 8, {REGISTERS}),
    # sm_88 like sm_86: one-warp blocks, 16 regs (r/w 512 -> 128 warps); 16 blocks cap ->
    # 16 of 48 warps.
    ("sm_88", 32, 16, 0, 0, 16, 16, {BLOCKS}),
    # sm_110: w/b 2 -> warps 48/2 = 24, blocks cap 24, regs r/w 512 -> 64 blocks; 100%.
    ("sm_110", 64, 16, 0, 0, 24, 48, {WARPS, BLOCKS}),
    # sm_107: 32 warps. w/b 32 -> 1 block; r/w 1024 -> 64 warps -> 2 blocks; 100%.
    ("sm_107", 1024, 32, 0, 0, 1, 32, {WARPS}),
    # sm_107 shared: 160 KB + 1 KB = 164864 B (1288 x 128); 328 KB = 335872 / 164864 = 2
    # blocks of 4 warps (with CCCL's 228 KB it would be 1).
    ("sm_107", 128, 32, 0, 160 * KB, 2, 8, {SHARED}),
    # sm_110 like sm_90's shared memory: 100 KB + 1 KB = 103424; 233472 / 103424 = 2 blocks.
    ("sm_110", 256, 32, 0, 100 * KB, 2, 16, {SHARED}),
]


@pytest.mark.parametrize("arch,block,regs,static,dyn,blocks,warps,limiters", CASES)
def test_known_answers(arch, block, regs, static, dyn, blocks, warps, limiters):
    r = occupancy(arch, block_size=block, registers=regs, shared_static=static,
                  shared_dynamic=dyn)
    assert r.active_blocks == blocks
    assert r.active_warps == warps
    assert r.occupancy == pytest.approx(warps / ARCHS[arch].max_warps_per_sm)
    assert set(r.limiters) == limiters


def test_each_limit_is_reported():
    # sm_90, 256 threads, 40 regs, 100 KB dynamic: warps 8, regs 6, shared 2, blocks 32.
    r = occupancy("sm_90", block_size=256, registers=40, shared_dynamic=100 * KB)
    assert r.limits() == {WARPS: 8, REGISTERS: 6, SHARED: 2, BLOCKS: 32, BARRIERS: None}
    assert r.shared_per_block == 103424 and r.registers_per_block == 1280 * 8
    assert r.needs_opt_in  # 100 KB > 48 KB


def test_no_shared_memory_use_is_still_charged_the_reservation():
    # 0 B + 1 KB reserved: 233472 / 1024 = 228, above every other limit.
    r = occupancy("sm_90", block_size=32, registers=8)
    assert r.limit_shared == 228 and r.shared_per_block == 1024
    # On sm_75 there is no reservation: shared memory sets no limit.
    assert occupancy("sm_75", block_size=32, registers=8).limits()[SHARED] is None


# Cross-check against a published example: the CUDA C++ Best Practices Guide, "Calculating
# Occupancy": on compute capability 7.0, 37 registers per thread give 75% occupancy with
# 128-thread blocks (12 blocks) and 63% with 320-thread blocks (4 blocks). sm_80 has the
# same register file, warp and block limits as 7.0 (64K registers, 64 warps, 32 blocks).
def test_best_practices_guide_example():
    r128 = occupancy("sm_80", block_size=128, registers=37)
    assert (r128.active_blocks, r128.occupancy) == (12, 0.75)
    r320 = occupancy("sm_80", block_size=320, registers=37)
    assert r320.active_blocks == 4
    assert r320.occupancy == 40 / 64  # 62.5%, which the guide rounds to 63%


def test_same_guide_32_registers_is_the_most_for_full_occupancy():
    # Best Practices Guide: with 64K registers and 2048 threads, 100% needs <= 32 registers.
    assert occupancy("sm_80", block_size=256, registers=32).occupancy == 1.0
    assert occupancy("sm_80", block_size=256, registers=33).occupancy < 1.0


def test_block_that_exceeds_the_per_block_register_limit_cannot_launch():
    # 255 regs x 288 threads: 9 warps, rounded to 12 for the hardware check: 12 x 8192 > 64K.
    r = occupancy("sm_90", block_size=288, registers=255)
    assert r.active_blocks == 0 and not r.launchable
    assert REGISTERS in r.limiters
    assert "65536" in r.explain()


def test_too_much_shared_memory_cannot_launch():
    r = occupancy("sm_86", block_size=128, registers=32, shared_dynamic=100 * KB)
    assert r.active_blocks == 0 and SHARED in r.limiters
    assert "opt in" in r.explain()
    # 99 KB is exactly the opt-in maximum on sm_86: one block fits.
    assert occupancy("sm_86", block_size=128, registers=32,
                     shared_dynamic=99 * KB).active_blocks == 1


def test_barriers_limit_from_sm_90_on():
    # sm_90: 2 x 32 = 64 barriers per SM; 16 per block -> 4 blocks.
    r = occupancy("sm_90", block_size=32, registers=16, barriers=16)
    assert r.active_blocks == 4 and r.limiters == (BARRIERS,)
    # sm_80: no barrier limit in the calculator; the 32-block cap wins.
    assert occupancy("sm_80", block_size=32, registers=16, barriers=16).active_blocks == 32
    # sm_110 and sm_107: 1 x max blocks (24, 16) barriers per SM; 4 per block -> 6, 4 blocks.
    assert occupancy("sm_110", block_size=32, registers=16, barriers=4).active_blocks == 6
    assert occupancy("sm_107", block_size=32, registers=16, barriers=4).active_blocks == 4


@pytest.mark.parametrize("kwargs,words", [
    (dict(block_size=1056, registers=32), ["1056", "1024"]),
    (dict(block_size=0, registers=32), ["positive"]),
    (dict(block_size=256, registers=256), ["256", "255"]),
    (dict(block_size=256, registers=-1), ["registers"]),
    (dict(block_size=256, registers=32, shared_dynamic=-5), ["shared"]),
])
def test_impossible_inputs_are_clear_errors(kwargs, words):
    with pytest.raises(OccupancyError) as e:
        occupancy("sm_90", **kwargs)
    assert isinstance(e.value, UsageError)
    for w in words:
        assert w in e.value.message


def test_unknown_arch():
    with pytest.raises(UsageError):
        occupancy("sm_50", block_size=128, registers=32)


def test_sweep_covers_32_to_1024_and_picks_the_best():
    s = sweep("sm_90", registers=40)
    assert [r.block_size for r in s.results] == list(range(32, 1025, 32))
    # r/w 1280 -> 48 warps per SM at most, reached by any warps-per-block that divides 48;
    # the largest is 24 warps = 768 threads, 2 blocks (1024 threads = 32 warps -> 1 block ->
    # 32 warps). Ties go to the larger block, as in cudaOccMaxPotentialOccupancyBlockSize.
    assert s.best.block_size == 768 and s.best.active_warps == 48
    assert s.best.occupancy == 0.75


def test_sweep_ties_prefer_the_larger_block():
    # 32 regs on sm_90: every block size from 64 to 1024 that divides 2048 threads reaches
    # 100%; the largest is 1024.
    s = sweep("sm_90", registers=32)
    assert s.best.block_size == 1024 and s.best.occupancy == 1.0


def test_sweep_respects_launch_bounds_and_reports_nothing_launchable():
    s = sweep("sm_90", registers=32, max_block=256)
    assert s.results[-1].block_size == 256 and s.best.block_size == 256
    none = sweep("sm_86", registers=32, shared_dynamic=120 * KB)
    assert none.best is None and all(not r.launchable for r in none.results)


def test_json_round_trip():
    import json

    r = occupancy("sm_90", block_size=256, registers=40)
    d = json.loads(json.dumps(r.to_json()))
    assert d["active_blocks"] == 6 and d["occupancy"] == 0.75
    assert d["limiters"] == ["registers"] and d["limit_barriers"] is None


# Properties over any valid input: the result is the minimum of the limits, never above the
# SM's warp budget, and more registers or more shared memory never raise occupancy.
_inputs = st.tuples(st.sampled_from(sorted(ARCHS)), st.integers(1, 1024), st.integers(0, 255),
                    st.integers(0, 64 * KB), st.integers(0, 16))


@settings(max_examples=300, deadline=None)
@given(_inputs)
def test_properties(args):
    arch, block, regs, smem, bars = args
    r = occupancy(arch, block_size=block, registers=regs, shared_dynamic=smem, barriers=bars)
    assert 0 <= r.active_warps <= r.max_warps
    limits = [v for v in r.limits().values() if v is not None]
    assert r.active_blocks == min(limits + [r.limit_blocks])
    assert r.limiters and all(r.limits()[n] == r.active_blocks for n in r.limiters)
    more_regs = occupancy(arch, block_size=block, registers=min(regs + 8, 255),
                          shared_dynamic=smem, barriers=bars)
    assert more_regs.active_blocks <= r.active_blocks
    more_smem = occupancy(arch, block_size=block, registers=regs, shared_dynamic=smem + 4096,
                          barriers=bars)
    assert more_smem.active_blocks <= r.active_blocks
