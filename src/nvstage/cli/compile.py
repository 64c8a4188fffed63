"""nvstage compile: nvcc's plan, run stage by stage, every artifact kept and shown.

Not a typer command: its command line is nvcc's (``-std=c++17``, ``-Xcompiler -O2``), which
click cannot express, so it is read with nvcc's own grammar (``compiler/pipeline/cmdline.py``).
"""

from __future__ import annotations

import sys

from nvstage.cli.transparent import GONE, folder_of, refused_without_folder

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
        return refused_without_folder("Triton", "--json" in argv) or triton_main(argv)
    from nvstage.cli.common import handled, without_collector
    from nvstage.compiler.pipeline.cmdline import COMPILE_HELP, nvcc_choice, wants_help

    if wants_help(argv):
        sys.stdout.write(COMPILE_HELP)
        return 0
    json_out = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
    try:
        with handled(json_out), without_collector():
            _compile(argv, nvcc_choice(argv))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def _terminal() -> bool:
    return sys.stdout.isatty() or sys.stderr.isatty()


def _answered_whole(argv: list[str]) -> bool:
    """A command the stage pipeline built twice (the second time from the stage cache alone),
    with every file it read unchanged, answered as the launcher answers one
    (the hit path): its outputs restored, what it printed then printed again."""
    import os
    import time

    from nvstage.compiler.cache.command.compile_answer import answer_cli, nvcc_named, whole_ok

    t0, env = time.perf_counter(), os.environ
    if not whole_ok(argv, env, terminal=_terminal()):
        return False
    try:
        meta = answer_cli(argv, nvcc_named(argv, env), os.getcwd(), env)
    except Exception:  # never a reason to fail: the pipeline answers instead
        return False
    if meta is None:
        return False
    from nvstage.report.terminal.answered import render_answered

    render_answered(meta["view"], meta.get("hits", 0), time.perf_counter() - t0)
    return True


def _compile(argv: list[str], nvcc: str | None) -> None:
    import os
    import time

    from nvstage.cli.common import emit_json
    from nvstage.compiler.pipeline.cmdline import parse
    from nvstage.compiler.nvcc.grammar import grammar_for
    from nvstage.compiler.toolkit.locate import find_toolkit
    from nvstage.errors import UsageError
    from nvstage.report.terminal.console import data_console

    started_ns = time.time_ns()
    toolkit = find_toolkit(nvcc)
    req = parse(argv, grammar_for(toolkit.nvcc))
    if req.source is None:
        raise UsageError("no source file given", hint="nvstage compile kernels/vadd.cu "
                                                       "-arch=sm_90 (see nvstage compile -h)")
    cwd = folder_of(req)  # GONE, where the folder was removed since (a build's clean)
    if req.show:  # a typo in --show should not cost a build
        from nvstage.inspect.view import parse_sections

        parse_sections(req.show, "build")
    remember = None
    with req.keep_context() as keep:  # a temporary one while --show reads it, without --keep
        if req.via == "nvrtc":
            build = _compile_nvrtc(req, toolkit, keep, cwd)
        elif req.via == "nvcc":
            from nvstage.compiler.pipeline.planning import ask_ahead, source_word, words_for

            # nvcc plans while the pipeline below is imported (``planning``).
            words = words_for(os.fspath(req.source), req.options)
            with ask_ahead(toolkit.nvcc, words, os.path.abspath(cwd), remember=not req.no_cache,
                           kept=keep is not None,
                           source=source_word(words, req.options)) as ahead:
                from nvstage.compiler.pipeline.driver import compile as run_compile
                from nvstage.compiler.cache.command.compile_answer import Remember, whole_ok
                from nvstage.report.terminal.progress import LiveStages

                if cwd != GONE and whole_ok(argv, os.environ, terminal=_terminal()):
                    remember = Remember(argv, nvcc, toolkit.nvcc, toolkit.source, started_ns,
                                        cwd, os.environ)
                with LiveStages() as live:
                    build = run_compile(req.source, req.options, toolkit=toolkit, keep=keep,
                                        cwd=cwd, observer=live, jobs=req.jobs,
                                        cache=not req.no_cache, ahead=ahead,
                                        on_built=remember.on_built if remember else None)
        else:
            raise UsageError(f"unknown --via {req.via!r}", hint="choose nvcc, nvrtc or triton")
        from nvstage.report.terminal.build import render_build, whole_view  # progress.warm_up

        con = data_console(req.json)
        temporary = keep is not None and req.keep_folder is None  # --show's, gone after it
        render_build(build, con, kept=not temporary)
        doc = build.to_json()
        if temporary:
            doc["keep_dir"] = None
        if req.show:
            from nvstage.cli.show import show_build

            doc["show"] = show_build(build, req.show, con, toolkit=toolkit)
        if req.json:
            emit_json(doc)
        if remember is not None and remember.pending is not None:
            remember.store(whole_view(build))


def _compile_nvrtc(req, toolkit, keep, cwd: str):
    from nvstage.compiler.nvrtc import compile_nvrtc

    return compile_nvrtc(req.source, req.options, toolkit=toolkit, keep=keep, cwd=cwd,
                         name_expressions=req.name_exprs)
