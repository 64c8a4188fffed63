"""The one interface every remote backend speaks, and what it may raise.

A backend only moves bytes under names (64 hex digits, made by ``objects.object_name``):
``get(name, limit)`` gives the bytes or None, ``put(name, data)`` stores them, ``close()`` lets
its connections go; ``get_many(names, limit)``, when it has one, fetches several in one round
trip. It knows nothing of entries, signatures or the local cache. Every operation is bounded
in time (``deadline.py``) and what is read is bounded in size: no answer is read beyond the
limit the caller gives. Anything that is not an answer (refused, reset, timed out, a reply that
is not the protocol, an HTTP redirect: never followed, so credentials never go to another host)
raises ``Fault``, and a server that answers but will not store raises ``Refused``. ``tier.py``
turns either into "this tier is off for the rest of the build". A new backend is one file
with a class of this shape, named in ``tier.open_backend``.
"""

from __future__ import annotations

import re
from typing import Protocol

class Fault(Exception):
    """The server did not answer as a server of its kind does (message: why, masked)."""


class Refused(Fault):
    """The server answered, and will not store (full, or no permission to write)."""


class Backend(Protocol):
    """What ``tier.RemoteTier`` asks of a backend."""

    def get(self, name: str, limit: int) -> bytes | None: ...

    def put(self, name: str, data: bytes) -> None: ...

    def close(self) -> None: ...


NAME = re.compile(r"[0-9a-f]{64}")


def checked_name(name: str) -> str:
    """``name`` if it is one (64 hex digits): nothing else becomes a key or a URL path."""
    if not NAME.fullmatch(name):
        raise ValueError(f"not an object name: {name!r}")
    return name
