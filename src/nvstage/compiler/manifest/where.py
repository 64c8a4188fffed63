"""Where a stage ran: the manifest's ``where`` (absent: an ordinary local run, as before
distribution existed)."""

from __future__ import annotations

from enum import Enum


class Where(str, Enum):
    LOCAL = "local"  # through the client, compiled on this machine (the farm not used)
    REMOTE = "remote"  # compiled on a build server
    REMOTE_HIT = "remote-hit"  # the client's cache answered: nothing compiled
    FALLBACK = "local-fallback"  # the farm's run failed: run again here, plainly
    UNKNOWN = "remote-or-local"  # compiles finished alongside disagreed: cannot tell

    def __str__(self) -> str:
        return self.value


ON_FARM = frozenset({Where.REMOTE, Where.REMOTE_HIT})
