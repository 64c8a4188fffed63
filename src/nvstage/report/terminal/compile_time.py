"""Where compile time went, on a terminal: ``inspect.compile_time``'s summary as tables (the
slowest units, headers with an include chain, template sets, templates, device functions in
NVVM and ptxas, per tool totals)."""

from __future__ import annotations

from nvstage.report.terminal.console import plain_table, say
from nvstage.report.units import fmt_time, plural


def _t(seconds: float) -> str:
    return fmt_time(seconds, "ms", suffix=False)


def _short(path: str, keep: int = 3) -> str:
    """A header's path by its last ``keep`` parts: toolkit paths are long and alike."""
    parts = path.replace("\\", "/").split("/")
    return path if len(parts) <= keep else ".../" + "/".join(parts[-keep:])


def render_compile_time(doc: dict, con, *, top: int) -> None:
    """``doc``: ``CompileTime.to_json(top, names)``."""
    w = doc["work"]
    passes = plural(doc["arch_passes"], "arch pass", "arch passes")
    con.print(f"{plural(doc['traces'], 'trace')}, {passes}"
        f" (cicc and ptxas run once per arch: a header or template counts once per pass); "
        f"{w['headers_parsed']} headers parsed ({w['distinct_headers']} distinct), "
        f"{w['instantiations']} template instantiations, {w['functions_optimised']} device "
        f"functions through NVVM, {w['entries_assembled']} through ptxas; times in ms",
              markup=False, highlight=False)
    t = plain_table(title="tools (cudafe++, gcc: their totals only)")
    t.add_column("tool")
    t.add_column("ms", justify="right")
    t.add_column("runs", justify="right")
    for tool, c in doc["tools"].items():
        t.add_row(tool, _t(c["seconds"]), str(c["count"]))
    con.print(t)
    t = plain_table(title=f"slowest units (front end), top {top}")
    t.add_column("unit")
    t.add_column("archs")
    t.add_column("front end", justify="right")
    t.add_column("cicc", justify="right")
    t.add_column("ptxas", justify="right")
    t.add_column("all tools", justify="right")
    for u in doc["units"]:
        tools = u["tools"]
        t.add_row(u["unit"], ",".join(u["archs"]) or "-", _t(u["front_end_seconds"]),
                  _t(tools.get("cicc", 0.0)), _t(tools.get("ptxas", 0.0)),
                  _t(sum(tools.values())))
    con.print(t)
    t = plain_table(title=f"headers by inclusive parse time, top {top}")
    t.add_column("#", justify="right")
    t.add_column("header")
    t.add_column("incl", justify="right")
    t.add_column("self", justify="right")
    t.add_column("parses", justify="right")
    t.add_column("units", justify="right")
    for i, h in enumerate(doc["headers"], 1):
        t.add_row(str(i), _short(h["path"]), _t(h["inclusive_seconds"]),
                  _t(h["exclusive_seconds"]), str(h["parses"]), str(h["units"]))
    con.print(t)
    if doc["headers"]:  # whole lines, never wrapped inside a chain
        con.print("included from (the costliest parse):", markup=False, highlight=False)
        for i, h in enumerate(doc["headers"], 1):
            con.print(f"  {i}. " + " > ".join(_short(p, 2) for p in h["chain"]), markup=False,
                      highlight=False, soft_wrap=True)
        con.print()
    for key, title in (("template_sets", "template sets (name without arguments)"),
                       ("templates", "template instantiations"),
                       ("functions_nvvm", "device functions in NVVM"),
                       ("functions_ptxas", "entries in ptxas")):
        rows = doc[key]
        if not rows:
            continue
        t = plain_table(title=f"{title}, top {top}")
        t.add_column("name", prose=True)
        t.add_column("ms", justify="right")
        t.add_column("count", justify="right")
        for r in rows:
            t.add_row(r.get("demangled", r["name"]), _t(r["seconds"]), str(r["count"]))
        con.print(t)
    if doc["advice"]:
        con.print("advice (each with its evidence):", markup=False, highlight=False)
        for a in doc["advice"]:
            con.print(f"  {a['rule']}: {a.get('demangled', a['subject'])}: {a['evidence']}; "
                      f"{a['suggestion']}", markup=False, highlight=False)
    if doc["skipped"]:
        say(f"note: {plural(len(doc['skipped']), 'file')} ending .json that are no nvcc trace "
            "left out")
    if doc.get("from_summaries"):
        say(f"note: {plural(doc['from_summaries'], 'unit')} read from the summary its build log "
            "entry keeps (its trace gone or replaced since): its top rows, its work whole")
    for n in doc.get("notes", ()):
        say(f"note: {n}")


def render_time_diff(diff, con, *, all_rows: bool = False, names=None) -> None:
    """``inspect.compile_time_diff.TimeDiff``: the changed rows (every row with ``all_rows``)."""
    from nvstage.inspect.compile_time_diff import work_change

    names = names or {}
    if diff.noise is not None:
        noise = (f"noise here: {diff.noise:.0%} or {_t(diff.noise_seconds)} ms (the largest "
                 f"move of the {plural(diff.unchanged_units, 'unit')} whose work did not "
                 "change, and their moves summed)")
    else:
        noise = (f"noise unknown: {plural(diff.unchanged_units, 'unit')} did the same work on "
                 "both sides, 2 are needed to measure it")
    fa, fb = diff.front_end
    con.print(f"front end {_t(fa)} -> {_t(fb)} ms (times in ms); {noise}", markup=False,
              highlight=False)
    rows = diff.rows if all_rows else diff.changed
    if not rows:
        con.print(f"no change: every one of the {plural(len(diff.rows), 'row')} did the same "
                  "work, within noise", markup=False, highlight=False)
        return
    t = plain_table(title=f"{plural(len(rows), 'row')}"
                          + ("" if all_rows else " changed (--all: every row)"), key=2)
    for col, just in (("kind", "left"), ("name", "left"), ("A", "right"),
                      ("B", "right"), ("delta", "right"), ("work", "left"),
                      ("verdict", "left")):
        t.add_column(col, justify=just)
    for r in rows:
        work = work_change(r.work_a, r.work_b) or "same"
        shown = _short(r.name, 2) if r.kind in ("header", "unit") else r.name
        t.add_row(r.kind, names.get(r.name, shown),
                  "-" if r.a is None else _t(r.a), "-" if r.b is None else _t(r.b),
                  fmt_time(r.delta, "ms", suffix=False, sign=True), work, r.verdict)
    con.print(t)
