"""Where nvstage keeps per-user state: ``$NVSTAGE_CACHE_DIR``, else the XDG cache folder; the
cache's key in the XDG config folder (outside the cache: whoever can write the cache folder
must not be able to read or replace the key that seals it).

Standard library only, and no pathlib at import (it brings re and urllib): the warm path
(the hit path) finds the cache folder and its key through the ``*_of(env)`` functions,
which read a given environment and raise nothing.
"""

from __future__ import annotations

import os

if False:  # for readers and type checkers only: typing (re) and pathlib stay unloaded
    from pathlib import Path

ENV_CACHE_DIR = "NVSTAGE_CACHE_DIR"
KEY_NAME = "cache.key"


def _xdg(var: str, fallback: str, env=None) -> str:
    """``$var`` when it is an absolute path, else ``~/fallback``: the XDG spec says a relative
    value is invalid and is to be ignored (it would put the folder wherever a build runs)."""
    value = (os.environ if env is None else env).get(var, "")
    if os.path.isabs(value):
        return value
    return os.path.join(os.path.expanduser("~"), fallback)


def cache_dir_of(env) -> str | None:
    """The stage cache's folder as ``env`` names it: ``$NVSTAGE_CACHE_DIR`` with ``~``
    expanded, else (unset or empty: an empty variable means unset, as for most tools) the XDG
    cache folder's ``nvstage``. None for a value that names no folder: only blanks, or a ``~``
    with no home to expand to (as given, either would make a folder in whatever folder the
    build runs from; ``cache_dir`` says so)."""
    raw = env.get(ENV_CACHE_DIR)
    if not raw:
        return os.path.join(_xdg("XDG_CACHE_HOME", ".cache", env), "nvstage")
    path = os.path.expanduser(raw)
    return None if not raw.strip() or path.startswith("~") else path


def key_file_of(env) -> str:
    """The cache's key file as ``env`` places it: the XDG config folder's ``nvstage/cache.key``."""
    return os.path.join(_xdg("XDG_CONFIG_HOME", ".config", env), "nvstage", KEY_NAME)


def cache_dir() -> Path:
    """The stage cache's folder. Raises ``CacheError`` for an unusable ``$NVSTAGE_CACHE_DIR``
    (see ``cache_dir_of``)."""
    from pathlib import Path

    path = cache_dir_of(os.environ)
    if path is None:
        from nvstage.errors import CacheError

        raw = os.environ[ENV_CACHE_DIR]
        if not raw.strip():
            raise CacheError(f"{ENV_CACHE_DIR}={raw!r} is blank: name a folder, or unset it "
                             f"for the default {default_cache_dir()}")
        raise CacheError(f"{ENV_CACHE_DIR}={raw}: cannot expand '~' (no home folder for it)",
                         hint="give an absolute path")
    return Path(path)


def default_cache_dir() -> Path:
    """The XDG cache folder's ``nvstage``: named for nvstage, so nvstage may adopt it."""
    from pathlib import Path

    return Path(_xdg("XDG_CACHE_HOME", ".cache")) / "nvstage"


def config_dir() -> Path:
    """The XDG config folder's ``nvstage``: where the cache's key is kept."""
    from pathlib import Path

    return Path(key_file_of(os.environ)).parent


def cache_dir_label() -> str:
    """How the user named ``cache_dir()``, for messages: the variable when it was set."""
    if os.environ.get(ENV_CACHE_DIR):
        return f"{ENV_CACHE_DIR}={os.environ[ENV_CACHE_DIR]}"
    return f"the cache folder {default_cache_dir()}"


ENV_BASE_DIR = "NVSTAGE_BASE_DIR"


def base_dir() -> str | None:
    """``$NVSTAGE_BASE_DIR`` (ccache's ``base_dir``): the folder under which the stage cache
    makes absolute paths relative, so that a checkout at another path finds the same entries
    (``compiler/cache/stage/stage_key.py``, ``Place``). None when unset, or when it is no absolute path
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
