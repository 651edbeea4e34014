"""DRIFT's answer: the first error span and its step when the tracer marked harmful claims, else a
judged fallback.

With marks, the prediction is every marked span (the paper's Ê) and the first error is the
earliest: the span that introduced the earliest harmful claim (`tracer`), answered at the step of
the agent that made it. With none, Ê = ∅: where the caller allows it (`ctx.allow_none`) that is
the answer, "no decisive error" (`localfa.methods.none_answer`); else a step is still answered, as
a judgement rather than a position: the span that introduced the checked claim whose support came out weakest
(`support.weakest_claim`); with no checked claim at all, the last span. `step_is_fallback` says
which of the two an answer is, so a report can score fallback answers apart from found errors.

With `late_endpoints` (the authors' code, NJU-LINK/DRIFT, completes its prediction this way) the
predicted spans also hold each committed claim's consequential span and its last use (else the
span that introduced it): after the first error span, or all of them with no error found, where
its benchmark's gold sets are never empty. They are recorded apart (`endpoint_spans`); the first
error and the answered step stay the tracer's (or the fallback's).
"""

from __future__ import annotations

from typing import Any

from localfa.diagnosis import Diagnosis
from localfa.methods.base import MethodContext
from localfa.methods.drift.ledger import Claim, Ledger
from localfa.methods.drift.spans import Span, SpanView
from localfa.methods.drift.support import SupportCheck, weakest_claim
from localfa.methods.drift.tracer import Mark, error_spans, pick_step
from localfa.methods.none_answer import none_diagnosis

METHOD = "drift"


def diagnose(
    ctx: MethodContext,
    view: SpanView,
    spans: list[Span],
    ledger: Ledger,
    checked: list[Claim],
    checks: list[SupportCheck],
    marks: list[Mark],
    details: dict[str, Any],
    late: bool = True,
) -> Diagnosis:
    """The diagnosis of one audit; `details` is completed with where the answer came from."""
    by_claim = {k.claim: k for k in checks}
    err = error_spans(marks)
    details["error_spans"] = err
    if err:
        first = spans[err[0]]
        there = [ledger.get(m.claim) for m in marks if m.span == first.id]
        claims = list({c.id: c for c in there if c is not None}.values())
        step = pick_step(view, first, [c.text for c in claims])
        why = "; ".join(f"{c.id} ({by_claim[c.id].status}): {c.text}" for c in claims if c.id in by_claim)
        details.update(first_error_span=first.id, no_error_reason=None, step_is_fallback=False)
        reasoning = (
            f"First error in span {first.id} (steps {first.first}-{first.last}), which carries "
            f"unsupported claim(s) {why}. Error spans: {', '.join(map(str, err))}."
        )
        ordered = sorted({m.claim for m in marks}, key=lambda cid: min(m.span for m in marks if m.claim == cid))
    else:
        risky = [k.claim for k in checks if k.risky]
        reason = (
            "risky claims were judged harmless"
            if risky
            else "no committed claim lacks support"
            if checks
            else "no committed claim was recorded"
        )
        if ctx.allow_none:  # no error span, and the caller allows the answer: no decisive error (none_answer)
            details.update(first_error_span=None, no_error_reason=reason, step_is_fallback=False, endpoint_spans=[])
            return none_diagnosis(
                ctx, METHOD, f"No error span found ({reason}): the run shows no decisive error.", spans=[], details=details
            )
        weakest = weakest_claim(checked, checks)
        if weakest is not None:
            span = spans[weakest.introduced]
            step = pick_step(view, span, [weakest.text])
            where = f"the span that introduced {weakest.id}, the claim whose support came out weakest ({by_claim[weakest.id].status})"
        else:
            span = spans[-1]
            step = pick_step(view, span, [ctx.trace.final_output] if ctx.trace.final_output else [])
            where = "the last span"
        details.update(
            first_error_span=None,
            no_error_reason=f"{reason}: no error span marked; answering {where} as a fallback",
            step_is_fallback=True,
            fallback_span=span.id,
            fallback_claim=weakest.id if weakest else None,
        )
        reasoning = f"No error span found ({reason}); answering step {step} in span {span.id}, {where}, as a fallback."
        ordered = [weakest.id] if weakest else []
    endpoints = late_endpoints(ledger, err[0] if err else None) if late else []
    details["endpoint_spans"] = [i for i in endpoints if i not in err]
    predicted = [spans[i].as_range() for i in sorted(set(err) | set(endpoints))]
    evidence = list(dict.fromkeys(by_claim[c].evidence for c in ordered if c in by_claim and by_claim[c].evidence_verbatim))
    return ctx.diagnosis(METHOD, step=step, reasoning=reasoning, evidence=evidence, spans=predicted, details=details)


def late_endpoints(ledger: Ledger, first_error: int | None) -> list[int]:
    """Committed claims' consequential spans and last uses (else their introduction), in order:
    those after `first_error`, or every one when no error span was found."""
    found: set[int] = set()
    for claim in ledger.claims:
        if not claim.committed:
            continue
        if claim.consequential is not None:
            found.add(claim.consequential)
        found.add(claim.uses[-1] if claim.uses else claim.introduced)
    return sorted(i for i in found if first_error is None or i > first_error)
