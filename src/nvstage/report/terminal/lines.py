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
        for at in (k.live_at_peak, *k.asked):
            if at is not None:
                _live_at(con, k, at, at is k.live_at_peak and at.offset == k.peak_offset)
        con.print("live: general, predicate, uniform registers at each instruction "
                  "(nvdisasm --life-range-mode narrow, its counts)", markup=False, style="dim",
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


# Lines listed under "what is live": the most registers first; the rest said in one row.
MAX_WRITTEN = 6
# Live values no write reaches: live from the entry, kept for a write under a predicate.
NO_WRITE = "no write reaches here (kept for a write under a predicate)"


def line_words(k, file, line, via=None) -> str:
    """``line 54``, ``line 6 (inlined at 38)``; a file's name too in a view of several files."""
    several = len({ln.file for ln in k.lines}) > 1
    name = f"{os.path.basename(_name(k, file)).strip('<>')}:{line}" if several and file \
        else f"line {line}"
    if via is not None:
        name += f" (inlined at {via[1]})" if via[0] == file or not several else \
            f" (inlined at {os.path.basename(via[0])}:{via[1]})"
    return name


def lines_words(k, lines) -> str:
    """``lines 4, 19, 31`` (or ``k.cu:4, ...`` in a view of several files)."""
    if len({ln.file for ln in k.lines}) > 1:
        return ", ".join(line_words(k, f, n) for f, n in lines)
    numbers = [str(n) for _, n in lines if n is not None]
    return f"line{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}"


def gap_words(gap) -> str:
    """From the values live at the peak to ptxas's count and occupancy's allocation, by rule
    (``inspect.live``)."""
    words = [f"{gap.peak_live} live here" + (", R1 (the stack pointer, by the ABI) among them"
                                             if gap.stack_pointer else "")]
    holes = len(gap.holes)
    if gap.highest >= 0:
        free = ""
        if holes:
            named = ", ".join(f"R{r}" for r in gap.holes[:6]) + (", ..." if holes > 6 else "")
            free = (f", {holes} of them free here ({named}"
                    + (f"; {gap.paired} in an aligned pair or quad with a live one: 64- and "
                       "128-bit operands" if gap.paired else "") + ")")
        words.append(f"the code touches R0 to R{gap.highest}{free}")
    if gap.reported is not None:
        above = gap.above
        words.append(f"ptxas counts {gap.reported}: R{gap.highest} + 1"
                     + (f" + {above}" if above else "")
                     + (" (ptxas keeps 2 above the highest in a kernel with no subroutine)"
                        if above == 2 and not gap.subroutines else ""))
        words.append(f"occupancy allocates {gap.allocated} per thread (a warp's registers in "
                     "units of 256)")
    return "; ".join(words)


def _live_at(con, k, at, peak: bool) -> None:
    """What is live at one instruction, by the line that last wrote it, and the way from the
    count of live values to ptxas's."""
    where = line_words(k, *at.at) if at.at[1] is not None else "no source line"
    con.print(Text(f"{'at the peak' if peak else 'at'} {at.offset:04x}  {at.text}  ({where}): "
                   f"{at.live} live registers, by the line that last wrote them:"),
              soft_wrap=True)
    shown = at.written[:MAX_WRITTEN] if k.has_lineinfo else ()
    for w in shown:
        t = Text(f"  {len(w.registers):>4}  ")
        t.append(line_words(k, w.file, w.line, w.via) if w.line is not None
                 else NO_WRITE, style="bold")
        if w.text:
            t.append(f"  {w.text}")
        if w.also:
            t.append(f"  (also written at {lines_words(k, w.also)})", style="dim")
        con.print(t, soft_wrap=True)
    rest = at.written[len(shown):]
    if rest and k.has_lineinfo:
        con.print(f"  {sum(len(w.registers) for w in rest):>4}  at {len(rest)} more lines "
                  f"({', '.join(str(w.line) for w in rest[:8])}"
                  f"{', ...' if len(rest) > 8 else ''})", markup=False, soft_wrap=True)
    if at.gap is not None and peak:
        con.print(f"  registers: {gap_words(at.gap)}", markup=False, style="dim",
                  soft_wrap=True)


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
