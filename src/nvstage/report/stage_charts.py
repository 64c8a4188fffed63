"""The charts of one build's stages: the stage graph (source -> each stage with the artifacts
it wrote -> GPU execution, laid out by dependency) and the stage time chart, as inline SVG."""

from __future__ import annotations

import os

from nvstage.report.page import MONO_PX, TEXT_PX, esc, svg_open
from nvstage.report.units import fmt_bytes, fmt_time

STAGE_COLORS = {
    "host-preprocess": "#9c755f", "cudafe++": "#b07aa1", "device-preprocess": "#76b7b2",
    "cicc": "#4e79a7", "ptxas": "#f28e2b", "fatbinary": "#e15759", "host-compile": "#9c755f",
    "device-link": "#edc948", "dlink-fatbinary": "#e15759", "dlink-compile": "#9c755f",
    "link": "#59a14f", "nvrtc": "#4e79a7", "nvjitlink": "#f28e2b",
}



def _graph_layout(build) -> tuple[dict[int, int], dict[int, set[int]]]:
    """Layer of each stage (longest chain of dependencies before it) and its dependencies."""
    present = {r.stage.index for r in build.runs}
    deps: dict[int, set[int]] = {i: set() for i in present}
    try:
        from nvstage.compiler.nvcc.graph import build_graph

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



# The stage graph's boxes. Text is sized from these widths (``page.MONO_PX``, ``TEXT_PX``):
# names that do not fit wrap, never cut.
BOX_W, GAP, PAD, LINE_H = 200, 26, 12, 14
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
    when = f"cached: {fmt_time(r.seconds)} to restore" if r.cached else \
        f"ran {r.where}" if getattr(r, "where", None) else ""  # a farm stage: where
    rows: list[tuple[str, str, str]] = []
    for a in r.artifacts:
        size = fmt_bytes(a.size)
        room = int((BOX_W - 14 - 12 - len(size) * MONO_PX) / MONO_PX)
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


def stage_graph_svg(build, run) -> str:
    """``run``: the run's ``RunReport`` (its device names the GPU box), or None."""
    layer, deps = _graph_layout(build)
    runs = {r.stage.index: r for r in build.runs}
    lines = {i: _box_lines(r) for i, r in runs.items()}
    heights = {i: 40 + LINE_H * (bool(lines[i][1]) + max(1, len(lines[i][2]))) for i in runs}
    # The source's and the GPU's names as box lines, wrapped where long (never cut).
    src = os.path.basename(build.source)
    src_lines = [] if len(src) * 7.5 <= BOX_W - 22 else \
        [(p, "", src) for p in _wrap_name(src, int((BOX_W - 22) / MONO_PX))]
    gpu_sub = (run.device or run.arch or "measured") if run else "not run (no --run given)"
    gpu_lines = [] if len(gpu_sub) * TEXT_PX <= BOX_W - 22 else \
        [(p, "", gpu_sub) for p in _wrap_name(gpu_sub, int((BOX_W - 22) / MONO_PX))]
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
    out = [svg_open("stage-graph", width, height, "stage graph"),
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
    label_w = int(min(420, max(160, 16 + TEXT_PX * 1.1 * max(map(len, labels), default=0))))
    chart_w, row_h, top = 620, 20, 24
    height = top + row_h * len(runs) + 24
    width = label_w + chart_w + 130  # room for "1.2 ms restored" after the last bar
    out = [svg_open("stage-gantt", width, height, "stage times")]
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
