"""SAFARI's oracle policy (`localfa.oracle.policy`): a careful investigator and evaluator that see
what their conversation shows and nothing else, and their wrong twins.

What the conversation shows is read from its messages: every numbered line a read or search
result holds (`Ask.shown_steps` over all messages, parsed by `localfa.oracle.prompt`), the calls
the investigator made (its own JSON turns), the memory block (STM) and SAFARI's own wording of its
tool results. The fault is recognised only where a shown step's lines carry its words
(`Ask.fault_id`); the id named is the one the line view shows beside them.

- investigator turn (``turn/K``): once a result has shown the fault, it notes it in its STM with
  a verbatim quote of what it was shown (`Ask.quote_of_fault`) and, evaluate being open, calls
  evaluate with a claim whose evidence is that quote; after a pass (or with no evaluations left)
  it submits the step it evaluated. Until then it investigates as the paper's STEP 2 says, from
  the prompt's words only: it reads the earliest step a selective search pointed to and has not
  read, else searches a term it was shown (the final lines first, then the task, then the other
  results), and after a search whose hits crowd too many steps, or with no term left, traces
  backwards by reading the lines before the stretch read from the end; then unread ranges. A
  step its memory notes but the conversation no longer shows is searched for again.
  Wrong: the same, taking a wrong shown step (the error model's) for the fault.
- evaluator (``eval/E/Q``): judges the claim's quoted evidence (text in “ ”): 90 where a quote
  carries the fault's words verbatim (`Ask.quotes_fault`), 20 where the quotes show something
  else, 30 with nothing quoted (no confident verdict). It follows the rubric it is given, as a
  careful model does: a rubric that does not ask for the paper's conditions (a genuine fault, the
  earliest, not corrected later) but only for well-argued, quoted evidence gets 85 for any quote.
  Wrong: the opposite call.
- forced final (``final``): the fault step if the conversation shows its lines, else the step
  its memory notes with a quote that carries the fault, else a blind choice among the admitted
  steps the prompt shows (`Ask.blind_step`). Wrong: another shown step (the error model's).

The mutants live in `localfa.methods.safari.mutants` (they patch the method's machinery, which a
policy module may not import).
"""

from __future__ import annotations

import json
import re
from typing import Any

import regex

from localfa.methods.fencing import fenced_blocks
from localfa.oracle.policy import Ask, Policy, Rule, clip, clip_to, node_ints, schema_choices, schema_ints
from localfa.oracle.prompt import numbered_lines

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
_CLOSED = ("evaluate opens after", "evaluate refused")
_FAILED = "Evaluation: average confidence"
_NONE = "none"

Hit = tuple[int, int, str]  # (line, step, text) of one numbered line a result shows


class _Conversation:
    """What one investigator prompt shows: its calls and their results, the lines read, the search
    hits, the steps shown with their text, the memory block and the task."""

    def __init__(self, ask: Ask) -> None:
        messages = list(ask.request.messages)
        self.exchanges: list[tuple[dict[str, Any], str]] = []  # (call made, the result that followed)
        for a, b in zip(messages, messages[1:]):
            if a.get("role") == "assistant":
                try:
                    call = json.loads(a.get("content", "")).get("tool") or {}
                except (json.JSONDecodeError, AttributeError):
                    call = {}
                self.exchanges.append((call, b.get("content", "")))
        self.calls = [c for c, _ in self.exchanges]
        self.read: set[int] = set()  # steps whose lines a read showed
        self.read_lines: set[int] = set()
        for call, result in self.exchanges:
            if call.get("name") == "read":
                for line, step, _ in numbered_lines(result):
                    self.read.add(step)
                    self.read_lines.add(line)
        self.last = self.exchanges[-1][1] if self.exchanges else ""
        self.shown = ask.shown_steps(ask.text)  # step -> every piece of it any result shows
        self.stm = next((body for label, body in fenced_blocks(ask.prompt) if label == "STM"), "")
        self.past_calls = self.stm.rpartition("past_tool_calls")[2]
        opening = messages[1].get("content", "") if len(messages) > 1 else ""
        # The task is what the TASK block quotes; the prompt's own wording around it is no search term.
        self.task = next((text for label, text in fenced_blocks(opening) if label == "TASK"), opening)

    def noted(self) -> dict[int, str]:
        """The fault steps the STM notes, with the evidence it quotes for each."""
        try:
            stm = json.loads(self.stm.split("\npast_tool_calls", 1)[0]) if self.stm else {}
        except json.JSONDecodeError:
            return {}
        out: dict[int, str] = {}
        for f in stm.get("faults_identified_so_far", []) if isinstance(stm, dict) else []:
            try:
                out[int(f["step_id"])] = str(f.get("evidence", ""))
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def searched(self) -> set[str]:
        return {str(c.get("pattern", "")) for c in self.calls if c.get("name") == "search"}

    def terms(self) -> list[str]:
        """Search terms from what was shown: the final lines first, then the task, then the rest."""
        texts = []
        for _, result in self.exchanges[:1]:
            texts += [t for _, _, t in reversed(numbered_lines(result))]
        texts.append(self.task)
        for _, result in self.exchanges[1:]:
            texts += [t for _, _, t in numbered_lines(result)]
        found = dict.fromkeys(m.group(0) for t in texts for m in _TERM.finditer(t))
        return [t for t in found if t.lower() not in _NOT_TERMS]

    def evaluate_closed(self) -> bool:
        return any(s in self.last for s in _CLOSED)

    def last_evaluated(self) -> int | None:
        """The step the investigator's last evaluate call claimed (what a pass confirms)."""
        for call in reversed(self.calls):
            if call.get("name") == "evaluate":
                found = _STEP_IN.findall(" ".join(call.get("questions", [])))
                return int(found[0]) if found else None
        return None


