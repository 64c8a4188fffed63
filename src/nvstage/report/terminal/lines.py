"""``nvstage show --kernel NAME --lineinfo``: each source line, its SASS under it, and the
registers live at every instruction, with a bar so the pressure is seen before it is read.

Code inlined into a line (``cg::reduce``'s shuffles under the line calling it) is listed under
a row naming the frames it came through, indented; a run of lines with no code is one row
(``inspect.lineview.FOLD``: a jump in the line numbers). Each file is named once, whole; a
toolkit header as its include (``<cooperative_groups.h>``)."""

from __future__ import annotations

import os

from rich.text import Text

_BAR = 24  # characters of the widest bar: the kernel's peak


def _bar(n: int | None, peak: int | None) -> str:
    if not n or not peak:
        return ""
    return "#" * max(1, round(_BAR * n / peak))


def _name(k, path: str | None) -> str:
    """A file as the view names it: a toolkit header as its include, else the path."""
    a = getattr(k, "attribution", None)
    return a.name(path) if a is not None else (path or "?")


def frames_words(k, frames) -> str:
    """``<cooperative_groups.h>:1409 > :1427 > <cooperative_groups/details/helpers.h>:97``:
    the file named again only where it changes."""
    words, last = [], None
    for f, n in frames:
        words.append(f":{n}" if f == last else f"{_name(k, f)}:{n}")
        last = f
    return " > ".join(words)


def render_lines(kernels, con, _listing=True) -> None:
    for k in kernels:
        files = list(dict.fromkeys(ln.file for ln in k.lines))
        # Several files (headers, #line): each peak line by its file too.
        peaks = [str(ln.line) if len(files) == 1 else
                 f"{os.path.basename(_name(k, ln.file)).strip('<>')}:{ln.line}"
                 for ln in k.lines if ln.peak]
        head = (f"\n{k.demangled or k.name} ({k.arch}, {k.image}): {len(k.instructions)} "
                f"instructions, peak {k.peak_gpr if k.peak_gpr is not None else '?'} live "
                "registers")
        if peaks:
            head += f" at line{'s' if len(peaks) > 1 else ''} {', '.join(peaks)}"
        con.print(Text(head, style="bold"), soft_wrap=True)
        peak = k.peak_gpr
        if k.instructions:
            con.print(f"mix: {mix_words(k.mix)}", markup=False, soft_wrap=True)
        if k.ptx is not None and k.ptx.has_lineinfo and k.has_lineinfo:
            con.print(f"ptx: {k.ptx.module} ({k.ptx.arch}), {len(k.ptx.instructions)} "
                      "instructions, counted per line from its .loc directives", markup=False,
                      soft_wrap=True)
        if files:  # each file whole, never a cut common prefix
            con.print("source: " + ", ".join(_name(k, f) for f in files), markup=False,
                      soft_wrap=True)
        mode = getattr(k.attribution, "mode", None)
        if mode == "user" and any(i.frame for i in k.instructions):
            con.print("inlined code counts to the line of yours that called it, its frames "
                      "listed beneath (--attribute innermost: where nvdisasm puts it)",
                      markup=False, style="dim", soft_wrap=True)
        con.print("live: general, predicate, uniform registers at each instruction "
                  "(nvdisasm --life-range-mode count)", markup=False, style="dim",
                  soft_wrap=True)
        if not k.has_lineinfo:
            con.print("no line info in this cubin (build with -lineinfo or -G): the SASS "
                      "alone, with its live registers", markup=False, soft_wrap=True)
            for i in k.instructions:
                _instruction(con, i, peak)
            continue
        by_line: dict[tuple[str, int], list] = {}
        for i in k.instructions:
            by_line.setdefault(i.at, []).append(i)
        shown_file, last = None, None
        for ln in k.lines:
            if ln.file != shown_file:
                last = None
                if len(files) > 1:
                    con.print(Text(_name(k, ln.file), style="underline"), soft_wrap=True)
            elif last is not None and ln.line > last + 1:
                con.print(Text(f"{'':>5} | \u22ee   [lines {last + 1}-{ln.line - 1}: no code]",
                               style="dim"), soft_wrap=True)
            shown_file, last = ln.file, ln.line
            mark = "  <- peak" if ln.peak else ""
            stats = (f"{ln.instructions} instr, peak {ln.peak_gpr}" if ln.instructions
                     else "no SASS")
            if ln.ptx_instructions:
                stats += f", ptx {ln.ptx_instructions}"
            if ln.mix:
                stats += " | " + ", ".join(f"{c} {n}" for c, n in ln.mix.items())
            text = ln.text.strip() if ln.text is not None else ""
            line = Text(f"{ln.line:>5} | {text}", style="bold" if ln.peak else None)
            line.append(f"   [{stats}]{mark}", style="cyan" if ln.instructions else "dim")
            con.print(line, soft_wrap=True)
            inner = ()
            for i in by_line.get((ln.file, ln.line), []):
                if i.inner != inner:
                    # the frames it shares with the code just above said as "...": the
                    # shuffles and adds of one reduction differ in their last frames alone
                    same = 0
                    while same < min(len(inner), len(i.inner)) - 1 and \
                            inner[same] == i.inner[same]:
                        same += 1
                    inner = i.inner
                    if inner:
                        _frames(con, k, inner, same)
                _instruction(con, i, peak, indent=bool(inner))
        elsewhere = [i for i in k.instructions if i.line is None]
        if elsewhere:
            con.print("      | (no source line)", markup=False)
            for i in elsewhere:
                _instruction(con, i, peak)


def mix_words(m) -> str:
    """``int 12, fp32 7, global_load 8 (32 B), ...``: classes by count, the memory classes
    with the bytes a thread moves through their instructions."""
    words = []
    for c, n in sorted(m.counts.items(), key=lambda kv: -kv[1]):
        b = m.memory_bytes.get(c)
        words.append(f"{c} {n}" + (f" ({b} B)" if b else ""))
    return ", ".join(words)


def _frames(con, k, inner, same: int = 0) -> None:
    """The row above code inlined into a line: the frames it came through, and the text of the
    innermost where it can be read (a toolkit header from the toolkit's own folder)."""
    f, n = inner[-1]
    text = None
    a = getattr(k, "attribution", None)
    if a is not None and f and n and not a.is_user(f):
        lines = a.header_text(f)
        if lines and 1 <= n <= len(lines):
            text = lines[n - 1].strip()
    words = ("... > " if same else "") + frames_words(k, inner[same:])
    t = Text(f"          inlined: {words}", style="dim")
    if text:
        t.append(f"  | {text}", style="dim")
    con.print(t, soft_wrap=True)


def _instruction(con, i, peak, indent: bool = False) -> None:
    pad = "          " if indent else "        "
    if i.label:
        con.print(f"{pad}{i.label}:", markup=False, style="magenta")
    live = i.live
    counts = f"{live.get('GPR', 0):>3} {live.get('PRED', 0):>2} {live.get('UGPR', 0):>2}" \
        if live else "  ?  ?  ?"
    via = ""
    if i.inlined_at and not i.frame:
        via = "  (inlined at " + ", ".join(f"{os.path.basename(f)}:{n}"
                                          for f, n in i.inlined_at) + ")"
    t = Text(f"{pad}{i.offset:04x}  {counts}  ")
    t.append(f"{_bar(live.get('GPR'), peak):<{_BAR}}", style="yellow")
    t.append(f"  {i.text}{via}")
    con.print(t, soft_wrap=True)
