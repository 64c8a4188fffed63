"""One self-contained HTML page for a whole build, read from its build record: the timeline
of every command across the processes that ran them, the slowest units and stages, the time
and cache hits per stage kind, every translation unit with its stages, and every kernel with
its registers, spills, shared memory and occupancy in a table that sorts by any column.

As the single-build page (``report.html``) does: inline CSS, SVG and a little script, nothing
fetched; every string from the record escaped; the script's data in a JSON block with ``<``
escaped. ``write_build_report`` also writes the timeline as a Chrome trace for Perfetto.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from nvstage import __version__
from nvstage.inspect.build_view import BuildView, TranslationUnit, DEFAULT_BLOCK, load_build_view
from nvstage.report.build_trace import stage_rows, chrome_build_trace
from nvstage.report.build_time_html import compile_time_section, read_compile_time
from nvstage.report.lines_html import CSS as LINES_CSS, JS as LINES_JS, kernel_view, missing_view
from nvstage.report.page import BASE_CSS, cards, clip, esc, page
from nvstage.report.page import cell as _cell, table as _table
from nvstage.report.stage_charts import STAGE_COLORS
from nvstage.compiler.nvcc.step_kind import label
from nvstage.report.units import fmt_known, fmt_parallel, fmt_share, fmt_time, plural
from nvstage.errors import UsageError, WriteError, NvstageError
from nvstage.files import is_folder, write_atomic
from nvstage.compiler.toolkit.locate import find_toolkit

STATE_COLORS = {"ok": "#d9e2ef", "hit": "#cfe8cf", "fallback": "#f6e3b4", "failed": "#f4c7c3",
                "ran": "#e8e4f0"}
OTHER_STAGE = "#bab0ac"
MAX_TIMELINE_UNITS = 5000  # beyond this the timeline shows the slowest; the tables have all
# An idle stretch longer than this (and than a fifth of the busy time) is drawn short, with
# its length written on it: a record that holds two build runs a day apart stays readable.
IDLE_GAP_S = 30.0
CHART_W = 1280


# -- the timeline -----------------------------------------------------------------------

class _Axis:
    """Build time -> x, with long idle stretches drawn short."""

    def __init__(self, units: list[TranslationUnit], width: float):
        spans = sorted((u.start, u.end) for u in units)
        merged: list[list[float]] = []
        for s, e in spans:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        busy = sum(e - s for s, e in merged) or 1e-9
        limit = max(IDLE_GAP_S, 0.2 * busy)
        self.breaks: list[tuple[float, float]] = []  # (gap start, gap end), drawn short
        for (_, e0), (s1, _) in zip(merged, merged[1:]):
            if s1 - e0 > limit:
                self.breaks.append((e0, s1))
        self.short = 0.03 * busy  # a long gap's drawn length, in seconds
        end = max((e for _, e in merged), default=0.0)
        self.total = self._shifted(end) or 1e-9
        self.width = width

    def _shifted(self, t: float) -> float:
        """``t`` with the part of each long gap before it taken out."""
        removed = 0.0
        for g0, g1 in self.breaks:
            if t >= g1:
                removed += (g1 - g0) - self.short
            elif t > g0:
                return g0 - removed + (t - g0) / (g1 - g0) * self.short
            else:
                break
        return t - removed

    def x(self, t: float) -> float:
        return self._shifted(t) / self.total * self.width


def _nice_step(span: float, ticks: int = 8) -> float:
    raw = max(span / ticks, 1e-6)
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def timeline_svg(view: BuildView) -> str:
    units = view.last_units  # the last build's: each build has its own clock
    if len(units) > MAX_TIMELINE_UNITS:
        units = sorted(sorted(units, key=lambda u: -u.seconds)[:MAX_TIMELINE_UNITS],
                       key=lambda u: u.start)
    left, top, row_h, gap = 64, 26, 22, 4
    plot_w = CHART_W - left - 12
    axis = _Axis(units, plot_w)
    lanes = max((u.lane for u in units), default=-1) + 1
    height = top + lanes * (row_h + gap) + 10
    out = [f'<svg id="build-timeline" class="chart" xmlns="http://www.w3.org/2000/svg" '
           f'viewBox="0 0 {CHART_W} {height}" width="{CHART_W}" height="{height}" '
           f'style="width:100%;height:auto" role="img" '
           f'aria-label="build timeline: {len(units)} commands in {lanes} rows">']
    # Ticks in real build time, where the axis is not cut.
    end = max((u.end for u in units), default=1.0)
    step = _nice_step(end)
    t = 0.0
    last_x = -100.0
    while units and t <= end + 1e-9 and t / step < 400:
        if not any(g0 < t < g1 for g0, g1 in axis.breaks):
            x = left + axis.x(t)
            if x - last_x >= 60:
                anchor = "end" if x > CHART_W - 40 else "middle"
                out.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" '
                           f'y2="{height - 6}"/><text class="axis" x="{x:.1f}" y="{top - 10}" '
                           f'text-anchor="{anchor}">{esc(fmt_time(t) if t else "0 s")}</text>')
                last_x = x
        t += step
    for g0, g1 in axis.breaks:
        x0, x1 = left + axis.x(g0), left + axis.x(g1)
        out.append(f'<rect class="idle" x="{x0:.1f}" y="{top - 6}" width="{max(x1 - x0, 2):.1f}" '
                   f'height="{height - top}" fill="url(#hatch)"><title>'
                   f'{esc(fmt_time(g1 - g0))} with no nvcc command running (drawn short)'
                   f'</title></rect>')
    for lane in range(lanes):
        y = top + lane * (row_h + gap)
        out.append(f'<text class="axis" x="{left - 8}" y="{y + 15}" text-anchor="end">'
                   f'slot {lane + 1}</text>')
    for u in units:
        y = top + u.lane * (row_h + gap)
        x0, x1 = left + axis.x(u.start), left + axis.x(u.end)
        w = max(x1 - x0, 1.0)
        what = {"hit": "answered whole from the cache", "fallback": "plain nvcc ran it",
                "failed": "failed", "ran": "run unchanged"}.get(u.state, "staged by nvstage")
        tip = (f"{u.source or u.output or u.command}\n{label(u.kind)}, {what}"
               + (f": {u.reason}" if u.reason else "")
               + f"\nstarted at {fmt_time(u.start)}, took {fmt_time(u.seconds)}"
               + (f" (nvstage's own work {fmt_time(u.overhead_seconds)})"
                  if u.overhead_seconds else "")
               + f"\nprocess {u.pid}, {len(u.kernels)} kernel records")
        out.append(f'<g class="unit unit-{esc(u.state)}" data-unit="{u.index}">'
                   f'<rect class="unit-bar" x="{x0:.1f}" y="{y}" width="{w:.1f}" '
                   f'height="{row_h}" rx="3" fill="{STATE_COLORS.get(u.state, "#ddd")}" '
                   f'stroke="#8e8e93" stroke-width="0.6"><title>{esc(tip)}</title></rect>')
        ran = sorted((s for s in u.stages if s.ran), key=lambda s: (s.start, s.index))
        rows = stage_rows(ran)
        n_rows = max(rows, default=0) + 1
        h = (row_h - 6) / n_rows
        for s, r in zip(ran, rows):
            sx = left + axis.x(s.start)
            sw = max(left + axis.x(s.start + s.seconds) - sx, 0.5)
            color = STAGE_COLORS.get(s.kind, OTHER_STAGE)
            out.append(f'<rect class="stage-bar" x="{sx:.1f}" y="{y + 3 + r * h:.1f}" '
                       f'width="{sw:.1f}" height="{h:.1f}" fill="{color}"'
                       f'{" opacity=0.45" if s.cached else ""}><title>'
                       f'{esc(u.name)}: stage {s.index} {esc(s.label)}, '
                       f'{esc(fmt_time(s.seconds))}{" (cached)" if s.cached else ""}'
                       f'</title></rect>')
        if w > 70:
            out.append(f'<text class="unit-label" x="{x0 + 4:.1f}" y="{y + row_h - 6}" '
                       f'>{esc(clip(u.name, int(w / 7)))}</text>')
        out.append("</g>")
    out.insert(1, '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
                  'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fafafa"/>'
                  '<line x1="0" y1="0" x2="0" y2="6" stroke="#d2d2d7" stroke-width="2"/>'
                  '</pattern></defs>')
    out.append("</svg>")
    return "".join(out)


def _legend(view: BuildView) -> str:
    kinds = [t.kind for t in view.kind_totals()]
    items = [f'<span class="key"><i style="background:{STATE_COLORS[s]}"></i>{esc(w)}</span>'
             for s, w in (("ok", "staged"), ("hit", "whole-command cache hit"),
                          ("fallback", "plain nvcc"), ("ran", "other step, run unchanged"),
                          ("failed", "failed"))]
    items += [f'<span class="key"><i style="background:{STAGE_COLORS.get(k, OTHER_STAGE)}">'
              f'</i>{esc(k)}</span>' for k in kinds]
    return '<p class="legend">' + "".join(items) + ' <span class="dim">(faded: restored ' \
           'from the stage cache)</span></p>'


# -- tables ------------------------------------------------------------------------------

def _unit_link(u: TranslationUnit) -> str:
    return f'<a href="#unit-{u.index}" title="{esc(u.source or u.output or "")}">' \
           f'{esc(u.name)}</a>'


def _kinds_table(view: BuildView) -> str:
    totals = view.kind_totals()
    spent = sum(t.seconds for t in totals) or 1e-9
    rows = []
    for t in totals:
        bar = (f'<span class="bar"><i style="width:{t.seconds / spent * 100:.1f}%;'
               f'background:{STAGE_COLORS.get(t.kind, OTHER_STAGE)}"></i></span>')
        rows.append("<tr>" + _cell(t.kind) + _cell(t.stages, num=True, sort=t.stages)
                    + _cell(t.ran, num=True, sort=t.ran)
                    + _cell(t.cached, num=True, sort=t.cached)
                    + _cell(t.whole, num=True, sort=t.whole)
                    + _cell(fmt_share(t.hit_rate), num=True, sort=t.hit_rate or 0)
                    + _cell(fmt_time(t.seconds), num=True, sort=t.seconds)
                    + _cell(bar + f" {t.seconds / spent:.0%}", raw=True, sort=t.seconds)
                    + _cell(fmt_time(t.max_seconds), num=True, sort=t.max_seconds) + "</tr>")
    return _table("stage-kinds", [("stage kind", False), ("stages", True), ("ran", True),
                                  ("stage-cache hits", True), ("in command hits", True),
                                  ("hit rate", True), ("time", True), ("share", False),
                                  ("slowest", True)], rows)


def _slowest_tables(view: BuildView) -> str:
    urows = ["<tr>" + _cell(_unit_link(u), raw=True, sort=u.name) + _cell(u.state)
             + _cell(fmt_time(u.seconds), num=True, sort=u.seconds)
             + _cell(len(u.stages), num=True, sort=len(u.stages))
             + _cell(len(u.kernels), num=True, sort=len(u.kernels)) + "</tr>"
             for u in view.slowest_units()]
    srows = ["<tr>" + _cell(_unit_link(u), raw=True, sort=u.name) + _cell(s.index, num=True,
                                                                          sort=s.index)
             + _cell(s.label) + _cell(fmt_time(s.seconds), num=True, sort=s.seconds)
             + _cell("cached" if s.cached else s.where or "") + "</tr>"
             for u, s in view.slowest_stages()]
    return ('<div class="two"><div><h3>Slowest translation units</h3>'
            + _table("slowest-units", [("unit", False), ("status", False), ("time", True),
                                       ("stages", True), ("kernels", True)], urows)
            + '</div><div><h3>Slowest stages</h3>'
            + _table("slowest-stages", [("unit", False), ("#", True), ("stage", False),
                                        ("time", True), ("", False)], srows)
            + "</div></div>")


def _units_table(view: BuildView) -> str:
    rows = []
    for u in view.units:
        stages = "".join(
            f"<tr><td class=num>{s.index}</td><td>{esc(s.label)}</td>"
            f"<td class=num>{esc(fmt_time(s.start - u.start))}</td>"
            f"<td class=num>{esc(fmt_time(s.seconds))}</td>"
            f"<td>{'cached' if s.cached else '' if s.ran else 'not run (command hit)'}</td></tr>"
            for s in u.stages)
        detail = (f'<details class="unit-stages"><summary>{esc(u.name)}</summary>'
                  f'<p class="path">{esc(u.source or "")} → {esc(u.output or "?")}</p>'
                  f'<p class="cmd">{esc(u.command)}</p>'
                  + (f'<table class="stages"><thead><tr><th class=num>#</th><th>stage</th>'
                     f'<th class=num>at</th><th class=num>time</th><th></th></tr></thead>'
                     f'<tbody>{stages}</tbody></table>' if stages else "")
                  + "".join(f'<p class="note">{esc(n)}</p>' for n in u.notes)
                  + "</details>")
        reason = u.reason or ""
        rows.append(f'<tr id="unit-{u.index}" class="state-{esc(u.state)}">'
                    + _cell(u.index, num=True, sort=u.index)
                    + _cell(detail, raw=True, sort=u.name, cls="wrap")
                    + _cell(label(u.kind)) + _cell(u.run, num=True, sort=u.run)
                    + _cell(u.state) + _cell(fmt_time(u.start), num=True, sort=u.start)
                    + _cell(fmt_time(u.seconds), num=True, sort=u.seconds)
                    + _cell("-" if u.wall_seconds is None else fmt_time(u.wall_seconds),
                            num=True, sort=u.wall_seconds or 0)
                    + _cell("-" if u.overhead_seconds is None else fmt_time(u.overhead_seconds),
                            num=True, sort=u.overhead_seconds or 0)
                    + _cell(len(u.stages), num=True, sort=len(u.stages))
                    + _cell(sum(1 for s in u.stages if s.cached), num=True)
                    + _cell(len(u.kernels), num=True, sort=len(u.kernels))
                    + _cell(reason, cls="wrap reason") + "</tr>")
    return _table("units", [("#", True), ("unit or step", False), ("kind", False),
                            ("build", True), ("status", False),
                            ("start in its build", True), ("time", True), ("staged wall", True),
                            ("nvstage's own", True), ("stages", True), ("cached", True),
                            ("kernels", True), ("why not staged / failed", False)], rows)


def _kernels_table(view: BuildView, linked: bool = False) -> str:
    """``linked``: each kernel's name links to its code view below the table."""
    rows = []
    for n, k in enumerate(view.kernels):
        r, u, occ = k.record, view.units[k.unit], k.occupancy
        spill = r.spills
        occ_text = "-" if occ is None else f"{occ.occupancy:.0%}"
        best = "-" if k.best is None else f"{k.best.block_size} ({k.best.occupancy:.0%})"
        rows.append(
            f'<tr{" class=flagged" if spill else ""}>'
            + (_cell(f'<a class="kv-link" href="#kv-{n}" title="source and SASS">'
                     f"{esc(r.name)}</a>", raw=True, cls="wrap kname", sort=r.name)
               if linked else _cell(r.name, cls="wrap kname", sort=r.name))
            + _cell(r.arch, sort=r.arch)
            + _cell(_unit_link(u), raw=True, sort=u.name)
            + _cell(fmt_known(r.registers), num=True,
                    sort=r.registers if r.registers is not None else -1)
            + _cell(fmt_known(r.spill_stores), num=True, sort=r.spill_stores or 0)
            + _cell(fmt_known(r.spill_loads), num=True, sort=r.spill_loads or 0)
            + _cell(r.stack_frame, num=True, sort=r.stack_frame)
            + _cell(r.shared_bytes, num=True, sort=r.shared_bytes)
            + _cell(fmt_known(r.constant_bytes) if r.constant_bytes is not None else "-", num=True,
                    sort=r.constant_bytes or 0)
            + _cell(fmt_known(r.barriers), num=True, sort=r.barriers or 0)
            + _cell(occ_text, num=True, sort=-1 if occ is None else occ.occupancy)
            + _cell(", ".join(occ.limiters) if occ else (k.why_none or ""), cls="wrap small")
            + _cell(best, num=True, sort=0 if k.best is None else k.best.occupancy)
            + _cell("final" if r.final else "per file") + "</tr>")
    return _table("kernels", [("kernel", False), ("arch", False), ("unit", False),
                              ("regs", True), ("spill st (B)", True), ("spill ld (B)", True),
                              ("stack (B)", True), ("smem (B)", True), ("cmem[0] (B)", True),
                              ("barriers", True), (f"occupancy @{view.block}", True),
                              ("limited by", False), ("best block", True), ("numbers", False)],
                  rows, caption="click a column to sort; figures from the ptxas report each "
                                "command kept (smem: static shared memory per block); occupancy "
                                "is theoretical, per SM, on the kernel's arch")


