"""A stage's command as the farm's client needs it, changed only in output-neutral ways.

- sccache (0.16) takes cicc's input to be the third word from the end (``INPUT -o OUTPUT``);
  nvcc 13.5 puts a valueless ``--simt-only`` after the input: it moves before the input
  (tests/compiler/dist/test_rewrite.py proves the PTX unchanged).
- Absolute paths inside the stage's folder (where its outputs go) become relative to it, and
  the stage runs there: sccache keys on the command line, so two builds (two temporary work
  folders, two checkouts) share its hits. The source's names (``--orig_src_*``) and the host
  stub's path, which cicc writes into its outputs, stay as they are.

Pure: no files, no processes. None where the command has a shape not proven safe.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nvstage.compiler.nvcc.plan import Stage, StageKind

DISTRIBUTED = frozenset({StageKind.CICC, StageKind.PTXAS})
# Valueless flags nvcc puts between cicc's input and ``-o``.
_MOVABLE = frozenset({"--simt-only"})
# Words whose value is written into an output as given: the source's names, and the host
# stub's own path (cicc writes it into the stub's #line markers).
_KEEP_VALUE = frozenset({"--orig_src_file_name", "--orig_src_path_name", "--stub_file_name"})


@dataclass(frozen=True)
class Rewritten:
    argv: list[str]
    cwd: str  # the stage's folder: the command's relative paths are relative to it


def rewrite(stage: Stage, cwd: str) -> Rewritten | None:
    """``stage``'s command for the farm, run in its folder; None: run it plainly."""
    if stage.kind not in DISTRIBUTED or not stage.inputs or not stage.outputs:
        return None
    argv = list(stage.argv)
    if stage.kind is StageKind.CICC:
        argv = _input_last(argv, stage.inputs[0])
        if argv is None:
            return None
    elif not (len(argv) >= 4 and argv[-2] == "-o" and argv[-3] == stage.inputs[0]):
        return None
    folder = os.path.dirname(os.path.join(cwd, stage.outputs[0]))
    return Rewritten(_relative(argv, folder, cwd), os.path.normpath(folder))


def _input_last(argv: list[str], source: str) -> list[str] | None:
    """cicc's words with the input third from the end, before ``-o OUTPUT``."""
    if len(argv) < 4 or argv[-2] != "-o":
        return None
    try:
        at = len(argv) - 3 - argv[-3::-1].index(source)
    except ValueError:
        return None
    between = argv[at + 1:-2]
    if any(w not in _MOVABLE for w in between):
        return None
    return [*argv[:at], *between, source, *argv[-2:]]


def _relative(argv: list[str], folder: str, cwd: str) -> list[str]:
    out = [argv[0]]
    keep = False
    for word in argv[1:]:
        if keep:
            out.append(word)
            keep = False
            continue
        if word in _KEEP_VALUE:
            keep = True
            out.append(word)
            continue
        out.append(_inside(word, folder, cwd))
    return out


def _inside(word: str, folder: str, cwd: str) -> str:
    """``word`` relative to ``folder`` when it names a path inside it (plain, or an
    ``-opt=PATH``'s value), else unchanged."""
    name, eq, value = word.partition("=") if word.startswith("-") else ("", "", word)
    if word.startswith("-") and not eq:
        return word
    path = os.path.normpath(os.path.join(cwd, value))
    if not (os.path.isabs(value) or os.sep in value) or \
            not path.startswith(folder.rstrip(os.sep) + os.sep):
        return word
    rel = os.path.relpath(path, folder)
    return f"{name}{eq}{rel}" if eq else rel
