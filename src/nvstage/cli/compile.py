"""nvstage compile: nvcc's plan, run stage by stage, every artifact kept and shown.

Not a typer command: its command line is nvcc's (``-std=c++17``, ``-Xcompiler -O2``), which
click cannot express, so it is read with nvcc's own grammar (``compiler/cmdline.py``).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

HELP = """\
Usage: nvstage compile SOURCE [nvcc options] [nvstage options]

  Compile a .cu file as nvcc would, one stage at a time, timing each stage.

  nvstage asks nvcc for its own plan (--dryrun with your flags), runs every stage itself,
  and records each stage's tool, inputs, outputs, sizes and time. Any nvcc option works,
  spelt as nvcc spells it (-std=c++17, -Xcompiler -O2, -Xptxas=-v, -rdc=true,
  --generate-code=arch=compute_90,code=sm_90, --options-file FILE); nvcc judges it.

nvcc options nvstage reads itself (the rest go to nvcc unchanged):
  -o FILE, --output FILE     output file
  -arch ARCH, --arch ARCH    GPU arch (sm_90, sm_90a, compute_90, native). Repeated, every
                             arch named is built (nvcc itself keeps only the last one)
  -gencode SPEC              as nvcc: arch=compute_90,code=[sm_90,compute_90]; repeatable
  -c, -dc, -ptx, -cubin, -fatbin   stop points, as nvcc
  -rdc=true, --rdc           relocatable device code (adds the device-link stages)
  -O3, -I DIR, -D NAME=VALUE, -lineinfo, -maxrregcount=N, -dlto, --resource-usage

nvstage options:
  --keep, -keep              keep every intermediate and stages.json in NAME.nvstage/
                             (NAME from -o, else the source), as nvcc -keep keeps its files
  --keep-dir DIR             keep them in DIR instead; implies --keep
  --show SECTIONS            after the build, show what is inside: a comma list of ptx,
                             sass, resources, fatbin (or all)
  --via nvcc|nvrtc           the staged nvcc driver (default), or NVRTC + nvJitLink in-process
  --name-expr EXPR           --via nvrtc: a template kernel to instantiate, e.g. 'scale<float>'
  -j N, --jobs N             stages to run at once (default: one per core)
  --no-cache                 run every stage even when its inputs are unchanged
  --nvcc PATH                use this nvcc instead of the pip wheels' ($NVSTAGE_NVCC too)
  --json                     print the manifest (stages.json) to stdout; tables go to stderr
  -h, --help                 this help (nvcc --help lists nvcc's options)
  --                         everything after it goes to nvcc unchanged

Examples:
  nvstage compile kernels/vadd.cu -arch=sm_90 --keep
  nvstage compile kernels/multi.cu -c -arch sm_80 -arch sm_90 --keep
  nvstage compile kernels/multi.cu -c --generate-code=arch=compute_90,code=[sm_90,compute_90]
  nvstage compile kernels/saxpy.cu -cubin -arch=sm_90 -Xptxas -v
  nvstage compile kernels/saxpy.cu -ptx -o saxpy.ptx --json
"""


def main(argv: list[str]) -> int:
    """``nvstage compile ARGS``: 0 on success, else the error's exit code."""
    from nvstage.cli.common import handled
    from nvstage.compiler.cmdline import nvcc_choice, wants_help

    if wants_help(argv):
        sys.stdout.write(HELP)
        return 0
    json_out = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
    try:
        with handled(json_out):
            _compile(argv, nvcc_choice(argv))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def _compile(argv: list[str], nvcc: str | None) -> None:
    from nvstage.cli.common import emit_json
    from nvstage.report.terminal.console import data_console
    from nvstage.report.terminal.progress import LiveStages
    from nvstage.compiler.cmdline import parse
    from nvstage.compiler.driver import compile as run_compile
    from nvstage.compiler.nvcc_args import grammar_for
    from nvstage.compiler.toolkit import find_toolkit
    from nvstage.errors import UsageError
    from nvstage.report.terminal.build import render_build

    toolkit = find_toolkit(nvcc)
    req = parse(argv, grammar_for(toolkit.nvcc))
    if req.source is None:
        raise UsageError("no source file given", hint="nvstage compile kernels/vadd.cu "
                                                       "-arch=sm_90 (see nvstage compile -h)")
    if req.show:  # a typo in --show should not cost a build
        from nvstage.inspect.view import parse_sections

        parse_sections(req.show, "build")
    # --show reads the artifacts after the build: without --keep they live in a temporary
    # folder until it has (nvstage's own, removed after; the manifest names no keep folder).
    with _keep_folder(req) as keep:
        if req.via == "nvrtc":
            from nvstage.compiler.driver import check_source
            from nvstage.compiler.nvrtc import compile_nvrtc

            check_source(Path(req.source), req.source)
            if req.options.output and _same_file(req.options.output, req.source):
                raise UsageError(f"-o {req.options.output} is the source: the build would "
                                 "overwrite it", hint="give -o another name")

            build = compile_nvrtc(req.source, req.options, toolkit=toolkit, keep=keep,
                                  name_expressions=req.name_exprs)
        elif req.via == "nvcc":
            with LiveStages() as live:
                build = run_compile(req.source, req.options, toolkit=toolkit, keep=keep,
                                    observer=live, jobs=req.jobs, cache=not req.no_cache)
        else:
            raise UsageError(f"unknown --via {req.via!r}", hint="choose nvcc or nvrtc")
        con = data_console(req.json)
        render_build(build, con)
        doc = build.to_json()
        if keep is not None and req.keep_folder is None:
            doc["keep_dir"] = None  # the temporary folder --show read from is gone
        if req.show:
            from nvstage.cli.show import show_build

            doc["show"] = show_build(build, req.show, con, toolkit=toolkit)
        if req.json:
            emit_json(doc)


@contextlib.contextmanager
def _keep_folder(req):
    if req.keep_folder is not None or not req.show:
        yield req.keep_folder
        return
    with tempfile.TemporaryDirectory(prefix="nvstage-show-") as tmp:
        yield tmp


def _same_file(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
