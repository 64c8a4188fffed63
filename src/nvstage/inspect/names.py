"""Demangling kernel names with binutils' c++filt, all names in one call, and nvcc's module ids
taken out of them.

nvcc names what has internal linkage after the translation unit's module id, which holds a
per-run hash (seen, CUDA 13.5):

- a ``static`` kernel built with ``-rdc=true`` is ``__nv_static_<n>_<module id>_<mangled>``
  (``__nv_static_29__e3513f8c_8_clock_cu_3c7ab8be__Z14timedReductionPKfPfPl``), which c++filt
  leaves as it is;
- other internal-linkage names sit in a namespace ``_INTERNAL_<module id>``, which c++filt
  writes out (``_INTERNAL_ea460fcf_19_reduction_kernel_cu_644567ac_6532::cuda::std::...``).

Both are shown as a user wrote them, with the file the module id names:
``clock.cu: timedReduction(float const*, float*, long*) (static)``. The mangled name (the
record's ``kernel``) stays as the tools gave it; ``inspect.kernels`` reads the decorated form
(``bare``, ``static_file``).
"""

from __future__ import annotations

import functools
import re
import shutil

from nvstage import proc

# Only plain symbol names go to c++filt: one per line, so a newline must never slip in
# (fullmatch: "$" alone also matches before a trailing newline).
_SYMBOL = re.compile(r"^[A-Za-z_$.][\w$.]*$")
_NV_STATIC = re.compile(r"__nv_static_(\d{1,4})_")
# A module id: a hash, the file name's length, the file name (every character but letters and
# digits written "_"), then per-run parts.
_MODULE = re.compile(r"_?[0-9a-f]{8}_(\d{1,4})_")
_INTERNAL = re.compile(r"_INTERNAL_[0-9a-f]{8}_(\d{1,4})_")
_AFTER_FILE = re.compile(r"(?:_[0-9A-Za-z]+)*::")
# The file name's suffixes a module id's "_" is read back as "." before.
_SUFFIXES = ("cu", "cuh", "cpp", "cxx", "cc", "c", "h", "hpp", "hxx", "hh", "inl", "inc")


@functools.lru_cache(maxsize=1)
def _cxxfilt() -> str | None:
    return shutil.which("c++filt")


# Names already demangled in this process: every reader of one artifact (PTX, SASS, resources)
# meets the same kernels, and c++filt need not start again for them.
_KNOWN: dict[str, str] = {}


def module_file(stem: str) -> str:
    """``clock_cu`` -> ``clock.cu``: the file name a module id spells (its last "_" was the
    suffix's dot when a source suffix follows it)."""
    head, _, suffix = stem.rpartition("_")
    return f"{head}.{suffix}" if head and suffix in _SUFFIXES else stem


def split_static(name: str) -> tuple[str, str | None]:
    """``__nv_static_29__e3513f8c_8_clock_cu_3c7ab8be__Z5plainPi`` -> (``_Z5plainPi``,
    ``clock.cu``); any other name -> (itself, None)."""
    m = _NV_STATIC.match(name)
    if not m:
        return name, None
    n, start = int(m.group(1)), m.end()
    module, rest = name[start:start + n], name[start + n:]
    f = _MODULE.match(module)
    if len(module) != n or not rest.startswith("_") or len(rest) < 2 or f is None:
        return name, None
    stem = module[f.end():f.end() + int(f.group(1))]
    return rest[1:], module_file(stem) if stem else None


def without_internal(demangled: str) -> tuple[str, str | None]:
    """``demangled`` with every ``_INTERNAL_<module id>::`` namespace taken out, and the file
    the first one names (None when there was none)."""
    out, at, first = [], 0, None
    for m in _INTERNAL.finditer(demangled):
        if m.start() < at:
            continue
        n = int(m.group(1))
        stem = demangled[m.end():m.end() + n]
        tail = _AFTER_FILE.match(demangled, m.end() + n)
        if len(stem) != n or tail is None:
            continue
        out.append(demangled[at:m.start()])
        at = tail.end()
        first = first or module_file(stem)
    return "".join(out) + demangled[at:], first


def decorate(signature: str, file: str | None) -> str:
    """How an internal-linkage kernel is shown: ``clock.cu: timedReduction(...) (static)``."""
    return f"{file}: {signature} (static)" if file else signature


def _clean(demangled: str, file: str | None) -> str:
    """The shown name of a kernel from c++filt's ``demangled`` (of its name, or of the name
    inside its ``__nv_static_`` prefix, which names ``file``)."""
    text, internal = without_internal(demangled)
    if file is None and internal is not None and demangled.lstrip().startswith("_INTERNAL_"):
        file = internal  # the kernel itself is in the internal namespace
    return decorate(text, file)


def demangle_all(names) -> dict[str, str]:
    """Map each name to its demangled form, module ids taken out (see the module's notes); a
    name c++filt cannot help with maps to itself, or to its file's decoration."""
    names = list(dict.fromkeys(names))
    out = {n: _KNOWN.get(n, n) for n in names}
    todo = {n: split_static(n) for n in names if n not in _KNOWN}
    mangled = [inner for inner, _ in todo.values()
               if inner.startswith("_Z") and _SYMBOL.fullmatch(inner)]
    mangled = list(dict.fromkeys(mangled))
    tool = _cxxfilt()
    filtered: dict[str, str] = {}
    if mangled and tool is not None:
        try:
            cp = proc.run([tool], input_text="\n".join(mangled) + "\n", timeout=60)
        except OSError:  # a ToolMissing too: the mangled name is still a correct, if ugly, one
            cp = None
        lines = cp.stdout.splitlines() if cp is not None else []
        if cp is not None and cp.returncode == 0 and len(lines) == len(mangled):
            filtered = dict(zip(mangled, lines))
    for raw, (inner, file) in todo.items():
        if inner in filtered:
            shown = _clean(filtered[inner], file)
        elif file is not None:
            shown = decorate(inner, file)
        else:
            out[raw] = raw
            continue  # not known: c++filt may be there next time
        _KNOWN[raw] = out[raw] = shown
    return out
