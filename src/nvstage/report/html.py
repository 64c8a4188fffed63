"""One self-contained HTML page for a build (and a run): inline CSS, SVG and a little JS.

Nothing is fetched when the page opens: no fonts, scripts or images from anywhere. Every
string taken from a build or a run (paths, kernel names, tool output, SASS, PTX) is escaped;
data for the script travels as JSON inside a ``<script type="application/json">`` block with
``<`` escaped, so no value can close the block.

Sections: the stage graph (source -> each stage with the artifacts it wrote -> GPU
execution), the stage time chart, resources per kernel, the fatbin inventory, SASS and PTX
views, and for a run the decomposition chart and the trace.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import __version__
from nvstage.artifacts import read_regular
from nvstage.errors import NvstageError
from nvstage.inspect.kernels import display_name
from nvstage.report.units import fmt_bytes, fmt_time
from nvstage.run.document import RunReport

# Long listings are cut so the page stays quick to open; the kept file has the rest.
MAX_CODE_LINES = 3000
LANE_COLORS = {"launch": "#4e79a7", "kernel": "#f28e2b", "transfer": "#59a14f",
               "wall": "#9c755f", "h2d": "#59a14f", "d2h": "#76b7b2", "other": "#bab0ac"}
STAGE_COLORS = {
    "host-preprocess": "#9c755f", "cudafe++": "#b07aa1", "device-preprocess": "#76b7b2",
    "cicc": "#4e79a7", "ptxas": "#f28e2b", "fatbinary": "#e15759", "host-compile": "#9c755f",
    "device-link": "#edc948", "dlink-fatbinary": "#e15759", "dlink-compile": "#9c755f",
    "link": "#59a14f", "nvrtc": "#4e79a7", "nvjitlink": "#f28e2b",
}


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


@dataclass
class ReportInputs:
    """What the page shows, gathered once (so rendering stays pure)."""

    build: object  # pipeline.Build
    resources: list = field(default_factory=list)  # KernelRecord
    fatbin: list = field(default_factory=list)  # FatbinImage
    names: dict[str, str] = field(default_factory=dict)  # the fatbin's kernels, demangled
    sass: list = field(default_factory=list)  # SassKernel
    ptx: list[tuple[str, str]] = field(default_factory=list)  # (file name, text)
    run: RunReport | None = None  # an nvstage.run/1 document, read
    trace: dict | None = None  # Chrome trace
    notes: list[str] = field(default_factory=list)  # what could not be read, and why


def gather(build, *, toolkit=None, run: RunReport | dict | None = None,
           trace: dict | None = None, sass: bool = True) -> ReportInputs:
    """Read what the page needs from a build's kept files. A reader that fails leaves a note
    and an empty section instead of failing the whole report. ``run``: a ``RunReport`` or
    the run document's dict."""
    from nvstage.compiler.record import reading_toolkit, toolkit_note

    toolkit = reading_toolkit(build, toolkit)
    inp = ReportInputs(build, run=_run_report(run), trace=trace)
    note = toolkit_note(build, toolkit)
    if note:
        inp.notes.append(note)
    try:
        from nvstage.inspect.resources import build_resources

        inp.resources = build_resources(build, toolkit)
    except (NvstageError, OSError) as e:
        inp.notes.append(f"resources: {getattr(e, 'message', e)}")
    for a in build.artifacts:
        if a.kind in ("fatbin", "object", "executable") and os.path.isfile(a.path):
            try:
                from nvstage.inspect.fatbin import inventory

                from nvstage.inspect.names import demangle_all

                inp.fatbin = inventory(a.path, toolkit)
                # As the resources table shows them (c++filt runs here: render is pure).
                inp.names = demangle_all(k for im in inp.fatbin for k in im.kernels)
                break
            except (NvstageError, OSError) as e:
                inp.notes.append(f"fatbin inventory of {a.name}: {getattr(e, 'message', e)}")
    if sass:
        try:
            from nvstage.inspect.sass import build_sass

            inp.sass = list(build_sass(build, toolkit))
        except (NvstageError, OSError, ImportError) as e:
            inp.notes.append(f"SASS: {getattr(e, 'message', e)}")
    for a in build.artifacts:
        if a.kind == "ptx" and os.path.isfile(a.path):
            try:
                text = read_regular(a.path).decode("utf-8", errors="replace")
                inp.ptx.append((a.name, text))
            except (NvstageError, OSError) as e:
                inp.notes.append(f"PTX {a.name}: {getattr(e, 'message', None) or e}")
    return inp


# -- the documents, read defensively -----------------------------------------------------

def _run_report(run) -> RunReport | None:
    """The run document typed (``nvstage.run.document``: every field checked as read)."""
    return RunReport.from_json(run) if isinstance(run, dict) else run