def _tool_schema(ask: Ask, name: str) -> dict[str, Any]:
    for alt in ask.grammar.spec["properties"]["tool"]["anyOf"]:
        if alt["properties"]["name"]["const"] == name:
            return alt
    raise ValueError(f"the turn grammar has no {name} tool")


# ---- investigating: where a careful reader looks next ----------------------------------------------


def _read_ranges(conv: _Conversation) -> list[tuple[int, int]]:
    """[start, end) of every read the prompt's own calls made (the bootstrap read included): the
    model knows what it read from its calls even after their results were summarised away."""
    out = [(int(offset), int(offset) + int(limit)) for offset, limit in _PAST_READ.findall(conv.past_calls)]
    for call in conv.calls:
        if call.get("name") == "read":
            start = int(call.get("offset", 0))
            out.append((start, start + int(call.get("limit", 0))))
    return out


def _traced_back_to(conv: _Conversation, last_line: int) -> int:
    """The first line of the contiguous stretch the reads cover that ends at the run's end: how
    far the run has been traced backwards."""
    start = last_line + 1
    ranges = _read_ranges(conv)
    while reaching := [lo for lo, hi in ranges if lo < start <= hi]:
        start = min(reaching)
    return start


def _steps_hit(hits: list[Hit]) -> int:
    return len({step for _, step, _ in hits})


