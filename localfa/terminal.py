"""Text for a terminal: a record's words made inert and one line, and tables that fit a width.

A results file is input: an agent name or a reasoning may hold escape sequences, carriage returns
or bidirectional overrides that would repaint a terminal. Everything a command prints from a
record goes through `plain`; tables are cut to a width (`table`) so they read at 100 columns.
"""

from __future__ import annotations

import re
from typing import Sequence

# C0 and C1 controls, DEL, zero-width and bidirectional marks: none belongs in one line of output.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]+")


def plain(value: object, limit: int | None = None) -> str:
    """`value` as one printable line (controls become spaces, runs of space one), cut to `limit`
    characters with an ellipsis."""
    text = " ".join(_CONTROLS.sub(" ", "" if value is None else str(value)).split())
    if limit is not None and len(text) > limit:
        return text[: max(0, limit - 1)] + "…"
    return text


def clip(text: str, width: int) -> str:
    """`text` (already plain) cut to `width` characters with an ellipsis."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _cell(value: object) -> str:
    """`plain`, keeping a cell's leading spaces (an indented row under its parent)."""
    text = "" if value is None else str(value)
    return " " * (len(text) - len(text.lstrip(" "))) + plain(text)


def table(
    head: Sequence[str], rows: Sequence[Sequence[str]], width: int = 100, shrink: Sequence[int] = (), right: Sequence[int] = ()
) -> list[str]:
    """Aligned lines (two spaces between columns) no wider than `width` where the columns in
    `shrink` can give way: the widest of them is cut (with an ellipsis, to 8 characters at least)
    until the table fits. Columns in `right` are right-aligned (numbers)."""
    cells = [[_cell(c) for c in head]] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    while sum(widths) + 2 * (len(widths) - 1) > width:
        can = [i for i in shrink if widths[i] > 8]
        if not can:
            break
        widest = max(can, key=lambda i: widths[i])
        widths[widest] -= 1
    lines = []
    for r in cells:
        parts = []
        for i, c in enumerate(r):
            c = c if len(c) <= widths[i] else c[: widths[i] - 1] + "…"
            parts.append(c.rjust(widths[i]) if i in right else c.ljust(widths[i]))
        lines.append("  ".join(parts).rstrip())
    return lines
