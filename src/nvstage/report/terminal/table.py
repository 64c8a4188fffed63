"""The one table every command prints, drawn so that it never loses data.

A value (a name, a number, a file, "14 -> 32") is never cut and never broken across lines.
The first of these that fits the console's width is drawn:

1. the table, every header on one line; then each of its ``narrower`` layouts (the same
   cells laid out narrower: the stage table puts each file on its own line);
2. the same, the headers wrapped between their words;
3. stacked records: each row a line naming it by its ``key`` cells, then one
   ``column: value`` line for each further cell. A line longer than the width is left whole
   for the terminal to fold.

Only a column declared ``prose`` (a sentence, not a value) wraps, and only between words.
This module is imported where a table is made (``console.plain_table``): rich stays out of
the launcher and ``--help``."""

from __future__ import annotations

import copy
import re

from rich import box
from rich.cells import cell_len
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

# Measuring happens at a width no line reaches: what a cell needs, not what the console has.
_UNBOUNDED = 1_000_000


class PlainTable(Table):
    """A rich ``Table`` whose string cells are plain text, never markup (kernel names, paths
    and targets come from files that may be anyone's: "[/x]" in one would end the command
    with rich's MarkupError, and "[red]" would restyle the output), drawn as the module says.

    ``key``: how many leading cells name a row in stacked records (a blank one is the row
    above's: grouped rows leave it blank). ``narrower``: tables holding the same data laid out
    narrower, tried in order before stacked records."""

    def __init__(self, *args, key: int = 1, **kw) -> None:
        super().__init__(*args, **kw)
        self.key = key
        self.narrower: tuple[PlainTable, ...] = ()
        self.prose: set[int] = set()

    def add_column(self, header="", *args, prose: bool = False, **kw) -> None:
        """``prose``: the column holds sentences, which may wrap between words."""
        if prose:
            self.prose.add(len(self.columns))
        super().add_column(Text(header) if isinstance(header, str) else header, *args, **kw)

    def add_row(self, *cells, **kw) -> None:
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kw)

    def __rich_console__(self, console, options):
        width = options.max_width
        for whole_headers in (True, False):
            for table in (self, *self.narrower):
                drawn = table._fitted(console, options, width, whole_headers)
                if drawn is not None:
                    yield from drawn._annotated(console, options)
                    return
        yield from self._stacked(console, options)

    # --- as a table

    def _fitted(self, console, options, width: int, whole_headers: bool):
        """A copy of this table with each column's width fixed so that no value wraps (prose
        between words only, headers too unless ``whole_headers``), or None where no such
        widths fit ``width``."""
        if not self.columns:
            return None
        wide = options.update_width(_UNBOUNDED)
        need, floor = [], []
        for i, column in enumerate(self.columns):
            cells = [_measure(console, wide, c) for c in column._cells]
            head = _measure(console, wide, column.header)
            most = max((m.maximum for m in cells), default=0)
            least = max((m.minimum for m in cells), default=0)
            header = head.maximum if whole_headers else head.minimum
            if i in self.prose:
                floor.append(max(least, head.minimum, 1))
                need.append(max(most, header, 1))
            else:
                floor.append(max(most, header, 1))
                need.append(floor[-1])
        room = width - self._extra_width - sum(self._get_padding_width(i)
                                               for i in range(len(self.columns)))
        if sum(floor) > room:
            return None
        widths = _share(floor, need, room)
        fitted = copy.copy(self)
        fitted.columns = []
        for column, w in zip(self.columns, widths):
            column = copy.copy(column)
            # Every word fits its column: wrapping happens between words, and only in prose
            # and in headers (a cell's own width was measured above).
            column.width, column.min_width, column.max_width = w, None, None
            column.no_wrap, column.overflow = False, "fold"
            fitted.columns.append(column)
        return fitted

    def _annotated(self, console, options):
        """The table, its title and caption above and below it: at the table's width where
        they fit it, otherwise on their own lines at the console's width, never cut."""
        table_width = sum(c.width + self._get_padding_width(i)
                          for i, c in enumerate(self.columns)) + self._extra_width
        title, caption = self.title, self.caption
        own_title = title is not None and _measure(console, options, title).maximum > table_width
        own_caption = (caption is not None
                       and _measure(console, options, caption).maximum > table_width)
        if own_title:
            self.title = None
            yield from _prose(console, options, title, "table.title")
        if own_caption:
            self.caption = None
        yield from super().__rich_console__(console, options)
        if own_caption:
            yield from _prose(console, options, caption, "table.caption")

    # --- as stacked records

    def _stacked(self, console, options):
        if self.title is not None:
            yield from _prose(console, options, self.title, "table.title")
            yield Segment.line()
        labels = [_plain(c.header).replace("\n", " ").strip() for c in self.columns]
        key = max(1, min(self.key, len(self.columns)))
        above: list[Text] = [Text("")] * key
        for r in range(self.row_count):
            cells = [_as_text(c._cells[r]) for c in self.columns]
            names = [c if c.plain.strip() else above[i] for i, c in enumerate(cells[:key])]
            above = names
            head = Text("  ").join(n for n in names if n.plain.strip())
            head.stylize("bold")
            yield from _whole(console, options, head)
            for i, (label, cell) in enumerate(zip(labels[key:], cells[key:]), start=key):
                if not cell.plain.strip():
                    continue  # an empty cell holds nothing to lose
                prefix = f"  {label}: " if label else "  "
                if i in self.prose:
                    yield from _hanging(console, options, prefix, cell)
                    continue
                for n, line in enumerate(cell.split("\n")):
                    yield from _whole(console, options,
                                      Text(prefix if n == 0 else " " * len(prefix)) + line)
        yield Segment.line()
        if self.caption is not None:
            yield from _prose(console, options, self.caption, "table.caption")


