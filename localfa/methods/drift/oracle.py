"""DRIFT's oracle policy (`localfa.oracle.policy`): what a careful auditor answers to each DRIFT
prompt from that prompt and the fault's words alone, and its plausible wrong answer.

It reads only the prompt: span headers (``Span 3 (steps 4-5):``), the step and passage blocks
(`Ask.shown_steps`), the agent headers, claim headers and texts, ledger lines. The fault is
recognised only by its words in a shown block (`Ask.fault_id`); a claim is the fault's where its
text quotes them (`Ask.quotes_fault`). A run cut so that the fault's words are not shown shows no
fault, and nothing here knows where the label puts it.

- Segmentation: a span starts where the agent the prompt shows changes.
- Claim Keeper: the recognised fault's claim, worded by the verbatim piece of the shown step that
  carries its words (`Ask.quote_of_fault`), introduced at the span showing it, committed (the
  run went on from it); then, in the order shown, one claim per other shown step (its first words
  no earlier shown step states), committed where a later shown span shares its key terms, up to
  the grammar's count. Later chunks update the entries their spans use.
- Support Seeker: judges the evidence the prompt shows. A claim quoting the fault is MISSING
  where the prompt carries the fault (only the step that makes it says so); any other claim is
  DIRECT on another shown step that corroborates it, or on the page, file or terminal text its
  own step shows, else MISSING (asserted, not shown).
- Dependency Tracer: a claim is harmful only where its words quote the fault and the prompt shows
  the fault; ``introduce`` at the span showing the fault's words, ``reuse`` at later shown spans
  sharing its key terms.
- Confirmation: the earliest span is the one showing the fault's words, where the prompt shows
  it at or before the chosen first error; else the chosen span.

Nothing here places the no-error fallback: the method answers the weakest-supported claim's
introduction, which is the fault only where the support verdicts say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from localfa.methods.fencing import fenced_blocks
from localfa.oracle.policy import Ask, Policy, PolicyError, Rule, clip, clip_to, max_length, node_ints, schema_field

_SPAN = re.compile(r"^Span (\d+) \(steps? (\d+)(?:-(\d+))?\):$", re.M)
_CLAIM = re.compile(r"^Claim (C\d+) \([^;\n]*; introduced in span (\d+)", re.M)
_LEDGER_LINE = re.compile(r"^(C\d+) \| [^|,]*, (\w+) \| [^|]* \| (.*)$", re.M)
_RANGE = re.compile(r"The steps above go from (\d+) to (\d+)")
_CUT = re.compile(r"\[\.\.\. \d+ chars cut \.\.\.\]")
_MATERIAL = re.compile(r":[ \t]*\r?\n|```|\boutput:|\bexitcode\b|\bOCR\b", re.I)
_QUOTES = frozenset("\"'`\u201c\u2018")
_KEY = re.compile(r"[^\W_]{6,}|\d[\d,.]*\d|\d")
PHRASE_WORDS = 10  # words in a claim worded from a step (what it newly says)
PHRASE_CHARS = 120  # at most this long, inside every claim_chars bound
SCAN_WINDOWS = 400  # windows tried per step for words no earlier step states
QUOTE_WORDS = 12  # words of a corroborating passage quoted as evidence
SHARED_KEYS = 3  # key terms a later step must share with a claim to use it
CORROBORATION = 0.6  # share of a claim's key terms another step must hold to corroborate it


def fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def keys(text: str) -> frozenset[str]:
    """Key terms: long words and numbers, folded (what a later step must share to use a claim)."""
    return frozenset(k.casefold() for k in _KEY.findall(text))


def states(folded: str, said: str) -> bool:
    """Whether `folded` text states `said` (both folded): holds it somewhere not opened by a quote
    mark (a plan quoting an instruction mentions it; the step that issues it states it)."""
    at = folded.find(said) if said else -1
    while at != -1:
        if folded[:at].rstrip()[-1:] not in _QUOTES:
            return True
        at = folded.find(said, at + 1)
    return False


def _window(words: list[str], k: int) -> str:
    out: list[str] = []
    for w in words[k : k + PHRASE_WORDS]:
        if out and len(" ".join([*out, w])) > PHRASE_CHARS:
            break
        out.append(w[:PHRASE_CHARS])
    return " ".join(out)


def first_new_words(text: str, earlier: list[str]) -> str:
    """The first window of `text` (never across a cut marker) that no text of `earlier` (folded)
    states; the first window when every one repeats earlier statements."""
    first = ""
    for piece in _CUT.split(text):
        words = piece.split()
        for k in range(min(len(words), SCAN_WINDOWS)):
            cand = _window(words, k)
            first = first or cand
            quoted = k > 0 and words[k - 1][-1:] in _QUOTES  # mentioned here, not stated
            if cand and not quoted and not any(states(t, fold(cand)) for t in earlier):
                return cand
            if k + PHRASE_WORDS >= len(words):
                break
    return first


# ---- what a prompt shows -------------------------------------------------------------------------


@dataclass
class Shown:
    """What one request shows, read once: its spans (id -> first, last step), per shown step the
    text it shows (its block, then its passages), and the step the fault's words are shown at."""

    spans: dict[int, tuple[int, int]]
    text: dict[int, str]
    fault: int | None
    folded: dict[int, str] = field(default_factory=dict)
    _keys: dict[int, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.folded = {i: fold(t) for i, t in self.text.items()}
        self.order = sorted(self.text)

    @classmethod
    def of(cls, ask: Ask) -> "Shown":
        cached = ask.__dict__.get("_drift_shown")
        if cached is None:
            spans = {int(m.group(1)): (int(m.group(2)), int(m.group(3) or m.group(2))) for m in _SPAN.finditer(ask.prompt)}
            text = ask.shown_steps()
            cached = ask.__dict__["_drift_shown"] = cls(spans, text, ask.fault_id(text) if text else None)
        return cached

    def keys(self, i: int) -> frozenset[str]:
        if i not in self._keys:
            self._keys[i] = keys(self.text.get(i, ""))
        return self._keys[i]

    def span_of(self, step: int) -> int | None:
        return next((sid for sid, (a, b) in self.spans.items() if a <= step <= b), None)

    def first_holding(self, text: str) -> int | None:
        """The first shown step that states `text` (else the first that mentions it)."""
        said = fold(text)
        if not said:
            return None
        stated = next((i for i in self.order if states(self.folded[i], said)), None)
        return stated if stated is not None else next((i for i in self.order if said in self.folded[i]), None)

    def users(self, text: str, after: int) -> list[int]:
        """Shown spans after `after` with a step sharing the claim's key terms (they use it)."""
        want = keys(text)
        need = min(SHARED_KEYS, max(1, len(want)))
        return [
            sid
            for sid in sorted(self.spans)
            if sid > after and any(len(want & self.keys(i)) >= need for i in range(self.spans[sid][0], self.spans[sid][1] + 1))
        ]

    def fault_span(self) -> int | None:
        return self.span_of(self.fault) if self.fault is not None else None


def _is_fault_claim(ask: Ask, text: str) -> bool:
    """The claim is the fault's: its words quote the fault, and the prompt shows the fault."""
    return Shown.of(ask).fault is not None and ask.quotes_fault(text)


def _claim_of(ask: Ask) -> tuple[str, int, str]:
    """(id, introduced span, text) of the claim a support or per-claim tracer prompt shows."""
    m = _CLAIM.search(ask.prompt)
    if not m:
        raise PolicyError(f"request {ask.key!r}: no claim header in the prompt")
    return m.group(1), int(m.group(2)), _claim_text(ask, m.group(1))


def _claim_text(ask: Ask, cid: str) -> str:
    return next((body for label, body in fenced_blocks(ask.prompt) if label == f"CLAIM {cid}"), "")


def _wrong_span(ask: Ask, pool: list[int], honest: int) -> int:
    """A wrong span among `pool`: the error model's wrong step among the steps they hold, as a span."""
    shown = Shown.of(ask)
    steps = [i for s in pool for i in range(shown.spans[s][0], shown.spans[s][1] + 1)] if shown.spans else list(pool)
    honest_steps = range(shown.spans[honest][0], shown.spans[honest][1] + 1) if honest in shown.spans else [honest]
    step = ask.wrong_step([i for i in steps if i not in honest_steps] or steps, honest=honest_steps[0])
    at = shown.span_of(step)
    return at if at is not None and at in pool else honest


# ---- segmentation --------------------------------------------------------------------------------


def _segment_range(ask: Ask) -> tuple[int, int]:
    m = _RANGE.search(ask.prompt)
    if not m:
        raise PolicyError(f"request {ask.key!r}: no step range in the segmentation prompt")
    return int(m.group(1)), int(m.group(2))


def _segment(ask: Ask) -> str:
    """A span starts where the agent the prompt shows changes."""
    lo, hi = _segment_range(ask)
    agents = ask.agents(ask.prompt)
    starts = [lo] + [i for i in range(lo + 1, hi + 1) if agents.get(i) != agents.get(i - 1)]
    return ",".join(map(str, starts))


def _segment_wrong(ask: Ask) -> str:
    """Two spans merged: one start (the fault's step where the prompt shows it) dropped."""
    lo, _ = _segment_range(ask)
    starts = [int(x) for x in _segment(ask).split(",")]
    fault = Shown.of(ask).fault
    drop = fault if fault in starts[1:] else (ask.rng.choice(starts[1:]) if len(starts) > 1 else None)
    return ",".join(str(i) for i in starts if i != drop or i == lo)


# ---- the Claim Keeper ----------------------------------------------------------------------------


def _ledger(ask: Ask, late: bool = False) -> dict[str, Any]:
    shown = Shown.of(ask)
    new_node = schema_field(ask.grammar, "new_claims")
    item = new_node["items"]["properties"]
    n_claims, n_uses = int(new_node.get("maxItems", 1)), int(item["uses"].get("maxItems", 1))
    hi = node_ints(item["introduced"])[-1]
    existing = {cid: (status, text) for cid, status, text in _LEDGER_LINE.findall(ask.prompt)}
    recorded = {fold(text) for _, text in existing.values()}
    cap = len(clip_to(item["text"], " " * 4 * PHRASE_CHARS))  # the claim text's bound (clip_to reads it)
    claims: list[dict[str, Any]] = []

    def record(text: str, at: int | None, committed: bool) -> None:
        text = clip_to(item["text"], " ".join(text.split()))
        if at is None or at > hi or len(text) < int(item["text"].get("minLength", 1)) or fold(text) in recorded:
            return
        uses = [u for u in shown.users(text, at) if u <= hi][:n_uses]
        status = "consequential" if committed or uses else "tentative"
        claims.append(
            {"text": text, "type": "other", "status": status, "introduced": at, "consequential": uses[0] if uses else at, "uses": uses}
        )
        recorded.add(fold(text))

    fault_at = shown.fault_span()
    if fault_at is not None and shown.fault is not None:  # the recognised error: the run went on from it
        if late:
            fault_at = _wrong_span(ask, [s for s in shown.spans if s <= hi], fault_at)
        record(ask.quote_of_fault(shown.text[shown.fault], cap), fault_at, committed=True)
    for i in shown.order:
        if len(claims) >= n_claims:
            break
        if i == shown.fault:
            continue
        text = clip(first_new_words(shown.text[i], [shown.folded[j] for j in shown.order if j < i]), PHRASE_CHARS)
        where = shown.first_holding(text)
        record(text, shown.span_of(where if where is not None else i), committed=False)
    claims = sorted(claims[:n_claims], key=lambda c: c["introduced"])
    answer: dict[str, Any] = {"new_claims": claims}
    if "updates" in ask.grammar.spec.get("properties", {}):
        update_node = schema_field(ask.grammar, "updates")
        answer["updates"] = []
        for cid, (status, text) in existing.items():
            uses = [u for u in shown.users(text, -1) if u <= hi][:n_uses]
            if uses and len(answer["updates"]) < int(update_node.get("maxItems", 0)):
                answer["updates"].append({"claim": cid, "status": status, "uses": uses})
    return answer


def _ledger_wrong(ask: Ask) -> dict[str, Any]:
    """Nothing recorded, or the fault's claim introduced at another span."""
    if ask.rng.random() < 0.5:
        return {"new_claims": [], **({"updates": []} if "updates" in ask.grammar.spec.get("properties", {}) else {})}
    return _ledger(ask, late=True)


# ---- the Support Seeker --------------------------------------------------------------------------


def _quote_around(text: str, want: frozenset[str]) -> str:
    """Up to `QUOTE_WORDS` verbatim words of `text` (one uncut piece) from its first key term."""
    for piece in _CUT.split(text):
        words = piece.split()
        at = next((k for k, w in enumerate(words) if keys(w) & want), None)
        if at is not None:
            return " ".join(words[at : at + QUOTE_WORDS])
    return ""


def _claims(ask: Ask) -> list[tuple[str, int, str]]:
    """(id, introduced span, text) of every claim the prompt shows, in order."""
    found = [(cid, int(sp), _claim_text(ask, cid)) for cid, sp in _CLAIM.findall(ask.prompt)]
    if not found:
        raise PolicyError(f"request {ask.key!r}: no claim header in the prompt")
    return found


def _check_node(ask: Ask) -> Any:
    """One claim's check in the support grammar (every claim's is the same)."""
    props = ask.grammar.spec.get("properties", {})
    return next(iter(props.values()))


def _support_one(ask: Ask, introduced: int, text: str) -> dict[str, Any]:
    shown = Shown.of(ask)
    fields = _check_node(ask)["properties"]
    reason_node, quote_node = fields["reason"], fields["evidence"]
    none = {"evidence": "", "span": introduced, "status": "MISSING"}
    if _is_fault_claim(ask, text):
        return {**none, "reason": clip_to(reason_node, "No step shown establishes it; only the step that states it says so.")}
    made = shown.first_holding(text)
    if made is None:
        return {**none, "reason": clip_to(reason_node, "The run as shown does not state this claim.")}
    want = keys(text)
    need = max(min(SHARED_KEYS, len(want)), CORROBORATION * len(want))
    others = [(len(want & shown.keys(j)), -j, j) for j in shown.order if j not in (made, shown.fault)]
    best = max((o for o in others if o[0] >= need), default=None)
    if best is not None:
        quote, at = clip_to(quote_node, _quote_around(shown.text[best[2]], want)), shown.span_of(best[2])
        if quote and at is not None:
            return {"evidence": quote, "span": at, "reason": clip_to(reason_node, "Another step shows the same."), "status": "DIRECT"}
    said = shown.folded[made].find(fold(text))
    at = shown.span_of(made)
    if said > 0 and at is not None and _MATERIAL.search(" ".join(shown.text[made].split())[:said]):
        reason = clip_to(reason_node, "The step shows it from a source.")
        return {"evidence": clip_to(quote_node, text), "span": at, "reason": reason, "status": "DIRECT"}
    return {**none, "reason": clip_to(reason_node, "The run asserts it; no source shown establishes it.")}


def _support(ask: Ask) -> dict[str, Any]:
    """Every claim the prompt shows, judged on everything the prompt shows (its packets)."""
    return {cid: _support_one(ask, introduced, text) for cid, introduced, text in _claims(ask)}


def _support_wrong(ask: Ask) -> dict[str, Any]:
    """The opposite verdicts: a claim judged MISSING called DIRECT on its own words (the fault's
    claim among them), a DIRECT one called MISSING."""
    fields = _check_node(ask)["properties"]
    reason_node, quote_node = fields["reason"], fields["evidence"]
    out = {}
    for cid, introduced, text in _claims(ask):
        if _support_one(ask, introduced, text)["status"] == "DIRECT":
            out[cid] = {"evidence": "", "span": introduced, "reason": clip_to(reason_node, "Nothing establishes it."), "status": "MISSING"}
        else:
            out[cid] = {
                "evidence": clip_to(quote_node, text),
                "span": introduced,
                "reason": clip_to(reason_node, "The run says so."),
                "status": "DIRECT",
            }
    return out


# ---- the Dependency Tracer -----------------------------------------------------------------------


def _marks(ask: Ask, text: str, lo: int, cap: int, shift: bool = False) -> list[dict[str, Any]]:
    """`introduce` at the span showing the fault's words (never before `lo`, the earliest span the
    grammar admits), `reuse` at later shown spans sharing the claim's key terms."""
    shown = Shown.of(ask)
    pool = sorted(s for s in shown.spans if s >= lo)
    made = shown.fault_span()
    if made is None or made < lo:
        made = pool[0] if pool else lo
    if shift and pool:
        made = _wrong_span(ask, pool, made)
    out = [{"span": made, "role": "introduce"}]
    out += [{"span": s, "role": "reuse"} for s in shown.users(text, made)][: max(0, cap - 1)]
    return out


def _tracer_claim(ask: Ask, flip: bool = False, shift: bool = False) -> dict[str, Any]:
    _, _, text = _claim_of(ask)
    harmful = _is_fault_claim(ask, text) != flip
    marks = schema_field(ask.grammar, "marks")
    lo = node_ints(marks["items"]["properties"]["span"])[0]
    reason = "It is the wrong claim the run went on to build on." if harmful else "Harmless: the run does not fail through it."
    found = _marks(ask, text, lo, int(marks.get("maxItems", 1)), shift) if harmful else []
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "harmful": harmful, "marks": found}


