"""DRIFT's oracle policy (`localfa.oracle.policy`): what a careful auditor that can *recognise* the
labelled decisive step answers to each DRIFT prompt, from what that prompt shows, and its
plausible wrong answer. It is never clairvoyant: it reads only the prompt (span headers, fenced
steps and passages, claim headers and texts, ledger lines) and uses the labels only to recognise
what is in front of it.

- The fault is the labelled step's *phrase*: the first run of its words no earlier step says
  (`fault_phrase`). It is recognisable in a request only where that request shows it, inside the
  labelled step's block or in a passage of it; a run cut so the phrase is hidden shows no fault.
- Claim Keeper: one claim per agent step the chunk shows (the fault first, then in trace order,
  at most the grammar's count), worded as that step's first new words as shown. A claim is
  introduced in the first span whose shown text holds its words; its uses are the later spans
  sharing its key terms; it is consequential where it is first used (tentative if never). The
  recognised fault's claim is introduced at the labelled step itself, also where its words repeat
  an earlier step's (a decision taken again, as hand-crafted/16's "Next speaker WebSurfer": the
  auditor that recognises the repeat as the error records it where it is made). The
  recognised fault is *finalized* (the label says the failed answer rests on it) but committed
  where the run first uses it, not where it was made. Later chunks update the entries they use.
- Support Seeker: judges the evidence the prompt contains. The recognised fault claim has none
  (MISSING). Another claim is DIRECT on a passage of another shown step that corroborates it, or
  on the page, file or terminal text its own step shows; a claim the run merely asserts is
  MISSING (no source shown).
- Dependency Tracer: a claim is harmful only if it is the fault's and the prompt shows the
  fault; it is marked ``introduce`` at the labelled step's span, ``reuse`` at the
  later shown spans sharing its key terms. Every span it names is one the prompt shows.

Nothing here places the no-error fallback: the method answers the weakest-supported claim's
introduction, which is the label only when the support verdicts say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from localfa.methods.baselines import HUMAN_NAMES
from localfa.methods.drift.spans import step_text
from localfa.methods.fencing import fenced_blocks
from localfa.oracle.mutants import Mutant, patched
from localfa.oracle.policy import Ask, Policy, PolicyError, Rule, clip, clip_to, max_length, nearby_other, node_ints, schema_field
from localfa.traces.model import Trace, normalize_agent

_SPAN = re.compile(r"^Span (\d+) \(steps? (\d+)(?:-(\d+))?\):$", re.M)
_CLAIM = re.compile(r"^Claim (C\d+) \([^;\n]*; introduced in span (\d+)", re.M)
_LEDGER_LINE = re.compile(r"^(C\d+) \| [^|,]*, (\w+) \| [^|]* \| (.*)$", re.M)
_SHOWN = re.compile(r"(?:STEP|PASSAGE) (\d+)")
_CUT = re.compile(r"\[\.\.\. \d+ chars cut \.\.\.\]")
_MATERIAL = re.compile(r":[ \t]*\r?\n|```|\boutput:|\bexitcode\b|\bOCR\b", re.I)
_QUOTES = frozenset("\"'`\u201c\u2018")
_KEY = re.compile(r"[^\W_]{6,}|\d[\d,.]*\d|\d")
PHRASE_WORDS = 10  # words in a claim (what a step newly says)
PHRASE_CHARS = 120  # at most this long, inside every claim_chars bound
SCAN_WINDOWS = 400  # windows tried per step for words no earlier step says
QUOTE_WORDS = 12
SHARED_KEYS = 3  # key terms two steps share for one to use the other's claim
PASSAGE_RUN_CHARS = 25000  # the no-passages mutant's support and tracer run text (steps get cut)
CORROBORATION = 0.6  # share of a claim's key terms another step must hold to corroborate it


def fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def keys(text: str) -> frozenset[str]:
    """Key terms: long words and numbers, folded (what a later step must share to use a claim)."""
    return frozenset(k.casefold() for k in _KEY.findall(text))


def _window(words: list[str], k: int) -> str:
    out: list[str] = []
    for w in words[k : k + PHRASE_WORDS]:
        if out and len(" ".join([*out, w])) > PHRASE_CHARS:
            break
        out.append(w[:PHRASE_CHARS])
    return " ".join(out)


def states(folded: str, said: str) -> bool:
    """Whether `folded` text states `said` (both folded): holds it somewhere not opened by a quote
    mark. A plan that quotes an instruction (``"answer": "Please search ..."``) mentions it; the
    step that issues it states it (the first error is where a claim is settled, not mentioned)."""
    at = folded.find(said) if said else -1
    while at != -1:
        if folded[:at].rstrip()[-1:] not in _QUOTES:
            return True
        at = folded.find(said, at + 1)
    return False


def first_new_words(text: str, earlier: list[str]) -> str:
    """The first window of `text` (cut markers never inside) that no text of `earlier` (folded)
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


