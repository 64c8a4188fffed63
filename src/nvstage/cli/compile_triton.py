"""nvstage compile FILE.py --via triton: a Triton kernel through Triton's own stages.

Its grammar is ``compiler.triton_cmdline``'s; the build is ``compiler.triton.compile_triton``,
the table ``report.terminal.build`` and ``.triton``.
"""

from __future__ import annotations

import sys

def via_triton(argv: list[str]) -> bool:
    """Whether ``nvstage compile ARGS`` asks for ``--via triton``."""
    for i, w in enumerate(argv):
        if w == "--":
            return False
        if w == "--via=triton" or (w == "--via" and argv[i + 1:i + 2] == ["triton"]):
            return True
    return False


def main(argv: list[str]) -> int:
    """``nvstage compile ... --via triton``: 0 on success, else the error's exit code."""
    from nvstage.cli.common import handled
    from nvstage.compiler.triton.triton_cmdline import TRITON_HELP, parse

    json_out = "--json" in argv
    try:
        with handled(json_out):
            got = parse(argv)
            if got.get("help"):
                sys.stdout.write(TRITON_HELP)
                return 0
            _compile(got)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def _compile(got: dict) -> None:
    import contextlib
    import tempfile

    from nvstage.cli.common import emit_json
    from nvstage.compiler.toolkit.locate import find_toolkit
    from nvstage.compiler.triton.stages import compile_triton
    from nvstage.compiler.triton.triton_cmdline import request
    from nvstage.report.terminal.build import render_build
    from nvstage.report.terminal.console import data_console

    source, options, keep = request(got)
    if got.get("show"):  # a typo in --show should not cost a build
        from nvstage.inspect.view import parse_sections

        parse_sections(got["show"], "build")
    toolkit = find_toolkit(got.get("nvcc"))
    folder = contextlib.nullcontext(keep) if keep is not None or not got.get("show") else \
        tempfile.TemporaryDirectory(prefix="nvstage-show-")
    with folder as keep_dir:
        build = compile_triton(source, options, toolkit=toolkit, keep=keep_dir)
        con = data_console(bool(got.get("json")))
        temporary = keep is None and keep_dir is not None  # --show's, gone after it
        render_build(build, con, kept=not temporary)  # the stage table, Triton's, the summary
        doc = build.to_json()
        if temporary:
            doc["keep_dir"] = None
        if got.get("show"):
            from nvstage.cli.show import show_build

            doc["show"] = show_build(build, got["show"], con, toolkit=toolkit)
        if got.get("json"):
            emit_json(doc)
