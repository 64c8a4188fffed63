"""Split one line of nvcc's ``--dryrun`` output into words, the way a POSIX shell would.

Only the subset nvcc prints is supported: blanks, single quotes, double quotes with backslash
escapes, unquoted backslashes, and ``$NAME`` / ``${NAME}`` for the variables the plan defined.
Unknown ``$...`` text is kept literally: nvcc does not escape ``$`` in file names, and nothing
here ever runs a shell, so ``$(...)`` in a name stays a name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nvstage.errors import ShellWordsError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DQ_ESCAPABLE = '$`"\\\n'


def split(line: str, variables: Mapping[str, str] | None = None) -> list[str]:
    """Split ``line`` into words, expanding ``$NAME`` for names in ``variables``."""
    variables = variables or {}
    words: list[str] = []
    cur: list[str] = []
    in_word = False
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in " \t\r\n":
            if in_word:
                words.append("".join(cur))
                cur, in_word = [], False
            i += 1
        elif c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ShellWordsError(f"unterminated single quote at column {i + 1}")
            cur.append(line[i + 1 : end])
            in_word, i = True, end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise ShellWordsError("unterminated double quote")
                c = line[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and line[i + 1] in _DQ_ESCAPABLE:
                    cur.append(line[i + 1])
                    i += 2
                elif c == "$":
                    text, i = _expand(line, i, variables)
                    cur.append(text)
                else:
                    cur.append(c)
                    i += 1
            in_word = True
        elif c == "\\":
            if i + 1 < n:
                cur.append(line[i + 1])
            i += 2
            in_word = True
        elif c == "$":
            text, i = _expand(line, i, variables)
            cur.append(text)
            in_word = True
        else:
            cur.append(c)
            in_word = True
            i += 1
    if in_word:
        words.append("".join(cur))
    return words


def _expand(line: str, i: int, variables: Mapping[str, str]) -> tuple[str, int]:
    """Expand a ``$`` at ``line[i]``; return (text, next index). Unknown names stay literal."""
    if line.startswith("${", i):
        end = line.find("}", i + 2)
        if end > 0 and _NAME.fullmatch(line[i + 2 : end]) and line[i + 2 : end] in variables:
            return variables[line[i + 2 : end]], end + 1
        return "$", i + 1
    m = _NAME.match(line, i + 1)
    if m and m.group(0) in variables:
        return variables[m.group(0)], m.end()
    return "$", i + 1