_PHRASES: dict[tuple[str, str, int], str] = {}


def best_window(text: str, earlier: list[str], reason: str) -> str:
    """The window of `text` no earlier text states that shares the most key terms with the
    label's `reason` (at least `SHARED_KEYS - 1`; ties: the earliest), else `first_new_words`."""
    want = keys(reason)
    best, best_score = "", SHARED_KEYS - 2
    for piece in _CUT.split(text):
        words = piece.split()
        for k in range(0, max(1, len(words) - PHRASE_WORDS + 1), 2):
            cand = _window(words, k)
            score = len(keys(cand) & want)
            if score > best_score and not (k > 0 and words[k - 1][-1:] in _QUOTES) and not any(states(t, fold(cand)) for t in earlier):
                best, best_score = cand, score
    return best or first_new_words(text, earlier)


def fault_phrase(trace: Trace, step: int) -> str:
    """Where the labelled step's fault sits: the window of its words that the label's reason
    points at (shares the most key terms with it), among the windows no earlier step states; with
    no reason to go by, its first new words. From the trace; computed once per trace and step."""
    key = (trace.id, trace.source, step)
    if key not in _PHRASES:
        if len(_PHRASES) > 1024:
            _PHRASES.clear()
        earlier = [fold(step_text(s)) for s in trace.steps[:step]]
        reason = (trace.labels.reason if trace.labels else None) or ""
        _PHRASES[key] = best_window(step_text(trace.steps[step]), earlier, reason)
    return _PHRASES[key]


# ---- what a prompt shows -------------------------------------------------------------------------


@dataclass
class Shown:
    """What one request shows, read once: its spans (id -> first, last step) and, per step, the
    text it shows (the step's block, then any passages of it), folded and as key terms."""

    spans: dict[int, tuple[int, int]]
    text: dict[int, str]
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
            text: dict[int, str] = {}
            for label, body in fenced_blocks(ask.prompt):
                m = _SHOWN.fullmatch(label)
                if m:
                    i = int(m.group(1))
                    text[i] = f"{text[i]}\n{body}" if i in text else body
            cached = ask.__dict__["_drift_shown"] = cls(spans, text)
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
        """Shown spans after `after` whose steps share the claim's key terms (they use it)."""
        want = keys(text)
        need = min(SHARED_KEYS, max(1, len(want)))
        return [
            sid
            for sid in sorted(self.spans)
            if sid > after and any(len(want & self.keys(i)) >= need for i in range(self.spans[sid][0], self.spans[sid][1] + 1))
        ]


def _visible(ask: Ask, shown: Shown) -> bool:
    """Whether the prompt shows the labelled fault: its phrase inside the labelled step's text."""
    phrase = fold(fault_phrase(ask.trace, ask.mistake_step))
    return bool(phrase) and phrase in shown.folded.get(ask.mistake_step, "")


def _is_fault_claim(ask: Ask, text: str) -> bool:
    phrase, said = fold(fault_phrase(ask.trace, ask.mistake_step)), fold(text)
    return bool(said) and (said == phrase or (len(said) >= 20 and said in phrase))


def _claim_of(ask: Ask) -> tuple[str, int, str]:
    """(id, introduced span, text) of the claim a support or per-claim tracer prompt shows."""
    m = _CLAIM.search(ask.prompt)
    if not m:
        raise PolicyError(f"request {ask.key!r}: no claim header in the prompt")
    return m.group(1), int(m.group(2)), _claim_text(ask, m.group(1))