def _tracer_claim_wrong(ask: Ask) -> dict[str, Any]:
    """The verdict flipped, or the introduction placed at another span."""
    flip = ask.rng.random() < 0.5
    return _tracer_claim(ask, flip=flip, shift=not flip)


def _tracer_ledger(ask: Ask, flip: bool = False, shift: bool = False) -> dict[str, Any]:
    claims = _claims(ask)
    harmful = [cid for cid, _, text in claims if _is_fault_claim(ask, text) != flip]
    node = schema_field(ask.grammar, "marks")
    cap = int(node.get("maxItems", 1))
    floors = {b["properties"]["claim"]["const"]: node_ints(b["properties"]["span"])[0] for b in node["items"]["anyOf"]}
    marks: list[dict[str, Any]] = []
    for cid, _, text in claims:
        if cid in harmful:
            marks += [{"claim": cid, **m} for m in _marks(ask, text, floors[cid], cap, shift)]
    reason = f"{', '.join(harmful)} led the run astray." if harmful else "None of these claims led the run astray."
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "harmful": harmful, "marks": marks[:cap]}


def _tracer_ledger_wrong(ask: Ask) -> dict[str, Any]:
    flip = ask.rng.random() < 0.5
    return _tracer_ledger(ask, flip=flip, shift=not flip)


