"""The baselines' oracle policies (`localfa.oracle.policy`): what a careful model that knows the
labelled decisive step answers to each baseline prompt, and what its wrong answer looks like.

Each answer reads the prompt's own definitions (which steps it shows, which steps each half
covers) and names only steps the prompt shows. The labels serve only to recognise the labelled
step where its text is shown: when a method's window hides it, the oracle answers as an honest
model that did not see the fault would (a guess that does not use the labels, `Ask.blind_step`),
and the miss shows at p = 1.

- all-at-once (``aao``): the labelled step and agent / a wrong step (`Ask.wrong_step`: the error
  model's choice) and whoever acted there.
- step-by-step (``sbs/step/i``): ``yes`` exactly at the labelled step, when shown / the opposite verdict.
- binary-search (``bs/round/r``): the half showing the labelled step (a guess when neither does) /
  the other half; (``bs/final``): the labelled step among the window's shown steps / another one.
"""

from __future__ import annotations

import re
from typing import Any

from localfa.oracle.policy import Ask, Policy, Rule, clip, max_length, other_choice, schema_choices, schema_ints

_STOPS_AT = re.compile(r"The log above stops at step (\d+)")
_HALVES = re.compile(r"upper \(steps (\d+) to (\d+)\) or lower \(steps (\d+) to (\d+)\)")


def _candidates(ask: Ask) -> list[int]:
    """Steps the prompt shows that the answer grammar admits."""
    admitted = schema_ints(ask.grammar, "step")
    allowed = set(admitted)
    shown = [s for s in ask.shown_steps() if s in allowed]
    return shown or admitted


def _step_answer(ask: Ask, step: int, agent: str | None = None) -> dict[str, object]:
    limit = max_length(ask.grammar, "reason")
    who = f", by {agent}" if agent else ""
    out: dict[str, object] = {}
    if agent is not None:
        out["agent"] = agent
    out["step"] = step
    out["reason"] = clip(f"The decisive error is at step {step}{who}.", limit)
    return out


# ---- all-at-once -------------------------------------------------------------------------------


def _seen_or_guess(ask: Ask, candidates: list[int]) -> int:
    """The labelled step where the prompt shows it, else a guess that does not use the labels."""
    return ask.mistake_step if ask.mistake_step in candidates else ask.blind_step(candidates)


def _aao(ask: Ask) -> dict[str, object]:
    step = _seen_or_guess(ask, _candidates(ask))
    if step != ask.mistake_step:
        return _with_agent_at(ask, step)
    return _step_answer(ask, step, ask.agent_choice(schema_choices(ask.grammar, "agent")))


def _aao_wrong(ask: Ask) -> dict[str, object]:
    return _with_agent_at(ask, ask.wrong_step(_candidates(ask)))


def _with_agent_at(ask: Ask, step: int) -> dict[str, object]:
    """A step answer naming whoever acted at `step` (any agent choice when none names them)."""
    choices = schema_choices(ask.grammar, "agent")
    try:
        agent = ask.agent_choice(choices, step=step)
    except ValueError:
        agent = ask.rng.choice(choices)
    return _step_answer(ask, step, agent)


# ---- step-by-step ------------------------------------------------------------------------------


def _current(ask: Ask) -> int:
    m = _STOPS_AT.search(ask.prompt)
    return int(m.group(1)) if m else ask.key_ints()[-1]


def _sbs(ask: Ask) -> str:
    if ask.no_fault:  # a run labelled with no fault: no step is decisive
        return "no"
    current = _current(ask)
    return "yes" if current == ask.mistake_step and current in ask.shown_steps() else "no"


def _sbs_wrong(ask: Ask) -> str:
    return other_choice(ask.grammar, _sbs(ask), ask.rng)


# ---- binary search -----------------------------------------------------------------------------


def _half(ask: Ask) -> str:
    m = _HALVES.search(ask.prompt)
    if m is None:
        raise ValueError("the prompt does not say which steps each half covers")
    u_lo, u_hi, l_lo, l_hi = (int(g) for g in m.groups())
    if ask.no_fault:  # neither half holds a fault: a guess
        return str(ask.rng.choice(_halves(ask)))
    step = ask.mistake_step
    if step in ask.shown_steps():  # recognised where its text is shown, nowhere else
        if u_lo <= step <= u_hi:
            return "upper"
        if l_lo <= step <= l_hi:
            return "lower"
    return str(ask.rng.choice(_halves(ask)))


def _halves(ask: Ask) -> list[str]:
    """The halves a round's grammar admits (a guess picks one)."""
    return sorted(str(o) for o in ask.grammar.spec)


def _half_wrong(ask: Ask) -> str:
    return other_choice(ask.grammar, _half(ask), ask.rng)


def _bs_final(ask: Ask) -> dict[str, object]:
    return _step_answer(ask, _seen_or_guess(ask, _candidates(ask)))


def _bs_final_wrong(ask: Ask) -> dict[str, object]:
    return _step_answer(ask, ask.wrong_step(_candidates(ask)))


# ---- where a miss at p = 1 came from (read from the record's details) --------------------------


def _aao_dropped(details: dict[str, Any], step: int) -> str:
    return f"the one call named another step (content_cap={details.get('content_cap')}, char_budget={details.get('char_budget')})"


def _sbs_dropped(details: dict[str, Any], step: int) -> str:
    last = int(details.get("checked_steps") or 0) - 1
    if last < step:
        return f"step {last} was flagged before the labelled step {step} was asked"
    return f"step {step} was asked and judged not decisive (its text not shown? content_cap={details.get('content_cap')}); went on to step {last}"


def _bs_dropped(details: dict[str, Any], step: int) -> str:
    window: tuple[int, int] | None = None
    for r, entry in enumerate(details.get("path") or []):
        lo, hi = entry["segment"]
        mid = lo + (hi - lo) // 2
        window = (lo, mid) if entry["answer"] == "upper" else (mid + 1, hi)
        if lo <= step <= hi and not window[0] <= step <= window[1]:
            return f"round {r}: segment [{lo}, {hi}] answered {entry['answer']!r}, keeping [{window[0]}, {window[1]}] without step {step}"
    where = "the whole trace" if window is None else f"steps {window[0]}..{window[1]}"
    return f"the final pick among {where} named another step"


ALL_AT_ONCE = Policy(
    [
        Rule(
            "answer",
            r"aao",
            _aao,
            _aao_wrong,
            "the labelled step and agent where the prompt shows it (else a guess that does not use the labels)",
            "a wrong shown step (the error model's choice), and the agent who acted there",
        )
    ],
    dropped_at=_aao_dropped,
)
STEP_BY_STEP = Policy(
    [
        Rule(
            "is step i decisive",
            r"sbs/step/\d+",
            _sbs,
            _sbs_wrong,
            "yes exactly when the step the prompt stops at is the labelled step (and is shown)",
            "the opposite verdict",
        )
    ],
    dropped_at=_sbs_dropped,
)
BINARY_SEARCH = Policy(
    [
        Rule(
            "which half",
            r"bs/round/\d+",
            _half,
            _half_wrong,
            "the half (as the prompt defines it) that shows the labelled step (a guess when neither does)",
            "the other half",
        ),
        Rule(
            "final step",
            r"bs/final",
            _bs_final,
            _bs_final_wrong,
            "the labelled step among the window's shown steps (else a guess that does not use the labels)",
            "another shown step of the window (the error model's choice)",
        ),
    ],
    dropped_at=_bs_dropped,
)
