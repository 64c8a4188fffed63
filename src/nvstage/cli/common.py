"""What every command shares: JSON on stdout, and a library error turned into one message and
its exit code (the consoles and tables are ``report.terminal``)."""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from nvstage.errors import NvstageError, UsageError
from nvstage.report.terminal.console import columns_ok, emit_json, print_error, print_plain_error, say

__all__ = ["drop_junk_columns", "emit_json", "error_out", "handled"]


def drop_junk_columns() -> None:
    """Forget a $COLUMNS that is no width: rich (under typer's --help too) would read
    ``99999999`` as one and render hundreds of MB, or fail on ``10**20``."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and not columns_ok(columns.strip()):
        del os.environ["COLUMNS"]


def error_out(e: NvstageError, json_mode: bool, *, plain: bool = False) -> None:
    """Say an error once. With --json: the whole error (message, hint, further problems, a
    tool's output) as the JSON document on stdout, and only its first line on stderr, so a
    log shows what failed without a second copy. Without: the message, the further problems
    and the hint on stderr. ``plain``: no console (a process about to end abruptly)."""
    if json_mode:
        emit_json(e.to_json())
        print_plain_error(e.message.split("\n", 1)[0])
    elif plain:
        print_plain_error(e.message, e.hint, e.more)
    else:
        print_error(e.message, e.hint, e.more)


@contextmanager
def without_collector() -> Iterator[None]:
    """One build with Python's cyclic collector off, on again after it if it was on: its
    passes over the pipeline's imports (some 24 000 objects) are CPU spent before nvcc's first
    tool, for cycles the process's end frees anyway."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


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
        error_out(e, json_mode)
        raise SystemExit(e.exit_code) from None
    except OSError as e:
        # A name the system cannot even look up (past 255 bytes a component) is the name
        # given, never a bug: one line, wherever a reader met it (the readers say so
        # themselves; this catches the one that asks pathlib first). Others keep their
        # traceback.
        if e.errno != errno.ENAMETOOLONG or isinstance(e, NvstageError):
            raise
        from nvstage.files import shown_path

        err = UsageError(f"cannot use {shown_path(e.filename or '?')}: {e.strerror}",
                         hint="a file or folder name is at most 255 bytes")
        error_out(err, json_mode, plain=True)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", None) or signal.SIGINT
        with suppress(OSError):  # after SIGHUP the terminal may be gone
            say("interrupted" if signum == signal.SIGINT else
                f"terminated by {signal.Signals(signum).name}")
        raise SystemExit(128 + signum) from None
