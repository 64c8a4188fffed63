"""Where the command cache's entries live: the stage cache's folder, if nvstage marked it as its own,
and the user's key their seals are checked with, both as a given environment names them.

Standard library only (``paths``, ``fsio``): the hit path opens nothing else. The names the
stage cache's folder holds that both halves of the cache use are here, at the bottom
(``cache/local`` owns the folder, and the rest of its layout).
"""

from __future__ import annotations

import marshal
import os

from nvstage import fsio
from nvstage.paths import cache_dir_of, key_file_of

# The Cache Directory Tagging signature (backup tools skip the folder), then nvstage's line:
# only a folder holding both is nvstage's to write to, evict from or clear.
MARK = "CACHEDIR.TAG"
SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
MARK_LINE = b"# nvstage stage cache: made by nvstage, which may delete what it holds."
# The command entries' format. /5: the host compile's headers watched too (/4's
# entries watch only the preprocessing stages' reads: a header only gcc's compile of nvcc's
# generated code reads, crt/host_runtime.h in a -I folder or a -Xcompiler -include file's
# host-only header, could change under them). /4: several results per command, zstd frames
# (/3's entries hold one result; entries from before it objects whose cubins note a -v
# nvstage gave ptxas).
SCHEMA = f"nvstage.invocation/5 marshal {marshal.version}"
WHOLE = "inv"  # command entries, inv/ab/<key>/, and the notes the hit path keeps
HITS = "hits"  # under inv/: one line per whole answer, the stage hits it stands for
# The size ledger: the bytes the last full count found, and a line per entry stored since.
LEDGER = "size"
# A file or folder changed this close to the moment its stat was taken may change again within
# the same timestamp tick: its stat is not trusted, its contents are (ccache's rule).
SETTLE_NS = 2_000_000_000
MAX_META = 16 << 20  # a command entry's document, its hiding places, its manifest
MAX_OUTPUT = 1 << 30  # one output it restores
_MIN_KEY, _MAX_KEY = 16, 4096  # what a key file holds, as ``store/secret.py`` reads it


def cache_root(env) -> str | None:
    """The stage cache's folder, as ``paths.cache_dir_of`` names it, if nvstage marked it."""
    root = cache_dir_of(env)
    if root is None:
        return None
    mark = fsio.read_or_none(os.path.join(root, MARK), 4096)  # no link, FIFO or device
    return root if mark is not None and MARK_LINE in mark else None


def secret(env) -> bytes | None:
    """The secret as ``store/secret.py`` keeps it; None when there is none (nothing to
    trust, and nothing written: making a key is the stage cache's)."""
    raw = fsio.read_or_none(key_file_of(env), _MAX_KEY, follow=True)  # a shared key's link
    raw = raw.strip() if raw is not None else b""
    return raw if len(raw) >= _MIN_KEY else None  # the file's bytes are the key


def opened(env) -> tuple[str, bytes] | None:
    """(the marked cache folder, the key) when whole commands may be answered: the cache is
    not off (``NVSTAGE_CACHE=0``), the folder is nvstage's and a key exists."""
    if env.get("NVSTAGE_CACHE", "1") == "0":
        return None
    root = cache_root(env)
    key = secret(env) if root is not None else None
    return None if key is None else (root, key)


def entry_dir(root: str, k: str) -> str:
    """A command entry's folder."""
    return os.path.join(root, WHOLE, k[:2], k)
