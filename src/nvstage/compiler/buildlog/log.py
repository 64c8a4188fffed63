"""The build log: one entry per command nvstage stood in front of, for a whole build.

A build run with nvstage as its compiler launcher (CMake, Ninja, Make, PyTorch) leaves a
folder with one JSON file per command, written atomically under its own name, so any number
of commands at once (``ninja -j``, ``make -j``) need no lock::

    BUILD/.nvstage-build/NVSTAGE_BUILD_RECORD      the folder's mark
    BUILD/.nvstage-build/tu/<start>-<pid>-<n>.json one entry per command
    BUILD/.nvstage-build/builds/<build>            one mark per build a staged command saw

Where: ``$NVSTAGE_BUILD_RECORD`` (a folder) if set, else ``.nvstage-build`` in the folder the
command runs in: CMake runs every compile and link from the build folder, so ``nvstage report
BUILD`` finds it there. ``load_build_log`` is the one typed reader; an entry is a document
like any other (bounded, checked, never trusted to name a program or a place to write).

A command is an nvcc command (staged, answered from the cache, or run by plain nvcc) or another
step (``compiler/launcher/tool_step``: C++ compiles, links, archives; status ``ran``); its kind
is read from its words (``compiler/nvcc/step_kind``). Each entry names the run of the build tool
it was part of (``build_id``: the tool's process and start); ``builds_of`` groups entries into
builds (by time, where no build tool was named: old records, scripts). The record keeps the last
``KEEP_BUILDS`` builds whole and, of older ones, the latest entry of each unit: ``prune`` runs
when a staged command sees a new build. ``current`` keeps the latest entry of each unit (its
output file names it), which is what the project is now. ``Entry.manifest_build`` reads an
entry's manifest as the ``Build`` a keep folder gives, without touching a file unless asked to.

Reading is bounded in memory as well as time: ``load_build_log`` keeps of each entry's
manifest only what every reader asks of every entry (its output and source) and reads the
rest again from the entry's file when asked (``Entry.build``), so a record at its caps costs
what its units' figures cost, not what its JSON would as Python objects (5 GB at 1 GiB).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import heapq
import itertools
import json
import operator
import os
import re
import time
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nvstage import fsio
from nvstage.files import is_folder, is_regular, json_safe, read_regular
from nvstage.compiler.nvcc import step_kind as steps
from nvstage.compiler.buildlog.current import (ENV, FOLDER, MARK, SCHEMA, build_identity,
                                                ready_log, log_folder)
from nvstage.errors import ArtifactError, UsageError, printable

if TYPE_CHECKING:
    from nvstage.compiler.buildlog.traces import TraceFile

# What is read of one record, the newest entries first (the older ones are left unread, and
# said so): what a CI runner's reader survives. A view holds about 16 KB for each entry with a
# manifest (its stages and kernels; 25 KB for the HTML report) and takes about 2 ms for it
# on a loaded 2-core machine; at 100,000 entries and 1 GiB it took 2.0 GB and 165 s.
MAX_ENTRIES = 10_000  # the last builds of a project of thousands of translation units
MAX_ENTRY_BYTES = 16 << 20  # a real one is 20 to 40 KB
MAX_RECORD_BYTES = 256 << 20  # all entries together
# The commands' words all entries hold (``argv_weight``: a word, and every ``_WORD_CHARS``
# characters, count one): bytes alone let tiny words cost 60 bytes each held, 2.4 GB and 49 s
# at the byte cap. A real command is 30 to 200 words.
MAX_RECORD_WORDS = 2_000_000
_WORD_CHARS = 64
# JSON values one entry may hold, counted in its bytes before it is parsed (a real one holds a
# few thousand): what parsing a crafted one costs at once, whatever is kept of it after.
MAX_ENTRY_VALUES = 1_000_000
MAX_REASON = 2000  # characters of an entry's reason kept (the rest is cut, and says so)
_counter = itertools.count()
# Builds kept whole; past KEEP_BUILDS + PRUNE_AFTER builds the older ones are pruned to the
# latest entry of each unit (what the project still is).
KEEP_BUILDS = 10
PRUNE_AFTER = 5
# Where no build tool named the build (a script, an old record): a pause this long between
# commands starts a new build.
GAP_SECONDS = 10.0
STATUSES = ("ok", "fallback", "failed", "ran")
_ENTRY_NAME = re.compile(r"^\d{17}-\d+-\w+\.json$")


@dataclass
class Entry:
    """One command: what it was, how it went, and (when staged) its build manifest. What is
    shown of it passes ``printable`` (errors'): a crafted entry's escape sequences would reach
    the terminal (colours, a title, the clipboard through OSC 52) wherever its text is shown."""

    argv: list[str]  # the command as the build system gave it (the tool first)
    cwd: str
    started: float  # Unix time: entries from many processes share one clock
    seconds: float
    # "ok" (staged), "fallback" (plain nvcc ran it), "failed", "ran" (a step run unchanged:
    # not nvcc, or an nvcc link, which nvstage does not stage)
    status: str
    exit_code: int
    pid: int = 0
    reason: str | None = None  # why plain nvcc ran it, or how the step failed
    build: dict | None = None  # the staged build's manifest (stages.json's content)
    hit: bool = False  # answered whole from the command cache; build is the manifest it kept
    # The run of the build tool it was part of ("ninja:PID:START"; "process:..." names the
    # nearest ancestor where no build tool was found); None in older records.
    build_id: str | None = None
    # Where the nvcc of an nvcc command (argv[0]) was found: "PATH", "pip wheels" (PATH had
    # none), "command" (the command named its path), ... (``toolkit/nvcc_lookup``); None in
    # older records and for other steps.
    nvcc_from: str | None = None
    # The entry's file name under tu/, when read back (not written: the name is the file's).
    file: str = field(default="", compare=False)

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "argv": self.argv, "cwd": self.cwd, "started": self.started,
                "seconds": round(self.seconds, 6), "status": self.status,
                "exit_code": self.exit_code, "pid": self.pid, "reason": self.reason,
                "hit": self.hit, "build_id": self.build_id, "nvcc_from": self.nvcc_from,
                "build": self.build}

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
        if not set(map(type, argv)) <= {str} or len(argv) > 100_000:  # (map: C's pace)
            raise ArtifactError(f"{where}: argv must be a list of strings")
        started, seconds = need("started", (int, float)), need("seconds", (int, float))
        if not (0 <= started < 1e11 and 0 <= seconds < 1e7):
            raise ArtifactError(f"{where}: started/seconds out of range")
        status = need("status", str)
        if status not in STATUSES:
            raise ArtifactError(f"{where}: status must be one of {', '.join(STATUSES)}")
        build = need("build", dict, optional=True)
        reason = need("reason", str, optional=True)
        build_id = need("build_id", str, optional=True)
        if build_id is not None and not 0 < len(build_id) <= 256:
            raise ArtifactError(f"{where}: build_id must be 1 to 256 characters")
        nvcc_from = need("nvcc_from", str, optional=True)
        if nvcc_from is not None and not 0 < len(nvcc_from) <= 64:
            raise ArtifactError(f"{where}: nvcc_from must be 1 to 64 characters")
        cwd = need("cwd", str)
        if len(cwd) > MAX_PATH:
            raise ArtifactError(f"{where}: cwd is longer than any path")
        if reason is not None and len(reason) > MAX_REASON:
            reason = f"{reason[:MAX_REASON]}... ({len(reason) - MAX_REASON:,} more characters)"
        # What is shown of an entry is shown as text (``printable``); it is never run.
        words = argv if "".join(argv).isprintable() else [printable(a) for a in argv]
        return cls(words, printable(cwd), float(started), float(seconds), status,
                   int(need("exit_code", int)), int(need("pid", int, optional=True) or 0),
                   None if reason is None else printable(reason), build, d.get("hit") is True,
                   None if build_id is None else printable(build_id),
                   None if nvcc_from is None else printable(nvcc_from))

    @property
    def kind(self) -> str:
        """The step's kind (``compiler.steps``: cuda-compile, cxx-compile, device-link, link,
        archive, other), read from its words."""
        return steps.kind_of(self.argv)

    @property
    def tool(self) -> str:
        """The program's file name (``nvcc``, ``c++``, ``ar``)."""
        return steps.tool_name(self.argv)

    @property
    def ended(self) -> float:
        return self.started + self.seconds

    # -- what an entry says, read defensively (it may be anyone's file) --------------------

    def _manifest_str(self, key: str) -> str | None:
        kept = self.__dict__.get("_kept")
        doc = kept.slim if kept is not None else self.build
        v = doc.get(key) if isinstance(doc, dict) else None
        ok = isinstance(v, str) and v and "\0" not in v and len(v) <= MAX_PATH
        return printable(v) if ok else None

    @property
    def output(self) -> str | None:
        """The file the command wrote (absolute): the manifest's output, else ``-o``'s (the
        archive, for ``ar`` and ``ranlib``)."""
        out = self._manifest_str("output") or argv_output(self.argv)
        if out is None and self.kind == steps.ARCHIVE and not steps.is_nvcc(self.argv):
            out = steps.archive_of(self.argv)
        if out is None or "\0" in out or len(out) > MAX_PATH:
            return None
        return os.path.normpath(os.path.join(self.cwd, out))

    @property
    def source(self) -> str | None:
        """The translation unit's source as the manifest names it (absolute), else the first
        word of the command that looks like a CUDA source (a C or C++ source, for a compile
        that is not nvcc's). Named, never run; read only by readers that bound what they
        read (``check``'s kernel-line finder)."""
        src = self._manifest_str("source")
        if src is None and steps.is_nvcc(self.argv):
            src = next((a for a in self.argv[1:] if a.endswith(".cu") and not
                        a.startswith("-") and len(a) <= MAX_PATH), None)
        elif src is None and self.kind == steps.CXX_COMPILE:
            src = steps.source_of(self.argv)
        if src is None or "\0" in src or len(src) > MAX_PATH:
            return None
        return os.path.normpath(os.path.join(self.cwd, src))

    @property
    def unit(self) -> tuple[str, ...]:
        """What identifies the translation unit (or step) across builds: its output, else the
        whole command (a command without ``-o`` writes where its source's name says); a step
        that is not nvcc's also by its tool (``ar`` and ``ranlib`` write one archive)."""
        out = self.output
        key = ("output", out) if out is not None else \
            ("command", command_text(self.argv, limit=MAX_PATH) + "\0" + self.cwd)
        return key if steps.is_nvcc(self.argv) else ("step", self.tool, *key)

    def recorded_artifacts(self) -> list:
        """The artifacts the manifest lists, as it recorded them (``record.Artifact``: path,
        kind, arch, size), in stage order; the files themselves are not looked at. Entries of
        the wrong shape are left out; at most ``MAX_RECORDED`` in all."""
        from nvstage.compiler.manifest.model import Artifact

        out: list = []
        build = self.build  # read once
        stages = build.get("stages") if isinstance(build, dict) else None
        for s in stages if isinstance(stages, list) else ():
            arts = s.get("artifacts") if isinstance(s, dict) else None
            for a in arts if isinstance(arts, list) else ():
                if len(out) >= MAX_RECORDED:
                    return out
                if not isinstance(a, dict):
                    continue
                path, kind, arch, size = (a.get(k) for k in ("path", "kind", "arch", "size"))
                if not (isinstance(path, str) and 0 < len(path) <= MAX_PATH and "\0" not in path
                        and isinstance(kind, str) and len(kind) <= 64
                        and (arch is None or isinstance(arch, str) and len(arch) <= 64)
                        and isinstance(size, int) and not isinstance(size, bool)
                        and 0 <= size < 2**63):
                    continue
                out.append(Artifact(path, kind, arch, size, str(a.get("sha256", ""))[:64],
                                    s.get("index") if isinstance(s.get("index"), int) else None))
        return out

    def embedded_files(self) -> set[str] | None:
        """The files the manifest's fatbinary stages put into the fatbin (their
        ``--image3=kind=elf|ptx,...,file=PATH``): which cubins and PTX the object carries.
        None when no fatbinary stage ran (a -cubin or -ptx command)."""
        build = self.build  # read once
        stages = build.get("stages") if isinstance(build, dict) else None
        found: set[str] | None = None
        for s in stages if isinstance(stages, list) else ():
            if not isinstance(s, dict) or s.get("kind") != "fatbinary":
                continue
            argv = s.get("argv")
            found = found or set()
            for word in argv[:MAX_RECORDED] if isinstance(argv, list) else ():
                if isinstance(word, str) and word.startswith(("--image3=", "--image=")):
                    fields_ = dict(f.split("=", 1) for f in word.split("=", 1)[1].split(",")
                                   if "=" in f)
                    if fields_.get("kind") in ("elf", "ptx") and fields_.get("file"):
                        found.add(fields_["file"])
        return found

    def in_memory(self) -> Entry:
        """This entry with its manifest read from its file once and held (``_Kept``): for a
        reader that asks several things of one manifest; the entry itself when it holds its
        manifest already."""
        if self.__dict__.get("_kept") is None:
            return self
        held = copy.copy(self)
        held.build = self.build  # the copy's own: this one still holds none
        return held

    def manifest_build(self, *, files: bool = False, plan: bool = True):
        """The entry's manifest as a ``Build`` (``compiler.record``), checked field by field.

        ``files=False`` (the default) touches no file: the artifacts the manifest lists are
        left out of its stages (the launcher built in a temporary folder, gone since), and
        what the stages reported (times, ptxas' resource lines) is all there is.
        ``files=True``: each artifact still at its recorded path with its recorded size and
        SHA-256 is kept (the object file, usually), the rest named in ``build.stale``.
        ``plan=False``: the planned stages are left out of ``build.plan`` (what ran is in
        ``build.runs``): half the reading, for readers of a whole build's entries.
        ``ArtifactError`` when the entry has no manifest or a damaged one."""
        from nvstage.compiler.manifest.model import DamagedManifest, from_doc

        where = self.file or "a build-record entry"
        doc = self.build  # read once: a record's entry reads it from its file
        if not isinstance(doc, dict):
            raise ArtifactError(f"{where}: no build manifest (plain nvcc ran this command)")
        doc = doc if files else _without_artifacts(doc)
        if not plan and isinstance(doc.get("plan"), dict):
            doc = {**doc, "plan": {**doc["plan"], "stages": []}}
        # Artifacts are looked for at their recorded paths only (a folder of no files stands
        # for "beside the manifest": an entry has no folder of its own).
        try:
            build = from_doc(doc, Path(_NOWHERE))
        except DamagedManifest as e:
            raise ArtifactError(f"{where}: its build manifest is damaged: {e}") from None
        except RecursionError:
            raise ArtifactError(f"{where}: its build manifest is nested too deeply") from None
        build.keep_dir = None  # not a keep folder: nothing of it is kept
        for run in build.runs:  # what the tools printed, as text to show
            run.stdout, run.stderr = printable(run.stdout, lines=True), \
                printable(run.stderr, lines=True)
            if run.resources:
                run.resources = printable(run.resources, lines=True)
            if run.figures:  # kernel names are shown too
                run.figures = [replace(f, kernel=printable(f.kernel)) for f in run.figures]
        return build

    @property
    def trace_file(self) -> TraceFile | None:
        """The trace the command wrote, or None (``buildlog/traces.trace_file_of``)."""
        kept = self.__dict__.get("_kept")
        rec = (self.build or {}).get("time_trace") if kept is None else kept.slim.get("trace")
        return None if rec is None else _traces().trace_file_of(rec)

    def time_summary(self) -> dict | None:
        """The unit's bounded compile-time summary (None: not traced); one ``ArtifactError``
        line for a damaged one."""
        doc = self.build if self.trace_file is not None else None  # read once
        return None if doc is None else _traces().summary_of(
            doc.get("time_trace"), printable(self.file or "a build-record entry"))


