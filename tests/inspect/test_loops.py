"""inspect.loops on crafted listings: many loops are found, nested and counted in time that
grows with the listing, not with its square."""

from __future__ import annotations

import time

from nvstage.inspect.loops import find_loops, multiplicities
from nvstage.inspect.sass import SassInstruction


def _nested(n: int) -> list[SassInstruction]:
    """``n`` loops, each inside the one before: n labels, then n branches back, innermost
    first."""
    ins = [SassInstruction(16 * k, "IADD3", "IADD3 R1, R1, 0x1, RZ", label=f".L_x_{k}")
           for k in range(n)]
    ins += [SassInstruction(16 * (n + k), "BRA", f"@P0 BRA `(.L_x_{n - 1 - k})")
            for k in range(n)]
    return ins


def test_nested_loops_and_how_often_each_instruction_runs():
    ins = _nested(3)
    loops = find_loops(ins)
    assert [(lp.head, lp.tail, lp.depth) for lp in loops] == [(0, 0x50, 1), (0x10, 0x40, 2),
                                                              (0x20, 0x30, 3)]
    assert multiplicities(ins, loops, [2, 3, 5]) == [2, 6, 30, 30, 6, 2]
    from nvstage.inspect.loops import enclosing

    assert enclosing([0, 0x20, 0x60], loops) == [(0,), (0, 1, 2), ()]


def test_a_listing_with_thousands_of_loops_is_read_in_linear_time():
    """12,000 nested loops (a crafted cubin under the model's 100,000 instructions, counted
    before the model gives up past 256 loops): each loop's depth compared every pair, 25 s
    here."""
    start = time.monotonic()
    loops = find_loops(_nested(12_000))
    assert time.monotonic() - start < 3
    assert len(loops) == 12_000 and max(lp.depth for lp in loops) == 12_000


def test_how_often_instructions_run_is_not_a_walk_per_instruction_and_loop():
    """256 loops over 100,000 instructions (the most the model walks): 25 million steps
    before, seconds per launch estimated."""
    ins = _nested(256)
    ins = ins[:256] + [SassInstruction(16 * (256 + k), "FFMA", "FFMA R1, R1, R2, R3")
                       for k in range(100_000)] + \
        [SassInstruction(16 * (100_256 + k), "BRA", f"@P0 BRA `(.L_x_{255 - k})")
         for k in range(256)]
    loops = find_loops(ins)
    start = time.monotonic()
    weights = multiplicities(ins, loops, 1.0)
    assert time.monotonic() - start < 1.5
    assert len(loops) == 256 and weights == [1.0] * len(ins)
