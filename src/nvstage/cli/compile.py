"""nvstage compile: nvcc's plan, run stage by stage, every artifact kept and shown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from nvstage.cli.common import data_console, emit_json, handled, stderr


def compile_cmd(
    source: Annotated[Path, typer.Argument(help="The .cu file to compile.", show_default=False)],
    nvcc_args: Annotated[Optional[list[str]], typer.Argument(
        help="Anything after -- goes to nvcc unchanged (e.g. -- -Xptxas -v).",
        show_default=False)] = None,
    output: Annotated[Optional[str], typer.Option("-o", "--output",
        help="Output file, as nvcc -o.")] = None,
    arch: Annotated[Optional[list[str]], typer.Option("--arch", "-arch",
        help="GPU arch, as nvcc -arch (sm_90, compute_90, native). Repeatable.")] = None,
    gencode: Annotated[Optional[list[str]], typer.Option("--gencode", "-gencode",
        help="As nvcc -gencode: arch=compute_90,code=[sm_90,compute_90]. Repeatable.")] = None,
    compile_only: Annotated[bool, typer.Option("-c", "--compile",
        help="Stop after the object file, as nvcc -c.")] = False,
    ptx: Annotated[bool, typer.Option("--ptx", help="Stop at PTX.")] = False,
    cubin: Annotated[bool, typer.Option("--cubin", help="Stop at the cubin.")] = False,
    fatbin: Annotated[bool, typer.Option("--fatbin", help="Stop at the fatbin.")] = False,
    rdc: Annotated[bool, typer.Option("--rdc", "-rdc",
        help="Relocatable device code (adds the device-link stages), as nvcc -rdc=true.")] = False,
    opt: Annotated[Optional[str], typer.Option("-O", help="Host optimisation level 0-3.")] = None,
    lineinfo: Annotated[bool, typer.Option("--lineinfo", "-lineinfo",
        help="Keep source line info for SASS views.")] = False,
    include: Annotated[Optional[list[str]], typer.Option("-I",
        help="Include directory. Repeatable.")] = None,
    define: Annotated[Optional[list[str]], typer.Option("-D",
        help="Macro NAME or NAME=VALUE. Repeatable.")] = None,
    resource_usage: Annotated[bool, typer.Option("--resource-usage",
        help="Have ptxas print registers, spills and shared memory per kernel.")] = False,
    keep: Annotated[bool, typer.Option("--keep", "-keep",
        help="Keep every intermediate file and stages.json (in ./<name>.nvstage unless "
        "--keep-dir says where), as nvcc -keep.")] = False,
    keep_dir: Annotated[Optional[str], typer.Option("--keep-dir", "-keep-dir",
        help="Folder for the kept files; implies --keep.")] = None,
    show: Annotated[Optional[str], typer.Option("--show", metavar="SECTIONS",
        help="After the build, show what is inside: a comma list of ptx, sass, resources, "
        "fatbin (or all).")] = None,
    via: Annotated[str, typer.Option("--via",
        help="Compiler path: nvcc (stage by stage) or nvrtc (NVRTC + nvJitLink, in-process).")
        ] = "nvcc",
    name_expr: Annotated[Optional[list[str]], typer.Option("--name-expr",
        help="--via nvrtc: a template kernel to instantiate, e.g. 'scale<float>'. Repeatable.")
        ] = None,
    jobs: Annotated[Optional[int], typer.Option("-j", "--jobs",
        help="Stages to run at once (default: one per core).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache",
        help="Run every stage even when its inputs are unchanged.")] = False,
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Use this nvcc instead of the one from the pip wheels.")] = None,
    json_out: Annotated[bool, typer.Option("--json",
        help="Print the manifest (stages.json) to stdout; tables go to stderr.")] = False,
) -> None:
    """Compile a .cu file as nvcc would, one stage at a time, timing each stage.

    nvstage asks nvcc for its own plan (--dryrun with your flags), runs every stage itself,
    and records each stage's tool, inputs, outputs, sizes and time. With --keep, every
    intermediate file (vadd.ptx, vadd.sm_90.cubin, vadd.fatbin, vadd.cudafe1.cpp, ...) and a
    manifest are left in a folder.

    Examples:

          nvstage compile kernels/vadd.cu --arch sm_90 --keep

          nvstage compile kernels/multi.cu -c --arch sm_80 --arch sm_90 --keep

          nvstage compile kernels/multi.cu -c --gencode arch=compute_90,code=[sm_90,compute_90]

          nvstage compile kernels/saxpy.cu --cubin --arch sm_90 -- -Xptxas -v

          nvstage compile kernels/saxpy.cu --ptx -o saxpy.ptx --json
    """
    from nvstage.compiler.options import CompileOptions
    from nvstage.compiler.driver import compile as run_compile
    from nvstage.report.tables import stage_table, summary_line
    from nvstage.compiler.toolkit import find_toolkit
    from nvstage.cli.progress import LiveStages

    with handled(json_out):
        stops = [name for name, on in (("ptx", ptx), ("cubin", cubin), ("fatbin", fatbin)) if on]
        if len(stops) > 1:
            from nvstage.errors import UsageError

            raise UsageError(f"choose one stop point, not {' and '.join('--' + s for s in stops)}")
        options = CompileOptions(
            archs=tuple(arch or ()), gencodes=tuple(gencode or ()), output=output,
            compile_only=compile_only, stop=stops[0] if stops else None, rdc=rdc,
            opt_level=opt, lineinfo=lineinfo, include_dirs=tuple(include or ()),
            defines=tuple(define or ()), resource_usage=resource_usage,
            extra=tuple(nvcc_args or ()),
        )
        if keep and keep_dir is None:
            # Named after -o when given: two builds of one source keep apart (vadd, vadd_rdc).
            keep_dir = f"{Path(output or source.name).name.rsplit('.', 1)[0]}.nvstage"
        if show:  # a typo in --show should not cost a build
            from nvstage.inspect.view import parse_sections

            parse_sections(show, "build")
        toolkit = find_toolkit(nvcc)
        if via == "nvrtc":
            from nvstage.compiler.nvrtc import compile_nvrtc

            build = compile_nvrtc(source, options, toolkit=toolkit, keep=keep_dir,
                                  name_expressions=tuple(name_expr or ()))
        elif via == "nvcc":
            with LiveStages() as live:
                build = run_compile(source, options, toolkit=toolkit, keep=keep_dir,
                                    observer=live, jobs=jobs, cache=not no_cache)
        else:
            from nvstage.errors import UsageError

            raise UsageError(f"unknown --via {via!r}", hint="choose nvcc or nvrtc")
        for line in build.plan.messages:  # nvcc's own warnings while it planned
            stderr().print(Text(line))
        con = data_console(json_out)
        con.print(stage_table(build, con.width))
        if build.via == "nvrtc":
            from nvstage.compiler.nvrtc import render_name_map

            render_name_map(build, con)
        _tool_output(build)
        stderr().print(Text(summary_line(build)), soft_wrap=True)
        doc = build.to_json()
        if show:
            from nvstage.cli.show import show_build

            doc["show"] = show_build(build, show, con, toolkit=toolkit)
        if json_out:
            emit_json(doc)


def _tool_output(build) -> None:
    """What the tools printed (warnings, ptxas -v), on stderr as nvcc passes it through."""
    err = stderr()
    for run in build.runs:
        # NVRTC's stdout is the name-expression map, already shown as a table.
        outs = (run.stderr,) if build.via == "nvrtc" else (run.stdout, run.stderr)
        text = "\n".join(t.rstrip() for t in outs if t.strip())
        if text and run.ok:
            cached = ", cached" if run.cached else ""
            err.print(Text(f"[{run.stage.index} {run.stage.kind.value} {run.stage.tool}"
                           f"{cached}]", style="dim"))
            err.print(Text(text), soft_wrap=True)
