"""Where a gcc-like host compiler finds headers, and where a new file would hide one.

The stage cache's direct mode (``stage_cache.py``) finds a host-compiler stage's result through the
headers it read last time. Unchanged headers are not enough: a new file the compiler would
now find first (``first/coef.h`` created while ``-Ifirst -Iinc`` found ``inc/coef.h``) changes
the output too, and ccache's direct mode misses that. So each recorded header set also keeps
the state of every place where such a file could appear (``shadow_candidates``), and a
lookup matches only while that state is the same.

Watched: the same relative name in every folder searched before the one the header was
found in (the flags' folders and the compiler's built-in ones, in gcc's order, with its
duplicate rules), and beside every file read outside the compiler's and toolkit's own
trees (a quoted include looks beside its includer first; ``-include`` in the current folder).
Also part of the state: what each search folder is (its real path, or absent), so a folder
that appears or a link pointed elsewhere misses. Files that name ``__DATE__``, ``__TIME__`` or
``__TIMESTAMP__``, and assembled files that ``.incbin`` a file, are never cached
(``not_cacheable``).

Not watched, by choice or by necessity: a file newly installed beside an includer inside the
compiler's or toolkit's trees (``/usr/include`` included: watching every system folder would
cost more than it saves), and ``#pragma once`` copies that become identical in mtime.

``__has_include`` probes: gcc's depfile lists no file it looked for and did not find, so a
header probed, missed, then created would not be seen and the old result handed back. A user's
file that spells ``__has_include`` (or ``__has_include_next``) is therefore never cached
(``not_cacheable``), as the time macros are: exact, and free (those files are read anyway).
The compiler's and toolkit's own headers probe too, for files only an install there makes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

# Flags that add folders, and where each chain sits in gcc's order (built-ins between the
# -isystem/environment folders and -idirafter).
_FLAGS = ("-iquote", "-I", "-isystem", "-idirafter")
_ENV = (("CPATH", "-I"), ("CPLUS_INCLUDE_PATH", "-isystem"), ("C_INCLUDE_PATH", "-isystem"))
# Flags that move the compiler's built-in folders: part of the key of their listing.
BUILTIN_FLAGS = ("-nostdinc", "-nostdinc++", "-m32", "-m64", "-mx32")
BUILTIN_VALUE_FLAGS = ("--sysroot", "-isysroot", "-B")


def builtin_flags(argv: Sequence[str]) -> list[str]:
    """The arguments that decide the compiler's built-in folders: the language and the
    flags above (with their values)."""
    out, words = [], iter(argv[1:])
    for a in words:
        if a in BUILTIN_FLAGS:
            out.append(a)
        elif a == "-x":
            out += [a, next(words, "")]
        elif a in BUILTIN_VALUE_FLAGS:
            out += [a, next(words, "")]
        elif a.startswith(tuple(f + "=" for f in BUILTIN_VALUE_FLAGS)) or \
                (a.startswith("-B") and len(a) > 2):
            out.append(a)
    return out


_BUILTIN: dict[str, list[str]] = {}  # per process: key -> the compiler's built-in folders


def builtin_dirs(argv: Sequence[str], env: Mapping[str, str], cache=None) -> list[str]:
    """The compiler's built-in ``#include <...>`` folders for these flags, from
    ``COMPILER -E -v`` (run once per compiler binary and flags, then remembered in this
    process and in the stage cache's notes). Without the environment's include variables, so
    that only the built-in folders are listed. [] when the compiler does not say."""
    from nvstage import proc
    from nvstage.compiler.cache.stage.stage_key import tool_identity
    from nvstage.fsio import json_digest
    from nvstage.errors import ToolMissing

    flags = builtin_flags(argv)
    if "-x" not in flags:
        flags = ["-x", "c++", *flags]
    key = json_digest(["builtin-includes/1", tool_identity(argv[0]), flags])
    dirs = _BUILTIN.get(key)
    if dirs is None and cache is not None:
        dirs = cache.note(key)
    if dirs is None:
        clean = {k: v for k, v in env.items()
                 if k not in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")}
        try:
            cp = proc.run([argv[0], *flags, "-E", "-v", os.devnull, "-o", os.devnull],
                          env=clean, timeout=60)
            dirs = parse_search_list(cp.stderr) if cp.returncode == 0 else []
        except ToolMissing:  # a ToolTimeout too
            dirs = []
        if cache is not None and dirs:
            try:
                cache.set_note(key, dirs)
            except OSError:
                pass  # remembered for this process only
    _BUILTIN[key] = list(dirs)
    return list(dirs)


def parse_search_list(text: str) -> list[str]:
    """The ``#include <...>`` folders from ``gcc -E -v`` (the lines between "search starts
    here:" and "End of search list.")."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("#include <...> search starts here:"):
            inside = True
        elif line.startswith("End of search list."):
            break
        elif inside and line.startswith(" "):
            out.append(line.strip().removesuffix(" (framework directory)"))
    return out


def clean(path: str) -> str:
    """``path`` without empty and "." parts; ".." is kept, since what the system resolves
    ``link/..`` to depends on the link (``os.path.normpath`` would drop both)."""
    if "//" not in path and "/./" not in path and not path.endswith(("/", "/.")) and \
            not path.startswith("./"):
        return path  # the usual case, and the fast one
    parts = [p for p in path.split(os.sep) if p not in ("", ".")]
    return (os.sep if path.startswith(os.sep) else "") + os.sep.join(parts)


def include_search(argv: Sequence[str], cwd: str, env: Mapping[str, str],
                   builtin: Sequence[str] = ()) -> list[str]:
    """The folders the compiler searches, in its order: ``-iquote``; ``-I`` then CPATH;
    ``-isystem`` then CPLUS_INCLUDE_PATH (C_INCLUDE_PATH for C); the built-in folders;
    ``-idirafter``. Absolute (``clean``). As gcc does: an empty environment entry is the
    current folder, ``=dir`` is under the sysroot, a non-system folder that is also a system
    one is searched as the system one only, and a folder named twice is searched at its first
    place (folders compared by device and inode)."""
    found: dict[str, list[str]] = {f: [] for f in _FLAGS}
    sysroot, lang = "", "c++"
    words = iter(argv[1:])
    for a in words:
        if a == "-x":
            lang = next(words, lang)
            continue
        if a.startswith("--sysroot="):
            sysroot = a.split("=", 1)[1]
        if a == "--include-directory" or a.startswith("--include-directory="):
            found["-I"].append(a.split("=", 1)[1] if "=" in a else next(words, ""))
            continue
        for flag in _FLAGS:
            if a == flag:
                found[flag].append(next(words, ""))
            elif a.startswith(flag) and a != "-I-":  # none of the four starts another
                found[flag].append(a[len(flag):])
            else:
                continue
            break
    for var, flag in _ENV:
        if var in env and var != ("CPLUS_INCLUDE_PATH" if lang == "c" else "C_INCLUDE_PATH"):
            found[flag].extend(d or "." for d in env[var].split(os.pathsep))

    def absolute(dirs):
        return [clean(os.path.join(cwd, sysroot + d[1:] if d.startswith("=") else d))
                for d in dirs if d]

    user = absolute(found["-iquote"]) + absolute(found["-I"])
    system = absolute(found["-isystem"]) + [clean(d) for d in builtin] + \
        absolute(found["-idirafter"])
    ids = {d: _dir_id(d) for d in (*user, *system)}
    system_ids = {ids[d] for d in system}
    out, seen = [], set()
    for d in [*(d for d in user if ids[d] not in system_ids), *system]:
        if ids[d] not in seen:
            seen.add(ids[d])
            out.append(d)
    return out


def search_layout(search: Sequence[str]) -> list:
    """What each search folder is now (its real path, or None when it is not there): part of
    the shadow state, so a folder that appears, goes or is a link pointed elsewhere changes
    it (gcc's duplicate rules and every relative name depend on that)."""
    return [[d, os.path.realpath(d) if os.path.isdir(d) else None] for d in search]


def _dir_id(path: str):
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return path  # not there (yet): a folder only by its name


def shadow_candidates(headers: Iterable[str], search: Sequence[str], cwd: str,
                      fixed: Sequence[str] = ()) -> set[str]:
    """Where a new file would hide a header the compiler found (absolute paths).

    A header found in search folder N under the relative name R is hidden by R in any
    folder searched before N, and by R beside any file that was read outside the ``fixed``
    trees (the compiler's and toolkit's own folders): a quoted include looks beside its
    includer first, and ``-include`` in ``cwd``. Which spelling an ``#include`` used is not
    recorded, so every search folder that holds the header gives a name (more places
    watched, never fewer). A header the depfile names by its real path (gcc shortens system
    headers' paths through links) is matched through the folders' real paths."""
    headers = [clean(h) for h in headers]
    trees = Trees(fixed)
    beside = {d for d in {os.path.dirname(h) for h in headers} if d not in trees}
    beside.add(clean(cwd))
    # For each search folder: its prefixes (as named, and real), and the folders a name
    # found there can hide in.
    places = []
    for n, d in enumerate(search):
        before = [e + os.sep for e in (*search[:n], *beside)]
        for prefix in dict.fromkeys((d + os.sep, os.path.join(os.path.realpath(d), ""))):
            places.append((prefix, before))
    # Headers share folders (1,500 headers in a few hundred): match each folder once.
    matches: dict[str, list[tuple[str, list[str]]]] = {}

    def match(folder: str) -> list[tuple[str, list[str]]]:
        got = matches.get(folder)
        if got is None:
            name = folder + os.sep
            got = [(name[len(p):], before) for p, before in places if name.startswith(p)]
            if not got:  # named some other way (links): try its real path
                name = os.path.join(os.path.realpath(folder), "")
                got = [(name[len(p):], before) for p, before in places
                       if name.startswith(p)]
            matches[folder] = got
        return got

    out: set[str] = set()
    for h in headers:
        folder, base = os.path.split(h)
        for rel_dir, before in match(folder):
            rel = rel_dir + base
            out.update([e + rel for e in before])
    out.difference_update(headers)
    return out


class Trees:
    """Folders and everything under them (the compiler's and toolkit's own), matched as
    named and through real paths: ``path in trees``."""

    def __init__(self, roots: Iterable[str]):
        self._prefixes = tuple({os.path.join(p, "") for r in roots
                                for p in (clean(r), os.path.realpath(r))})

    def __contains__(self, path: str) -> bool:
        return os.path.join(path, "").startswith(self._prefixes) or \
            os.path.join(os.path.realpath(path), "").startswith(self._prefixes)


TIME_MACROS = (b"__DATE__", b"__TIME__", b"__TIMESTAMP__")
# A time macro's name pasted together by a macro (``CAT3(__, TIME, __)``): the compiler's
# -Wdate-time warning finds every spelling (``stage_cache.py``), but -w and system headers silence
# it; this lexical net catches the usual ones there (a name piece beside a file's ``##``).
_PASTED_TIME = re.compile(rb"(?<![A-Za-z0-9_])_*(?:TIME|DATE|TIMESTAMP)_*(?![A-Za-z0-9_])")
# Assembler directives that read a file: gcc's dependency list never names it, so a change
# to it could not change the key (ccache refuses ``.incbin`` for the same reason).
_ASM_READS = re.compile(rb"\.incbin\b|\.include[ \t]+\\?[\"']")
MAX_SCAN_BYTES = 256 << 20  # a file larger than this is not looked through: not cached


def not_cacheable(paths: Iterable[str], *, assembles: bool = False) -> str | None:
    """Why a host-compiler stage that read ``paths`` (the user's files, not the compiler's or
    toolkit's) may not be cached, or None. A file that names ``__DATE__``, ``__TIME__`` or
    ``__TIMESTAMP__`` (or pastes such a name, as far as ``_PASTED_TIME`` sees): the output
    depends on the clock or on file dates, not on contents alone (ccache does the same). With
    ``assembles`` (a ``-c`` stage), a file that mentions ``.incbin`` or ``.include "...":
    the assembler reads a file no key holds. A file that spells ``__has_include``: a header it
    probed and missed is in no dependency list, so one created later would not be seen. Found
    by their spelling in the files read: one built from pieces (``".inc" "bin"`` joined by the
    compiler) is not seen (README's limits). Files are read only if regular (a FIFO is not
    waited on) and within ``MAX_SCAN_BYTES``."""
    from nvstage.files import open_regular

    for path in paths:
        try:
            with open_regular(path) as f:
                if os.fstat(f.fileno()).st_size > MAX_SCAN_BYTES:
                    return f"{path} is too large to look through"
                data = f.read(MAX_SCAN_BYTES + 1)
        except OSError:
            continue  # not there or not a file: its key part is missing anyway
        if len(data) > MAX_SCAN_BYTES:
            return f"{path} is too large to look through"
        if any(m in data for m in TIME_MACROS):
            return f"{path} names a time macro"
        if b"__has_include" in data:  # its misses are in no depfile: see the module's notes
            return f"{path} probes for headers with __has_include"
        if b"##" in data and _PASTED_TIME.search(data):
            return f"{path} pastes tokens and names TIME, DATE or TIMESTAMP"
        if assembles and (b".incbin" in data or b".include" in data) and \
                _ASM_READS.search(data):
            return f"{path} has the assembler read a file (.incbin or .include)"
    return None


def uses_time_macros(paths: Iterable[str]) -> str | None:
    """The first file that names ``__DATE__``, ``__TIME__`` or ``__TIMESTAMP__`` (see
    ``not_cacheable``), or None."""
    for path in paths:
        reason = not_cacheable([path])
        if reason is not None and reason.endswith("names a time macro"):
            return path
    return None
