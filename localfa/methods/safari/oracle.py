"""SAFARI's oracle policy (`localfa.oracle.policy`): a careful investigator and evaluator that
recognise the labelled decisive step only where their prompt shows it, and their wrong twins.

- investigator turn (``turn/K``): the step counts as recognised once a *read* result in the
  prompt shows its lines (a search hit is a pointer, RULE 4: read before judging). Until then it
  investigates as the paper's STEP 2 says, from what it has been shown: it reads the earliest step
  a search pointed to and has not read, else searches a term taken from what it was shown (the
  final lines first, then the task, then earlier results; never the labelled step's record),
  else traces backwards by reading the lines before the earliest it has read. Recognised and
  evaluate open (the newest result does not say it is closed), it evaluates, quoting the lines it
  was shown; after a pass it submits that step. Its STM notes the step with the shown quote.
  Wrong: the same, with a step near the labelled one taken for the fault.
- evaluator (``eval/E/Q``): judges the reasoning in its prompt: a quote verbatim from the
  labelled step's record, attributed to the step the claim is about, scores 90; a quote from
  elsewhere 20; no reasoning or no quote 30 (no confident verdict). Wrong: the opposite call.
- forced final (``final``): the labelled step if a read result in the prompt shows its lines,
  else (not recognised: a search hit is only a pointer) the nearest other step the prompt shows. Wrong: another admitted step nearby.

`MUTANTS` break one stage or rule each (`localfa.oracle.mutants`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import regex

from localfa.engine.types import Message
from localfa.methods.fencing import fenced_blocks
from localfa.methods.safari import investigator
from localfa.methods.safari.history import History
from localfa.methods.safari.investigator import EVALUATE_CLOSED, Investigation
from localfa.oracle.mutants import Mutant, patched
from localfa.oracle.policy import Ask, Policy, Rule, clip, clip_to, nearby_other, nearest, node_ints, schema_ints
from localfa.traces.lineview import LineView, SearchResult, Shown, shown_lines, step_record

QUOTE_CHARS = 200
#: A search whose hits fall in at most this many steps is worth reading around (a careful model
#: does not chase a term that occurs all over the run).
SELECTIVE_STEPS = 6
_QUOTED = re.compile(r"“([^”]{12,})”")
_STEP_IN = re.compile(r"\bstep (\d+)\b", re.IGNORECASE)
_TERM = re.compile(r"\b(?:\d[\d.,:/-]*\d|[A-Z][A-Za-z0-9_-]{4,}|[a-z][a-z0-9_-]{7,})\b")
_PAST_READ = re.compile(r"read\(offset=(\d+), limit=(\d+)\)")  # a read as the STM lists past tool calls
_NOT_TERMS = {"step_id", "assistant", "observation", "content", "tool_calls", "parent_span_id", "function"}
# Wording of SAFARI's own tool results (prompts/safari/observation.j2), as a model reads them.
_PASSED = "Your hypothesis holds"
_NO_EVALUATIONS_LEFT = ("You have no evaluations left", "You have used all")
_REFUSED = "evaluate refused"
_FAILED = "Evaluation: average confidence"


# ---- what the prompt shows --------------------------------------------------------------------


def _exchanges(messages: list[Message]) -> list[tuple[dict[str, Any], str]]:
    """(tool call the investigator made, the result that followed) for every turn the prompt holds."""
    out = []
    for a, b in zip(messages, messages[1:]):
        if a.get("role") == "assistant":
            try:
                call = json.loads(a.get("content", "")).get("tool") or {}
            except (json.JSONDecodeError, AttributeError):
                call = {}
            out.append((call, b.get("content", "")))
    return out


class _Shown:
    """What one investigator prompt shows: lines read, search hits, calls made, the last result."""

    def __init__(self, ask: Ask) -> None:
        messages = list(ask.request.messages)
        self.exchanges = _exchanges(messages)
        self.read: dict[int, list[tuple[int, str]]] = {}  # step -> (line, text) shown by reads
        self.hits: list[tuple[int, int, str]] = []  # (line, step, snippet) shown by searches
        self.calls = [c for c, _ in self.exchanges]
        for call, result in self.exchanges:
            for line, step, text in shown_lines(result):
                if call.get("name") == "read":
                    self.read.setdefault(step, []).append((line, text))
                else:
                    self.hits.append((line, step, text))
        self.last = self.exchanges[-1][1] if self.exchanges else ""
        # The past tool calls the STM lists (they outlive the turns evicted from the conversation).
        self.past_calls = ask.prompt.rpartition("past_tool_calls")[2]
        opening = messages[1].get("content", "") if len(messages) > 1 else ""
        # The task is what the TASK block quotes; the prompt's own wording around it is no search term.
        self.task = next((text for label, text in fenced_blocks(opening) if label == "TASK"), opening)

    def read_lines(self) -> set[int]:
        return {line for rows in self.read.values() for line, _ in rows}

    def quote(self, step: int) -> str:
        """A verbatim piece of what the reads showed of `step`."""
        rows = self.read.get(step, [])
        text = rows[0][1] if rows else ""
        return clip(text.split("“")[0].split("”")[0].strip(), QUOTE_CHARS)

    def searched(self) -> set[str]:
        return {str(c.get("pattern", "")) for c in self.calls if c.get("name") == "search"}

    def terms(self) -> list[str]:
        """Search terms from what was shown: the final lines first, then the task, then the rest."""
        texts = []
        for _, result in self.exchanges[:1]:
            texts += [t for _, _, t in reversed(shown_lines(result))]
        texts.append(self.task)
        for _, result in self.exchanges[1:]:
            texts += [t for _, _, t in shown_lines(result)]
        found = dict.fromkeys(m.group(0) for t in texts for m in _TERM.finditer(t))
        return [t for t in found if t.lower() not in _NOT_TERMS]


def _tool_schema(ask: Ask, name: str) -> dict[str, Any]:
    for alt in ask.grammar.spec["properties"]["tool"]["anyOf"]:
        if alt["properties"]["name"]["const"] == name:
            return alt
    raise ValueError(f"the turn grammar has no {name} tool")


def _evaluate_closed(shown: _Shown) -> bool:
    return EVALUATE_CLOSED in shown.last or _REFUSED in shown.last


def _read_ranges(shown: _Shown) -> list[tuple[int, int]]:
    """[start, end) of every read the prompt's own calls made (the bootstrap read included): the
    model knows what it read from its calls even after their results were summarised away."""
    out = [(int(offset), int(offset) + int(limit)) for offset, limit in _PAST_READ.findall(shown.past_calls)]
    for call in shown.calls:
        if call.get("name") == "read":
            start = int(call.get("offset", 0))
            out.append((start, start + int(call.get("limit", 0))))
    return out


def _traced_back_to(shown: _Shown, last_line: int) -> int:
    """The first line of the contiguous stretch the reads cover that ends at the run's end: how
    far the run has been traced backwards."""
    start = last_line + 1
    ranges = _read_ranges(shown)
    while reaching := [lo for lo, hi in ranges if lo < start <= hi]:
        start = min(reaching)
    return start


def _selective(hits: list[tuple[int, int, str]]) -> bool:
    """A search worth following: its hits fall in a few steps (a term found everywhere points nowhere)."""
    return 0 < len({step for _, step, _ in hits}) <= SELECTIVE_STEPS


def _crowded(hits: list[tuple[int, int, str]]) -> bool:
    """A search whose hits fall in too many steps to follow."""
    return len({step for _, step, _ in hits}) > SELECTIVE_STEPS


def _explore(ask: Ask, shown: _Shown) -> dict[str, Any]:
    """The next investigating move, built only from what the prompt shows: read the earliest step
    a selective search pointed to; else search a term it was shown (STEP 2), and after a search
    whose hits crowd too many steps to follow, trace backwards from the end with the largest read
    allowed (a run full of its own vocabulary cannot be narrowed down by words alone)."""
    read = _tool_schema(ask, "read")["properties"]
    limit = node_ints(read["limit"])[-1]
    last_line = node_ints(read["offset"])[-1]
    read_lines = shown.read_lines()
    made = {json.dumps(c, sort_keys=True) for c in shown.calls}

    def fresh(call: dict[str, Any]) -> bool:
        return json.dumps(call, sort_keys=True) not in made

    pointed = sorted(
        (line, step)
        for call, result in shown.exchanges
        if call.get("name") == "search" and _selective(hits := shown_lines(result))
        for line, step, _ in hits
        if step not in shown.read
    )
    for line, _ in pointed:  # the earliest step a selective search pointed to: read around it
        call = {"name": "read", "offset": max(0, line - limit // 4), "limit": limit}
        if fresh(call):
            return call
    traced = _traced_back_to(shown, last_line)
    # A term found all over the run narrows nothing down: after such a search, one read backwards.
    last_call, last_result = shown.exchanges[-1] if shown.exchanges else ({}, "")
    crowded = last_call.get("name") == "search" and _crowded(shown_lines(last_result))
    searched = shown.searched()
    pattern_node = _tool_schema(ask, "search")["properties"]["pattern"]
    if traced > 0 and crowded:  # trace backwards: the lines before the stretch read from the end
        return {"name": "read", "offset": max(0, traced - limit), "limit": limit}
    for term in shown.terms():  # STEP 2: search before reading on (PROHIBITION G: no scanning)
        pattern = clip_to(pattern_node, regex.escape(term))
        if pattern not in searched:
            return {"name": "search", "pattern": pattern}
    earliest = min(read_lines, default=last_line + 1)
    if traced > 0:
        return {"name": "read", "offset": max(0, traced - limit), "limit": limit}
    if earliest > 0:
        return {"name": "read", "offset": max(0, earliest - limit), "limit": limit}
    gaps = [n for n in range(0, last_line + 1) if n not in read_lines]
    for n in gaps:
        call = {"name": "read", "offset": n, "limit": limit}
        if fresh(call):
            return call
    return {"name": "search", "pattern": clip_to(pattern_node, f"no-such-text-{len(shown.calls)}")}


def _stm(ask: Ask, shown: _Shown, step: int) -> dict[str, Any]:
    """The STM update: the step noted with the quote the reads showed of it."""
    if "stm" not in ask.grammar.spec["properties"] or step not in shown.read:
        return {}
    fault = ask.grammar.spec["properties"]["stm"]["properties"]["faults_identified_so_far"]["items"]["properties"]
    if step not in node_ints(fault["step_id"]):
        return {}
    reason = f"Step {step} is where the run first went wrong; nothing later corrected it."
    return {
        "faults_identified_so_far": [
            {"step_id": step, "reason": clip_to(fault["reason"], reason), "evidence": clip_to(fault["evidence"], shown.quote(step))}
        ]
    }


def _noted(ask: Ask) -> set[int]:
    """The fault steps the STM shown at the end of the prompt notes."""
    for label, text in fenced_blocks(ask.prompt):
        if label == "STM":
            try:
                stm = json.loads(text.split("\npast_tool_calls", 1)[0])
            except json.JSONDecodeError:
                return set()
            return {int(f["step_id"]) for f in stm.get("faults_identified_so_far", [])}
    return set()


def _recall(ask: Ask, shown: _Shown, step: int) -> dict[str, Any] | None:
    """A step the STM notes but the prompt no longer shows: find its lines again (RULE 4's
    search for '"step_id": N'), then read them."""
    if step in shown.read or step not in _noted(ask):
        return None
    if any(s == step for _, s, _ in shown.hits):
        return None  # a hit points to it: the exploration reads it next
    pattern = clip_to(_tool_schema(ask, "search")["properties"]["pattern"], f'"step_id": {step},')
    return None if pattern in shown.searched() else {"name": "search", "pattern": pattern}


def _last_evaluated(shown: _Shown) -> int | None:
    for call in reversed(shown.calls):
        if call.get("name") == "evaluate":
            found = _STEP_IN.findall(" ".join(call.get("questions", [])))
            return int(found[0]) if found else None
    return None


def _turn_for(ask: Ask, step: int) -> dict[str, Any]:
    """An investigator turn that takes `step` for the fault once a read shows it."""
    shown = _Shown(ask)
    recognised = step in shown.read
    if _PASSED in shown.last or any(s in shown.last for s in _NO_EVALUATIONS_LEFT):
        submit = _tool_schema(ask, "submit_step")["properties"]
        evaluated = _last_evaluated(shown)  # the hypothesis the evaluation judged is the one submitted
        hypothesis = evaluated if evaluated is not None else (step if recognised else None)
        seen = sorted(set(shown.read) | {s for _, s, _ in shown.hits})
        target = nearest(node_ints(submit["step_id"]), hypothesis if hypothesis is not None else nearest(seen or [step], step))
        reasoning = clip_to(submit["reasoning"], f"Step {target} is the decisive mistake; the evaluation confirmed it.")
        tool: dict[str, Any] = {"name": "submit_step", "reasoning": reasoning, "step_id": target}
        action, analysis = f"Submit step {target}.", f"The evaluation backs step {target}."
    elif recognised and not _evaluate_closed(shown) and _FAILED not in shown.last:
        ev = _tool_schema(ask, "evaluate")["properties"]
        quote = shown.quote(step)
        questions = [
            f"Does the quoted action at step {step} show the decisive mistake?",
            f"Is step {step} the first wrong step of the run?",
            f"Was the error at step {step} never corrected by a later step?",
        ][: int(ev["questions"].get("maxItems", 3))]
        questions = [clip_to(ev["questions"]["items"], q) for q in questions]
        reasoning = clip_to(ev["reasoning"], f"At step {step} the run shows: “{quote}”. That is the decisive error at step {step}.")
        tool = {"name": "evaluate", "questions": questions, "reasoning": reasoning}
        action, analysis = f"Evaluate the hypothesis that step {step} is the mistake.", f"Step {step} reads: {quote}"
    else:
        recall = None if _evaluate_closed(shown) else _recall(ask, shown, step)
        tool = recall or _explore(ask, shown)
        action = "Trace the failure back through the run."
        analysis = "The final output was: as the last lines show. The task required: as stated. The failure is: to be traced."
    out: dict[str, Any] = {}
    props = ask.grammar.spec["properties"]
    if "analysis" in props:
        out["analysis"] = clip_to(props["analysis"], analysis)
    if "stm" in props:
        out["stm"] = _stm(ask, shown, step)
    out["next_action"] = clip_to(props["next_action"], action)
    out["tool"] = tool
    return out


def _turn(ask: Ask) -> dict[str, Any]:
    return _turn_for(ask, ask.mistake_step)


def _turn_wrong(ask: Ask) -> dict[str, Any]:
    return _turn_for(ask, nearby_other(range(len(ask.trace.steps)), ask.mistake_step, ask.rng))


def _judged(ask: Ask) -> tuple[int, str]:
    """(score, feedback) for the claim, from the reasoning and quotes the prompt holds."""
    prompt = ask.prompt
    reasoning, _, question = prompt.rpartition("Question to check:")
    quotes = [q.strip(" .") for q in _QUOTED.findall(reasoning)]
    if not quotes:
        return 30, "The reasoning quotes nothing from the run: the claim cannot be checked."
    fault = step_record(ask.trace.steps[ask.mistake_step])
    named = {int(s) for s in _STEP_IN.findall(question)}
    if any(q in fault for q in quotes) and (not named or ask.mistake_step in named):
        return 90, "The quoted evidence is specific and supports the claim."
    return 20, "The quoted evidence does not show the mistake the claim asserts."


def _eval(ask: Ask) -> dict[str, Any]:
    score, text = _judged(ask)
    return {"feedback": clip_to(ask.grammar.spec["properties"]["feedback"], text), "score": score}


def _eval_wrong(ask: Ask) -> dict[str, Any]:
    score, _ = _judged(ask)
    flipped = 20 if score >= 70 else 90
    return {"feedback": clip_to(ask.grammar.spec["properties"]["feedback"], "A verdict the evidence does not bear out."), "score": flipped}


def _final_answer(ask: Ask, step: int) -> dict[str, Any]:
    reasoning = ask.grammar.spec["properties"]["reasoning"]
    return {"reasoning": clip_to(reasoning, f"Step {step} is the decisive mistake."), "step_id": step}


def _final(ask: Ask) -> dict[str, Any]:
    admitted = schema_ints(ask.grammar, "step_id")
    shown = _Shown(ask)
    if ask.mistake_step in shown.read and ask.mistake_step in admitted:
        return _final_answer(ask, ask.mistake_step)
    # Not recognised (a search hit is a pointer, not a reading): the nearest other step shown.
    visible = [s for s in admitted if s != ask.mistake_step and (s in shown.read or any(s == h for _, h, _ in shown.hits))]
    return _final_answer(ask, nearest(visible or admitted, ask.mistake_step))


def _final_wrong(ask: Ask) -> dict[str, Any]:
    return _final_answer(ask, nearby_other(schema_ints(ask.grammar, "step_id"), ask.mistake_step, ask.rng))


def _dropped(details: dict[str, Any], step: int) -> str:
    stop = details.get("forced_by")
    if stop:
        return f"forced ({stop}: {details.get('budget_stop') or details.get('turn_failure')}); steps seen {details.get('steps_seen')}"
    return f"submitted another step (budget {details.get('budget')}, evicted {details.get('evicted_turns')} turns)"


POLICY = Policy(
    [
        Rule(
            "investigator turn",
            r"turn/\d+",
            _turn,
            _turn_wrong,
            says="recognises the labelled step once a read shows it; until then reads what searches pointed to, searches terms it was shown, traces backwards; then evaluates quoting what it read, then submits",
            wrong_says="the same, taking a step within 3 of it for the fault",
        ),
        Rule(
            "evaluator",
            r"eval/\d+/\d+",
            _eval,
            _eval_wrong,
            says="90 for a quote verbatim from the labelled step attributed to the claimed step, 20 for other quotes, 30 with no quote",
            wrong_says="the opposite call",
        ),
        Rule(
            "forced final",
            r"final",
            _final,
            _final_wrong,
            says="the labelled step if a read shows its lines, else the nearest other step shown",
            wrong_says="another admitted step within 3 of it",
        ),
    ],
    dropped_at=_dropped,
)


# ---- mutants: one break per stage or rule ------------------------------------------------------


def _read_shows_nothing(self: LineView, offset: int, limit: int) -> Shown:
    return Shown(f"[shown lines {offset}-{offset + limit - 1}]")


_search_hits = LineView.search_hits


def _search_literal_only(self: LineView, pattern: str, max_results: int = 50, timeout_s: float = 1.0) -> SearchResult:
    if re.fullmatch(r'"step_id": \d+,?', str(pattern)):
        return _search_hits(self, pattern, max_results, timeout_s)
    return SearchResult(pattern=str(pattern))


_evaluator_messages = investigator.evaluator_messages


def _evaluator_blind(reasoning: str, question: str, limits: Any) -> list[Message]:
    return _evaluator_messages("", question, limits)


def _first_line_only(self: Investigation) -> dict[str, Any]:
    return {"name": "read", "offset": 0, "limit": 1}


MUTANTS = [
    Mutant("read_shows_no_lines", "read: its lines never reach the model", "p1", patched((LineView, "read_shown", _read_shows_nothing))),
    Mutant(
        "evaluator_without_reasoning",
        "evaluate: the evaluator never sees the reasoning",
        "cost",
        patched((investigator, "evaluator_messages", _evaluator_blind)),
    ),
    Mutant(
        "search_literal_step_id_only",
        'search: only a literal "step_id": N matches',
        "p1",
        patched((LineView, "search_hits", _search_literal_only)),
    ),
    Mutant(
        "no_bootstrap_read",
        "bootstrap read: neither the whole run nor its end is shown first",
        "cost",
        patched((Investigation, "_whole_run", lambda self, room: None), (Investigation, "_bootstrap_read", _first_line_only)),
    ),
    Mutant(
        "busywork_when_shown_whole",
        "RULE 5 minimum: demanded even when the whole run was shown",
        "cost",
        patched((Investigation, "evaluate_open", property(lambda self: self.investigated >= self.min_investigate))),
    ),
    Mutant("threshold_zero", "evaluate threshold θ=70: every evaluation passes", "p07", spec="threshold=0"),
    Mutant("threshold_unreachable", "evaluate threshold θ=70: no evaluation passes", "cost", spec="threshold=100"),
]

# The dev traces the CI test grows into long runs for the `long` mutants: the first three of each
# folder (the set issue 36's long-run figures were first measured on).
LONG_TRACES = tuple(f"{folder}/{n}" for folder in ("algorithm-generated", "hand-crafted") for n in (1, 2, 3))

# Stages that earn their place only under context pressure: at 32k, 52 of 60 dev traces are shown
# whole and answered in 2 turns, so no rule kills them on the dev split itself (whole split, p = 1
# and p = 0.7 x 3 seeds; intact 1.000 / 0.783 / 6.57 calls / 49,295 prefill: no_result_summaries
# 1.000 / 0.794 / 6.47 / 44,756, no_stm 1.000 / 0.800 / 6.60 / 50,529; docs/methods/safari.md).
# On the same runs grown past the window (2x and 5x) both lose the fault at p = 1.
MUTANTS += [
    Mutant(
        "no_result_summaries",
        "context: older results are never summarised, whole turns are evicted instead",
        "long",
        patched((History, "summarise_oldest", lambda self: False)),
        traces=LONG_TRACES,
        long=True,
    ),
    Mutant("no_stm", "short-term memory: none", "long", spec="use_stm=false", traces=LONG_TRACES, long=True),
]
