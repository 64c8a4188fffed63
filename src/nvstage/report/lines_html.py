"""A kernel's source and its SASS side by side, in the manner of Compiler Explorer, for the HTML
reports: rendered from ``inspect.lineview.KernelLines`` (pure: records in, HTML out).

The source on the left, the SASS on the right (and the PTX on a tab beside it, where the build
kept it): the lines of one colour belong together, and hovering or clicking a line on either
side lights up its partners on the other (classes ``hl`` and ``sel``; a click also scrolls the
other pane to them). Each instruction has a bar for the general registers live there
(``nvdisasm --life-range-mode narrow``; the widest bar is the kernel's peak), each source line a
heat margin for its peak. Above the panes, what is live at the peak by the line that last wrote
it (``inspect.live``): hovering a line's chip lights that line and its code. nvdisasm's
labels (``.L_x_3``) head the instructions they name. The file's path is shown once, relative
to the build's folder. Long lines wrap; each pane scrolls inside itself, so the page never
scrolls sideways.

Code inlined from a library counts to the line of the user's that called it
(``inspect.attribution``): hovering ``cg::reduce(...)`` lights its shuffles; beneath such a
line, a closed ``<details>`` lists the frames the code came through (a toolkit header named as
its include, ``<cooperative_groups.h>``).

A kernel built without ``-lineinfo`` gets one line saying so, and its SASS with live registers.
"""

from __future__ import annotations

import os

from nvstage.inspect.ptx_lines import file_matcher
from nvstage.report import highlight
from nvstage.report.page import esc

# SASS instructions and PTX statements drawn per kernel; a note counts the rest.
MAX_VIEW_ROWS = 4000
_DOT = " \u00b7 "
COLOURS = 10  # the palette the linked lines cycle through (CSS .c0 to .c9)


def _rel(path: str | None, root: str, k=None) -> str:
    """``path`` relative to the build's folder where it lies inside it, a toolkit header as its
    include (``k``'s attribution), else as recorded."""
    if not path:
        return "?"
    a = getattr(k, "attribution", None)
    if a is not None and not a.is_user(path):
        return a.name(path)
    if root:
        try:
            if os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) == \
                    os.path.abspath(root):
                return os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        except ValueError:
            pass
    return path


def _brief(k, path: str | None) -> str:
    """A file in a tip: a toolkit header as its include, a user's file by its name."""
    name = _rel(path, "", k)
    return name if name.startswith("<") else os.path.basename(name)


def _heat(n: int | None, peak: int | None) -> str:
    """A warm colour for ``n`` live registers: pale yellow for few, red at the peak."""
    if not n or not peak:
        return "transparent"
    f = max(0.0, min(1.0, n / peak))
    return f"hsl({50 - 50 * f:.0f},90%,{88 - 30 * f:.0f}%)"


def _peak_words(k) -> str:
    several = len({ln.file for ln in k.lines}) > 1  # then each line by its file too
    peaks = [f"{os.path.basename(ln.file)}:{ln.line}" if several else str(ln.line)
             for ln in k.lines if ln.peak]
    if k.peak_gpr is None:
        return "live registers unknown"
    at = f" at line{'s' if len(peaks) > 1 else ''} {', '.join(peaks)}" if peaks else ""
    return f"peak {k.peak_gpr} live registers{at}"


def _mix_chips(k) -> str:
    m = k.mix
    chips = []
    for c, n in sorted(m.counts.items(), key=lambda kv: -kv[1]):
        b = m.memory_bytes.get(c)
        chips.append(f'<span class="chip">{esc(c)} {n}{f" ({b} B)" if b else ""}</span>')
    return "".join(chips)


def _line_tip(ln) -> str:
    if not ln.instructions:
        words = "no SASS"
    else:
        words = (f"{ln.instructions} SASS instruction{'s' if ln.instructions != 1 else ''}, "
                 f"peak {ln.peak_gpr} live registers")
        if ln.mix:
            words += ": " + ", ".join(f"{c} {n}" for c, n in ln.mix.items())
    if ln.ptx_instructions:
        words += f"; {ln.ptx_instructions} PTX"
    return words + ("; the kernel's peak" if ln.peak else "")


