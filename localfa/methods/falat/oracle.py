"""FALAT's oracle policy (`localfa.oracle.policy`): how a careful model answers each FALAT request,
judging only what that request's prompt shows, and FALAT's named mutants (`MUTANTS`).

Perfect recognition, no clairvoyance (issue 32): the labels are used only to *recognise* a fault
where its text is in the prompt (`_visible`: the step's fenced block holds at least half of its
first `RECOGNISE_CHARS` characters). Every other answer applies the prompt's own definitions to
what it shows, for every step:

- prior (``falat/prior``): a plan; the expected answer only where the prompt shows the correct
  one, else "unknown";
- windows (``falat/stage/w``, ``falat/window/w``): *passive* where a step only repeats what the
  prompt showed before it (the task, an earlier step of the window) or passes the task on (a
  CaptainAgent task message quoting it: `_forwards`); *outcome
  relevance* where a step shares a number or a name with the run's wrong result, or hands over
  the result (the run's last step); both inconsistencies only at a recognised fault; the stage's
  focus is a recognised fault, else the step sharing most with the wrong result;
- links (``falat/links/k``): from a recognised fault to a later step, follow_up (its error
  reaches the output); between steps after a fault the prompt shows, follow_up (they carry it);
  otherwise by the text: redundancy when j repeats i, follow_up when j reuses i's words,
  no_influence else;
- ratings (``falat/rank/k``): suspicion 10 and the three signals at a recognised fault; 2 for a
  step after a fault the prompt shows (it carries it); 3 (nothing seen either way) elsewhere;
- verification (``falat/verify/c``): both verdicts true only when the suspect is a recognised
  fault, quoting its shown text;
- re-search (``falat/research``): a recognised fault first where it may be ranked, else the step
  the search points at (the prompt names it), else the nearest rankable one.

Wrong answers are plausible ones of the same kind, drawn through `Ask.wrong_step` (the error
model's plausible other step) and the request's own rng: another focus; the steps that show the
error recognised instead of the fault (`_symptoms`: the steps after it that share a number or a
name with it or with the wrong result; a plausible step where none is shown), as a judge reading
step by step blames the symptoms (the paper's premise); one link misread; the steps that show the
error (else a plausible step) rated as the error and the fault left unsure; a verdict that misses the fault or takes a carrier (a step after it, which
shows the error) for its source, while a step before the fault is at worst half-passed; a
plausible step first in the re-search; an expected answer taken from the wrong result.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence
from unittest import mock

import regex as re

from localfa.grammars.falat import RANK_SIGNALS, SUSPICION_MAX, TRANSITION_LABELS
from localfa.methods.falat import candidates, method, prior, ranking, research, transitions
from localfa.oracle.mutants import Mutant, patched
from localfa.oracle.policy import Ask, Policy, Rule, clip, clip_to, max_length, nearest, node_ints, schema_choices, schema_field
from localfa.templates import render

QUOTE_CHARS = 80
RECOGNISE_CHARS = 300  # a fault is recognised where at least half of its opening is shown
REPEATS = 0.8  # share of a step's words already shown before it: it only forwards them
REUSES = 0.3  # share of j's words that come from i: j builds on i
TASK_OPENING = 120  # characters of the task a step that passes it on quotes
_WORD = re.compile(r"[\p{L}\p{N}][\p{L}\p{N}_.'-]*")
_SALIENT = re.compile(r"\b\d[\d,.]*\d\b|\b\d\d+\b|(?<=\S\s+)\p{Lu}[\p{L}\p{N}'-]+")
_POINTS_AT = re.compile(r"The search so far points at step (\d+)\.")


# ---- what the prompt shows ----------------------------------------------------------------------


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text) if len(w) >= 4}


def _salient(text: str) -> set[str]:
    return {w.casefold() for w in _SALIENT.findall(text)}


def _fenced(ask: Ask, label: str) -> str:
    """The text of the prompt's block `label` (``TASK``, ``RESULT``, ``ANSWER``), or ''."""
    from localfa.methods.fencing import fenced_blocks

    return next((body for name, body in fenced_blocks(ask.prompt) if name == label), "")


def _visible(ask: Ask, step: int, shown: dict[int, str]) -> bool:
    """Is `step` a labelled fault whose text the prompt shows (enough of it to be recognised)?"""
    if not ask.is_fault(step) or step not in shown:
        return False
    opening = ask.trace.steps[step].content.strip()[:RECOGNISE_CHARS]
    return len(shown[step].strip()) >= len(opening) // 2


