"""The stage cache's tiers: the local folder first, then remote storage (``remote.py``), with a
remote hit written back to the local folder.

What a remote tier holds. An object per entry and per direct key's header sets, named by the
SHA-256 of its kind and key (``object_name``), packed as::

    NVSTAGE-REMOTE/1\\n  flags(1)  [public key(32) signature(64)]  zlib(header length(4),
    header JSON, blobs)

The header repeats what the local entry's document says (each file's hash, size and the sites
of the work folder's path; the printed text as pieces; see ``store.py``) and the key, so an
object cannot stand for another key; its blobs are the local entry's, cut at the work folder.
A reader checks every hash before an entry reaches its local folder, where it is sealed with
that user's key like any other.

Trust. With signatures (``signing.py``), the signature covers the kind, the key and the packed
body; it is checked before anything is unpacked. A reader that trusts public keys (given, or
its own signing key's) requires a signature by one of them: an unsigned entry, one signed by
another key, or one for another key is rejected (a miss, counted). Without keys, a tier is
trusted as far as its hashes go: anyone who can write to the server can then write entries.
A read-only tier (``|read-only=true`` or ``NVSTAGE_REMOTE_READ_ONLY=1``: pull requests from
forks) writes nothing; a reader that requires signatures and holds no signing key writes
nothing either (its entries would be rejected by everyone like it).

Faults never fail a build. Each operation is bounded (``remote.py``'s timeouts); a fault (down,
killed, stopped, not the protocol) turns the tier off for the rest of the invocation, with one
line (``notice``); a server that refuses writes (full) keeps serving reads, and the build stops
writing to it. The tier is also marked down in the local folder for ``NVSTAGE_REMOTE_BACKOFF``
seconds (60), so the next compile commands of a build (one process each, under a launcher)
skip it without waiting again. An object that is not an entry of ours (garbage in a key, a bad
signature) is a rejected miss: the tier stays on, and a writer's fresh result replaces it.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.folder import MAX_DOC_BYTES
from nvstage.compiler.cache.local.relocation import pieces_ok
from nvstage.errors import RemoteCacheError

if TYPE_CHECKING:
    from nvstage.compiler.cache import remote

ENV_REMOTE = "NVSTAGE_REMOTE_CACHE"  # the tiers (``remote.py``, imported only when set)
ENV_USER = "NVSTAGE_REMOTE_USER"  # a server's credentials (``remote.py`` reads them)
ENV_PASSWORD = "NVSTAGE_REMOTE_PASSWORD"
ENV_TOKEN = "NVSTAGE_REMOTE_TOKEN"
ENV_READ_ONLY = "NVSTAGE_REMOTE_READ_ONLY"
ENV_SIGNING_KEY = "NVSTAGE_REMOTE_SIGNING_KEY"
ENV_VERIFY_KEY = "NVSTAGE_REMOTE_VERIFY_KEY"
ENV_REQUIRE_SIGNATURE = "NVSTAGE_REMOTE_REQUIRE_SIGNATURE"
ENV_BACKOFF = "NVSTAGE_REMOTE_BACKOFF"
DEFAULT_BACKOFF_S = 60.0
# Every variable that decides the tiers: a change makes new tiers (tests, long processes).
_ENV = (ENV_REMOTE, ENV_USER, ENV_PASSWORD, ENV_TOKEN, ENV_READ_ONLY, ENV_SIGNING_KEY,
        ENV_VERIFY_KEY, ENV_REQUIRE_SIGNATURE)

SCHEMA = "nvstage.remote/1"
MAGIC = b"NVSTAGE-REMOTE/1\n"
_SIGNED = 1
_MAX_SETS = 8
_MAX_OBJECT = 2 << 30
_LEVEL = 3  # zlib: objects and PTX shrink 3-5x at a fraction of level 9's time


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


# -- what is said -----------------------------------------------------------------------------
_sink: Callable[[str], None] | None = None


def set_notice_sink(sink: Callable[[str], None] | None) -> None:
    """Where a tier's one line goes (a tier going off, a setting that cannot be used): None
    for stderr (the default); the tests pass a sink that collects the lines."""
    global _sink
    _sink = sink


def notice(line: str) -> None:
    if _sink is not None:
        _sink(line)
        return
    try:
        sys.stderr.write(f"nvstage: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# -- packing ----------------------------------------------------------------------------------
class Rejected(Exception):
    """An object that is no entry this reader accepts (message: why)."""


def object_name(kind: str, key: str) -> str:
    return hashlib.sha256(f"{SCHEMA}/{kind}/{key}".encode()).hexdigest()


def pack(kind: str, key: str, doc: dict, blobs: Sequence[bytes], signer=None) -> bytes:
    header = json.dumps({"schema": SCHEMA, "kind": kind, "key": key,
                         "sizes": [len(b) for b in blobs], "doc": doc},
                        separators=(",", ":")).encode()
    z = zlib.compressobj(_LEVEL)
    body = z.compress(struct.pack(">I", len(header)) + header)
    for blob in blobs:
        body += z.compress(blob)
    body += z.flush()
    if signer is None:
        return MAGIC + bytes([0]) + body
    return MAGIC + bytes([_SIGNED]) + signer.public + signer.sign(kind, key, body) + body


def unpack(kind: str, key: str, data: bytes, verifier=None, require: bool = False,
           limit: int = _MAX_OBJECT) -> tuple[dict, list[bytes]]:
    """(document, blobs) of an object ``pack`` made for this kind and key. Raises
    ``Rejected``: not ours, damaged, too large, or (``require``) not signed by a key the
    ``verifier`` trusts. The signature is checked before anything is decompressed."""
    from nvstage.compiler.cache import signing

    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 1:
        raise Rejected("not an nvstage entry")
    flags = data[len(MAGIC)]
    at = len(MAGIC) + 1
    if flags & ~_SIGNED:
        raise Rejected("not an nvstage entry (unknown flags)")
    if flags & _SIGNED:
        public = data[at:at + signing.PUB_BYTES]
        sig = data[at + signing.PUB_BYTES:at + signing.PUB_BYTES + signing.SIG_BYTES]
        at += signing.PUB_BYTES + signing.SIG_BYTES
        body = data[at:]
        if verifier is not None and not verifier.verify(kind, key, body, public, sig):
            raise Rejected("signed by a key this reader does not trust, or not for this key")
    else:
        body = data[at:]
        if require:
            raise Rejected("unsigned, and this reader requires signatures")
    if require and verifier is None:
        raise Rejected("no public key to check signatures with")
    d = zlib.decompressobj()
    try:
        raw = d.decompress(body, limit + 1)
    except zlib.error:
        raise Rejected("damaged (not zlib data)") from None
    if len(raw) > limit or d.unconsumed_tail or not d.eof or d.unused_data:
        raise Rejected("damaged or too large")
    try:
        (n,) = struct.unpack(">I", raw[:4])
        header = json.loads(raw[4:4 + n])
        sizes = header["sizes"]
        if header.get("schema") != SCHEMA or header.get("kind") != kind or \
                header.get("key") != key or not isinstance(header.get("doc"), dict) or \
                not isinstance(sizes, list) or not all(type(s) is int and s >= 0
                                                       for s in sizes) or \
                4 + n + sum(sizes) != len(raw):
            raise Rejected("not the entry asked for, or damaged")
    except (struct.error, ValueError, KeyError, TypeError, RecursionError):
        raise Rejected("damaged (header)") from None
    blobs, at = [], 4 + n
    for s in sizes:
        blobs.append(raw[at:at + s])
        at += s
    return header["doc"], blobs


# -- one remote tier, for the whole process ---------------------------------------------------
@dataclass
class TierStats:
    """What one build (or, persisted, every build using a local folder) asked of a tier."""

    hits: int = 0
    misses: int = 0
    errors: int = 0  # faults: the tier went off
    rejected: int = 0  # objects that were no acceptable entry (garbage, signatures)
    stored: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0

    def add(self, other: dict) -> None:
        for k, v in other.items():
            if k in self.__dataclass_fields__ and isinstance(v, (int, float)):
                setattr(self, k, getattr(self, k) + v)

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["seconds"] = round(d["seconds"], 6)
        return d


class RemoteTier:
    """One configured remote: its backend (opened on first use), whether it is on, whether it
    may be written, and how entries are signed and checked. Shared by every build of this
    process: a tier that went off stays off (the invocation's rest)."""

    def __init__(self, spec: remote.Spec, *, signer=None, verifier=None, require=False,
                 read_only=False, why_read_only: str | None = None):
        self.spec = spec
        self.label = spec.label
        self.signer, self.verifier, self.require = signer, verifier, require
        self.read_only = read_only or spec.read_only
        self.why_read_only = why_read_only or ("read-only" if self.read_only else None)
        self.off: str | None = None  # why this tier is off
        self.writes_off: str | None = None
        self._backend = None
        self._lock = threading.Lock()
        self.on_down: Callable[[RemoteTier, str], None] | None = None

    @property
    def writable(self) -> bool:
        return not (self.read_only or self.off or self.writes_off)

    def _open(self):
        from nvstage.compiler.cache import remote

        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    self._backend = remote.open_backend(self.spec)
        return self._backend

    def turn_off(self, why: str, *, quiet: bool = False) -> None:
        with self._lock:
            if self.off:
                return
            self.off = why
        if not quiet:
            notice(f"remote cache {self.label} is off for the rest of this build: {why}")
            if self.on_down is not None:
                self.on_down(self, why)

    def _fault(self, e: remote.Fault, stats: TierStats, writing: bool) -> None:
        from nvstage.compiler.cache import remote

        stats.errors += 1
        why = self.spec.mask(str(e))
        if isinstance(e, remote.Refused) and writing:
            with self._lock:
                if self.writes_off:
                    return
                self.writes_off = why
            notice(f"remote cache {self.label} refuses writes ({why}): nothing more is "
                   f"written to it in this build")
            return
        self.turn_off(why)

    def get(self, kind: str, keys: Sequence[str], stats: TierStats,
            limit: int) -> tuple[str, dict, list[bytes]] | None:
        """The first of ``keys`` this tier holds an acceptable object for: (key, document,
        blobs); None when none (a fault turns the tier off and is a miss)."""
        from nvstage.compiler.cache import remote

        if self.off:
            return None
        t = time.perf_counter()
        try:
            backend = self._open()
            names = [object_name(kind, k) for k in keys]
            many = getattr(backend, "get_many", None)
            found = many(names, limit) if many is not None and len(names) > 1 else None
            for n, key in enumerate(keys):
                data = found[n] if found is not None else backend.get(names[n], limit)
                if data is None:
                    continue
                stats.bytes_read += len(data)
                try:
                    doc, blobs = unpack(kind, key, data, self.verifier, self.require, limit)
                except Rejected:
                    stats.rejected += 1
                    continue
                return key, doc, blobs
            return None
        except remote.Fault as e:
            self._fault(e, stats, False)
            return None
        except RemoteCacheError as e:  # a setting that cannot be used: said once, tier off
            self.turn_off(self.spec.mask(e.message))
            return None
        finally:
            stats.seconds += time.perf_counter() - t

    def put(self, kind: str, key: str, doc: dict, blobs: Sequence[bytes],
            stats: TierStats) -> bool:
        from nvstage.compiler.cache import remote

        if not self.writable:
            return False
        t = time.perf_counter()
        try:
            data = pack(kind, key, doc, blobs, self.signer)
            self._open().put(object_name(kind, key), data)
            stats.bytes_written += len(data)
            return True
        except remote.Fault as e:
            self._fault(e, stats, True)
            return False
        except RemoteCacheError as e:
            self.turn_off(self.spec.mask(e.message))
            return False
        finally:
            stats.seconds += time.perf_counter() - t

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


# -- configuration, once per process ----------------------------------------------------------
@dataclass
class Config:
    tiers: list[RemoteTier]
    problems: list[str]  # settings that could not be used (each said once)
    signing: str  # how entries are signed and checked, in words


_configs: dict[tuple, Config] = {}
_config_lock = threading.Lock()


def configured(environ=None) -> Config | None:
    """The remote tiers the environment names (None when it names none), made once per
    process for the same settings. Problems are collected, never raised: a tier that cannot
    be used is left out (or made read-only), and the build goes on."""
    environ = os.environ if environ is None else environ
    value = environ.get(ENV_REMOTE, "").strip()
    if not value:
        return None
    ident = tuple(environ.get(k) for k in _ENV)
    with _config_lock:
        got = _configs.get(ident)
        if got is None:
            got = _configs[ident] = _configure(value, environ)
            for line in got.problems:
                notice(line)
        return got


def _configure(value: str, environ) -> Config:
    from nvstage.compiler.cache import remote, signing

    problems: list[str] = []
    try:
        specs = remote.parse_specs(value, environ)
    except RemoteCacheError as e:
        return Config([], [f"{e.message}: building without the remote cache"], "")
    signer = verifier = None
    read_only = _truthy(environ.get(ENV_READ_ONLY))
    why_read_only = f"{ENV_READ_ONLY}" if read_only else None
    require = _truthy(environ.get(ENV_REQUIRE_SIGNATURE))
    if environ.get(ENV_VERIFY_KEY, "").strip():
        require = True
        try:
            verifier = signing.Verifier.from_text(environ[ENV_VERIFY_KEY])
        except RemoteCacheError as e:
            return Config([], [f"{ENV_VERIFY_KEY}: {e.message}: building without the remote "
                               f"cache (signatures are required, and cannot be checked)"], "")
    key_path = environ.get(ENV_SIGNING_KEY, "").strip()
    if key_path:
        try:
            signer = signing.Signer.from_file(key_path)
            if verifier is None:
                verifier = signing.Verifier([signer.public])
            else:
                verifier.add(signer.public)
            require = True
        except RemoteCacheError as e:
            problems.append(f"{ENV_SIGNING_KEY}: {e.message}: nothing is written to the "
                            f"remote cache")
            read_only, why_read_only = True, "no usable signing key"
    if require and verifier is None:
        return Config([], [f"{ENV_REQUIRE_SIGNATURE} is set and no public key is given "
                           f"({ENV_VERIFY_KEY}): building without the remote cache"], "")
    if require and signer is None and not read_only:
        read_only, why_read_only = True, "signatures required, no signing key"
    trusted = f"{len(verifier.keys)} trusted key{'s' if len(verifier.keys) > 1 else ''}" \
        if verifier is not None else ""
    if signer is not None:
        how = f"writes signed, reads require signatures: {trusted}"
    elif require:
        how = f"reads require signatures: {trusted}"
    else:
        how = "unsigned: the server is trusted"
    tiers = [RemoteTier(spec, signer=signer, verifier=verifier, require=require,
                        read_only=read_only, why_read_only=why_read_only) for spec in specs]
    return Config(tiers, problems, how)


def reset() -> None:
    """Forget the tiers made so far (tests; a long-running process whose servers changed)."""
    with _config_lock:
        for config in _configs.values():
            for tier in config.tiers:
                tier.close()
        _configs.clear()


def _backoff(environ=None) -> float:
    environ = os.environ if environ is None else environ
    try:
        return max(0.0, float(environ.get(ENV_BACKOFF, DEFAULT_BACKOFF_S)))
    except ValueError:
        return DEFAULT_BACKOFF_S


# -- one build's tiers ------------------------------------------------------------------------
class Tiers:
    """What one build asks of the remote tiers, behind its local cache folder: entries and
    header sets fetched (and written back to the folder), results pushed, and the figures."""

    def __init__(self, cache: Cache, config: Config):
        self.cache = cache
        self.config = config
        self.remotes = list(config.tiers)
        self.stats = {t.label: TierStats() for t in self.remotes}
        self.local = TierStats()
        self.skipped: dict[str, str] = {}
        self.limit = min(_MAX_OBJECT, max(cache.max_bytes, 1 << 20))
        down = cache.tier_doc().get("down", {})
        now = time.time()
        backoff = _backoff()
        for tier in self.remotes:
            mark = down.get(tier.label) if isinstance(down, dict) else None
            if backoff and _down(mark, now) and not tier.off:
                self.skipped[tier.label] = f"found down by an earlier command: {mark.get('why')}"
            tier.on_down = self._mark_down

    def _on(self) -> list[RemoteTier]:
        return [t for t in self.remotes if not t.off and t.label not in self.skipped]

    def _mark_down(self, tier: RemoteTier, why: str) -> None:
        backoff = _backoff()
        if not backoff:
            return

        def change(doc):
            doc.setdefault("down", {})[tier.label] = {"until": time.time() + backoff,
                                                     "why": why}
        try:
            self.cache.update_tier_doc(change)
        except OSError:
            pass

    # -- entries ----------------------------------------------------------------------------
    def fetch_entry(self, keys: Sequence[str]) -> str | None:
        """Look for ``keys`` in each remote tier in turn; the first acceptable entry is
        written into the local folder and its key returned (None: a miss everywhere)."""
        for tier in self._on():
            stats = self.stats[tier.label]
            got = tier.get("entry", keys, stats, self.limit)
            if got is None:
                continue
            key, doc, blobs = got
            try:
                imported = self.cache.import_entry(key, doc, blobs)
            except OSError:
                imported = False
            if not imported and not os.path.isdir(self.cache._entry_dir(key)):
                stats.rejected += 1
                continue
            stats.hits += 1
            return key
        return None

    def missed(self) -> None:
        """A stage that runs: a miss in every tier that is on."""
        for tier in self._on():
            self.stats[tier.label].misses += 1

    def push_entry(self, key: str) -> None:
        """Write the local entry under ``key`` to every tier that takes writes."""
        writers = [t for t in self._on() if t.writable]
        if not writers:
            return
        got = self.cache.export_entry(key)
        if got is None:
            return
        doc, blobs = got
        for tier in writers:
            if tier.put("entry", key, doc, blobs, self.stats[tier.label]):
                self.stats[tier.label].stored += 1

    # -- header sets (the direct mode) ------------------------------------------------------
    def fetch_sets(self, dkey: str) -> list[tuple[dict[str, str], str]]:
        """Every header set the remote tiers hold for a direct key (checked as entries are)."""
        out: list[tuple[dict[str, str], str]] = []
        for tier in self._on():
            got = tier.get("direct", [dkey], self.stats[tier.label], MAX_DOC_BYTES)
            if got is None:
                continue
            for s in _sets(got[1]):
                if s not in out:
                    out.append(s)
        return out

    def push_sets(self, dkey: str, sets: Sequence[tuple[dict[str, str], str]]) -> None:
        """Write a direct key's header sets (newest first) to every tier that takes writes."""
        writers = [t for t in self._on() if t.writable]
        if not writers or not sets:
            return
        doc = {"sets": [{"headers": dict(h), "shadow": sh} for h, sh in sets[:_MAX_SETS]]}
        for tier in writers:
            tier.put("direct", dkey, doc, [], self.stats[tier.label])

    # -- figures ----------------------------------------------------------------------------
    def to_json(self) -> list[dict]:
        """This build's figures, tier by tier (the local folder first)."""
        out = [{"tier": "local", **self.local.to_json()}]
        for tier in self.remotes:
            d = {"tier": tier.label, **self.stats[tier.label].to_json()}
            if tier.off:
                d["off"] = tier.off
            elif tier.label in self.skipped:
                d["off"] = self.skipped[tier.label]
            elif tier.writes_off:
                d["writes_off"] = tier.writes_off
            if tier.why_read_only:
                d["read_only"] = tier.why_read_only
            out.append(d)
        return out


def _sets(doc: dict) -> list[tuple[dict[str, str], str]]:
    """The header sets a remote direct document holds, as ``Cache.header_sets`` gives them;
    anything malformed is left out."""
    out = []
    sets = doc.get("sets")
    if not isinstance(sets, list):
        return out
    for s in sets[:_MAX_SETS]:
        if not isinstance(s, dict):
            continue
        headers, shadow = s.get("headers"), s.get("shadow")
        if isinstance(headers, dict) and isinstance(shadow, str) and \
                all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()) and \
                all(pieces_ok(_json(k)) for k in headers):
            out.append((dict(headers), shadow))
    return out


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def open_tiers(cache: Cache | None) -> Tiers | None:
    """One build's tiers behind ``cache`` (None without a local cache or a remote one)."""
    if cache is None:
        return None
    config = configured()
    if config is None or not config.tiers:
        return None
    return Tiers(cache, config)