# ---- the confirming call ---------------------------------------------------------------------------


def _confirm_first(ask: Ask) -> int:
    return node_ints(schema_field(ask.grammar, "earliest"))[-1]


def _confirm(ask: Ask) -> dict[str, Any]:
    """The span showing the fault's words where the prompt shows it at or before the chosen
    span, else the chosen span."""
    first, made = _confirm_first(ask), Shown.of(ask).fault_span()
    earliest = made if made is not None and made <= first else first
    said = "The run first went wrong here." if earliest == first else "An earlier span already states the wrong claim."
    return {"reason": clip(said, max_length(ask.grammar, "reason")), "earliest": earliest}


def _confirm_wrong(ask: Ask) -> dict[str, Any]:
    """Another shown span at or before the chosen one."""
    first, honest = _confirm_first(ask), _confirm(ask)["earliest"]
    pool = [s for s in Shown.of(ask).spans if s <= first] or [first]
    return {"reason": clip("An earlier span went wrong.", max_length(ask.grammar, "reason")), "earliest": _wrong_span(ask, pool, honest)}


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
    if details.get("step_is_fallback"):
        return f"tracer: nothing harmful found; fallback span {details.get('fallback_span')} ({details.get('no_error_reason')})"
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
            "a span starts where the agent the prompt shows changes",
            "two spans merged (the one starting at the fault's words, where shown)",
        ),
        Rule(
            "ledger",
            r"drift/ledger/\d+(/retry\d*|/again)?",
            _ledger,
            _ledger_wrong,
            "the recognised fault's claim (a verbatim piece of the step showing its words), introduced at that span and committed; "
            "one claim per other shown step (its first new words), committed where later spans share its key terms; updates of what it uses",
            "nothing recorded, or the fault's claim introduced at another span",
        ),
        Rule(
            "support",
            r"drift/support/(ledger/)?C\d+",
            _support,
            _support_wrong,
            "per claim shown: a claim quoting the fault MISSING where the prompt shows the fault; another DIRECT on a "
            "corroborating shown step or the material its step shows, else MISSING",
            "the opposite verdicts (MISSING called DIRECT on the claim's own words, DIRECT called MISSING)",
        ),
        Rule(
            "tracer",
            r"drift/tracer/C\d+",
            _tracer_claim,
            _tracer_claim_wrong,
            "harmful only for a claim quoting the fault where the prompt shows it: introduce at the span showing its words, reuse after",
            "the verdict flipped, or the introduction at another span",
        ),
        Rule(
            "tracer-ledger",
            r"drift/tracer/(ledger|joint)(/C\d+)?",
            _tracer_ledger,
            _tracer_ledger_wrong,
            "as per claim, over every risky claim at once (joint: every checked claim)",
            "as per claim",
        ),
        Rule(
            "confirm",
            r"drift/confirm",
            _confirm,
            _confirm_wrong,
            "the span showing the fault's words where shown at or before the chosen first error, else the chosen span",
            "another shown span at or before the chosen one",
        ),
    ],
    dropped_at=dropped_at,
)
