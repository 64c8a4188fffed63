"""What a stage's cache key hashes, and when a key is bound to the build's work folder.

A stage's key hashes what decides its outputs: the tool (resolved path, size, mtime, and the
toolkit version), its arguments with the work folder's path cut out, the current folder, the
environment nvcc gives it plus the host compiler's own variables, and the contents of every
file it reads. The current folder stays in the key: nvcc hands cudafe++ and cicc the source's
absolute path, and the module id (and so the host object) is derived from it. Host-compiler
stages also read headers nobody names: their direct key leaves the headers out, and the
headers the compiler listed last time are hashed into the keys found through it (the direct
mode: ``stage_cache.py``; a new file that would hide one of them: ``headers.py``).

The work folder. Intermediate files live in a per-build folder whose path the tools see and
sometimes write. No text stands for it: keys see every argument, name and work-folder file
cut at each occurrence of the path (a list of pieces), so a build in another folder finds the
same keys, and an input spelling the path in one folder is another key in the next. A stage
is looked up under two keys: one any folder may use, then one bound to this folder; a result
whose outputs hold the path where another folder could not trust it is stored under the bound
one (``Cache.put``, ``local/entries.py``). Only the bound key is used where a tool may carry the
path on in a form no offset finds (escaped, as hex, compressed, inside a binary whose layout
follows the path's length), or where a file from outside the folder spells it
(``Keys.pinned``).

A base folder (``NVSTAGE_BASE_DIR``, ccache's ``base_dir``; ``Place``). Without one, the keys
hold the current folder and the absolute paths nvcc passes: a build elsewhere finds other
keys (a miss, never a wrong hit). With one, the stages are given the paths under it relative
to the current folder (so ``__FILE__``, line markers and cudafe++'s names read relative, as
with ccache), and keys see those paths and the current folder relative to the base folder: a
checkout at another path finds the same keys. A tool may still make a relative path absolute
(cicc's line table with ``-lineinfo``, gcc's working folder with ``-g``): an output holding the
base folder's path goes under a key bound to the place (``Cache.put``'s ``place``), so another
place runs the stage. Anything the rewrite leaves absolute (``-DDATA=/ckout/x``) stays in the
key as it is, and so binds the key to the place too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass

from nvstage.files import open_regular
from nvstage.fsio import json_digest
from nvstage.compiler.cache.local.relocation import Work, cut, cut_digest, pieces_ok
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.toolkit.locate import Toolkit
from nvstage.compiler.cache.command.command_key import TOOL_ENV

# The host compiler's own environment: anything here changes what gcc reads or writes.
HOST_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "GCC_EXEC_PREFIX",
            "COMPILER_PATH", "LIBRARY_PATH", "SOURCE_DATE_EPOCH", "LANG", "LC_ALL",
            "LC_MESSAGES", "LC_CTYPE", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", *TOOL_ENV)


@dataclass(frozen=True)
class Look:
    """A file as a key sees it."""

    digest: str
    inside: bool  # in the work folder: hashed as cut at the folder's path
    mentions: bool  # the folder's path occurs in it (or, outside the folder, in its name)
    binary: bool  # it holds a NUL byte


class FileHasher:
    """Files as keys see them.

    A file in the work folder is hashed cut at the folder's path (the pieces and the sites),
    so a build in another folder finds the same keys and no text can pass for the path.
    Files elsewhere (headers) are hashed as they are and remembered by (inode, size, mtime,
    ctime): every preprocessing stage of a build reads the same ones. Only regular files.
    """

    def __init__(self, work: str | os.PathLike):
        self.volatile = os.path.join(os.path.abspath(work), "")
        self.work = os.fsencode(os.path.abspath(work))
        self._memo: dict[str, tuple[tuple, Look]] = {}
        # Digests earlier processes kept by identity (``store/hash_memo.py``), when the
        # stage cache gives them.
        self.kept = None
        # Work-folder files a hit stands for but never wrote: the next stage is keyed with
        # what the entry recorded (``cache/stage/stage_cache.py`` fills and empties it).
        self.virtual: dict[str, Look] = {}

    def __call__(self, path: str) -> str | None:
        got = self.look(path)
        return got.digest if got else None

    def look(self, path: str) -> Look | None:
        if self.virtual:
            got = self.virtual.get(os.path.normpath(os.path.abspath(path)))
            if got is not None:
                return got
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None  # a FIFO or device would block or never end
        if os.path.abspath(path).startswith(self.volatile):
            try:
                with open_regular(path) as f:
                    data = f.read()
            except OSError:
                return None
            blob, sites = cut(data, self.work)
            return Look(cut_digest(blob, sites), True, bool(sites), b"\0" in data)
        # ctime too: a copy that keeps size and mtime (cp -p, rsync -a) still moves it.
        sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        got = self._memo.get(path)
        if got and got[0] == sig:
            return got[1]
        kept = self.kept.get(path, sig) if self.kept is not None else None
        if kept is not None:  # settled before this work folder's random name existed
            (digest, binary), mentions = kept, False
        else:
            try:
                digest, mentions, binary = _scan(path, self.work)
            except OSError:
                return None
        look = Look(digest, False, mentions or self.work in os.fsencode(path), binary)
        if kept is None and self.kept is not None and not look.mentions:
            self.kept.add(path, sig, digest, binary)
        self._memo[path] = (sig, look)
        return look


def _scan(path: str, part: bytes, chunk: int = 1 << 20) -> tuple[str, bool, bool]:
    """sha256 of a file, whether ``part`` occurs in it and whether it holds a NUL byte."""
    h = hashlib.sha256()
    found = binary = False
    tail = b""
    with open_regular(path) as f:  # swapped for a FIFO since the stat: refused, not waited on
        while block := f.read(chunk):
            h.update(block)
            found = found or part in tail + block
            binary = binary or b"\0" in block
            tail = block[-len(part):]
    return h.hexdigest(), found, binary


@dataclass(frozen=True)
class ToolVersions:
    """A toolkit's tools as ``tool_identity`` sees them: its root (with a trailing separator),
    each tool's real path -> the version it reports, and nvcc's (for cicc, which says none)."""

    root: str
    versions: dict
    toolkit_version: str

    @classmethod
    def of(cls, toolkit: Toolkit) -> ToolVersions:
        return cls(os.path.join(toolkit.root, ""),
                   {os.path.realpath(t.path): t.version for t in toolkit.tools.values()
                    if t.path is not None and t.version}, toolkit.version)


def tool_identity(path: str, tools: ToolVersions | None = None) -> list:
    """A tool as a key part: its real path, size and mtime (ccache's compiler_check=mtime).

    A toolkit's own tool (under ``tools.root``) gives the version it reports instead of its
    mtime: pip writes the wheels' files with the time of the install, so every CI runner (and
    every run that installs afresh) would otherwise key the device stages apart and never find
    what another wrote. The version is asked again whenever the tool's stat moves
    (``toolkit._cached_versions``); a rebuild of one release at the same size is not a case
    this tells apart."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return [real, None, None]
    if tools is not None and real.startswith(tools.root):
        return [real, st.st_size, "version", tools.versions.get(real) or tools.toolkit_version]
    return [real, st.st_size, st.st_mtime_ns]