def record(cache: Cache, tiers: Tiers | None, local: TierStats | None = None) -> None:
    """Add one build's figures to those the local folder keeps (``nvstage cache``)."""
    rows = tiers.to_json() if tiers is not None else \
        [{"tier": "local", **(local or TierStats()).to_json()}]

    def change(doc):
        stats = doc.setdefault("stats", {})
        if not isinstance(stats, dict):
            stats = doc["stats"] = {}
        for row in rows:
            total, builds = _recorded(stats.get(row["tier"]))
            total.add({k: v for k, v in row.items() if k != "tier"})
            stats[row["tier"]] = {**total.to_json(), "builds": builds + 1}
    cache.update_tier_doc(change)


def _recorded(old) -> tuple[TierStats, int]:
    """A tier's figures as the cache folder keeps them, and the builds they cover (what is
    malformed counts as nothing)."""
    total = TierStats()
    if not isinstance(old, dict):
        return total, 0
    total.add(old)
    return total, old["builds"] if isinstance(old.get("builds"), int) else 0


def _down(mark, now: float) -> bool:
    """Whether a tier's recorded down mark (``Tiers._mark_down``) still holds at ``now``."""
    return isinstance(mark, dict) and isinstance(mark.get("until"), (int, float)) and \
        mark["until"] > now


