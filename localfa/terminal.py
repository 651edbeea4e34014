"""Text from a trace or a results file, made safe to print on a terminal, and tables that fit a width.

An agent named ``Coder\\x1b]0;PWNED\\x07`` sets the window title of whoever runs `inspect`; other
sequences move the cursor, clear the screen, rewrite the line just printed (a carriage return), or
(OSC 52) write to the clipboard. Every command prints trace-made text through `terminal_safe`,
which removes every escape and control sequence (ECMA-48: CSI, OSC, DCS, SOS, PM, APC and the
short ESC forms, in their 7-bit and 8-bit spellings), every other C0 and C1 control but tab and
newline, and the bidirectional overrides and isolates that make a terminal show text in another
order than it is. Colours are removed too: a trace cannot style our output. `plain` makes a
record's field one such line (for tables and one-line verdicts); `table` cuts columns to a width so
they read at 100 columns. A leaf module.
"""

from __future__ import annotations

import re
from typing import Sequence

# Strings ended by BEL or ST (ESC \ or 0x9c), or left unterminated: everything up to the end goes.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x9c\x1b]*(?:\x07|\x9c|\x1b\\)?"
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
_SHORT = r"\x1b[ -/]*[0-~]?"
_SEQUENCES = re.compile(f"{_STRING}|{_CSI}|{_SHORT}")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` without escape or control sequences (tab and newline kept); see the module doc."""
    text = str(text)
    if text.isprintable():  # the usual case: nothing to remove (isprintable is False for any control)
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


# Whatever is left that ends or hides a line (tab and newline, zero-width marks, line separators):
# none belongs in one line of output.
_LINE_BREAKERS = re.compile("[\t\n\u200b-\u200f\u2028\u2029\ufeff]+")


def plain(value: object, limit: int | None = None) -> str:
    """`value` as one printable line (controls become spaces, runs of space one), cut to `limit`
    characters with an ellipsis."""
    text = " ".join(_LINE_BREAKERS.sub(" ", terminal_safe("" if value is None else str(value))).split())
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
