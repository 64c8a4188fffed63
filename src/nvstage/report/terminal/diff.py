"""``nvstage diff`` on a terminal: two builds kernel by kernel and stage by stage, or one
source through the compiler paths."""

from __future__ import annotations

import os

from rich.text import Text

from nvstage.errors import indent
from nvstage.report.terminal.console import notes, plain_table
from nvstage.report.units import fmt_time

_LABELS = {"registers": "regs", "spill_stores": "spill st", "spill_loads": "spill ld",
           "shared_bytes": "smem", "instructions": "SASS instr", "sass_bytes": "SASS bytes"}


def _fmt(v, metric: str) -> str:
    if v is None:
        return "-"
    if metric == "occupancy":
        return f"{v:g}%"
    return fmt_time(v) if metric == "seconds" else str(v)


def _fmt_delta(d, metric: str) -> str:
    if d is None or d == 0:
        return "" if d == 0 else "-"
    if isinstance(d, float) and metric != "seconds":
        return f"{d:+.1f}"
    return fmt_time(d, "ms", sign=True) if metric == "seconds" else f"{d:+d}"


# A diff across compilers (``inspect.build_compare``): each kernel's launch and occupancy too;
# not the cubin's size, which holds every kernel of an nvcc file.
_ACROSS = ("registers", "spills", "shared_bytes", "dynamic_shared", "instructions", "block",
           "occupancy")
_LABELS_ACROSS = {"registers": "regs", "spills": "spill st/ld", "shared_bytes": "smem",
                  "dynamic_shared": "dyn smem", "instructions": "SASS instr",
                  "block": "block", "occupancy": "occupancy"}


def _cell(r, m: str) -> str:
    if m == "spills":
        def side(d):
            st, ld = d.get("spill_stores"), d.get("spill_loads")
            return "-" if st is None and ld is None else f"{_fmt(st, m)}/{_fmt(ld, m)}"
        return f"{side(r.a)} -> {side(r.b)}"
    # Two compilers' kernels: the figures side by side; the deltas are in the JSON.
    return f"{_fmt(r.a.get(m), m)} -> {_fmt(r.b.get(m), m)}"


def render_any(result, con, *, all_rows: bool = False) -> None:
    """Whichever comparison ``inspect.diffs.run`` made."""
    from nvstage.inspect.build_diff import BuildDiff
    from nvstage.diffs import SeveralLines
    from nvstage.inspect.line_diff import LinesDiff
    from nvstage.inspect.build_log_diff import RecordDiff

    if isinstance(result, BuildDiff):
        render(result, con, all_rows=all_rows)
    elif isinstance(result, RecordDiff):
        from nvstage.report.terminal import build_log_diff as record_diff

        record_diff.render(result, con, all_rows=all_rows)
    elif isinstance(result, (LinesDiff, SeveralLines)):
        for one in getattr(result, "diffs", (result,)):
            render_lines(one, con, all_rows=all_rows)
    else:
        render_paths(result, con)


def render(result, con, *, all_rows: bool = False) -> None:
    """A ``build_diff.BuildDiff``: its partial-build notes on stderr, then the kernels that
    changed (all with ``all_rows``) and every stage."""
    from nvstage.inspect.build_diff import KERNEL_METRICS

    # Before the tables: they hold part of a build.
    notes([side["note"] for side in result.partial.values()], soft_wrap=True)
    across = any("occupancy" in r.a or "occupancy" in r.b for r in result.kernels)
    metrics = list(_ACROSS if across else KERNEL_METRICS)
    labels = {m: f"{_LABELS[m]} A->B" for m in KERNEL_METRICS}
    if across:  # each cell is "A -> B"
        labels = _LABELS_ACROSS
    rows, unpaired = [], 0
    for r in result.kernels:
        if across and not all_rows and not (r.a and r.b):
            unpaired += 1  # another compiler's build of other kernels: not a difference
            continue
        if not all_rows and not r.changed:
            continue
        name = _short(r.key) + (f" ~ {_short(r.b_key)}" if r.b_key else "") if across \
            else r.key + (f" ~ {r.b_key}" if r.b_key else "")
        rows.append((name, *(_cell(r, m) if across else
                             f"{_fmt(r.a.get(m), m)} -> {_fmt(r.b.get(m), m)}"
                             f" {_fmt_delta(r.delta(m), m)}".rstrip() for m in metrics)))
    title = f"kernels: A = {result.a}, B = {result.b}" + (", each cell A -> B" if across else "")
    t = plain_table(title=title, title_justify="left", pad_edge=False)
    t.add_column("kernel")
    for m in metrics:
        t.add_column(labels[m], justify="right")
    for row in rows:
        t.add_row(*row)
    shown = len(rows)
    if shown:
        con.print(t)
        _render_why(result, con, all_rows=all_rows)
    else:
        paired = sum(1 for r in result.kernels if r.a and r.b)
        con.print(f"kernels: no change in the {paired} kernel(s) paired", markup=False)
    if across:
        if unpaired:
            con.print(f"note: {unpaired} kernel(s) built on one side only are not shown "
                      "(--all shows them)", markup=False)
        render_mix(result, con, all_rows=all_rows)
    s = plain_table(title="stages", title_justify="left", pad_edge=False)
    for c, j in (("stage", "left"), ("A", "right"), ("B", "right"), ("delta", "right")):
        s.add_column(c, justify=j)
    any_cached = False
    mark = {True: " (cached)", False: "", None: ""}
    for r in result.stages:
        cached = r.a.get("cached") or r.b.get("cached")
        any_cached = any_cached or bool(cached)
        s.add_row(r.key, _fmt(r.a.get("seconds"), "seconds") + mark[r.a.get("cached")],
                  _fmt(r.b.get("seconds"), "seconds") + mark[r.b.get("cached")],
                  "not comparable" if cached else
                  (_fmt_delta(r.delta("seconds"), "seconds") or "0"))
    ta, tb = result.total_seconds
    s.add_row("total", _fmt(ta, "seconds"), _fmt(tb, "seconds"),
              _fmt_delta(tb - ta, "seconds") or "0")
    con.print(s)
    for n in result.notes:
        con.print(f"note: {n}", markup=False)
    if any_cached:
        con.print("note: (cached) stages were restored from the stage cache, not run; build "
                  "with --no-cache to compare compile times")


