"""The processes of a resident nvstage, read from /proc: what the resident tests watch."""

from __future__ import annotations

import os
from pathlib import Path


_SERVER = b"nvstage.compiler.launcher.resident.server"


def residents(cache: Path) -> list[tuple[int, int]]:
    """(pid, parent pid) of the resident nvstage's processes for ``cache`` (server, helpers,
    children: a fork has the server's command line); zombies left out."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
                if _SERVER in argv and os.fsencode(cache) in argv:
                    stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
                    if stat[0] != "Z":
                        found.append((int(d), int(stat[1])))
            except (OSError, IndexError, ValueError):
                pass  # gone meanwhile
    return found
