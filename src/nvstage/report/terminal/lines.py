"""``nvstage show --kernel NAME --lineinfo``: each source line, its SASS under it, and the
registers live at every instruction, with a bar so the pressure is seen before it is read."""

from __future__ import annotations

import os

from rich.text import Text

_BAR = 24  # characters of the widest bar: the kernel's peak


def _bar(n: int | None, peak: int | None) -> str:
    if not n or not peak:
        return ""
    return "#" * max(1, round(_BAR * n / peak))


def _short(path: str | None, root: str) -> str:
    if not path:
        return "?"
    if root and path.startswith(root + os.sep):
        return path[len(root) + 1:]
    return path


def render_lines(kernels, con, _listing=True) -> None:
    for k in kernels:
        files = sorted({ln.file for ln in k.lines})
        # The path is shown once, above the lines: the folder the kernel's files share.
        root = ""
        if files:
            root = os.path.dirname(files[0]) if len(files) == 1 else os.path.commonpath(files)
        # Several files (headers, #line): each peak line by its file too.
        peaks = [str(ln.line) if len(files) == 1 else f"{os.path.basename(ln.file)}:{ln.line}"
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
        if len(files) == 1:  # the one file, named (not only its folder)
            con.print(f"source: {files[0]}", markup=False, soft_wrap=True)
        elif root:
            con.print(f"source: {root}{os.sep}", markup=False, soft_wrap=True)
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
            by_line.setdefault((i.file, i.line), []).append(i)
        shown_file = None
        for ln in k.lines:
            if ln.file != shown_file and len(files) > 1:
                con.print(Text(f"{_short(ln.file, root)}", style="underline"), soft_wrap=True)
            shown_file = ln.file
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
            for i in by_line.get((ln.file, ln.line), []):
                _instruction(con, i, peak)
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


def _instruction(con, i, peak) -> None:
    if i.label:
        con.print(f"        {i.label}:", markup=False, style="magenta")
    live = i.live
    counts = f"{live.get('GPR', 0):>3} {live.get('PRED', 0):>2} {live.get('UGPR', 0):>2}" \
        if live else "  ?  ?  ?"
    via = ""
    if i.inlined_at:
        via = "  (inlined at " + ", ".join(f"{os.path.basename(f)}:{n}"
                                          for f, n in i.inlined_at) + ")"
    t = Text(f"        {i.offset:04x}  {counts}  ")
    t.append(f"{_bar(live.get('GPR'), peak):<{_BAR}}", style="yellow")
    t.append(f"  {i.text}{via}")
    con.print(t, soft_wrap=True)
