"""A whole build (its build record) on a terminal: the summary line, the slowest units and
stages, time and cache hits per stage kind, the commands nvstage did not stage, and every
kernel with its figures and occupancy."""

from __future__ import annotations

from nvstage.report.terminal.console import notes, plain_table
from nvstage.report.units import fmt_known, fmt_share, fmt_time


def render_view(view, con) -> None:
    """A ``build_view.BuildView``: tables on ``con``, its notes on stderr."""
    if not view.units:
        con.print(f"the build record {view.folder} holds no readable entry", markup=False)
        notes(view.notes)
        return
    counts, cache = view.counts(), view.cache_totals()
    states = ", ".join(f"{counts[s]} {s}" for s in ("ok", "hit", "fallback", "failed")
                       if counts.get(s))
    con.print(f"{counts['units']} nvcc commands ({states or 'none'}) in "
              f"{fmt_time(view.wall_seconds)}, {fmt_time(view.unit_seconds)} in all"
              + (f" ({view.parallelism:.1f}x parallel)" if view.parallelism else "")
              + f"; command cache hits {cache['command_hits']}/{cache['commands']}, "
              f"stage cache hit rate {fmt_share(cache['stage_hit_rate'])}; record {view.folder}",
              markup=False, soft_wrap=True)
    t = plain_table(title="slowest translation units", title_justify="left", pad_edge=False)
    for col in ("unit", "status", "time", "stages", "kernels"):
        t.add_column(col, justify="right" if col in ("time", "stages", "kernels") else "left")
    for u in view.slowest_units():
        t.add_row(u.name, u.state, fmt_time(u.seconds), str(len(u.stages)), str(len(u.kernels)))
    con.print(t)
    t = plain_table(title="stage kinds", title_justify="left", pad_edge=False)
    for col in ("kind", "stages", "ran", "cached", "in hits", "hit rate", "time", "slowest"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for k in view.kind_totals():
        t.add_row(k.kind, str(k.stages), str(k.ran), str(k.cached), str(k.whole),
                  fmt_share(k.hit_rate), fmt_time(k.seconds), fmt_time(k.max_seconds))
    con.print(t)
    others = [u for u in view.units if u.status != "ok"]
    if others:
        t = plain_table(title="not staged", title_justify="left", pad_edge=False)
        t.add_column("unit")
        t.add_column("status")
        t.add_column("why", overflow="fold")
        for u in others:
            t.add_row(u.name, u.state, u.reason or "")
        con.print(t)
    if view.kernels:
        t = plain_table(title="kernels", title_justify="left", pad_edge=False)
        for col in ("kernel", "arch", "unit", "regs", "spill st/ld", "smem", "bar",
                    f"occ@{view.block}", "best block"):
            t.add_column(col, justify="left" if col in ("kernel", "arch", "unit") else "right",
                         overflow="fold")
        t.columns[0].overflow, t.columns[0].max_width = "ellipsis", 48
        for k in view.kernels:
            r = k.record
            t.add_row(r.name, r.arch, view.units[k.unit].name, fmt_known(r.registers),
                      f"{fmt_known(r.spill_stores)}/{fmt_known(r.spill_loads)}"
                      + (" SPILLS" if r.spills else ""), str(r.shared_bytes), fmt_known(r.barriers),
                      "-" if k.occupancy is None else f"{k.occupancy.occupancy:.0%}",
                      "-" if k.best is None else f"{k.best.block_size}")
        con.print(t)
    notes(view.notes)
