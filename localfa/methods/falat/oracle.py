"""FALAT's oracle policy (`localfa.oracle.policy`): what a careful model that knows the labelled
decisive step answers to each FALAT request, and what its wrong answer looks like.

Honest answers follow the prompts' own definitions:

- prior (``falat/prior``): a plan and the task's correct answer where the trace records one /
  an expected answer of "unknown";
- stage (``falat/stage/w``) and the last window's stage: the labelled step when the window shows
  it, else the answerable step nearest to it / another answerable step of the window;
- window (``falat/window/w``): every answerable step active; the labelled step carries all three
  signals (it conflicts with the plan and its execution is wrong) and significance 3; steps after
  it shape the output (outcome relevance only: they carry the error); earlier steps no signal /
  the labelled step unflagged and a nearby step flagged instead;
- pair (``falat/pair/i/j``): follow_up when j comes after the labelled step (from it, j carries
  its error; between two later steps, j builds on i), no_influence otherwise / another label;
- ranking (``falat/rank/c``): suspicion 10 and the three signals for the labelled step, 1 and
  none for the others / the scale turned over;
- verify (``falat/verify/c``): both verdicts true exactly at the labelled step, a verbatim quote of
  the candidate / the opposite verdicts;
- re-search (``falat/research``): the labelled step first when it may be ranked, else the nearest /
  a nearby other step first.
"""

from __future__ import annotations

from typing import Any

from localfa.grammars.falat import RANK_SIGNALS, SIGNALS, SUSPICION_MAX, TRANSITION_LABELS
from localfa.oracle.policy import (
    Ask,
    Policy,
    Rule,
    clip,
    clip_to,
    max_length,
    nearby_other,
    nearest,
    node_ints,
    schema_choices,
    schema_field,
)

QUOTE_CHARS = 80


def _text(ask: Ask, name: str, text: str) -> str:
    """`text` cut to the maxLength of the answer's string property `name`."""
    return clip_to(schema_field(ask.grammar, name), text)


# ---- prior -------------------------------------------------------------------------------------


def _prior(ask: Ask, honest: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"expected_plan": _text(ask, "expected_plan", "Solve the task step by step, checking each result.")}
    if "expected_answer" in ask.grammar.spec["properties"]:
        answer = (ask.trace.ground_truth or "").strip() if honest else ""
        out["expected_answer"] = _text(ask, "expected_answer", answer or "unknown")
    item = schema_field(ask.grammar, "must_do")["items"]
    out["must_do"] = [clip_to(item, "Verify every intermediate result against the task.")]
    return out


def _prior_wrong(ask: Ask) -> dict[str, Any]:
    return _prior(ask, honest=False)


# ---- windows -----------------------------------------------------------------------------------


def _stage(ask: Ask, node: dict[str, Any], honest: bool) -> dict[str, Any]:
    ids = node_ints(node["properties"]["focus_step"])
    if not ids:
        focus = None
    elif honest:
        focus = nearest(ids, ask.mistake_step)
    else:
        focus = nearby_other(ids, ask.mistake_step, ask.rng)
    says = f"The decisive error is at step {ask.mistake_step}." if ask.mistake_step in ids else "This stage carries on the run."
    return {"summary": clip_to(node["properties"]["summary"], says), "focus_step": focus}


def _stage_only(ask: Ask, honest: bool = True) -> dict[str, Any]:
    return {"stage": _stage(ask, schema_field(ask.grammar, "stage"), honest)}


def _stage_wrong(ask: Ask) -> dict[str, Any]:
    return _stage_only(ask, honest=False)


def _window(ask: Ask, flagged: int | None = None, honest: bool = True) -> dict[str, Any]:
    target = ask.mistake_step if flagged is None else flagged
    steps = {}
    for key, node in schema_field(ask.grammar, "steps")["properties"].items():
        i, props = int(key), node["properties"]
        fixed = props["active"].get("const")
        hit, later = i == target, i > ask.mistake_step
        steps[key] = {
            "agent": props["agent"]["const"],
            "action": clip_to(props["action"], f"step {i}"),
            "decision": clip_to(props["decision"], "the decisive error" if hit else "carries on"),
            "active": fixed if fixed is not None else True,
            "significance": 3 if hit else int(later and honest),
            **{s: hit or (honest and later and s == "outcome_relevance") for s in SIGNALS},
        }
    out: dict[str, Any] = {"steps": steps}
    if "stage" in ask.grammar.spec["properties"]:
        out["stage"] = _stage(ask, schema_field(ask.grammar, "stage"), honest)
    return out


def _window_wrong(ask: Ask) -> dict[str, Any]:
    ids = [int(k) for k in schema_field(ask.grammar, "steps")["properties"]]
    return _window(ask, flagged=nearby_other(ids, ask.mistake_step, ask.rng), honest=False)


# ---- pairs, ranking, verification, re-search -----------------------------------------------------


def _label(ask: Ask) -> str:
    _, j = ask.key_ints()
    return "follow_up" if j > ask.mistake_step else "no_influence"


