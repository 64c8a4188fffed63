"""nvstage show: what is inside a PTX file, cubin, fatbin, object, executable or build."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from nvstage.cli.common import data_console, emit_json, handled, stderr


class PlainTable(Table):
    """A table whose string cells are plain text, never markup: kernel names, paths and
    targets come from files that may be anyone's ("[/x]" in one would end the command with
    rich's MarkupError, and "[red]" would restyle the output)."""

    def add_row(self, *cells, **kw) -> None:
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kw)


def show_cmd(
    artifact: Annotated[Path, typer.Argument(
        help="A .ptx, .cubin, .fatbin, object file, executable, keep folder or stages.json.",
        show_default=False)],
    sections: Annotated[Optional[str], typer.Option("--sections", "-s", metavar="SECTIONS",
        help="Comma list of ptx, sass, resources, fatbin (or all). Default: what applies."
        )] = None,
    kernel: Annotated[Optional[str], typer.Option("--kernel", "-k",
        help="Only this kernel (mangled, demangled, or the bare name).")] = None,
    listing: Annotated[bool, typer.Option("--listing",
        help="Print every SASS instruction, not just the counts.")] = False,
    lineinfo: Annotated[bool, typer.Option("--lineinfo",
        help="Interleave source lines in the SASS listing (needs a -lineinfo build).")
        ] = False,
    gpu: Annotated[Optional[str], typer.Option("--gpu",
        help="Say whether it would run on this GPU (sm_90, h200, ...).")] = None,
    driver: Annotated[Optional[str], typer.Option("--driver",
        help="With --gpu: the CUDA version the driver supports, as nvidia-smi prints it "
        "(\"CUDA Version: 13.0\" -> 13.0); decides whether PTX can be JIT-compiled.")
        ] = None,
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Use the cuobjdump/nvdisasm of the toolkit of this nvcc.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")] = False,
) -> None:
    """Show what is inside an artifact: PTX entries, SASS, resources, fatbin images.

    Examples:

          nvstage show vadd.nvstage

          nvstage show multi.o --sections resources,fatbin --kernel block_sum

          nvstage show a.out --gpu h200 --driver 13.0
    """
    from nvstage.inspect.fatbin import kind_of_file
    from nvstage.inspect.view import collect_build, collect_file, parse_sections, to_json
    from nvstage.compiler.toolkit import find_toolkit

    with handled(json_out):
        _check_gpu(gpu, driver)  # before any work: a typo should not cost a disassembly
        kind = kind_of_file(artifact)
        partial = None  # a note when a keep folder's build is not whole
        wanted = parse_sections(sections, kind)
        if gpu and "fatbin" not in wanted and kind != "ptx":
            wanted = wanted + ("fatbin",)  # will-it-run reads the image list
        toolkit = find_toolkit(nvcc)
        if kind == "build":
            from nvstage.compiler.record import load_build

            from nvstage.compiler.record import partial_note, toolkit_note

            build = load_build(artifact)
            if note := toolkit_note(build, toolkit):
                stderr().print(f"note: {note}", markup=False)
            if partial := partial_note(build):
                stderr().print(f"note: {partial}", markup=False, soft_wrap=True)
            stale = getattr(build, "stale", [])
            for path in stale[:20]:
                stderr().print(f"note: {path} is gone or was rewritten after this build; "
                               "left out", markup=False)
            if len(stale) > 20:
                stderr().print(f"note: and {len(stale) - 20} more files left out", markup=False)
            data = collect_build(build, wanted, toolkit, kernel=kernel,
                                 lineinfo=lineinfo or None)
        else:
            data = collect_file(artifact, kind, wanted, toolkit, kernel=kernel,
                                lineinfo=lineinfo)
        if kernel and not _any_kernel(data):
            from nvstage.errors import UsageError

            everything = (collect_build(build, ("resources",), toolkit) if kind == "build"
                          else collect_file(artifact, kind, ("resources",), toolkit))
            from nvstage.inspect.records import display_name

            names = sorted({display_name(r.demangled)
                            for r in everything.get("resources") or []})
            raise UsageError(f"no kernel matches --kernel {kernel!r} in {artifact}",
                             hint=f"kernels there: {', '.join(names) or 'none'}")
        con = data_console(json_out)
        render(data, con, listing=listing or bool(kernel and "sass" in (sections or "")))
        doc = {"artifact": str(artifact), "kind": kind, **to_json(data)}
        if partial:
            doc["partial"] = {"status": build.status, "note": partial}
        if gpu:
            doc["will_it_run"] = _will_it_run(data, kind, artifact, gpu, driver, con,
                                              partial=build.status if partial else None)
        if json_out:
            emit_json(doc)