def _cards(view: BuildView) -> str:
    counts, cache = view.counts(), view.cache_totals()
    spilling = {(k.record.kernel) for k in view.kernels if k.record.spills}
    regs = [k for k in view.kernels if k.record.registers is not None]
    top = max(regs, key=lambda k: k.record.registers) if regs else None
    last, before = view.last_build, view.previous_build
    items = [("build", "-" if last is None else f"{last.number} of {len(view.builds)}", False),
             ("steps in the last build", str(counts["units"]), False),
             ("last build's wall time", fmt_time(view.wall_seconds)
              + (f" (before: {fmt_time(before.wall_seconds)})" if before else ""), False),
             ("time in its steps", fmt_time(view.unit_seconds), False),
             ("parallelism", fmt_parallel(view.parallelism, cell=True), False),
             ("command cache hits", f"{cache['command_hits']} of {cache['commands']}", False),
             ("stage cache hit rate", fmt_share(cache["stage_hit_rate"]), False),
             ("project's kernels (per arch)", str(len(view.kernels)), False)]
    if top is not None:
        items.append((f"max registers ({clip(top.record.name, 22)})",
                      str(top.record.registers), False))
    items.append(("kernels that spill", str(len(spilling)), bool(spilling)))
    if counts.get("fallback"):
        items.append(("ran by plain nvcc", str(counts["fallback"]), True))
    if counts.get("failed"):
        items.append(("failed", str(counts["failed"]), True))
    return cards(items)