def _pair(ask: Ask) -> dict[str, Any]:
    label = _label(ask)
    return {"reason": _text(ask, "reason", f"by the labelled error at step {ask.mistake_step}"), "label": label}


def _pair_wrong(ask: Ask) -> dict[str, Any]:
    label = ask.rng.choice([lab for lab in TRANSITION_LABELS if lab != _label(ask)])
    return {"reason": _text(ask, "reason", "a guess"), "label": label}


def _rank(ask: Ask, honest: bool = True) -> dict[str, Any]:
    (c,) = ask.key_ints()
    hit = (c == ask.mistake_step) == honest
    out: dict[str, Any] = {"analysis": _text(ask, "analysis", f"step {c} {'is' if hit else 'is not'} the decisive error")}
    out.update({s: hit for s in RANK_SIGNALS})
    out["suspicion"] = SUSPICION_MAX if hit else 1
    return out


def _rank_wrong(ask: Ask) -> dict[str, Any]:
    return _rank(ask, honest=False)


def _verify(ask: Ask, honest: bool = True) -> dict[str, Any]:
    (c,) = ask.key_ints()
    verdict = (c == ask.mistake_step) == honest
    text = ask.trace.steps[c].content.strip() or ask.trace.steps[c].agent
    return {
        "analysis": _text(ask, "analysis", f"step {c} {'introduces' if verdict else 'does not introduce'} the decisive error"),
        "error_independence": verdict,
        "counterfactual_sufficiency": verdict,
        "quote": clip(text, min(QUOTE_CHARS, max_length(ask.grammar, "quote"))),
    }


def _verify_wrong(ask: Ask) -> dict[str, Any]:
    return _verify(ask, honest=False)


def _research(ask: Ask, honest: bool = True) -> dict[str, Any]:
    perms = schema_choices(ask.grammar, "ranking")
    rankable = sorted(perms[0])
    top = nearest(rankable, ask.mistake_step) if honest else nearby_other(rankable, ask.mistake_step, ask.rng)
    ranking = next(p for p in perms if p[0] == top and list(p[1:]) == sorted(p[1:]))
    steps = {}
    for key, node in schema_field(ask.grammar, "steps")["properties"].items():
        i, props = int(key), node["properties"]
        steps[key] = {
            "for": clip_to(props["for"], f"step {i} introduces the error" if i == top else "nothing of its own"),
            "against": clip_to(props["against"], "none" if i == top else "it only follows earlier steps"),
            "role": "ROOT_CAUSE" if i == top else "PROPAGATION" if i > top else "SYMPTOM",
        }
    return {"steps": steps, "ranking": ranking}


def _research_wrong(ask: Ask) -> dict[str, Any]:
    return _research(ask, honest=False)


def dropped_at(details: dict[str, Any], step: int) -> str:
    """The stage where the labelled step dropped out of FALAT's search, in words."""
    key = str(step)
    if key in (details.get("passive") or {}):
        return f"passive: {details['passive'][key]}"
    if step not in (details.get("candidates") or []):
        return f"not a candidate (candidates from {details.get('candidate_source')}: {details.get('candidates')})"
    if key in (details.get("pruned") or {}):
        return f"pruned: {details['pruned'][key]}"
    if step not in [t.get("step") for t in details.get("top") or []]:
        return f"ranked below the top {len(details.get('top') or [])} ({details.get('ranking')})"
    if details.get("t_hat") != step:
        return f"verification chose step {details.get('t_hat')}"
    return f"the re-search ranked step {details.get('final_step')} first"


POLICY = Policy(
    [
        Rule(
            "prior",
            r"falat/prior",
            _prior,
            _prior_wrong,
            "a plan and the correct answer where the trace records one",
            "expected answer unknown",
        ),
        Rule(
            "stage",
            r"falat/stage/\d+",
            _stage_only,
            _stage_wrong,
            "points at the labelled step (else the nearest answerable step)",
            "another step",
        ),
        Rule(
            "window",
            r"falat/window/\d+",
            _window,
            _window_wrong,
            "every answerable step active; the labelled step all three signals, later steps outcome relevance",
            "a nearby step flagged instead",
        ),
        Rule(
            "pair",
            r"falat/pair/\d+/\d+",
            _pair,
            _pair_wrong,
            "follow_up when j comes after the labelled step, else no_influence",
            "another label",
        ),
        Rule(
            "ranking",
            r"falat/rank/\d+",
            _rank,
            _rank_wrong,
            "suspicion 10 and the three signals at the labelled step, 1 elsewhere",
            "the scale turned over",
        ),
        Rule(
            "verify",
            r"falat/verify/\d+",
            _verify,
            _verify_wrong,
            "both verdicts true only at the labelled step, a verbatim quote",
            "the opposite verdicts",
        ),
        Rule("re-search", r"falat/research", _research, _research_wrong, "the labelled step first", "a nearby step first"),
    ],
    dropped_at=dropped_at,
)