def _traces():
    """``traces.py`` and nvcc's trace modules (6 ms of a cold command): for a trace, a prune."""
    from nvstage.compiler.buildlog import traces

    return traces


def _get_build(self: Entry) -> dict | None:
    kept = self.__dict__.get("_kept")
    return self.__dict__.get("_build") if kept is None else kept.load()


def _set_build(self: Entry, value: dict | None) -> None:
    self.__dict__["_build"] = value
    self.__dict__["_kept"] = None


# The manifest (stages.json's content), or None. An entry ``load_build_log`` read keeps
# it in its file (``_Kept``): each use reads it again, and nothing holds it after.
Entry.build = property(_get_build, _set_build, doc="the staged build's manifest, or None")


@dataclass(frozen=True)
class _Kept:
    """An entry's manifest left in its file: where, which bytes (size and CRC-32: a file
    replaced since gives no manifest rather than another's), and what every reader asks of
    every entry (``slim``: its output and source)."""

    path: Path
    size: int
    crc: int
    slim: dict

    def load(self) -> dict | None:
        try:
            data = read_regular(self.path, limit=MAX_ENTRY_BYTES, what="entry")
            doc = json.loads(data) if len(data) == self.size and \
                zlib.crc32(data) == self.crc else None
        except (ArtifactError, UsageError, ValueError, RecursionError):
            return None
        build = doc.get("build") if isinstance(doc, dict) else None
        return build if isinstance(build, dict) else None


