"""The build record: one entry per nvcc command nvstage stood in front of, for a whole build.

A build run with nvstage as its CUDA compiler launcher (CMake, Ninja, Make, PyTorch) leaves a
folder with one JSON file per command, written atomically under its own name, so any number
of commands at once (``ninja -j``, ``make -j``) need no lock::

    BUILD/.nvstage-build/NVSTAGE_BUILD_RECORD      the folder's mark
    BUILD/.nvstage-build/tu/<start>-<pid>-<n>.json one entry per command

Where: ``$NVSTAGE_BUILD_RECORD`` (a folder) if set, else ``.nvstage-build`` in the folder the
command runs in: CMake runs every compile from the build folder, so ``nvstage report BUILD``
finds it there. ``load_build_record`` is the one typed reader; an entry is a document like any
other (bounded, checked, never trusted to name a program or a place to write).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from nvstage.artifacts import write_json_atomic
from nvstage.errors import ArtifactError, UsageError

ENV = "NVSTAGE_BUILD_RECORD"
FOLDER = ".nvstage-build"
MARK = "NVSTAGE_BUILD_RECORD"
SCHEMA = "nvstage.build-record/1"
MAX_ENTRIES = 100_000  # a build of this many translation units is far beyond the largest
MAX_ENTRY_BYTES = 64 << 20
_counter = itertools.count()


def record_dir(cwd: str, environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    given = env.get(ENV, "").strip()
    return Path(os.path.abspath(os.path.join(cwd, given))) if given else Path(cwd, FOLDER)


@dataclass
class Entry:
    """One nvcc command: what it was, how it went, and (when staged) its build manifest."""

    argv: list[str]  # the command as the build system gave it (nvcc first)
    cwd: str
    started: float  # Unix time: entries from many processes share one clock
    seconds: float
    status: str  # "ok" (staged), "fallback" (plain nvcc ran it), "failed"
    exit_code: int
    pid: int = 0
    reason: str | None = None  # why plain nvcc ran it
    build: dict | None = None  # the staged build's manifest (stages.json's content)
    hit: bool = False  # answered whole from the cache (hit.py); build is the manifest it kept

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "argv": self.argv, "cwd": self.cwd, "started": self.started,
                "seconds": round(self.seconds, 6), "status": self.status,
                "exit_code": self.exit_code, "pid": self.pid, "reason": self.reason,
                "hit": self.hit, "build": self.build}

    @classmethod
    def from_json(cls, d, where: str) -> Entry:
        def need(key, kinds, optional=False):
            v = d.get(key)
            if v is None and optional:
                return None
            if not isinstance(v, kinds) or isinstance(v, bool) and bool not in kinds:
                raise ArtifactError(f"{where}: {key} is missing or of the wrong type")
            return v

        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise ArtifactError(f"{where}: not an nvstage build-record entry ({SCHEMA})")
        argv = need("argv", list)
        if not all(isinstance(a, str) for a in argv) or len(argv) > 100_000:
            raise ArtifactError(f"{where}: argv must be a list of strings")
        started, seconds = need("started", (int, float)), need("seconds", (int, float))
        if not (0 <= started < 1e11 and 0 <= seconds < 1e7):
            raise ArtifactError(f"{where}: started/seconds out of range")
        status = need("status", str)
        if status not in ("ok", "fallback", "failed"):
            raise ArtifactError(f"{where}: status must be ok, fallback or failed")
        build = need("build", dict, optional=True)
        return cls(list(argv), need("cwd", str), float(started), float(seconds), status,
                   int(need("exit_code", int)), int(need("pid", int, optional=True) or 0),
                   need("reason", str, optional=True), build, d.get("hit") is True)


def add(entry: Entry, cwd: str, environ: dict[str, str] | None = None) -> Path | None:
    """Write one entry; a build record that cannot be written never fails the build."""
    folder = record_dir(cwd, environ)
    name = f"{int(entry.started * 1e6):017d}-{os.getpid()}-{next(_counter)}.json"
    try:
        (folder / "tu").mkdir(parents=True, exist_ok=True)
        mark = folder / MARK
        if not mark.exists():
            mark.write_text(f"{SCHEMA}: one file per nvcc command under tu/\n")
        write_json_atomic(folder / "tu" / name, entry.to_json())
    except OSError:
        return None
    return folder / "tu" / name


@dataclass
class BuildRecord:
    folder: str
    entries: list[Entry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # entries that could not be read, and why


def find(path: str | os.PathLike) -> Path | None:
    """The record folder at ``path``: the folder itself, or ``.nvstage-build`` inside it."""
    p = Path(path)
    for cand in (p, p / FOLDER):
        if (cand / MARK).is_file() and (cand / "tu").is_dir():
            return cand
    return None


def load_build_record(path: str | os.PathLike) -> BuildRecord:
    """Every entry of the record at ``path`` (a build folder or the record folder), oldest
    first; an unreadable entry is skipped with its reason, not fatal."""
    folder = find(path)
    if folder is None:
        raise UsageError(f"{path} holds no nvstage build record",
                         hint=f"build with nvstage as the compiler launcher (README: "
                              f"'inside real builds'); the record is {FOLDER}/ in the build "
                              f"folder, or ${ENV}")
    rec = BuildRecord(str(folder))
    names = sorted(n for n in os.listdir(folder / "tu") if n.endswith(".json"))
    if len(names) > MAX_ENTRIES:
        raise ArtifactError(f"{folder}: {len(names)} entries, more than the {MAX_ENTRIES} "
                            f"nvstage reads from one build record")
    from nvstage.artifacts import read_regular

    for n in names:
        where = f"{folder}/tu/{n}"
        try:
            data = read_regular(folder / "tu" / n, limit=MAX_ENTRY_BYTES, what="entry")
            rec.entries.append(Entry.from_json(json.loads(data), where))
        except (ArtifactError, UsageError, ValueError, RecursionError) as e:
            rec.skipped.append(f"{n}: {getattr(e, 'message', None) or e}")
    rec.entries.sort(key=lambda e: e.started)
    return rec


def now() -> float:
    return time.time()
