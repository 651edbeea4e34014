"""SAFARI's oracle policy (`localfa.oracle.policy`): what a careful investigator that knows the
labelled decisive step does at each turn, what a careful evaluator answers, and their wrong twins.

- investigator turn (``turn/K``): the K-th distinct read or search of the run (a search for the
  labelled step's record first, then its neighbours', then single-line reads), until the system
  prompt's minimum of read/search turns is met; then ``evaluate`` with three claims about the
  labelled step, quoting it verbatim; once the evaluation passed, ``submit_step`` of the labelled
  step (reasoning first). Every turn notes the labelled step in the STM with a verbatim quote, once
  a tool result has shown it. Wrong: the same move about a nearby step.
- evaluator (``eval/E/Q``): a claim about the labelled step scores 90, a claim about any other
  step 15 (the labels decide). Wrong: the opposite score.
- forced final (``final``): the labelled step if the grammar admits it (a step seen), else the
  nearest one admitted. Wrong: another admitted step nearby.
"""

from __future__ import annotations

import re
from typing import Any

from localfa.oracle.policy import Ask, Policy, Rule, clip, clip_to, nearby_other, nearest, node_ints, schema_ints

_MIN_INVESTIGATE = re.compile(r"you need at least (\d+) turns of read or search before your first evaluate")
_SHOWN = re.compile(r"^\s*\d+ \(step (\d+)\)\| ", re.MULTILINE)
_STEP_IN = re.compile(r"\bstep (\d+)\b", re.IGNORECASE)
QUOTE_CHARS = 160


def _tool_schema(ask: Ask, name: str) -> dict[str, Any]:
    for alt in ask.grammar.spec["properties"]["tool"]["anyOf"]:
        if alt["properties"]["name"]["const"] == name:
            return alt
    raise ValueError(f"the turn grammar has no {name} tool")


def _quote(ask: Ask, step: int) -> str:
    """A verbatim piece of the step's own text (what a careful model quotes)."""
    content = ask.trace.steps[step].content.strip() or ask.trace.steps[step].agent or f"step {step}"
    return clip(content, QUOTE_CHARS)


def _seen(ask: Ask) -> set[int]:
    """Steps whose lines the conversation shows (tool results still in the prompt)."""
    return {int(m) for m in _SHOWN.findall(ask.text)}


def _investigation(ask: Ask, index: int, target: int) -> dict[str, Any]:
    """The `index`-th distinct read/search around `target`: its record, then its neighbours'."""
    n = len(ask.trace.steps)
    order = sorted(range(n), key=lambda s: (abs(s - target), s))
    if index < len(order):
        pattern = clip_to(_tool_schema(ask, "search")["properties"]["pattern"], f'"step_id": {order[index]},')
        return {"name": "search", "pattern": pattern}
    read = _tool_schema(ask, "read")["properties"]
    offset = min(index - len(order), node_ints(read["offset"])[-1])
    return {"name": "read", "offset": offset, "limit": 1}


def _stm(ask: Ask, step: int) -> dict[str, Any]:
    """The STM update: the step noted with a verbatim quote once a tool result has shown it."""
    if "stm" not in ask.grammar.spec["properties"] or step not in _seen(ask):
        return {}
    fault = ask.grammar.spec["properties"]["stm"]["properties"]["faults_identified_so_far"]["items"]["properties"]
    if step not in node_ints(fault["step_id"]):
        return {}
    return {
        "faults_identified_so_far": [
            {
                "step_id": step,
                "reason": clip_to(fault["reason"], f"Step {step} is where the run first went wrong; nothing later corrected it."),
                "evidence": clip_to(fault["evidence"], _quote(ask, step)),
            }
        ]
    }