# This page's own style, after the shared one (``page.BASE_CSS``).
_CSS = BASE_CSS + LINES_CSS + """
.two{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px}
caption{caption-side:bottom;text-align:left;color:var(--dim);font-size:12px;padding:6px 8px}
th,td{vertical-align:top}
table.sortable th{cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" ▲";font-size:10px}
th[aria-sort=descending]::after{content:" ▼";font-size:10px}
td.wrap{white-space:normal;overflow-wrap:anywhere;min-width:140px}
td.kname{font-family:ui-monospace,monospace;font-size:12px;max-width:360px}
td.small{font-size:12px;min-width:80px}
td.reason{max-width:320px}
tr.state-fallback td{background:#fdf6e3} tr.state-failed td{background:#fdecea}
#builds tr.current td{font-weight:600}
details.unit-stages summary{cursor:pointer;font-family:ui-monospace,monospace}
details.unit-stages .path,details.unit-stages .cmd{font:11px/1.3 ui-monospace,monospace;
 color:var(--dim);margin:4px 0;overflow-wrap:anywhere;white-space:normal;max-width:640px}
table.stages{width:auto;margin:4px 0 6px} table.stages td,table.stages th{padding:2px 8px;
 font-size:12px}
.bar{display:inline-block;width:120px;height:10px;background:#eee;border-radius:2px;
 vertical-align:middle} .bar i{display:block;height:10px;border-radius:2px}
.legend{font-size:12px;color:var(--dim);display:flex;flex-wrap:wrap;gap:4px 12px}
.legend .key i{display:inline-block;width:12px;height:10px;margin-right:4px;
 vertical-align:middle;border:1px solid #aaa}
svg .unit-label{font-size:11px;fill:#1d1d1f;pointer-events:none;paint-order:stroke;
 stroke:#fff;stroke-width:3px;stroke-linejoin:round}
#kernels th{white-space:normal;vertical-align:bottom}
"""