def _keep_in_file(entry: Entry, path: Path, data: bytes) -> None:
    """``entry``'s manifest left in its file (``_Kept``), but its output and source."""
    build = entry.__dict__.get("_build")
    if build is None:
        return
    slim = {k: v if isinstance(v := build.get(k), str) and len(v) <= MAX_PATH else None
            for k in ("output", "source")}  # (what is no path is not held)
    rec = build.get("time_trace")  # a traced command's trace, without its summary
    if rec is not None and _traces().trace_file_of(rec) is not None:
        slim["trace"] = {k: rec.get(k) for k in ("file", "in", "bytes", "crc32")}
    entry.__dict__["_kept"] = _Kept(path, len(data), zlib.crc32(data), slim)
    entry.__dict__["_build"] = None


MAX_PATH = 4096  # a path or file name longer than this is no real one (PATH_MAX)
MAX_RECORDED = 10_000  # artifacts (or fatbinary words) read from one manifest
# A folder no build writes into: where a manifest read from an entry "looks beside itself".
_NOWHERE = "/nonexistent/nvstage-build-record-entry"
_OUTPUT_OPTIONS = ("-o", "--output-file")
_OUTPUT_SPELT = tuple(f"{o}=" for o in _OUTPUT_OPTIONS)
_MAY_BE_OUTPUT = operator.methodcaller("startswith", _OUTPUT_OPTIONS)


