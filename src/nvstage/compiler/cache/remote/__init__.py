"""The stage cache's remote tiers: where they are (``spec``, ``config``), the one interface a
backend speaks (``protocol``) with one deadline for every operation (``deadline``), the
backends themselves, one file each (``redis``, ``http``; ``bazel`` encodes the HTTP tier's
bazel layout), what an object holds (``objects``) and how it is signed (``signing``), one tier
(``tier``), one build's tiers behind its local folder (``tiers``), and what ``nvstage cache``
says of them (``describe``). A build imports nothing of it but this file unless
``NVSTAGE_REMOTE_CACHE`` names a tier (``named``); the local folder's figures are
``cache/local/notes.TierStats``.
"""

from __future__ import annotations

import os

# The tiers (``spec.py`` reads them): spelt here so that asking whether any is named imports
# nothing else of the package (its modules, sockets and URLs are 7 ms of a cold command).
ENV_REMOTE = "NVSTAGE_REMOTE_CACHE"


def named(environ=None) -> str:
    """What ``NVSTAGE_REMOTE_CACHE`` names, blanks stripped: "" when no remote tier is
    configured. The one rule (``config.configured`` asks it too)."""
    environ = os.environ if environ is None else environ
    return environ.get(ENV_REMOTE, "").strip()
