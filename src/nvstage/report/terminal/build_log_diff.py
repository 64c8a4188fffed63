"""``nvstage diff BUILD_A BUILD_B`` (two builds from build records) on a terminal: each side's
build in one line, the kernels whose figures differ (added and removed ones too), the units
run again or on one side alone, and their stages."""

from __future__ import annotations

from nvstage.compiler.nvcc.step_kind import label
from nvstage.report.terminal.console import notes, plain_table
from nvstage.report.units import fmt_parallel, fmt_share, fmt_time, plural

_LABELS = {"registers": "regs", "spill_stores": "spill st", "spill_loads": "spill ld",
           "shared_bytes": "smem", "sass_bytes": "SASS bytes", "occupancy": "occ"}
MAX_STAGE_ROWS = 200  # past this the stage table says how many more the JSON holds


def build_line(side) -> str:
    """``build@1 (build 1 of 2, ninja): 12 steps in 11.6 s, ...``."""
    r = side.run
    par = fmt_parallel(r.parallelism)
    par = f" ({par})" if par else ""
    kinds = ", ".join(label(k, n) for k, n in r.kinds().items())
    doc = r.to_json()
    return (f"{side.label}: {plural(doc['steps'], 'step')} ({kinds}) in "
            f"{fmt_time(r.wall_seconds)}, {fmt_time(r.step_seconds)} in all{par}; "
            f"command cache hits {doc['command_hits']}/{doc['commands']}")


def _fmt(v, metric: str) -> str:
    if v is None:
        return "-"
    return fmt_share(v) if metric == "occupancy" else str(v)


def _delta(row, metric: str) -> str:
    d = row.delta(metric)
    if not d:
        return ""
    return f"{d * 100:+.0f}%" if metric == "occupancy" else f"{d:+d}"


def _cell(row, metric: str) -> str:
    a = "" if row.a is None else _fmt(row.a.get(metric), metric)
    b = "" if row.b is None else _fmt(row.b.get(metric), metric)
    return f"{a} -> {b} {_delta(row, metric)}".strip()


def _spills(row) -> str:
    """Spill stores and loads, ``0/0 -> 64/96``."""
    def side(d):
        if d is None:
            return ""
        return f"{_fmt(d.get('spill_stores'), '')}/{_fmt(d.get('spill_loads'), '')}"
    return f"{side(row.a)} -> {side(row.b)}".strip()


def _unit_cell(d: dict | None) -> str:
    if d is None:
        return "-"
    return f"{d['state']} {fmt_time(d['seconds'])} (build {d['build']})"


def _stage_cell(d: dict | None) -> str:
    if d is None:
        return "-"
    if d["seconds"] is None:
        return "not run (command hit)"
    return fmt_time(d["seconds"]) + (" (cached)" if d["cached"] else "")


def render(result, con, *, all_rows: bool = False) -> None:
    """A ``record_diff.RecordDiff``: the sides, the kernels that differ (all with
    ``all_rows``), the units run again (all with ``all_rows``) and their stages."""
    from nvstage.inspect.build_log_diff import KERNEL_METRICS

    con.print(f"A: {build_line(result.a)}", markup=False, soft_wrap=True)
    con.print(f"B: {build_line(result.b)}", markup=False, soft_wrap=True)
    rows = [k for k in result.kernels if all_rows or k.status != "same"]
    if rows:
        t = plain_table(title=f"kernels, A -> B (occupancy at {result.block} threads per "
                        "block)", title_justify="left", pad_edge=False)
        for col in ("kernel", "arch", "unit", ""):
            t.add_column(col)
        shown = [m for m in KERNEL_METRICS if m != "spill_loads"]
        for m in shown:  # "512 -> 1024 +512" on one line
            t.add_column("spill st/ld" if m == "spill_stores" else _LABELS[m], justify="right")
        for k in rows:
            t.add_row(k.name, k.arch, k.unit_name or k.unit.rsplit("/", 1)[-1],
                      "" if k.status == "same" else k.status,
                      *(_spills(k) if m == "spill_stores" else _cell(k, m) for m in shown))
        con.print(t)
    else:
        con.print(f"kernels: no change in {len(result.kernels)} kernel records", markup=False)
    units = [u for u in result.units if all_rows or u.changed]
    if not units:
        con.print(f"units: none run again of {len(result.units)}", markup=False)
    else:
        t = plain_table(title="units run again (or on one side alone)", title_justify="left",
                        pad_edge=False)
        for col in ("unit", "kind", "A", "B"):
            t.add_column(col)
        for u in units:
            t.add_row(u.key, label(u.kind), _unit_cell(u.a), _unit_cell(u.b))
        con.print(t)
        stages = [(u, s) for u in units for s in u.stages]
        if stages:
            t = plain_table(title="their stages", title_justify="left", pad_edge=False)
            for col, just in (("unit", "left"), ("stage", "left"), ("A", "right"),
                              ("B", "right")):
                t.add_column(col, justify=just)
            for u, s in stages[:MAX_STAGE_ROWS]:
                t.add_row(u.name, s["stage"], _stage_cell(s["a"]), _stage_cell(s["b"]))
            con.print(t)
            if len(stages) > MAX_STAGE_ROWS:
                con.print(f"and {len(stages) - MAX_STAGE_ROWS} more stages (--json has them)",
                          markup=False)
    notes(result.notes)