def _inlined(k, instructions) -> str:
    """Beneath a line with code inlined into it: each chain of frames it came through, with
    how many instructions, closed until opened."""
    from nvstage.report.terminal.lines import frames_words

    chains: dict[tuple, int] = {}
    for i in instructions:
        if i.inner:
            chains[i.inner] = chains.get(i.inner, 0) + 1
    if not chains:
        return ""
    n = sum(chains.values())
    called = ", ".join(dict.fromkeys(_rel(chain[0][0], "", k) for chain in chains))
    rows = "".join(f'<div class="fr"><span class="ct">{c}</span>'
                   f'<span class="cd">{esc(frames_words(k, chain))}</span></div>'
                   for chain, c in chains.items())
    return (f'<details class="inl"><summary>inlined from {esc(called)}: {n} '
            f'instruction{"s" if n != 1 else ""}</summary>{rows}</details>')


def _source_pane(k, keys: dict, colour: dict, root: str) -> str:
    by_file: dict[str, list] = {}  # grouped once: #line can name thousands of files
    for ln in k.lines:
        by_file.setdefault(ln.file, []).append(ln)
    by_line: dict = {}
    for i in k.instructions:
        if i.frame:
            by_line.setdefault(i.at, []).append(i)
    out = []
    for f, lines in by_file.items():
        readable = any(ln.text is not None for ln in lines)
        out.append(f'<div class="kv-file" title="{esc(f)}">{esc(_rel(f, root, k))}'
                   + ("" if readable else ' <span class="dim">(text not shown: only the '
                      "build's own source and the toolkit's headers are read)</span>")
                   + "</div>")
        if not readable or len(lines) > MAX_VIEW_ROWS:  # a header's lines, or too many to
            # draw: only those with code, the gaps marked
            lines = [ln for ln in lines if ln.instructions or ln.ptx_instructions]
        texts = highlight.cuda_lines([ln.text if ln.text is not None else "" for ln in lines])
        last = None
        for ln, code in zip(lines, texts):
            if last is not None and ln.line > last + 1:
                out.append('<div class="sl gap"><span class="hm"></span><span class="ln">'
                           '\u22ee</span><span class="cd"></span><span class="ct"></span></div>')
            last = ln.line
            key = keys.get((ln.file, ln.line))
            cls = "sl" + (f" c{colour[key]}" if key else " none") + (" peak" if ln.peak else "")
            attr = f' data-l="{key}"' if key else ""
            count = str(ln.instructions) if ln.instructions else ""
            out.append(f'<div class="{cls}"{attr} title="{esc(_line_tip(ln))}">'
                       f'<span class="hm" style="background:{_heat(ln.peak_gpr, k.peak_gpr)}">'
                       f'</span><span class="ln">{ln.line}</span><span class="cd">{code}</span>'
                       f'<span class="ct">{count}</span></div>')
            out.append(_inlined(k, by_line.get((ln.file, ln.line), ())))
    return "".join(out)


def _link(keys: dict, file, line, inlined_at, same_file, at=None) -> tuple[str | None, str]:
    """(its line's key, the ``data-l`` attribute) of an instruction: the line it counts to
    first (``at``, its colour; else the line it came from), then the lines of its other frames,
    so a call's line lights up the code inlined into it too (a header's atomicAdd under the
    line calling it)."""
    where = [(same_file(file), line)] + [(same_file(f), n) for f, n in inlined_at]
    if at is not None and at[1] is not None:
        where.insert(0, (same_file(at[0]), at[1]))
    found = [keys[w] for w in where if w[1] is not None and w in keys]
    own = keys.get(where[0]) if where[0][1] is not None else None
    if not found:
        return None, ""
    return own, f' data-l="{" ".join(dict.fromkeys(found))}"'