def _turn_for(ask: Ask, step: int) -> dict[str, Any]:
    """An investigator turn about `step`: investigate, then evaluate, then submit."""
    last = ask.prompt
    k = ask.key_ints()[-1]
    m = _MIN_INVESTIGATE.search(ask.text)
    needed = int(m.group(1)) if m else 0
    if "Your hypothesis holds" in last or "evaluations. Submit your best answer" in last:
        submit = _tool_schema(ask, "submit_step")["properties"]
        target = nearest(node_ints(submit["step_id"]), step)
        reasoning = clip_to(submit["reasoning"], f"Step {step} is the decisive mistake; the evaluation confirmed it.")
        tool: dict[str, Any] = {"name": "submit_step", "reasoning": reasoning, "step_id": target}
        action = f"Submit step {target}."
    elif k > needed and "evaluate refused" not in last:
        ev = _tool_schema(ask, "evaluate")["properties"]
        quote = _quote(ask, step)
        questions = [
            f"Does the quoted action at step {step} show the decisive mistake?",
            f"Is step {step} the first wrong step of the run?",
            f"Was the error at step {step} never corrected by a later step?",
        ][: int(ev["questions"].get("maxItems", 3))]
        questions = [clip_to(ev["questions"]["items"], q) for q in questions]
        reasoning = clip_to(ev["reasoning"], f"At step {step} the agent wrote '{quote}'. That is the decisive error at step {step}.")
        tool = {"name": "evaluate", "questions": questions, "reasoning": reasoning}
        action = f"Evaluate the hypothesis that step {step} is the mistake."
    else:
        tool = _investigation(ask, k - 1, step)
        action = f"Look at the steps around step {step}."
    out: dict[str, Any] = {}
    if "stm" in ask.grammar.spec["properties"]:
        out["stm"] = _stm(ask, step)
    out["next_action"] = clip_to(ask.grammar.spec["properties"]["next_action"], action)
    out["tool"] = tool
    return out


def _turn(ask: Ask) -> dict[str, Any]:
    return _turn_for(ask, ask.mistake_step)


def _turn_wrong(ask: Ask) -> dict[str, Any]:
    return _turn_for(ask, nearby_other(range(len(ask.trace.steps)), ask.mistake_step, ask.rng))


def _question_true(ask: Ask) -> bool:
    """Is the claim about the labelled step? (The question names the step it is about.)"""
    question = ask.prompt.rsplit("Question to check:", 1)[-1]
    steps = {int(s) for s in _STEP_IN.findall(question)}
    return ask.mistake_step in steps


def _verdict(ask: Ask, true: bool) -> dict[str, Any]:
    feedback = ask.grammar.spec["properties"]["feedback"]
    text = "The reasoning quotes the step and supports the claim." if true else "The claim is about a step the evidence does not implicate."
    return {"feedback": clip_to(feedback, text), "score": 90 if true else 15}


def _eval(ask: Ask) -> dict[str, Any]:
    return _verdict(ask, _question_true(ask))


def _eval_wrong(ask: Ask) -> dict[str, Any]:
    return _verdict(ask, not _question_true(ask))


def _final_answer(ask: Ask, step: int) -> dict[str, Any]:
    reasoning = ask.grammar.spec["properties"]["reasoning"]
    return {"reasoning": clip_to(reasoning, f"Step {step} is the decisive mistake."), "step_id": step}


def _final(ask: Ask) -> dict[str, Any]:
    return _final_answer(ask, nearest(schema_ints(ask.grammar, "step_id"), ask.mistake_step))


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
            says="distinct searches around the labelled step until the minimum is met, then evaluate it, then submit it",
            wrong_says="the same move about a step within 3 of it",
        ),
        Rule(
            "evaluator",
            r"eval/\d+/\d+",
            _eval,
            _eval_wrong,
            says="90 for a claim about the labelled step, 15 for any other",
            wrong_says="the opposite score",
        ),
        Rule(
            "forced final",
            r"final",
            _final,
            _final_wrong,
            says="the labelled step if seen, else the nearest step seen",
            wrong_says="another seen step within 3 of it",
        ),
    ],
    dropped_at=_dropped,
)