def _any_kernel(data: dict) -> bool:
    """Whether the --kernel filter left anything in a section that lists kernels."""
    ptx_entries = [e for m in data.get("ptx") or [] for e in m.entries]
    return bool(ptx_entries or data.get("resources") or data.get("sass"))


def _check_gpu(gpu: str | None, driver: str | None) -> None:
    from nvstage.errors import UsageError
    from nvstage.hw.gpus import resolve_gpu
    from nvstage.inspect.compat import parse_driver

    if driver is not None and not gpu:
        raise UsageError("--driver says whether PTX can be JIT-compiled for a GPU: give --gpu "
                         "too", hint="e.g. --gpu b200 --driver 13.0")
    if gpu:
        resolve_gpu(gpu)
    if driver is not None:
        parse_driver(driver)


def _will_it_run(data: dict, kind: str, artifact: Path, gpu: str, driver: str | None, con,
                 *, partial: str | None = None):
    from nvstage.inspect import compat  # another module's; imported only when asked for

    images = data.get("fatbin")
    if images is None:
        images = _images_of_single(data, kind, artifact)
    verdict = compat.will_it_run(images, gpu, driver)
    if partial and not images:
        # No fatbin because the build stopped before making one: that says nothing about
        # what a whole build would hold, so no verdict blames an image never built.
        text = (f"Cannot tell whether it runs on {verdict.gpu}: the build {partial_word(partial)} "
                "before any fatbin was made")
        con.print(text, markup=False)
        return {"runs": None, "how": "unknown", "image": None, "gpu": verdict.gpu,
                "gpu_arch": verdict.gpu_arch, "driver": verdict.driver, "reasons": [],
                "explain": text}
    con.print(verdict.explain(), markup=False)
    return verdict.to_json()


def partial_word(status: str) -> str:
    return {"running": "did not finish", "interrupted": "was interrupted",
            "failed": "failed"}.get(status, "stopped")


def _images_of_single(data: dict, kind: str, artifact: Path):
    """A bare cubin or PTX file is one image."""
    from nvstage.artifacts import read_regular
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.ptx import read_ptx
    from nvstage.inspect.records import FatbinImage

    if kind == "cubin":
        c = read_cubin(read_regular(artifact), str(artifact))
        return [FatbinImage("cubin", c.arch, c.size, artifact.name,
                            "device-link" if c.from_device_link else "kernel",
                            kernels=c.kernels)]
    m = read_ptx(artifact)
    arch = m.target.replace("sm_", "compute_")
    return [FatbinImage("ptx", arch, artifact.stat().st_size, artifact.name,
                        ptx_version=m.version, kernels=tuple(e.name for e in m.entries))]


def show_build(build, sections: str, console, *, toolkit, kernel: str | None = None) -> dict:
    """After ``nvstage compile --show``: render the asked sections, return them as JSON."""
    from nvstage.inspect.view import collect_build, parse_sections, to_json

    data = collect_build(build, parse_sections(sections, "build"), toolkit, kernel=kernel)
    render(data, console, listing=False)
    return to_json(data)


# Rendering: one table per section (a PlainTable), plain when the console has no colour.

def render(data: dict, con, *, listing: bool = False) -> None:
    for section in ("ptx", "fatbin", "resources", "sass"):
        if section in data:
            _RENDER[section](data[section], con, listing)


