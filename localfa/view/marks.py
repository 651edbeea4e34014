"""Where each evidence quote sits in a step's text, so the page can wrap it in ``<mark>``.

A quote is matched the way `localfa.methods.evidence` judges it verbatim: the line view's
decoration dropped (`clean_quote`), whitespace runs folded to one space (a quote may cross a line
wrap), case kept, JSON escapes undone when the quote carries them, and as a last resort with no
whitespace at all (the line view may wrap inside a word). Matching runs on the compacted text;
positions map back to the original so the page shows it unchanged.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from localfa.methods.evidence import clean_quote, fold, unescape

Range = tuple[int, int, int]  # (start, end, quote number) in the original text


@dataclass(frozen=True)
class Folded:
    """`text` with whitespace runs folded; `start[i]`/`end[i]` span folded char i in the original."""

    text: str
    start: tuple[int, ...]
    end: tuple[int, ...]


def fold_with_map(original: str, squeeze: bool = False) -> Folded:
    """Fold whitespace like `evidence.fold` (or drop it, `squeeze`), remembering where each
    resulting character came from."""
    chars: list[str] = []
    start: list[int] = []
    end: list[int] = []
    i, n = 0, len(original)
    while i < n:
        if original[i].isspace():
            j = i
            while j < n and original[j].isspace():
                j += 1
            if chars and j < n and not squeeze:  # inner run: one space; leading/trailing runs are stripped
                chars.append(" ")
                start.append(i)
                end.append(j)
            i = j
            continue
        chars.append(original[i])
        start.append(i)
        end.append(i + 1)
        i += 1
    return Folded("".join(chars), tuple(start), tuple(end))


def quote_forms(quote: str, squeeze: bool = False) -> list[str]:
    """The forms of a quote worth searching for: cleaned and folded, then with escapes undone."""
    forms = [clean_quote(quote)]
    plain = fold(unescape(forms[0]))
    if plain != forms[0]:
        forms.append(plain)
    if squeeze:
        forms = ["".join(f.split()) for f in forms]
    return [f for f in forms if f]


def find_quotes(original: str, quotes: list[str]) -> list[Range]:
    """Every occurrence of every quote in `original`: (start, end, quote number), sorted."""
    found: list[Range] = []
    maps = {False: fold_with_map(original)}
    for number, quote in enumerate(quotes):
        for squeeze in (False, True):  # squeezed only when the folded forms are nowhere
            if squeeze not in maps:
                maps[squeeze] = fold_with_map(original, squeeze=True)
            hits = _occurrences(maps[squeeze], quote_forms(quote, squeeze), number)
            if hits:
                found.extend(hits)
                break
    return sorted(found)


def _occurrences(folded: Folded, forms: list[str], number: int) -> list[Range]:
    """Occurrences of the first form that occurs at all (the escaped and unescaped forms would
    otherwise mark the same place twice)."""
    for form in forms:
        out: list[Range] = []
        pos = folded.text.find(form)
        while pos >= 0:
            out.append((folded.start[pos], folded.end[pos + len(form) - 1], number))
            pos = folded.text.find(form, pos + len(form))
        if out:
            return out
    return []


def merge_ranges(ranges: list[Range]) -> list[Range]:
    """Overlapping ranges merged (the merged range keeps the first quote's number)."""
    out: list[Range] = []
    for a, b, q in sorted(ranges):
        if out and a < out[-1][1]:
            pa, pb, pq = out[-1]
            out[-1] = (pa, max(pb, b), pq)
        else:
            out.append((a, b, q))
    return out


def marked_html(original: str, ranges: list[Range], css_class: str = "ev") -> str:
    """`original`, HTML-escaped, with each range wrapped in ``<mark class=... data-quote=N>``."""
    parts: list[str] = []
    at = 0
    for a, b, q in merge_ranges(ranges):
        parts.append(html.escape(original[at:a], quote=False))
        parts.append(f'<mark class="{css_class}" data-quote="{q}">{html.escape(original[a:b], quote=False)}</mark>')
        at = b
    parts.append(html.escape(original[at:], quote=False))
    return "".join(parts)