def _render_why(result, con, *, all_rows: bool = False) -> None:
    """Under the kernel table, why each shown kernel changed (``inspect.why``): which stage
    the change reached, what capped its registers."""
    for r in result.kernels:
        why = (r.why or {}).get("lines")
        if not why or not (all_rows or r.changed):
            continue
        name = _short(r.key) + (f" ~ {_short(r.b_key)}" if r.b_key else "")
        con.print(f"why {name}: " + "; ".join(why), markup=False, soft_wrap=True)


def _short(key: str) -> str:
    """``fused(float const*, ...) (sm_90)`` -> ``fused (sm_90)``: a kernel row's name without
    its parameters, where two compilers' spellings stand side by side."""
    from nvstage.inspect.kernels import display_name

    name, sep, arch = key.rpartition(" (")
    return f"{display_name(name)} ({arch}" if sep else key


def render_mix(result, con, *, all_rows: bool = False) -> None:
    """Each kernel's SASS instructions by class, A beside B (a diff across compilers)."""
    from nvstage.inspect.build_compare import MIX

    t = plain_table(title="SASS mix (instructions by class)", title_justify="left",
                    pad_edge=False, key=2)
    for c, j in (("kernel", "left"), ("class", "left"), ("A", "right"), ("B", "right"),
                 ("delta", "right")):
        t.add_column(c, justify=j)
    rows = 0
    for r in result.kernels:
        if not all_rows and not (r.changed and r.a and r.b):
            continue
        classes = sorted({m for m in (*r.a, *r.b) if m.startswith(MIX)},
                         key=lambda m: -max(r.a.get(m) or 0, r.b.get(m) or 0))
        for i, m in enumerate(classes):
            t.add_row(_short(r.key) if i == 0 else "", m[len(MIX):], _fmt(r.a.get(m), m),
                      _fmt(r.b.get(m), m), _fmt_delta(r.delta(m), m) or "0")
            rows += 1
    if rows:
        con.print(t)


def render_paths(result, con) -> None:
    """A ``compiler_paths.PathComparison``: kernels x paths, PTX verdicts (with short diffs),
    stage times."""
    con.print(Text(f"{', '.join(os.path.basename(s) for s in result.sources)} for "
                   f"{result.arch}: nvcc {result.versions['toolkit']}, NVRTC "
                   f"{result.versions['nvrtc']}, nvJitLink {result.versions['nvjitlink']}"))
    t = plain_table(pad_edge=False, key=2)
    for col, just in (("kernel", "left"), ("path", "left"), ("registers", "right"),
                      ("spill st/ld", "right"), ("SASS instr", "right"), ("cubin", "left")):
        t.add_column(col, justify=just)
    for name in result.kernel_names:
        first = True
        for p in result.paths:
            k = p.kernel(name)
            if k is None:
                t.add_row(_short_name(name, result) if first else "", p.name, "-", "-", "-",
                          "(absent)")
            else:
                spills = ("?" if k.spill_stores is None else
                          f"{k.spill_stores}/{k.spill_loads}")
                regs = "?" if k.registers is None else str(k.registers)
                if not k.final:
                    regs += "*"
                t.add_row(k.demangled if first else "", p.name, regs, spills,
                          "?" if k.instructions is None else str(k.instructions), k.image)
            first = False
    con.print(t)
    if any(not k.final for p in result.paths for k in p.kernels):
        con.print(Text("* before linking (-rdc): callees not yet counted"))
    for c in result.ptx:
        con.print(Text(c.summary()))
        if c.diff:
            con.print(Text(indent(c.diff)))
    for line in result.resource_differences():
        con.print(Text("differs: " + line))
    st = plain_table(pad_edge=False, key=2)
    for col, just in (("path", "left"), ("stage", "left"), ("tool", "left"),
                      ("outputs", "left"), ("time", "right")):
        st.add_column(col, justify=just)
    for p in result.paths:
        for i, s in enumerate(p.stages):
            st.add_row(p.name if i == 0 else "", s.stage, s.tool, ", ".join(s.outputs),
                       fmt_time(s.seconds))
        st.add_row("", "total", "", "", fmt_time(p.seconds))
    con.print(st)
    for n in result.notes:
        con.print(Text("note: " + n))


