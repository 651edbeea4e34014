"""DRIFT's oracle policy (`localfa.oracle.policy`): what a careful auditor that knows the labelled
decisive step answers to each DRIFT prompt, and what its wrong answer looks like.

Everything is read from the prompt itself: span headers (``Span 3 (steps 4-5):``), the fenced
steps, the claims' headers (``Claim C2 (...; introduced in span 3, ...)``) and the ledger lines.
The claim that matters is the one the labelled step introduces; its text says which step it comes
from (``Step 7: ...``) so a later chunk can find it in the ledger carried forward.

- segment: a span starts where the acting agent changes, at the labelled step and right after it /
  every step its own span except that the labelled step joins the one before it.
- ledger (and its retry): the claims a careful reader records: a claim taken from the first agent
  step shown (harmless) and the wrong claim made at the labelled step (finalized, committed there,
  used by the later spans of the chunk); in later chunks, an update naming it with the spans that
  use it / the wrong claim placed one span late, or nothing recorded.
- support: the wrong claim is MISSING its support, any other claim DIRECT with a quote from its
  own span / the wrong claim marked DIRECT with its own words as the quote, others MISSING.
- tracer (per claim and over the ledger): the wrong claim is harmful, marked where it was made
  (commit) and in each later span that uses it (reuse) / the verdict flipped, marks one span late.
"""

from __future__ import annotations

import re
from typing import Any

from localfa.oracle.policy import Ask, Policy, PolicyError, Rule, clip, clip_to, max_length, node_ints, schema_field

_SPAN = re.compile(r"^Span (\d+) \(steps? (\d+)(?:-(\d+))?\):$", re.M)
_CLAIM = re.compile(r"^Claim (C\d+) \([^;\n]*; introduced in span (\d+)", re.M)
_LEDGER_LINE = re.compile(r"^(C\d+) \| .*? \| (.*)$", re.M)


def _spans(ask: Ask) -> dict[int, tuple[int, int]]:
    """Span id -> (first, last) step, for every span the prompt shows."""
    return {int(m.group(1)): (int(m.group(2)), int(m.group(3) or m.group(2))) for m in _SPAN.finditer(ask.prompt)}


def _span_of(spans: dict[int, tuple[int, int]], step: int) -> int | None:
    return next((sid for sid, (a, b) in spans.items() if a <= step <= b), None)


def _marker(ask: Ask) -> str:
    return f"Step {ask.mistake_step}:"


def _claim_text(ask: Ask, step: int, node: dict[str, Any], marker: str = "") -> str:
    words = " ".join(ask.trace.steps[step].content.split()[:24]) or f"the agent acted at step {step}"
    return clip_to(node, f"{marker or f'Step {step}:'} {words}")


def _harmless_step(ask: Ask, spans: dict[int, tuple[int, int]]) -> int | None:
    steps = ask.trace.steps
    for sid in sorted(spans):
        a, b = spans[sid]
        for i in range(a, b + 1):
            if i < ask.mistake_step and steps[i].kind == "action" and steps[i].content.strip() and steps[i].role != "user":
                return i
    return None


# ---- segmentation --------------------------------------------------------------------------------


def _segment_range(ask: Ask) -> tuple[int, int]:
    m = re.search(r"The steps above go from (\d+) to (\d+)", ask.prompt)
    if not m:
        raise PolicyError(f"request {ask.key!r}: no step range in the segmentation prompt")
    return int(m.group(1)), int(m.group(2))


def _segment(ask: Ask) -> str:
    lo, hi = _segment_range(ask)
    m, steps = ask.mistake_step, ask.trace.steps
    starts = [lo] + [i for i in range(lo + 1, hi + 1) if i in (m, m + 1) or steps[i].agent != steps[i - 1].agent]
    return ",".join(map(str, starts))


def _segment_wrong(ask: Ask) -> str:
    lo, hi = _segment_range(ask)
    return ",".join(str(i) for i in range(lo, hi + 1) if i == lo or i != ask.mistake_step)


# ---- the Claim Keeper ----------------------------------------------------------------------------


def _claim_limits(ask: Ask) -> tuple[int, int, dict[str, Any]]:
    """(claims allowed, uses allowed per claim, the claim text's schema)."""
    new = schema_field(ask.grammar, "new_claims")
    item = new["items"]["properties"]
    return int(new.get("maxItems", 1)), int(item["uses"].get("maxItems", 1)), item["text"]


