"""DRIFT's grammars: span segmentation, the claim ledger, support checks, the dependency tracer.

Built per trace (and per chunk) so that the orderings the method relies on hold by construction:

- segmentation answers the step ids where a new span starts, as a regex of optional, increasing
  ids beginning with the chunk's first step, so the spans are contiguous, ordered and cover it;
- a new ledger claim names its introduced span i and consequential span j with i <= j, and every
  use u >= j, all among the chunk's real span ids (one small branch per (i, j) pair);
- an update names an existing claim id and uses inside the current chunk (after every earlier
  span, so the order holds for it too);
- the tracer marks only spans at or after the claim's introduced span.

Every free string is bounded, and `*_max_tokens` size the answer for the longest text admitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localfa.engine.grammar import Grammar

CLAIM_TYPES: tuple[str, ...] = ("entity", "constraint", "computation", "other")
CLAIM_STATUSES: tuple[str, ...] = ("exploratory", "tentative", "consequential", "finalized")
SUPPORT_STATUSES: tuple[str, ...] = ("DIRECT", "WEAK", "MISSING", "CONFLICTING")
MARK_ROLES: tuple[str, ...] = ("commit", "reuse", "amplify", "finalize")


@dataclass(frozen=True)
class DriftLimits:
    """Bounds on every list and string the model writes; the prompts state each of them."""

    claim_chars: int = 120
    claims_per_chunk: int = 3
    updates_per_chunk: int = 3
    uses_per_claim: int = 4
    evidence_chars: int = 200
    reason_chars: int = 160
    marks_per_claim: int = 4

    def __post_init__(self) -> None:
        for name in ("claim_chars", "evidence_chars", "reason_chars"):
            if not 20 <= getattr(self, name) <= 2000:
                raise ValueError(f"drift: {name} must be in 20..2000")
        for name in ("claims_per_chunk", "uses_per_claim", "marks_per_claim"):
            if not 1 <= getattr(self, name) <= 16:
                raise ValueError(f"drift: {name} must be in 1..16")
        if not 0 <= self.updates_per_chunk <= 16:
            raise ValueError("drift: updates_per_chunk must be in 0..16")


def _text(max_chars: int, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


def _int(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _max_tokens(chars: int) -> int:
    """Room for an answer of at most `chars` characters (a token holds at least one) plus slack."""
    return chars + 32


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


def _placement(lo: int, hi: int, uses: int) -> dict[str, Any]:
    """introduced i <= consequential j <= every use, all within lo..hi: one branch per (i, j)."""
    branches = []
    for i in range(lo, hi + 1):
        for j in range(i, hi + 1):
            branches.append(
                {
                    "type": "object",
                    "properties": {
                        "introduced": {"const": i},
                        "consequential": {"const": j},
                        "uses": {"type": "array", "items": _int(j, hi), "maxItems": uses},
                    },
                    "required": ["introduced", "consequential", "uses"],
                }
            )
    return {"anyOf": branches}


def ledger_schema(lo: int, hi: int, existing: list[str], limits: DriftLimits) -> dict[str, Any]:
    """One chunk's ledger answer: new claims placed in spans lo..hi, updates of `existing` ids."""
    claim = {
        "type": "object",
        "properties": {
            "text": _text(limits.claim_chars, 5),
            "type": {"enum": list(CLAIM_TYPES)},
            "status": {"enum": list(CLAIM_STATUSES)},
            "at": _placement(lo, hi, limits.uses_per_claim),
        },
        "required": ["text", "type", "status", "at"],
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


def ledger_max_tokens(hi: int, existing: list[str], limits: DriftLimits) -> int:
    digits = len(str(hi)) + 1
    longest_type = max(map(len, CLAIM_TYPES)) + max(map(len, CLAIM_STATUSES))
    claim = limits.claim_chars + longest_type + 80 + (limits.uses_per_claim + 2) * digits
    longest_id = max((len(x) for x in existing), default=0)
    update = 50 + longest_id + max(map(len, CLAIM_STATUSES)) + limits.uses_per_claim * digits
    n_updates = limits.updates_per_chunk if existing else 0
    return _max_tokens(40 + limits.claims_per_chunk * claim + n_updates * update)


# ---- support checks ------------------------------------------------------------------------------


def support_schema(n_spans: int, limits: DriftLimits) -> dict[str, Any]:
    return {
        "title": "drift_support",
        "type": "object",
        "properties": {
            "status": {"enum": list(SUPPORT_STATUSES)},
            "evidence": _text(limits.evidence_chars, 0),
            "span": _int(0, max(0, n_spans - 1)),
            "reason": _text(limits.reason_chars),
        },
        "required": ["status", "evidence", "span", "reason"],
    }


def support_grammar(n_spans: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(support_schema(n_spans, limits), name="drift_support")


def support_max_tokens(n_spans: int, limits: DriftLimits) -> int:
    return _max_tokens(80 + limits.evidence_chars + limits.reason_chars + len(str(n_spans)))


# ---- dependency tracer ---------------------------------------------------------------------------


def _mark(first: int, last: int) -> dict[str, Any]:
    return {"type": "object", "properties": {"span": _int(first, last), "role": {"enum": list(MARK_ROLES)}}, "required": ["span", "role"]}


def tracer_claim_schema(first: int, n_spans: int, limits: DriftLimits) -> dict[str, Any]:
    """One risky claim: harmful or not, and the spans (>= its introduced span) that carry it."""
    return {
        "title": "drift_trace_claim",
        "type": "object",
        "properties": {
            "harmful": {"type": "boolean"},
            "marks": {"type": "array", "items": _mark(first, n_spans - 1), "maxItems": limits.marks_per_claim},
        },
        "required": ["harmful", "marks"],
    }


def tracer_claim_grammar(first: int, n_spans: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(tracer_claim_schema(first, n_spans, limits), name="drift_trace_claim")


def tracer_ledger_schema(claims: dict[str, int], n_spans: int, limits: DriftLimits) -> dict[str, Any]:
    """Every risky claim at once: marks name a claim id and a span at or after its introduction."""
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
            "harmful": {"type": "array", "items": {"enum": list(claims)}, "maxItems": len(claims)},
            "marks": {"type": "array", "items": {"anyOf": branches}, "maxItems": limits.marks_per_claim * len(claims)},
        },
        "required": ["harmful", "marks"],
    }


def tracer_ledger_grammar(claims: dict[str, int], n_spans: int, limits: DriftLimits) -> Grammar:
    return Grammar.json(tracer_ledger_schema(claims, n_spans, limits), name="drift_trace_ledger")


def tracer_max_tokens(n_spans: int, limits: DriftLimits, n_claims: int = 1, id_chars: int = 0) -> int:
    mark = 30 + len(str(n_spans)) + max(map(len, MARK_ROLES)) + (id_chars + 12 if id_chars else 0)
    return _max_tokens(40 + n_claims * (limits.marks_per_claim * mark + id_chars + 4))
