"""The one small interface a distribution backend offers (sccache.py is the one backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from nvstage.compiler.manifest.where import Where


@dataclass(frozen=True)
class Attempt:
    """What a run through the farm's client gave: the tool's exit status and output, where
    it ran, and (when the farm was not used although asked) why, in a few words."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    where: Where
    why: str | None = None


class Backend(Protocol):
    name: str

    def run(self, argv: Sequence[str], cwd: str, env: Mapping[str, str],
            timeout: float) -> Attempt:
        """Run a tool's command (its program a full path) through the farm. Raises
        ``nvstage.errors.ToolMissing`` or ``ToolTimeout`` where the client did not run or
        did not finish."""
        ...