def _recognised(ask: Ask, shown: dict[int, str]) -> set[int]:
    return {i for i in shown if _visible(ask, i, shown)}


def _forwards(text: str, before: str, task: str = "") -> bool:
    """Does `text` only repeat what `before` already said, or pass the task on (a task message
    that wraps it): the prompt's definition of a passive step?"""
    opening = " ".join(task.split())[:TASK_OPENING]
    if len(opening) >= 40 and opening in " ".join(text.split()):
        return True
    words = _words(text)
    return bool(words) and len(words & _words(before)) >= REPEATS * len(words)


def _relevant(text: str, result: str) -> bool:
    """Does the step share a number or a name with the run's wrong result?"""
    return bool(_salient(text) & _salient(result))


# ---- prior --------------------------------------------------------------------------------------


def _text(ask: Ask, name: str, text: str) -> str:
    return clip_to(schema_field(ask.grammar, name), text)


def _prior(ask: Ask, honest: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"expected_plan": _text(ask, "expected_plan", "Solve the task step by step, checking each result.")}
    if "expected_answer" in ask.grammar.spec["properties"]:
        shown = _fenced(ask, "ANSWER").strip()
        believed = sorted(_salient(_fenced(ask, "RESULT")))
        answer = shown if honest else (believed[0] if believed else "")
        out["expected_answer"] = _text(ask, "expected_answer", answer or "unknown")
    item = schema_field(ask.grammar, "must_do")["items"]
    out["must_do"] = [clip_to(item, "Verify every intermediate result against the task.")]
    return out


# ---- windows --------------------------------------------------------------------------------------


def _focus(ask: Ask, ids: list[int], shown: dict[int, str], faults: set[int]) -> int | None:
    """A recognised fault, else the step that shares most with the wrong result (earliest)."""
    if not ids:
        return None
    hit = sorted(faults & set(ids))
    if hit:
        return hit[0]
    result = _salient(_fenced(ask, "RESULT"))
    return max(ids, key=lambda i: (len(_salient(shown.get(i, "")) & result), -i))


def _stage(ask: Ask, node: dict[str, Any], shown: dict[int, str], faults: set[int]) -> dict[str, Any]:
    ids = node_ints(node["properties"]["focus_step"])
    focus = _focus(ask, ids, shown, faults)
    says = f"an error at step {min(faults)}" if faults else "the work goes on"
    return {"summary": clip_to(node["properties"]["summary"], says), "focus_step": focus}


def _window_faults(ask: Ask, shown: dict[int, str], honest: bool) -> set[int]:
    """The faults this answer recognises: the visible ones, or (a wrong answer) a nearby step."""
    faults = _recognised(ask, shown)
    if honest:
        return faults
    if not shown:
        return set()
    return set(_symptoms(ask, shown)) or {ask.wrong_step(sorted(shown))}


def _symptoms(ask: Ask, shown: dict[int, str]) -> list[int]:
    """The shown steps a fooled judge takes for the error's source: those after the labelled
    step that show the error (they share a number or a name with it or with the wrong result).
    The paper's premise: a step-by-step reading blames the symptoms."""
    fault = ask.mistake_step
    error = _salient(ask.trace.steps[fault].content) | _salient(_fenced(ask, "RESULT"))
    return [c for c in sorted(shown) if c > fault and _salient(shown[c]) & error]


def _stage_only(ask: Ask, honest: bool = True) -> dict[str, Any]:
    shown = ask.shown_steps()
    return {"stage": _stage(ask, schema_field(ask.grammar, "stage"), shown, _window_faults(ask, shown, honest))}


def _stage_wrong(ask: Ask) -> dict[str, Any]:
    return _stage_only(ask, honest=False)


def _window(ask: Ask, honest: bool = True) -> dict[str, Any]:
    shown = ask.shown_steps()
    faults = _window_faults(ask, shown, honest)
    result = _fenced(ask, "RESULT")
    task = before = _fenced(ask, "TASK")
    last = len(ask.trace.steps) - 1
    steps = {}
    for key, node in schema_field(ask.grammar, "steps")["properties"].items():
        i, props = int(key), node["properties"]
        text = shown.get(i, "")
        fixed = props["active"].get("const")
        hit = i in faults
        steps[key] = {
            "agent": props["agent"]["const"],
            "action": clip_to(props["action"], " ".join(text.split()[:12]) or f"step {i}"),
            "decision": clip_to(props["decision"], "an error: " + " ".join(text.split()[:8]) if hit else "carries on"),
            "active": fixed if fixed is not None else not _forwards(text, before, task),
            "outcome_relevance": hit or i == last or _relevant(text, result),
            "prior_inconsistency": hit,
            "execution_inconsistency": hit,
        }
        before += "\n" + text
    out: dict[str, Any] = {"steps": steps}
    if "stage" in ask.grammar.spec["properties"]:
        out["stage"] = _stage(ask, schema_field(ask.grammar, "stage"), shown, faults)
    return out


