"""A check result as text for CI: GitHub workflow annotations and a Markdown job summary.

Pure: a ``CheckResult`` in, text out.
"""

from __future__ import annotations

import os

from nvstage.check.gate import UNMATCHED_WORDS, CheckResult, fmt_value
from nvstage.report.units import plural


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _rel(path: str | None, base: str | None) -> str | None:
    if not path:
        return None
    base = os.path.abspath(base or os.getcwd())
    p = os.path.abspath(path)
    return os.path.relpath(p, base) if p.startswith(base.rstrip("/") + "/") else p


def github_annotations(result: CheckResult, *, base: str | None = None) -> str:
    """One ``::error`` workflow command per violation (file and line where known), so GitHub
    marks the kernel's line in the pull request, and one ``::notice`` per kernel or cubin
    only one side of the baseline has. ``base``: the repository root."""
    out = []
    for v in result.violations:
        props = []
        f = _rel(v.file, base)
        if f:
            props.append(f"file={_gh_prop(f)}")
            if v.line:
                props.append(f"line={v.line}")
        props.append("title=" + _gh_prop(f"nvstage check: {v.metric}"
                                         + (" vs baseline" if v.against == "baseline" else "")))
        out.append(f"::error {','.join(props)}::{_gh_data(v.message)}")
    for u in result.failed_units:
        f = _rel(u.source, base)
        where = f"file={_gh_prop(f)}," if f else ""
        out.append(f"::error {where}title=nvstage check%3A not checked::{_gh_data(u.message)}")
    for u in result.unmatched:
        title = _gh_prop(f"nvstage check: {u.kind} vs baseline")
        out.append(f"::notice title={title}::{_gh_data(u.message)}")
    if result.passed:
        out.append(f"::notice title=nvstage check::{_gh_data(summary_line(result))}")
    return "\n".join(out) + "\n"


def summary_line(result: CheckResult) -> str:
    n, failed = len(result.violations), len(result.failed_units)
    if result.passed:
        return f"passed: {plural(result.checked, 'limit')} checked, no violations"
    line = f"failed: {plural(n, 'violation')} of {plural(result.checked, 'limit')} checked"
    if failed:
        line += (f"; {failed} translation unit{'s' if failed != 1 else ''} not checked: "
                 f"{'their' if failed != 1 else 'its'} last build failed")
    return line


def _md(text) -> str:
    """Plain text for a Markdown table cell: no HTML, no emphasis (``float*, float*``), no
    links, and no pipe or newline that would break the row."""
    out = str(text).replace("\\", "\\\\")
    for ch in "*`[]|":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ").replace("<", "&lt;")


def _md_code(text) -> str:
    """A code span for a Markdown table cell: literal text, so only the pipe (which GitHub
    splits the row on even inside a code span) and backticks need care."""
    text = str(text).replace("|", "\\|").replace("\n", " ")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def markdown_summary(result: CheckResult, *, title: str = "nvstage check") -> str:
    """A job summary: the verdict, the violations, every kernel's numbers, then what only
    one side of the baseline has."""
    m = result.measurements
    icon = "✅" if result.passed else "❌"
    lines = [f"## {icon} {title}: {summary_line(result)}", "",
             f"Source: {_md_code(os.path.basename(m.source))}; arches in {_md(m.arches_from)}: "
             f"{', '.join(m.arches) or 'none'}", ""]
    if result.violations:
        lines += ["| kernel | arch | metric | value | limit | against |",
                  "|---|---|---|---:|---:|---|"]
        for v in result.violations:
            lines.append(f"| {_md(v.kernel or '(build)')} | {_md(v.arch or '')} | {v.metric} | "
                         f"{_md(fmt_value(v.value) if v.value is not None else '-')} | "
                         f"{_md(fmt_value(v.limit))} | {v.against} |")
        lines.append("")
    if result.failed_units:
        lines += ["| not checked | why |", "|---|---|"]
        for u in result.failed_units:
            lines.append(f"| {_md_code(u.unit)} | {_md(u.message)} |")
        lines.append("")
    if m.kernels:
        lines += ["| kernel | arch | registers | spill bytes | static shared |",
                  "|---|---|---:|---:|---:|"]
        for k in m.kernels:
            spill = "?" if k.spill_bytes is None else k.spill_bytes
            lines.append(f"| {_md_code(k.demangled)} | {k.arch} | {k.registers} | {spill} | "
                         f"{k.shared_bytes} |")
        lines.append("")
    if result.unmatched:
        lines += ["| not compared with the baseline | arch | |", "|---|---|---|"]
        for u in result.unmatched:
            what = _md_code(u.kernel) if u.kernel else "(cubin)"
            lines.append(f"| {what} | {u.arch} | {UNMATCHED_WORDS[u.kind]} |")
        lines.append("")
    for n in result.notes:
        lines.append(f"> {_md(n)}")
    return "\n".join(lines).rstrip() + "\n\n"