def _claim_text(ask: Ask, cid: str) -> str:
    return next((body for label, body in fenced_blocks(ask.prompt) if label == f"CLAIM {cid}"), "")


# ---- segmentation --------------------------------------------------------------------------------


def _segment_range(ask: Ask) -> tuple[int, int]:
    m = re.search(r"The steps above go from (\d+) to (\d+)", ask.prompt)
    if not m:
        raise PolicyError(f"request {ask.key!r}: no step range in the segmentation prompt")
    return int(m.group(1)), int(m.group(2))


def _segment(ask: Ask) -> str:
    """A span starts where the acting agent changes, and around the fault where it is shown."""
    lo, hi = _segment_range(ask)
    steps, m = ask.trace.steps, ask.mistake_step
    around = {m, m + 1} if _visible(ask, Shown.of(ask)) else set()
    starts = [lo] + [i for i in range(lo + 1, hi + 1) if i in around or steps[i].agent != steps[i - 1].agent]
    return ",".join(map(str, starts))


def _segment_wrong(ask: Ask) -> str:
    lo, hi = _segment_range(ask)
    return ",".join(str(i) for i in range(lo, hi + 1) if i == lo or i != ask.mistake_step)


# ---- the Claim Keeper ----------------------------------------------------------------------------


def _ledger(ask: Ask, late: bool = False) -> dict[str, Any]:
    shown = Shown.of(ask)
    spans = shown.spans
    new_node = schema_field(ask.grammar, "new_claims")
    item = new_node["items"]["properties"]
    n_claims, n_uses = int(new_node.get("maxItems", 1)), int(item["uses"].get("maxItems", 1))
    hi = node_ints(item["introduced"])[-1]
    existing = {cid: (status, text) for cid, status, text in _LEDGER_LINE.findall(ask.prompt)}
    recorded = {fold(text) for _, text in existing.values()}
    fault = fault_phrase(ask.trace, ask.mistake_step) if _visible(ask, shown) else ""
    order = list(shown.order)
    if fault and ask.mistake_step in order:  # a careful keeper records the decisive claim first
        order.remove(ask.mistake_step)
        order.insert(0, ask.mistake_step)
    claims: list[dict[str, Any]] = []
    for i in order:
        step = ask.trace.steps[i]
        if len(claims) >= n_claims or normalize_agent(step.agent) in HUMAN_NAMES or step.kind != "action" or shown.span_of(i) is None:
            continue
        earlier = [shown.folded[j] for j in shown.order if j < i]
        text = fault if i == ask.mistake_step and fault else first_new_words(shown.text[i], earlier)
        text = clip_to(item["text"], clip(text, PHRASE_CHARS))
        if len(text) < int(item["text"].get("minLength", 1)) or fold(text) in recorded:
            continue
        where = i if i == ask.mistake_step and fault else shown.first_holding(text)
        at = shown.span_of(where if where is not None else i)
        if at is None:
            continue
        if i == ask.mistake_step and fault and late:
            at = nearby_other([s for s in spans if s <= hi], at, ask.rng)
        uses = [u for u in shown.users(text, at) if u <= hi][:n_uses]
        is_fault = i == ask.mistake_step and bool(fault)
        status = "finalized" if is_fault else "consequential" if uses else "tentative"
        claims.append(
            {"text": text, "type": "other", "status": status, "introduced": at, "consequential": uses[0] if uses else at, "uses": uses}
        )
        recorded.add(fold(text))
    answer: dict[str, Any] = {"new_claims": claims}
    if "updates" in ask.grammar.spec.get("properties", {}):
        update_node = schema_field(ask.grammar, "updates")
        answer["updates"] = []
        for cid, (status, text) in existing.items():
            uses = shown.users(text, -1)[:n_uses]
            if uses and len(answer["updates"]) < int(update_node.get("maxItems", 0)):
                answer["updates"].append({"claim": cid, "status": status, "uses": uses})
    return answer


def _ledger_wrong(ask: Ask) -> dict[str, Any]:
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