# Sorting by any column of a table.sortable (numbers as numbers: each cell's data-v), and the
# marker the browser test waits for.
_JS = """
(function(){
  var data = JSON.parse(document.getElementById('nvstage-data').textContent);
  function key(td){ return td.hasAttribute('data-v') ? td.getAttribute('data-v')
                                                      : td.textContent.trim(); }
  document.querySelectorAll('table.sortable').forEach(function(table){
    var ths = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(ths, function(th, col){
      function sort(){
        var numeric = th.classList.contains('num');
        var dir = th.getAttribute('aria-sort') === 'descending' ? 1 :
                  th.getAttribute('aria-sort') === 'ascending' ? -1 : (numeric ? -1 : 1);
        Array.prototype.forEach.call(ths, function(h){ h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows).map(function(r, i){
          var v = key(r.cells[col]);
          return {r: r, i: i, v: numeric ? (parseFloat(v) || 0) : v.toLowerCase()};
        });
        rows.sort(function(a, b){
          if (a.v < b.v) return -dir; if (a.v > b.v) return dir; return a.i - b.i;
        });
        rows.forEach(function(x){ body.appendChild(x.r); });
      }
      th.addEventListener('click', sort);
      th.addEventListener('keydown', function(ev){ if (ev.key === 'Enter') sort(); });
    });
  });
  document.body.setAttribute('data-units', String(data.units));
  document.body.setAttribute('data-kernels', String(data.kernels));
  document.body.setAttribute('data-ready', '1');
})();
"""


