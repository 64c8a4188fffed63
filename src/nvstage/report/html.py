"""One self-contained HTML page for a build (and a run): inline CSS, SVG and a little JS
(the shell, escaping and shared style are ``report.page``'s).

Sections: the stage graph and stage times (``report.stage_charts``), resources per kernel, the
fatbin inventory, each kernel's source and SASS side by side with its live registers
(``report.lines_html``), the PTX, and for a run the decomposition chart and the trace
(``report.run_charts``). ``gather`` reads what the page needs; ``render`` is pure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import __version__
from nvstage.files import read_regular, is_folder, write_atomic
from nvstage.errors import NvstageError, UsageError, WriteError
from nvstage.inspect.fatbin import inventory
from nvstage.inspect.kernels import display_name
from nvstage.inspect.names import demangle_all
from nvstage.inspect.resources import build_resources
from nvstage.report.lines_html import CSS as LINES_CSS, JS as LINES_JS, kernel_view
from nvstage.report.page import BASE_CSS, cards, clip, esc, page
from nvstage.report.run_charts import decomposition_svg, run_report, trace_svg
from nvstage.report.stage_charts import gantt_svg, restored, stage_graph_svg, wall_words
from nvstage.report.units import fmt_bytes, fmt_time, fmt_us, plural
from nvstage.run.document import RunReport
from nvstage.compiler.manifest.model import (
    reading_toolkit,
    toolkit_note,
    Build,
    load_build,
    manifest_path,
)
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.documents import load_run_doc, load_trace_doc

# Long listings are cut so the page stays quick to open; the kept file has the rest.
MAX_CODE_LINES = 3000


@dataclass
class ReportInputs:
    """What the page shows, gathered once (so rendering stays pure)."""

    build: object  # pipeline.Build
    resources: list = field(default_factory=list)  # KernelRecord
    fatbin: list = field(default_factory=list)  # FatbinImage
    names: dict[str, str] = field(default_factory=dict)  # the fatbin's kernels, demangled
    lines: list = field(default_factory=list)  # KernelLines: source, SASS, PTX, live registers
    ptx: list[tuple[str, str]] = field(default_factory=list)  # (file name, text)
    run: RunReport | None = None  # an nvstage.run/1 document, read
    trace: dict | None = None  # Chrome trace
    notes: list[str] = field(default_factory=list)  # what could not be read, and why


def gather(build, *, toolkit=None, run: RunReport | dict | None = None,
           trace: dict | None = None, sass: bool = True) -> ReportInputs:
    """Read what the page needs from a build's kept files. A reader that fails leaves a note
    and an empty section instead of failing the whole report. ``run``: a ``RunReport`` or
    the run document's dict."""
    toolkit = reading_toolkit(build, toolkit)
    inp = ReportInputs(build, run=run_report(run), trace=trace)
    note = toolkit_note(build, toolkit)
    if note:
        inp.notes.append(note)
    try:
        inp.resources = build_resources(build, toolkit)
    except (NvstageError, OSError) as e:
        inp.notes.append(f"resources: {getattr(e, 'message', e)}")
    for a in build.artifacts:
        if a.kind in ("fatbin", "object", "executable") and os.path.isfile(a.path):
            try:
                inp.fatbin = inventory(a.path, toolkit)
                # As the resources table shows them (c++filt runs here: render is pure).
                inp.names = demangle_all(k for im in inp.fatbin for k in im.kernels)
                break
            except (NvstageError, OSError) as e:
                inp.notes.append(f"fatbin inventory of {a.name}: {getattr(e, 'message', e)}")
    if sass:  # two nvdisasm listings per cubin, joined line by line (inspect.lineview)
        try:
            from nvstage.inspect.lineview import build_lines

            inp.lines = build_lines(build, toolkit)
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