def _support(ask: Ask) -> dict[str, Any]:
    _, introduced, text = _claim_of(ask)
    shown = Shown.of(ask)
    reason_cap, quote_cap = max_length(ask.grammar, "reason"), max_length(ask.grammar, "evidence")
    none = {"evidence": "", "span": introduced, "status": "MISSING"}
    if _is_fault_claim(ask, text):
        return {**none, "reason": clip("No step shown establishes it; only the step that states it says so.", reason_cap)}
    made = shown.first_holding(text)
    if made is None:
        return {**none, "reason": clip("The run as shown does not state this claim.", reason_cap)}
    want = keys(text)
    others = [(len(want & shown.keys(j)), -j, j) for j in shown.order if j != made and j != ask.mistake_step]
    best = max((o for o in others if o[0] >= max(min(SHARED_KEYS, len(want)), CORROBORATION * len(want))), default=None)
    if best is not None:
        quote = clip(_quote_around(shown.text[best[2]], want), quote_cap)
        at = shown.span_of(best[2])
        if quote and at is not None:
            return {"evidence": quote, "span": at, "reason": clip("Another step shows the same.", reason_cap), "status": "DIRECT"}
    said = shown.folded[made].find(fold(text))
    if _MATERIAL.search(" ".join(shown.text[made].split())[: max(0, said)] if said > 0 else ""):
        at = shown.span_of(made)
        if at is not None:
            return {
                "evidence": clip(text, quote_cap),
                "span": at,
                "reason": clip("The step shows it from a source.", reason_cap),
                "status": "DIRECT",
            }
    return {**none, "reason": clip("The run asserts it; no source shown establishes it.", reason_cap)}


def _support_wrong(ask: Ask) -> dict[str, Any]:
    """The fault claim called DIRECT on its own words; any other claim MISSING."""
    _, introduced, text = _claim_of(ask)
    reason_cap, quote_cap = max_length(ask.grammar, "reason"), max_length(ask.grammar, "evidence")
    if _is_fault_claim(ask, text):
        return {"evidence": clip(text, quote_cap), "span": introduced, "reason": clip("The run says so.", reason_cap), "status": "DIRECT"}
    return {"evidence": "", "span": introduced, "reason": clip("Nothing establishes it.", reason_cap), "status": "MISSING"}


# ---- the Dependency Tracer -----------------------------------------------------------------------


def _marks(ask: Ask, text: str, lo: int, cap: int, shift: bool = False) -> list[dict[str, Any]]:
    """`introduce` where the prompt first shows the claim's words, `reuse` where later spans use it."""
    shown = Shown.of(ask)
    where = ask.mistake_step if _is_fault_claim(ask, text) and _visible(ask, shown) else shown.first_holding(text)
    made = shown.span_of(where) if where is not None else None
    pool = [s for s in shown.spans if s >= lo]
    if made is None or made < lo:
        made = min(pool) if pool else lo
    if shift:
        made = nearby_other(pool, made, ask.rng)
    out = [{"span": made, "role": "introduce"}]
    out += [{"span": s, "role": "reuse"} for s in shown.users(text, made)][: max(0, cap - 1)]
    return out


def _harmful(ask: Ask, text: str) -> bool:
    return _is_fault_claim(ask, text) and _visible(ask, Shown.of(ask))


def _tracer_claim(ask: Ask, flip: bool = False, shift: bool = False) -> dict[str, Any]:
    _, _, text = _claim_of(ask)
    harmful = _harmful(ask, text) != flip
    marks = schema_field(ask.grammar, "marks")
    lo = node_ints(marks["items"]["properties"]["span"])[0]
    reason = "It is the wrong claim the run went on to build on." if harmful else "Harmless: the run does not fail through it."
    found = _marks(ask, text, lo, int(marks.get("maxItems", 1)), shift) if harmful else []
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "harmful": harmful, "marks": found}


def _tracer_claim_wrong(ask: Ask) -> dict[str, Any]:
    flip = ask.rng.random() < 0.5
    return _tracer_claim(ask, flip=flip, shift=not flip)


def _tracer_ledger(ask: Ask, flip: bool = False, shift: bool = False) -> dict[str, Any]:
    claims = [(cid, int(sp), _claim_text(ask, cid)) for cid, sp in _CLAIM.findall(ask.prompt)]
    harmful = [cid for cid, _, text in claims if _harmful(ask, text) != flip]
    cap = int(schema_field(ask.grammar, "marks").get("maxItems", 1))
    marks: list[dict[str, Any]] = []
    for cid, sp, text in claims:
        if cid in harmful:
            marks += [{"claim": cid, **m} for m in _marks(ask, text, sp, cap, shift)]
    reason = f"{', '.join(harmful)} led the run astray." if harmful else "None of these claims led the run astray."
    return {"reason": clip(reason, max_length(ask.grammar, "reason")), "harmful": harmful, "marks": marks[:cap]}