def _root(view: BuildView) -> str:
    """The folder paths are shown from: the one that holds the build folder and the sources
    (a CMake build beside its project), unless that is the file system's root."""
    paths = [os.path.abspath(view.folder)] + [u.source for u in view.units
                                              if u.source and os.path.isabs(u.source)]
    try:
        root = os.path.commonpath(paths)
    except ValueError:
        return ""
    return "" if root == os.path.dirname(root) else root


def _code_views(view: BuildView, views: dict) -> str:
    out = []
    root = _root(view)
    for n, row in enumerate(view.kernels):
        got = views.get(n, "not read")
        u = view.units[row.unit]
        if isinstance(got, str):
            out.append(missing_view(f"kv-{n}", f"{row.record.name} ({row.record.arch}, "
                                    f"{u.name})", got))
        else:
            out.append(kernel_view(got, f"kv-{n}", root=root, where=u.name))
    return "".join(out)


def render_build(view: BuildView, *, title: str | None = None,
                 views: dict | None = None, changes=None, time: dict | None = None) -> str:
    """The whole page as one string. Pure: everything comes from ``view``, ``views``
    (``inspect.build_log_lines``: each kernel row's code, or why there is none), ``changes``
    (``record_diff.since_previous``: what the last build changed) and ``time``
    (``build_time_html.read_compile_time``: where compile time went, None: nothing traced)."""
    from nvstage.report.build_history import builds_table, since_section
    from nvstage.report.terminal.build_log import not_seen_note

    folder = os.path.abspath(view.folder)
    name = os.path.basename(os.path.dirname(folder) if os.path.basename(folder) ==
                            ".nvstage-build" else folder) or folder
    title = title or f"nvstage build report: {name}"
    counts = view.counts()
    last = view.last_build
    missing = not_seen_note(view)
    notes = view.notes + ([missing] if missing else [])
    since = since_section(view, changes)
    kinds = ", ".join(label(k, n) for k, n in view.step_kinds().items())
    parts = [f"<h1>{esc(title)}</h1>",
             f'<p class="meta">{esc(view.folder)} · '
             + (f"build {last.number} of {len(view.builds)}: " if last else "")
             + f'{plural(counts["units"], "step")} ({esc(kinds or "none")}) in '
             f'{esc(fmt_time(view.wall_seconds))} · nvstage {esc(__version__)}</p>',
             _cards(view),
             "<nav>" + "".join(f'<a href="#{i}">{esc(t)}</a>' for i, t in (
                 (("since", "since the build before"),) if since else ())
                 + (("timeline", "timeline"), ("slowest", "slowest"), ("kinds", "stage kinds"),
                    ("builds-section", "builds"), ("units-section", "units and steps"),
                    ("kernels-section", "kernels"))
                 + ((("compile-time", "compile time"),) if time else ())
                 + ((("code-section", "kernel code"),) if views is not None and view.kernels
                    else ())
                 + ((("notes", "notes"),) if notes else ())) + "</nav>"]
    parts.append(since)
    if view.units:
        parts.append('<section id="timeline"><h2>Timeline of the last build</h2>'
                     '<p class="note">one row per command running at once (as ninjatracing '
                     'draws a build); stages inside each command; hover for details. '
                     '<code>--build-trace FILE</code> writes it for Perfetto.</p>'
                     + _legend(view) + f'<div class="scroll">{timeline_svg(view)}</div>'
                     + "</section>")
        parts.append('<section id="slowest"><h2>Where the last build\'s time went</h2>'
                     + _slowest_tables(view) + "</section>")
        parts.append('<section id="kinds"><h2>Stage kinds: time and cache hits</h2>'
                     + _kinds_table(view) + "</section>")
    else:
        parts.append('<p class="note">the record holds no readable entry</p>')
    if view.builds:
        parts.append('<section id="builds-section"><h2>Builds in the record</h2>'
                     + builds_table(view) + "</section>")
    fallbacks = [u for u in view.units if u.status in ("fallback", "failed")]
    if fallbacks:
        parts.append('<section id="fallbacks"><h2>Commands nvstage did not stage</h2><ul>'
                     + "".join(f'<li>{_unit_link(u)} ({esc(u.state)}): '
                               f'{esc(u.reason or "no reason recorded")}</li>'
                               for u in fallbacks) + "</ul></section>")
    parts.append('<section id="units-section"><h2>Units and steps</h2>'
                 '<p class="note">the project as its latest entries leave it (the build each '
                 'last ran in); open a unit for its stages and command</p>'
                 + _units_table(view) + "</section>")
    parts.append('<section id="kernels-section"><h2>Kernels</h2>'
                 + (_kernels_table(view, linked=views is not None) if view.kernels else
                    '<p class="note">no kernel figures in this record</p>') + "</section>")
    if time:
        parts.append('<section id="compile-time"><h2>Compile time: where it went</h2>'
                     + compile_time_section(time) + "</section>")
    if views is not None and view.kernels:
        parts.append('<section id="code-section"><h2>Kernel code</h2>'
                     '<p class="note">each kernel\'s source beside its SASS, read from the '
                     "object its unit wrote; a kernel's name in the table opens it</p>"
                     + _code_views(view, views) + "</section>")
    if notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>'
                     + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></section>")
    data = {"schema": "nvstage.build-report/1", "units": len(view.units),
            "kernels": len(view.kernels), "lanes": view.lanes,
            "build": last.number if last else None, "builds": len(view.builds)}
    return page(title, _CSS, "\n".join(parts), data, LINES_JS + _JS)