def _sass_pane(k, keys: dict, colour: dict) -> str:
    out = []
    peak = k.peak_gpr
    for i in k.instructions[:MAX_VIEW_ROWS]:
        if i.label:
            out.append(f'<div class="lb">{esc(i.label)}:</div>')
        key, attr = _link(keys, i.file, i.line, i.inlined_at, lambda f: f, i.at)
        cls = "ai" + (f" c{colour[key]}" if key else "")
        live = i.live
        tip = (f"{live.get('GPR', 0)} general, {live.get('PRED', 0)} predicate, "
               f"{live.get('UGPR', 0)} uniform registers live" if live else
               "live registers unknown (nvdisasm gave none)")
        if i.line is not None:
            tip += f"; {_brief(k, i.file)}:{i.line}"
        if i.inlined_at:
            tip += " inlined at " + ", ".join(f"{_brief(k, f)}:{n}" for f, n in i.inlined_at)
        width = 0 if not (i.gpr and peak) else max(4, round(100 * i.gpr / peak))
        out.append(f'<div class="{cls}"{attr} title="{esc(tip)}">'
                   f'<span class="off">{i.offset:04x}</span>'
                   f'<span class="lv"><i style="width:{width}%;background:'
                   f'{_heat(i.gpr, peak)}"></i></span>'
                   f'<span class="lc">{"" if i.gpr is None else i.gpr}</span>'
                   f'<span class="cd">{highlight.sass(i.text)}</span></div>')
    more = len(k.instructions) - MAX_VIEW_ROWS
    if more > 0:
        out.append(f'<p class="note">{more} more instructions not drawn: nvstage show '
                   f'--kernel {esc(k.name)} --lineinfo lists them all</p>')
    if k.padding_nops:
        out.append(f'<div class="lb dim">NOP \u00d7{k.padding_nops}: padding to the 128-byte '
                   "boundary, never issued</div>")
    return "".join(out)


def _ptx_pane(k, keys: dict, colour: dict) -> str:
    match = file_matcher({f for f, _ in keys})
    out = []
    for p in k.ptx.instructions[:MAX_VIEW_ROWS]:
        if p.label:
            out.append(f'<div class="lb">{esc(p.label)}:</div>')
        at = None  # the line it counts to, by the rule the SASS follows (its colour)
        if k.attribution is not None and p.line is not None:
            chain = [(match(p.file), p.line)] + [(match(f), n) for f, n in p.inlined_at]
            at = chain[k.attribution.frame(chain)]
        key, attr = _link(keys, p.file, p.line, p.inlined_at, match, at)
        cls = "pi" + (f" c{colour[key]}" if key else "")
        tip = f"PTX line {p.number}" + (f"; {os.path.basename(p.file or '?')}:{p.line}"
                                         if p.line is not None else "")
        if p.function:
            tip += f" (inlined {p.function})"
        out.append(f'<div class="{cls}"{attr} title="{esc(tip)}"><span class="off">'
                   f'{p.number}</span><span class="cd">{highlight.ptx(p.text)}</span></div>')
    more = len(k.ptx.instructions) - MAX_VIEW_ROWS
    if more > 0:
        out.append(f'<p class="note">{more} more PTX statements not drawn</p>')
    return "".join(out)


