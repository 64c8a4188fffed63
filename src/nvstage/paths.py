"""Where nvstage keeps per-user state: ``$NVSTAGE_CACHE_DIR``, else the XDG cache folder; the
cache's key in the XDG config folder (outside the cache: whoever can write the cache folder
must not be able to read or replace the key that seals it)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_CACHE_DIR = "NVSTAGE_CACHE_DIR"


def _xdg(var: str, fallback: str) -> str:
    """``$var`` when it is an absolute path, else ``~/fallback``: the XDG spec says a relative
    value is invalid and is to be ignored (it would put the folder wherever a build runs)."""
    value = os.environ.get(var, "")
    if os.path.isabs(value):
        return value
    return os.path.join(os.path.expanduser("~"), fallback)


def _named_cache_dir() -> str | None:
    """``$NVSTAGE_CACHE_DIR`` with ``~`` expanded; None when unset or empty. Raises
    ``CacheError`` for a value that is only blanks, or a ``~`` with no home to expand to: as
    given, either would make a folder in whatever folder the build runs from."""
    raw = os.environ.get(ENV_CACHE_DIR)
    if not raw:
        return None
    if not raw.strip():
        from nvstage.errors import CacheError

        raise CacheError(f"{ENV_CACHE_DIR}={raw!r} is blank: name a folder, or unset it for "
                         f"the default {default_cache_dir()}")
    path = os.path.expanduser(raw)
    if path.startswith("~"):
        from nvstage.errors import CacheError

        raise CacheError(f"{ENV_CACHE_DIR}={raw}: cannot expand '~' (no home folder for it)",
                         hint="give an absolute path")
    return path


def cache_dir() -> Path:
    """The stage cache's folder. Raises ``CacheError`` for an unusable ``$NVSTAGE_CACHE_DIR``
    (see ``_named_cache_dir``)."""
    named = _named_cache_dir()
    return Path(named) if named is not None else default_cache_dir()


def default_cache_dir() -> Path:
    """The XDG cache folder's ``nvstage``: named for nvstage, so nvstage may adopt it."""
    return Path(_xdg("XDG_CACHE_HOME", ".cache")) / "nvstage"


def config_dir() -> Path:
    """The XDG config folder's ``nvstage``: where the cache's key is kept."""
    return Path(_xdg("XDG_CONFIG_HOME", ".config")) / "nvstage"


def cache_dir_label() -> str:
    """How the user named ``cache_dir()``, for messages: the variable when it was set."""
    if os.environ.get(ENV_CACHE_DIR):
        return f"{ENV_CACHE_DIR}={os.environ[ENV_CACHE_DIR]}"
    return f"the cache folder {default_cache_dir()}"


ENV_BASE_DIR = "NVSTAGE_BASE_DIR"


def base_dir() -> str | None:
    """``$NVSTAGE_BASE_DIR`` (ccache's ``base_dir``): the folder under which the stage cache
    makes absolute paths relative, so that a checkout at another path finds the same entries
    (``compiler/cache/keys.py``, ``Place``). None when unset, or when it is no absolute path
    or is ``/`` (``base_dir_problem`` says why): every system path would then be rewritten."""
    if base_dir_problem() is not None:
        return None
    return os.path.normpath(os.environ[ENV_BASE_DIR])


def base_dir_problem() -> str | None:
    """Why ``$NVSTAGE_BASE_DIR`` is not used ("" when unset), or None when it is."""
    raw = os.environ.get(ENV_BASE_DIR, "")
    if not raw:
        return ""
    if not os.path.isabs(raw):
        return f"{ENV_BASE_DIR}={raw!r} is not an absolute path: ignored"
    if os.path.normpath(raw) == os.sep or os.path.normpath(raw) == "//":
        return f"{ENV_BASE_DIR}=/ would rewrite every system path: ignored"
    return None
