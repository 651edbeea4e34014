"""Dependency Tracer results and the final prediction: error spans, first error, step and agent.

Marks come from one answer per risky claim (``tracer=per-claim``) or one answer over all of them
(``tracer=ledger``); either way they become `Mark`s. A claim judged harmful with no mark is
marked where it was committed (its consequential span), so a harmful claim is never silent.
The prediction is the set of marked spans; the first error is the earliest. Inside a span the
step is the first one whose text shares the most words with the claims marked there (the agent
that made or used the claim), skipping the human/user turns when another step is available.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from localfa.methods.baselines import HUMAN_NAMES
from localfa.methods.drift.ledger import Claim, claim_key
from localfa.methods.drift.spans import Span, SpanView
from localfa.traces.model import normalize_agent

MIN_WORD = 4  # words shorter than this ("the", "is") say nothing about which step holds a claim


@dataclass(frozen=True)
class Mark:
    """Span `span` carries claim `claim` in the given role."""

    claim: str
    span: int
    role: str
    fallback: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def marks_for_claim(claim: Claim, answer: dict[str, Any]) -> tuple[bool, list[Mark]]:
    """(harmful, marks) from one `drift_trace_claim` answer."""
    harmful = bool(answer["harmful"])
    if not harmful:
        return False, []
    marks = _dedupe(Mark(claim.id, m["span"], m["role"]) for m in answer["marks"])
    return True, marks or [_commit_mark(claim)]


def marks_for_ledger(claims: list[Claim], answer: dict[str, Any]) -> tuple[set[str], list[Mark]]:
    """(harmful ids, marks) from one `drift_trace_ledger` answer; marks of harmless claims dropped."""
    harmful = set(answer["harmful"])
    marks = _dedupe(Mark(m["claim"], m["span"], m["role"]) for m in answer["marks"] if m["claim"] in harmful)
    marked = {m.claim for m in marks}
    marks += [_commit_mark(c) for c in claims if c.id in harmful and c.id not in marked]
    return harmful, marks


def _commit_mark(claim: Claim) -> Mark:
    span = claim.consequential if claim.consequential is not None else claim.introduced
    return Mark(claim.id, span, "commit", fallback=True)


def _dedupe(marks: Iterable[Mark]) -> list[Mark]:
    seen: set[tuple[str, int]] = set()
    out = []
    for m in marks:
        if (m.claim, m.span) not in seen:
            seen.add((m.claim, m.span))
            out.append(m)
    return out


def error_spans(marks: list[Mark]) -> list[int]:
    """The predicted error spans (ids), in trace order."""
    return sorted({m.span for m in marks})


def _words(text: str) -> set[str]:
    return {w for w in claim_key(text).split() if len(w) >= MIN_WORD}


def pick_step(view: SpanView, span: Span, texts: list[str]) -> int:
    """The first step of `span` that best matches `texts` (a claim, the final answer).

    Ties and no overlap at all go to the earliest non-human step of the span.
    """
    steps = list(span.steps)
    agents = [normalize_agent(view.trace.steps[i].agent) for i in steps]
    candidates = [i for i, a in zip(steps, agents) if a not in HUMAN_NAMES] or steps
    want = set().union(*(_words(t) for t in texts)) if texts else set()
    if not want:
        return candidates[0]
    best, best_score = candidates[0], 0
    for i in candidates:
        score = len(want & _words(view.texts[i]))
        if score > best_score:
            best, best_score = i, score
    return best


def final_answer_span(spans: list[Span], claims: list[Claim]) -> tuple[Span, Claim | None]:
    """Where the final answer is committed: the latest finalized claim's commit span, else the last span."""
    finals = [c for c in claims if c.status == "finalized" and c.consequential is not None]
    if finals:
        last = max(finals, key=lambda c: (c.consequential, c.id))
        return spans[last.consequential], last  # type: ignore[index]
    return spans[-1], None