def _new_claim(text: str, typ: str, status: str, at: int, uses: list[int]) -> dict[str, Any]:
    return {"text": text, "type": typ, "status": status, "introduced": at, "consequential": at, "uses": uses}


def _highest_span(ask: Ask) -> tuple[int, int]:
    """(lowest, highest) span id a new claim may name."""
    ids = node_ints(schema_field(ask.grammar, "new_claims")["items"]["properties"]["introduced"]) or [0]
    return ids[0], ids[-1]


def _ledger(ask: Ask, late: int = 0) -> dict[str, Any]:
    spans = _spans(ask)
    _, hi = _highest_span(ask)
    n_claims, n_uses, text_node = _claim_limits(ask)
    answer: dict[str, Any] = {"new_claims": []}
    existing = {cid: text for cid, text in _LEDGER_LINE.findall(ask.prompt)}
    wrong_id = next((cid for cid, text in existing.items() if text.startswith(_marker(ask))), None)
    made = _span_of(spans, ask.mistake_step)
    later = [sid for sid in sorted(spans) if made is None or sid > made]
    if made is not None and wrong_id is None:
        at = min(hi, made + late)
        answer["new_claims"].append(
            _new_claim(
                _claim_text(ask, ask.mistake_step, text_node, _marker(ask)),
                "entity",
                "finalized",
                at,
                [s for s in later if s >= at][:n_uses],
            )
        )
    harmless = _harmless_step(ask, spans) if not existing else None
    where = _span_of(spans, harmless) if harmless is not None else None
    if harmless is not None and where is not None and len(answer["new_claims"]) < n_claims:
        answer["new_claims"].insert(0, _new_claim(_claim_text(ask, harmless, text_node), "other", "consequential", where, []))
    if "updates" in ask.grammar.spec.get("properties", {}):
        answer["updates"] = []
        if wrong_id is not None and later and not late:
            answer["updates"].append({"claim": wrong_id, "status": "finalized", "uses": later[:n_uses]})
    return answer


def _ledger_wrong(ask: Ask) -> dict[str, Any]:
    if ask.rng.random() < 0.5:
        return {"new_claims": [], **({"updates": []} if "updates" in ask.grammar.spec.get("properties", {}) else {})}
    return _ledger(ask, late=1)


# ---- the Support Seeker --------------------------------------------------------------------------


def _the_claim(ask: Ask) -> tuple[str, int]:
    m = _CLAIM.search(ask.prompt)
    if not m:
        raise PolicyError(f"request {ask.key!r}: no claim header in the prompt")
    return m.group(1), int(m.group(2))


def _is_wrong_claim(ask: Ask, introduced: int) -> bool:
    a, b = _spans(ask).get(introduced, (-1, -1))
    return a <= ask.mistake_step <= b


def _quote(ask: Ask, span: int) -> str:
    a, b = _spans(ask).get(span, (0, 0))
    for i in range(a, b + 1):
        words = ask.trace.steps[i].content.split()
        if words:
            return clip(" ".join(words[:12]), max_length(ask.grammar, "evidence"))
    return ""


def _support(ask: Ask, direct: bool | None = None) -> dict[str, Any]:
    _, introduced = _the_claim(ask)
    supported = not _is_wrong_claim(ask, introduced) if direct is None else direct
    limit = max_length(ask.grammar, "reason")
    quote = _quote(ask, introduced) if supported else ""
    return {
        "evidence": quote,
        "span": introduced,
        "reason": clip("The run shows it." if supported else "Nothing in the run establishes this claim.", limit),
        "status": "DIRECT" if supported and quote else "MISSING",
    }


def _support_wrong(ask: Ask) -> dict[str, Any]:
    _, introduced = _the_claim(ask)
    return _support(ask, direct=_is_wrong_claim(ask, introduced))


# ---- the Dependency Tracer -----------------------------------------------------------------------