def _table(title: str, *cols: str):
    from rich import box

    t = PlainTable(box=box.SIMPLE_HEAD, title=Text(title, style="table.title"),
                   title_justify="left", pad_edge=False)
    for c in cols:
        t.add_column(c, justify="right" if c.startswith(("#", "size", "regs", "spill",
                                                          "stack", "smem", "cmem", "lmem",
                                                          "bar", "time", "instr", "lines"))
                     else "left", overflow="fold")
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


def _fatbin(images, con, _listing) -> None:
    from nvstage.report.units import fmt_bytes

    if not images:
        return

    t = _table("fatbin images", "#", "image", "kind", "arch", "size", "role", "section",
               "PTX ISA", "kernels")
    for im in images:
        t.add_row(str(im.index), im.name, im.kind, im.arch, fmt_bytes(im.size), im.role,
                  im.section, im.ptx_version or "", str(len(im.kernels)) if im.kernels
                  or im.kind != "ltoir" else "?")
    con.print(t)


def _n(v) -> str:
    return "?" if v is None else str(v)


def _resources(rows, con, _listing) -> None:
    from nvstage.inspect.records import display_name

    # Per-file (-rdc) numbers are the exception: the column appears only when one is present.
    show_final = any(not r.final for r in rows)
    cols = ["kernel", "arch", "regs", "spill st/ld", "stack", "smem", "cmem[0]", "lmem", "bar",
            "time (ms)"] + (["final"] if show_final else [])
    t = _table("resources", *cols)
    for c in t.columns:  # numbers never wrap; a long kernel name is cut with an ellipsis
        c.no_wrap = True
    t.columns[0].overflow, t.columns[0].max_width = "ellipsis", 48
    for r in rows:
        spill = f"{_n(r.spill_stores)}/{_n(r.spill_loads)}"
        if r.spills:
            spill += " SPILLS"
        cells = [display_name(r.demangled) or r.kernel, r.arch, str(r.registers), spill,
                 str(r.stack_frame), str(r.shared_bytes), _n(r.constant_bytes),
                 _n(r.local_bytes), _n(r.barriers),
                 "" if r.compile_ms is None else f"{r.compile_ms:.2f}"]
        t.add_row(*cells, *(["yes" if r.final else "no (per file)"] if show_final else []))
    sources = sorted({r.source for r in rows if r.source})
    if sources:
        unknown = any(r.spill_stores is None for r in rows)
        t.caption = ("from " + "; ".join(sources) + "; smem: static shared memory per block as "
                     "ptxas counts it" + ("; ?: not in cuobjdump's report (ptxas' figures "
                                          "come with a build by nvstage compile; NVRTC's "
                                          "with --resource-usage)" if unknown
                                          else ""))
        t.caption_justify = "left"
    con.print(t)
    spilling = [r for r in rows if r.spills]
    for r in spilling:
        stderr().print(f"warning: {r.demangled} ({r.arch}) spills: {r.spill_stores} bytes "
                       f"stored, {r.spill_loads} bytes loaded from local memory", markup=False)


def _sass(kernels, con, listing) -> None:
    t = _table("SASS", "kernel", "arch", "image", "instructions", "top opcodes")
    for k in kernels:
        top = ", ".join(f"{op} {n}" for op, n in list(k.opcode_counts.items())[:6])
        t.add_row(k.demangled + ("" if k.is_entry else " (device function)"), k.arch,
                  k.image, str(k.instruction_count), top)
    con.print(t)
    if not listing:
        return
    for k in kernels:
        con.print(Text(f"\n{k.demangled} ({k.arch}, {k.image})", style="bold"))
        last = None
        for i in k.instructions:
            if i.source and i.source != last:
                con.print(Text(f"        // {i.source}", style="dim"))
                last = i.source
            if i.label:  # branch targets, as nvdisasm names them in the BRA operands
                con.print(Text(f"{i.label}:", style="bold"))
            con.print(Text(f"  {i.offset:05x}  {i.text}"))


_RENDER = {"ptx": _ptx, "fatbin": _fatbin, "resources": _resources, "sass": _sass}
