"""What kind of build step a command is, read from its words alone: a CUDA compile, a C or C++
compile, a device link, a link, an archive step, or another (``cmake -E rm``); and the file it
writes. Pure: the build log's reader asks this of every entry, old ones included (they
carry no kind of their own)."""

from __future__ import annotations

import os
import re

CUDA_COMPILE, CXX_COMPILE = "cuda-compile", "cxx-compile"
DEVICE_LINK, LINK, ARCHIVE, OTHER = "device-link", "link", "archive", "other"
KINDS = (CUDA_COMPILE, CXX_COMPILE, DEVICE_LINK, LINK, ARCHIVE, OTHER)
WORDS = {CUDA_COMPILE: ("CUDA compile", "CUDA compiles"),
         CXX_COMPILE: ("C/C++ compile", "C/C++ compiles"),
         DEVICE_LINK: ("device link", "device links"), LINK: ("link", "links"),
         ARCHIVE: ("archive step", "archive steps"), OTHER: ("other step", "other steps")}
# The kinds a whole build of a CUDA project routes through nvstage (README: CMake's
# CMAKE_CXX_COMPILER_LAUNCHER and RULE_LAUNCH_LINK), that a record may not have seen.
EXPECTED = (CXX_COMPILE, DEVICE_LINK, LINK, ARCHIVE)

_NVCC = re.compile(r"^nvcc(-[\w.]+)?$")
_COMPILER = re.compile(r"(^|-)(c\+\+|g\+\+|gcc|cc|clang\+\+|clang|icpx|icx|icpc|icc|nvc\+\+|"
                       r"nvc|xlc\+\+|xlc)(-[\d.]+)?$")
_ARCHIVER = re.compile(r"(^|-)(ar|ranlib)(-[\d.]+)?$")
_LINKER = re.compile(r"^(ld(\.\w+)?|lld|ld\.lld|mold|gold)$|-ld(\.\w+)?$")
_WRAPPERS = {"ccache", "sccache", "distcc", "icecc", "buildcache"}
_NVCC_DLINK = {"-dlink", "--device-link"}
_NVCC_LIB = {"-lib", "--lib"}
# nvcc's modes that stop before a host link: a compile of some kind.
_NVCC_COMPILE = {"-c", "--compile", "-dc", "--device-c", "-dw", "--device-w", "-ptx", "--ptx",
                 "-cubin", "--cubin", "-fatbin", "--fatbin", "-E", "--preprocess", "-M",
                 "--generate-dependencies", "-MM", "--generate-nonsystem-dependencies",
                 "-cuda", "--cuda", "-ltoir", "--ltoir", "-optix-ir", "--optix-ir",
                 "-fdevice-syntax-only", "--fdevice-syntax-only"}
_HOST_COMPILE = {"-c", "-S", "-E", "-fsyntax-only"}
SOURCE_SUFFIXES = (".cu", ".c", ".cc", ".cpp", ".cxx", ".c++", ".cp", ".C", ".m", ".mm")


def tool_name(argv: list[str]) -> str:
    """The program's file name (a compiler wrapper's compiler: ``ccache g++`` is g++)."""
    words = _tool_words(argv)
    return os.path.basename(words[0]) if words else ""


def _tool_words(argv: list[str]) -> list[str]:
    if len(argv) > 1 and os.path.basename(argv[0]) in _WRAPPERS:
        return argv[1:]
    return argv


def is_nvcc(argv: list[str]) -> bool:
    return bool(argv) and bool(_NVCC.match(os.path.basename(argv[0])))


def kind_of(argv: list[str]) -> str:
    """The step kind of a command (``KINDS``)."""
    words = _tool_words(argv)
    if not words:
        return OTHER
    name = os.path.basename(words[0])
    rest = set(words[1:])
    if _NVCC.match(name):
        if rest & _NVCC_DLINK:
            return DEVICE_LINK
        if rest & _NVCC_LIB:
            return ARCHIVE
        return CUDA_COMPILE if rest & _NVCC_COMPILE else LINK
    if _COMPILER.search(name):
        return CXX_COMPILE if rest & _HOST_COMPILE else LINK
    if _ARCHIVER.search(name):
        return ARCHIVE
    if _LINKER.search(name):
        return LINK
    return OTHER


def archive_of(argv: list[str]) -> str | None:
    """The archive ``ar KEY ARCHIVE MEMBERS...`` or ``ranlib ARCHIVE`` writes."""
    words = _tool_words(argv)
    name = os.path.basename(words[0]) if words else ""
    skip_key = not name.endswith("ranlib")
    i = 1
    while i < len(words):
        w = words[i]
        if w == "--plugin" or w == "--target":
            i += 2
            continue
        if w.startswith("-") and (not skip_key or len(w) > 1 and w[1] == "-"):
            i += 1
            continue
        if skip_key:  # the key letters ("qc", "rcs", "-rcs")
            skip_key = False
            i += 1
            continue
        return w
    return None


def source_of(argv: list[str]) -> str | None:
    """The source a compile reads: its first word with a C, C++ or CUDA source's name."""
    return next((w for w in _tool_words(argv)[1:] if w.endswith(SOURCE_SUFFIXES)
                 and not w.startswith("-")), None)


def label(kind: str, n: int | None = None) -> str:
    """``link``, ``3 links``: how a table or a line names a kind."""
    one, many = WORDS.get(kind, (kind, kind))
    return one if n is None else f"{n} {one if n == 1 else many}"