def _number(v) -> float | None:
    """A finite number from a trace, or None (an integer of 400 digits is no float)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and -1e300 < v < 1e300:
        return float(v)
    return None


def _get(d, key: str):
    return d.get(key) if isinstance(d, dict) else None


def _key(value):
    """A dict key from a document value (a pid may be a list in a crafted trace)."""
    return value if isinstance(value, (str, int, float, type(None))) else repr(value)[:80]


# -- SVG pieces ------------------------------------------------------------------------

def _graph_layout(build) -> tuple[dict[int, int], dict[int, set[int]]]:
    """Layer of each stage (longest chain of dependencies before it) and its dependencies."""
    present = {r.stage.index for r in build.runs}
    deps: dict[int, set[int]] = {i: set() for i in present}
    try:
        from nvstage.compiler.graph import build_graph

        g = build_graph(build.plan)
        for i in present:
            deps[i] = {d for d in g.deps.get(i, set()) if d in present}
    except Exception:
        order = sorted(present)
        deps = {i: ({order[n - 1]} if n else set()) for n, i in enumerate(order)}
    layer: dict[int, int] = {}
    for i in sorted(present):
        layer[i] = 1 + max((layer.get(d, 0) for d in deps[i]), default=0)
    return layer, deps


def _svg_open(chart_id: str, width: int, height: int, label: str) -> str:
    """A chart that scales down to the page (a long -rdc plan is wide), but never below 80 %
    of its size, where its text would be too small to read: its frame scrolls instead."""
    return (f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'style="width:100%;max-width:{width}px;min-width:{int(width * 0.8)}px;'
            f'height:auto" aria-label="{esc(label)}">')


# The stage graph's boxes. Text is sized from these widths (px per character, generous for
# the fonts a system may substitute): names that do not fit wrap, never cut.
BOX_W, GAP, PAD, LINE_H = 200, 26, 12, 14
_MONO_PX, _TEXT_PX = 6.8, 6.4  # 11px ui-monospace; 11px system-ui
# The widest chart that scales into the page at 1400 px without scrolling sideways: the page
# is 1336 px inside its padding, the frame 16 px less, and a chart shrinks to 80 %.
FIT_W = 1640


def _wrap_name(name: str, width: int) -> list[str]:
    """``name`` in lines of at most ``width`` characters, broken after a ".", "_" or "-"
    where one falls in the second half of a line (file names), else at the width."""
    lines = []
    while len(name) > width:
        cut = max(name.rfind(c, width // 2, width) for c in "._-")
        cut = cut + 1 if cut > 0 else width
        lines.append(name[:cut])
        name = name[cut:]
    return lines + [name]


def _box_lines(r) -> tuple[str, str, list[tuple[str, str, str]]]:
    """(sub line, restore line, artifact lines as (name part, size or "", whole name)): what
    a stage's box holds."""
    s = r.stage
    sub = f"{s.tool}{' ' + s.arch if s.arch else ''}"
    when = f"cached: {fmt_time(r.seconds)} to restore" if r.cached else ""
    rows: list[tuple[str, str, str]] = []
    for a in r.artifacts:
        size = fmt_bytes(a.size)
        room = int((BOX_W - 14 - 12 - len(size) * _MONO_PX) / _MONO_PX)
        parts = _wrap_name(a.name, max(8, room))
        rows += [(p, "", a.name) for p in parts[:-1]] + [(parts[-1], size, a.name)]
    return sub, when, rows


def _layout(layer: dict[int, int], heights: dict, *, vertical: bool) -> tuple[dict, int, int]:
    """Box positions {key: (x, y, h)} and the chart's (width, height): columns of layers
    (left to right) or, ``vertical``, rows of layers (top to bottom), the source first and
    the GPU last."""
    groups: dict[int, list] = {0: ["source"]}
    for i in sorted(layer):
        groups.setdefault(layer[i], []).append(i)
    last = max(groups) + 1
    groups[last] = ["gpu"]
    pos: dict = {}
    if not vertical:
        col_h = []
        for c in range(last + 1):
            y = PAD
            for k in groups.get(c, []):
                pos[k] = (PAD + c * (BOX_W + GAP), y, heights[k])
                y += heights[k] + 16
            col_h.append(y)
        return pos, PAD * 2 + (last + 1) * (BOX_W + GAP) - GAP, max(col_h + [140]) + PAD
    widest = max(len(g) for g in groups.values())
    width = PAD * 2 + widest * (BOX_W + GAP) - GAP
    y = PAD
    for row in range(last + 1):
        keys = groups.get(row, [])
        x = (width - (len(keys) * (BOX_W + GAP) - GAP)) / 2  # each row centred
        for k in keys:
            pos[k] = (round(x), y, heights[k])
            x += BOX_W + GAP
        y += max((heights[k] for k in keys), default=0) + 40
    return pos, width, y - 40 + PAD