def kernel_view(k, view_id: str, *, root: str = "", open_: bool = False,
                where: str = "") -> str:
    """One kernel's view as a ``<details>`` block (``id=view_id``, opened by a link to it).
    ``root``: the build's folder, paths are shown relative to it; ``where``: what built it
    (a translation unit), said in the summary."""
    name = k.demangled or k.name
    facts = [k.arch, k.image, f"{len(k.instructions)} instructions", _peak_words(k)]
    if where:
        facts.insert(0, where)
    # One key per source line that has code: "file index:line", the link between the panes.
    file_index = {f: n for n, f in enumerate(dict.fromkeys(ln.file for ln in k.lines))}
    keys: dict = {}
    colour: dict = {}
    for ln in k.lines:
        if ln.instructions or ln.ptx_instructions:
            key = f"{file_index[ln.file]}:{ln.line}"
            keys[(ln.file, ln.line)] = key
            colour[key] = len(colour) % COLOURS
    head = []
    files = list(file_index)
    if files:
        head.append("source: " + ", ".join(f"<code>{esc(_rel(f, root, k))}</code>"
                                           for f in files))
    if k.instructions:
        head.append(f'<span class="kv-mix">mix: {_mix_chips(k)}</span>')
    for at in (k.live_at_peak, *k.asked):
        if at is not None:
            head.append(_live_at(k, at, keys, colour, peak=at is k.live_at_peak))
    legend = ("bars: general registers live at each instruction (nvdisasm --life-range-mode "
              "narrow), the widest at the kernel's peak; margin: each line's peak. Hover or "
              "click a line on either side to see its partners.")
    asm_tabs = '<button type="button" class="kv-tab on" data-pane="sass">SASS</button>'
    ptx = ""
    if k.ptx is not None and k.has_lineinfo:
        asm_tabs += (f'<button type="button" class="kv-tab" data-pane="ptx">PTX '
                     f'<span class="dim">{esc(k.ptx.module)}</span></button>')
        ptx = (f'<div class="kv-code kv-ptx" data-pane="ptx" hidden>'
               f'{_ptx_pane(k, keys, colour)}</div>')
    if k.has_lineinfo:
        source = (f'<div class="kv-pane kv-src"><div class="kv-bar">source</div>'
                  f'<div class="kv-code">{_source_pane(k, keys, colour, root)}</div></div>')
        panes = "kv-panes"
    else:
        source = ""
        panes = "kv-panes one"
        head.insert(0, '<span class="kv-none">no line info in this cubin: build with '
                       "-lineinfo (or -G) to join its SASS to the source</span>")
    return (f'<details class="kview" id="{esc(view_id)}"{" open" if open_ else ""}>'
            f'<summary><span class="kv-name">{esc(name)}</span> '
            f'<span class="kv-facts">{esc(_DOT.join(facts))}</span></summary>'
            f'<div class="kv-head">{"<br>".join(head)}<br><span class="dim">{legend}</span>'
            f'</div><div class="{panes}">{source}'
            f'<div class="kv-pane kv-asm"><div class="kv-bar">{asm_tabs}</div>'
            f'<div class="kv-code kv-sass" data-pane="sass">{_sass_pane(k, keys, colour)}'
            f'</div>{ptx}</div></div></details>')


def _live_at(k, at, keys: dict, colour: dict, *, peak: bool) -> str:
    """What is live at one instruction, by the line that last wrote it: a chip per line in
    its colour (hovering one lights the line and its code), and at the peak the way from the
    live count to ptxas's (``inspect.live``)."""
    from nvstage.report.terminal.lines import (MAX_WRITTEN, NO_WRITE, gap_words, line_words,
                                               lines_words)

    where = line_words(k, *at.at) if at.at[1] is not None else "no source line"
    chips = []
    shown = at.written[:MAX_WRITTEN] if k.has_lineinfo else ()
    for w in shown:
        key = keys.get((w.file, w.line))
        tip = (w.text or "") + (f" (also written at {lines_words(k, w.also)})" if w.also
                                else "")
        words = line_words(k, w.file, w.line, w.via) if w.line is not None else NO_WRITE
        chips.append(f'<span class="chip lw{f" c{colour[key]}" if key else ""}"'
                     f'{f" data-l={chr(34)}{key}{chr(34)}" if key else ""} '
                     f'title="{esc(tip)}">{len(w.registers)} \u00d7 {esc(words)}</span>')
    rest = at.written[len(shown):]
    if rest and k.has_lineinfo:
        chips.append(f'<span class="chip">{sum(len(w.registers) for w in rest)} at '
                     f'{len(rest)} more lines</span>')
    gap = (f'<br><span class="dim">registers: {esc(gap_words(at.gap))}</span>'
           if peak and at.gap is not None else "")
    return (f'<span class="kv-live">{"at the peak" if peak else "at"} '
            f'<code>{at.offset:04x} {esc(at.text)}</code> ({esc(where)}): {at.live} live '
            f'registers, by the line that last wrote them: {"".join(chips)}{gap}</span>')


