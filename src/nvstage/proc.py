"""The only module that starts subprocesses: always from an argument list, never a shell."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # wall time of the child, measured around the wait


class ToolMissing(OSError):
    """The program named in argv[0] could not be started."""


class ToolTimeout(ToolMissing):
    """The program ran past its ``timeout`` and was killed.

    A ToolMissing too: every caller that copes with "that tool gave no answer" (a version
    probe, nvcc's plan) copes with this one the same way, instead of a traceback."""


def run(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    input_text: str | None = None,
) -> Completed:
    """Run ``argv`` to completion and capture its output (text, undecodable bytes replaced)."""
    argv = [os.fspath(a) for a in argv]
    t0 = time.perf_counter()
    try:
        cp = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            shell=False,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise ToolTimeout(f"{argv[0]!r} did not finish within {timeout:g} s") from e
    except OSError as e:  # not found, not executable, not a program (ENOEXEC), ...
        raise ToolMissing(f"cannot start {argv[0]!r}: {e.strerror or e}") from e
    t1 = time.perf_counter()
    return Completed(tuple(argv), cp.returncode, cp.stdout, cp.stderr, t1 - t0)


def output(argv: Sequence[str], **kw) -> str:
    """stdout+stderr of a quick informational command (versions, listings); never raises on rc."""
    cp = run(argv, **kw)
    return cp.stdout + cp.stderr
