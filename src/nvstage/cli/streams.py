"""nvstage's own commands (``--help``, ``compile``, ``show``, ...) where their stdout fails:
ended as coreutils' (``cat``, ``seq``) are, never with a traceback (issue 43). A reader gone
(``nvstage show X | head -1``: EPIPE) ends the command by SIGPIPE, quietly, as it ends seq (a
shell says 141; ``set -o pipefail`` sees what it sees for seq); any other error (ENOSPC into
/dev/full, EIO) is one line, ``nvstage: write error: No space left on device``, and 1. A
closed stdout (``cmd >&-``) is not a failure: ``transparent.hold_closed_streams`` holds it.
Never imported on a launcher's path: a tool writes its own streams there."""

from __future__ import annotations

import io
import sys

import posix

_EPIPE, _SIGPIPE = 32, 13  # Linux's numbers (no errno or signal module to load for two)


class _Watched(io.FileIO):
    """Standard output's file, which keeps the first error a write into it met: rich and click
    each turn a closed pipe into an exit status of their own (1), and a traceback carries no
    sign of which file failed; this says it was stdout, and how."""

    failed: OSError | None = None

    def write(self, data):
        try:
            return super().write(data)
        except OSError as e:
            if self.failed is None:
                self.failed = e
            raise


def watched(command, argv: list[str]) -> int:  # command(argv) -> its exit status
    """``command(argv)``'s exit status, stdout watched (``watch_stdout``): where writing it
    failed, the status ``write_failed`` gives, whatever the command made of the failure."""
    watch = watch_stdout()
    try:
        code = command(argv)
        if watch is not None:
            sys.stdout.flush()
    except BaseException:
        if watch is None or watch.failed is None:
            raise
        code = 1
    if watch is not None and watch.failed is not None:
        return write_failed(watch.failed)
    return code


def watch_stdout() -> _Watched | None:
    """``sys.stdout`` made again over a ``_Watched`` file (the same encoding, errors and
    buffering), returned; None where stdout is not the process's own (a test's capture, a
    closed one held by /dev/null), whose owner sees what fails."""
    out = sys.stdout
    if out is None or out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper):
        return None
    try:
        out.flush()
        raw = _Watched(out.fileno(), "w", closefd=False)
    except (OSError, ValueError):
        return None
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=out.encoding,
                                  errors=out.errors, line_buffering=out.line_buffering)
    return raw


def write_failed(e: OSError) -> int:
    """The exit status of a command whose stdout failed with ``e``: -SIGPIPE for a reader
    gone (``cli/main.py`` ends the process by it: ``transparent.exit_as``), else 1 with one
    line on stderr. What is still buffered goes to /dev/null: the last flush fails no more."""
    try:
        held = posix.open("/dev/null", posix.O_WRONLY | posix.O_CLOEXEC)
        posix.dup2(held, 1)
        posix.close(held)
    except OSError:
        pass
    if e.errno == _EPIPE:
        return -_SIGPIPE
    try:
        sys.stderr.write(f"nvstage: write error: {e.strerror or e}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return 1
