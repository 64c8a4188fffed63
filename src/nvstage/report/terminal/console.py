"""The consoles (data to stdout, chatter to stderr), plain-text tables, and the one way an
error, a note or a written file is said. rich is imported when a console is made, not here:
the launcher and ``--help`` never draw a table."""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from functools import cache

# Widths taken from $COLUMNS; anything else there (abc, -5, 10**20) is ignored, not fatal.
COLUMNS = range(20, 10_001)


def columns_ok(text: str) -> bool:
    return text.isdecimal() and len(text) < 6 and int(text) in COLUMNS


# What "no limit" is when output goes to a pipe or a file: tables at their natural width,
# one row a line, for grep and diff (a width given in $COLUMNS still holds).
UNLIMITED = COLUMNS.stop - 1


def _width(stream) -> int | None:
    """A console's width: $COLUMNS where it holds a width; on a terminal (``stream`` is one)
    the terminal's; into a pipe or a file, none."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns_ok(columns):
        return int(columns)
    if stream is None or not stream.isatty():
        return UNLIMITED
    if columns:
        # rich would read the junk again when given no width: measure the terminal here.
        with suppress(OSError):
            return max(COLUMNS.start, os.get_terminal_size(stream.fileno()).columns)
        return 80
    return None


def _console(file, width: int | None):
    kind, trim = _console_kind()
    con = kind(file=file, width=width, highlight=False, soft_wrap=False)
    con.push_render_hook(trim)
    return con


@cache
def _console_kind():
    """The console class, and the hook every line printed through it passes: its control
    characters written out (``errors.printable``: a name from a document, a Triton cache
    folder's, a build record's, never sends the terminal an escape sequence; rich's own styles
    and cursor moves are control segments, apart), and its trailing blanks taken off (a table
    pads its lines to its width, and rich leaves the blank where it wraps a sentence)."""
    from rich.console import Console, RenderHook
    from rich.segment import Segment

    from nvstage.errors import printable

    class Uncropped(Console):
        # Lines are not cropped at the width: a table's stacked record keeps a value longer
        # than the terminal whole (the terminal folds it); the rest is wrapped to the width.
        def print(self, *objects, crop: bool = False, **kw) -> None:
            super().print(*objects, crop=crop, **kw)

    class Trimmed:
        def __init__(self, renderable) -> None:
            self.renderable = renderable

        def __rich_console__(self, console, options):
            blanks: list = []  # the blanks seen since the last text: kept unless a line ends
            for seg in console.render(self.renderable, options):
                if seg.control:
                    yield from blanks
                    blanks.clear()
                    yield seg
                    continue
                for n, part in enumerate(seg.text.split("\n")):
                    if n:
                        blanks.clear()
                        yield Segment.line()
                    part = printable(part, lines=True)
                    text = part.rstrip(" \t")
                    if text:
                        yield from blanks
                        blanks.clear()
                        yield Segment(text, seg.style)
                    if len(text) < len(part):
                        blanks.append(Segment(part[len(text):], seg.style))
            yield from blanks  # a line printed without its end may go on

    class Trim(RenderHook):
        def process_renderables(self, renderables):
            return [Trimmed(r) for r in renderables]

    return Uncropped, Trim()


def load() -> None:
    """Import what a console needs (rich), ahead of the first one (``progress.warm_up``)."""
    _console_kind()


def stdout():
    return _console(sys.stdout, _width(sys.stdout))


def stderr():
    return _console(sys.stderr, _width(sys.stderr))


def text_console(file):
    """A console writing into ``file`` (a buffer) as ``stdout()`` writes into a pipe."""
    return _console(file, _width(None))


def data_console(json_mode: bool):
    """Where human-readable results go: stdout, unless stdout carries JSON."""
    return stderr() if json_mode else stdout()


def emit_json(obj) -> None:
    """A JSON document on stdout. Standard JSON only: NaN and infinities become null
    (json.dumps would print NaN)."""
    import json

    from nvstage.files import json_safe

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
    from nvstage.errors import printable

    sys.stderr.write(printable("".join(f"error: {m}\n" for m in (message, *more))
                               + (f"hint: {hint}\n" if hint else ""), lines=True))
    sys.stdout.flush()
    sys.stderr.flush()


def plain_table(*, title=None, box_style: str = "SIMPLE_HEAD", key: int = 1, **kw):
    """A table whose cells are plain text, never markup, and whose values are never cut
    (``report/terminal/table.py``): too wide for the width, it is drawn as stacked records,
    each row named by its first ``key`` cells."""
    from nvstage.report.terminal.table import plain_table as make

    return make(title=title, box_style=box_style, key=key, **kw)
