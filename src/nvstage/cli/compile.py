"""nvstage compile: nvcc's plan, run stage by stage, every artifact kept and shown.

Not a typer command: its command line is nvcc's (``-std=c++17``, ``-Xcompiler -O2``), which
click cannot express, so it is read with nvcc's own grammar (``compiler/cmdline.py``).
"""

from __future__ import annotations

import sys

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
  --via nvcc|nvrtc|triton    the staged nvcc driver (default), NVRTC + nvJitLink in-process,
                             or a Triton kernel's own stages (nvstage compile --via triton -h)
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


_answered = [False]  # the last command was answered whole from the cache


def was_answered() -> bool:
    return _answered[0]


def main(argv: list[str]) -> int:
    """``nvstage compile ARGS``: 0 on success, else the error's exit code."""
    _answered[0] = _answered_whole(argv)
    if _answered[0]:
        return 0
    from nvstage.cli.compile_triton import main as triton_main, via_triton

    if via_triton(argv):  # a Python file: Triton's grammar, not nvcc's
        return triton_main(argv)
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


# -- the whole command from the cache --------------------------------------------------------
# A command the stage pipeline built twice (the second time from the stage cache alone), with
# every file it read unchanged, is answered as the launcher answers one (``compiler/hit.py``):
# its outputs restored, and what it printed then printed again, with no toolkit search, no
# rich and no plan. Only where what it prints
# can be kept: nothing to keep, show or print as JSON, and no terminal (rich lays a terminal
# out by its width and colours; pipes and CI logs get the plain layout kept in the entry).
_NOT_WHOLE = frozenset({"--json", "--show", "--keep", "-keep", "--keep-dir", "-keep-dir",
                        "--no-cache", "--via", "--name-expr", "-h", "--help"})
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")


def _whole_ok(argv: list[str], env) -> bool:
    """Whether this command line may be answered (and recorded) whole."""
    for w in argv:
        if w == "--":
            break
        if w.split("=", 1)[0] in _NOT_WHOLE:
            return False
    if env.get("NVSTAGE_CACHE", "1") == "0" or any(env.get(v) for v in _RICH_ENV):
        return False
    return not (sys.stdout.isatty() or sys.stderr.isatty())


def _answered_whole(argv: list[str]) -> bool:
    import os
    import time

    t0 = time.perf_counter()
    env = os.environ
    if not _whole_ok(argv, env):
        return False
    from nvstage.compiler import hit

    try:
        meta = hit.answer_cli(argv, hit.nvcc_named(argv, env), os.getcwd(), env)
    except Exception:  # never a reason to fail: the pipeline answers instead
        return False
    if meta is None:
        return False
    from nvstage.report.units import fmt_time

    view = meta["view"]
    for text, stream in ((view["before"], sys.stderr), (view["table"], sys.stdout),
                         (view["after"], sys.stderr)):
        if text:
            stream.write(text)
            stream.flush()
    hits = meta.get("hits", 0)
    sys.stderr.write(f"{view['stages']} stages in {fmt_time(time.perf_counter() - t0)}, "
                     f"cache {hits} hit{'s' if hits != 1 else ''}, 0 misses (the whole "
                     f"command at once){view['tail']}\n")
    sys.stderr.flush()
    return True


class _Marked:
    """A stream that notes how much ``other`` held when it was first written to: what the
    stage table's console printed on stderr before the table, and after."""

    def __init__(self, other):
        import io

        self.buf, self.other, self.at = io.StringIO(), other, None

    def write(self, text: str) -> int:
        if self.at is None:
            self.at = len(self.other.getvalue())
        return self.buf.write(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _view(build) -> dict | None:
    """What this command prints when it is answered whole: the output a build whose every
    stage came from the cache prints into a pipe, rendered now with the renderer itself."""
    import dataclasses
    import io
    import os

    from nvstage.report.terminal.build import render_build, summary_line
    from nvstage.report.terminal.console import data_console

    view = dataclasses.replace(build, runs=[dataclasses.replace(r, cached=True)
                                            for r in build.runs])
    err = io.StringIO()
    out = _Marked(err)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        render_build(view, data_console(False))
    finally:
        sys.stdout, sys.stderr = saved
    said, summary = err.getvalue(), summary_line(view) + "\n"
    if out.at is None or not said.endswith(summary):
        return None
    tail = f"; output {os.path.relpath(build.output, build.cwd)}" if build.output else ""
    return {"before": said[:out.at], "table": out.buf.getvalue(),
            "after": said[out.at:-len(summary)], "stages": len(build.runs),
            "tail": f"{tail}\ntoolkit: {build.toolkit.describe()}"}


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

    import os
    import time
    from pathlib import Path

    started_ns = time.time_ns()
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
            whole = _whole_ok(argv, os.environ)
            pending = []

            def remember(build, work, seen):  # what the same command is answered from next
                from nvstage.compiler import hit

                # Once the command repeats (every stage a hit): a one-off build does not pay
                # for an entry, and the first repeat still goes through the stage cache.
                if (build.cache or {}).get("misses", 1) != 0:
                    return

                env = dict(os.environ)
                hit.remember_nvcc(nvcc, os.getcwd(), env, toolkit.nvcc, toolkit.source)
                pending.append(hit.prepare(
                    toolkit.nvcc, hit.cli_args(argv, env), build.cwd, env, build, work,
                    hit.outputs_of(build, build.cwd, work), "", "", started_ns, seen=seen))

            with LiveStages() as live:
                build = run_compile(req.source, req.options, toolkit=toolkit, keep=keep,
                                    observer=live, jobs=req.jobs, cache=not req.no_cache,
                                    on_built=remember if whole else None)
        else:
            raise UsageError(f"unknown --via {req.via!r}", hint="choose nvcc, nvrtc or triton")
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
        if req.via == "nvcc" and pending and pending[0] is not None:
            view = _view(build)
            if view is not None:
                pending[0].store(view)


def _keep_folder(req):
    """The keep folder as a context: a temporary one while --show reads it without --keep."""
    import contextlib
    import tempfile

    if req.keep_folder is not None or not req.show:
        return contextlib.nullcontext(req.keep_folder)
    return tempfile.TemporaryDirectory(prefix="nvstage-show-")


def _same_file(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