def plain_table(*, title=None, box_style: str = "SIMPLE_HEAD", key: int = 1, **kw) -> PlainTable:
    if isinstance(title, str):
        title = Text(title, style="table.title")
    return PlainTable(box=getattr(box, box_style), title=title, key=key, **kw)


def _share(floor: list[int], need: list[int], room: int) -> list[int]:
    """Widths from ``floor`` up towards ``need``, spending at most ``room`` in all: the
    columns furthest from what they need get the spare columns first."""
    widths, spare = list(floor), room - sum(floor)
    while spare > 0:
        i = max(range(len(widths)), key=lambda j: need[j] - widths[j])
        if need[i] <= widths[i]:
            break
        step = min(spare, need[i] - widths[i])
        widths[i] += step
        spare -= step
    return widths


def _measure(console, options, renderable) -> Measurement:
    if isinstance(renderable, str):
        renderable = Text(renderable)
    return Measurement.get(console, options, renderable)


def _plain(renderable) -> str:
    return renderable if isinstance(renderable, str) else getattr(renderable, "plain", "")


def _as_text(cell) -> Text:
    if isinstance(cell, Text):
        return cell
    return Text(cell) if isinstance(cell, str) else Text(str(cell))


def _whole(console, options, text: Text):
    """``text`` as lines that are never wrapped or cut, however wide."""
    text = text.copy()
    text.no_wrap, text.overflow, text.end = True, "ignore", "\n"
    yield from console.render(text, options.update(no_wrap=True, overflow="ignore"))


def _hanging(console, options, prefix: str, cell: Text):
    """A prose cell after its label, wrapped between words under its first word."""
    for n, line in enumerate(_between_words(cell, options.max_width - len(prefix))):
        yield from _whole(console, options, Text(prefix if n == 0 else " " * len(prefix)) + line)


def _prose(console, options, text, style: str):
    """A title or caption on its own lines, wrapped between words at the console's width."""
    text = Text(text, style=style) if isinstance(text, str) else text
    for line in _between_words(text, options.max_width):
        yield from _whole(console, options, line)


def _between_words(text: Text, width: int) -> list[Text]:
    """``text``'s lines wrapped at ``width`` between words, a word wider than that alone on
    its line and whole (rich's own wrapping would fold or crop it)."""
    lines = []
    for line in text.split("\n", allow_blank=True):
        breaks, used = [], 0
        for word in re.finditer(r"\S+\s*", line.plain):
            if used and used + cell_len(word.group().rstrip()) > width:
                breaks.append(word.start())
                used = 0
            used += cell_len(word.group())
        for piece in line.divide(breaks):
            piece.rstrip()
            lines.append(piece)
    return lines
