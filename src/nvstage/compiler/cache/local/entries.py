"""The stage cache's entries: a stage's outputs and what its tool printed, under a key.

Here a key is only a name (64 hex digits): what it hashes is ``cache/stage/stage_key.py``, how a build looks
stages up and stores them is ``cache/stage/stage_cache.py``, and the header shadowing of the direct mode is
``headers.py``.

An entry records every output (its size, the sites of the work folder's path, and the digest a
later stage's key sees, ``relocation.cut_digest``) but holds the bytes only of those a later
build needs (``stored``, the caller's choice: what the command asked for, and what a stage
that runs after a partial hit must be fed; a preprocessed source is made again by its stage
instead). The bytes are zstd frames (``store/zstd.py``), as ccache and sccache keep theirs.

An entry is written in ``tmp/`` and renamed into place whole, so a reader sees all of it or
none; when two builds race, the second rename fails and its copy is dropped. Every file is
hash-checked while it is copied out: a corrupt or truncated entry (a damaged frame too) is a
miss and is removed. ``meta.json`` (which holds those hashes) is sealed (``fsio.seal``): an
entry written or edited without the key is a miss like a damaged one, and is removed.
Restored files get the mode a tool's fresh write would give them (the umask applied). A hit
touches ``meta.json``; eviction removes the least recently used entries over the limit
(``eviction.py``). The work folder's path is cut out of what is stored and pasted back
(``relocation.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.cache.local.eviction import note_stored
from nvstage.compiler.store.folder import MAX_DOC_BYTES, CacheFolder, is_dir, read_file
from nvstage.compiler.cache.local.relocation import (Work, cut, cut_digest, own_markers_only,
                                                     paste, pieces_ok, sites_ok)
from nvstage.compiler.store import zstd

# /4: each output's key digest, only the files a later build needs, zstd frames; /3 entries
# (every file, uncompressed) and /2 ones are misses, made again.
SCHEMA = "nvstage.cache/4"
_OLD_SCHEMAS = ("nvstage.cache/3",)
MAX_MARKS = 16 << 20  # the files a preprocessed output names, as JSON


@dataclass(frozen=True)
class Recorded:
    """An output as an entry records it: what a key sees of it (``keys.Look``'s fields), its
    size once the work folder is pasted in, whether its bytes are held, and the SHA-256 of the
    file when it can be told without them (no site to paste)."""

    digest: str
    inside: bool
    mentions: bool
    binary: bool
    size: int
    stored: bool
    sha256: str | None


@dataclass(frozen=True)
class Printed:
    """What a stage's tool printed, and how long it ran: kept beside its files."""

    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Binding:
    """How an entry's files may hold the build's folder, and which key takes it when they do.

    ``work``: the build's folder. Each file, and the printed text, is stored without its
    path, with the sites where it was; ``restore`` pastes the restoring build's folder
    there: the same folder gets the same bytes back. Another folder may use the entry
    only when each site surely came from the path, not from text that happened to spell
    it (a source can spell a folder the user named): with ``own_markers``, a text file's
    sites in line markers naming that file itself (``own_markers_only``). Any other
    site, in a binary, or in the printed text, sends the entry to ``pinned``, a key bound
    to this folder (not stored at all without one).

    ``place``: (the base folder's path, the key bound to it) when keys see paths under a
    base folder as relative ones (``keys.Place``). An output or printed text that still
    holds the folder's absolute path (a tool made a relative path absolute: cicc's line
    table, gcc's -g working folder) is what a build in that place gives, not in another:
    it goes under the place's key (``pinned``, when bound to the work folder too, binds
    the place as well).
    """

    work: Work | None = None
    pinned: str | None = None
    own_markers: bool = False
    place: tuple[bytes, str] | None = None


@dataclass
class StageEntry:
    """A stage's entry as read: its files (hash, size, sites), what the tool printed."""

    key: str
    path: Path
    files: list[dict]  # {"name", "sha256", "size", "sites", "look", "z"} in output order
    stdout: str  # with the reading build's work folder put back
    stderr: str
    seconds: float  # how long the stage took when it really ran
    marks: dict | None = None  # {"sha256", "size"} of the files its outputs name (``marks``)
    work_len: int = 0  # the reading build's work folder's path, in bytes

    def recorded(self, i: int) -> Recorded:
        """Output ``i`` as recorded (its fields checked by ``get``)."""
        info = self.files[i]
        digest, inside, mentions, binary = info["look"]
        sites = info["sites"]
        return Recorded(digest, inside, mentions, binary,
                        info["size"] + len(sites) * self.work_len, "z" in info,
                        None if sites else info["sha256"])


@dataclass
class Restored:
    """Files copied out of an entry: destination -> (sha256, size)."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)


class Entries(CacheFolder):
    """A cache folder's entries: looked up, restored, stored, moved to and from a remote
    tier, discarded."""

    def _entry_dir(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / key

    def get(self, key: str, work: Work | None = None) -> StageEntry | None | bool:
        """The entry for ``key``, its printed text holding ``work``'s path where the tool's
        did; None when absent; False when present but unreadable (or needing a folder)."""
        d = self._entry_dir(key)
        try:
            raw = read_file(d / "meta.json", MAX_DOC_BYTES)
        except FileNotFoundError:
            return None
        except OSError:  # a link, FIFO, device or oversized file planted there
            return False
        if _sealed_as_before(raw):  # an entry from before /3: a miss, made again
            self.discard(key)
            return None
        try:
            meta = self._unseal(raw)
            if meta is not None and meta.get("schema") in _OLD_SCHEMAS:
                self.discard(key)  # every file, uncompressed: made again as /4
                return None
            if meta is None or meta.get("key") != key or meta.get("schema") != SCHEMA:
                return False
            printed = [meta["stdout"], meta["stderr"]]
            if not all(pieces_ok(p) for p in printed) or \
                    (work is None and any(len(p) > 1 for p in printed)):
                return False
            files = list(meta["files"])
            if not all(_info_ok(f) for f in files):
                return False
            marks = meta.get("marks")
            if marks is not None and not (isinstance(marks, dict) and
                                          _hex64(marks.get("sha256")) and
                                          type(marks.get("size")) is int):
                return False
            stdout, stderr = (work.path.join(p) if work else p[0] for p in printed)
            return StageEntry(key, d, files, stdout, stderr, float(meta["seconds"]), marks,
                              len(work.raw) if work else 0)
        except (ValueError, KeyError, TypeError, AttributeError):
            return False

    def packed_bytes(self) -> tuple[int, int]:
        """(the bytes the stage entries' files take, compressed; the same files as the builds
        wrote them): what compression saves, for ``nvstage cache``. Entries that do not read
        are left out."""
        packed = plain = 0
        for d, _, _ in self.entries():
            try:
                meta = self._unseal(read_file(d / "meta.json", MAX_DOC_BYTES))
                if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
                    continue
                held = [f for f in meta["files"] if _info_ok(f) and type(f.get("z")) is int]
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            packed += sum(f["z"] for f in held)
            plain += sum(f["size"] for f in held)
        return packed, plain

    def marks(self, entry: StageEntry, work: Work | None = None) -> list | None:
        """What ``put_entry`` kept of ``marks``: per output, the files a preprocessed output's
        line markers name and whether each is a system header, [[name, system], ...] (the
        dependency file is made from it, ``depfile.render_marked``); None when it kept none or
        it is damaged. Names spelling the work folder were kept as pieces."""
        if entry.marks is None:
            return None
        try:
            raw = zstd.decompress(read_file(entry.path / "marks", MAX_MARKS), MAX_MARKS)
            if fsio.hexdigest(raw) != entry.marks["sha256"]:
                return None
            doc = json.loads(raw)
            out = []
            for per in doc:
                if per is None:
                    out.append(None)
                    continue
                names = []
                for pieces, system in per:
                    if not pieces_ok(pieces) or (len(pieces) > 1 and work is None):
                        return None
                    names.append((work.path.join(pieces) if work else pieces[0],
                                  bool(system)))
                out.append(names)
            return out
        except (OSError, ValueError, TypeError, RecursionError, ImportError):
            return None

    def restore(self, entry: StageEntry, dests: Sequence[str | os.PathLike | None],
                work: Work | None = None) -> Restored | None:
        """Copy the entry's files to ``dests`` (same order; None: not this one), checking each
        hash on the way.

        ``work``: the restoring build's folder, pasted back at each file's sites (see ``put``).
        Returns None, having copied nothing into place, when a file asked for is missing,
        damaged or not held (or has sites and no ``work`` is given).
        Each destination is replaced by rename: a hard link or open reader elsewhere never
        sees the cache's bytes change. Each gets the mode the tool's own write would have
        given it: 0666 (0777 for an executable) less the umask, applied by the system.
        """
        if len(dests) != len(entry.files):
            return None
        staged: list[tuple[str, Path]] = []
        out = Restored()
        try:
            for i, (info, dest) in enumerate(zip(entry.files, dests, strict=True)):
                if dest is None:
                    continue
                dest = os.fspath(dest)
                size, packed = info["size"], info.get("z")
                if type(size) is not int or type(packed) is not int:
                    raise ValueError("not held")
                data = zstd.decompress(read_file(entry.path / str(i), packed), size)
                if len(data) != size or fsio.hexdigest(data) != info["sha256"]:
                    raise ValueError("hash mismatch")
                sites = info.get("sites", [])
                if not sites_ok(sites, len(data)) or (sites and work is None):
                    raise ValueError("bad sites")
                sha = info["sha256"]  # verified just above: hashed again only when pasted
                if sites:
                    data = paste(data, sites, work.raw)
                    sha = fsio.hexdigest(data)
                folder = os.path.dirname(dest) or "."
                os.makedirs(folder, exist_ok=True)
                tmp = os.path.join(folder, f".nvstage-{os.urandom(6).hex()}")
                # Created with the mode a fresh write asks for: the umask (and a folder's
                # default ACL) applies as it would to the tool's own file; mkstemp's 0600
                # would take read access from the group and others.
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                             os.O_CLOEXEC, 0o777 if info.get("x") else 0o666)
                staged.append((dest, Path(tmp)))
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                out.files[dest] = (sha, len(data))
            for dest, tmp in staged:
                os.replace(tmp, dest)
            staged = []
        except (OSError, ValueError, KeyError, TypeError, ImportError):
            return None
        finally:
            for _, tmp in staged:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        with contextlib.suppress(OSError):
            os.utime(entry.path / "meta.json")  # least recently used goes first
        return out

    def put(self, key: str, files: Sequence[str | os.PathLike], printed: Printed = Printed(),
            binding: Binding = Binding()) -> bool:
        """``put_entry`` with every file held and named by its own name: whether it stored."""
        return self.put_entry(key, files, printed, binding) is not None

    def put_entry(self, key: str, files: Sequence[str | os.PathLike], printed: Printed,
                  binding: Binding = Binding(), *, names: Sequence[str] | None = None,
                  about: dict | None = None, stored: Sequence[bool] | None = None,
                  marks: Callable[[bytes], list] | None = None,
                  replace: bool = False) -> str | None:
        """Store ``files`` under ``key``, with what the tool printed; the key it went under
        (``binding``'s rules), or None when another build stored it first, or when it may not
        be stored.

        ``stored``: which files' bytes the entry holds (all by default); every file is
        recorded (size, sites, the digest a key sees). ``marks``: what a preprocessed
        output's line markers name, from its bytes ([(name, system header?)]), kept for the
        dependency file. ``replace``: an entry already under the key that holds fewer
        files gives way (a build that had to make them again keeps them).
        """
        work, pinned, place = binding.work, binding.pinned, binding.place
        stdout, stderr, seconds = printed.stdout, printed.stderr, printed.seconds
        inside_of = os.path.join(work.path, "") if work is not None else None
        with self._staging(key) as tmp:
            infos, bound, placed, marked = [], False, False, []
            for i, f in enumerate(files):
                with open(f, "rb") as fh:
                    data = fh.read()
                    executable = bool(os.fstat(fh.fileno()).st_mode & 0o111)
                sites: list[int] = []
                binary = b"\0" in data
                inside = inside_of is not None and \
                    os.path.abspath(os.fspath(f)).startswith(inside_of)
                if inside:
                    blob, sites = cut(data, work.raw)
                    look = [cut_digest(blob, sites), True, bool(sites), binary]
                else:
                    blob, look = data, [fsio.hexdigest(data), False, bool(
                        work is not None and (work.raw in data or
                                              work.raw in os.fsencode(os.fspath(f)))), binary]
                    if work is not None:
                        blob, sites = cut(data, work.raw)
                if sites:
                    bound = bound or not (
                        binding.own_markers and not binary and
                        own_markers_only(data, work.raw, os.fsencode(os.fspath(f))))
                placed = placed or (place is not None and place[0] in blob)
                info = {"name": (names[i] if names else os.path.basename(f)),
                        "sha256": fsio.hexdigest(blob), "size": len(blob), "sites": sites,
                        "look": look, **({"x": True} if executable else {})}
                if marks is not None:
                    marked.append(marks(data))
                if stored is None or stored[i]:
                    packed = zstd.compress(blob)
                    (tmp / str(i)).write_bytes(packed)
                    info["z"] = len(packed)
                infos.append(info)
            printed = [[text] if work is None else text.split(work.path)
                       for text in (stdout, stderr)]
            if any(len(p) > 1 for p in printed):
                bound = True
            if bound:
                if pinned is None:
                    return None
                key = pinned
            elif place is not None and (placed or any(
                    os.fsdecode(place[0]) in piece for p in printed for piece in p)):
                key = place[1]
            marked = _marks_blob(marked, work) if marks is not None else None
            if marked is not None:
                (tmp / "marks").write_bytes(marked[1])
            final = self._entry_dir(key)
            if os.path.lexists(final):
                if not replace or self._holds_as_much(key, infos):
                    return None
                self.discard(key)
            if not self._commit(tmp, final, key, infos, printed, seconds, about or {},
                                marked[0] if marked else None):
                return None
            return key

    def _holds_as_much(self, key: str, infos: list[dict]) -> bool:
        """Whether the entry under ``key`` holds every file ``infos`` would."""
        entry = self.get(key, Work("/"))
        if not isinstance(entry, StageEntry) or len(entry.files) != len(infos):
            return False
        return all("z" in old or "z" not in new for old, new in zip(entry.files, infos))

    @contextlib.contextmanager
    def _staging(self, key: str) -> Iterator[Path]:
        """A held folder in tmp/ to make an entry in: ``_commit`` renames it into place, and
        what is left of it on the way out (a refusal, a full disk, Ctrl-C) is removed."""
        tmp, held = self._held_dir(f"{key[:16]}-")
        try:
            yield Path(tmp)
        finally:
            try:  # still the folder the descriptor holds: not renamed into place
                a, b = os.stat(tmp), os.fstat(held)
                if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                    shutil.rmtree(tmp, ignore_errors=True)
            except OSError:
                pass
            finally:
                os.close(held)

    def _commit(self, tmp: Path, final: Path, key: str, infos: list, printed: list,
                seconds: float, about: dict, marks: dict | None = None) -> bool:
        """Seal the entry's document into ``tmp`` and rename it into place; False when
        another build got there first (its entry is as good as ours)."""
        meta = {"schema": SCHEMA, "key": key, "files": infos, "stdout": printed[0],
                "stderr": printed[1], "seconds": seconds, "created": time.time(),
                "about": about, **({"marks": marks} if marks else {})}
        sealed = self._seal(meta)
        (tmp / "meta.json").write_bytes(sealed)
        self._dir("entries", key[:2])
        try:
            os.rename(tmp, final)
        except OSError:
            return False
        note_stored(self.root, len(sealed) + sum(i.get("z", 0) for i in infos) +
                    (marks["packed"] if marks else 0))
        return True

    def discard(self, key: str) -> None:
        """Remove an entry (damaged): renamed away first, so no reader sees half of it."""
        d = self._entry_dir(key)
        if not (is_dir(self.root / "entries") and is_dir(d.parent)):
            return  # through a link: not the cache's to remove
        trash = self._tmp() / f"trash-{os.urandom(16).hex()}"
        try:
            os.rename(d, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def export_entry(self, key: str) -> tuple[dict, list[bytes]] | None:
        """An entry as a remote tier stores it: its document (files with their hashes, sites
        and key digests, which of them are held, the printed text as pieces, seconds, about,
        the marks) and the blobs of the files held, uncompressed and each checked; None when
        missing or damaged."""
        entry = self.get(key, None)
        if not isinstance(entry, StageEntry):
            return None
        try:
            meta = self._unseal(read_file(entry.path / "meta.json", MAX_DOC_BYTES))
            blobs = []
            for i, info in enumerate(entry.files):
                if "z" in info:
                    data = zstd.decompress(read_file(entry.path / str(i), info["z"]),
                                           info["size"])
                    if fsio.hexdigest(data) != info["sha256"]:
                        return None
                    blobs.append(data)
            doc = {k: meta[k] for k in ("files", "stdout", "stderr", "seconds", "about")}
            if entry.marks is not None:
                raw = zstd.decompress(read_file(entry.path / "marks", MAX_MARKS), MAX_MARKS)
                if fsio.hexdigest(raw) != entry.marks["sha256"]:
                    return None
                doc["marks"] = json.loads(raw)
            return doc, blobs
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError,
                RecursionError):
            return None

    def import_entry(self, key: str, doc: dict, blobs: Sequence[bytes]) -> bool:
        """Write an entry a remote tier gave (``export_entry``'s form) into this cache, sealed
        with this user's key: the caller has checked its signature, if one is required; here
        every field is checked as ``get`` and ``restore`` will read it. False when it is not
        an entry, or is here already."""
        try:
            files = doc["files"]
            printed = [doc["stdout"], doc["stderr"]]
            seconds = float(doc["seconds"])
            about = doc.get("about") or {}
            if not isinstance(files, list) or not all(pieces_ok(p) for p in printed) or \
                    not isinstance(about, dict) or not all(_info_ok(f, True) for f in files) or \
                    sum(1 for f in files if "z" in f) != len(blobs):
                return False
            infos, held = [], iter(blobs)
            for info in files:
                name, sha, size = info["name"], info["sha256"], info["size"]
                clean = {"name": name, "sha256": sha, "size": size, "sites": info["sites"],
                         "look": info["look"], **({"x": True} if info.get("x") is True else {})}
                if "z" in info:
                    data = next(held)
                    if size != len(data) or sha != fsio.hexdigest(data):
                        return False
                    clean["z"] = data
                infos.append(clean)
            marks = doc.get("marks")
            marked = None
            if marks is not None:
                if not _marks_ok(marks):
                    return False
                marked = _pack_marks(marks)
        except (KeyError, TypeError, ValueError):
            return False
        final = self._entry_dir(key)
        if os.path.lexists(final):
            return False
        with self._staging(key) as tmp:
            for i, info in enumerate(infos):
                if "z" in info:
                    packed = zstd.compress(info["z"])
                    (tmp / str(i)).write_bytes(packed)
                    info["z"] = len(packed)
            if marked is not None:
                (tmp / "marks").write_bytes(marked[1])
            return self._commit(tmp, final, key, infos, printed, seconds, about,
                                marked[0] if marked else None)


def _hex64(x) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


def _info_ok(info, digits: bool = False) -> bool:
    """An output's record as ``put_entry`` writes it (``digits``: named by its place among
    the stage's outputs, as a stage's entries are)."""
    if not isinstance(info, dict):
        return False
    name, size, look = info.get("name"), info.get("size"), info.get("look")
    return isinstance(name, str) and (name.isdigit() or not digits) and \
        type(size) is int and size >= 0 and \
        _hex64(info.get("sha256")) and sites_ok(info.get("sites"), size) and \
        isinstance(look, list) and len(look) == 4 and _hex64(look[0]) and \
        all(type(b) is bool for b in look[1:]) and \
        ("z" not in info or (type(info["z"]) is int and info["z"] >= 0) or
         isinstance(info["z"], bytes))


def _marks_ok(marks) -> bool:
    return isinstance(marks, list) and all(
        per is None or (isinstance(per, list) and all(
            isinstance(m, list) and len(m) == 2 and pieces_ok(m[0]) and type(m[1]) is bool
            for m in per)) for per in marks)


def _pack_marks(doc: list) -> tuple[dict, bytes]:
    raw = json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogateescape")
    packed = zstd.compress(raw)
    return {"sha256": fsio.hexdigest(raw), "size": len(raw), "packed": len(packed)}, packed


def _marks_blob(marks: list, work: Work | None) -> tuple[dict, bytes] | None:
    """``put_entry``'s ``marks`` as the file an entry keeps: names cut at the work folder."""
    doc = []
    for per in marks:
        if per is None:
            doc.append(None)
            continue
        doc.append([[name.split(work.path) if work else [name], bool(system)]
                    for name, system in per])
    return _pack_marks(doc)


def _sealed_as_before(raw: bytes) -> bool:
    """Whether ``raw`` is an entry's document as nvstage.cache/2 sealed it (the seal a field
    of its JSON): read by nothing now, and no reason to count the entry damaged."""
    if not raw.startswith(b"{"):
        return False
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == "nvstage.cache/2"
