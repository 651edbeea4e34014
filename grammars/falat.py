"""FALAT's grammars: the prior, a window's two summary levels, a transition label, a verdict,
and the local re-search.

Built per trace (and per window) so the orderings the method relies on hold by construction:

- a window's mid level is one object per step of THAT window, keyed by the step's index, in
  order; each carries the step's own agent as a constant, so no step can be skipped, repeated,
  invented or given to the wrong agent; the high level's focus step is one of the window's steps;
- a transition is one of the six labels, nothing else;
- the re-search answers every step of its window and a ranking that is a permutation of exactly
  those step ids (an enum of the permutations: the window has at most 5 steps, 120 orders).

Every free string is bounded, every bound is stated in the prompt that asks for it, and
`*_max_tokens` size the answer for the longest text admitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Any, Sequence

from localfa.engine.grammar import Grammar

TRANSITION_LABELS: tuple[str, ...] = ("follow_up", "redundancy", "no_influence", "error_shift", "correction", "dead_end")
ROLES: tuple[str, ...] = ("ROOT_CAUSE", "PROPAGATION", "SYMPTOM", "CONTRIBUTING")
SIGNIFICANCE_MAX = 3  # a step's significance for the outcome: 0 (none) .. 3 (the result depends on it)
SIGNALS: tuple[str, ...] = ("outcome_relevance", "prior_inconsistency", "execution_inconsistency")
RESEARCH_MAX_STEPS = 5  # t̂-2 .. t̂+2


@dataclass(frozen=True)
class FalatLimits:
    """Bounds on every string and list the model writes; the prompts state each of them."""

    plan_chars: int = 300
    answer_chars: int = 120
    requirement_chars: int = 100
    requirements: int = 3
    action_chars: int = 80
    decision_chars: int = 80
    stage_chars: int = 160
    reasons_chars: int = 240
    quote_chars: int = 120
    argument_chars: int = 100


def _text(max_chars: int, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


def _closed(props: dict[str, Any], title: str | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", "properties": props, "required": list(props)}
    if title:
        node["title"] = title
    return node


def _max_tokens(chars: int) -> int:
    """First-attempt room: two characters a token. The engine's one retry doubles it, which
    covers one token per character, the worst case any bounded string can take."""
    return chars // 2 + 32


# ---- stage 1: the prior ---------------------------------------------------------------------


def prior_grammar(limits: FalatLimits, with_answer: bool) -> Grammar:
    """Expected plan, expected answer (only when the trace gives none), what a correct run must do."""
    props: dict[str, Any] = {"expected_plan": _text(limits.plan_chars)}
    if with_answer:
        props["expected_answer"] = _text(limits.answer_chars)
    props["must_do"] = {"type": "array", "items": _text(limits.requirement_chars), "minItems": 1, "maxItems": limits.requirements}
    return Grammar.json(_closed(props, "falat_prior"), name="falat_prior")


def prior_max_tokens(limits: FalatLimits) -> int:
    chars = limits.plan_chars + limits.answer_chars + limits.requirements * (limits.requirement_chars + 3) + 60
    return _max_tokens(chars)


# ---- stage 1: a window's mid and high levels -------------------------------------------------


def window_grammar(steps: Sequence[tuple[int, str]], limits: FalatLimits) -> Grammar:
    """Mid level for exactly the window's steps `(index, agent)`, in order, and its stage summary."""
    if not steps:
        raise ValueError("a window has at least one step")
    mid = {
        str(i): _closed(
            {
                "agent": {"const": agent},
                "action": _text(limits.action_chars),
                "decision": _text(limits.decision_chars),
                "significance": {"type": "integer", "minimum": 0, "maximum": SIGNIFICANCE_MAX},
                **{s: {"type": "boolean"} for s in SIGNALS},
            }
        )
        for i, agent in steps
    }
    high = _closed({"summary": _text(limits.stage_chars), "focus_step": {"enum": [i for i, _ in steps]}})
    return Grammar.json(_closed({"steps": _closed(mid), "stage": high}, "falat_window"), name="falat_window")


def window_max_tokens(steps: Sequence[tuple[int, str]], limits: FalatLimits) -> int:
    per_step = limits.action_chars + limits.decision_chars + 150
    chars = sum(per_step + len(agent) for _, agent in steps) + limits.stage_chars + 60
    return _max_tokens(chars)


# ---- stage 2: a transition label -------------------------------------------------------------


def transition_grammar() -> Grammar:
    return Grammar.choice(list(TRANSITION_LABELS), name="falat_transition")


TRANSITION_MAX_TOKENS = 8


# ---- stage 3: verification -------------------------------------------------------------------


def verify_grammar(limits: FalatLimits) -> Grammar:
    """Reasons first, then a verbatim quote, then the two verdicts."""
    props = {
        "reasons": _text(limits.reasons_chars),
        "quote": _text(limits.quote_chars),
        "error_independence": {"type": "boolean"},
        "counterfactual_sufficiency": {"type": "boolean"},
    }
    return Grammar.json(_closed(props, "falat_verify"), name="falat_verify")


def verify_max_tokens(limits: FalatLimits) -> int:
    return _max_tokens(limits.reasons_chars + limits.quote_chars + 100)


# ---- stage 4: local re-search ----------------------------------------------------------------


def research_grammar(step_ids: Sequence[int], limits: FalatLimits) -> Grammar:
    """For and against plus a role for every window step, then a permutation of those ids."""
    ids = list(step_ids)
    if not 1 <= len(ids) <= RESEARCH_MAX_STEPS:
        raise ValueError(f"a re-search window has 1..{RESEARCH_MAX_STEPS} steps, got {len(ids)}")
    per_step = {
        str(i): _closed({"for": _text(limits.argument_chars), "against": _text(limits.argument_chars), "role": {"enum": list(ROLES)}})
        for i in ids
    }
    ranking = {"enum": [list(p) for p in permutations(ids)]}
    return Grammar.json(_closed({"steps": _closed(per_step), "ranking": ranking}, "falat_research"), name="falat_research")


def research_max_tokens(n_steps: int, limits: FalatLimits) -> int:
    chars = n_steps * (2 * limits.argument_chars + 60) + n_steps * 8 + 40
    return _max_tokens(chars)
