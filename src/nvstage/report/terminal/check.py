"""``nvstage check`` out: the report in the format asked for (a table, JSON, GitHub
annotations, Markdown), the files asked for (a baseline, a job summary), the verdict line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nvstage.report.terminal.console import emit_json, notes, plain_table, say, stdout

FORMATS = ("text", "json", "github", "markdown")


def render(result, fmt: str = "text", *, con=None, summary: Path | None = None,
           write_baseline: Path | None = None) -> None:
    """A ``gate.CheckResult``: ``write_baseline`` (its JSON) and ``summary`` (Markdown,
    appended) written first, then ``fmt`` on stdout, then the notes and the verdict line on
    stderr."""
    from nvstage.files import append_text, write_json_atomic
    from nvstage.report.checks import github_annotations, markdown_summary, summary_line

    doc = result.to_json()
    if write_baseline:
        _write(write_baseline, "--write-baseline", lambda: write_json_atomic(write_baseline,
                                                                           doc))
        say(f"check report written to {write_baseline}")
    if summary:
        # A job summary file is shared by every step of a job: add to it, never replace it.
        _write(summary, "--summary", lambda: append_text(summary, markdown_summary(result)))
    if fmt == "json":
        emit_json(doc)
    elif fmt == "github":
        # Paths relative to the repository GitHub checked out, else to the build's sources.
        _out(github_annotations(result, base=os.environ.get("GITHUB_WORKSPACE")
                                or getattr(result, "source_folder", None)))
    elif fmt == "markdown":
        _out(markdown_summary(result))
    else:
        _text(result, con)
    notes(result.notes + [u.message for u in result.unmatched])
    say(f"nvstage check {summary_line(result)}")


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _write(path: Path, option: str, write) -> None:
    """Run ``write``; a path that cannot be written becomes one message, not a traceback."""
    from nvstage.files import is_folder
    from nvstage.errors import UsageError, WriteError

    if is_folder(path):
        raise UsageError(f"{option} {path} is a folder", hint="give a file path")
    try:
        write()
    except WriteError as e:  # its message names the file and what is wrong with it
        raise UsageError(f"{option}: {e.message}", hint=e.hint) from None
    except OSError as e:
        raise UsageError(f"{option}: cannot write {path}: {e.strerror or e}") from None


def _text(result, con) -> None:

    con = con or stdout()
    m = result.measurements
    t = plain_table(pad_edge=False, key=2)
    for col, just in (("kernel", "left"), ("arch", "left"), ("registers", "right"),
                      ("spill bytes", "right"), ("static shared", "right")):
        t.add_column(col, justify=just)
    for k in m.kernels:
        t.add_row(k.demangled, k.arch, str(k.registers),
                  "?" if k.spill_bytes is None else str(k.spill_bytes), str(k.shared_bytes))
    if m.kernels:
        con.print(t)
    con.print(f"arches in {m.arches_from}: {', '.join(m.arches) or 'none'}", markup=False)
    for v in result.violations:
        where = f"{os.path.relpath(v.file)}:{v.line}: " if v.file and v.line else ""
        con.print(f"FAIL {where}{v.message}", markup=False)
    for u in result.failed_units:
        con.print(f"FAIL {os.path.relpath(u.source) if u.source else u.unit}: {u.why}",
                  markup=False)