def _window_wrong(ask: Ask) -> dict[str, Any]:
    return _window(ask, honest=False)


# ---- links, ratings, verification, re-search -------------------------------------------------


def _link(i: int, j: int, shown: dict[int, str], faults: set[int]) -> str:
    if i in faults or any(f < i for f in faults):
        return "follow_up"  # the error at i (or one i already carries) reaches j
    if _forwards(shown.get(j, ""), shown.get(i, "")):
        return "redundancy"
    wj = _words(shown.get(j, ""))
    return "follow_up" if wj and len(wj & _words(shown.get(i, ""))) >= REUSES * len(wj) else "no_influence"


def _pair_of(key: str) -> tuple[int, int]:
    i, j = key.split(">")
    return int(i), int(j)


def _links(ask: Ask, honest: bool = True) -> dict[str, Any]:
    shown = ask.shown_steps()
    faults = _recognised(ask, shown)
    node = schema_field(ask.grammar, "links")
    keys = list(node["properties"])
    labels = {key: _link(*_pair_of(key), shown, faults) for key in keys}
    if not honest:  # one link misread: one that touches a plausible wrong step, else any
        wrong = ask.wrong_step(sorted({int(x) for k in keys for x in k.split(">")}))
        key = ask.rng.choice([k for k in keys if str(wrong) in k.split(">")] or keys)
        labels[key] = ask.rng.choice([lab for lab in TRANSITION_LABELS if lab != labels[key]])
    out = {}
    for key, label in labels.items():
        i, j = key.split(">")
        reason = node["properties"][key]["properties"]["reason"]
        says = f"step {j} builds on step {i}" if label == "follow_up" else f"step {i} -> step {j}: {label}"
        out[key] = {"reason": clip_to(reason, says), "label": label}
    return {"links": out}


def _links_wrong(ask: Ask) -> dict[str, Any]:
    return _links(ask, honest=False)


def _rating(c: int, faults: set[int], node: dict[str, Any]) -> dict[str, Any]:
    hit, carries = c in faults, any(f < c for f in faults)
    suspicion = SUSPICION_MAX if hit else 2 if carries else 3
    says = "it introduces the error" if hit else "it carries an earlier error" if carries else "no error of its own is visible"
    out: dict[str, Any] = {"analysis": clip_to(node["properties"]["analysis"], f"step {c}: {says}")}
    out.update({s: hit or (carries and s == "affects_later") for s in RANK_SIGNALS})
    out["suspicion"] = suspicion
    return out


