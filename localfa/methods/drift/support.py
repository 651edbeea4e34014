"""Support Seeker results: the model's verdict on one claim, checked against the trace itself.

The model answers DIRECT / WEAK / MISSING / CONFLICTING with a quote and the span it came from.
The quote is then looked up in the trace (`verify_quotes`) and in the spans' uncut text: a
DIRECT verdict whose quote is not in the run is demoted to WEAK (support was asserted, not shown),
and the span the quote really comes from is recorded next to the one the model named.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from localfa.methods.drift.spans import Span, SpanView
from localfa.methods.evidence import fold, verify_quotes

RISKY = frozenset({"WEAK", "MISSING", "CONFLICTING"})


@dataclass
class SupportCheck:
    """One claim's support status, with its evidence and where that evidence sits."""

    claim: str
    status: str
    model_status: str
    evidence: str
    span: int
    evidence_verbatim: bool
    evidence_span: int | None
    reason: str

    @property
    def risky(self) -> bool:
        return self.status in RISKY

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def locate_quote(view: SpanView, spans: list[Span], quote: str, hint: int) -> int | None:
    """The span whose uncut text holds `quote` (the model's `hint` first), or None."""
    q = fold(quote)
    if not q:
        return None
    order = [spans[hint]] if 0 <= hint < len(spans) else []
    order += [sp for sp in spans if sp.id != hint]
    for sp in order:
        if q in fold(view.span_text(sp)):
            return sp.id
    return None


def check_from_answer(claim_id: str, answer: dict[str, Any], view: SpanView, spans: list[Span], verify: bool = True) -> SupportCheck:
    """A SupportCheck from one `drift_support` answer, with the quote verified against the trace."""
    quote = answer["evidence"].strip()
    verbatim = bool(quote) and verify_quotes(view.trace, [quote])[0]
    status = answer["status"]
    if verify and status == "DIRECT" and not verbatim:
        status = "WEAK"
    return SupportCheck(
        claim=claim_id,
        status=status,
        model_status=answer["status"],
        evidence=quote,
        span=answer["span"],
        evidence_verbatim=verbatim,
        evidence_span=locate_quote(view, spans, quote, answer["span"]) if verbatim else None,
        reason=answer["reason"].strip(),
    )
