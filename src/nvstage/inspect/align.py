"""Two kernels' source lines aligned by their text and order, as a diff of the two sources
is, not by file and line number: two versions of one operation in one file (llm.c's
``layernorm_forward_kernel3`` and ``kernel4``) share no line numbers, and one kernel in two
builds of an edited file moves.

Each side is a sequence of lines (a key each: the line's text without comments and with its
blanks collapsed). ``difflib`` finds the runs both share in order; inside a run each side
rewrote, lines are paired by how alike their texts are (the pairing that keeps the order and
is most alike in all, of pairs at least ``SIMILAR`` alike), so ``sum = cg::reduce(warp, sum,
...)`` meets ``sum2 = cg::reduce(warp, sum2, ...)``; the rest stand alone.
"""

from __future__ import annotations

import difflib
import re

SIMILAR = 0.6  # difflib's ratio of two lines' texts for them to pair inside a rewritten run
# Lines of one rewritten run compared with each other at most: a crafted or generated kernel
# of thousands of differing lines is left unpaired there rather than compared pair by pair.
MAX_CELLS = 250_000

_COMMENT = re.compile(r"//.*$|/\*.*?\*/|#(?!include|define|pragma|if|else|endif).*$")
_BLANKS = re.compile(r"\s+")


def key(text: str | None, python: bool = False) -> str:
    """The text a line is aligned by: its code without comments, blanks collapsed (""
    for a blank or comment-only line). ``python``: ``#`` starts a comment."""
    if text is None:
        return ""
    if python:
        text = text.split("#", 1)[0]
    else:
        text = re.sub(r"//.*$", "", text)
        text = re.sub(r"/\*.*?\*/", "", text)
    return _BLANKS.sub(" ", text).strip()


def align(a: list[str], b: list[str]) -> list[tuple[int | None, int | None]]:
    """(index in ``a``, index in ``b``) of every line of both, in order: pairs of lines
    aligned, and (i, None) or (None, j) for a line one side has alone."""
    out: list[tuple[int | None, int | None]] = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out += [(i1 + k, j1 + k) for k in range(i2 - i1)]
        elif tag == "delete":
            out += [(i, None) for i in range(i1, i2)]
        elif tag == "insert":
            out += [(None, j) for j in range(j1, j2)]
        else:
            out += _similar(a, b, i1, i2, j1, j2)
    return out


def _ratio(x: str, y: str) -> float:
    return difflib.SequenceMatcher(None, x, y, autojunk=False).ratio()


def _similar(a, b, i1, i2, j1, j2) -> list[tuple[int | None, int | None]]:
    """A rewritten run: the order-keeping pairing with the most likeness in all (dynamic
    programming over the run's lines), pairs under ``SIMILAR`` left apart."""
    n, m = i2 - i1, j2 - j1
    if n * m > MAX_CELLS:
        return [(i, None) for i in range(i1, i2)] + [(None, j) for j in range(j1, j2)]
    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    like = [[0.0] * m for _ in range(n)]
    for x in range(n):
        for y in range(m):
            r = _ratio(a[i1 + x], b[j1 + y])
            like[x][y] = r if r >= SIMILAR else 0.0
    for x in range(n - 1, -1, -1):
        for y in range(m - 1, -1, -1):
            best = max(score[x + 1][y], score[x][y + 1])
            if like[x][y]:
                best = max(best, like[x][y] + score[x + 1][y + 1])
            score[x][y] = best
    out: list[tuple[int | None, int | None]] = []
    x = y = 0
    while x < n and y < m:
        if like[x][y] and score[x][y] == like[x][y] + score[x + 1][y + 1]:
            out.append((i1 + x, j1 + y))
            x, y = x + 1, y + 1
        elif score[x][y] == score[x + 1][y]:
            out.append((i1 + x, None))
            x += 1
        else:
            out.append((None, j1 + y))
            y += 1
    out += [(i1 + k, None) for k in range(x, n)] + [(None, j1 + k) for k in range(y, m)]
    return out
