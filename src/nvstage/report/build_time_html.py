"""The build page's compile-time section: where the build's compile time went, from its traces
(``-fdevice-time-trace`` in its flags, or ``NVSTAGE_TIME_TRACE=1``'s own) and the summaries
its build log keeps (``inspect.compile_time.summarize_path``), as ``show BUILD --time``'s
tables: tools, the slowest units, headers with their include chain, template sets,
instantiations, device functions in NVVM and ptxas, and the advice. Every string from a trace
or an entry escaped; nothing fetched.
"""

from __future__ import annotations

from pathlib import Path

from nvstage.compiler.buildlog.current import FOLDER
from nvstage.compiler.nvcc.time_trace import TRACES
from nvstage.errors import NvstageError
from nvstage.inspect.build_view import BuildView
from nvstage.inspect.compile_time import summarize_path
from nvstage.inspect.names import demangle_all
from nvstage.report.page import cell, esc, table
from nvstage.report.units import fmt_time, plural

TOP = 10  # rows per table, as show --time's default


def read_compile_time(view: BuildView, top: int = TOP) -> tuple[dict | None, str | None]:
    """(``CompileTime.to_json(top)`` with demangled names, or None; a note when the traces
    could not be read). None at no cost for a build nothing traced: no entry's command asks
    for a trace and the build log has no ``traces/`` (NVSTAGE_TIME_TRACE=1 made it; its
    entries' summaries count once their traces are gone). The build folder is walked only
    when something was traced."""
    record = Path(view.folder)
    if not ((record / TRACES).is_dir()
            or any("time-trace" in u.command for u in view.units)):
        return None, None
    # The build folder (user traces beside the objects, and the log's own), else the log's.
    folder = record.parent if record.name == FOLDER else record
    try:
        summary = summarize_path(folder)
    except NvstageError as e:
        return None, f"compile time not shown: {e.message}"
    if not summary.units:
        return None, None
    doc = summary.to_json(top)
    names = demangle_all([r["name"] for k in ("functions_nvvm", "functions_ptxas")
                          for r in doc[k]])
    for k in ("functions_nvvm", "functions_ptxas"):
        for r in doc[k]:
            r["demangled"] = names.get(r["name"], r["name"])
    return doc, None


def _ms(seconds: float) -> str:
    return fmt_time(seconds, "ms", suffix=False)


def _row(*cells: str) -> str:
    return "<tr>" + "".join(cells) + "</tr>"


def _short(path: str, keep: int = 3) -> str:
    parts = path.replace("\\", "/").split("/")
    return path if len(parts) <= keep else ".../" + "/".join(parts[-keep:])


def compile_time_section(doc: dict) -> str:
    """The section's HTML (``read_compile_time``'s document). Pure."""
    w = doc["work"]
    out = ['<p class="note">'
           + esc(f"{plural(doc['traces'], 'unit')} traced, "
                 f"{plural(doc['arch_passes'], 'arch pass', 'arch passes')} (cicc and ptxas "
                 f"run once per arch: a header or template counts once per pass); "
                 f"{w['headers_parsed']} headers parsed ({w['distinct_headers']} distinct), "
                 f"{w['instantiations']} template instantiations, {w['functions_optimised']} "
                 f"device functions through NVVM, {w['entries_assembled']} through ptxas; "
                 "times in ms")
           + "</p>"]
    if doc.get("from_summaries"):
        out.append('<p class="note">' + esc(
            f"{plural(doc['from_summaries'], 'unit')} read from the summary its build log "
            "entry keeps (its trace gone or replaced since): its top rows, its work whole")
            + "</p>")
    rows = [_row(cell(t), cell(_ms(c["seconds"]), num=True, sort=c["seconds"]),
                 cell(c["count"], num=True, sort=c["count"]))
            for t, c in doc["tools"].items()]
    out.append("<h3>Tools (cudafe++ and gcc: their totals only)</h3>"
               + table("time-tools", [("tool", False), ("ms", True), ("runs", True)], rows))
    rows = []
    for u in doc["units"]:
        tools = u["tools"]
        every = sum(tools.values())
        rows.append(_row(
            cell(u["unit"]), cell(", ".join(u["archs"]) or "-"),
            cell(_ms(u["front_end_seconds"]), num=True, sort=u["front_end_seconds"]),
            cell(_ms(tools.get("cicc", 0.0)), num=True, sort=tools.get("cicc", 0.0)),
            cell(_ms(tools.get("ptxas", 0.0)), num=True, sort=tools.get("ptxas", 0.0)),
            cell(_ms(every), num=True, sort=every),
            cell(u["work"]["instantiations"], num=True, sort=u["work"]["instantiations"]),
            cell(u.get("from", "trace"))))
    out.append("<h3>Slowest units (front end)</h3>" + table(
        "time-units", [("unit", False), ("archs", False), ("front end", True), ("cicc", True),
                       ("ptxas", True), ("all tools", True), ("instantiations", True),
                       ("from", False)], rows))
    rows = [_row(cell(i, num=True, sort=i),
                 f'<td title="{esc(h["path"])}">{esc(_short(h["path"]))}</td>',
                 cell(_ms(h["inclusive_seconds"]), num=True, sort=h["inclusive_seconds"]),
                 cell(_ms(h["exclusive_seconds"]), num=True, sort=h["exclusive_seconds"]),
                 cell(h["parses"], num=True, sort=h["parses"]),
                 cell(h["units"], num=True, sort=h["units"]),
                 cell(" > ".join(_short(p, 2) for p in h["chain"]), cls="wrap"))
            for i, h in enumerate(doc["headers"], 1)]
    out.append("<h3>Headers by inclusive parse time</h3>" + table(
        "time-headers", [("#", True), ("header", False), ("incl", True), ("self", True),
                         ("parses", True), ("units", True),
                         ("included from (the costliest parse)", False)], rows))
    for key, title, tid in (("template_sets", "Template sets (name without arguments)",
                             "time-template-sets"),
                            ("templates", "Template instantiations", "time-templates"),
                            ("functions_nvvm", "Device functions in NVVM", "time-nvvm"),
                            ("functions_ptxas", "Entries in ptxas", "time-ptxas")):
        if not doc[key]:
            continue
        rows = [_row(cell(r.get("demangled", r["name"]), cls="wrap"),
                     cell(_ms(r["seconds"]), num=True, sort=r["seconds"]),
                     cell(r["count"], num=True, sort=r["count"])) for r in doc[key]]
        out.append(f"<h3>{esc(title)}</h3>"
                   + table(tid, [("name", False), ("ms", True), ("count", True)], rows))
    if doc["advice"]:
        out.append("<h3>Advice, each with its evidence</h3><ul>" + "".join(
            f"<li><b>{esc(a['rule'])}</b>: {esc(a.get('demangled', a['subject']))}: "
            f"{esc(a['evidence'])}; {esc(a['suggestion'])}</li>" for a in doc["advice"])
            + "</ul>")
    for n in doc.get("notes", ()):
        out.append(f'<p class="note">{esc(n)}</p>')
    return "".join(out)
