"""Tables for people in which an id is never cut.

The next command a person types often takes an id from the last table (`show ID`,
`forget run PLAN_ID`, `tokens revoke TOKEN_ID`), so every id in every table is printed
whole and contiguous on one line, at any terminal width: it can be double-click copied.
An id column never wraps; the other columns wrap or shrink around it. When the
terminal is too narrow even for that, the table is printed as a list instead: each
row's id on a line of its own, then the row's other cells, one per line.

A table of short values (a status, a time, a count: `requests`, `jobs list`) is made
with `whole_cells=True`: a value broken over two lines in such a cell reads as two
values, so if any cell (or header) would wrap at the width it is printed at, the table
is printed as the list instead.

`IdTable` is a rich `Table`: build it with the names of its id columns and print it
as any table (`out.print(table)`). The check runs when it is rendered, at the width it
is rendered at (rich reads `COLUMNS`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

#: The narrowest a column of text may get before the table is printed as a list.
MIN_READABLE = 8


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


class IdTable(Table):
    """A table whose columns named in `ids` hold ids: never wrapped, folded or
    ellipsised. `keep_whole` adds other strings (ids inside a free-text column, such
    as `show`'s field/value table) that must stay whole too. `whole_cells`: no cell may
    wrap at all (a table of short values), else the table is printed as a list."""

    def __init__(
        self,
        *headers: str,
        ids: Iterable[str] = (),
        title: Any = None,
        whole_cells: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(title=title, **kwargs)
        self.id_headers = set(ids)
        self.whole_cells = whole_cells
        self.whole: set[str] = set()
        for header in headers:
            self.add_column(header)

    def add_column(self, header: Any = "", **kwargs: Any) -> None:  # type: ignore[override]
        if _plain(header) in getattr(self, "id_headers", ()):
            kwargs.setdefault("no_wrap", True)
            kwargs.setdefault("overflow", "fold")
        else:
            kwargs.setdefault("overflow", "fold")
        super().add_column(header, **kwargs)

    def keep_whole(self, *strings: str) -> None:
        self.whole.update(s for s in strings if s)

    def _id_columns(self) -> list[int]:
        return [i for i, c in enumerate(self.columns) if _plain(c.header) in self.id_headers]

    def required(self) -> set[str]:
        """Every string that must appear whole: the id columns' cells and `whole`."""
        found = set(self.whole)
        for index in self._id_columns():
            found.update(_plain(cell) for cell in self.columns[index]._cells)
        return {s for s in found if s}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self._readable(console, options):
            rendered = list(console.render(_AsTable(self), options))
            text = "".join(segment.text for segment in rendered)
            if all(s in text for s in self.required()):
                yield from rendered
                return
        yield from self._as_list()

    def _readable(self, console: Console, options: ConsoleOptions) -> bool:
        """Whether every other column keeps a readable width beside the ids (a column
        of two characters wraps a word a line per syllable: a list reads better)."""
        if not self.columns:
            return True
        max_width = self.width if self.width is not None else options.max_width
        try:
            widths = self._calculate_column_widths(
                console, options.update_width(max_width - self._extra_width)
            )
        except Exception:  # rich's internals changed: the render check still holds
            return True
        ids = self._id_columns()
        for index, (column, width) in enumerate(zip(self.columns, widths, strict=False)):
            room = width - self._get_padding_width(index)
            longest = max((len(_plain(c)) for c in column._cells), default=0)
            if self.whole_cells:
                cells = [column.header, *column._cells] if self.show_header else column._cells
                if room < max((_longest_line(c) for c in cells), default=0):
                    return False
            if index in ids:
                if room < longest:
                    return False
            elif room < min(MIN_READABLE, longest):
                return False
        return True

    def _as_list(self) -> Iterator[Text | Padding]:
        """The fallback for a terminal too narrow for the table: each row's id on its
        own line (never wrapped), the other cells below it, one per line."""
        if self.title is not None:
            yield Text(_plain(self.title), style="bold")
        ids = self._id_columns()
        headers = [_plain(c.header) for c in self.columns]
        for row in range(self.row_count):
            cells = [c._cells[row] if row < len(c._cells) else "" for c in self.columns]
            for index in ids:
                yield Text(_plain(cells[index]), no_wrap=True, overflow="ignore")
            rest = [i for i in range(len(cells)) if i not in ids and _plain(cells[i])]
            for index in rest:
                cell = cells[index]
                value = cell.copy() if isinstance(cell, Text) else Text(str(cell))
                if _plain(value) in self.whole:  # a whole id: alone on its line
                    if self.show_header and headers[index]:
                        yield Text(f"  {headers[index]}:")
                    yield Text(_plain(value), no_wrap=True, overflow="ignore")
                    continue
                label = f"{headers[index]}: " if self.show_header and headers[index] else ""
                if not ids and index == rest[0]:
                    yield value  # a row without an id column starts with its first cell
                    continue
                yield Padding(Text(label) + value, (0, 0, 0, 2), expand=False)
            if row < self.row_count - 1:
                yield Text("")


def _longest_line(cell: Any) -> int:
    """The width a cell needs not to wrap: its longest line, as a terminal shows it."""
    return max((cell_len(line) for line in _plain(cell).split("\n")), default=0)


class _AsTable:
    """The table rendered as rich renders it, without the id check (no recursion)."""

    def __init__(self, table: IdTable) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        result: list[Segment | Any] = list(Table.__rich_console__(self.table, console, options))
        yield from result


def hint(command: str, lead: str = "next") -> Text:
    """A next command to type, as one line: `lead: memory-ledger ...`. Every hint is a
    command that works as printed (tests/test_cli_hints.py runs each one); print it
    with `soft_wrap=True` so rich never breaks it (the terminal may, visually)."""
    return Text(f"{lead}: {command}", no_wrap=True, overflow="ignore")
