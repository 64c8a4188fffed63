"""``nvstage occupancy`` on a terminal: occupancy per kernel, and each sweep as a table."""

from __future__ import annotations

from nvstage.inspect.kernels import display_name
from nvstage.report.terminal.console import notes, plain_table


def _bar(fraction: float, width: int = 20) -> str:
    n = round(fraction * width)
    return "#" * n + "." * (width - n)


def _sweep_key(sw) -> tuple:
    """What a sweep's table shows: two sweeps with equal keys print the same rows."""
    rows = tuple((r.arch, r.block_size, r.active_blocks, r.active_warps, r.max_warps,
                  r.occupancy, tuple(r.limiters)) for r in sw.results)
    return rows, None if sw.best is None else sw.best.block_size


def render(report, con) -> None:
    """An ``inspect.occupancy.OccupancyReport``: its notes on stderr, then the tables."""
    notes(report.notes, soft_wrap=True)
    target = report.gpu
    if target is not None and target.is_product:
        con.print(f"gpu: {target.display_name or target.name} ({target.arch}, "
                  f"{target.sm_count} SMs)")
    with_block = [k for k in report.kernels if k.occupancy is not None]
    if with_block:
        t = plain_table(pad_edge=False, title="theoretical occupancy per SM", key=2)
        for col in ("kernel", "arch", "regs", "smem", "block", "blocks", "warps",
                    "occupancy", "limited by"):
            t.add_column(col, justify="left" if col in ("kernel", "arch", "limited by")
                         else "right")
        for k in with_block:
            o = k.occupancy
            t.add_row(k.record.demangled, o.arch, str(o.registers),
                      str(o.shared_static + o.shared_dynamic), str(o.block_size),
                      str(o.active_blocks), f"{o.active_warps}/{o.max_warps}",
                      f"{o.occupancy:.0%}", ", ".join(o.limiters))
        con.print(t)
        for k in with_block:
            for note in k.occupancy.notes:
                con.print(f"{k.record.demangled}: {note}", markup=False)
            if not k.given and k.record.spills:
                con.print(f"{k.record.demangled}: spills registers to local memory",
                          markup=False)
    # Kernels whose sweeps come out the same (identical resources, or resources too small
    # to limit anything) share one table that names them all: 32 rows each, repeated, hid
    # the one that differed.
    groups: dict[tuple, list] = {}
    for k in report.kernels:
        if k.sweep is not None:
            groups.setdefault(_sweep_key(k.sweep), []).append(k)
    for members in groups.values():
        sw = members[0].sweep
        names = ", ".join(display_name(m.record.demangled) for m in members)
        same = " (the same for each)" if len(members) > 1 else ""
        t = plain_table(pad_edge=False,
                        title=f"{names} on {sw.results[0].arch}: block size sweep{same}")
        for col in ("block", "blocks", "warps", "occupancy", "", "limited by"):
            t.add_column(col, justify="right" if col in ("block", "blocks", "warps",
                                                         "occupancy") else "left")
        for r in sw.results:
            mark = " <- best" if sw.best is not None and r.block_size == sw.best.block_size \
                else ""
            t.add_row(str(r.block_size), str(r.active_blocks), str(r.active_warps),
                      f"{r.occupancy:.0%}", _bar(r.occupancy), ", ".join(r.limiters) + mark)
        con.print(t)
        if sw.best is None:
            con.print(f"{names}: no block size can launch", markup=False)
        else:
            b = sw.best
            ties = [r.block_size for r in sw.results if r.occupancy == b.occupancy]
            tie = f" ({len(ties)} sizes tie: the largest is named)" if len(ties) > 1 else ""
            con.print(f"best: block {b.block_size}: {b.active_blocks} per SM, "
                      f"{b.active_warps}/{b.max_warps} warps ({b.occupancy:.0%}){tie}")
