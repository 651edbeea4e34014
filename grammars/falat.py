"""FALAT's grammars: the prior, a window's stage summary and its mid level, a pair label, a
candidate's judged rating, a verdict, and the local re-search.

Built per trace (and per window) so the orderings the method relies on hold by construction:

- a window's mid level is one object per step of THAT window, keyed by the step's index, in
  order; each carries the step's own agent as a constant, so no step can be skipped, repeated,
  invented or given to the wrong agent; a step that cannot be an answer (an observation, a human
  turn) has ``active`` fixed to false; a stage's focus step is one of the window's answerable steps;
- a links answer is one entry per listed pair (``"i>j"``), each a short reason, then one of the
  six labels; a rating answer one entry per listed candidate; ratings and verdicts reason first,
  then decide (the verdict's quote comes last);
- the re-search argues every step of its window and ranks a permutation of exactly the steps of
  that window that may be the answer (an enum: at most 5 steps, 120 orders).

Every free string is bounded, every bound is an option (`FalatLimits`, part of FalatOptions) and is
stated in the prompt that asks for it; `*_max_tokens` size the answer for the longest text admitted.
The defaults are sized for a strong model; the embedded model's profile carries smaller ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from itertools import permutations
from typing import Any, Sequence

from localfa.engine.grammar import Grammar

TRANSITION_LABELS: tuple[str, ...] = ("follow_up", "redundancy", "no_influence", "error_shift", "correction", "dead_end")
ROLES: tuple[str, ...] = ("ROOT_CAUSE", "PROPAGATION", "SYMPTOM", "CONTRIBUTING")
SUSPICION_MAX = 10  # the judged ranking's suspicion scale: 0 (clearly not the error) .. 10 (certainly it)
SIGNALS: tuple[str, ...] = ("outcome_relevance", "prior_inconsistency", "execution_inconsistency")
RANK_SIGNALS: tuple[str, ...] = ("incorrect_execution", "unsupported_information", "affects_later")
RESEARCH_RADIUS = 2  # the re-search neighbourhood t̂-2 .. t̂+2 (the paper's), also the widest verification reach
RESEARCH_MAX_STEPS = 2 * RESEARCH_RADIUS + 1


@dataclass(frozen=True)
class FalatLimits:
    """Bounds on every string and list the model writes (characters); the prompts state each."""

    plan_chars: int = 1200
    answer_chars: int = 600
    requirement_chars: int = 240
    requirements: int = 5
    action_chars: int = 200
    decision_chars: int = 200
    stage_chars: int = 400
    pair_reason_chars: int = 300
    rank_reason_chars: int = 600
    analysis_chars: int = 1200
    quote_chars: int = 300
    argument_chars: int = 300

    def __post_init__(self) -> None:
        for f in fields(FalatLimits):
            lo, hi = (1, 16) if f.name == "requirements" else (20, 8000)
            if not lo <= getattr(self, f.name) <= hi:
                raise ValueError(f"falat: {f.name} must be in {lo}..{hi}")


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


def _focus(eligible: Sequence[int]) -> dict[str, Any]:
    """A focus step among `eligible` (null only when the window has none that may be an answer)."""
    return {"enum": list(eligible) or [None]}


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


# ---- stage 1: a window's stage summary (high level) and mid level -----------------------------


def _stage(eligible: Sequence[int], limits: FalatLimits) -> dict[str, Any]:
    return _closed({"summary": _text(limits.stage_chars), "focus_step": _focus(eligible)})


def window_grammar(steps: Sequence[tuple[int, str]], eligible: Sequence[int], limits: FalatLimits, with_stage: bool) -> Grammar:
    """Mid level for exactly the window's steps `(index, agent)`, in order; `active` is fixed to
    false for a step not in `eligible`; the stage summary too when `with_stage`."""
    if not steps:
        raise ValueError("a window has at least one step")
    ok = set(eligible)
    mid = {
        str(i): _closed(
            {
                "agent": {"const": agent},
                "action": _text(limits.action_chars),
                "decision": _text(limits.decision_chars),
                "active": {"type": "boolean"} if i in ok else {"const": False},
                **{s: {"type": "boolean"} for s in SIGNALS},
            }
        )
        for i, agent in steps
    }
    props: dict[str, Any] = {"steps": _closed(mid)}
    if with_stage:
        props["stage"] = _stage([i for i, _ in steps if i in ok], limits)
    return Grammar.json(_closed(props, "falat_window"), name="falat_window")


def window_max_tokens(steps: Sequence[tuple[int, str]], limits: FalatLimits) -> int:
    per_step = limits.action_chars + limits.decision_chars + 150
    chars = sum(per_step + len(agent) for _, agent in steps) + limits.stage_chars + 60
    return _max_tokens(chars)


# ---- stage 2: the typed links of a group of candidates -----------------------------------------


def pair_key(i: int, j: int) -> str:
    """A link's key in a links answer: ``"3>7"`` (earlier step, then later step)."""
    return f"{i}>{j}"


