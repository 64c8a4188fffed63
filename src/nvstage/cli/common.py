"""What every command shares: consoles (data to stdout, chatter to stderr), JSON, errors."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from nvstage.errors import NvstageError, UsageError


# Widths taken from $COLUMNS; anything else there (abc, -5, 10**20) is ignored, not fatal.
_COLUMNS = range(20, 10_001)


def _columns_ok(text: str) -> bool:
    return text.isdecimal() and len(text) < 6 and int(text) in _COLUMNS


def drop_junk_columns() -> None:
    """Forget a $COLUMNS that is no width: rich (under typer's --help too) would read
    ``99999999`` as one and render hundreds of MB, or fail on ``10**20``."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and not _columns_ok(columns.strip()):
        del os.environ["COLUMNS"]


def _width() -> int | None:
    # Pipes and tests get a fixed, wide layout; terminals keep their own width.
    columns = os.environ.get("COLUMNS", "").strip()
    if columns:
        if _columns_ok(columns):
            return int(columns)
        # rich would read the junk again when given no width: measure the terminal here.
        if sys.stdout.isatty():
            with suppress(OSError):
                return max(_COLUMNS.start, os.get_terminal_size(sys.stdout.fileno()).columns)
            return 80
    return None if sys.stdout.isatty() else 120


# rich is imported by the consoles, not here: the launcher and --help never draw a table.
def stdout():
    from rich.console import Console

    return Console(file=sys.stdout, width=_width(), highlight=False, soft_wrap=False)


def stderr():
    from rich.console import Console

    return Console(file=sys.stderr, width=_width(), highlight=False, soft_wrap=False)


def data_console(json_mode: bool):
    """Where human-readable results go: stdout, unless stdout carries JSON."""
    return stderr() if json_mode else stdout()


def emit_json(obj) -> None:
    """Standard JSON only: NaN and infinities become null (json.dumps would print NaN)."""
    from nvstage.artifacts import json_safe

    sys.stdout.write(json.dumps(json_safe(obj), indent=2, default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


@contextmanager
def handled(json_mode: bool = False) -> Iterator[None]:
    """Turn an ``NvstageError`` into one message on stderr and its exit code; no traceback.

    SIGINT, SIGTERM and SIGHUP end the tools a command started (``proc.handle_signals``),
    let cleanups run, and exit with 128 + the signal's number.
    """
    from nvstage.proc import handle_signals

    try:
        with handle_signals():
            yield
    except NvstageError as e:
        from rich.text import Text

        if json_mode:
            emit_json(e.to_json())
        con = stderr()
        # Text, not markup: messages carry brackets (code=[sm_90,compute_90]) and paths.
        # soft_wrap: a reproduce command must stay one line to be pasted back.
        con.print(Text.assemble(("error: ", "bold red"), e.message), soft_wrap=True)
        if e.hint:
            con.print(Text.assemble(("hint: ", "dim"), e.hint), soft_wrap=True)
        raise SystemExit(e.exit_code) from None
    except OSError as e:
        # A name the system cannot even look up (past 255 bytes a component) is the name
        # given, never a bug: one line, wherever a reader met it (the readers say so
        # themselves; this catches the one that asks pathlib first). Others keep their
        # traceback.
        if e.errno != errno.ENAMETOOLONG or isinstance(e, NvstageError):
            raise
        from nvstage.artifacts import shown_path

        err = UsageError(f"cannot use {shown_path(e.filename or '?')}: {e.strerror}",
                         hint="a file or folder name is at most 255 bytes")
        if json_mode:
            emit_json(err.to_json())
        stderr().print(f"error: {err.message}\nhint: {err.hint}", markup=False, soft_wrap=True,
                       highlight=False)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", None) or signal.SIGINT
        with suppress(OSError):  # after SIGHUP the terminal may be gone
            stderr().print("interrupted" if signum == signal.SIGINT else
                           f"terminated by {signal.Signals(signum).name}")
        raise SystemExit(128 + signum) from None
