"""nvstage show: what is inside a PTX file, cubin, fatbin, object, executable or build; for a
build record (a whole build through the launcher), its kernels, or one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import JsonOpt, LiveAtOpt, NvccReadOpt, TimeOpt, TopOpt
from nvstage.cli.show_time import show_time
from nvstage.errors import UsageError
from nvstage.report.terminal.console import data_console


def show_cmd(
    artifact: Annotated[Path, typer.Argument(
        help="A .ptx, .cubin, .fatbin, object file, executable, keep folder or stages.json; "
        "a build folder built with nvstage as the compiler launcher; or a Triton cache "
        "folder (TRITON_CACHE_DIR: every kernel in it, read as data).",
        show_default=False)],
    sections: Annotated[Optional[str], typer.Option("--sections", "-s", metavar="SECTIONS",
        help="Comma list of ptx, sass, resources, fatbin, lines (with --kernel K --lineinfo: the "
        "line view alone), or all. Default: what applies."
        )] = None,
    kernel: Annotated[Optional[str], typer.Option("--kernel", "-k",
        help="Only this kernel (mangled, demangled, or the bare name). In a build record: "
        "found in whichever translation unit built it.")] = None,
    tu: Annotated[Optional[str], typer.Option("--tu",
        help="In a build record: the translation unit to look in (its source or object "
        "path, or the end of it), when several built the kernel.")] = None,
    listing: Annotated[bool, typer.Option("--listing",
        help="Print the text too: each PTX module per arch (with --kernel, that entry's "
        "lines) and every SASS instruction, not just the tables.")] = False,
    lineinfo: Annotated[bool, typer.Option("--lineinfo",
        help="Interleave source lines in the SASS listing (needs a -lineinfo build). With "
        "--kernel: each source line with its SASS under it and the registers live at every "
        "instruction, the peak lines flagged, the instruction mix per kernel and per line, "
        "and the PTX instructions of each line where the PTX was kept (the section "
        "'lines').")] = False,
    attribute: Annotated[str, typer.Option("--attribute", metavar="user|innermost",
        help="The line view: which line inlined code counts to. user (default): the "
        "innermost frame of its inlined-at chain in a file of yours (cg::reduce's shuffles "
        "count to the line calling it); innermost: where nvdisasm puts it (a toolkit "
        "header's line).")] = "user",
    library: Annotated[Optional[list[Path]], typer.Option("--library", metavar="DIR",
        help="The line view: files under DIR are a library's, not yours (a vendored CUB in "
        "your tree); repeatable. The toolkit's, the system's include folders and "
        "site-packages always are.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu",
        help="Say whether it would run on this GPU (sm_90, h200, ...).")] = None,
    driver: Annotated[Optional[str], typer.Option("--driver",
        help="With --gpu: the CUDA version the driver supports, as nvidia-smi prints it "
        "(\"CUDA Version: 13.0\" -> 13.0); decides whether PTX can be JIT-compiled.")
        ] = None,
    live_at: LiveAtOpt = None, time: TimeOpt = False, top: TopOpt = 10,
    nvcc: NvccReadOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show what is inside an artifact: PTX entries, SASS, resources, fatbin images.

    ARTIFACT is anything the toolchain wrote, a keep folder (compile --keep), or a build
    folder whose nvcc commands ran through nvstage (the compiler launcher).

    With --gpu it exits 0 when the artifact runs on that GPU, 1 when it will not (or, for a
    build that stopped before its fatbin, when that cannot be told), after printing why.

    Examples:

          nvstage show vadd.nvstage

          nvstage show multi.o --sections resources,fatbin --kernel block_sum

          nvstage show a.out --gpu h200 --driver 13.0

          nvstage show vadd.nvstage --sections ptx --listing

          nvstage show build/ --kernel block_sum

          nvstage show k.nvstage --kernel peak --lineinfo

          nvstage show ~/.triton/cache --kernel fused
    """
    from nvstage.compiler.buildlog.log import find
    from nvstage.inspect.lineview import ask_live_at
    from nvstage.report.terminal.show import render_shown

    with handled(json_out):
        if time:  # nvcc's -fdevice-time-trace files
            return show_time(artifact, top, json_out, kernel or tu or sections or gpu or driver
                             or listing or lineinfo)
        from nvstage.inspect.triton_cache import is_triton_cache

        lineinfo = lineinfo or live_at is not None  # --live-at asks the line view
        if is_triton_cache(artifact) and live_at is None:  # a document: listed, never imported
            from nvstage.cli.show_triton import show_cache

            return show_cache(artifact, kernel, sections, lineinfo, listing, nvcc, json_out)
        if find(artifact) is not None:
            if kernel is None:
                if tu is not None or sections or gpu or driver or listing or lineinfo:
                    raise UsageError("in a build record, the sections, --tu, --gpu and the "
                                     "listings are one kernel's: give --kernel NAME",
                                     hint=f"nvstage show {artifact} lists every kernel")
                from nvstage.cli.show_record import show_record

                return show_record(artifact, json_out)
            from nvstage.inspect.build_view import show_kernel

            shown = show_kernel(artifact, kernel, unit=tu, sections=sections,
                                lineinfo=lineinfo, gpu=gpu, driver=driver, nvcc=nvcc,
                                attribute=attribute, library=tuple(library or ()))
        else:
            if tu is not None:
                raise UsageError(f"--tu picks a translation unit of a build record; {artifact} "
                                 "is not one")
            from nvstage.inspect.view import show

            shown = show(artifact, sections=sections, kernel=kernel, lineinfo=lineinfo,
                         gpu=gpu, driver=driver, nvcc=nvcc, attribute=attribute,
                         library=tuple(library or ()))
        if live_at is not None:  # one kernel's line view, asked where
            shown.data["lines"] = ask_live_at(shown.data.get("lines"), live_at, kernel)
        wanted = {s.strip().lower() for s in (sections or "").split(",")}
        con = data_console(json_out)
        render_shown(shown, con, listing=listing or bool(kernel and wanted & {"sass", "ptx"}))
        if "lines" in shown.data:
            from nvstage.report.terminal.lines import render_lines

            render_lines(shown.data["lines"], con)
        if json_out:
            emit_json(shown.to_json())
        # --gpu is a question a script asks: only "runs" is a yes (exit 0); "will not run"
        # and "cannot tell" are a no (exit 1), as check's broken budget is.
        if shown.will_it_run is not None and shown.will_it_run.runs is not True:
            raise typer.Exit(1)


def show_build(build, sections: str, console, *, toolkit, kernel: str | None = None) -> dict:
    """After ``nvstage compile --show``: render the asked sections, return them as JSON."""
    from nvstage.inspect.view import collect_build, parse_sections, to_json
    from nvstage.report.terminal.show import render

    data = collect_build(build, parse_sections(sections, "build"), toolkit, kernel=kernel)
    render(data, console, listing=False)
    return to_json(data)