def _tracer_ledger_wrong(ask: Ask) -> dict[str, Any]:
    flip = ask.rng.random() < 0.5
    return _tracer_ledger(ask, flip=flip, shift=not flip)


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
            "spans split where the agent changes, and around the labelled step where its fault is shown",
            "the labelled step merged into the span before it",
        ),
        Rule(
            "ledger",
            r"drift/ledger/\d+(/retry\d*)?",
            _ledger,
            _ledger_wrong,
            "one claim per agent step shown (its first new words), introduced where its words first show, "
            "used where later spans share its key terms; the shown fault first, finalized; later chunks update what they use",
            "nothing recorded, or the fault's claim introduced at a span nearby",
        ),
        Rule(
            "support",
            r"drift/support/C\d+",
            _support,
            _support_wrong,
            "the fault's claim MISSING; another DIRECT on a corroborating shown step or the material its step shows, else MISSING",
            "the fault's claim DIRECT on its own words, others MISSING",
        ),
        Rule(
            "tracer",
            r"drift/tracer/C\d+",
            _tracer_claim,
            _tracer_claim_wrong,
            "harmful only for the fault's claim where the prompt shows the fault: introduce where its words first show, reuse after",
            "the verdict flipped, or the introduction at a span nearby",
        ),
        Rule(
            "tracer-ledger",
            r"drift/tracer/(ledger|joint)",
            _tracer_ledger,
            _tracer_ledger_wrong,
            "as per claim, over every risky claim at once (joint: every checked claim)",
            "as per claim",
        ),
    ],
    dropped_at=dropped_at,
)


# ---- mutants: one deliberate break per stage or rule, which the policy above must notice ---------


def _no_support(self: Any, spans: Any, checked: Any, run: Any) -> Any:
    """Support checks removed: nothing is checked, so nothing is risky or traced."""
    return []
    yield  # a generator stage that asks nothing


def _finalized_last(self: Any) -> list[Any]:
    return sorted((c for c in self.claims if c.committed), key=lambda c: (c.status == "finalized", c.type != "decision"))


def _no_passages(self: Any, claim: Any, cuts: Any, room: int) -> str:
    return ""


def _demote_direct(claim: Any, answer: dict[str, Any], view: Any, spans: Any, verify: bool = True) -> Any:
    from localfa.methods.drift import support

    check = support.check_from_answer(claim, answer, view, spans, verify)
    if check.status == "DIRECT":
        check.status, check.demoted = "WEAK", "mutant: every DIRECT demoted"
    return check


def _view_cut_to(chars: int, view: Any) -> Any:
    """`SpanView.view` with every run text cut to at most `chars` characters."""

    def cut(self: Any, spans: Any, char_budget: int | None, tags: bool = True) -> Any:
        return view(self, spans, chars if char_budget is None else min(char_budget, chars), tags)

    return cut


def _checks_run_cut_to(chars: int, fit_run: Any) -> Any:
    """`Audit._fit_run` with the support and tracer run text fitted from `chars` characters at most
    (the keeper's chunks untouched): a run that no longer fits, where passages must show the
    hidden parts of cut steps."""

    def cut(self: Any, stage: str, spans: Any, prompt_with: Any, max_tokens: int, start: int) -> Any:
        return fit_run(self, stage, spans, prompt_with, max_tokens, min(start, chars))

    return cut


def _keep_nothing(self: Any, answer: dict[str, Any], chunk: int = 0) -> list[str]:
    return []


def _tracer_silent_claim(claim: Any, answer: dict[str, Any]) -> tuple[bool, list[Any]]:
    return False, []


def _tracer_silent_ledger(claims: Any, answer: dict[str, Any]) -> tuple[set[str], list[Any]]:
    return set(), []


def _all_missing(claim: Any, answer: dict[str, Any], view: Any, spans: Any, verify: bool = True) -> Any:
    from localfa.methods.drift import support

    check = support.check_from_answer(claim, answer, view, spans, verify)
    check.status = "MISSING"
    return check