def describe(cache: Cache, environ=None) -> list[dict] | None:
    """The tiers behind ``cache`` for ``nvstage cache``: the local folder, then each remote
    tier configured now or recorded before, with the figures over every build that used this
    folder, how each is configured, and the settings that cannot be used. None when no remote
    tier is configured or recorded (the output then reads as it did before tiers)."""
    from nvstage.paths import base_dir, base_dir_problem

    environ = os.environ if environ is None else environ
    doc = cache.tier_doc() if cache.state() == "ours" else {}
    stats = doc.get("stats") if isinstance(doc.get("stats"), dict) else {}
    down = doc.get("down") if isinstance(doc.get("down"), dict) else {}
    config = None
    problems: list[str] = []
    if environ.get(ENV_REMOTE, "").strip():
        config = _configure(environ[ENV_REMOTE].strip(), environ)
        problems = config.problems
    labels = [t.label for t in config.tiers] if config else []
    recorded = [k for k in stats if k != "local" and k not in labels]
    if not labels and not recorded and not problems:
        return None
    out = []
    for label in ["local", *labels, *recorded]:
        row = {"tier": label, **TierStats().to_json()}
        old = stats.get(label)
        if isinstance(old, dict):
            total, row["builds"] = _recorded(old)
            row.update(total.to_json())
        if label == "local":
            row["dir"] = str(cache.root)
            base, why = base_dir(), base_dir_problem()
            if base:
                row["base_dir"] = base
            elif why:
                row["base_dir_problem"] = why
        elif label in labels:
            tier = config.tiers[labels.index(label)]
            row["configured"] = True
            row["signing"] = config.signing
            if tier.why_read_only:
                row["read_only"] = tier.why_read_only
            if _down(down.get(label), time.time()):
                row["down"] = str(down[label].get("why"))
        else:
            row["configured"] = False
        out.append(row)
    if problems:
        out.append({"tier": None, "problems": problems})
    return out