# This page's own style, after the shared one (``page.BASE_CSS``).
_CSS = BASE_CSS + LINES_CSS + """
td.wrap{white-space:pre-line;min-width:160px;overflow-wrap:anywhere}
svg .box-title{font-weight:600} svg .box-sub{fill:var(--dim);font-size:11px}
svg .artifact{font:11px ui-monospace,monospace;fill:#333} svg .size{fill:var(--dim)}
svg .cached{fill:#2a7d2a} svg .value{font-size:11px;fill:var(--dim)}
.node-absent rect{stroke-dasharray:4 3} .node-failed rect{stroke:#d00}
details.code-view{background:#fff;border:1px solid var(--line);border-radius:8px;
 margin:6px 0;padding:4px 10px}
details.code-view summary{cursor:pointer;font-family:ui-monospace,monospace;
 overflow-wrap:anywhere}
pre{margin:6px 0;max-height:480px;overflow:auto;font:12px/1.35 ui-monospace,monospace}
#tip{position:fixed;pointer-events:none;background:#1d1d1f;color:#fff;padding:4px 8px;
 border-radius:4px;font-size:12px;max-width:520px;display:none;z-index:9}
.flags li{color:#a05a00}
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


def render(inp: ReportInputs, *, title: str | None = None) -> str:
    """The whole page as one string. Pure: everything comes from ``inp``."""
    b = inp.build
    title = title or f"nvstage report: {os.path.basename(b.source)}"
    cached, n_runs = restored(b)
    took = (f"restored from the cache in {fmt_time(b.wall_seconds)}" if n_runs and
            cached == n_runs else f"in {fmt_time(b.wall_seconds)}"
            + (f" ({cached} restored from the cache)" if cached else ""))
    parts = [f"<h1>{esc(title)}</h1>",
             f'<p class="meta">{esc(b.source)} · {plural(len(b.runs), "stage")} {esc(took)} · '
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
    if inp.lines:
        parts.append('<section id="code"><h2>Source and SASS</h2>'
                     '<p class="note">each kernel on each arch; open one to see its source '
                     "beside its SASS</p>")
        root = b.cwd or os.path.dirname(os.path.abspath(b.source))
        for n, k in enumerate(inp.lines):
            parts.append(kernel_view(k, f"kv-{n}", root=root, open_=n == 0))
        parts.append("</section>")
    if inp.ptx:
        parts.append('<section id="ptx"><h2>PTX</h2>'
                     '<p class="note">click a module to open it</p>')
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
    return page(title, _CSS, "\n".join(parts) + '<div id="tip"></div>', data,
                LINES_JS + _JS)


def _spills(row) -> bool:
    return any(isinstance(v, int) and v > 0 for v in (row[3], row[4]))


def _summary(inp: ReportInputs) -> str:
    """The figures an engineer looks for first, as cards; spills stand out."""
    b = inp.build
    what, why = wall_words(b)
    items = [("stages", str(len(b.runs)), False),
             (f"{what} ({why})" if why else what, fmt_time(b.wall_seconds), False)]
    if inp.resources:
        kernels = {r.demangled for r in inp.resources}
        top = max(inp.resources, key=lambda r: r.registers)
        spilling = {r.demangled for r in inp.resources if r.spills}
        items += [("kernels", str(len(kernels)), False),
                  ("arches", ", ".join(sorted({r.arch for r in inp.resources})), False),
                  (f"max registers ({clip(display_name(top.demangled), 60)})",
                   str(top.registers), False),
                  ("kernels that spill", str(len(spilling)), bool(spilling))]
    sizes = [a.size for a in b.artifacts if a.kind == "fatbin"]
    if sizes:
        items.append(("fatbin", fmt_bytes(max(sizes)), False))
    if inp.run:
        dec = inp.run.decomposition
        if dec is not None:
            total = dec.medians_ns.get("total")
            if total is None:
                total = sum(dec.medians_ns.get(t) or 0.0
                            for t in ("launch", "kernel", "transfer")) or None
            wall = dec.medians_ns.get("wall")
            if total is not None:
                items.append(("T sequential (median)", fmt_time(total * 1e-9, "us", digits=2),
                              False))
            if wall is not None:
                items.append(("wall (median)", fmt_time(wall * 1e-9, "us", digits=2), False))
    return cards(items)


def _nav(inp: ReportInputs) -> str:
    links = [("graph", "stage graph"), ("times", "stage times"),
             ("resources-section", "resources")]
    if inp.fatbin:
        links.append(("fatbin-section", "fatbin"))
    if inp.lines:
        links.append(("code", "source and SASS"))
    if inp.ptx:
        links.append(("ptx", "PTX"))
    if inp.run is not None or inp.trace is not None:
        links.append(("run", "GPU run"))
    if inp.notes:
        links.append(("notes", "notes"))
    return "<nav>" + "".join(f'<a href="#{i}">{esc(t)}</a>' for i, t in links) + "</nav>"


def _us(ns: float | None) -> str:
    return "" if ns is None else fmt_us(ns=ns, digits=3)


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
                "sections": {"resources": len(inp.resources), "sass": len(inp.lines),
                             "ptx": len(inp.ptx), "fatbin": len(inp.fatbin),
                             "run": inp.run is not None}}


def write_report(build, output=None, *, toolkit=None, run=None, trace=None,
                 title: str | None = None, nvcc: str | None = None,
                 code: bool = True) -> HtmlReport:
    """Gather, render and write the page atomically. ``build``: a ``Build``, keep folder or
    stages.json; ``output``: default report.html in the keep folder (a link planted there is
    replaced, never written through); ``run`` and ``trace``: a run document and a Chrome
    trace, as paths or loaded. Read with ``toolkit``, else ``nvcc``'s, else the pip wheels':
    never the toolkit the manifest names (a document does not choose programs). ``code``:
    each kernel's source beside its SASS (two nvdisasm runs per cubin)."""
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
    inp = gather(b, toolkit=toolkit, run=run_doc, trace=trace_doc, sass=code)
    try:
        write_atomic(out, render(inp, title=title), in_document_folder=output is None)
    except WriteError as e:  # its message names the file and what is wrong with it
        raise UsageError(e.message.replace("cannot write ", "cannot write the report to ", 1),
                         hint=e.hint) from None
    return HtmlReport(os.fspath(out), inp)
