"""Reading a value someone typed (an option, a printed figure): a number where it is one."""

from __future__ import annotations


def number_or_text(text: str) -> int | float | str:
    """`text` as an int, else a float, else the text itself: ``"3"`` -> 3, ``"0.5"`` -> 0.5, ``"x"`` -> ``"x"``."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text
