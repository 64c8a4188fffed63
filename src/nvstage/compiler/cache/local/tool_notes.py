"""Notes about the toolkit (tool versions, nvcc's option grammar) kept in the user's stage
cache (``tools/``, sealed like an entry), for commands that build nothing as much as for
builds. The cache's state is never an error here: a note that cannot be read or kept is worked
out again.
"""

from __future__ import annotations

from nvstage.compiler.cache.local import Cache
from nvstage.errors import CacheError

def tool_note(name: str):
    """A note about a tool kept in the user's stage cache (``tools/``, sealed like an entry),
    or None: none there, damaged or unsealed, or no cache folder nvstage may use (refused,
    not made yet, a bad ``$NVSTAGE_CACHE_DIR``). The caller then works it out again: for a
    command that builds nothing, the cache's state is never an error."""
    try:
        cache = Cache()
        if cache.state() != "ours":
            return None
        return cache.note(name, "tools")
    except (CacheError, OSError, ValueError):
        return None


def set_tool_note(name: str, value) -> None:
    """Remember ``value`` (JSON) as ``tool_note(name)``; nothing when the cache folder cannot
    be nvstage's (the same gate a build passes: a folder of yours is refused, not written)."""
    try:
        Cache().open().set_note(name, value, "tools")
    except (CacheError, OSError, ValueError):
        pass
