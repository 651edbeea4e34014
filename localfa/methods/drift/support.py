"""Support Seeker results: the model's verdict on one claim, checked against the trace itself.

The model gives a quote, the span it came from and a reason, then decides DIRECT / WEAK /
MISSING / CONFLICTING. The quote is then looked up in the trace (`verify_quotes`) and in the
spans' uncut text, and the span the quote really comes from is recorded next to the one the
model named. A DIRECT verdict is demoted to WEAK (`demoted` says why) when its quote is not in the
run (support was asserted, not shown), or when the quote is only the claim's own assertion: the
agent that made the claim restating it in its own sentence, in the span where it made it. What a
step *shows* is evidence even inside an agent's own step: in Who&When every step is an action
(WebSurfer and the terminal are blamed in its labels), and their steps carry page text, file
contents and terminal output after an introducing line ("... the following text:", "Code
output:", a code fence); a quote from there stays DIRECT.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import regex as re

from localfa.methods.drift.ledger import Claim
from localfa.methods.drift.spans import Span, SpanView
from localfa.methods.drift.tracer import pick_step
from localfa.methods.evidence import fold, verify_quotes
from localfa.traces.model import normalize_agent

RISKY = frozenset({"WEAK", "MISSING", "CONFLICTING"})
WEAKNESS = {"CONFLICTING": 0, "MISSING": 1, "WEAK": 2, "DIRECT": 3}  # the weakest support first
# What introduces material a step shows (a page, a file, a terminal) rather than its agent's own words.
_SHOWS = re.compile(r":[ \t]*\r?\n|```|\boutput:|\bexitcode\b|\bOCR\b", re.I)


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
    demoted: str | None = None  # why a DIRECT verdict became WEAK

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
        if q in view.span_folded(sp):
            return sp.id
    return None


def shown_material(text: str, quote: str) -> bool:
    """Whether `quote` sits in `text` after something that introduces shown material (a page's
    text, a file, a terminal's output) or inside quotation marks: what the step shows, not what
    its agent asserts."""
    words = quote.split()
    if not words:
        return False
    m = re.search(r"\s+".join(map(re.escape, words)), text, flags=re.I)
    if m is None:
        return False
    before = text[: m.start()]
    return bool(_SHOWS.search(before)) or before.rstrip()[-1:] in {'"', "'", "\u201c", "\u2018"}


def own_assertion(view: SpanView, spans: list[Span], claim: Claim, quote: str) -> bool:
    """Whether `quote` occurs only in the words of the agent that made `claim`, inside the span that
    introduced it, as its own sentence (a tool result, an observation step, or page, file or
    terminal text the step shows there is evidence, not an assertion)."""
    q = fold(quote)
    if not q:
        return False
    trace = view.trace
    where = [i for i in range(view.n_steps) if q in view.folded(i)]
    if not where:
        return False
    intro = spans[claim.introduced]
    maker = normalize_agent(trace.steps[pick_step(view, intro, [claim.text])].agent)
    for i in where:
        step = trace.steps[i]
        if i not in intro.steps or step.kind != "action" or normalize_agent(step.agent) != maker:
            return False
        if q in fold(step.observation or "") or q not in fold(step.content or "") or shown_material(step.content or "", quote):
            return False
    return True


def check_from_answer(claim: Claim, answer: dict[str, Any], view: SpanView, spans: list[Span], verify: bool = True) -> SupportCheck:
    """A SupportCheck from one `drift_support` answer, with the quote verified against the trace."""
    quote = answer["evidence"].strip()
    verbatim = bool(quote) and verify_quotes(view.trace, [quote])[0]
    status = answer["status"]
    demoted = None
    if verify and status == "DIRECT" and not verbatim:
        demoted = "the quoted evidence is not in the run"
    elif status == "DIRECT" and own_assertion(view, spans, claim, quote):
        demoted = "the only evidence is the claim's own assertion (its agent's words where it was made)"
    if demoted:
        status = "WEAK"
    return SupportCheck(
        claim=claim.id,
        status=status,
        model_status=answer["status"],
        evidence=quote,
        span=answer["span"],
        evidence_verbatim=verbatim,
        evidence_span=locate_quote(view, spans, quote, answer["span"]) if verbatim else None,
        reason=answer["reason"].strip(),
        demoted=demoted,
    )


def weakest_claim(checked: list[Claim], checks: list[SupportCheck]) -> Claim | None:
    """The checked claim whose support came out weakest (CONFLICTING, then MISSING, then WEAK,
    then DIRECT); ties go to the earliest introduced (the first error, not the last)."""
    status = {k.claim: k.status for k in checks}
    ranked = [c for c in checked if c.id in status]
    if not ranked:
        return None
    return min(ranked, key=lambda c: (WEAKNESS[status[c.id]], c.introduced))
