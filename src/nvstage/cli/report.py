"""nvstage report: one self-contained HTML page for a build and, if given, a GPU run; or for a
whole build from its build record (nvstage as the compiler launcher)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import json_option, nvcc_option
from nvstage.errors import UsageError
from nvstage.report.terminal.console import notes


def report_cmd(
    build: Annotated[Path, typer.Argument(
        help="A keep folder (nvstage compile --keep) or its stages.json; or a build folder "
        "built with nvstage as the compiler launcher (or its .nvstage-build record).",
        show_default=False)],
    run: Annotated[Optional[Path], typer.Option("--run",
        help="A run document (nvstage run --profile --json FILE) to add.")] = None,
    trace: Annotated[Optional[Path], typer.Option("--trace",
        help="A Chrome trace (nvstage run --trace FILE) to draw.")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output",
        help="The HTML file to write (default: report.html in the keep folder, or in the "
        "build record's folder).")] = None,
    build_trace: Annotated[Optional[Path], typer.Option("--build-trace",
        help="For a build record: also write the build's timeline here as a Chrome trace "
        "(open it in Perfetto).")] = None,
    block: Annotated[int, typer.Option("--block", min=1, max=1024,
        help="For a build record: the block size each kernel's occupancy is computed at.")
        ] = 256,
    code: Annotated[bool, typer.Option("--code/--no-code",
        help="Each kernel's source beside its SASS with its live registers (nvdisasm twice "
        "per cubin; for a build record, read from the object each unit wrote). --no-code "
        "leaves them out (a build record is then read alone).")
        ] = True,
    title: Annotated[Optional[str], typer.Option("--title", help="The page title.")] = None,
    what_if_remote: Annotated[Optional[int], typer.Option("--what-if-remote", min=1,
        max=100000, help="For a build record: instead of the page, an estimate of the build's "
        "wall time with this many remote cores running its cicc and ptxas stages.")] = None,
    round_trip: Annotated[Optional[float], typer.Option("--round-trip", min=0.0,
        help="With --what-if-remote: the seconds a remote stage adds (default: measured in "
        "the record where it holds remote and local runs, else 0).")] = None,
    upload: Annotated[float, typer.Option("--upload", min=0.0,
        help="With --what-if-remote: the toolchain upload's seconds, paid once "
        "(bench/dist_stages.py measures it).")] = 0.0,
    nvcc: nvcc_option("Read the build with the tools (cuobjdump, nvdisasm) of this nvcc's "
                      "toolkit.") = None,
    json_out: json_option("Print {\"output\": PATH, ...} as JSON instead of the bare path; for "
                          "a build record, the build's summary with it.") = False,
) -> None:
    """Write one HTML file: the stage graph, stage times, resources, each kernel's source
    beside its SASS (live registers per instruction), PTX, and the run.

    Given a build folder whose nvcc commands ran through nvstage (CMAKE_CUDA_COMPILER_LAUNCHER,
    NVCC="nvstage nvcc"), the page is the whole build's: every translation unit with its
    stages and times, a timeline of the build across processes, the slowest units and
    stages, cache hits per stage kind, and every kernel with registers, spills, shared memory
    and occupancy (a table that sorts), each linked to its source beside its SASS. The page
    needs no network: styles, charts (SVG) and script are inline. Prints its path.

    Examples:

          nvstage compile kernels/saxpy.cu --arch sm_90 --keep && nvstage report saxpy.nvstage

          nvstage report build.nvstage --run run.json --trace trace.json -o report.html

          nvstage report build/ -o build.html --build-trace build-trace.json
    """
    from nvstage.compiler.buildlog.log import find

    with handled(json_out):
        if what_if_remote is not None:
            if find(build) is None:
                raise UsageError(f"--what-if-remote estimates a whole build from its build "
                                 f"record; {build} is not one",
                                 hint="give the build folder of a build run with nvstage as "
                                      "the compiler launcher")
            from nvstage.compiler.dist.estimate import estimate, units_of
            from nvstage.inspect.build_view import load_build_view
            from nvstage.report.terminal.what_if import render_what_if

            view = load_build_view(build)
            est = estimate(units_of(view), what_if_remote, max(1, view.lanes),
                           view.wall_seconds, round_trip=round_trip, upload=upload)
            if json_out:
                emit_json(est.to_json())
            else:
                typer.echo(render_what_if(est))
            return
        if find(build) is not None:
            if run is not None or trace is not None:
                raise UsageError("--run and --trace add a GPU run to the report of one build "
                                 f"(a keep folder); {build} is a whole build's record",
                                 hint="report the build alone, or the keep folder of the "
                                      "kernel you ran")
            from nvstage.report.build_html import write_build_report

            page = write_build_report(build, output, build_trace=build_trace, block=block,
                                      title=title, code=code, nvcc=nvcc)
            notes(page.view.notes)
        else:
            if build_trace is not None:
                raise UsageError("--build-trace draws a whole build from its build record; "
                                 f"{build} is not one",
                                 hint="give the build folder of a build run with nvstage as "
                                      "the compiler launcher (for one build's stages, the "
                                      "report's stage chart; for a run, --trace)")
            from nvstage.report.html import write_report

            page = write_report(build, output, run=run, trace=trace, title=title, nvcc=nvcc,
                                code=code)
            notes(page.inputs.notes)
        if json_out:
            emit_json(page.to_json())
        else:
            typer.echo(page.path)