def missing_view(view_id: str, title: str, why: str) -> str:
    """The place of a kernel whose code could not be read: one line saying why."""
    return (f'<details class="kview" id="{esc(view_id)}"><summary><span class="kv-name">'
            f'{esc(title)}</span></summary><p class="kv-head kv-none">{esc(why)}</p>'
            "</details>")


_PALETTE = ("#fde2e4", "#dcefe9", "#fff1c1", "#dbe7ff", "#f0e1ff", "#d8f3dc", "#ffe5d0",
            "#dff3ff", "#f8d7f0", "#ecefcf")

CSS = highlight.CSS + """
.kview{background:#fff;border:1px solid var(--line);border-radius:8px;margin:8px 0}
.kview>summary{cursor:pointer;padding:8px 12px;overflow-wrap:anywhere}
.kv-name{font:600 13px ui-monospace,monospace} .kv-facts{color:var(--dim);font-size:12px}
.kv-head{padding:0 12px 8px;font-size:12px;overflow-wrap:anywhere;margin:0}
.kv-head code{font:12px ui-monospace,monospace;background:#f0f0f3;padding:0 4px;
 border-radius:3px}
.kv-none{color:#a05a00}
.chip{display:inline-block;background:#f0f0f3;border-radius:9px;padding:0 7px;margin:1px 2px;
 font:11px ui-monospace,monospace}
.chip.lw{cursor:pointer;border:1px solid var(--line)}
.kv-panes{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.15fr);gap:8px;
 padding:0 8px 8px}
.kv-panes.one{grid-template-columns:minmax(0,1fr)}
@media (max-width:820px){.kv-panes{grid-template-columns:minmax(0,1fr)}}
.kv-pane{min-width:0;border:1px solid var(--line);border-radius:6px;overflow:hidden}
.kv-bar{display:flex;gap:4px;align-items:center;background:#f0f0f3;padding:3px 8px;
 font-size:12px;color:var(--dim);border-bottom:1px solid var(--line)}
.kv-tab{font:inherit;border:1px solid transparent;background:none;border-radius:4px;
 padding:1px 8px;cursor:pointer;color:var(--dim)}
.kv-tab.on{background:#fff;border-color:var(--line);color:var(--fg);font-weight:600}
.kv-code{position:relative;max-height:72vh;overflow-y:auto;overflow-x:hidden;
 font:12px/1.5 ui-monospace,SFMono-Regular,Menlo,monospace}
.kv-code[hidden]{display:none}
.kv-file{position:sticky;top:0;z-index:1;background:#fafafa;border-bottom:1px solid var(--line);
 padding:2px 8px;font-weight:600;overflow-wrap:anywhere}
.sl{display:grid;grid-template-columns:6px 3.4em minmax(0,1fr) 2.6em;cursor:pointer}
.sl.none,.sl.gap{cursor:default;color:#555}
.ai{display:grid;grid-template-columns:3.6em 52px 2.2em minmax(0,1fr);cursor:pointer}
.pi{display:grid;grid-template-columns:3.6em minmax(0,1fr);cursor:pointer}
.ai:not([data-l]),.pi:not([data-l]){cursor:default}
.cd{white-space:pre-wrap;overflow-wrap:anywhere;min-width:0;padding:0 6px 0 calc(6px + 2ch);
 text-indent:-2ch}
.ln,.off,.lc,.ct{color:#8a8f98;text-align:right;padding-right:6px;user-select:none}
.sl .ln{border-right:1px solid var(--line)} .sl.peak .ln{color:var(--bad);font-weight:700}
.ct{color:#6e6e73;font-size:11px}
.lv{align-self:center;height:9px;background:#f0f0f3;border-radius:2px;overflow:hidden}
.lv i{display:block;height:9px}
.lb{color:#a21caf;font-weight:600;padding-left:3.6em}
.inl{margin:0 0 2px 3.8em;font-size:11px;color:var(--dim)}
.inl>summary{cursor:pointer} .fr{display:grid;grid-template-columns:2.6em minmax(0,1fr)}
.fr .cd{overflow-wrap:break-word}
.hl{box-shadow:inset 0 0 0 1px #5b5b66;filter:saturate(2.2) brightness(.94)}
.sel{box-shadow:inset 3px 0 #1d4ed8,inset 0 0 0 1px #1d4ed8;filter:saturate(2.6) brightness(.9)}
""" + "".join(f".c{n}{{background:{c}}}" for n, c in enumerate(_PALETTE)) + "\n"

