"""One remote tier, for the whole process: its backend (opened on first use), whether it is on,
whether it may be written, and how its entries are signed and checked; its figures are counted
in the caller's ``TierStats`` (``cache/local/notes.py``).

Faults never fail a build. Each operation is bounded (``deadline.py``); a fault (down, killed,
stopped, not the protocol) turns the tier off for the rest of the invocation, with one line
(``notice``), and so does waiting on it past its budget (``budget.py``); a server that refuses
writes (full) keeps serving reads, and the build stops writing to it. An object that is not an
entry of ours (garbage in a key, a bad signature) is a rejected miss: the tier stays on, and a
writer's fresh result replaces it. The backends are imported only when a tier is first used.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from nvstage.compiler.cache.remote.protocol import Backend, Fault, Refused
from nvstage.compiler.cache.remote.budget import Budget, OverBudget
from nvstage.compiler.cache.remote.objects import Rejected, object_name, pack, unpack
from nvstage.errors import RemoteCacheError

if TYPE_CHECKING:
    from nvstage.compiler.cache.local.notes import TierStats
    from nvstage.compiler.cache.remote.spec import Spec


def open_backend(spec: Spec) -> Backend:
    """The backend for ``spec``: Redis (``redis.py``) or HTTP (``http.py``), imported only
    now (sockets, TLS, http.client: a build without a remote tier loads none of them)."""
    if spec.kind == "redis":
        from nvstage.compiler.cache.remote.redis import RedisBackend

        return RedisBackend(spec)
    from nvstage.compiler.cache.remote.http import HttpBackend

    return HttpBackend(spec)

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


class RemoteTier:
    """One configured remote: its backend (opened on first use), whether it is on, whether it
    may be written, and how entries are signed and checked. Shared by every build of this
    process: a tier that went off stays off (the invocation's rest)."""

    def __init__(self, spec: Spec, *, signer=None, verifier=None, require=False,
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
        # Told when the tier goes off (why; True: over its budget, not a fault); True back
        # when a command of the build said it already.
        self.on_down: Callable[[RemoteTier, str, bool], bool] | None = None

    @property
    def writable(self) -> bool:
        return not (self.read_only or self.off or self.writes_off)

    def _open(self):
        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    self._backend = open_backend(self.spec)
        return self._backend

    def turn_off(self, why: str, *, quiet: bool = False, slow: bool = False) -> None:
        with self._lock:
            if self.off:
                return
            self.off = why
        if quiet:
            return
        # Once a build: on_down says whether another of its commands said it already.
        if not (self.on_down is not None and self.on_down(self, why, slow)):
            notice(f"remote cache {self.label} is off for the rest of this build: {why}")

    def _fault(self, e: Fault, stats: TierStats, writing: bool) -> None:
        stats.errors += 1
        why = self.spec.mask(str(e))
        if isinstance(e, Refused) and writing:
            with self._lock:
                if self.writes_off:
                    return
                self.writes_off = why
            notice(f"remote cache {self.label} refuses writes ({why}): nothing more is "
                   f"written to it in this build")
            return
        self.turn_off(why)

    def get(self, kind: str, keys: Sequence[str], stats: TierStats, limit: int,
            budget: Budget | None = None) -> tuple[str, dict, list[bytes]] | None:
        """The first of ``keys`` this tier holds an acceptable object for: (key, document,
        blobs); None when none (a fault, or waiting past ``budget``, turns the tier off and
        is a miss)."""
        if self.off:
            return None
        t = time.perf_counter()
        ask = budget.ask if budget is not None else _plain
        try:
            backend = self._open()
            names = [object_name(kind, k) for k in keys]
            many = getattr(backend, "get_many", None)
            found = ask(many, names, limit) if many is not None and len(names) > 1 else None
            for n, key in enumerate(keys):
                data = found[n] if found is not None else ask(backend.get, names[n], limit)
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
        except OverBudget as e:
            self.turn_off(str(e), slow=True)
            return None
        except Fault as e:
            self._fault(e, stats, False)
            return None
        except RemoteCacheError as e:  # a setting that cannot be used: said once, tier off
            self.turn_off(self.spec.mask(e.message))
            return None
        finally:
            stats.seconds += time.perf_counter() - t

    def put(self, kind: str, key: str, doc: dict, blobs: Sequence[bytes],
            stats: TierStats, budget: Budget | None = None) -> bool:
        if not self.writable:
            return False
        t = time.perf_counter()
        ask = budget.ask if budget is not None else _plain
        try:
            data = pack(kind, key, doc, blobs, self.signer)
            ask(self._open().put, object_name(kind, key), data)
            stats.bytes_written += len(data)
            return True
        except OverBudget as e:
            self.turn_off(str(e), slow=True)
            return False
        except Fault as e:
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


def _plain(call, *args):
    return call(*args)
