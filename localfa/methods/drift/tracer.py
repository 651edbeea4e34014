"""Dependency Tracer results and the final prediction: error spans, first error, step and agent.

Marks come from one answer per risky claim (``tracer=per-claim``) or one answer over all of them
(``tracer=ledger``); either way they become `Mark`s. The error is where a claim was made, not
where it was adopted: a harmful claim the tracer gave no ``introduce`` mark is marked where the
ledger says it was introduced (a strong tracer tends to mark the span that adopts a wrong report,
the Orchestrator after the WebSurfer, and miss both the step and the agent); its other marks are
its consequences. The prediction is the set of marked spans; the first error is the earliest.
With no harmful claim, the fallback is a judgement, not a position: the span that introduced the
claim whose support came out weakest (`support.weakest_claim`). Inside a span the
answered step is the first step of the agent that made or used the claims marked there (the agent
of the step whose text shares the most of their terms, `terms.terms`). It is always an action
step (`Trace.action_steps`): observation steps (tool output, environment text) are skipped, and
so are human/user turns when an agent acted in the span; a span of observations alone answers the
action step just before it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from localfa.methods.baselines import HUMAN_NAMES
from localfa.methods.drift.ledger import Claim
from localfa.methods.drift.spans import Span, SpanView
from localfa.methods.drift.terms import terms
from localfa.traces.model import normalize_agent


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
    if not answer["harmful"]:
        return False, []
    return True, _with_introduction(claim, [Mark(claim.id, m["span"], m["role"]) for m in answer["marks"]])


def marks_for_ledger(claims: list[Claim], answer: dict[str, Any]) -> tuple[set[str], list[Mark]]:
    """(harmful ids, marks) from one `drift_trace_ledger` answer; marks of harmless claims dropped."""
    harmful = set(answer["harmful"])
    marks: list[Mark] = []
    for c in claims:
        if c.id in harmful:
            marks += _with_introduction(c, [Mark(c.id, m["span"], m["role"]) for m in answer["marks"] if m["claim"] == c.id])
    return harmful, marks


def _with_introduction(claim: Claim, marks: list[Mark]) -> list[Mark]:
    """A harmful claim's marks, with the span that introduced it marked when the tracer did not."""
    if not any(m.role == "introduce" for m in marks):
        marks = [Mark(claim.id, claim.introduced, "introduce", fallback=True), *marks]
    return _dedupe(marks)


def consequences(marks: list[Mark]) -> dict[str, list[int]]:
    """Per harmful claim, the spans that adopted or carried it (every mark but its introduction)."""
    out: dict[str, set[int]] = {}
    for m in marks:
        if m.role != "introduce":
            out.setdefault(m.claim, set()).add(m.span)
    return {cid: sorted(spans) for cid, spans in out.items()}


def _dedupe(marks: Iterable[Mark]) -> list[Mark]:
    """Marks without repeats; one span may carry a claim in several roles (commit and reuse)."""
    return list(dict.fromkeys(marks))


def error_spans(marks: list[Mark]) -> list[int]:
    """The predicted error spans (ids), in trace order."""
    return sorted({m.span for m in marks})


def answer_candidates(view: SpanView, span: Span) -> list[int]:
    """Steps of `span` a method may answer: its agents' action steps, human turns only when no
    agent acted there; a span of observations alone gives the nearest action step before it
    (else after it)."""
    trace = view.trace
    actions = [i for i in span.steps if trace.steps[i].kind == "action"]
    agents = [i for i in actions if normalize_agent(trace.steps[i].agent) not in HUMAN_NAMES]
    if agents or actions:
        return agents or actions
    allowed = [i for i in trace.action_steps() if i < view.n_steps]
    before = [i for i in allowed if i < span.first]
    after = [i for i in allowed if i > span.last]
    return [before[-1]] if before else after[:1] or [span.first]


def pick_step(view: SpanView, span: Span, texts: list[str]) -> int:
    """The first step in `span` of the agent that made or used the claims in `texts`.

    That agent is the one whose step shares the most terms with them (ties: the earliest); with
    no text or no shared term at all, the first candidate (`answer_candidates`).
    """
    candidates = answer_candidates(view, span)
    want = frozenset().union(*(terms(t) for t in texts)) if texts else frozenset()
    if not want or len(candidates) == 1:
        return candidates[0]
    scores = [len(want & terms(view.texts[i])) for i in candidates]
    best = max(scores)
    if best == 0:
        return candidates[0]
    agent = normalize_agent(view.trace.steps[candidates[scores.index(best)]].agent)
    return next(i for i in candidates if normalize_agent(view.trace.steps[i].agent) == agent)
