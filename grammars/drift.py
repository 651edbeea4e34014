"""DRIFT's grammars: span segmentation, the claim ledger, support checks, the dependency tracer.

Built per trace (and per chunk), each in time linear in the spans and claims it names:

- segmentation answers the step ids where a new span starts, as a regex of optional, increasing
  ids beginning with the chunk's first step, so the spans are contiguous, ordered and cover it;
- a new ledger claim names its introduced span, its consequential span and its uses as bounded
  integers (any span up to the chunk's last: a claim recognised late keeps its true introduction);
  the ordering introduced <= consequential <= every use is checked after parsing
  (`ledger_order_errors`), and the method asks once more when it is broken;
- an update names an existing claim id and uses inside the current chunk;
- a support answer gives its evidence, the span and the reason before the status it decides;
- the tracer writes its reason before its verdict, and marks only spans at or after the claim's
  introduced span, the span that introduces the claim first among them.

Every free string is bounded, and `*_max_tokens` size the answer for the longest text admitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localfa.engine.grammar import Grammar

CLAIM_TYPES: tuple[str, ...] = ("entity", "constraint", "computation", "decision", "other")
CLAIM_STATUSES: tuple[str, ...] = ("exploratory", "tentative", "consequential", "finalized")
SUPPORT_STATUSES: tuple[str, ...] = ("DIRECT", "WEAK", "MISSING", "CONFLICTING")
MARK_ROLES: tuple[str, ...] = ("introduce", "commit", "reuse", "amplify", "finalize")
CHARS_PER_ANSWER_TOKEN = 2  # JSON answers: digits, quotes and braces tokenise densely, prose at ~4 characters a token


@dataclass(frozen=True)
class DriftLimits:
    """Bounds on every list and string the model writes; the prompts state each of them.

    Defaults are sized for a strong model (8B-70B, 32k window): a few decision-critical claims a
    chunk (the authors' "prefer 3-5", issue 51), and a wrong fact carried through ten spans can be marked in
    all ten with every role it plays there. The embedded model's small values live in its
    profile (serving/profiles/cpu-embedded.toml, ``[methods.drift]``).
    """

    claim_chars: int = 160
    claims_per_chunk: int = 5
    updates_per_chunk: int = 20
    uses_per_claim: int = 12
    evidence_chars: int = 300
    reason_chars: int = 240
    marks_per_claim: int = 40

    def __post_init__(self) -> None:
        for name in ("claim_chars", "evidence_chars", "reason_chars"):
            if not 20 <= getattr(self, name) <= 2000:
                raise ValueError(f"drift: {name} must be in 20..2000")
        for name in ("claims_per_chunk", "uses_per_claim"):
            if not 1 <= getattr(self, name) <= 64:
                raise ValueError(f"drift: {name} must be in 1..64")
        if not 1 <= self.marks_per_claim <= 128:
            raise ValueError("drift: marks_per_claim must be in 1..128")
        if not 0 <= self.updates_per_chunk <= 64:
            raise ValueError("drift: updates_per_chunk must be in 0..64")


def _text(max_chars: int, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


def _int(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _max_tokens(chars: int) -> int:
    """Room for an answer of at most `chars` characters, in tokens, plus slack. A token holds
    about two characters of a compact JSON answer at worst (reserving one token per character
    starved the prompt of a third of the window on a 32k window)."""
    return -(-chars // CHARS_PER_ANSWER_TOKEN) + 32


# ---- segmentation --------------------------------------------------------------------------------


def segment_grammar(lo: int, hi: int) -> Grammar:
    """Span starts for steps lo..hi: ``lo`` then any increasing subset of lo+1..hi, comma separated."""
    if not 0 <= lo <= hi:
        raise ValueError(f"segment_grammar: bad step range {lo}..{hi}")
    pattern = str(lo) + "".join(f"(,{i})?" for i in range(lo + 1, hi + 1))
    return Grammar.regex(pattern, name=f"drift_segment_{hi - lo + 1}")


def segment_max_tokens(lo: int, hi: int) -> int:
    return len(",".join(str(i) for i in range(lo, hi + 1))) + 8


def spans_from_starts(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Inclusive (first, last) step ranges from a segmentation answer over steps lo..hi."""
    starts = [int(x) for x in text.split(",")]
    if not starts or starts[0] != lo or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] > hi:
        raise ValueError(f"segmentation {text!r} is not an increasing list starting at {lo} within {hi}")
    ends = [s - 1 for s in starts[1:]] + [hi]
    return list(zip(starts, ends))


