"""SAFARI's grammars: the investigator's turn, the evaluator's verdict, the forced final answer.

The turn grammar makes one object per model call: first a free analysis (the paper's RULE 0,
"think before every tool call"; the opening turn's is its STEP 1 write-up), then a sparse STM
update, one sentence of next action, and exactly one tool call with its real parameter names. Offsets can only fall inside
the trace, `limit` is bounded, `step_id` can only be a real step and at most E questions can be
asked, so the paper's prohibitions on wrong parameter names, several calls per turn, invented
step ids and empty submissions hold by construction.

Every bound here is also stated in the prompt the model sees (`SafariLimits` is passed to the
templates), and each is large enough for the paper's own examples: its example claim question
is ~250 characters, its evaluate reasoning ~600, its `final_output` ~300.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from localfa.engine.grammar import Grammar
from localfa.methods.none_answer import step_or_none

#: Characters per output token assumed when sizing max_tokens: JSON text from a chat model runs
#: 3-4 characters a token; 3 leaves room.
OUTPUT_CHARS_PER_TOKEN = 3


@dataclass(frozen=True)
class SafariLimits:
    """Bounds on free text; they size max_tokens and are all stated in the prompts."""

    analysis_chars: int = 1500  # each turn's thinking, first (0: no analysis field)
    note_chars: int = 400  # task_goal, final_output
    reason_chars: int = 600  # a fault entry's reason (the three conditions + counterfactual)
    evidence_chars: int = 300  # the paper's "verbatim quote <= 300 chars"
    faults_per_turn: int = 1
    # The STM's fault list rides on every prompt and is never evicted: at most this many entries;
    # past it the entry at the latest step goes (the answer is the earliest decisive fault).
    max_faults: int = 8
    still_need_items: int = 3
    still_need_chars: int = 200
    next_action_chars: int = 300
    pattern_chars: int = 200
    max_questions: int = 3  # E
    question_chars: int = 400
    reasoning_chars: int = 1500  # evaluate reasoning: it must quote the evidence
    submit_reasoning_chars: int = 800
    # The evaluator's feedback: the paper's three examples (Appendix E) run 878-1,261 characters.
    feedback_chars: int = 2000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if int(value) < (0 if name == "analysis_chars" else 1):
                raise ValueError(f"{name} must be at least {0 if name == 'analysis_chars' else 1}")
        if self.question_chars < 5 or self.reasoning_chars < 10:
            raise ValueError("question_chars must be at least 5 and reasoning_chars at least 10")

    def stm_chars(self) -> int:
        """The longest STM update the grammar admits, keys and punctuation included."""
        fault = self.reason_chars + self.evidence_chars + 60
        return 2 * self.note_chars + self.faults_per_turn * fault + self.still_need_items * (self.still_need_chars + 4) + 120

    def tool_chars(self) -> int:
        evaluate = self.max_questions * (self.question_chars + 4) + self.reasoning_chars + 60
        return max(evaluate, self.submit_reasoning_chars + 60, self.pattern_chars + 40) + 20

    def turn_max_tokens(self, with_stm: bool = True) -> int:
        """A token allowance that fits the longest turn the grammar admits."""
        analysis = self.analysis_chars + 20 if self.analysis_chars else 0
        chars = analysis + (self.stm_chars() if with_stm else 0) + self.next_action_chars + self.tool_chars() + 60
        return chars // OUTPUT_CHARS_PER_TOKEN + 64

    def verdict_max_tokens(self) -> int:
        return (self.feedback_chars + 40) // OUTPUT_CHARS_PER_TOKEN + 32

    def final_max_tokens(self) -> int:
        return (self.submit_reasoning_chars + 60) // OUTPUT_CHARS_PER_TOKEN + 32


def _text(max_chars: int, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


StepIds = int | Sequence[int]


def _step(steps: StepIds) -> dict[str, Any]:
    """A step id among `steps` (ids), or any of 0..steps-1 when given a count."""
    ids = sorted(set(range(steps) if isinstance(steps, int) else steps)) or [0]
    if ids == list(range(ids[0], ids[-1] + 1)):
        return {"type": "integer", "minimum": ids[0], "maximum": ids[-1]}
    return {"type": "integer", "enum": ids}


def stm_update_schema(n_steps: StepIds, limits: SafariLimits) -> dict[str, Any]:
    """The sparse STM update: every key optional; at most `faults_per_turn` fault entries."""
    fault = {
        "type": "object",
        "properties": {"step_id": _step(n_steps), "reason": _text(limits.reason_chars), "evidence": _text(limits.evidence_chars)},
        "required": ["step_id", "reason", "evidence"],
    }
    return {
        "type": "object",
        "properties": {
            "task_goal": _text(limits.note_chars),
            "final_output": _text(limits.note_chars),
            "faults_identified_so_far": {"type": "array", "items": fault, "maxItems": limits.faults_per_turn},
            "still_need": {"type": "array", "items": _text(limits.still_need_chars), "maxItems": limits.still_need_items},
        },
        "required": [],
    }


def tool_schemas(n_steps: StepIds, total_lines: int, max_read: int, limits: SafariLimits, allow_none: bool = False) -> list[dict[str, Any]]:
    last_line = max(0, total_lines - 1)
    return [
        {
            "type": "object",
            "properties": {
                "name": {"const": "read"},
                "offset": {"type": "integer", "minimum": 0, "maximum": last_line},
                "limit": {"type": "integer", "minimum": 1, "maximum": max(1, max_read)},
            },
            "required": ["name", "offset", "limit"],
        },
        {
            "type": "object",
            "properties": {"name": {"const": "search"}, "pattern": _text(limits.pattern_chars)},
            "required": ["name", "pattern"],
        },
        {
            "type": "object",
            "properties": {
                "name": {"const": "evaluate"},
                "questions": {"type": "array", "items": _text(limits.question_chars, 5), "minItems": 1, "maxItems": limits.max_questions},
                "reasoning": _text(limits.reasoning_chars, 10),
            },
            "required": ["name", "questions", "reasoning"],
        },
        {
            "type": "object",
            # Justify, then commit: the reasoning comes before the step it argues for.
            "properties": {
                "name": {"const": "submit_step"},
                "reasoning": _text(limits.submit_reasoning_chars),
                "step_id": step_or_none(_step(n_steps), allow_none),  # "none": no decisive error, where allowed
            },
            "required": ["name", "reasoning", "step_id"],
        },
    ]


def turn_grammar(
    n_steps: StepIds, total_lines: int, max_read: int, limits: SafariLimits, with_stm: bool = True, allow_none: bool = False
) -> Grammar:
    """One investigator turn over a trace of `total_lines` lines; step ids among `n_steps` (the
    action steps' ids, or a step count); where `allow_none`, submit_step may name ``"none"``."""
    props: dict[str, Any] = {}
    required = []
    if limits.analysis_chars:  # thinking first, before anything it decides
        props["analysis"] = _text(limits.analysis_chars)
        required.append("analysis")
    if with_stm:
        props["stm"] = stm_update_schema(n_steps, limits)
        required.append("stm")
    props["next_action"] = _text(limits.next_action_chars)
    props["tool"] = {"anyOf": tool_schemas(n_steps, total_lines, max_read, limits, allow_none)}
    required += ["next_action", "tool"]
    schema = {"title": "safari_turn", "type": "object", "properties": props, "required": required}
    return Grammar.json(schema, name="safari_turn")


def evaluator_grammar(limits: SafariLimits) -> Grammar:
    """The evaluator's verdict on one claim: feedback first (its reasons), then the score."""
    schema = {
        "title": "safari_verdict",
        "type": "object",
        "properties": {"feedback": _text(limits.feedback_chars), "score": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["feedback", "score"],
    }
    return Grammar.json(schema, name="safari_verdict")


def final_grammar(n_steps: StepIds, limits: SafariLimits, allow_none: bool = False) -> Grammar:
    """Forced finalisation: must name one of `n_steps` (the steps it may still answer), or
    ``"none"`` where `allow_none`."""
    schema = {
        "title": "safari_final",
        "type": "object",
        "properties": {"reasoning": _text(limits.submit_reasoning_chars), "step_id": step_or_none(_step(n_steps), allow_none)},
        "required": ["reasoning", "step_id"],
    }
    return Grammar.json(schema, name="safari_final")
