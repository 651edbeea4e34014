"""The baselines' oracle policies (`localfa.oracle.policy`): what a careful model that knows the
labelled decisive step answers to each baseline prompt, and what its wrong answer looks like.

Each answer reads the prompt's own definitions (which steps it shows, which steps each half
covers) and names only steps the prompt shows: when a method's window hides the labelled step,
the oracle names the nearest step it can see, and the miss shows at p = 1.

- all-at-once (``aao``): the labelled step and agent / a different step nearby (within 3) and
  whoever acted there.
- step-by-step (``sbs/step/i``): ``yes`` exactly at the labelled step / the opposite verdict.
- binary-search (``bs/round/r``): the half holding the labelled step / the other half;
  (``bs/final``): the labelled step among the window's steps / the other step of the window.
"""

from __future__ import annotations

import re
from typing import Any

from localfa.oracle.policy import Ask, Policy, Rule, clip, max_length, nearby_other, nearest, other_choice, schema_choices, schema_ints

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


def _aao(ask: Ask) -> dict[str, object]:
    step = nearest(_candidates(ask), ask.mistake_step)
    return _step_answer(ask, step, ask.agent_choice(schema_choices(ask.grammar, "agent")))


def _aao_wrong(ask: Ask) -> dict[str, object]:
    step = nearby_other(_candidates(ask), ask.mistake_step, ask.rng)
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
    shown = [s for s in ask.shown_steps() if u_lo <= s <= l_hi] or list(range(u_lo, l_hi + 1))
    target = nearest(shown, ask.mistake_step)  # what a careful reader of this prompt can point at
    if u_lo <= target <= u_hi:
        return "upper"
    if l_lo <= target <= l_hi:
        return "lower"
    return "upper" if abs(target - u_hi) <= abs(target - l_lo) else "lower"


def _half_wrong(ask: Ask) -> str:
    return other_choice(ask.grammar, _half(ask), ask.rng)


def _bs_final(ask: Ask) -> dict[str, object]:
    return _step_answer(ask, nearest(_candidates(ask), ask.mistake_step))


def _bs_final_wrong(ask: Ask) -> dict[str, object]:
    return _step_answer(ask, nearby_other(_candidates(ask), ask.mistake_step, ask.rng))


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
            "the labelled step (the nearest shown step if the prompt hides it) and the labelled agent",
            "a different shown step within 3 of it, and the agent who acted there",
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
            "the half (as the prompt defines it) holding the labelled step",
            "the other half",
        ),
        Rule(
            "final step",
            r"bs/final",
            _bs_final,
            _bs_final_wrong,
            "the labelled step among the window's shown steps (else the nearest)",
            "another step of the window",
        ),
    ],
    dropped_at=_bs_dropped,
)
