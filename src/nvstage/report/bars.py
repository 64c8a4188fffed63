"""The decomposition as stacked bars, one per workload, as a standalone SVG (pure, no deps).

Each bar stacks sum launch (host), sum kernel (GPU) and sum transfer (GPU): T. Every bar says
whether it is an estimate or a measurement, and a tick marks the figure T is compared with
(the measured wall time, or the pipelined estimate). When one term dwarfs the others (large
copies next to microsecond kernels), a second panel repeats the bars without it, on its own
scale, so the smaller terms can be read.

``bars_svg`` is the one writer of decomposition bars: a standalone file (``--svg``) or, with
``chart_id``, a chart inside the HTML report. ``bar_from_estimate``, ``bar_from_decomposition``
and ``bar_from_medians`` turn a model ``Estimate``, a measured ``decompose.Decomposition`` or a
run document's medians into a ``Bar``; ``write_svg`` and the ``*_svg`` helpers write the files
the commands draw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from nvstage.report.units import fmt_time

TERMS = ("launch", "kernel", "transfer")
TERM_LABELS = {"launch": "sum launch (host)", "kernel": "sum kernel (GPU)",
               "transfer": "sum transfer (GPU)"}
COLORS = {"launch": "#4e79a7", "kernel": "#f28e2b", "transfer": "#59a14f"}
KINDS = ("estimate", "measured")


@dataclass(frozen=True)
class Bar:
    label: str  # the workload
    terms: Mapping[str, float]  # seconds per term
    kind: str = "estimate"  # "estimate" | "measured"
    marker: float | None = None  # seconds: wall time (measured) or pipelined (estimate)
    marker_label: str = ""
    spread: Mapping[str, float] = field(default_factory=dict)  # optional: IQR of T, seconds

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"bar kind must be one of {KINDS}, not {self.kind!r}")
        for k, v in self.terms.items():
            if k not in TERMS:
                raise ValueError(f"unknown term {k!r}; terms are {TERMS}")
            if v < 0:
                raise ValueError(f"term {k} is negative ({v})")

    @property
    def total(self) -> float:
        return sum(self.terms.get(t, 0.0) for t in TERMS)


def bar_from_estimate(e, label: str | None = None) -> Bar:
    """A model ``Estimate``: its three terms, with the pipelined estimate as the tick."""
    return Bar(label or e.workload, e.terms(), "estimate", e.pipelined_s, "pipelined")


def bar_from_decomposition(d, label: str) -> Bar:
    """A measured ``Decomposition`` (medians over repetitions, ns), with the wall time."""
    medians = {t: getattr(d, t).median for t in (*TERMS, "wall") if getattr(d, t)}
    return bar_from_medians(label, medians, total_iqr_ns=d.total.iqr if d.total else None)


def bar_from_medians(label: str, medians_ns: Mapping[str, float], *,
                     total_iqr_ns: float | None = None) -> Bar:
    """Measured medians in ns by term (``launch``, ``kernel``, ``transfer``, ``wall``), as a
    run document has them (``run.document.DecompositionFigures``), with the wall time."""
    wall = medians_ns.get("wall")
    return Bar(label, {t: (medians_ns.get(t) or 0.0) * 1e-9 for t in TERMS}, "measured",
               wall * 1e-9 if wall is not None else None, "wall",
               {"T_iqr": total_iqr_ns * 1e-9} if total_iqr_ns is not None else {})


def _time(s: float) -> str:
    return fmt_time(s, significant=3)


_QUOTE = {'"': "&quot;"}


def write_svg(path, bars: Sequence[Bar], *, title: str, subtitle: str = "") -> None:
    """Stacked bars to an SVG file, atomically; figures that cannot be drawn are one
    ``UsageError``, no traceback."""
    from nvstage.files import write_atomic
    from nvstage.errors import UsageError

    try:
        svg = bars_svg(bars, title=title, subtitle=subtitle)
    except ValueError as e:
        raise UsageError(f"cannot draw {path}: {e}") from None
    write_atomic(path, svg)


def estimate_svg(path, e) -> None:
    """``nvstage model --svg``: one estimate."""
    write_svg(path, [bar_from_estimate(e)], title=f"{e.workload} on {e.gpu.name}",
              subtitle="every figure an estimate" + (" (calibrated)" if e.calibration else ""))


def comparison_svg(path, cmp) -> None:
    """``nvstage compare --svg``: both estimates, and both measurements when there are."""
    bars = [bar_from_estimate(cmp.a), bar_from_estimate(cmp.b)]
    if cmp.measured:
        bars += [bar_from_decomposition(cmp.measured["a"], cmp.a.workload),
                 bar_from_decomposition(cmp.measured["b"], cmp.b.workload)]
    write_svg(path, bars, title=f"{cmp.a.workload} vs {cmp.b.workload} on {cmp.a.gpu.name}",
              subtitle=cmp.verdict.short(cmp.a.workload, cmp.b.workload))


def run_svg(path, result, name: str) -> None:
    """``nvstage run --svg``: the measured decomposition (medians over repetitions)."""
    device = (result.device or {}).get("name") or "GPU"
    write_svg(path, [bar_from_decomposition(result.decomposition, name)],
              title=f"{name} on {device}",
              subtitle=f"measured, {result.mode}, median of {len(result.decomposition.reps)} "
                       f"repetitions")


def _nice_max(x: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``x``."""
    import math

    if x <= 0:
        return 1e-6
    p = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * p >= x * 0.999999:
            return m * p
    return 10 * p