def argv_output(argv: list[str]) -> str | None:
    """The value of the last ``-o``/``--output-file`` of an nvcc command (``argv[0]`` is
    nvcc), spelled as a separate word or with ``=``."""
    out, after, n = None, 1, len(argv)
    # Only the words that may be one looked at (compress and map: C's pace over 100,000).
    for i in itertools.compress(range(n), map(_MAY_BE_OUTPUT, argv)):
        if i < after:  # nvcc's argv[0], or the value of the -o before it
            continue
        word = argv[i]
        if word in _OUTPUT_OPTIONS and i + 1 < n:
            out, after = argv[i + 1], i + 2
        elif word.startswith(_OUTPUT_SPELT):
            out = word.partition("=")[2]
    return out or None


def command_text(argv: list[str], *, limit: int = 2000) -> str:
    """The command as one shell-quoted line of at most about ``limit`` characters: a crafted
    entry's million-word argv is cut, and says how much was."""
    import shlex

    out, size = [], 0
    for n, word in enumerate(argv):
        word = shlex.quote(word if len(word) <= limit else word[:limit] + "...")
        if size + len(word) > limit and out:
            out.append(f"... ({len(argv) - n} more words)")
            break
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def _without_artifacts(doc: dict) -> dict:
    """The manifest with no artifact in its stages (and none as its output): read as it is,
    it asks for no file."""
    stages = doc.get("stages")
    if isinstance(stages, list):
        stages = [{**s, "artifacts": []} if isinstance(s, dict) else s for s in stages]
    return {**doc, "stages": stages, "output": None}


