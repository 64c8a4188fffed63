"""The consoles (data to stdout, chatter to stderr), plain-text tables, and the one way an
error, a note or a written file is said. rich is imported when a console is made, not here:
the launcher and ``--help`` never draw a table."""

from __future__ import annotations

import os
import sys
from contextlib import suppress

# Widths taken from $COLUMNS; anything else there (abc, -5, 10**20) is ignored, not fatal.
COLUMNS = range(20, 10_001)


def columns_ok(text: str) -> bool:
    return text.isdecimal() and len(text) < 6 and int(text) in COLUMNS


def _width() -> int | None:
    # Pipes and tests get a fixed, wide layout; terminals keep their own width.
    columns = os.environ.get("COLUMNS", "").strip()
    if columns:
        if columns_ok(columns):
            return int(columns)
        # rich would read the junk again when given no width: measure the terminal here.
        if sys.stdout.isatty():
            with suppress(OSError):
                return max(COLUMNS.start, os.get_terminal_size(sys.stdout.fileno()).columns)
            return 80
    return None if sys.stdout.isatty() else 120


def stdout():
    from rich.console import Console

    return Console(file=sys.stdout, width=_width(), highlight=False, soft_wrap=False)


def stderr():
    from rich.console import Console

    return Console(file=sys.stderr, width=_width(), highlight=False, soft_wrap=False)


def text_console(file):
    """A console writing into ``file`` (a buffer) as ``stdout()`` writes into a pipe."""
    from rich.console import Console

    return Console(file=file, width=_width(), highlight=False, soft_wrap=False)


def data_console(json_mode: bool):
    """Where human-readable results go: stdout, unless stdout carries JSON."""
    return stderr() if json_mode else stdout()


def emit_json(obj) -> None:
    """A JSON document on stdout. Standard JSON only: NaN and infinities become null
    (json.dumps would print NaN)."""
    import json

    from nvstage.artifacts import json_safe

    sys.stdout.write(json.dumps(json_safe(obj), indent=2, default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


def say(text: str, *, soft_wrap: bool = False, style: str | None = None) -> None:
    """One plain line on stderr (a note, "wrote FILE", progress): text, never markup."""
    stderr().print(text, markup=False, soft_wrap=soft_wrap, style=style)


def notes(lines, *, soft_wrap: bool = False) -> None:
    for line in lines:
        say(f"note: {line}", soft_wrap=soft_wrap)


def print_error(message: str, hint: str | None = None, more=()) -> None:
    """``error: ...`` (one line for each of ``more``, the further problems, then
    ``hint: ...``) on stderr. Text, not markup: messages carry brackets
    (code=[sm_90,compute_90]) and paths; soft_wrap: a reproduce command must stay one line
    to be pasted back."""
    from rich.text import Text

    con = stderr()
    for text in (message, *more):
        con.print(Text.assemble(("error: ", "bold red"), text), soft_wrap=True)
    if hint:
        con.print(Text.assemble(("hint: ", "dim"), hint), soft_wrap=True)


def print_plain_error(message: str, hint: str | None = None, more=()) -> None:
    """The error as plain lines on stderr, flushed, no console: for a process about to end
    without its finalizers, and for a name the system could not look up."""
    sys.stderr.write("".join(f"error: {m}\n" for m in (message, *more))
                     + (f"hint: {hint}\n" if hint else ""))
    sys.stdout.flush()
    sys.stderr.flush()


def plain_table(*, title=None, box_style: str = "SIMPLE_HEAD", **kw):
    """A table whose string cells are plain text, never markup: kernel names, paths and
    targets come from files that may be anyone's ("[/x]" in one would end the command with
    rich's MarkupError, and "[red]" would restyle the output)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    class PlainTable(Table):
        def add_row(self, *cells, **kw) -> None:
            super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kw)

    if isinstance(title, str):
        title = Text(title, style="table.title")
    return PlainTable(box=getattr(box, box_style), title=title, **kw)
