"""nvstage show TRITON_CACHE_DIR: every kernel of a Triton cache folder, or one in detail."""

from __future__ import annotations


def show_cache(folder, kernel, sections, lineinfo: bool, listing: bool, nvcc,
               json_out: bool) -> None:
    from nvstage.cli.common import emit_json
    from nvstage.errors import UsageError
    from nvstage.inspect import triton_cache
    from nvstage.report.terminal.console import data_console

    con = data_console(json_out)
    if kernel is None:
        if sections or lineinfo or listing:
            raise UsageError("in a Triton cache the sections and listings are one kernel's: "
                             "give --kernel NAME", hint=f"nvstage show {folder} lists them")
        from nvstage.report.terminal.triton import render_cache

        cache = triton_cache.read_cache(folder)
        render_cache(cache, con)
        if json_out:
            emit_json(cache.to_json())
        return
    from nvstage.report.terminal.show import render_shown

    shown = triton_cache.show_kernel(folder, kernel, sections=sections, lineinfo=lineinfo,
                                     nvcc=nvcc)
    render_shown(shown, con, listing=listing)
    if "lines" in shown.data:
        from nvstage.report.terminal.lines import render_lines

        render_lines(shown.data["lines"], con)
    if json_out:
        emit_json(shown.to_json())