def current(entries: list[Entry]) -> tuple[list[Entry], int]:
    """(the latest entry of each translation unit, oldest first; how many older entries of
    units built again since were left out)."""
    latest: dict[tuple[str, str], Entry] = {}
    for e in sorted(entries, key=lambda e: e.started):
        latest[e.unit] = e
    kept = sorted(latest.values(), key=lambda e: e.started)
    return kept, len(entries) - len(kept)


@dataclass
class BuildRun:
    """One run of the build tool: the entries of its commands, oldest first."""

    number: int  # 1 for the oldest the record holds
    ident: str | None  # the entries' build_id ("ninja:PID:START"), None: told apart by time
    entries: list[Entry]

    @property
    def tool(self) -> str | None:
        """The build tool's name, where the entries named one."""
        if self.ident is None or self.ident.startswith("process:"):
            return None
        return self.ident.split(":", 1)[0]

    @functools.cached_property
    def started(self) -> float:
        return min(e.started for e in self.entries)

    @functools.cached_property
    def ended(self) -> float:
        return max(e.ended for e in self.entries)

    @property
    def wall_seconds(self) -> float:
        return self.ended - self.started

    @property
    def step_seconds(self) -> float:
        return sum(e.seconds for e in self.entries)

    @property
    def parallelism(self) -> float | None:
        wall = self.wall_seconds
        return self.step_seconds / wall if wall > 0 else None

    def kinds(self) -> dict[str, int]:
        """Entries per step kind, in ``steps.KINDS`` order."""
        found = [e.kind for e in self.entries]
        return {k: found.count(k) for k in steps.KINDS if k in found}

    def to_json(self) -> dict:
        states: dict[str, int] = {}
        for e in self.entries:
            state = "hit" if e.hit and e.status == "ok" else e.status
            states[state] = states.get(state, 0) + 1
        staged = [e for e in self.entries if e.status == "ok"]
        return {"build": self.number, "tool": self.tool, "id": self.ident,
                "told_apart_by": "time" if self.tool is None else "build tool",
                "started": self.started, "wall_seconds": round(self.wall_seconds, 6),
                "step_seconds": round(self.step_seconds, 6),
                "parallelism": None if self.parallelism is None else round(self.parallelism, 3),
                "steps": len(self.entries), "kinds": self.kinds(), "states": states,
                "command_hits": sum(1 for e in staged if e.hit), "commands": len(staged)}


