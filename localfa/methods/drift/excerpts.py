"""Where a claim is mentioned in a step: windows of text around every mention of its terms.

A claim's evidence packet (`packets`) shows, after the claim's own spans, the parts of the rest of
the run that mention its values and content words (`terms.terms`): each mention with `RADIUS`
characters on either side, overlapping windows merged, so a sentence reads whole.
"""

from __future__ import annotations

from localfa.methods.drift.terms import search_forms

RADIUS = 160  # characters kept on each side of a mention


def windows(text: str, lo: int, hi: int, wanted: frozenset[str], folded: str | None = None) -> list[tuple[int, int, frozenset[str]]]:
    """(start, end, terms inside) around every mention of a wanted term in text[lo:hi]; a window
    may reach outside [lo, hi), so a sentence a cut splits reads whole in its passage. `folded`:
    `text` case-folded, when the caller keeps it."""
    folded = text.casefold() if folded is None else folded
    hits: list[tuple[int, str]] = []
    for term in wanted:
        for form in search_forms(term):
            at = folded.find(form, lo)
            while at != -1 and at < hi:
                hits.append((at, term))
                at = folded.find(form, at + len(form))
    hits.sort()
    out: list[tuple[int, int, frozenset[str]]] = []
    for at, term in hits:
        a, b = max(0, at - RADIUS), min(len(text), at + RADIUS)
        if out and a <= out[-1][1]:
            pa, _, pt = out[-1]
            out[-1] = (pa, b, pt | {term})
        else:
            out.append((a, b, frozenset({term})))
    return out