def links_grammar(pairs: Sequence[tuple[int, int]], limits: FalatLimits) -> Grammar:
    """For exactly the listed pairs, in order: a short reason, then one of the six labels."""
    if not pairs:
        raise ValueError("a links request types at least one pair")
    link = _closed({"reason": _text(limits.pair_reason_chars), "label": {"enum": list(TRANSITION_LABELS)}})
    props = {"links": _closed({pair_key(i, j): link for i, j in pairs})}
    return Grammar.json(_closed(props, "falat_links"), name="falat_links")


def links_max_tokens(n_pairs: int, limits: FalatLimits) -> int:
    return _max_tokens(n_pairs * (limits.pair_reason_chars + 50) + 20)


# ---- stage 3: the judged ranking and verification ---------------------------------------------


def rank_grammar(steps: Sequence[int], limits: FalatLimits) -> Grammar:
    """Per candidate of the group, in order: the analysis, the three ranking signals, then the
    suspicion on the bounded scale."""
    if not steps:
        raise ValueError("a rating request rates at least one step")
    props: dict[str, Any] = {"analysis": _text(limits.rank_reason_chars)}
    props.update({s: {"type": "boolean"} for s in RANK_SIGNALS})
    props["suspicion"] = {"type": "integer", "minimum": 0, "maximum": SUSPICION_MAX}
    rating = _closed(props)
    return Grammar.json(_closed({"ratings": _closed({str(i): rating for i in steps})}, "falat_rank"), name="falat_rank")


def rank_max_tokens(n_steps: int, limits: FalatLimits) -> int:
    return _max_tokens(n_steps * (limits.rank_reason_chars + 140) + 20)


def verify_grammar(limits: FalatLimits) -> Grammar:
    """The analysis first, then the two verdicts, then a verbatim quote."""
    props = {
        "analysis": _text(limits.analysis_chars),
        "error_independence": {"type": "boolean"},
        "counterfactual_sufficiency": {"type": "boolean"},
        "quote": _text(limits.quote_chars),
    }
    return Grammar.json(_closed(props, "falat_verify"), name="falat_verify")


def verify_max_tokens(limits: FalatLimits) -> int:
    return _max_tokens(limits.analysis_chars + limits.quote_chars + 100)


# ---- stage 4: local re-search ----------------------------------------------------------------


def research_grammar(step_ids: Sequence[int], rankable: Sequence[int], limits: FalatLimits) -> Grammar:
    """For and against plus a role for every window step, then a permutation of the `rankable` ones."""
    ids = list(step_ids)
    if not 1 <= len(ids) <= RESEARCH_MAX_STEPS:
        raise ValueError(f"a re-search window has 1..{RESEARCH_MAX_STEPS} steps, got {len(ids)}")
    ranked = [i for i in ids if i in set(rankable)]
    if not ranked:
        raise ValueError("a re-search window needs at least one step that may be the answer")
    per_step = {
        str(i): _closed({"for": _text(limits.argument_chars), "against": _text(limits.argument_chars), "role": {"enum": list(ROLES)}})
        for i in ids
    }
    ranking = {"enum": [list(p) for p in permutations(ranked)]}
    return Grammar.json(_closed({"steps": _closed(per_step), "ranking": ranking}, "falat_research"), name="falat_research")


def research_max_tokens(n_steps: int, limits: FalatLimits) -> int:
    chars = n_steps * (2 * limits.argument_chars + 60) + n_steps * 8 + 40
    return _max_tokens(chars)
