"""``nvstage show`` on a terminal: one table per section, the will-it-run sentence."""

from __future__ import annotations

from rich.text import Text

from nvstage.compiler.nvcc.cubin_figures import SPILL_OR_LOCAL
from nvstage.inspect.resources import SPILL_SHORT, SPILL_WORDS
from nvstage.report.terminal.console import notes, plain_table, say
from nvstage.report.units import fmt_bytes, fmt_known


def render_shown(shown, con, *, listing: bool = False) -> None:
    """A ``view.Shown``: its notes on stderr, the sections on ``con``, then the verdict."""
    notes(shown.notes, soft_wrap=True)
    if getattr(shown, "triton", None):
        from nvstage.report.terminal.triton import render_section

        render_section(shown.triton, con)
    render(shown.data, con, listing=listing)
    if shown.will_it_run is not None:
        con.print(shown.will_it_run.explain(), markup=False)


def render(data: dict, con, *, listing: bool = False) -> None:
    """The sections ``view.collect_*`` gathered, in reading order."""
    for section in ("ptx", "ptx_text", "fatbin", "resources", "sass"):
        if section in data:
            _RENDER[section](data[section], con, listing)


_RIGHT = ("#", "size", "regs", "spill", "stack", "smem", "cmem", "lmem", "bar", "time", "instr",
          "lines")


def _table(title: str, *cols: str, key: int = 1):
    t = plain_table(title=title, title_justify="left", pad_edge=False, key=key)
    for c in cols:
        t.add_column(c, justify="right" if c.startswith(_RIGHT) else "left")
    return t


def _ptx(modules, con, _listing) -> None:
    for m in modules:
        t = _table(f"PTX {m.version}, target {m.target}, {m.line_count} lines",
                   "entry", "parameters", "lines", "maxntid")
        for e in m.entries:
            params = ", ".join(f"{p.ptx_type}{'*' if p.is_pointer else ''}"
                               f"{'[' + str(p.size) + ']' if p.ptx_type == 'b8' else ''}"
                               f" ({p.size} B, align {p.align})" for p in e.params)
            t.add_row(e.demangled, params or "-", str(e.line_count),
                      "x".join(map(str, e.max_ntid)) if e.max_ntid else "")
        con.print(t)


def _ptx_text(texts, con, listing) -> None:
    """With ``--listing``: each module's text (per arch), numbered as in its file; with
    ``--kernel``, only that entry's lines."""
    if not listing:
        return
    for t in texts:
        pieces = t.pieces()
        what = (f"{len(t.spans)} of its entries" if t.narrowed
                else f"{t.line_count} lines")
        con.print(Text(f"\nPTX {t.arch} ({t.name}, ISA {t.version}, {what})", style="bold"))
        if t.narrowed and not pieces:
            con.print(Text("  (no entry of this module matches --kernel)", style="dim"))
        for n_piece, (first, text) in enumerate(pieces):
            if n_piece:
                con.print()
            lines = text.split("\n")
            if lines and lines[-1] == "" and not t.narrowed:
                lines.pop()  # the file's last newline
            width = len(str(first + len(lines) - 1))
            for n, line in enumerate(lines, first):  # tabs as in the file, not the prefix
                con.print(Text(f"{n:>{width}}  {line.expandtabs(8)}"), overflow="fold")


def _fatbin(images, con, _listing) -> None:
    if not images:
        return
    t = _table("fatbin images", "#", "image", "kind", "arch", "size", "role", "section",
               "PTX ISA", "kernels", key=2)
    for im in images:
        t.add_row(str(im.index), im.name, im.kind, im.arch, fmt_bytes(im.size), im.role,
                  im.section, im.ptx_version or "", str(len(im.kernels)) if im.kernels
                  or im.kind != "ltoir" else "?")
    con.print(t)