def _explore(ask: Ask, conv: _Conversation) -> dict[str, Any]:
    """The next investigating move, built only from what the prompt shows (module doc)."""
    read = _tool_schema(ask, "read")["properties"]
    limit = node_ints(read["limit"])[-1]
    last_line = node_ints(read["offset"])[-1]
    made = {json.dumps(c, sort_keys=True) for c in conv.calls}

    def fresh(call: dict[str, Any]) -> bool:
        return json.dumps(call, sort_keys=True) not in made

    pointed = sorted(
        line
        for call, result in conv.exchanges
        if call.get("name") == "search" and 0 < _steps_hit(hits := numbered_lines(result)) <= SELECTIVE_STEPS
        for line, step, _ in hits
        if step not in conv.read
    )
    for line in pointed:  # the earliest step a selective search pointed to: read around it
        call = {"name": "read", "offset": max(0, line - limit // 4), "limit": limit}
        if fresh(call):
            return call
    traced = _traced_back_to(conv, last_line)
    last_call, last_result = conv.exchanges[-1] if conv.exchanges else ({}, "")
    crowded = last_call.get("name") == "search" and _steps_hit(numbered_lines(last_result)) > SELECTIVE_STEPS
    if traced > 0 and crowded:  # a term found all over the run narrows nothing: read backwards
        return {"name": "read", "offset": max(0, traced - limit), "limit": limit}
    pattern_node = _tool_schema(ask, "search")["properties"]["pattern"]
    searched = conv.searched()
    for term in conv.terms():  # STEP 2: search before reading on (PROHIBITION G: no scanning)
        pattern = clip_to(pattern_node, regex.escape(term))
        if pattern not in searched:
            return {"name": "search", "pattern": pattern}
    if traced > 0:
        return {"name": "read", "offset": max(0, traced - limit), "limit": limit}
    for n in range(0, last_line + 1):  # then whatever is still unread
        call = {"name": "read", "offset": n, "limit": limit}
        if n not in conv.read_lines and fresh(call):
            return call
    return {"name": "search", "pattern": clip_to(pattern_node, f"no-such-text-{len(conv.calls)}")}


def _recall(ask: Ask, conv: _Conversation) -> dict[str, Any] | None:
    """A step the STM notes but the conversation no longer shows: find its lines again (RULE 4's
    search for '"step_id": N')."""
    pattern_node = _tool_schema(ask, "search")["properties"]["pattern"]
    for step in sorted(conv.noted()):
        if step in conv.shown:
            continue
        pattern = clip_to(pattern_node, f'"step_id": {step},')
        if pattern not in conv.searched():
            return {"name": "search", "pattern": pattern}
    return None


# ---- the investigator's turn -------------------------------------------------------------------------


def _quote(ask: Ask, text: str) -> str:
    """What a reader quotes of a step it was shown: the piece that shows the fault, else its opening."""
    return ask.quote_of_fault(text, QUOTE_CHARS) or clip(text.replace("“", "").replace("”", "").strip(), QUOTE_CHARS)


def _stm(ask: Ask, step: int | None, text: str) -> dict[str, Any]:
    """The STM update: the suspected step noted with a verbatim quote of what a result showed."""
    if step is None:
        return {}
    fault = ask.grammar.spec["properties"]["stm"]["properties"]["faults_identified_so_far"]["items"]["properties"]
    if step not in node_ints(fault["step_id"]):
        return {}
    reason = f"Step {step} is where the run first went wrong; nothing later corrected it."
    note = {"step_id": step, "reason": clip_to(fault["reason"], reason), "evidence": clip_to(fault["evidence"], _quote(ask, text))}
    return {"faults_identified_so_far": [note]}


def _answerable(ask: Ask, admitted: list[Any]) -> list[int]:
    """The admitted step ids the request shows (an honest answer names nothing else)."""
    return [s for s in admitted if isinstance(s, int) and s in ask.shown_ids]


def _submit(ask: Ask, conv: _Conversation, suspect: int | None) -> dict[str, Any]:
    """submit_step after a pass (or with no evaluations left): the step evaluated, else the suspect,
    else a blind choice among the shown steps it may name."""
    submit = _tool_schema(ask, "submit_step")["properties"]
    admitted = node_ints(submit["step_id"])
    pool = _answerable(ask, admitted) or admitted
    evaluated = conv.last_evaluated()
    if evaluated in pool:
        target: int | str = evaluated
    elif suspect in pool:
        target = suspect
    elif ask.no_fault and _NONE in [c for c in _choices(submit["step_id"]) if isinstance(c, str)]:
        target = _NONE
    else:
        target = ask.blind_step(pool)
    reasoning = clip_to(submit["reasoning"], f"Step {target} is the decisive mistake; the evaluation confirmed it.")
    return {"name": "submit_step", "reasoning": reasoning, "step_id": target}


def _choices(node: dict[str, Any]) -> list[Any]:
    return [alt.get("const") for alt in node.get("anyOf", []) if "const" in alt]


def _evaluate(ask: Ask, step: int, text: str) -> dict[str, Any]:
    ev = _tool_schema(ask, "evaluate")["properties"]
    quote = _quote(ask, text)
    questions = [
        f"Does the quoted action at step {step} show the decisive mistake?",
        f"Is step {step} the first wrong step of the run?",
        f"Was the error at step {step} never corrected by a later step?",
    ][: int(ev["questions"].get("maxItems", 3))]
    reasoning = clip_to(ev["reasoning"], f"At step {step} the run shows: “{quote}”. That is the decisive error at step {step}.")
    return {"name": "evaluate", "questions": [clip_to(ev["questions"]["items"], q) for q in questions], "reasoning": reasoning}


def _turn_for(ask: Ask, conv: _Conversation, suspect: int | None, seen_at: int | None = None) -> dict[str, Any]:
    """A turn that takes `suspect` (a step the conversation shows, or None) for the fault, seen in
    the lines of `seen_at` (the suspect itself by default)."""
    where = suspect if seen_at is None else seen_at
    text = conv.shown.get(where, "") if where is not None else ""
    if _PASSED in conv.last or any(s in conv.last for s in _NO_EVALUATIONS_LEFT):
        tool = _submit(ask, conv, suspect)
        action, analysis = f"Submit step {tool['step_id']}.", f"The evaluation backs step {tool['step_id']}."
    elif suspect is not None and not conv.evaluate_closed() and _FAILED not in conv.last:
        tool = _evaluate(ask, suspect, text)
        action, analysis = f"Evaluate the hypothesis that step {suspect} is the mistake.", f"Step {suspect} reads: {_quote(ask, text)}"
    else:
        tool = (None if conv.evaluate_closed() else _recall(ask, conv)) or _explore(ask, conv)
        action = "Trace the failure back through the run."
        analysis = "The final output was: as the last lines show. The task required: as stated. The failure is: to be traced."
    out: dict[str, Any] = {}
    props = ask.grammar.spec["properties"]
    if "analysis" in props:
        out["analysis"] = clip_to(props["analysis"], analysis)
    if "stm" in props:
        out["stm"] = _stm(ask, suspect, text)
    out["next_action"] = clip_to(props["next_action"], action)
    out["tool"] = tool
    return out


def _acting(step: int | None, shown: dict[int, str] | list[int], admitted: list[int]) -> int | None:
    """The step to blame for a fault shown at `step`: itself where it may be answered, else (a
    record the prompt marks as an observation, which "cannot be the answer") the nearest shown
    step before it that may be, whose action produced it."""
    if step is None or step in admitted:
        return step
    before = [s for s in shown if s < step and s in admitted]
    return max(before) if before else step


def _turn(ask: Ask) -> dict[str, Any]:
    conv = _Conversation(ask)
    found = ask.fault_id(conv.shown)
    admitted = node_ints(_tool_schema(ask, "submit_step")["properties"]["step_id"])
    return _turn_for(ask, conv, _acting(found, conv.shown, admitted), found)


def _turn_wrong(ask: Ask) -> dict[str, Any]:
    conv = _Conversation(ask)
    honest = ask.fault_id(conv.shown)
    return _turn_for(ask, conv, ask.wrong_step(sorted(conv.shown), honest, conv.shown) if conv.shown else None)


# ---- the evaluator ----------------------------------------------------------------------------------


def _asks_for_a_fault(ask: Ask) -> bool:
    """Whether the evaluator's rubric asks if the claim shows a decisive mistake (the paper's
    conditions: a genuine fault, the earliest, not corrected later), not only whether it is argued
    well: a careful model follows the rubric it is given."""
    words = ask.text.lower()
    return "earliest" in words and ("genuine" in words or "corrected" in words)


def _judged(ask: Ask) -> tuple[int, str]:
    """(score, feedback) for the claim, from the evidence its reasoning quotes, as the rubric asks."""
    reasoning = ask.fenced("REASONING") or ask.prompt.rpartition("Question to check:")[0]
    quotes = [q.strip(" .") for q in _QUOTED.findall(reasoning)]
    if not quotes:
        return 30, "The reasoning quotes nothing from the run: the claim cannot be checked."
    if not _asks_for_a_fault(ask):  # a rubric of form: quoted, specific evidence scores high
        return 85, "The claim quotes specific evidence."
    if any(ask.quotes_fault(q) for q in quotes):
        return 90, "The quoted evidence shows the mistake the claim asserts."
    return 20, "The quoted evidence does not show the mistake the claim asserts."


def _eval(ask: Ask) -> dict[str, Any]:
    score, text = _judged(ask)
    return {"feedback": clip_to(ask.grammar.spec["properties"]["feedback"], text), "score": score}


def _eval_wrong(ask: Ask) -> dict[str, Any]:
    score, _ = _judged(ask)
    flipped = 20 if score >= 70 else 90
    return {"feedback": clip_to(ask.grammar.spec["properties"]["feedback"], "A verdict the evidence does not bear out."), "score": flipped}


# ---- the forced final ----------------------------------------------------------------------------------


def _final_answer(ask: Ask, step: int | str) -> dict[str, Any]:
    reasoning = ask.grammar.spec["properties"]["reasoning"]
    return {"reasoning": clip_to(reasoning, f"Step {step} is the decisive mistake."), "step_id": step}


def _final_pick(ask: Ask) -> tuple[int | str, list[int]]:
    """(the honest final answer, the shown steps it may name)."""
    admitted = schema_ints(ask.grammar, "step_id")
    pool = _answerable(ask, admitted) or admitted
    conv = _Conversation(ask)
    found = _acting(ask.fault_id(conv.shown), pool, pool)
    if found in pool:
        return found, pool
    remembered = [s for s, evidence in conv.noted().items() if s in pool and ask.quotes_fault(evidence)]
    if remembered:
        return remembered[0], pool
    if ask.no_fault and _NONE in schema_choices(ask.grammar, "step_id"):
        return _NONE, pool
    return ask.blind_step(pool), pool


def _final(ask: Ask) -> dict[str, Any]:
    return _final_answer(ask, _final_pick(ask)[0])


def _final_wrong(ask: Ask) -> dict[str, Any]:
    honest, pool = _final_pick(ask)
    return _final_answer(ask, ask.wrong_step(pool, honest if isinstance(honest, int) else None))


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
            says="notes and evaluates the step a result showed with the fault's words, quoting them; until then reads what selective searches pointed to, searches terms it was shown, traces backwards from the end; submits after a pass",
            wrong_says="the same, taking another shown step (the error model's) for the fault",
        ),
        Rule(
            "evaluator",
            r"eval/\d+/\d+",
            _eval,
            _eval_wrong,
            says="90 where the claim's quoted evidence carries the fault's words, 20 for other quotes, 30 with no quote",
            wrong_says="the opposite call",
        ),
        Rule(
            "forced final",
            r"final",
            _final,
            _final_wrong,
            says="the step shown with the fault's words, else the step its memory notes quoting them, else a blind choice among shown steps",
            wrong_says="another shown step (the error model's)",
        ),
    ],
    dropped_at=_dropped,
)
