"""nvstage report: one self-contained HTML page for a build and, if given, a GPU run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled, stderr


def report_cmd(
    build: Annotated[Path, typer.Argument(
        help="A keep folder (nvstage compile --keep) or its stages.json.", show_default=False)],
    run: Annotated[Optional[Path], typer.Option("--run",
        help="A run document (nvstage run --profile --json FILE) to add.")] = None,
    trace: Annotated[Optional[Path], typer.Option("--trace",
        help="A Chrome trace (nvstage run --trace FILE) to draw.")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output",
        help="The HTML file to write (default: report.html in the keep folder).")] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="The page title.")] = None,
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Read the build with the tools (cuobjdump, nvdisasm) of this nvcc's toolkit.")
        ] = None,
    json_out: Annotated[bool, typer.Option("--json",
        help="Print {\"output\": PATH, ...} as JSON instead of the bare path.")] = False,
) -> None:
    """Write one HTML file: the stage graph, stage times, resources, SASS, PTX, and the run.

    The page needs no network: styles, charts (SVG) and script are inline. Prints its path.

    Examples:

          nvstage compile kernels/saxpy.cu --arch sm_90 --keep && nvstage report saxpy.nvstage

          nvstage report build.nvstage --run run.json --trace trace.json -o report.html
    """
    with handled(json_out):
        from nvstage.artifacts import is_folder, write_atomic
        from nvstage.documents import load_run_doc, load_trace_doc
        from nvstage.errors import UsageError, WriteError
        from nvstage.compiler.record import load_build, manifest_path
        from nvstage.report.html import gather, render

        b = load_build(build)
        out = output or manifest_path(build).parent / "report.html"
        if is_folder(out):
            raise UsageError(f"-o {out} is a folder", hint=f"give a file: -o {out}/report.html")
        from nvstage.compiler.toolkit import find_toolkit

        # Never the toolkit the manifest names: a document does not choose programs.
        toolkit = find_toolkit(nvcc)
        run_doc = load_run_doc(run, "run document") if run else None
        trace_doc = load_trace_doc(trace) if trace else None
        inp = gather(b, toolkit=toolkit, run=run_doc, trace=trace_doc)
        try:
            # The default name is in the keep folder, which may be someone else's: a link
            # planted there as report.html is replaced, never written through.
            write_atomic(out, render(inp, title=title), in_document_folder=output is None)
        except WriteError as e:  # its message names the file and what is wrong with it
            raise UsageError(e.message.replace("cannot write ", "cannot write the report to ",
                                               1), hint=e.hint) from None
        for n in inp.notes:
            stderr().print(f"note: {n}", markup=False)
        if json_out:
            emit_json({"output": str(out), "notes": inp.notes,
                       "sections": {"resources": len(inp.resources), "sass": len(inp.sass),
                                    "ptx": len(inp.ptx), "fatbin": len(inp.fatbin),
                                    "run": run_doc is not None}})
        else:
            typer.echo(str(out))