# Options whose value, written joined to them, is a path the base folder rewrites (gcc's and
# nvcc's tools'); -D and -U are never rewritten: a macro's value is the program's, not a path.
_PATH_PREFIXES = ("-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-I", "-L",
                  "-o", "-MF")
_LONG_VALUE = re.compile(r"(--[A-Za-z][\w-]*=)(/.*)")


class Place:
    """Where a build runs, as keys see it, with an optional base folder (``NVSTAGE_BASE_DIR``):
    absolute paths under it are written relative to the current folder, in the stages'
    arguments (``word``) and in the names keys hold (``rel``); the current folder is keyed
    relative to the base folder. Paths in the work folder are left as they are (keys cut them
    out already). Without a base folder every method gives its input back."""

    def __init__(self, base: str | None, cwd: str, work: str):
        # A current folder named through a link: ".." from it would climb the link's target,
        # not the path's parent. The rewrite is skipped (the keys then hold absolute paths).
        self.base = base if base and os.path.realpath(cwd) == cwd else None
        self.cwd = cwd
        self._work = os.path.join(os.path.abspath(work), "")
        self.raw = os.fsencode(self.base) if self.base else b""

    def under(self, path: str) -> bool:
        return bool(self.base) and (path == self.base or path.startswith(self.base + os.sep))

    def rel(self, path: str) -> str:
        """``path`` relative to the current folder when it is absolute, under the base folder
        and not in the work folder; else unchanged."""
        if not self.base or not path.startswith(os.sep) or not self.under(path) or \
                os.path.join(path, "").startswith(self._work):
            return path
        if os.path.normpath(path) == path.rstrip(os.sep):
            return os.path.relpath(path, self.cwd)
        # relpath would normalise "build/../include", which the system resolves through
        # "build" (a link?): the base folder's part is made relative, the rest kept as it is.
        return os.path.relpath(self.base, self.cwd) + path[len(self.base):]

    def word(self, arg: str) -> str:
        """An argument with a path under the base folder made relative: the whole word, a
        path joined to one of ``_PATH_PREFIXES``, or a ``--long-option=/path``."""
        if not self.base or self.base not in arg:
            return arg
        if arg.startswith(os.sep):
            return self.rel(arg)
        for prefix in _PATH_PREFIXES:
            if arg.startswith(prefix + os.sep):
                return prefix + self.rel(arg[len(prefix):])
        m = _LONG_VALUE.fullmatch(arg)
        if m:
            return m.group(1) + self.rel(m.group(2))
        return arg

    def cwd_part(self):
        """The current folder as keys hold it."""
        if self.under(self.cwd):
            return ["base", os.path.relpath(self.cwd, self.base)]
        return self.cwd

    def tree(self, obj):
        """``obj`` (lists, strings, None) with every absolute path under the base folder
        relative to the current folder: the shadow state of a header set (``headers.py``)."""
        if isinstance(obj, str):
            return self.rel(obj)
        if isinstance(obj, (list, tuple)):
            return [self.tree(x) for x in obj]
        return obj