@dataclass
class BuildReport:
    """A build page written: where, the trace beside it, and the view it shows."""

    path: str
    view: BuildView
    trace: str | None = None
    changes: object = None  # record_diff.RecordDiff: the last build against the one before

    def __fspath__(self) -> str:
        return self.path

    def to_json(self) -> dict:
        return {**self.view.to_json(), "output": self.path, "build_trace": self.trace,
                "since_previous": None if self.changes is None else self.changes.to_json()}


def write_build_report(record: str | os.PathLike | BuildView, output=None, *,
                       build_trace=None, block: int | None = None,
                       title: str | None = None, code: bool = True, toolkit=None,
                       nvcc: str | None = None) -> BuildReport:
    """Read the build record at ``record`` (a build folder or its ``.nvstage-build``; or a
    ``BuildView`` already read) and write the page to ``output`` (default: report.html in
    the record folder), and with ``build_trace`` the timeline as a Chrome trace there.
    ``code``: each kernel's source and SASS too, read from the objects the units wrote with
    ``toolkit`` (else ``nvcc``'s, else the pip wheels')."""
    view = record if isinstance(record, BuildView) else \
        load_build_view(record, block=block or DEFAULT_BLOCK)
    out = Path(output) if output is not None else Path(view.folder) / "report.html"
    for path, option in ((out, "-o"), (build_trace, "--build-trace")):
        if path is not None and is_folder(path):
            raise UsageError(f"{option} {path} is a folder",
                             hint=f"give a file: {option} {Path(path) / 'build.html'}"
                             if option == "-o" else f"give a file: {option} build-trace.json")
    views = None
    if code and view.kernels:
        from nvstage.inspect.build_log_lines import record_lines


        try:
            views = record_lines(view, toolkit or find_toolkit(nvcc))
        except NvstageError as e:  # no toolkit to read them with: the figures still show
            views = dict.fromkeys(range(len(view.kernels)), f"not read: {e.message}")
    from nvstage.inspect.build_log_diff import since_previous

    changes = since_previous(view)
    time, note = read_compile_time(view)
    if note:
        view.notes.append(note)
    try:
        write_atomic(out, render_build(view, title=title, views=views, changes=changes,
                                       time=time), in_document_folder=output is None)
        if build_trace is not None:
            # Compact: a big build's trace is megabytes, and only tools read it.
            write_atomic(build_trace, json.dumps(chrome_build_trace(view), allow_nan=False,
                                                 separators=(",", ":")) + "\n")
    except WriteError as e:
        raise UsageError(e.message.replace("cannot write ", "cannot write the report to ", 1),
                         hint=e.hint) from None
    return BuildReport(os.fspath(out), view,
                       None if build_trace is None else os.fspath(build_trace), changes)
