"""Where nvstage keeps per-user state: ``$NVSTAGE_CACHE_DIR``, else the XDG cache folder."""

from __future__ import annotations

import os
from pathlib import Path

ENV_CACHE_DIR = "NVSTAGE_CACHE_DIR"


def cache_dir() -> Path:
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    return default_cache_dir()


def default_cache_dir() -> Path:
    """The XDG cache folder's ``nvstage``: named for nvstage, so nvstage may adopt it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nvstage"


def cache_dir_label() -> str:
    """How the user named ``cache_dir()``, for messages: the variable when it was set."""
    if os.environ.get(ENV_CACHE_DIR):
        return f"{ENV_CACHE_DIR}={os.environ[ENV_CACHE_DIR]}"
    return f"the cache folder {default_cache_dir()}"
