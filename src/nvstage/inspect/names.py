"""Demangling kernel names with binutils' c++filt, all names in one call."""

from __future__ import annotations

import functools
import re
import shutil

from nvstage import proc

# Only plain symbol names go to c++filt: one per line, so a newline must never slip in
# (fullmatch: "$" alone also matches before a trailing newline).
_SYMBOL = re.compile(r"^[A-Za-z_$.][\w$.]*$")


@functools.lru_cache(maxsize=1)
def _cxxfilt() -> str | None:
    return shutil.which("c++filt")


# Names already demangled in this process: every reader of one artifact (PTX, SASS, resources)
# meets the same kernels, and c++filt need not start again for them.
_KNOWN: dict[str, str] = {}


def demangle_all(names) -> dict[str, str]:
    """Map each name to its demangled form; a name c++filt cannot help with maps to itself."""
    names = list(dict.fromkeys(names))
    out = {n: _KNOWN.get(n, n) for n in names}
    todo = [n for n in names if n not in _KNOWN and n.startswith("_Z") and _SYMBOL.fullmatch(n)]
    tool = _cxxfilt()
    if not todo or tool is None:
        return out  # no c++filt: the mangled name is still a correct, if ugly, name
    try:
        cp = proc.run([tool], input_text="\n".join(todo) + "\n", timeout=60)
    except OSError:  # a ToolMissing too
        return out
    lines = cp.stdout.splitlines()
    if cp.returncode == 0 and len(lines) == len(todo):
        _KNOWN.update(zip(todo, lines))
        out.update(zip(todo, lines))
    return out