def builds_of(entries: list[Entry]) -> list[BuildRun]:
    """The entries grouped into builds, oldest first: one per build tool run they name;
    entries that name none (or only a script's process) split where the commands pause for
    ``GAP_SECONDS``."""
    named: dict[str, list[Entry]] = {}
    loose: dict[str | None, list[tuple[list[Entry], list[float]]]] = {}  # (entries, [end])
    for e in sorted(entries, key=lambda e: e.started):
        if e.build_id and not e.build_id.startswith("process:"):
            named.setdefault(e.build_id, []).append(e)
            continue
        groups = loose.setdefault(e.build_id, [])
        if groups and e.started <= groups[-1][1][0] + GAP_SECONDS:
            groups[-1][0].append(e)
            groups[-1][1][0] = max(groups[-1][1][0], e.ended)
        else:
            groups.append(([e], [e.ended]))
    runs = list(named.items()) + [(k, g) for k, gs in loose.items() for g, _ in gs]
    runs.sort(key=lambda r: min(e.started for e in r[1]))
    return [BuildRun(n, ident, group) for n, (ident, group) in enumerate(runs, 1)]


def _mark_build(folder: Path, ident: str | None) -> bool:
    """Mark the build ``ident`` as seen; True when this command marked it first."""
    if ident is None:
        return False
    name = re.sub(r"[^\w.-]", "_", ident)[:200]
    try:
        os.makedirs(folder / "builds", exist_ok=True)
        fd = os.open(folder / "builds" / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except OSError:
        return False
    os.close(fd)
    return True


def prune(folder: str | os.PathLike, keep: int = KEEP_BUILDS) -> int:
    """Keep the last ``keep`` builds of the record whole, and of older builds the latest
    entry of each unit; the other entries' files go, and the marks of builds no entry is
    left of. Returns how many entries went. Only files named as entries are removed."""
    rec = load_build_log(folder)
    runs = builds_of(rec.entries)
    if len(runs) <= keep:
        return 0
    latest, _ = current(rec.entries)
    kept = {id(e) for e in latest} | {id(e) for r in runs[-keep:] for e in r.entries}
    gone = 0
    tu = Path(rec.folder) / "tu"
    for e in rec.entries:
        if id(e) not in kept and _ENTRY_NAME.match(e.file):
            try:
                os.unlink(tu / e.file)
                gone += 1
            except OSError:
                pass
    _traces().prune_traces(Path(rec.folder), [e.trace_file for e in rec.entries
                                              if id(e) in kept], runs[-keep].started)
    left = {re.sub(r"[^\w.-]", "_", e.build_id)[:200] for e in rec.entries
            if id(e) in kept and e.build_id}
    marks = Path(rec.folder) / "builds"
    for name in os.listdir(marks) if marks.is_dir() else ():
        if name not in left and re.match(r"^[\w.-]+$", name):
            with contextlib.suppress(OSError):
                os.unlink(marks / name)
    return gone


def ready(cwd: str, environ: dict[str, str] | None = None) -> Path | None:
    """The record folder, made if it is not there yet. The launcher asks before it builds:
    the folder made after the command's command entry was stored would change the stat
    of the folder it sits in, and each later hit would look at that folder's names again."""
    folder = Path(log_folder(cwd, os.environ if environ is None else environ))
    return folder if ready_log(str(folder)) else None


def add(entry: Entry, cwd: str, environ: dict[str, str] | None = None) -> Path | None:
    """Write one entry, compact (its ``build_id`` this process's build's, when it has none);
    a record that cannot be written never fails the build. The first staged command of a new
    build prunes the record when it holds more than ``KEEP_BUILDS + PRUNE_AFTER`` builds."""
    folder = ready(cwd, environ)
    if folder is None:
        return None
    if entry.build_id is None:
        entry.build_id = build_identity()
    name = f"{int(entry.started * 1e6):017d}-{os.getpid()}-{next(_counter)}.json"
    doc = json.dumps(json_safe(entry.to_json()), allow_nan=False, separators=(",", ":"))
    try:  # unflushed (7 ms of a miss): an entry a crash emptied is skipped, its reason said
        fsio.replace(folder / "tu" / name, doc.encode())
    except (OSError, ValueError):
        return None
    if _mark_build(folder, entry.build_id) and \
            len(os.listdir(folder / "builds")) > KEEP_BUILDS + PRUNE_AFTER:
        try:
            prune(folder)
        except Exception:  # a record that cannot be pruned never fails a build
            pass
    return folder / "tu" / name


@dataclass
class BuildLog:
    folder: str
    entries: list[Entry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # entries that could not be read, and why


def find(path: str | os.PathLike) -> Path | None:
    """The record folder at ``path``: the folder itself, or ``.nvstage-build`` inside it."""
    try:
        p = Path(path)
    except TypeError:
        return None
    for cand in (p, p / FOLDER):
        if is_regular(cand / MARK) and is_folder(cand / "tu"):
            return cand
    return None


def load_build_log(path: str | os.PathLike) -> BuildLog:
    """Every entry of the record at ``path`` (a build folder or the record folder), oldest
    first; an unreadable entry is skipped with its reason, not fatal."""
    folder = find(path)
    if folder is None:
        raise UsageError(f"{path} holds no nvstage build record",
                         hint=f"build with nvstage as the compiler launcher (README: "
                              f"'inside real builds'); the record is {FOLDER}/ in the build "
                              f"folder, or ${ENV}")
    rec = BuildLog(str(folder))
    # The newest MAX_ENTRIES names (they sort by start), kept as the folder is listed.
    found = 0
    with os.scandir(folder / "tu") as listing:
        kept: list[str] = []
        for d in listing:
            if d.name.endswith(".json"):
                found += 1
                if len(kept) < MAX_ENTRIES:
                    heapq.heappush(kept, d.name)
                else:
                    heapq.heappushpop(kept, d.name)
    names = sorted(kept)

    total = words = 0
    over = [f"{found - len(names)} older entries: the record holds more than the "
            f"{MAX_ENTRIES:,} nvstage reads from one (MAX_ENTRIES)"] if found > len(names) else []
    for i, n in enumerate(reversed(names)):  # the newest first: what the build is now
        where = printable(f"{folder}/tu/{n}")
        try:
            data = read_regular(folder / "tu" / n, limit=MAX_ENTRY_BYTES, what="entry")
            total += len(data)
            if total > MAX_RECORD_BYTES:
                over = [f"{found - i} older entries: the record holds more than the "
                        f"{MAX_RECORD_BYTES >> 20} MiB nvstage reads from one "
                        "(MAX_RECORD_BYTES)"]
                break
            if _values(data) > MAX_ENTRY_VALUES:
                raise ArtifactError(f"{where}: more than {MAX_ENTRY_VALUES:,} JSON values, "
                                    "which no entry nvstage writes holds")
            entry = Entry.from_json(json.loads(data), where)
            words += argv_weight(entry.argv)
            if words > MAX_RECORD_WORDS:
                over = [f"{found - i} older entries: the record holds more than the "
                        f"{MAX_RECORD_WORDS:,} command words nvstage reads from one "
                        "(MAX_RECORD_WORDS)"]
                break
            entry.file = printable(n)
            _keep_in_file(entry, folder / "tu" / n, data)
            rec.entries.append(entry)
        except (ArtifactError, UsageError, ValueError, RecursionError) as e:
            rec.skipped.append(printable(f"{n}: {getattr(e, 'message', None) or e}"))
    rec.entries.sort(key=lambda e: e.started)
    rec.skipped = sorted(rec.skipped) + over  # in the names' (start) order
    return rec


def argv_weight(argv: list[str]) -> int:
    """What a command's words weigh against ``MAX_RECORD_WORDS``: each word one, and every
    ``_WORD_CHARS`` characters of them one more (a long word holds what many short ones do)."""
    return len(argv) + sum(map(len, argv)) // _WORD_CHARS


def _values(data: bytes) -> int:
    """An upper bound of the JSON values ``data`` holds, counted without parsing it: every
    value but a container's first follows a comma; each container has one first value."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def now() -> float:
    return time.time()
