"""Which backend a build uses: the environment chooses (never a document), once a process."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Mapping

from nvstage.compiler.dist.farm_backend import Backend

ENV = "NVSTAGE_DIST"  # "sccache": cicc and ptxas through the sccache client
CLIENT_ENV = "NVSTAGE_SCCACHE"  # the client's path (else `sccache` on PATH)
TIMEOUT_ENV = "NVSTAGE_DIST_TIMEOUT"  # seconds a stage may take on the farm before a local run
DEFAULT_TIMEOUT = 600.0

_lock = threading.Lock()
_said: set[str] = set()


def notice(line: str, once: str | None = None) -> None:
    """One line on stderr, once a process for each ``once`` (a kind of fault: every stage of
    a build meets the same one) or else each distinct line."""
    from nvstage.compiler.cache.remote.tier import notice as say

    with _lock:
        if (once or line) in _said:
            return
        _said.add(once or line)
    say(line)


def backend_from_env(env: Mapping[str, str] | None = None) -> Backend | None:
    """The backend ``NVSTAGE_DIST`` names, or None (unset, or unusable: said once)."""
    env = os.environ if env is None else env
    value = env.get(ENV, "").strip()
    if not value:
        return None
    if value != "sccache":
        notice(f"{ENV}={value!r} is not a known backend (sccache): stages run locally")
        return None
    named = env.get(CLIENT_ENV)
    client = (named if named and os.path.isabs(named) and os.access(named, os.X_OK)
              else shutil.which(named or "sccache", path=env.get("PATH")))
    if client is None:
        where = f"{CLIENT_ENV}={named!r} is no program" if named else "none on PATH"
        notice(f"{ENV}=sccache but no sccache client was found ({where}; name it with "
               f"{CLIENT_ENV}): stages run locally")
        return None
    from nvstage.compiler.dist.sccache import Sccache

    return Sccache(os.path.abspath(client))


def timeout_from_env(env: Mapping[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    try:
        value = float(env.get(TIMEOUT_ENV, DEFAULT_TIMEOUT))
    except ValueError:
        value = DEFAULT_TIMEOUT
    return value if 0 < value <= 86400 else DEFAULT_TIMEOUT
