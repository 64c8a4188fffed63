"""``nvstage diff``'s one entry, above ``inspect/`` (its ``--via`` compiles): which comparison a
request asks for, and its result.

Four comparisons share the command: one source through the compiler paths (``--via``,
``compiler_paths``), pairs of kernels line by line (``--lineinfo``, ``line_diff``), two builds
of build logs (``inspect/build_log_diff``), and two builds kernel by kernel (``build_diff``). Every
one but ``--via`` takes explicit pairs (``inspect.pairs``); A and B may be one build, whose
kernels the pairs name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nvstage.errors import UsageError
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.inspect import build_log_diff as record_diff
from nvstage.inspect.build_diff import diff_builds
from nvstage.compiler_paths import compare_paths
from nvstage.inspect.line_diff import diff_lines


@dataclass(frozen=True)
class DiffRequest:
    a: str | os.PathLike
    b: str | os.PathLike | None = None
    via: str | None = None  # "nvcc,nvrtc": one source through the compiler paths
    arch: str | None = None
    lto: bool = False
    pairs: tuple = ()  # ``pairs.Pair`` s
    lineinfo: bool = False
    attribute: str = "user"
    block: int | None = None
    nvcc: str | None = None


@dataclass(frozen=True)
class SeveralLines:
    """Several pairs' line diffs: one document, ``{"pairs": [...]}``."""
    diffs: tuple

    def to_json(self) -> dict:
        return {"pairs": [d.to_json() for d in self.diffs]}


def run(req: DiffRequest):
    """The comparison ``req`` asks for: a ``compiler_paths.PathComparison``, a
    ``line_diff.LinesDiff`` (``SeveralLines`` for several pairs), a
    ``record_diff.RecordDiff`` or a ``build_diff.BuildDiff``. ``UsageError`` for a request
    that cannot be answered as asked."""
    a, b, pairs = req.a, req.b, list(req.pairs)
    if req.via is not None:
        return _paths(req)
    if req.lineinfo:
        if not pairs:
            raise UsageError("--lineinfo compares a pair of kernels line by line: name it",
                             hint="--pair A=B (or --kernel NAME for one kernel in two builds)")
        if req.attribute not in ("user", "innermost"):
            raise UsageError(f"--attribute {req.attribute!r}: user or innermost")
        if b is None and all(p.a == p.b for p in pairs):
            raise UsageError("one build and one kernel: nothing to compare",
                             hint="give two builds, or two kernels: --pair A=B")

        diffs = diff_lines(a, a if b is None else b, pairs, find_toolkit(req.nvcc),
                           arch=req.arch, attribute=req.attribute)
        return diffs[0] if len(diffs) == 1 else SeveralLines(tuple(diffs))
    if record_diff.is_record(str(a)) or (b is not None and record_diff.is_record(str(b))):
        if b is not None and not (record_diff.is_record(str(a))
                                  and record_diff.is_record(str(b))):
            one, other = (a, b) if record_diff.is_record(str(a)) else (b, a)
            raise UsageError(f"{one} is a build folder with a build record and {other} is "
                             "not: diff compares two of a kind",
                             hint="give two build folders, or two keep folders")
        return record_diff.diff_records(a, b, pairs=pairs)
    if b is None and not any(p.a != p.b for p in pairs):
        raise UsageError("diff needs two builds", hint="nvstage diff A B (keep folders or "
                         "stages.json, or build folders), one build and two of its kernels "
                         "(--pair A=B), or one .cu file with --via nvcc,nvrtc")
    if req.block is not None and not 1 <= req.block <= 1024:
        raise UsageError(f"--block {req.block}: a block holds 1 to 1024 threads")

    return diff_builds(a, a if b is None else b, find_toolkit(req.nvcc), block=req.block,
                       pairs=pairs)


def _paths(req: DiffRequest):

    if req.pairs:
        raise UsageError("--pair and --kernel name built kernels; --via compiles one source "
                         "through each path, whose kernels pair by name",
                         hint="build each path, then nvstage diff A B --pair X=Y")
    paths = sorted(p.strip() for p in req.via.split(","))
    if paths != ["nvcc", "nvrtc"]:
        raise UsageError(f"--via {req.via!r}: only nvcc,nvrtc can be compared")
    if not req.arch:
        raise UsageError("--via needs --arch (e.g. --arch sm_90)")
    sources = str(req.a) if req.b is None else [str(req.a), str(req.b)]
    return compare_paths(sources, arch=req.arch, toolkit=find_toolkit(req.nvcc), lto=req.lto)
