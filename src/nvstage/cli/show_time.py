"""nvstage show PATH --time: where compile time went, from nvcc's -fdevice-time-trace files (a
trace, or a folder of them: a build folder whose compiles were traced)."""

from __future__ import annotations


def show_time(path, top: int, json_out: bool, other=None) -> None:
    """``other``: any of show's other options given (they are one artifact's, not traces')."""
    from nvstage.cli.common import emit_json
    from nvstage.errors import ArtifactError, UsageError
    from nvstage.inspect.compile_time import summarize_path
    from nvstage.inspect.names import demangle_all
    from nvstage.report.terminal.compile_time import render_compile_time
    from nvstage.report.terminal.console import data_console

    if other:
        raise UsageError("--time reads compile-time traces: it takes --top and --json alone",
                         hint=f"nvstage show {path} --time")
    if top < 1:
        raise UsageError(f"--top {top}: show at least one row of each table")
    summary = summarize_path(path)
    if not summary.units:
        raise ArtifactError(f"{path}: no nvcc time trace in it",
                            hint="build with -fdevice-time-trace - (nvcc writes OUT.json beside "
                                 "each object), or through the launcher with "
                                 "NVSTAGE_TIME_TRACE=1")
    doc = summary.to_json(top)
    mangled = [r["name"] for k in ("functions_nvvm", "functions_ptxas") for r in doc[k]]
    names = demangle_all(mangled + [a["subject"] for a in doc["advice"]
                                    if a["rule"] == "one-function"])
    for k in ("functions_nvvm", "functions_ptxas"):
        for r in doc[k]:
            r["demangled"] = names.get(r["name"], r["name"])
    for a in doc["advice"]:
        if a["rule"] == "one-function":
            a["demangled"] = names.get(a["subject"], a["subject"])
    render_compile_time(doc, data_console(json_out), top=top)
    if json_out:
        emit_json(doc)


def diff_time(a, b, all_rows: bool, json_out: bool) -> None:
    """``nvstage diff A B --time``: two builds' compile time, from their traces."""
    from nvstage.cli.common import emit_json
    from nvstage.errors import ArtifactError, UsageError
    from nvstage.inspect.compile_time_diff import diff_time as compare
    from nvstage.inspect.names import demangle_all
    from nvstage.report.terminal.compile_time import render_time_diff
    from nvstage.report.terminal.console import data_console

    if b is None:
        raise UsageError("diff --time compares two builds' traces: give A and B",
                         hint="nvstage diff build-before build-after --time")
    result = compare(a, b)
    if not result.rows:
        raise ArtifactError(f"no nvcc time trace in {a} or {b}",
                            hint="build with -fdevice-time-trace -, or through the launcher "
                                 "with NVSTAGE_TIME_TRACE=1")
    names = demangle_all([r.name for r in result.rows if r.kind == "function"])
    render_time_diff(result, data_console(json_out), all_rows=all_rows, names=names)
    if json_out:
        emit_json(result.to_json())
