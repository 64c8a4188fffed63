"""User strings carried safely through nvcc's ``--dryrun`` plan.

nvcc's --dryrun does not escape quotes, backslashes or $ in what it prints, and blanks need
quoting: a user string holding any of them is replaced by a placeholder while nvcc plans, and
put back into the parsed argument lists afterwards.
"""

from __future__ import annotations

import os
import re

from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import Plan
from nvstage.errors import UsageError

_UNSAFE = re.compile(r"[\s\"'\\$`]")
# Options whose value nvcc opens or runs itself: a placeholder there names nothing.
_NVCC_READS = frozenset({"-ccbin", "--compiler-bindir", "-optf", "--options-file"})
# Suffixes nvcc takes as inputs: such a word keeps its suffix (nvcc picks the phase by it).
_INPUT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".o", ".obj", ".a", ".so", ".ptx",
                   ".cubin", ".fatbin", ".ltoir", ".gpu", ".ii")


def _safe(text: str) -> bool:
    return not _UNSAFE.search(text)


def needs_placeholder(text: str) -> bool:
    """Whether nvcc's plan would see ``text`` as a placeholder (blanks, quotes, $, \\)."""
    return not _safe(text)


class Placeholders:
    """Swap unsafe user strings for plain tokens while nvcc plans; swap them back after."""

    def __init__(self):
        self.table: dict[str, str] = {}

    def sub(self, value: str) -> str:
        if _safe(value):
            return value
        token = f"__nvstage_ph{len(self.table)}__"
        self.table[token] = value
        return token

    def sub_path(self, path: str) -> str:
        """Keep a path's suffix: nvcc picks the phase from it and derives names from the stem."""
        if _safe(path):
            return path
        head, tail = os.path.split(path)
        stem, suffix = os.path.splitext(tail)
        parts = [self.sub(head)] if head else []
        parts.append(self.sub(stem) + (suffix if _safe(suffix) else ""))
        return os.path.join(*parts)

    def sub_options(self, options: CompileOptions) -> list[str]:
        """``options`` as nvcc arguments, each unsafe value swapped (refused where nvcc reads
        the value itself)."""
        return self.sub_words(options.nvcc_args())

    def sub_words(self, words: list[str]) -> list[str]:
        """nvcc arguments with each unsafe value swapped (refused where nvcc reads the value
        itself)."""
        out: list[str] = []
        for a in words:
            prev = out[-1] if out else ""
            opt = a.split("=", 1)[0]
            if _safe(a):
                out.append(a)
            elif prev in _NVCC_READS or opt in _NVCC_READS:
                raise UsageError(
                    f"nvcc reads {a!r} itself, and its plan cannot carry a path with blanks, "
                    f"quotes, $ or backslashes", hint="use a path without them (a symlink will do)")
            elif prev in ("-o", "--output-file"):  # nvcc derives names from its stem
                out.append(self.sub_path(a))
            elif not a.startswith("-"):
                # An input file keeps its suffix; any other value word (of -I DIR, -D NAME=VALUE,
                # -Xcompiler LIST) is swapped piece by piece, so nvcc still splits lists on commas.
                out.append(self.sub_path(a) if a.endswith(_INPUT_SUFFIXES) else self._pieces(a))
            elif a[:2] in ("-D", "-I", "-U", "-L") and len(a) > 2:
                out.append(a[:2] + self.sub(a[2:]))
            elif "=" in a:
                out.append(f"{opt}={self._pieces(a.split('=', 1)[1])}")
            else:
                out.append(self._pieces(a))
        return out

    def _pieces(self, value: str) -> str:
        """Each unsafe comma-separated piece replaced: ``-Wl,-rpath,/a b`` keeps its commas."""
        return ",".join(p if _safe(p) else self.sub(p) for p in value.split(","))

    def restore(self, text: str) -> str:
        for token, value in self.table.items():
            text = text.replace(token, value)
        return text

    def restore_plan(self, plan: Plan) -> Plan:
        if not self.table:
            return plan
        for s in plan.stages:
            s.argv = [self.restore(a) for a in s.argv]
            s.inputs = [self.restore(a) for a in s.inputs]
            s.outputs = [self.restore(a) for a in s.outputs]
        plan.messages = [self.restore(m) for m in plan.messages]
        return plan