class Paths:
    """Names and arguments as keys see them, cut at the work folder's path (a list of pieces:
    no text can pass for the path), paths under a base folder relative (``Place``); resolve
    paths against cwd."""

    def __init__(self, work: str, cwd: str, place: Place | None = None):
        self.work = os.path.abspath(work)
        self.cwd = cwd
        self.place = place or Place(None, cwd, work)

    def norm(self, text: str) -> list[str]:
        return self.place.word(text).split(self.work)

    def name(self, text: str) -> str:
        """``norm`` as one string, for the keys of a JSON object (header sets)."""
        return json.dumps(self.norm(text))

    def real(self, name: str) -> str | None:
        """The path a ``name`` stands for in this build; None when it is no such name."""
        try:
            pieces = json.loads(name)
        except ValueError:
            return None
        return self.work.join(pieces) if pieces_ok(pieces) else None

    def abs(self, path: str) -> str:
        return os.path.join(self.cwd, path)


def mentions(obj, text: str) -> bool:
    """Whether ``text`` occurs in any string inside ``obj`` (lists, tuples, dicts)."""
    if isinstance(obj, str):
        return text in obj
    if isinstance(obj, dict):
        return any(mentions(k, text) or mentions(v, text) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return any(mentions(x, text) for x in obj)
    return False


_DEP_WORD = re.compile(r"(?:\\[ #\\]|\S)+")
_DEP_UNESCAPE = re.compile(r"\\([ #\\])|\$(\$)")


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a make rule written by ``gcc -MD`` (escaped blanks kept)."""
    words = [_DEP_UNESCAPE.sub(lambda m: m.group(1) or m.group(2), w)
             for w in _DEP_WORD.findall(text.replace("\\\n", " "))]
    # The first word(s) up to the one ending in ":" are the target.
    for n, w in enumerate(words):
        if w.endswith(":"):
            return list(dict.fromkeys(words[n + 1:]))
    return []


# The host compiler's stages read headers no command line names: they use the direct mode.
HOST_COMPILER = frozenset({StageKind.HOST_PREPROCESS, StageKind.DEVICE_PREPROCESS,
                            StageKind.HOST_COMPILE, StageKind.DLINK_COMPILE})


def key_args(stage: Stage, paths: Paths) -> list[list[str] | None]:
    """The arguments as a key sees them: each cut at the work folder's path and, for the host
    compiler, the ``-o`` file as an empty slot (an object or .ii does not depend on its own
    name; None, which no argument can be)."""
    out: list[list[str] | None] = [paths.norm(a) for a in stage.argv[1:]]
    if stage.kind in HOST_COMPILER:
        for n, a in enumerate(stage.argv[1:-1]):
            if a == "-o" and stage.argv[n + 2] in stage.outputs:
                out[n + 1] = None
    return out


def libraries(stage: Stage, cwd: str) -> list[str] | None:
    """The archives a device link reads through ``-lNAME`` (nvlink searches the ``-L``
    folders in order, as a linker does); None when one is not found there."""
    dirs, names = [], []
    args = iter(stage.argv[1:])
    for a in args:
        for flag, into in (("-L", dirs), ("--library-path", dirs), ("-l", names),
                           ("--library", names)):
            if a == flag:
                into.append(next(args, ""))
            elif a.startswith(flag + "=") or (len(flag) == 2 and a.startswith(flag)):
                into.append(a[len(flag):].removeprefix("="))
            else:
                continue
            break
    found = []
    for name in names:
        path = next((p for d in dirs if os.path.isfile(p := os.path.join(cwd, d,
                                                                          f"lib{name}.a"))),
                    None)
        if path is None:
            return None
        found.append(path)
    return found


# Tools that may carry what they read into their outputs in another form (PTX byte lists, a
# fatbinary's C array, a linked or compressed image): the work folder's path in a file they read
# can reach their outputs where no offset finds it.
_REENCODE = frozenset({StageKind.CICC, StageKind.PTXAS, StageKind.FATBINARY,
                       StageKind.DEVICE_LINK, StageKind.DLINK_FATBINARY})
# Flags that compress debug sections, and the work folder's path in them (gcc -gz, as's).
_COMPRESS = re.compile(r"-gz|.*compress-debug-sections")


class Keys:
    """The keys of one build's stages: its work folder, current folder and environment."""

    def __init__(self, plan: Plan, cwd: str, work: str, toolkit: Toolkit,
                 base: str | None = None, *, traced: bool = False):
        self.work = os.path.abspath(work)
        self.cwd, self.toolkit = cwd, toolkit
        self.hasher = FileHasher(work)
        self._tools = ToolVersions.of(toolkit)
        self._idents: dict[str, list] = {}  # each tool's, once per build (a realpath each)
        self.place = Place(base, cwd, self.work)
        self.paths = Paths(work, cwd, self.place)
        self.where = Work(self.work)
        host_env = {k: os.environ[k] for k in HOST_ENV if k in os.environ}
        # The current folder is part of every key: nvcc gives cudafe++ and cicc the source's
        # absolute path, and outputs (module id, #line markers) depend on it. Under a base
        # folder, relative to it: the stages then get relative paths (``Place``).
        self.env_part = [self.place.cwd_part(), sorted(plan.variables.items()),
                         sorted(host_env.items())]
        # cicc under -fdevice-time-trace can write other code (seen: CUB's merge sort): a
        # traced build's stages and an untraced one's never answer each other. Untraced keys
        # are as they were.
        if traced:
            self.env_part.append("traced")
        # Every key is bound to this folder when a tool may write its path escaped, or when
        # what keys keep whole (the current folder, the environment) holds it: an output may
        # then hold the path where it did not come from the path.
        self._bound = not self.where.plain or mentions(self.env_part, self.work)

    def inputs(self, stage: Stage,
               reads: list[str]) -> tuple[list[str], list[list], list[Look | None]] | None:
        """What ``stage`` reads as its key sees it: (the files, with the archives a device
        link finds; [name, digest] for each; each file's ``Look``). None when the stage cannot
        be keyed: an archive not found, or a named input missing (its tool says so itself)."""
        if stage.kind is StageKind.DEVICE_LINK:
            libs = libraries(stage, self.cwd)
            if libs is None:  # a library we cannot find cannot be keyed: just run it
                return None
            reads = reads + libs
        inputs, looks = [], []
        for p in reads:
            look = self.hasher.look(self.paths.abs(p))
            if look is None and p in stage.inputs:
                return None
            inputs.append([self.paths.norm(p), look and look.digest])
            looks.append(look)
        return reads, inputs, looks

    def base(self, stage: Stage, inputs: list[list]) -> list:
        """The parts of ``stage``'s key, its inputs' digests included."""
        # stage/3: no text stands for the work folder any more. ptxas/4: ptxas runs without
        # nvstage's -v, which the cubins of older entries carry in their note of its options.
        return ["ptxas/4" if stage.kind is StageKind.PTXAS else "stage/3",
                self.toolkit.version, stage.kind.value,
                self.tool(stage.argv[0]), key_args(stage, self.paths), self.env_part, inputs]

    def tool(self, path: str) -> list:
        """``tool_identity`` of a stage's tool, as this build first saw it."""
        got = self._idents.get(path)
        if got is None:
            got = self._idents[path] = tool_identity(path, self._tools)
        return got

    def direct(self, base: list, pinned: bool) -> str:
        """The direct key of a host-compiler stage: its key without the headers it reads. One
        bound from the start binds every key found through it."""
        at = [["at", self.work]] if pinned else []
        if pinned and self.place.base:
            at.insert(0, ["place", self.place.base])
        return json_digest([*base, "direct/4", *at])

    def pinned(self, stage: Stage, looks: list[Look | None]) -> bool:
        """Whether this stage's keys must be bound to the work folder before it runs: the
        folder's path may reach an output where no offset finds it (escaped, re-encoded,
        compressed, or inside a binary whose layout follows the path's length), or as text
        that did not come from the path (a file outside the folder naming it)."""
        if self._bound or mentions(self.tool(stage.argv[0]), self.work):
            return True
        if any(_COMPRESS.match(a) for a in stage.argv):
            return True
        return any(look is not None and look.mentions and
                   (not look.inside or look.binary or stage.kind in _REENCODE)
                   for look in looks)

    def candidates(self, parts: list, pinned: bool) -> tuple[str, ...]:
        """The keys to look under, in order: the one any folder may use (unless ``pinned``),
        then, under a base folder, the one bound to this place, then the one bound to this
        work folder (and place) (``Cache.put`` picks between them by the outputs)."""
        if not self.place.base:
            bound = json_digest([*parts, ["at", self.work]])
            return (bound,) if pinned else (json_digest(parts), bound)
        placed = [*parts, ["place", self.place.base]]
        bound = json_digest([*placed, ["at", self.work]])
        return (bound,) if pinned else (json_digest(parts), json_digest(placed), bound)

    def place_key(self, keys: tuple[str, ...]) -> tuple[bytes, str] | None:
        """``Cache.put``'s ``place`` for ``candidates``: None without a base folder."""
        if not self.place.base or len(keys) < 3:
            return None
        return self.place.raw, keys[1]