def _marks_for(ask: Ask, introduced: int, lo: int, hi: int, cap: int, shift: int = 0) -> list[dict[str, Any]]:
    spans = _spans(ask)
    made = _span_of(spans, ask.mistake_step)
    if made is None:
        return []
    first = min(hi, max(lo, made + shift))
    out = [{"span": first, "role": "commit"}]
    out += [{"span": s, "role": "reuse"} for s in sorted(spans) if first < s <= hi][: max(0, cap - 1)]
    return out


def _tracer_claim(ask: Ask, flip: bool = False, shift: int = 0) -> dict[str, Any]:
    _, introduced = _the_claim(ask)
    harmful = _is_wrong_claim(ask, introduced) != flip
    marks = schema_field(ask.grammar, "marks")
    spans = node_ints(marks["items"]["properties"]["span"])
    lo, hi = spans[0], spans[-1]
    return {"harmful": harmful, "marks": _marks_for(ask, introduced, lo, hi, int(marks.get("maxItems", 1)), shift) if harmful else []}


def _tracer_claim_wrong(ask: Ask) -> dict[str, Any]:
    return _tracer_claim(ask, flip=ask.rng.random() < 0.5, shift=1)


def _tracer_ledger(ask: Ask, flip: bool = False, shift: int = 0) -> dict[str, Any]:
    claims = [(cid, int(sp)) for cid, sp in _CLAIM.findall(ask.prompt)]
    harmful = [cid for cid, sp in claims if _is_wrong_claim(ask, sp) != flip]
    cap = int(schema_field(ask.grammar, "marks").get("maxItems", 1))
    marks: list[dict[str, Any]] = []
    hi = max(_spans(ask), default=0)
    for cid, sp in claims:
        if cid in harmful:
            marks += [{"claim": cid, **m} for m in _marks_for(ask, sp, sp, hi, cap, shift)]
    return {"harmful": harmful, "marks": marks[:cap]}


def _tracer_ledger_wrong(ask: Ask) -> dict[str, Any]:
    return _tracer_ledger(ask, flip=ask.rng.random() < 0.5, shift=1)


# ---- where a labelled step dropped out -----------------------------------------------------------


def dropped_at(details: dict[str, Any], step: int) -> str:
    """The DRIFT stage that lost the labelled step, read from a record's details."""
    spans = details.get("spans") or []
    sid = next((k for k, (a, b) in enumerate(spans) if a <= step <= b), None)
    if sid is None:
        return f"step {step} is outside the spans read (max_steps?)"
    ledger = details.get("ledger") or []
    if not any(c.get("introduced") == sid for c in ledger):
        return f"ledger: no claim introduced in span {sid} (chunks {[c.get('spans') for c in details.get('ledger_chunks') or []]})"
    if details.get("unchecked_claims"):
        return f"support: claims left unchecked by max_checked_claims: {details['unchecked_claims']}"
    if details.get("first_error_span") != sid:
        return f"tracer: first error span {details.get('first_error_span')}, labelled span {sid} (marks {details.get('tracer', {}).get('marks')})"
    return f"answer: span {sid} holds step {step}, but another step of it was answered"


POLICY = Policy(
    [
        Rule(
            "segment",
            r"drift/segment/\d+",
            _segment,
            _segment_wrong,
            "spans split where the agent changes and around the labelled step",
            "the labelled step merged into the span before it",
        ),
        Rule(
            "ledger",
            r"drift/ledger/\d+(/retry\d*)?",
            _ledger,
            _ledger_wrong,
            "a harmless claim from the first agent step, the wrong claim made at the labelled step (finalized, used by later spans); later chunks update it",
            "nothing recorded, or the wrong claim placed one span late",
        ),
        Rule(
            "support",
            r"drift/support/C\d+",
            _support,
            _support_wrong,
            "the wrong claim MISSING, others DIRECT with a quote from their span",
            "the wrong claim DIRECT on its own words, others MISSING",
        ),
        Rule(
            "tracer",
            r"drift/tracer/C\d+",
            _tracer_claim,
            _tracer_claim_wrong,
            "the wrong claim harmful: commit where made, reuse after",
            "the verdict flipped or the marks one span late",
        ),
        Rule(
            "tracer-ledger",
            r"drift/tracer/ledger",
            _tracer_ledger,
            _tracer_ledger_wrong,
            "as per claim, over every risky claim at once",
            "as per claim",
        ),
    ],
    dropped_at=dropped_at,
)