def _short_name(name: str, result) -> str:
    for p in result.paths:
        k = p.kernel(name)
        if k is not None:
            return k.demangled
    return name


def _local(loc) -> str:
    """A line's local traffic, "stores/loads" bytes ("" for none)."""
    return f"{loc.stores}/{loc.loads}" if loc else ""


def _one_file(result) -> str | None:
    """The one file every row of both kernels is in, where there is one: then the rows
    need only line numbers."""
    files = {s.file for r in result.rows for s in (r.a, r.b) if s is not None}
    return next(iter(files)) if len(files) == 1 else None


def render_lines(result, con, *, all_rows: bool = False) -> None:
    """A ``line_diff.LinesDiff``: the two kernels' lines aligned by source, A beside B, with
    their instructions, peak live registers and local-memory traffic (its columns where a
    kernel has any; every row with code, every row with ``all_rows``), then where the live
    registers rose and the local traffic changed, and whether the PTX changed."""
    from nvstage.inspect.kernels import display_name

    ka, kb = (display_name(k) or k for k in result.kernels)
    names = ka if ka == kb else f"{ka} / {kb}"
    arch = result.archs[0] if result.archs[0] == result.archs[1] else " / ".join(result.archs)
    one = _one_file(result)
    t = plain_table(title=f"{names} ({arch}) line by line, aligned by source"
                    f"{f' ({one})' if one else ''}: A = {result.a}, B = {result.b}; peak live "
                    f"registers {_fmt(result.peak_gpr[0], '')} -> "
                    f"{_fmt(result.peak_gpr[1], '')}, instructions {result.instructions[0]} -> "
                    f"{result.instructions[1]}", title_justify="left", pad_edge=False)
    cols = ("A", "B") if one else ("A file:line", "B file:line")
    # Local-memory columns where either kernel has local traffic (spills, stack arrays).
    local = bool(result.local[0] or result.local[1])
    for c in (*cols, "source", "instr A->B", "peak A->B", *(("local A->B",) if local else ()),
              ""):
        # The source line wraps between its words where the console is narrow.
        t.add_column(c, justify="right" if c.startswith(("instr", "peak", "local")) else
                     "left", prose=c == "source")
    hidden = 0
    for r in result.rows:
        if not (all_rows or r.has_code):
            hidden += 1
            continue
        where = [("" if s is None else str(s.line) if one else s.where) for s in (r.a, r.b)]
        text = (r.text or "").strip()
        if r.a and r.b and not r.same_text:
            text = f"{(r.a.text or '').strip()}\nB: {(r.b.text or '').strip()}"
        mark = ["rose" if r.rose else "fell" if r.fell else "",
                f"only {r.side.upper()}" if r.side else ""]
        instr = " -> ".join("-" if s is None else str(s.instructions) for s in (r.a, r.b))
        peak = f"{_fmt(r.peak_gpr[0], '')} -> {_fmt(r.peak_gpr[1], '')}"
        la, lb = r.local
        t.add_row(*where, text, instr, peak,
                  *((f"{_local(la) or '-'} -> {_local(lb) or '-'}",) if local else ()),
                  " ".join(m for m in mark if m))
    con.print(t)
    c = result.counts()
    con.print(f"aligned by source: {c['same_text']} line(s) the same, {c['changed_text']} "
              f"rewritten, {c['only_a']} only in A, {c['only_b']} only in B"
              + (f" ({hidden} without code not shown: --all shows them)" if hidden else ""),
              markup=False, soft_wrap=True)

    def at(r) -> str:
        sides = [s for s in (r.a, r.b) if s is not None]
        if one:
            return " -> ".join(str(s.line) for s in sides)
        return " -> ".join(s.where for s in sides)

    rose = result.rose
    if rose:
        con.print("live registers rose at " + ", ".join(at(r) for r in rose),
                  markup=False, soft_wrap=True)
    else:
        con.print("no line both have: live registers rose nowhere" if not any(
            r.peak_gpr[0] is not None and r.peak_gpr[1] is not None for r in result.rows)
            else "no line's live registers rose", markup=False)
    la, lb = result.local
    if local:
        con.print(f"local memory (stores/loads, bytes per thread): A {_local(la) or '0/0'} "
                  f"(spills {la.spill_stores}/{la.spill_loads}), B {_local(lb) or '0/0'} "
                  f"(spills {lb.spill_stores}/{lb.spill_loads}); changed at "
                  + (", ".join(at(r) for r in result.local_changed) or "no line"),
                  markup=False, soft_wrap=True)
    if result.ptx == "changed":
        con.print("the PTX changed as well as the SASS: the change reached cicc, not ptxas "
                  "alone", markup=False)
    elif result.ptx == "same" and result.sass == "changed":
        con.print("the PTX is the same, the SASS changed: the change reached ptxas alone",
                  markup=False)
