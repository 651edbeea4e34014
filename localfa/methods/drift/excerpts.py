"""Passages of shortened steps that bear on one claim, shown after the claim: its evidence packet.

First the claim's own steps (the spans that introduce, commit and use it) where the run shows them
cut, whole (`own_steps`); then the passages below, in what is left of the packet's room.

The run text every support and tracer prompt starts with is shared (its cached prefix), so a long
step is cut there the same way for every claim: head and tail. The evidence for a claim often sits
in the middle of such a step (a tool result, a web page). Each claim's prompt therefore ends with
the parts of the cut steps' hidden middles that mention the claim's terms (its values and content
words, `terms.terms`), best first, within `excerpt_chars`, so a cut is never what makes a claim's
support MISSING.
"""

from __future__ import annotations

from dataclasses import dataclass

from localfa.methods.drift.spans import Cut, SpanView
from localfa.methods.drift.terms import search_forms, terms
from localfa.methods.fencing import fence, fence_overhead

RADIUS = 160  # characters kept on each side of a mention


@dataclass(frozen=True)
class Passage:
    step: int
    start: int
    end: int
    score: int


@dataclass(frozen=True)
class Found:
    """The passages chosen, and how many more mentioned the claim but did not fit."""

    passages: list[Passage]
    left_out: int


def _windows(text: str, lo: int, hi: int, wanted: frozenset[str]) -> list[tuple[int, int, frozenset[str]]]:
    """(start, end, terms inside) around every mention of a wanted term in text[lo:hi]; a window
    may reach back into the shown head or on into the shown tail, so a sentence the cut splits
    reads whole in its passage."""
    folded = text.casefold()
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


def relevant_passages(view: SpanView, cuts: list[Cut], claim_text: str, max_chars: int, skip: frozenset[int] = frozenset()) -> Found:
    """The passages of the cut steps' hidden parts that mention the claim's terms, most terms first,
    at most `max_chars` of text (with their headers) in all; returned in trace order."""
    wanted = terms(claim_text)
    if not wanted or not cuts:
        return Found([], 0)
    found = []
    for cut in cuts:
        if cut.step in skip:
            continue
        text = view.texts[cut.step]
        lo, hi = cut.hidden(text)
        found += [Passage(cut.step, a, b, len(t)) for a, b, t in _windows(text, lo, hi, wanted)]
    found.sort(key=lambda p: (-p.score, p.step, p.start))
    chosen, used = [], 0
    for p in found:
        cost = p.end - p.start + fence_overhead(f"PASSAGE {p.step}") + 40
        if used + cost <= max_chars:
            chosen.append(p)
            used += cost
    return Found(sorted(chosen, key=lambda p: (p.step, p.start)), len(found) - len(chosen))


def own_steps(view: SpanView, cuts: list[Cut], steps: list[int], max_chars: int) -> tuple[list[Passage], int]:
    """The claim's own cut steps shown whole (issue 51's evidence packet: the spans that introduce,
    commit and use a claim, uncut), in the order given, each within what is left of `max_chars`
    (a step longer than that shows its head); and the characters they take."""
    cut = {c.step for c in cuts}
    chosen: list[Passage] = []
    used = 0
    for i in dict.fromkeys(steps):
        if i not in cut:
            continue  # shown whole in the run already
        room = max_chars - used - fence_overhead(f"PASSAGE {i}") - 60
        if room <= RADIUS:
            break
        end = min(len(view.texts[i]), room)
        chosen.append(Passage(i, 0, end, 0))
        used += end + fence_overhead(f"PASSAGE {i}") + 60
    return chosen, used


def render_passages(view: SpanView, passages: list[Passage]) -> str:
    """The passages as fenced blocks, each saying which step and which characters it shows."""
    return "\n".join(
        f"From step {p.step}, characters {p.start:,}-{p.end:,} of {len(view.texts[p.step]):,}:\n"
        + fence(view.texts[p.step][p.start : p.end], f"PASSAGE {p.step}")
        for p in passages
    )
