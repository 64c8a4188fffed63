"""The build report's account of the record's builds (HTML): a table of the builds it holds,
and what the last build changed against the one before (``record_diff.since_previous``): its
figures beside the earlier build's, the units it ran again, and the kernels whose figures
moved. Pure: data in, escaped HTML out."""

from __future__ import annotations

from nvstage.compiler.nvcc.step_kind import label
from nvstage.report.page import esc
from nvstage.report.units import fmt_parallel, fmt_share, fmt_time

_METRICS = (("registers", "regs"), ("spill_stores", "spill st"), ("spill_loads", "spill ld"),
            ("shared_bytes", "smem"), ("sass_bytes", "SASS bytes"), ("occupancy", "occupancy"))


def _td(text, num: bool = False) -> str:
    return f'<td{" class=num" if num else ""}>{esc(text)}</td>'


def builds_table(view) -> str:
    rows = []
    last = view.last_build
    for b in view.builds:
        doc = b.to_json()
        kinds = ", ".join(label(k, n) for k, n in b.kinds().items())
        rows.append(f'<tr{" class=current" if b is last else ""}>' + _td(b.number, True)
                    + _td(b.tool or "told apart by time") + _td(doc["steps"], True)
                    + _td(kinds) + _td(fmt_time(b.wall_seconds), True)
                    + _td(fmt_time(b.step_seconds), True)
                    + _td(fmt_parallel(b.parallelism, cell=True), True)
                    + _td(f"{doc['command_hits']} of {doc['commands']}", True) + "</tr>")
    head = "".join(f"<th{' class=num' if n else ''}>{esc(t)}</th>" for t, n in (
        ("build", True), ("build tool", False), ("steps", True), ("kinds", False),
        ("wall", True), ("in all", True), ("parallelism", True), ("command hits", True)))
    return (f'<div class="table-frame"><table id="builds"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _figure(v, metric: str) -> str:
    if v is None:
        return "-"
    return fmt_share(v) if metric == "occupancy" else str(v)


def since_section(view, changes) -> str:
    """What the last build changed; empty when the record holds one build."""
    before, last = view.previous_build, view.last_build
    if before is None or changes is None:
        return ""
    doc_b, doc_l = before.to_json(), last.to_json()

    def pair(a, b, fmt=str) -> str:
        return f"{fmt(a)} → {fmt(b)}"

    def par(p) -> str:
        return fmt_parallel(p, cell=True)

    figures = (f'<p class="note">build {before.number} → build {last.number}: wall '
               f'{esc(pair(before.wall_seconds, last.wall_seconds, fmt_time))}, steps '
               f'{esc(pair(doc_b["steps"], doc_l["steps"]))}, time in steps '
               f'{esc(pair(before.step_seconds, last.step_seconds, fmt_time))}, parallelism '
               f'{esc(pair(before.parallelism, last.parallelism, par))}, command cache hits '
               f'{esc(pair(doc_b["command_hits"], doc_l["command_hits"]))}</p>')
    rebuilt = [u for u in changes.units if u.changed and u.b is not None]
    units = "".join(
        "<tr>" + _td(u.key) + _td(label(u.kind))
        + _td("-" if u.a is None else f"{u.a['state']} {fmt_time(u.a['seconds'])}")
        + _td(f"{u.b['state']} {fmt_time(u.b['seconds'])}") + "</tr>" for u in rebuilt)
    moved = [k for k in changes.kernels if k.status != "same"]
    kernels = "".join(
        "<tr>" + f'<td class="kname">{esc(k.name)}</td>' + _td(k.arch)
        + _td(k.unit_name or k.unit.rsplit("/", 1)[-1]) + _td(k.status)
        + "".join(_td(f"{_figure((k.a or {}).get(m), m)} → {_figure((k.b or {}).get(m), m)}",
                      True) for m, _ in _METRICS) + "</tr>" for k in moved)
    head = "".join(f"<th>{esc(t)}</th>" for t in ("kernel", "arch", "unit", "")) + \
        "".join(f"<th class=num>{esc(t)}</th>" for _, t in _METRICS)
    return ('<section id="since"><h2>Since the build before</h2>' + figures
            + (f'<h3>Run again in build {last.number}</h3><div class="table-frame"><table '
               'id="rebuilt"><thead><tr><th>unit</th><th>kind</th><th>before</th>'
               f'<th>now</th></tr></thead><tbody>{units}</tbody></table></div>' if units else
               '<p class="note">no unit ran again</p>')
            + (f'<h3>Kernels whose figures moved</h3><div class="table-frame"><table '
               f'id="kernels-moved"><thead><tr>{head}</tr></thead><tbody>{kernels}</tbody>'
               '</table></div>' if kernels else
               '<p class="note">no kernel\'s figures moved</p>')
            + f'<p class="note">all of it, stage by stage: <code>nvstage diff '
              f'{esc(view.folder)}</code></p></section>')
