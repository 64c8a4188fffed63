"""The dependency file nvcc writes for ``-M``, ``-MM``, ``-MD`` and ``-MMD``, made from the
preprocessed files of nvcc's own plan (pure: text in, text out), and which one a command line
asks for (``depfile_options``).

nvcc runs no ``gcc -M``: its plan's "-- Filter Dependencies --" line reads the line markers of
the preprocessed outputs (traced on nvcc 13.5; ``--dryrun`` shows the line but not what it
does). Every file named by a marker, in order of first appearance over the device passes (in
plan order) and then the host pass, with gcc's own ``<built-in>``/``<command-line>`` left out;
``-MM``/``-MMD`` also leave out what gcc marks as a system header (flag 3: found through
``-isystem`` or the compiler's own folders). Layout, byte for byte as nvcc writes it::

    target : first \\
        second \\
        last

and with ``-MP`` an empty rule per header (``\\nheader:\\n``), the source itself excepted.
tests/test_depfile.py compares this with nvcc's own files.
"""

from __future__ import annotations

import os
import re

from nvstage.compiler.nvcc.grammar import Arg, last_value

# gcc's line markers: # LINE "FILE" FLAGS, at a line's start; the file name escapes backslash
# and double quote. One scan for the literal newline-hash-blank that leads every marker (unrolled,
# not (?:[^"\\]|\\.)*: an alternation per character is slow in Python's re).
_MARKER = re.compile(rb'\n# \d+ "([^"\\\n]*(?:\\.[^"\\\n]*)*)"((?: \d+)*)[ \t\r\f\v]*(?=\n|$)')


# The last few outputs read, by their bytes (a dict compares them whole on a hash match): the
# dependency file and the stage cache's entry both read each preprocessed output once.
_READ: dict[bytes, list[tuple[str, bool]]] = {}
_READ_MAX = 4


def marked_files(text: bytes) -> list[tuple[str, bool]]:
    """(file, is a system header) for every file the markers of one preprocessed output
    name, in order of first appearance."""
    got = _READ.get(text)
    if got is None:
        got = _marked_files(text)
        if len(_READ) >= _READ_MAX:
            _READ.clear()  # one step, whichever thread gets here
        _READ[text] = got
    return list(got)


def _marked_files(text: bytes) -> list[tuple[str, bool]]:
    # The flags of a name's first marker: most markers name a file named before.
    first: dict[bytes, bytes] = {}
    for raw, flags in _MARKER.findall(b"\n" + text if text.startswith(b"# ") else text):
        first.setdefault(raw, flags)
    seen: dict[str, bool] = {}
    for raw, flags in first.items():
        name = (re.sub(rb"\\(.)", rb"\1", raw) if b"\\" in raw else raw).decode(
            errors="surrogateescape")
        if not name.startswith("<") and name not in seen:
            seen[name] = b"3" in flags.split()
    return list(seen.items())


def render(target: str, preprocessed: list[bytes], *, nonsystem: bool = False,
           phony: bool = False) -> str:
    """nvcc's dependency file for ``target`` from its preprocessed outputs (device passes in
    plan order, then the host pass)."""
    return render_marked(target, [marked_files(text) for text in preprocessed],
                         nonsystem=nonsystem, phony=phony)


def render_marked(target: str, marked: list[list[tuple[str, bool]]], *,
                  nonsystem: bool = False, phony: bool = False) -> str:
    """``render`` from what each preprocessed output's markers name (``marked_files``): the
    stage cache keeps that for an output it does not write."""
    deps: list[str] = []
    seen: set[str] = set()
    for names in marked:
        for name, system in names:
            if name not in seen and not (nonsystem and system):
                seen.add(name)
                deps.append(name)
    out = f"{target} : " + " \\\n    ".join(deps) + "\n"
    if phony:
        out += "".join(f"\n{d}:\n" for d in deps[1:])
    return out


def depfile_options(args: list[Arg], source: str) -> tuple[str, bool, bool] | None:
    """nvcc's dependency-file options: -MD/-MMD with -MT (the last one wins), -MP."""
    names = {a.option.long for a in args if a.option is not None}
    md = "--generate-dependencies-with-compile" in names
    mmd = "--generate-nonsystem-dependencies-with-compile" in names
    if not (md or mmd):
        return None
    target = last_value(args, "--dependency-target-name")
    if target is None:
        out = last_value(args, "--output-file")
        target = out if out is not None else os.path.splitext(os.path.basename(source))[0] + ".o"
    return target, mmd and not md, "--generate-dependency-targets" in names