# ---- the claim ledger ---------------------------------------------------------------------------


def ledger_schema(lo: int, hi: int, existing: list[str], limits: DriftLimits) -> dict[str, Any]:
    """One chunk's ledger answer: new claims placed in spans 0..hi, updates of `existing` ids.

    Constant size apart from the `existing` ids: span ids are bounded integers, and the ordering
    between them is checked after parsing (`ledger_order_errors`).
    """
    claim = {
        "type": "object",
        "properties": {
            "text": _text(limits.claim_chars, 5),
            "type": {"enum": list(CLAIM_TYPES)},
            "status": {"enum": list(CLAIM_STATUSES)},
            "introduced": _int(0, hi),
            "consequential": _int(0, hi),
            "uses": {"type": "array", "items": _int(0, hi), "maxItems": limits.uses_per_claim},
        },
        "required": ["text", "type", "status", "introduced", "consequential", "uses"],
    }
    props: dict[str, Any] = {"new_claims": {"type": "array", "items": claim, "maxItems": limits.claims_per_chunk}}
    required = ["new_claims"]
    if existing and limits.updates_per_chunk:
        update = {
            "type": "object",
            "properties": {
                "claim": {"enum": list(existing)},
                "status": {"enum": list(CLAIM_STATUSES)},
                "uses": {"type": "array", "items": _int(lo, hi), "minItems": 1, "maxItems": limits.uses_per_claim},
            },
            "required": ["claim", "status", "uses"],
        }
        props["updates"] = {"type": "array", "items": update, "maxItems": limits.updates_per_chunk}
        required.append("updates")
    return {"title": "drift_ledger", "type": "object", "properties": props, "required": required}


def ledger_grammar(lo: int, hi: int, existing: list[str], limits: DriftLimits) -> Grammar:
    return Grammar.json(ledger_schema(lo, hi, existing, limits), name="drift_ledger")


def ledger_order_errors(answer: dict[str, Any]) -> list[str]:
    """What breaks introduced <= consequential <= every use in a ledger answer (empty: none)."""
    errors = []
    for k, c in enumerate(answer.get("new_claims") or []):
        i, j, uses = c["introduced"], c["consequential"], c["uses"]
        if j < i:
            errors.append(f"new claim {k + 1}: consequential span {j} is before its introduced span {i}")
        early = [u for u in uses if u < j]
        if early:
            errors.append(f"new claim {k + 1}: uses {early} are before its consequential span {j}")
    return errors


def ledger_max_tokens(hi: int, existing: list[str], limits: DriftLimits) -> int:
    digits = len(str(hi)) + 1
    longest_type = max(map(len, CLAIM_TYPES)) + max(map(len, CLAIM_STATUSES))
    claim = limits.claim_chars + longest_type + 90 + (limits.uses_per_claim + 2) * digits
    longest_id = max((len(x) for x in existing), default=0)
    update = 50 + longest_id + max(map(len, CLAIM_STATUSES)) + limits.uses_per_claim * digits
    n_updates = limits.updates_per_chunk if existing else 0
    return _max_tokens(40 + limits.claims_per_chunk * claim + n_updates * update)


# ---- support checks ------------------------------------------------------------------------------


def support_schema(n_spans: int, limits: DriftLimits) -> dict[str, Any]:
    """Evidence first (the quote and its span), then the reason, then the status it decides."""
    return {
        "title": "drift_support",
        "type": "object",
        "properties": {
            "evidence": _text(limits.evidence_chars, 0),
            "span": _int(0, max(0, n_spans - 1)),
            "reason": _text(limits.reason_chars),
            "status": {"enum": list(SUPPORT_STATUSES)},
        },
        "required": ["evidence", "span", "reason", "status"],
    }


