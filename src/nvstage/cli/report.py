"""nvstage report: one self-contained HTML page for a build and, if given, a GPU run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import json_option, nvcc_option


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
    nvcc: nvcc_option("Read the build with the tools (cuobjdump, nvdisasm) of this nvcc's "
                      "toolkit.") = None,
    json_out: json_option("Print {\"output\": PATH, ...} as JSON instead of the bare path."
                          ) = False,
) -> None:
    """Write one HTML file: the stage graph, stage times, resources, SASS, PTX, and the run.

    The page needs no network: styles, charts (SVG) and script are inline. Prints its path.

    Examples:

          nvstage compile kernels/saxpy.cu --arch sm_90 --keep && nvstage report saxpy.nvstage

          nvstage report build.nvstage --run run.json --trace trace.json -o report.html
    """
    from nvstage.report.html import write_report
    from nvstage.report.terminal.console import notes

    with handled(json_out):
        page = write_report(build, output, run=run, trace=trace, title=title, nvcc=nvcc)
        notes(page.inputs.notes)
        if json_out:
            emit_json(page.to_json())
        else:
            typer.echo(page.path)
