"""What every command shares: consoles (data to stdout, chatter to stderr), JSON, errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.text import Text

from ..errors import NvstageError


def _width() -> int | None:
    # Pipes and tests get a fixed, wide layout; terminals keep their own width.
    if os.environ.get("COLUMNS"):
        return int(os.environ["COLUMNS"])
    return None if sys.stdout.isatty() else 120


def stdout() -> Console:
    return Console(file=sys.stdout, width=_width(), highlight=False, soft_wrap=False)


def stderr() -> Console:
    return Console(file=sys.stderr, width=_width(), highlight=False, soft_wrap=False)


def data_console(json_mode: bool) -> Console:
    """Where human-readable results go: stdout, unless stdout carries JSON."""
    return stderr() if json_mode else stdout()


def emit_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


@contextmanager
def handled(json_mode: bool = False) -> Iterator[None]:
    """Turn an ``NvstageError`` into one message on stderr and its exit code; no traceback."""
    try:
        yield
    except NvstageError as e:
        if json_mode:
            emit_json(e.to_json())
        con = stderr()
        # Text, not markup: messages carry brackets (code=[sm_90,compute_90]) and paths.
        # soft_wrap: a reproduce command must stay one line to be pasted back.
        con.print(Text.assemble(("error: ", "bold red"), e.message), soft_wrap=True)
        if e.hint:
            con.print(Text.assemble(("hint: ", "dim"), e.hint), soft_wrap=True)
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        stderr().print("interrupted")
        raise typer.Exit(130) from None