# Linking both ways: hover marks a line's rows on every pane (``hl``); a click pins them
# (``sel``) and scrolls the other panes to the first. An instruction's ``data-l`` lists its own
# line and the calls it was inlined through: a call's line marks the code inlined into it.
# Tabs switch SASS and PTX; a link to a view's id opens it.
JS = """
(function(){
  document.querySelectorAll('.kview').forEach(function(view){
    var rows = {}, lit = {hl: [], sel: []}, ids = {hl: null, sel: null};
    view.querySelectorAll('[data-l]').forEach(function(el){
      el.getAttribute('data-l').split(' ').forEach(function(k){
        (rows[k] = rows[k] || []).push(el); });
    });
    // A source line: every row naming it. An instruction: the rows of its own line, and
    // the source lines of the calls it was inlined through.
    function targets(el){
      var keys = el.getAttribute('data-l').split(' ');
      var out = (rows[keys[0]] || []).slice();
      if (!el.classList.contains('sl')) keys.slice(1).forEach(function(k){
        (rows[k] || []).forEach(function(r){ if (r.classList.contains('sl')) out.push(r); });
      });
      return out;
    }
    function light(cls, el){
      var id = el ? (el.classList.contains('sl') ? 's ' : 'i ') + el.getAttribute('data-l')
                  : null;
      if (cls === 'sel' && id === ids.sel) id = el = null;  // a second click lets go
      if (id === ids[cls]) return null;
      lit[cls].forEach(function(r){ r.classList.remove(cls); });
      ids[cls] = id; lit[cls] = el ? targets(el) : [];
      lit[cls].forEach(function(r){ r.classList.add(cls); });
      return el;
    }
    view.addEventListener('mouseover', function(ev){
      light('hl', ev.target.closest('[data-l]'));
    });
    view.addEventListener('mouseleave', function(){ light('hl', null); });
    view.addEventListener('click', function(ev){
      var tab = ev.target.closest('.kv-tab');
      if (tab){
        var pane = tab.closest('.kv-asm');
        pane.querySelectorAll('.kv-tab').forEach(function(t){
          t.classList.toggle('on', t === tab); });
        pane.querySelectorAll('.kv-code').forEach(function(c){
          c.hidden = c.getAttribute('data-pane') !== tab.getAttribute('data-pane'); });
        return;
      }
      var el = light('sel', ev.target.closest('[data-l]'));
      if (!el) return;
      view.querySelectorAll('.kv-code').forEach(function(code){
        if (code.contains(el) || code.hidden) return;
        var first = lit.sel.filter(function(r){ return code.contains(r); })[0];
        if (first) code.scrollTop = first.offsetTop - code.clientHeight / 3;
      });
    });
  });
  function openTarget(){
    // A malformed fragment (#%E0) makes decodeURIComponent throw: the rest of the page's
    // script would not run.
    var id; try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    var el = id && document.getElementById(id);
    if (el && el.tagName === 'DETAILS'){ el.open = true; el.scrollIntoView(); }
  }
  window.addEventListener('hashchange', openTarget); openTarget();
})();
"""