def _rank(ask: Ask, honest: bool = True) -> dict[str, Any]:
    shown = ask.shown_steps()
    faults = _recognised(ask, shown)
    node = schema_field(ask.grammar, "ratings")
    out = {int(key): _rating(int(key), faults, rating) for key, rating in node["properties"].items()}
    if not honest:  # the steps that show the error (else a plausible one) rated as it, a recognised fault left unsure
        wrongs = [c for c in _symptoms(ask, shown) if c in out] or [ask.wrong_step(sorted(out))]
        for c in out:
            if c in faults and c not in wrongs:
                out[c].update({"suspicion": SUSPICION_MAX // 2, **{s: False for s in RANK_SIGNALS}})
        for wrong in wrongs:
            out[wrong].update({"suspicion": SUSPICION_MAX, **{s: True for s in RANK_SIGNALS}})
    return {"ratings": {str(c): r for c, r in out.items()}}


def _rank_wrong(ask: Ask) -> dict[str, Any]:
    return _rank(ask, honest=False)


def _verify(ask: Ask, honest: bool = True) -> dict[str, Any]:
    (c,) = ask.key_ints()
    shown = ask.shown_steps()
    faults = _recognised(ask, shown)
    found = c in faults
    if honest:
        independent = sufficient = found
    elif found or not faults or any(f < c for f in faults):
        # the fault missed, or a step that shows the error (a carrier) taken for its source
        independent = sufficient = not found
    else:  # nothing wrong in c, the fault shown later: it sees no inheritance, but no recovery either
        independent, sufficient = True, False
    text = shown.get(c, "").strip() or ask.trace.steps[c].content.strip() or ask.trace.steps[c].agent
    return {
        "analysis": _text(
            ask, "analysis", f"step {c} {'introduces' if independent and sufficient else 'does not introduce'} the decisive error"
        ),
        "error_independence": independent,
        "counterfactual_sufficiency": sufficient,
        "quote": clip(text, min(QUOTE_CHARS, max_length(ask.grammar, "quote"))),
    }


def _verify_wrong(ask: Ask) -> dict[str, Any]:
    return _verify(ask, honest=False)


def _research(ask: Ask, honest: bool = True) -> dict[str, Any]:
    perms = schema_choices(ask.grammar, "ranking")
    rankable = sorted(perms[0])
    shown = ask.shown_steps()
    faults = sorted(_recognised(ask, shown) & set(rankable))
    pointed = _POINTS_AT.search(ask.prompt)
    t_hat = int(pointed.group(1)) if pointed else rankable[0]
    honest_top = faults[0] if faults else nearest(rankable, t_hat)
    top = honest_top if honest else ask.wrong_step([s for s in rankable if s != honest_top] or rankable)
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
    passive = {s: why for why, steps in (details.get("passive") or {}).items() for s in steps}
    if step in passive and step not in (details.get("candidates") or []):
        return f"passive: {passive[step]}"
    if step not in (details.get("candidates") or []):
        return f"not a candidate (candidates from {details.get('candidate_source')}: {details.get('candidates')})"
    if key in (details.get("pruned") or {}):
        return f"pruned: {details['pruned'][key]}"
    if step not in [t.get("step") for t in details.get("top") or []]:
        return f"ranked below the top {len(details.get('top') or [])} ({[r.get('step') for r in details.get('ranking') or []][:10]})"
    if details.get("t_hat") != step:
        return f"verification chose step {details.get('t_hat')}"
    return f"the re-search ranked step {details.get('final_step')} first"


POLICY = Policy(
    [
        Rule(
            "prior",
            r"falat/prior",
            _prior,
            lambda ask: _prior(ask, honest=False),
            "a plan; the correct answer only where shown",
            "the wrong result's value as expected",
        ),
        Rule(
            "stage",
            r"falat/stage/\d+",
            _stage_only,
            _stage_wrong,
            "a recognised fault, else the step sharing most with the result",
            "focus on a nearby step",
        ),
        Rule(
            "window",
            r"falat/window/\d+",
            _window,
            _window_wrong,
            "passive where a step repeats what was shown; outcome relevance by the result's numbers and names; inconsistencies at a recognised fault",
            "the steps that show the error (else a plausible one) recognised instead",
        ),
        Rule("links", r"falat/links/\d+", _links, _links_wrong, "follow_up from a recognised fault; else by the texts", "one link misread"),
        Rule(
            "ranking",
            r"falat/rank/\d+",
            _rank,
            _rank_wrong,
            "10 at a recognised fault, 2 after it, 3 elsewhere",
            "the steps that show the error (else a plausible one) rated 10, the fault 5",
        ),
        Rule(
            "verify",
            r"falat/verify/\d+",
            _verify,
            _verify_wrong,
            "both true only at a recognised fault",
            "the fault missed, or a carrier passed",
        ),
        Rule(
            "re-search",
            r"falat/research",
            _research,
            _research_wrong,
            "a recognised fault first, else the step searched",
            "a nearby step first",
        ),
    ],
    dropped_at=dropped_at,
)


# ---- mutants ---------------------------------------------------------------------------------------
# Each breaks one stage or rule of FALAT (`localfa.oracle.mutants`); the names FALAT's method
# module imports are patched there, where the method looks them up.


def _old_follow_up_prune(candidates: Sequence[int], labels: Any, inconsistent: Any, untyped: Any = ()) -> Any:
    """Issue 22's bug: any follow_up marks a carrier, whether or not its source is corrupted."""
    with mock.patch.object(transitions, "suspects", lambda c, *_: set(c)):
        return transitions.prune(candidates, labels, inconsistent, untyped)


def _keep_every_candidate(candidates: Sequence[int], *_a: Any, **_k: Any) -> transitions.Pruning:
    return transitions.Pruning(kept=sorted(candidates))


def _latest_passing(verdicts: Any) -> tuple[int, bool]:
    passing = [v.step for v in verdicts if v.passed]
    return (max(passing), True) if passing else (verdicts[0].step, False)


def _keep_t_hat(t_hat: int, n_steps: int, value: Any) -> research.Research:
    found = research.parse_research(t_hat, n_steps, value)
    return research.Research(found.window, found.roles, (t_hat,) + tuple(s for s in found.ranking if s != t_hat))


def _block_without_result(self: prior.Prior) -> str:
    return render("falat/_prior_block.j2", prior=dataclasses.replace(self, wrong_output="(not shown)"))


# The dev traces the CI test (tests/oracle/test_mutants.py) runs FALAT's p07 mutants on: the whole
# dev split (40 algorithm-generated and 20 hand-crafted traces, /work/shared/data/whowhen's README),
# seeds 0-2, as the benchmark does. It runs in about 10 s a variant on two cores (a rule-picked
# subset, the first 10 traces of each folder, took 3-10 s and showed kills the whole split does not).
CI_TRACES = tuple(f"algorithm-generated/{n}" for n in range(1, 41)) + tuple(f"hand-crafted/{n}" for n in range(1, 21))

MUTANTS = [
    Mutant(
        "old_follow_up_bug",
        "pruning: a follow_up from a clean step marks a carrier (the bug issue 22 fixed)",
        "p1",
        patched((method, "prune", _old_follow_up_prune)),
    ),
    Mutant("no_pruning", "pruning: every candidate kept", "p07", patched((method, "prune", _keep_every_candidate)), traces=CI_TRACES),
    Mutant(
        "carrier_guards_off",
        "pruning and verification: every candidate kept and the latest passing one chosen (no_pruning with latest_passing)",
        "p07",
        patched((method, "prune", _keep_every_candidate), (method, "choose", _latest_passing)),
        traces=CI_TRACES,
    ),
    Mutant(
        "no_pairs_typed",
        "transitions: no link typed",
        "p07",
        patched((method, "links_requests", lambda *_a, **_k: ([], []))),
        traces=CI_TRACES,
    ),
    Mutant(
        "verdicts_ignored",
        "verification: t̂ is the best-ranked whatever the verdicts",
        "p07",
        patched((method, "choose", lambda v: (v[0].step, False))),
        traces=CI_TRACES,
    ),
    Mutant(
        "latest_passing",
        "temporal precedence: the latest passing step, not the earliest (in verification and in the re-search's replacement)",
        "p07",
        patched((method, "choose", _latest_passing)),
        traces=CI_TRACES,
    ),
    Mutant("verify_top1", "top-k: only the best-ranked candidate verified", "p07", spec="top_k=1", traces=CI_TRACES),
    Mutant(
        "second_looks_off",
        "top-k and re-search: only the best-ranked verified, t̂ kept whatever the re-search ranks (verify_top1 with no_research)",
        "p07",
        patched((method, "parse_research", _keep_t_hat)),
        spec="top_k=1",
        traces=CI_TRACES,
    ),
    Mutant(
        "every_active_candidate",
        "candidates: every active step, the signals ignored",
        "cost",
        patched((method, "select_candidates", lambda f, focus, active: candidates.Candidates(tuple(sorted(active)), "active_steps"))),
    ),
    Mutant(
        "reversed_ranking", "ranking: the order turned over", "p1", patched((method, "rank", lambda *a: list(reversed(ranking.rank(*a)))))
    ),
    Mutant(
        "prior_hides_result",
        "prior: the wrong result left out of the prior block",
        "p07",
        patched((prior.Prior, "block", _block_without_result)),
        traces=CI_TRACES,
    ),
    Mutant("windows_clip_steps", "windows: each step cut to 16 tokens", "p1", spec="step_tokens=16"),
    Mutant(
        "candidates_from_focus_only",
        "candidates: the stage focus only, the windows' signals ignored",
        "p07",
        patched((method, "select_candidates", lambda f, focus, active: candidates.select_candidates([], focus, active))),
        traces=CI_TRACES,
    ),
    Mutant(
        "judged_passive_dropped",
        "candidates: a step judged passive is never a candidate nor re-ranked (before issue 34)",
        "p1",
        patched((method, "JUDGED_PASSIVE_STAYS", False)),
    ),
    Mutant("one_candidate_per_group", "transitions and ranking: a group of one (no shared prefix)", "cost", spec="group_size=1"),
    Mutant(
        "no_research",
        "re-search: t̂ kept whatever the ±2 re-search ranks first",
        "p07",
        patched((method, "parse_research", _keep_t_hat)),
        traces=CI_TRACES,
    ),
]
