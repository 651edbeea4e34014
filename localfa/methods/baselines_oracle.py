"""The baselines' oracle policies (`localfa.oracle.policy`): what a careful model answers to each
baseline prompt, from that prompt and the fault's fingerprint alone, and what its wrong answer
looks like.

The fault is recognised only where a shown step's text carries its words (`Ask.fault_id`); the
id named is the one the prompt shows beside that text. Where the prompt carries nothing, the honest
answer is a guess among the shown steps seeded by the prompt (`Ask.blind_step`), and the miss
shows at p = 1.

- all-at-once (``aao``): the step shown with the fault's words and the labelled agent / a wrong
  step (`Ask.wrong_step`: the error model's choice) and the agent the prompt shows there.
- step-by-step (``sbs/step/i``): ``yes`` exactly when the step the prompt stops at carries the
  fault's words / the opposite verdict.
- binary-search (``bs/round/r``): the half that shows the fault's words (a guess when neither
  does) / the other half; (``bs/final``): the step shown with the fault's words / another one.
"""

from __future__ import annotations

import re
from typing import Any

from localfa.oracle.policy import Ask, Policy, PolicyError, Rule, clip, max_length, other_choice, schema_choices, schema_ints

_STOPS_AT = re.compile(r"The log above stops at step (\d+)")
_HALVES = re.compile(r"upper \(steps (\d+) to (\d+)\) or lower \(steps (\d+) to (\d+)\)")


def _shown_candidates(ask: Ask) -> dict[int, str]:
    """Steps the prompt shows that the answer grammar admits (id -> shown text); where it shows
    none of them, every admitted step with no text."""
    admitted = schema_ints(ask.grammar, "step")
    shown = {i: t for i, t in ask.shown_steps().items() if i in set(admitted)}
    return shown or dict.fromkeys(admitted, "")


def _step_answer(ask: Ask, step: int, agent: str | None = None) -> dict[str, object]:
    limit = max_length(ask.grammar, "reason")
    who = f", by {agent}" if agent else ""
    out: dict[str, object] = {}
    if agent is not None:
        out["agent"] = agent
    out["step"] = step
    out["reason"] = clip(f"The decisive error is at step {step}{who}.", limit)
    return out


def _honest_step(ask: Ask) -> tuple[int, bool]:
    """(the step shown with the fault's words, True), else (a guess seeded by the prompt, False)."""
    shown = _shown_candidates(ask)
    found = ask.fault_id(shown)
    return (found, True) if found is not None else (ask.blind_step(shown), False)


# ---- all-at-once -------------------------------------------------------------------------------


def _aao(ask: Ask) -> dict[str, object]:
    step, recognised = _honest_step(ask)
    choices = schema_choices(ask.grammar, "agent")
    if recognised:
        try:
            return _step_answer(ask, step, ask.agent_choice(choices))
        except PolicyError:  # the labelled agent is not among the choices: whoever the prompt shows there
            pass
    return _with_agent_at(ask, step)


def _aao_wrong(ask: Ask) -> dict[str, object]:
    return _with_agent_at(ask, ask.wrong_step(_shown_candidates(ask), honest=_honest_step(ask)[0]))


def _with_agent_at(ask: Ask, step: int) -> dict[str, object]:
    """A step answer naming the agent the prompt shows at `step` (a guess when none matches)."""
    choices = schema_choices(ask.grammar, "agent")
    try:
        agent = ask.agent_choice(choices, step=step)
    except PolicyError:
        agent = ask.blind_choice(sorted(choices), salt=f"agent at {step}")
    return _step_answer(ask, step, agent)


# ---- step-by-step ------------------------------------------------------------------------------


def _current(ask: Ask) -> int:
    m = _STOPS_AT.search(ask.prompt)
    return int(m.group(1)) if m else ask.key_ints()[-1]


def _sbs(ask: Ask) -> str:
    if ask.no_fault:  # a run labelled with no fault: no step is decisive
        return "no"
    current = _current(ask)
    return "yes" if ask.fault_id() == current else "no"


def _sbs_wrong(ask: Ask) -> str:
    return other_choice(ask.grammar, _sbs(ask), ask.rng)


# ---- binary search -----------------------------------------------------------------------------


def _half(ask: Ask) -> str:
    m = _HALVES.search(ask.prompt)
    if m is None:
        raise PolicyError("the prompt does not say which steps each half covers")
    u_lo, u_hi, l_lo, l_hi = (int(g) for g in m.groups())
    found = ask.fault_id()
    if found is not None:  # recognised where its words are shown, nowhere else
        if u_lo <= found <= u_hi:
            return "upper"
        if l_lo <= found <= l_hi:
            return "lower"
    return str(ask.blind_choice(_halves(ask)))


def _halves(ask: Ask) -> list[str]:
    """The halves a round's grammar admits (a guess picks one)."""
    return sorted(str(o) for o in ask.grammar.spec)


def _half_wrong(ask: Ask) -> str:
    return other_choice(ask.grammar, _half(ask), ask.rng)


def _bs_final(ask: Ask) -> dict[str, object]:
    return _step_answer(ask, _honest_step(ask)[0])


def _bs_final_wrong(ask: Ask) -> dict[str, object]:
    return _step_answer(ask, ask.wrong_step(_shown_candidates(ask), honest=_honest_step(ask)[0]))


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
            "the step shown with the fault's words, and the labelled agent (else a guess seeded by the prompt)",
            "a wrong shown step (the error model's choice), and the agent the prompt shows there",
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
            "yes exactly when the step the prompt stops at carries the fault's words",
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
            "the half (as the prompt defines it) that shows the fault's words (a guess seeded by the prompt when neither does)",
            "the other half",
        ),
        Rule(
            "final step",
            r"bs/final",
            _bs_final,
            _bs_final_wrong,
            "the step of the window shown with the fault's words (else a guess seeded by the prompt)",
            "another shown step of the window (the error model's choice)",
        ),
    ],
    dropped_at=_bs_dropped,
)