def support_ledger_schema(ids: list[str], n_spans: int, limits: DriftLimits) -> dict[str, Any]:
    """One support call over the ledger (the authors' shape, issue 51): one check per claim id,
    in the order given, each evidence first, then the reason, then the status."""
    one = support_schema(n_spans, limits)
    check = {k: v for k, v in one.items() if k != "title"}
    return {"title": "drift_support_ledger", "type": "object", "properties": {cid: check for cid in ids}, "required": list(ids)}


def support_grammar(ids: list[str], n_spans: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(support_ledger_schema(ids, n_spans, limits), name="drift_support_ledger")


def support_max_tokens(n_spans: int, limits: DriftLimits, n_claims: int = 1) -> int:
    return _max_tokens(n_claims * (90 + limits.evidence_chars + limits.reason_chars + len(str(n_spans))))


# ---- dependency tracer ---------------------------------------------------------------------------


def _mark(first: int, last: int) -> dict[str, Any]:
    return {"type": "object", "properties": {"span": _int(first, last), "role": {"enum": list(MARK_ROLES)}}, "required": ["span", "role"]}


def tracer_claim_schema(first: int, n_spans: int, limits: DriftLimits) -> dict[str, Any]:
    """One risky claim: the reason first, then harmful or not, then the (span, role) marks (spans
    >= its introduction)."""
    return {
        "title": "drift_trace_claim",
        "type": "object",
        "properties": {
            "reason": _text(limits.reason_chars),
            "harmful": {"type": "boolean"},
            "marks": {"type": "array", "items": _mark(first, n_spans - 1), "maxItems": limits.marks_per_claim},
        },
        "required": ["reason", "harmful", "marks"],
    }


def tracer_claim_grammar(first: int, n_spans: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(tracer_claim_schema(first, n_spans, limits), name="drift_trace_claim")


def tracer_ledger_schema(claims: dict[str, int], n_spans: int, max_marks: int, limits: DriftLimits) -> dict[str, Any]:
    """Every risky claim at once: the reason first, then the harmful ids, then marks naming a claim
    id and a span at or after its introduction."""
    branches = [
        {
            "type": "object",
            "properties": {"claim": {"const": cid}, "span": _int(first, n_spans - 1), "role": {"enum": list(MARK_ROLES)}},
            "required": ["claim", "span", "role"],
        }
        for cid, first in claims.items()
    ]
    return {
        "title": "drift_trace_ledger",
        "type": "object",
        "properties": {
            "reason": _text(limits.reason_chars),
            "harmful": {"type": "array", "items": {"enum": list(claims)}, "maxItems": len(claims)},
            "marks": {"type": "array", "items": {"anyOf": branches}, "maxItems": max_marks},
        },
        "required": ["reason", "harmful", "marks"],
    }


def tracer_ledger_grammar(claims: dict[str, int], n_spans: int, max_marks: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(tracer_ledger_schema(claims, n_spans, max_marks, limits), name="drift_trace_ledger")


def tracer_max_tokens(n_spans: int, n_marks: int, reason_chars: int, n_claims: int = 1, id_chars: int = 0) -> int:
    """Room for the reason and `n_marks` marks (over `n_claims` claims whose ids are `id_chars`
    long, ledger mode)."""
    mark = 30 + len(str(n_spans)) + max(map(len, MARK_ROLES)) + (id_chars + 12 if id_chars else 0)
    return _max_tokens(60 + reason_chars + n_marks * mark + n_claims * (id_chars + 4))


# ---- confirmation ----------------------------------------------------------------------------------


def confirm_schema(first: int, limits: DriftLimits) -> dict[str, Any]:
    """The confirming call on the chosen first error span `first`: the reason first, then the
    earliest span where the run went wrong (`first` itself, or an earlier span)."""
    return {
        "title": "drift_confirm",
        "type": "object",
        "properties": {"reason": _text(limits.reason_chars), "earliest": _int(0, first)},
        "required": ["reason", "earliest"],
    }


def confirm_grammar(first: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(confirm_schema(first, limits), name="drift_confirm")


def confirm_max_tokens(first: int, limits: DriftLimits) -> int:
    return _max_tokens(40 + limits.reason_chars + len(str(first)))
