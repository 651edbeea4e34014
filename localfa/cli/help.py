"""How `localfa ... --help` is laid out: click's plain help, which wraps to the terminal (80
columns) and never breaks an example.

Typer's rich help draws boxes and a type column that leave an option's help ~35 columns at 80,
and it cut long words with an ellipsis (``all-at-once:with_ground_truth=tr…``). click's layout
keeps the width for the text; this formatter also never breaks a line at a hyphen, so a method
spec or a path in an example stays whole and can be copied. ``-h`` is ``--help`` everywhere.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import typer
from typer.core import TyperCommand, TyperGroup

_KEEP = "\u2011"  # a non-breaking hyphen while wrapping; written back as "-"
HELP_OPTIONS = ["-h", "--help"]


def _keep(text: str) -> str:
    return text.replace("-", _KEEP)


class HelpFormatter(typer.Context.formatter_class):  # type: ignore[misc,name-defined,valid-type]  # the click Typer carries
    """click's help layout, breaking lines only at spaces."""

    def write_text(self, text: str) -> None:
        super().write_text(_keep(text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(first, _keep(second)) for first, second in rows], col_max, col_spacing)

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, _keep(args), prefix)

    def getvalue(self) -> str:
        return super().getvalue().replace(_KEEP, "-")


class Context(typer.Context):
    formatter_class = HelpFormatter


class Group(TyperGroup):
    context_class = Context


class Command(TyperCommand):
    context_class = Context


def examples(lines: Iterable[str]) -> str:
    """An "Examples:" block that click shows as written (a ``\\b`` paragraph: never re-wrapped)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
