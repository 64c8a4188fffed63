"""A traced command's trace as its build log entry names it, and the build log's own traces
folder (``traces/``, NVSTAGE_TIME_TRACE=1's: one trace per unit, named by its output) pruned
with the builds that ``log.prune`` drops.

An entry's manifest keeps ``"time_trace"`` (``time_trace.Tracer.record``): the file, its size
and CRC-32 as written, and the unit's bounded summary (``trace_summary``). An entry is
anyone's file: nvstage's own trace is named only as a file name inside ``traces/`` (never a
path a reader follows out of it), and the summary is read back strictly.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from nvstage.compiler.nvcc.time_trace import TRACES
from nvstage.compiler.nvcc.trace_summary import read_summary
from nvstage.errors import ArtifactError, printable

# A path longer than this is no real one (PATH_MAX is 4096): ``log.MAX_PATH``.
_MAX_PATH = 4096
# The name nvstage gives its own trace (``time_trace.own_request``: a digest of the output).
OWN_TRACE = re.compile(r"^[0-9a-f]{1,64}\.json$")


@dataclass(frozen=True)
class TraceFile:
    """Where a traced command's trace is: a name in the build log's ``traces/`` (nvstage's
    own, ``in_log``), else a path from the command's folder (the user's, as nvcc names it);
    its size and CRC-32 as written (a file that differs was replaced since)."""

    path: str
    in_log: bool
    size: int
    crc32: int

    def where(self, log_folder: str | os.PathLike, cwd: str) -> Path:
        """The file, for a reader: in ``log_folder``'s ``traces/``, else from ``cwd``."""
        return Path(log_folder, TRACES, self.path) if self.in_log else Path(cwd, self.path)


def trace_file_of(rec) -> TraceFile | None:
    """The ``"time_trace"`` record's file, or None: no record, or one in no shape nvstage
    writes."""
    if not isinstance(rec, dict):
        return None
    file, where, size, crc = (rec.get(k) for k in ("file", "in", "bytes", "crc32"))
    if not (isinstance(file, str) and type(size) is int and type(crc) is int
            and 0 <= size < 2**63 and 0 <= crc < 2**32):
        return None
    if where == "build-log":
        head, _, name = file.partition("/")
        ok = head == TRACES and OWN_TRACE.match(name) is not None
        return TraceFile(name, True, size, crc) if ok else None
    if where == "cwd" and 0 < len(file) <= _MAX_PATH and "\0" not in file:
        return TraceFile(printable(file), False, size, crc)
    return None


def summary_of(rec, where: str) -> dict:
    """The record's summary read back (``trace_summary.read_summary``): one
    ``ArtifactError`` line for a damaged one."""
    if not isinstance(rec, dict) or "summary" not in rec:
        raise ArtifactError(f"{where}: its time trace has no summary")
    return read_summary(rec["summary"], where)


def prune_traces(folder: Path, kept: list[TraceFile | None], since: float) -> int:
    """Remove nvstage's own traces no kept entry names (``kept``: their ``trace_file``) and
    older than ``since`` (the oldest build kept whole: a command running now writes its trace
    before its entry). Only names listed in ``folder``/traces/ are looked at, and only regular
    files of a trace's name removed: a name read from an entry is compared, never followed.
    Returns how many went."""
    traces = folder / TRACES
    try:
        if not stat.S_ISDIR(os.lstat(traces).st_mode):
            return 0
        names = os.listdir(traces)
    except OSError:
        return 0
    named = {f.path for f in kept if f is not None and f.in_log}
    gone = 0
    for name in names:
        if name in named or not OWN_TRACE.match(name):
            continue
        try:
            st = os.lstat(traces / name)
            if stat.S_ISREG(st.st_mode) and st.st_mtime < since:
                os.unlink(traces / name)
                gone += 1
        except OSError:
            pass
    return gone