def _resources(rows, con, _listing) -> None:
    # Per-file (-rdc) numbers are the exception: the column appears only when one is present.
    show_final = any(not r.final for r in rows)
    cols = ["kernel", "arch", "regs", "spill st/ld", "stack", "smem", "cmem[0]", "lmem", "bar",
            "time (ms)"] + (["final"] if show_final else [])
    t = _table("resources", *cols, key=2)
    for r in rows:
        spill = f"{fmt_known(r.spill_stores)}/{fmt_known(r.spill_loads)}"
        if r.spills:  # SASS alone cannot tell a spill from a local array's store
            spill += " spill or local array" if r.spill_kind == SPILL_OR_LOCAL else " SPILLS"
        cells = [r.name, r.arch, str(r.registers), spill, str(r.stack_frame),
                 str(r.shared_bytes), fmt_known(r.constant_bytes), fmt_known(r.local_bytes),
                 fmt_known(r.barriers),
                 "" if r.compile_ms is None else f"{r.compile_ms:.2f}"]
        t.add_row(*cells, *(["yes" if r.final else "no (per file)"] if show_final else []))
    sources = sorted({r.source for r in rows if r.source})
    if sources:
        t.caption = ("from " + "; ".join(sources) + "; smem: static shared memory per block as "
                     "ptxas counts it" + "".join(f"\n{line}" for line in _spill_legend(rows))
                     + "".join(f"\n{line}" for line in _unknown_legend(rows)))
        t.caption_justify = "left"
    con.print(t)
    for r in rows:
        if r.spills:
            say(f"warning: {r.demangled} ({r.arch}) "
                + ("stores and loads local memory, spills or a local array (ptxas marked "
                   "no spills in it): " if r.spill_kind == SPILL_OR_LOCAL else "spills: ")
                + f"{r.spill_stores} bytes stored, {r.spill_loads} bytes loaded from local "
                "memory" + (f" ({SPILL_SHORT[r.spill_source]})"
                            if r.spill_source in SPILL_SHORT else ""))
        if r.subroutine_spill_stores or r.subroutine_spill_loads:
            say(f"note: {r.demangled} ({r.arch}): the subroutines ptxas placed after it (the "
                "toolkit's division routines, a __noinline__ function) spill "
                f"{r.subroutine_spill_stores} bytes stored, {r.subroutine_spill_loads} loaded "
                "more; ptxas -v leaves them out of the kernel's figures")



def _spill_legend(rows) -> list[str]:
    said = dict.fromkeys(r.spill_source for r in rows if r.spill_source in SPILL_WORDS)
    return [f"spill st/ld ({s}): {SPILL_WORDS[s]}" for s in said]


def _unknown_legend(rows) -> list[str]:
    """What each "?" in the resources table means: which report lacks the figure. ptxas -v
    and cuobjdump -res-usage each report some figures only; a row has both only when its
    cubin was read after the build."""
    legend = []
    if any(r.spill_stores is None or r.spill_loads is None for r in rows):
        legend.append("spill ?: not in cuobjdump's report (ptxas' figures come with a build by "
                      "nvstage compile; NVRTC's with --resource-usage)")
    if any(r.constant_bytes is None for r in rows):
        legend.append("cmem[0] ?: ptxas -v omits it from sm_90 on, and no cubin was read "
                      "here (cuobjdump -res-usage has it)")
    if any(r.local_bytes is None for r in rows):
        legend.append("lmem ?: ptxas -v does not report local memory, and no cubin was read "
                      "here (cuobjdump -res-usage has it)")
    if any(r.barriers is None for r in rows):
        legend.append("bar ?: not in the report these figures come from")
    return legend


def _sass(kernels, con, listing) -> None:
    t = _table("SASS", "kernel", "arch", "image", "instructions", "top opcodes", key=2)
    for k in kernels:
        top = ", ".join(f"{op} {n}" for op, n in list(k.opcode_counts.items())[:6])
        t.add_row(k.demangled + ("" if k.is_entry else " (device function)"), k.arch,
                  k.image, str(k.instruction_count), top)
    padding = sum(k.padding for k in kernels)
    if padding:
        t.caption = (f"instructions: without the {padding} NOPs that pad the functions to "
                     "128-byte boundaries after their last instruction")
        t.caption_justify = "left"
    con.print(t)
    if not listing:
        return
    for k in kernels:
        con.print(Text(f"\n{k.demangled} ({k.arch}, {k.image})", style="bold"))
        last = None
        for i in k.code:
            if i.source and i.source != last:
                line = Text(f"        // {i.source}", style="dim")
                if i.source_text:  # the line itself, where the build's source could be read
                    line.append(f"  {i.source_text}", style="cyan")
                con.print(line)
                last = i.source
            if i.label:  # branch targets, as nvdisasm names them in the BRA operands
                con.print(Text(f"{i.label}:", style="bold"))
            con.print(Text(f"  {i.offset:05x}  {i.text}"))
        if k.padding:
            first = k.instructions[len(k.code)].offset
            con.print(Text(f"  {first:05x}  NOP x{k.padding}  // padding to the 128-byte "
                           "boundary, never issued", style="dim"))


_RENDER = {"ptx": _ptx, "ptx_text": _ptx_text, "fatbin": _fatbin, "resources": _resources,
           "sass": _sass}
