"""Where nvstage keeps per-user state: ``$NVSTAGE_CACHE_DIR``, else the XDG cache folder."""

from __future__ import annotations

import os
from pathlib import Path

ENV_CACHE_DIR = "NVSTAGE_CACHE_DIR"


def cache_dir() -> Path:
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nvstage"