def _all_harmful(claim: Any, answer: dict[str, Any]) -> tuple[bool, list[Any]]:
    from localfa.methods.drift.tracer import Mark

    return True, [Mark(claim.id, claim.introduced, "introduce")]


def _all_harmful_ledger(claims: Any, answer: dict[str, Any]) -> tuple[set[str], list[Any]]:
    from localfa.methods.drift.tracer import Mark

    return {c.id for c in claims}, [Mark(c.id, c.introduced, "introduce") for c in claims]


def _last_first(marks: list[Any]) -> list[int]:
    return sorted({m.span for m in marks}, reverse=True)


def _no_weakest(checked: Any, checks: Any) -> None:
    return None


def _mutants() -> list[Mutant]:
    from localfa.methods.drift import audit, ledger, spans, verdict

    silent = patched((audit, "marks_for_claim", _tracer_silent_claim), (audit, "marks_for_ledger", _tracer_silent_ledger))
    return [
        Mutant("no-support-no-tracer", "support seeker and tracer", "p1", patched((audit.Audit, "_seek_support", _no_support))),
        # The check order matters only where `max_checked_claims` binds (never on the dev split at
        # 32 checks): measured at 4 checks, where intact DRIFT keeps its ceiling (0.983).
        Mutant(
            "finalized-checked-last",
            "support seeker: riskiest claims first (at max_checked_claims=4)",
            "p1",
            patched((ledger.Ledger, "committed", _finalized_last)),
            spec="max_checked_claims=4",
            # 35 kills it since Computer_terminal steps are observations (issue 54): 11, 17 and 24 no longer do
            traces=("algorithm-generated/11", "algorithm-generated/17", "algorithm-generated/35"),
        ),
        # Passages act only where the run text is cut (2 dev traces at 32k): measured with the
        # support and tracer run text held to 25,000 characters, where intact DRIFT scores 0.967.
        Mutant(
            "no-passages",
            "passages of cut steps (support and tracer run text held to 25,000 characters)",
            "p1",
            patched(
                (audit.Audit, "_fit_run", _checks_run_cut_to(PASSAGE_RUN_CHARS, audit.Audit._fit_run)),
                (audit.Audit, "_passages", _no_passages),
            ),
            traces=("hand-crafted/3", "hand-crafted/8", "hand-crafted/11"),
        ),
        Mutant(
            "direct-demoted",
            "support verdict DIRECT (the gate to the tracer)",
            "cost",
            patched((audit, "check_from_answer", _demote_direct)),
            traces=("hand-crafted/2", "hand-crafted/10"),
        ),
        Mutant(
            "run-text-256", "run text shown to every stage", "p1", patched((spans.SpanView, "view", _view_cut_to(256, spans.SpanView.view)))
        ),
        Mutant("keeper-records-nothing", "claim keeper (ledger)", "p1", patched((ledger.Ledger, "merge", _keep_nothing))),
        Mutant(
            "tracer-silent",
            "dependency tracer verdicts",
            "p1",
            silent,
            # 38 kills it since Computer_terminal steps are observations (issue 54): 3, 11 and 15 no longer do
            traces=("algorithm-generated/3", "algorithm-generated/15", "algorithm-generated/38"),
        ),
        Mutant(
            "verdicts-ignored",
            "support and tracer verdicts (every claim risky and harmful)",
            "p1",
            patched(
                (audit, "check_from_answer", _all_missing),
                (audit, "marks_for_claim", _all_harmful),
                (audit, "marks_for_ledger", _all_harmful_ledger),
            ),
            traces=("algorithm-generated/10", "algorithm-generated/11", "algorithm-generated/13"),
        ),
        Mutant("first-error-latest", "first-error pick (earliest marked span)", "p1", patched((verdict, "error_spans", _last_first))),
        Mutant(
            "fallback-last-span",
            "no-error fallback (weakest support)",
            "p07",
            patched((verdict, "weakest_claim", _no_weakest)),
            traces=tuple(f"algorithm-generated/{n}" for n in (6, 23, 26, 27, 31, 37, 39)),
        ),
    ]


MUTANTS = _mutants()
