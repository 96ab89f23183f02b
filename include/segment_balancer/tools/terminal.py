"""Tables for a terminal of any width, a cell never cut: a rich table when its columns fit the
console's width (headers may wrap at spaces, cells never), else one block per row, its first cell
whole on a line of its own and then ``header value`` pairs wrapped to the width (``·`` between)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.table import Table

PADDING = 3
"""Columns a rich table spends around each column (borders and padding)."""


def _words(text: str) -> int:
    return max((len(w) for w in str(text).split()), default=0)


def fits(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> bool:
    """Whether a table of ``rows`` fits ``width`` columns: every cell whole on one line, every
    header wrapped at its spaces."""
    need = 1
    for k, header in enumerate(headers):
        cells = max((len(str(r[k])) for r in rows), default=0)
        need += max(cells, _words(header)) + PADDING
    return need <= width


def blocks(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """The lines of :func:`print_table`'s narrow layout (module docstring)."""
    lines = []
    for row in rows:
        lines.append(f"{headers[0]} {row[0]}")
        pairs = " · ".join(f"{h} {v}" for h, v in zip(headers[1:], row[1:], strict=True))
        lines.extend(textwrap.wrap(pairs, width, initial_indent="  ", subsequent_indent="  ", break_long_words=False))
    return lines


def print_table(
    console, headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None, numeric_from: int = 1
) -> None:
    """Print ``rows`` under ``headers`` on rich ``console`` (module docstring); columns from
    ``numeric_from`` on are right-aligned in the table layout."""
    rows = [[str(c) for c in r] for r in rows]
    if fits(headers, rows, console.width):
        table = Table(title=title, title_justify="left")
        for k, header in enumerate(headers):
            table.add_column(
                header,
                no_wrap=False,
                justify="right" if k >= numeric_from else "left",
                overflow="fold",
                min_width=max((len(r[k]) for r in rows), default=1),
            )
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    if title:
        console.print(title, soft_wrap=True)
    for line in blocks(headers, rows, console.width):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