def stage_graph_svg(build, run: RunReport | None) -> str:
    layer, deps = _graph_layout(build)
    runs = {r.stage.index: r for r in build.runs}
    lines = {i: _box_lines(r) for i, r in runs.items()}
    heights = {i: 40 + LINE_H * (bool(lines[i][1]) + max(1, len(lines[i][2]))) for i in runs}
    # The source's and the GPU's names as box lines, wrapped where long (never cut).
    src = os.path.basename(build.source)
    src_lines = [] if len(src) * 7.5 <= BOX_W - 22 else \
        [(p, "", src) for p in _wrap_name(src, int((BOX_W - 22) / _MONO_PX))]
    gpu_sub = (run.device or run.arch or "measured") if run else "not run (no --run given)"
    gpu_lines = [] if len(gpu_sub) * _TEXT_PX <= BOX_W - 22 else \
        [(p, "", gpu_sub) for p in _wrap_name(gpu_sub, int((BOX_W - 22) / _MONO_PX))]
    heights["source"] = 40 + LINE_H * max(1, len(src_lines))
    heights["gpu"] = 40 + LINE_H * max(1, len(gpu_lines))
    # Left to right where that fits the page; top to bottom where it does not (a long chain
    # of stages), unless that is wider still (many arches side by side).
    pos, width, height = _layout(layer, heights, vertical=False)
    if width > FIT_W:
        vpos, vwidth, vheight = _layout(layer, heights, vertical=True)
        if vwidth < width:
            pos, width, height = vpos, vwidth, vheight
    vertical = pos["gpu"][1] > pos["source"][1]
    w = BOX_W
    out = [_svg_open("stage-graph", width, height, "stage graph"),
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#555"/></marker></defs>']

    def edge(a, b, cls="edge"):
        ax, ay, ah = pos[a]
        bx, by, bh = pos[b]
        if vertical:
            x1, y1, x2, y2 = ax + w / 2, ay + ah, bx + w / 2, by
            my = (y1 + y2) / 2
            d = f"M{x1:.0f},{y1:.0f} C{x1:.0f},{my:.0f} {x2:.0f},{my:.0f} {x2:.0f},{y2 - 2:.0f}"
        else:
            x1, y1, x2, y2 = ax + w, ay + min(ah, 54) / 2, bx, by + min(bh, 54) / 2
            mx = (x1 + x2) / 2
            d = f"M{x1:.0f},{y1:.0f} C{mx:.0f},{y1:.0f} {mx:.0f},{y2:.0f} {x2 - 2:.0f},{y2:.0f}"
        out.append(f'<path class="{cls}" d="{d}" fill="none" stroke="#555" '
                   f'stroke-width="1.3" marker-end="url(#arrow)"/>')

    for i, ds in deps.items():
        if not ds:
            edge("source", i)
        for d in ds:
            edge(d, i)
    has_dependents = {d for ds in deps.values() for d in ds}
    for i in runs:
        if i not in has_dependents:
            edge(i, "gpu", "edge edge-gpu")

    def box(key, title, sub, lines, color, cls, tip, *, right="", restored=""):
        x, y, h = pos[key]
        out.append(f'<g class="{cls}" data-tip="{esc(tip)}">')
        out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="#fff" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<rect x="{x}" y="{y}" width="6" height="{h}" rx="3" fill="{color}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 17}" class="box-title">{esc(title)}</text>')
        if sub:
            out.append(f'<text x="{x + 14}" y="{y + 32}" class="box-sub">{esc(sub)}</text>')
        if right:
            out.append(f'<text x="{x + w - 8}" y="{y + 32}" class="box-sub" '
                       f'text-anchor="end">{esc(right)}</text>')
        ty = y + 32 if sub or right else y + 18
        if restored:
            ty += LINE_H
            out.append(f'<text x="{x + 14}" y="{ty}" class="box-sub cached">'
                       f'{esc(restored)}</text>')
        for part, size, whole in lines:
            ty += LINE_H
            out.append(f'<text x="{x + 14}" y="{ty}" class="artifact"><title>{esc(whole)}'
                       f'</title>{esc(part)}</text>')
            if size:
                out.append(f'<text x="{x + w - 8}" y="{ty}" class="artifact size" '
                           f'text-anchor="end">{esc(size)}</text>')
        out.append("</g>")

    box("source", "source" if src_lines else src, "" if src_lines else "source", src_lines,
        "#333", "node node-source", build.source)
    for i, r in runs.items():
        s = r.stage
        sub, restored, artifact_lines = lines[i]
        cls = "node node-stage" + ("" if r.ok else " node-failed") + \
            (" node-cached" if r.cached else "")
        tip = " ".join(s.argv)
        box(i, f"{s.index}. {s.kind.value}", sub, artifact_lines,
            STAGE_COLORS.get(s.kind.value, "#888"), cls, tip,
            right="" if r.cached else fmt_time(r.seconds), restored=restored)
    box("gpu", "GPU execution", "" if gpu_lines else gpu_sub, gpu_lines,
        "#59a14f" if run else "#bbb", "node node-gpu" + ("" if run else " node-absent"),
        f"the kernels run on the GPU{': ' + gpu_sub if run else ''}")
    out.append("</svg>")
    return "\n".join(out)


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def restored(build) -> tuple[int, int]:
    """(stages restored from the cache, stages): a build whose every stage was restored
    took its wall time to restore, not to compile."""
    return sum(1 for r in build.runs if r.cached), len(build.runs)


def wall_words(build) -> tuple[str, str]:
    """What the build's wall time was, in words: ("restore time", why) when every stage came
    from the cache, else ("wall time", "N of M stages from the cache" or "")."""
    cached, n = restored(build)
    if n and cached == n:
        return "restore time", "every stage from the cache; no tool ran"
    return "wall time", f"{cached} of {n} stages from the cache" if cached else ""


def gantt_svg(build) -> str:
    runs = build.runs
    total = max([build.wall_seconds] + [r.started + r.seconds for r in runs] + [1e-9])
    labels = [f"{r.stage.index}. {r.stage.kind.value}"
              f"{' ' + r.stage.arch if r.stage.arch else ''}" for r in runs]
    label_w = int(min(420, max(160, 16 + _TEXT_PX * 1.1 * max(map(len, labels), default=0))))
    chart_w, row_h, top = 620, 20, 24
    height = top + row_h * len(runs) + 24
    width = label_w + chart_w + 130  # room for "1.2 ms restored" after the last bar
    out = [_svg_open("stage-gantt", width, height, "stage times")]
    for k in range(5):  # a time axis in quarters of the build's wall time
        x = label_w + chart_w * k / 4
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 18}" '
                   f'class="grid"/>')
        tick = fmt_time(total * k / 4) if k else "0"
        out.append(f'<text x="{x:.1f}" y="{top - 10}" class="axis" text-anchor="middle">'
                   f'{esc(tick)}</text>')
    for n, (r, label) in enumerate(zip(runs, labels)):
        y = top + n * row_h
        s = r.stage
        x = label_w + chart_w * r.started / total
        bw = max(1.5, chart_w * r.seconds / total)
        color = STAGE_COLORS.get(s.kind.value, "#888")
        tip = f"{label}: started {fmt_time(r.started)}, took {fmt_time(r.seconds)}" + \
            (" to restore from the cache" if r.cached else "")
        out.append(f'<text x="{label_w - 8}" y="{y + 14}" class="label" text-anchor="end">'
                   f'{esc(label)}</text>')
        fade = ' opacity="0.45"' if r.cached else ""
        out.append(f'<rect class="gantt-bar" x="{x:.1f}" y="{y + 3}" width="{bw:.1f}" '
                   f'height="{row_h - 6}" fill="{color}" data-tip="{esc(tip)}"{fade}/>')
        out.append(f'<text x="{x + bw + 4:.1f}" y="{y + 14}" class="value">'
                   f'{esc(fmt_time(r.seconds))}{" restored" if r.cached else ""}</text>')
    what, why = wall_words(build)
    out.append(f'<text x="{label_w}" y="{height - 4}" class="axis">'
               f'{esc(what.replace("wall time", "wall"))} '
               f'{esc(fmt_time(build.wall_seconds))}{"; " + esc(why) if why else ""}; stage sum '
               f'{esc(fmt_time(build.stage_seconds))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def decomposition_svg(run: RunReport | dict) -> str | None:
    """The measured decomposition as ``report.bars`` draws it (T stacked, the wall time
    ticked), as this page's chart; None when the run has no figures to draw."""
    from nvstage.report.bars import bar_from_medians, bars_svg

    report = _run_report(run)
    dec = report.decomposition
    if dec is None or not {"launch", "kernel", "transfer", "wall"} & set(dec.medians_ns):
        return None
    return bars_svg([bar_from_medians(report.workload or "run", dec.medians_ns)],
                    title="decomposition, medians over the repetitions",
                    chart_id="decomposition-chart")


_TERMS = {"t_launch": "launch", "t_kernel": "kernel", "t_transfer": "transfer"}
_CATS = {"kernel": "kernel", "copy": "transfer"}


def _event_kind(e: dict, lane: str) -> str:
    """Colour by the decomposition term the event stands for (baseline lane), else its
    category, else its lane's name."""
    term, cat = _get(e.get("args"), "term"), e.get("cat")
    if isinstance(term, str) and term in _TERMS:  # a list there is no key: not a term
        return _TERMS[term]
    if isinstance(cat, str) and cat in _CATS:
        return _CATS[cat]
    low = lane.lower()
    return "launch" if "launch" in low else "transfer" if "cop" in low else "other"


def _trace_spans(run: RunReport | None, trace: dict | None
                 ) -> list[tuple[str, str, float, float, str]]:
    """(lane, name, start us, duration us, colour kind) from a Chrome trace, or else the sequential
    baseline laid out from the run's per-operation medians."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    spans = []
    if isinstance(events, list):
        names: dict[tuple, str] = {}
        procs: dict = {}
        for e in events:
            if isinstance(e, dict) and e.get("ph") == "M":
                if e.get("name") == "thread_name":
                    names[(_key(e.get("pid")), _key(e.get("tid")))] = \
                        str(_get(e.get("args"), "name"))
                elif e.get("name") == "process_name":
                    procs[_key(e.get("pid"))] = str(_get(e.get("args"), "name"))
        for e in events:
            if not isinstance(e, dict) or e.get("ph") != "X":
                continue
            ts, dur = _number(e.get("ts")), _number(e.get("dur"))
            if ts is None or dur is None:
                continue
            pid, tid = _key(e.get("pid")), _key(e.get("tid"))
            lane = f"{procs.get(pid, pid)}: {names.get((pid, tid), tid)}"
            spans.append((lane, str(e.get("name"))[:200], ts, dur, _event_kind(e, lane)))
        if spans:
            return spans
    dec = run.decomposition if run else None
    t = 0.0
    for op in (dec.operations or ()) if dec else ():
        h, g = op.host_ns, op.gpu_ns
        name = str(op.name)
        if op.kind == "launch" and h:
            spans.append(("baseline: launch", f"launch {name}", t / 1000, h / 1000, "launch"))
            t += h
        if g:
            kind = "kernel" if op.kind == "launch" else "transfer"
            spans.append((f"baseline: {kind}", name, t / 1000, g / 1000, kind))
            t += g
    return spans


# What one chart draws at most: a trace of a long run can hold millions of events, and a page
# of millions of rectangles does not open; the note under the chart says when it was cut.
MAX_TRACE_SPANS = 20_000
MAX_TRACE_LANES = 64


def trace_svg(run: RunReport | dict | None, trace: dict | None) -> str | None:
    spans = _trace_spans(_run_report(run), trace)
    if not spans:
        return None
    lanes = list(dict.fromkeys(s[0] for s in spans))[:MAX_TRACE_LANES]
    lane_row = {lane: n for n, lane in enumerate(lanes)}
    drawn = [s for s in spans if s[0] in lane_row][:MAX_TRACE_SPANS]
    cut = len(spans) - len(drawn)
    spans = drawn
    t0 = min(s[2] for s in spans)
    t1 = max(s[2] + s[3] for s in spans)
    span_us = max(t1 - t0, 1e-9)
    # Lane names whole (to 60 characters): the label column grows to fit them.
    label_w = int(min(420, max(160, 16 + _TEXT_PX * 1.1 * max(min(len(n), 60)
                                                             for n in lanes))))
    chart_w, row_h, top = 640, 24, 22
    width, height = label_w + chart_w + 20, top + row_h * len(lanes) + 26
    out = [_svg_open("trace-chart", width, height, "trace")]
    for k in range(5):
        x = label_w + chart_w * k / 4
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 20}" '
                   f'class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 8}" class="axis" text-anchor="middle">'
                   f'{fmt_time(span_us * k / 4 * 1e-6, "us")}</text>')
    for n, lane in enumerate(lanes):
        out.append(f'<text x="{label_w - 8}" y="{top + n * row_h + 16}" class="label" '
                   f'text-anchor="end"><title>{esc(lane)}</title>{esc(clip(lane, 60))}</text>')
    for lane, name, ts, dur, kind in spans:
        n = lane_row[lane]
        x = label_w + chart_w * (ts - t0) / span_us
        bw = max(1.0, chart_w * dur / span_us)
        out.append(f'<rect class="trace-span" x="{x:.1f}" y="{top + n * row_h + 3}" '
                   f'width="{bw:.1f}" height="{row_h - 6}" fill="{LANE_COLORS[kind]}" '
                   f'data-tip="{esc(f"{name}: {_us_text(dur)} at {_us_text(ts - t0)}")}"/>')
    what = "Chrome trace" if trace else \
        "sequential baseline from the per-operation medians (no trace given)"
    if cut:
        what += f"; {cut} more spans not drawn"
    out.append(f'<text x="{label_w}" y="{height - 6}" class="axis">{what}</text>')
    out.append("</svg>")
    return "\n".join(out)


# -- tables and code views -------------------------------------------------------------

def _table(table_id: str, head: list[str], rows: list[list], numeric: set[int] = frozenset(),
           *, wrap: set[int] = frozenset(), flag=None) -> str:
    """A table in a frame that scrolls sideways on its own. ``wrap``: columns whose long text
    wraps; ``flag(row) -> bool``: rows to highlight."""
    out = [f'<div class="table-frame"><table id="{table_id}"><thead><tr>']
    out += [f'<th{" class=num" if i in numeric else ""}>{esc(h)}</th>'
            for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for r in rows:
        cls = ' class="flagged"' if flag and flag(r) else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td{_cell_class(i, numeric, wrap)}>{esc(c)}</td>' for i, c in enumerate(r))
            + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _cell_class(i: int, numeric, wrap) -> str:
    return " class=num" if i in numeric else " class=wrap" if i in wrap else ""


def _code(title: str, text: str, cls: str) -> str:
    lines = text.splitlines()
    more = len(lines) - MAX_CODE_LINES
    body = "\n".join(lines[:MAX_CODE_LINES])
    note = f'<p class="note">{more} more lines not shown; see the kept file.</p>' \
        if more > 0 else ""
    return (f'<details class="code-view {cls}"><summary>{esc(title)} '
            f'<span class="dim">({len(lines)} lines)</span></summary>'
            f'<pre><code>{esc(body)}</code></pre>{note}</details>')


_CSS = """
:root{--fg:#1d1d1f;--dim:#6e6e73;--line:#d2d2d7;--bg:#f5f5f7;--bad:#c5221f}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
 background:var(--bg);margin:0 auto;padding:24px 32px 48px;max-width:1440px}
h1{font-size:24px;margin:0 0 4px} h2{font-size:18px;margin:32px 0 10px}
h3{font-size:13px;margin:18px 0 6px;color:var(--dim);text-transform:uppercase;
 letter-spacing:.04em}
.dim,.note{color:var(--dim)} .meta{color:var(--dim);margin:0 0 12px;overflow-wrap:anywhere}
nav{display:flex;flex-wrap:wrap;gap:6px;margin:14px 0 0}
nav a{font-size:12px;color:var(--fg);text-decoration:none;background:#fff;
 border:1px solid var(--line);border-radius:12px;padding:2px 10px}
nav a:hover{border-color:var(--fg)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:10px}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .v{font-size:20px;font-weight:600;font-variant-numeric:tabular-nums;
 overflow-wrap:anywhere}
.card .k{font-size:12px;color:var(--dim);overflow-wrap:anywhere}
.card.bad{border-color:var(--bad)}
.card.bad .v{color:var(--bad)}
.scroll,.table-frame{overflow-x:auto;background:#fff;border:1px solid var(--line);
 border-radius:8px}
.scroll{padding:8px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;white-space:nowrap}
tbody tr:last-child td{border-bottom:none} tbody tr:hover{background:#f7f7fa}
th{background:#f0f0f3;font-weight:600;position:sticky;top:0}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums}
td.wrap{white-space:pre-line;min-width:160px;overflow-wrap:anywhere}
tr.flagged td{background:#fdecea} tr.flagged td:first-child{box-shadow:inset 3px 0 var(--bad)}
svg text{font:12px system-ui,sans-serif;fill:var(--fg)}
svg .box-title{font-weight:600} svg .box-sub,svg .axis{fill:var(--dim);font-size:11px}
svg .artifact{font:11px ui-monospace,monospace;fill:#333} svg .size{fill:var(--dim)}
svg .cached{fill:#2a7d2a}
svg .grid{stroke:#e5e5ea;stroke-width:1} svg .value{font-size:11px;fill:var(--dim)}
.node-absent rect{stroke-dasharray:4 3} .node-failed rect{stroke:#d00}
details.code-view{background:#fff;border:1px solid var(--line);border-radius:8px;
 margin:6px 0;padding:4px 10px}
details.code-view summary{cursor:pointer;font-family:ui-monospace,monospace;
 overflow-wrap:anywhere}
pre{margin:6px 0;max-height:480px;overflow:auto;font:12px/1.35 ui-monospace,monospace}
#tip{position:fixed;pointer-events:none;background:#1d1d1f;color:#fff;padding:4px 8px;
 border-radius:4px;font-size:12px;max-width:520px;display:none;z-index:9}
.flags li{color:#a05a00} section{scroll-margin-top:12px}
"""

# Tooltips for every element with data-tip, and a marker the browser test waits for.
_JS = """
(function(){
  var data = JSON.parse(document.getElementById('nvstage-data').textContent);
  var tip = document.getElementById('tip');
  document.querySelectorAll('[data-tip]').forEach(function(el){
    el.addEventListener('mousemove', function(ev){
      tip.textContent = el.getAttribute('data-tip');
      tip.style.display = 'block';
      tip.style.left = (ev.clientX + 12) + 'px';
      tip.style.top = (ev.clientY + 12) + 'px';
    });
    el.addEventListener('mouseleave', function(){ tip.style.display = 'none'; });
  });
  var charts = document.querySelectorAll('svg.chart').length;
  document.body.setAttribute('data-charts', String(charts));
  document.body.setAttribute('data-stages', String(data.stages));
  document.body.setAttribute('data-ready', '1');
})();
"""


def json_for_script(obj) -> str:
    # "<" as \\u003c: no "</script>" or "<!--" can appear inside the block.
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")


def render(inp: ReportInputs, *, title: str | None = None) -> str:
    """The whole page as one string. Pure: everything comes from ``inp``."""
    b = inp.build
    title = title or f"nvstage report: {os.path.basename(b.source)}"
    cached, n_runs = restored(b)
    took = (f"restored from the cache in {fmt_time(b.wall_seconds)}" if n_runs and
            cached == n_runs else f"in {fmt_time(b.wall_seconds)}"
            + (f" ({cached} restored from the cache)" if cached else ""))
    parts = [f"<h1>{esc(title)}</h1>",
             f'<p class="meta">{esc(b.source)} · {len(b.runs)} stages {esc(took)} · '
             f"via {esc(b.via)} · "
             f"toolkit {esc(getattr(b.toolkit, 'release', '') or '')} · "
             f"nvstage {esc(__version__)}</p>"]
    if b.status != "ok":
        parts.append(f'<p class="note">build status: {esc(b.status)}: '
                     f'{esc((b.error or {}).get("message", ""))}</p>')
    parts.append(_summary(inp))
    parts.append(_nav(inp))
    parts.append('<section id="graph"><h2>Stage graph: source to GPU</h2>'
                 f'<div class="scroll">{stage_graph_svg(b, inp.run)}</div></section>')
    parts.append('<section id="times"><h2>Stage times</h2>'
                 f'<div class="scroll">{gantt_svg(b)}</div></section>')
    rows = [[r.demangled, r.arch, r.registers,
             "?" if r.spill_stores is None else r.spill_stores,
             "?" if r.spill_loads is None else r.spill_loads, r.stack_frame, r.shared_bytes,
             "-" if r.constant_bytes is None else r.constant_bytes,
             "final" if r.final else "per file", r.source] for r in inp.resources]
    parts.append('<section id="resources-section"><h2>Resources per kernel</h2>'
                 + (_table("resources", ["kernel", "arch", "registers", "spill stores (B)",
                                         "spill loads (B)", "stack (B)", "static shared (B)",
                                         "cmem[0] (B)", "numbers", "from"], rows,
                           {2, 3, 4, 5, 6, 7}, wrap={0, 9}, flag=_spills)
                    if rows else '<p class="note">no resource figures</p>') + "</section>")
    if inp.fatbin:
        # One kernel a line (signatures hold commas).
        frows = [[im.name, im.kind, im.arch, im.size, im.section, im.role,
                  "\n".join(inp.names.get(k, k) for k in im.kernels)] for im in inp.fatbin]
        parts.append('<section id="fatbin-section"><h2>Fatbin inventory</h2>'
                     + _table("fatbin", ["image", "kind", "arch", "bytes", "section", "role",
                                         "kernels"], frows, {3}, wrap={6})
                     + "</section>")
    if inp.sass or inp.ptx:
        parts.append('<section id="code"><h2>SASS and PTX</h2>'
                     '<p class="note">click a listing to open it</p>')
        for k in inp.sass:
            text = "\n".join(f"/*{i.offset:04x}*/ {i.text}"
                             + (f"    // {i.source}" if i.source else "")
                             + (f"  {i.source_text}" if i.source_text else "")
                             for i in k.code)
            if k.padding:
                text += (f"\n/*{k.instructions[len(k.code)].offset:04x}*/ NOP x{k.padding}"
                         "    // padding to the 128-byte boundary, never issued")
            parts.append(_code(f"SASS {k.demangled or k.name} ({k.arch}, "
                               f"{k.instruction_count} instructions)", text, "sass"))
        for name, text in inp.ptx:
            parts.append(_code(f"PTX {name}", text, "ptx"))
        parts.append("</section>")
    if inp.run is not None or inp.trace is not None:
        parts.append('<section id="run"><h2>GPU run</h2>')
        run = inp.run
        facts = [f"workload {run.workload}" if run and run.workload else None,
                 f"mode {run.mode}" if run and run.mode else None,
                 f"device {run.device}" if run and run.device else None,
                 f"status {run.status}" if run and run.status else None]
        facts = [f for f in facts if f]
        if facts:
            parts.append(f'<p class="meta">{esc(" · ".join(facts))}</p>')
        dsvg = decomposition_svg(run) if inp.run else None
        if dsvg:
            parts.append(f'<h3>Decomposition</h3><div class="scroll">{dsvg}</div>')
            dec = run.decomposition
            ops = dec.operations or ()
            if ops:
                orows = [[o.index, o.kind, o.name, _us(o.host_ns), _us(o.gpu_ns),
                          o.nbytes or "", "; ".join(o.flags)]
                         for o in ops]
                parts.append(_table("operations", ["op", "kind", "name", "host us (median)",
                                                   "GPU us (median)", "bytes", "flags"],
                                    orows, {0, 3, 4, 5}, wrap={2, 6}))
            flags = dec.flags
            if flags:
                parts.append('<ul class="flags">' + "".join(f"<li>{esc(f)}</li>"
                                                            for f in flags) + "</ul>")
        elif inp.run is not None:
            parts.append('<p class="note">the run document has no decomposition (run with '
                         '--profile)</p>')
        tsvg = trace_svg(inp.run, inp.trace)
        if tsvg:
            parts.append(f'<h3>Trace</h3><div class="scroll">{tsvg}</div>')
        parts.append("</section>")
    if inp.notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>'
                     + "".join(f"<li>{esc(n)}</li>" for n in inp.notes) + "</ul></section>")
    data = {"schema": "nvstage.report/1", "source": b.source, "stages": len(b.runs),
            "kernels": sorted({r.demangled for r in inp.resources}),
            "run": inp.run is not None}
    return page(title, _CSS, "\n".join(parts) + '<div id="tip"></div>', data, _JS)


def page(title: str, css: str, body: str, data: dict, js: str) -> str:
    """A self-contained page: ``body``, then ``data`` as a JSON block the script reads."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            # No network: the policy forbids every fetch; inline style and script only.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{css}</style></head><body>"
            + body
            + f'<script type="application/json" id="nvstage-data">{json_for_script(data)}'
            + f"</script><script>{js}</script></body></html>\n")


def _spills(row) -> bool:
    return any(isinstance(v, int) and v > 0 for v in (row[3], row[4]))


def _summary(inp: ReportInputs) -> str:
    """The figures an engineer looks for first, as cards; spills stand out."""
    b = inp.build
    what, why = wall_words(b)
    cards = [("stages", str(len(b.runs)), False),
             (f"{what} ({why})" if why else what, fmt_time(b.wall_seconds), False)]
    if inp.resources:
        kernels = {r.demangled for r in inp.resources}
        top = max(inp.resources, key=lambda r: r.registers)
        spilling = {r.demangled for r in inp.resources if r.spills}
        cards += [("kernels", str(len(kernels)), False),
                  ("arches", ", ".join(sorted({r.arch for r in inp.resources})), False),
                  (f"max registers ({clip(display_name(top.demangled), 60)})",
                   str(top.registers), False),
                  ("kernels that spill", str(len(spilling)), bool(spilling))]
    sizes = [a.size for a in b.artifacts if a.kind == "fatbin"]
    if sizes:
        cards.append(("fatbin", fmt_bytes(max(sizes)), False))
    if inp.run:
        dec = inp.run.decomposition
        if dec is not None:
            total = dec.medians_ns.get("total")
            if total is None:
                total = sum(dec.medians_ns.get(t) or 0.0
                            for t in ("launch", "kernel", "transfer")) or None
            wall = dec.medians_ns.get("wall")
            if total is not None:
                cards.append(("T sequential (median)", fmt_time(total * 1e-9, "us", digits=2),
                              False))
            if wall is not None:
                cards.append(("wall (median)", fmt_time(wall * 1e-9, "us", digits=2), False))
    return '<div class="cards" id="summary">' + "".join(
        f'<div class="card{" bad" if bad else ""}"><div class="v">{esc(v)}</div>'
        f'<div class="k">{esc(k)}</div></div>' for k, v, bad in cards) + "</div>"


def _nav(inp: ReportInputs) -> str:
    links = [("graph", "stage graph"), ("times", "stage times"),
             ("resources-section", "resources")]
    if inp.fatbin:
        links.append(("fatbin-section", "fatbin"))
    if inp.sass or inp.ptx:
        links.append(("code", "SASS and PTX"))
    if inp.run is not None or inp.trace is not None:
        links.append(("run", "GPU run"))
    if inp.notes:
        links.append(("notes", "notes"))
    return "<nav>" + "".join(f'<a href="#{i}">{esc(t)}</a>' for i, t in links) + "</nav>"


def _us(ns: float | None) -> str:
    return "" if ns is None else fmt_time(ns * 1e-9, "us", digits=3, suffix=False)


def _us_text(us: float) -> str:
    return fmt_time(us * 1e-6, "us", digits=3)


@dataclass
class HtmlReport:
    """A page written: where, and what it was made of."""

    path: str
    inputs: ReportInputs

    def __fspath__(self) -> str:
        return self.path

    def to_json(self) -> dict:
        inp = self.inputs
        return {"output": self.path, "notes": inp.notes,
                "sections": {"resources": len(inp.resources), "sass": len(inp.sass),
                             "ptx": len(inp.ptx), "fatbin": len(inp.fatbin),
                             "run": inp.run is not None}}


def write_report(build, output=None, *, toolkit=None, run=None, trace=None,
                 title: str | None = None, nvcc: str | None = None) -> HtmlReport:
    """Gather, render and write the page atomically. ``build``: a ``Build``, keep folder or
    stages.json; ``output``: default report.html in the keep folder (a link planted there is
    replaced, never written through); ``run`` and ``trace``: a run document and a Chrome
    trace, as paths or loaded. Read with ``toolkit``, else ``nvcc``'s, else the pip wheels':
    never the toolkit the manifest names (a document does not choose programs)."""
    from nvstage.artifacts import is_folder, write_atomic
    from nvstage.compiler.record import Build, load_build, manifest_path
    from nvstage.compiler.toolkit import find_toolkit
    from nvstage.documents import load_run_doc, load_trace_doc
    from nvstage.errors import UsageError, WriteError

    b = build if isinstance(build, Build) else load_build(build)
    if output is None and isinstance(build, Build) and not b.keep_dir:
        raise UsageError("the build kept no folder to write report.html into: give output")
    out = output or (Path(b.keep_dir) if isinstance(build, Build) else
                     manifest_path(build).parent) / "report.html"
    if is_folder(out):
        raise UsageError(f"-o {out} is a folder", hint=f"give a file: -o {out}/report.html")
    toolkit = toolkit or find_toolkit(nvcc)
    run_doc = load_run_doc(run, "run document") if run is not None else None
    trace_doc = load_trace_doc(trace) if trace is not None and not isinstance(trace, dict) \
        else trace
    inp = gather(b, toolkit=toolkit, run=run_doc, trace=trace_doc)
    try:
        write_atomic(out, render(inp, title=title), in_document_folder=output is None)
    except WriteError as e:  # its message names the file and what is wrong with it
        raise UsageError(e.message.replace("cannot write ", "cannot write the report to ", 1),
                         hint=e.hint) from None
    return HtmlReport(os.fspath(out), inp)
