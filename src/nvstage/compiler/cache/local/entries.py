"""The stage cache's entries: a stage's outputs and what its tool printed, under a key.

Here a key is only a name (64 hex digits): what it hashes is ``keys.py``, how a build looks
stages up and stores them is ``stage.py``, and the header shadowing of the direct mode is
``headers.py``.

An entry is written in ``tmp/`` and renamed into place whole, so a reader sees all of it or
none; when two builds race, the second rename fails and its copy is dropped. Every file is
hash-checked while it is copied out: a corrupt or truncated entry is a miss and is removed.
``meta.json`` (which holds those hashes) is sealed (``fsio.seal``): an entry written or edited
without the key is a miss like a damaged one, and is removed. Restored files get the mode a
tool's fresh write would give them (the umask applied). A hit touches ``meta.json``; eviction
removes the least recently used entries over the limit (``eviction.py``). The work folder's
path is cut out of what is stored and pasted back (``relocation.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.cache.local.eviction import note_stored
from nvstage.compiler.cache.local.folder import MAX_DOC_BYTES, CacheFolder, is_dir, read_file
from nvstage.compiler.cache.local.relocation import (Work, cut, own_markers_only, paste,
                                                     pieces_ok, sites_ok)

# /3: documents sealed as every sealed document is (``fsio.seal``); a /2 entry is a miss.
SCHEMA = "nvstage.cache/3"


@dataclass
class StageEntry:
    """A stage's entry as read: its files (hash, size, sites), what the tool printed."""

    key: str
    path: Path
    files: list[dict]  # {"name", "sha256", "size", "sites"} in blob order
    stdout: str  # with the reading build's work folder put back
    stderr: str
    seconds: float  # how long the stage took when it really ran


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
            if meta is None or meta.get("key") != key or meta.get("schema") != SCHEMA:
                return False
            printed = [meta["stdout"], meta["stderr"]]
            if not all(pieces_ok(p) for p in printed) or \
                    (work is None and any(len(p) > 1 for p in printed)):
                return False
            stdout, stderr = (work.path.join(p) if work else p[0] for p in printed)
            return StageEntry(key, d, list(meta["files"]), stdout, stderr, float(meta["seconds"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return False

    def restore(self, entry: StageEntry, dests: Sequence[str | os.PathLike],
                work: Work | None = None) -> Restored | None:
        """Copy the entry's files to ``dests`` (same order), checking each hash on the way.

        ``work``: the restoring build's folder, pasted back at each file's sites (see ``put``).
        Returns None, having copied nothing into place, when a file is missing or damaged
        (or has sites and no ``work`` is given).
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
                dest = os.fspath(dest)
                size = info["size"]
                if type(size) is not int:
                    raise ValueError("bad size")
                data = read_file(entry.path / str(i), size)
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
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            for _, tmp in staged:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        with contextlib.suppress(OSError):
            os.utime(entry.path / "meta.json")  # least recently used goes first
        return out

    def put(self, key: str, files: Sequence[str | os.PathLike], *, stdout: str, stderr: str,
            seconds: float, names: Sequence[str] | None = None, about: dict | None = None,
            work: Work | None = None, pinned: str | None = None,
            own_markers: bool = False, place: tuple[bytes, str] | None = None) -> bool:
        """``put_entry``: whether it stored."""
        return self.put_entry(key, files, stdout=stdout, stderr=stderr, seconds=seconds,
                              names=names, about=about, work=work, pinned=pinned,
                              own_markers=own_markers, place=place) is not None

    def put_entry(self, key: str, files: Sequence[str | os.PathLike], *, stdout: str,
                  stderr: str, seconds: float, names: Sequence[str] | None = None,
                  about: dict | None = None, work: Work | None = None,
                  pinned: str | None = None, own_markers: bool = False,
                  place: tuple[bytes, str] | None = None) -> str | None:
        """Store ``files`` under ``key``; the key it went under, or None when another build
        stored it first, or when it may not be stored.

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
        with self._staging(key) as tmp:
            infos, bound, placed = [], False, False
            for i, f in enumerate(files):
                with open(f, "rb") as fh:
                    data = fh.read()
                    executable = bool(os.fstat(fh.fileno()).st_mode & 0o111)
                sites: list[int] = []
                if work is not None:
                    blob, sites = cut(data, work.raw)
                    bound = bound or bool(sites) and not (
                        own_markers and b"\0" not in data and
                        own_markers_only(data, work.raw, os.fsencode(os.fspath(f))))
                    data = blob
                placed = placed or (place is not None and place[0] in data)
                (tmp / str(i)).write_bytes(data)
                infos.append({"name": (names[i] if names else os.path.basename(f)),
                              "sha256": fsio.hexdigest(data), "size": len(data), "sites": sites,
                              **({"x": True} if executable else {})})
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
            final = self._entry_dir(key)
            if os.path.lexists(final):
                return None
            if not self._commit(tmp, final, key, infos, printed, seconds, about or {}):
                return None
            return key

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
                seconds: float, about: dict) -> bool:
        """Seal the entry's document into ``tmp`` and rename it into place; False when
        another build got there first (its entry is as good as ours)."""
        meta = {"schema": SCHEMA, "key": key, "files": infos, "stdout": printed[0],
                "stderr": printed[1], "seconds": seconds, "created": time.time(),
                "about": about}
        sealed = self._seal(meta)
        (tmp / "meta.json").write_bytes(sealed)
        self._dir("entries", key[:2])
        try:
            os.rename(tmp, final)
        except OSError:
            return False
        note_stored(self.root, len(sealed) + sum(i["size"] for i in infos))
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
        """An entry as a remote tier stores it: its document (files with their hashes and
        sites, the printed text as pieces, seconds, about) and the blobs, each checked; None
        when missing or damaged."""
        d = self._entry_dir(key)
        try:
            meta = self._unseal(read_file(d / "meta.json", MAX_DOC_BYTES))
            if meta is None or meta.get("key") != key or meta.get("schema") != SCHEMA:
                return None
            blobs = []
            for i, info in enumerate(meta["files"]):
                data = read_file(d / str(i), int(info["size"]))
                if fsio.hexdigest(data) != info["sha256"]:
                    return None
                blobs.append(data)
            doc = {k: meta[k] for k in ("files", "stdout", "stderr", "seconds", "about")}
            return doc, blobs
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
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
            if not isinstance(files, list) or len(files) != len(blobs) or \
                    not all(pieces_ok(p) for p in printed) or not isinstance(about, dict):
                return False
            infos = []
            for info, data in zip(files, blobs):
                name, sha, size = info["name"], info["sha256"], info["size"]
                sites = info.get("sites", [])
                if not isinstance(name, str) or not name.isdigit() or type(size) is not int \
                        or size != len(data) or sha != fsio.hexdigest(data) or \
                        not sites_ok(sites, size):
                    return False
                infos.append({"name": name, "sha256": sha, "size": size, "sites": sites,
                              **({"x": True} if info.get("x") is True else {})})
        except (KeyError, TypeError, ValueError):
            return False
        final = self._entry_dir(key)
        if os.path.lexists(final):
            return False
        with self._staging(key) as tmp:
            for i, data in enumerate(blobs):
                (tmp / str(i)).write_bytes(data)
            return self._commit(tmp, final, key, infos, printed, seconds, about)


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