# Layout, in px.
_W = 820
_LEFT = 190
_RIGHT = 110
_BAR_H = 26
_ROW_H = 58
_PANEL_GAP = 36
_AXIS_H = 26


def bars_svg(bars: Sequence[Bar], *, title: str, subtitle: str = "",
             detail_threshold: float = 0.8, chart_id: str | None = None) -> str:
    """A standalone SVG of stacked bars. ``detail_threshold``: when one term is more than this
    share of the largest bar, a second panel leaves that term out. ``chart_id``: a chart for
    a page (``report.html``): that id, class "chart", scaled to the page, and each segment's
    figure in a ``data-tip`` for the page's tooltips."""
    if not bars:
        raise ValueError("no bars to draw")
    for b in bars:  # a NaN or infinite figure has no place on an axis (_nice_max overflowed)
        figures = [*b.terms.values(), *b.spread.values()] + \
            ([b.marker] if b.marker is not None else [])
        if not all(math.isfinite(v) for v in figures):
            raise ValueError(f"bar {b.label!r} has a figure that is not finite")
    kinds = sorted({b.kind for b in bars})
    heading = f"{title} ({' and '.join(kinds)})"
    panels = [(None, bars)]
    biggest = max(bars, key=lambda b: b.total)
    if biggest.total > 0:
        dominant = max(TERMS, key=lambda t: biggest.terms.get(t, 0.0))
        share = biggest.terms.get(dominant, 0.0) / biggest.total
        rest = [t for t in TERMS if t != dominant]
        if share > detail_threshold and any(b.terms.get(t, 0) > 0 for b in bars for t in rest):
            panels.append((dominant, bars))
    top = 70 if subtitle else 52
    legend_h = 30
    height = top + legend_h + sum(14 + len(bs) * _ROW_H + _AXIS_H + _PANEL_GAP
                                  for _, bs in panels) - _PANEL_GAP + 12
    page = (f'id="{escape(chart_id)}" class="chart" role="img" style="width:100%;'
            f'max-width:{_W}px;min-width:{int(_W * 0.8)}px;height:auto" ' if chart_id else "")
    out = [f'<svg {page}xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" '
           f'viewBox="0 0 {_W} {height}" font-family="DejaVu Sans, Arial, sans-serif" '
           f'font-size="12">',
           f"<title>{escape(heading)}</title>",
           f'<rect x="0" y="0" width="{_W}" height="{height}" fill="#ffffff"/>',
           f'<text x="{_W / 2}" y="24" text-anchor="middle" font-size="16" '
           f'font-weight="bold">{escape(heading)}</text>']
    if subtitle:
        out.append(f'<text x="{_W / 2}" y="44" text-anchor="middle" fill="#555">'
                   f"{escape(subtitle)}</text>")
    # Legend.
    x = 30
    y = top
    for t in TERMS:
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLORS[t]}"/>')
        out.append(f'<text x="{x + 17}" y="{y}">{escape(TERM_LABELS[t])}</text>')
        x += 150
    out.append(f'<line x1="{x + 4}" y1="{y - 11}" x2="{x + 4}" y2="{y + 3}" stroke="#000" '
               f'stroke-width="2"/>')
    out.append(f'<text x="{x + 10}" y="{y}">wall (measured) / pipelined (estimate)</text>')
    y += legend_h
    for left_out, bs in panels:
        y = _panel(out, bs, y, left_out, tips=chart_id is not None)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _panel(out: list[str], bars: Sequence[Bar], y: float, left_out: str | None, *,
           tips: bool = False) -> float:
    terms = [t for t in TERMS if t != left_out]
    caption = ("T = launch + kernel + transfer" if left_out is None
               else f"without {left_out}, on its own scale: " + " + ".join(terms))
    out.append(f'<text x="{_LEFT}" y="{y}" font-weight="bold">{escape(caption)}</text>')
    y += 10
    totals = [sum(b.terms.get(t, 0.0) for t in terms) for b in bars]
    markers = [b.marker for b in bars if b.marker is not None and left_out is None]
    scale_max = _nice_max(max(totals + markers + [0.0]))
    plot_w = _W - _LEFT - _RIGHT
    px = plot_w / scale_max
    # Axis with five ticks.
    axis_y = y + len(bars) * _ROW_H + 4
    out.append(f'<line x1="{_LEFT}" y1="{axis_y}" x2="{_LEFT + plot_w}" y2="{axis_y}" '
               f'stroke="#888"/>')
    for i in range(6):
        v = scale_max * i / 5
        tx = _LEFT + v * px
        out.append(f'<line x1="{tx:.1f}" y1="{y}" x2="{tx:.1f}" y2="{axis_y + 4}" '
                   f'stroke="#e4e4e4"/>')
        out.append(f'<text x="{tx:.1f}" y="{axis_y + 17}" text-anchor="middle" fill="#555">'
                   f"{escape(_time(v))}</text>")
    for b, total in zip(bars, totals):
        by = y + 8
        out.append(f'<text x="{_LEFT - 8}" y="{by + 12}" text-anchor="end" '
                   f'font-weight="bold">{escape(b.label)}</text>')
        out.append(f'<text x="{_LEFT - 8}" y="{by + 26}" text-anchor="end" fill="#555">'
                   f"{escape(b.kind)}</text>")
        x = _LEFT
        for t in terms:
            v = b.terms.get(t, 0.0)
            w = v * px
            if w <= 0:
                continue
            tip = f"{b.label} {TERM_LABELS[t]}: {_time(v)} ({b.kind})"
            data = f' data-tip="{escape(tip, _QUOTE)}"' if tips else ""
            out.append(f'<rect class="decomp-seg decomp-{t}" x="{x:.2f}" y="{by}" '
                       f'width="{max(w, 0.5):.2f}" height="{_BAR_H}" fill="{COLORS[t]}"{data}>'
                       f"<title>{escape(tip)}</title></rect>")
            x += w
        if b.marker is not None and left_out is None:
            mx = _LEFT + b.marker * px
            out.append(f'<line x1="{mx:.2f}" y1="{by - 4}" x2="{mx:.2f}" y2="{by + _BAR_H + 4}" '
                       f'stroke="#000" stroke-width="2"><title>{escape(b.marker_label)}: '
                       f"{escape(_time(b.marker))}</title></line>")
        total_label = ("T " if left_out is None else "") + _time(total)
        out.append(f'<text x="{_LEFT + total * px + 6:.2f}" y="{by + 17}">'
                   f"{escape(total_label)}</text>")
        parts = " · ".join(f"{t} {_time(b.terms.get(t, 0.0))}" for t in terms)
        if b.marker is not None and left_out is None:
            parts += f" · {b.marker_label} {_time(b.marker)}"
        if b.spread.get("T_iqr") is not None and left_out is None:
            parts += f" · T IQR {_time(b.spread['T_iqr'])}"
        out.append(f'<text x="{_LEFT}" y="{by + _BAR_H + 15}" fill="#444" font-size="11">'
                   f"{escape(parts)}</text>")
        y += _ROW_H
    return axis_y + _AXIS_H + _PANEL_GAP
