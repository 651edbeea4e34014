"""FALAT's oracle policy (`localfa.oracle.policy`): how a careful model answers each FALAT request,
from that request's prompt and the fault's fingerprint alone (issue 49). FALAT's mutants are in
`localfa.methods.falat.mutants`.

The fault is recognised only where a shown step's text carries its words (`Ask.fault_id`), and
named by the id the prompt shows beside that text. A summary the oracle writes carries the fault's
words only where its prompt showed them (`Ask.quote_of_fault`), so a later prompt that lists
summaries (the suspects block, the re-search's summaries) tells of the fault only where one really
quotes it (`Ask.quotes_fault`). Everything else applies the prompt's own definitions to what it
shows:

- prior (``falat/prior``): a plan; the expected answer where the prompt shows it (the ANSWER block)
  or the task states it (a sentence of the TASK block that says what the answer is), else "unknown";
- windows (``falat/window/w``): *passive* where a step only repeats the task or an earlier step of
  its window (the steps shown before the window for context are read as the earlier results) or
  passes the task on (it quotes the task's opening: `_forwards`); *outcome relevance* where a step shares a number or a
  name with the run's wrong result, or is the run's last step (the prompt says how many it has);
  both inconsistencies at the step shown with the fault's words only; the stage's focus is that
  step, else the step sharing most with the wrong result;
- links (``falat/links/k``): from the fault (shown, or quoted by a suspect's summary) to a later
  step, follow_up; between steps after it, follow_up (they carry it); otherwise by the texts:
  redundancy when j repeats i, follow_up when j reuses i's words, no_influence else;
- ratings (``falat/rank/k``): suspicion 10 and the three signals at the fault; 2 for a step after
  it (it carries it); 3 (nothing seen either way) elsewhere;
- verification (``falat/verify/c``): both verdicts true only when the suspect is the step shown
  with the fault's words, quoting them;
- re-search (``falat/research``): the fault first where it may be ranked, else the step the
  prompt says the search points at.

Wrong answers are plausible ones of the same kind, drawn through `Ask.wrong_step` (the error
model's plausible other step, read from where the prompt shows the fault) and the request's rng:
another focus; the steps that show the error recognised instead of the fault (`_symptoms`: the
shown steps after the fault that share a number or a name with it or with the wrong result; a
plausible step where the prompt shows no fault), as a judge reading step by step blames the
symptoms (the paper's premise); one link misread; the symptoms (else a plausible step) rated as
the error and the fault left unsure; a verdict that misses the fault or takes a carrier for its
source, while a step before the fault is at worst half-passed; a plausible step first in the
re-search; an expected answer taken from the wrong result.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import regex as re

from localfa.grammars.falat import RANK_SIGNALS, SUSPICION_MAX, TRANSITION_LABELS
from localfa.oracle.policy import Ask, Policy, Rule, clip, clip_to, max_length, nearest, node_ints, schema_choices, schema_field

QUOTE_CHARS = 80
SUMMARY_STEP_WORDS = 12  # a stage summary's words for each shown step
SUMMARY_QUOTE_CHARS = 160  # the fault's words a summary or a decision quotes (before the field's bound)
REPEATS = 0.8  # share of a step's words already shown before it: it only forwards them
REUSES = 0.3  # share of j's words that come from i: j builds on i
TASK_OPENING = 120  # characters of the task a step that passes it on quotes
_WORD = re.compile(r"[\p{L}\p{N}][\p{L}\p{N}_.'-]*")
_SALIENT = re.compile(r"\b\d[\d,.]*\d\b|\b\d\d+\b|(?<=\S\s+)\p{Lu}[\p{L}\p{N}'-]+")
_POINTS_AT = re.compile(r"The search so far points at step (\d+)\.")
_RUN_LENGTH = re.compile(r"The run has (\d+) steps \(0 to \d+\)")
_SUMMARY_LINE = re.compile(r"^\s*- step (\d+) \((.*)$", re.M)
_STATED_ANSWER = re.compile(
    r"(?:the\s+)?(?:correct|expected|right|final)\s+(?:answer|output|result)\s+(?:is|should be|must be|will be)\s*:?\s*([^\n]+?)\s*(?:[.;]\s|[.;]?$)",
    re.I | re.M,
)


# ---- what the prompt shows ----------------------------------------------------------------------


# Kept per text: a window's steps and the text before each are read again by every rule and
# every pair that shows them (the regex is most of a FALAT oracle run's time otherwise).
@lru_cache(maxsize=2048)
def _words(text: str) -> frozenset[str]:
    return frozenset(w.casefold() for w in _WORD.findall(text) if len(w) >= 4)


@lru_cache(maxsize=2048)
def _salient(text: str) -> frozenset[str]:
    return frozenset(w.casefold() for w in _SALIENT.findall(text))


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


def _fault(ask: Ask, shown: dict[int, str]) -> int | None:
    """The step the prompt shows with the fault's words, else the earliest step a summary line of
    the prompt (``- step N (agent): ...``) quotes the fault for: where this prompt tells of it."""
    found = ask.fault_id(shown)
    if found is not None:
        return found
    quoted = [int(m.group(1)) for m in _SUMMARY_LINE.finditer(ask.prompt) if ask.quotes_fault(m.group(2))]
    return min(quoted) if quoted else None


def _flag_words(ask: Ask, text: str) -> str:
    """What a reader who saw the fault in `text` writes of it: its words, verbatim (the fault's
    words only where the prompt showed them); the caller cuts it to the field's bound."""
    return ask.quote_of_fault(text, SUMMARY_QUOTE_CHARS) or " ".join(text.split()[:8])


# ---- prior --------------------------------------------------------------------------------------


def _text(ask: Ask, name: str, text: str) -> str:
    return clip_to(schema_field(ask.grammar, name), text)


def stated_answer(task: str) -> str:
    """The answer the task itself states ("the expected answer is 42."), else ''."""
    m = _STATED_ANSWER.search(task)
    return m.group(1).strip() if m else ""


def _prior(ask: Ask, honest: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"expected_plan": _text(ask, "expected_plan", "Solve the task step by step, checking each result.")}
    if "expected_answer" in ask.grammar.spec["properties"]:
        known = ask.fenced("ANSWER").strip() or stated_answer(ask.fenced("TASK"))
        believed = sorted(_salient(ask.fenced("RESULT")))
        answer = known if honest else (believed[0] if believed else "")
        out["expected_answer"] = _text(ask, "expected_answer", answer or "unknown")
    item = schema_field(ask.grammar, "must_do")["items"]
    out["must_do"] = [clip_to(item, "Verify every intermediate result against the task.")]
    return out


# ---- windows --------------------------------------------------------------------------------------


def _focus(ask: Ask, ids: list[int], shown: dict[int, str], fault: int | None) -> int | None:
    """The fault where it is a focus choice, else the step that shares most with the wrong result (earliest)."""
    if not ids:
        return None
    if fault in ids:
        return fault
    result = _salient(ask.fenced("RESULT"))
    return max(ids, key=lambda i: (len(_salient(shown.get(i, "")) & result), -i))


def _stage(ask: Ask, node: dict[str, Any], shown: dict[int, str], fault: int | None) -> dict[str, Any]:
    focus = _focus(ask, node_ints(node["properties"]["focus_step"]), shown, fault)
    return {"summary": clip_to(node["properties"]["summary"], _stage_summary(ask, shown, fault)), "focus_step": focus}


def _stage_summary(ask: Ask, shown: dict[int, str], fault: int | None) -> str:
    """What the window did, as a model writes it, up to the field's bound (a real model's summary
    is about as long as allowed, not four words: issue 52): the error first where it saw one (in
    the fault's words), then each shown step's opening words."""
    said = [f"an error at step {fault}: {_flag_words(ask, shown.get(fault, ''))}"] if fault is not None else []
    said += [f"step {i}: " + " ".join(shown[i].split()[:SUMMARY_STEP_WORDS]) for i in sorted(shown) if shown[i].strip()]
    return "; ".join(said) or "the work goes on"


def _window_fault(ask: Ask, shown: dict[int, str], own: list[int], honest: bool) -> int | None:
    """The step this answer takes for the fault: the one shown with its words (an earlier step
    the prompt shows for context, too), or (a wrong answer) a symptom among the window's `own`
    steps, else a plausible one of them."""
    fault = ask.fault_id(shown)
    if honest or not own:
        return fault
    wrongs = [c for c in _symptoms(ask, shown, fault) if c in own]
    return wrongs[0] if wrongs else ask.wrong_step(own, honest=fault)


def _symptoms(ask: Ask, shown: dict[int, str], fault: int | None) -> list[int]:
    """The shown steps a fooled judge takes for the error's source: those after the step shown
    with the fault's words that show the error (they share a number or a name with it or with
    the wrong result). None where the prompt shows no fault. The paper's premise: a step-by-step
    reading blames the symptoms."""
    if fault is None:
        return []
    error = _salient(shown.get(fault, "")) | _salient(ask.fenced("RESULT"))
    return [c for c in sorted(shown) if c > fault and _salient(shown[c]) & error]


def _window(ask: Ask, honest: bool = True) -> dict[str, Any]:
    """A window's steps (the grammar's keys) and its stage; the steps the prompt shows before
    them are the earlier results (the fault recognised there too), never answered."""
    shown = ask.shown_steps()
    asked = schema_field(ask.grammar, "steps")["properties"]
    own = sorted(int(k) for k in asked)
    fault = _window_fault(ask, shown, own, honest)
    result = ask.fenced("RESULT")
    task = ask.fenced("TASK")
    run = _RUN_LENGTH.search(ask.prompt)
    last = int(run.group(1)) - 1 if run else max(shown, default=-1)
    steps = {}
    for key, node in asked.items():
        i, props = int(key), node["properties"]
        text = shown.get(i, "")
        before = "\n".join([task, *(shown.get(j, "") for j in own if j < i)])
        fixed = props["active"].get("const")
        hit = i == fault
        steps[key] = {
            "agent": props["agent"]["const"],
            "action": clip_to(props["action"], " ".join(text.split()[:12]) or f"step {i}"),
            "decision": clip_to(props["decision"], "an error: " + _flag_words(ask, text) if hit else "carries on"),
            "active": fixed if fixed is not None else not _forwards(text, before, task),
            "outcome_relevance": hit or i == last or _relevant(text, result),
            "prior_inconsistency": hit,
            "execution_inconsistency": hit,
        }
    mine = {i: shown.get(i, "") for i in own}
    stage = _stage(ask, schema_field(ask.grammar, "stage"), mine, fault if fault in mine else None)
    return {"steps": steps, "stage": stage}


# ---- links, ratings, verification, re-search -------------------------------------------------


def _link(i: int, j: int, shown: dict[int, str], fault: int | None) -> str:
    if fault is not None and i >= fault:
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
    fault = _fault(ask, shown)
    node = schema_field(ask.grammar, "links")
    keys = list(node["properties"])
    labels = {key: _link(*_pair_of(key), shown, fault) for key in keys}
    if not honest:  # one link misread: one that touches a plausible wrong step, else any
        wrong = ask.wrong_step(sorted({int(x) for k in keys for x in k.split(">")}), shown=shown)
        key = ask.rng.choice([k for k in keys if str(wrong) in k.split(">")] or keys)
        labels[key] = ask.rng.choice([lab for lab in TRANSITION_LABELS if lab != labels[key]])
    out = {}
    for key, label in labels.items():
        i, j = key.split(">")
        reason = node["properties"][key]["properties"]["reason"]
        says = f"step {j} builds on step {i}" if label == "follow_up" else f"step {i} -> step {j}: {label}"
        out[key] = {"reason": clip_to(reason, says), "label": label}
    return {"links": out}


def _rating(c: int, fault: int | None, node: dict[str, Any]) -> dict[str, Any]:
    hit, carries = c == fault, fault is not None and fault < c
    suspicion = SUSPICION_MAX if hit else 2 if carries else 3
    says = "it introduces the error" if hit else "it carries an earlier error" if carries else "no error of its own is visible"
    out: dict[str, Any] = {"analysis": clip_to(node["properties"]["analysis"], f"step {c}: {says}")}
    out.update({s: hit or (carries and s == "affects_later") for s in RANK_SIGNALS})
    out["suspicion"] = suspicion
    return out


def _rank(ask: Ask, honest: bool = True) -> dict[str, Any]:
    shown = ask.shown_steps()
    fault = _fault(ask, shown)
    node = schema_field(ask.grammar, "ratings")
    out = {int(key): _rating(int(key), fault, rating) for key, rating in node["properties"].items()}
    if not honest:  # the steps that show the error (else a plausible one) rated as it, the fault left unsure
        wrongs = [c for c in _symptoms(ask, shown, ask.fault_id(shown)) if c in out] or [ask.wrong_step(sorted(out), shown=shown)]
        if fault in out and fault not in wrongs:
            out[fault].update({"suspicion": SUSPICION_MAX // 2, **{s: False for s in RANK_SIGNALS}})
        for wrong in wrongs:
            out[wrong].update({"suspicion": SUSPICION_MAX, **{s: True for s in RANK_SIGNALS}})
    return {"ratings": {str(c): r for c, r in out.items()}}


def _verify(ask: Ask, honest: bool = True) -> dict[str, Any]:
    (c,) = ask.key_ints()
    shown = ask.shown_steps()
    fault = ask.fault_id(shown)
    found = c == fault
    if honest:
        independent = sufficient = found
    elif found or fault is None or fault < c:
        # the fault missed, or a step that shows the error (a carrier) taken for its source
        independent = sufficient = not found
    else:  # nothing wrong in c, the fault shown later: it sees no inheritance, but no recovery either
        independent, sufficient = True, False
    limit = min(QUOTE_CHARS, max_length(ask.grammar, "quote"))
    text = shown.get(c, "").strip()
    quote = (ask.quote_of_fault(text, limit) if found else "") or clip(text, limit) or ask.agents().get(c, f"step {c}")
    return {
        "analysis": clip_to(
            schema_field(ask.grammar, "analysis"),
            f"step {c} {'introduces' if independent and sufficient else 'does not introduce'} the decisive error",
        ),
        "error_independence": independent,
        "counterfactual_sufficiency": sufficient,
        "quote": clip(quote, limit),
    }


def _research(ask: Ask, honest: bool = True) -> dict[str, Any]:
    perms = schema_choices(ask.grammar, "ranking")
    rankable = sorted(perms[0])
    shown = ask.shown_steps()
    fault = ask.fault_id({i: t for i, t in shown.items() if i in rankable})
    pointed = _POINTS_AT.search(ask.prompt)
    t_hat = int(pointed.group(1)) if pointed else rankable[0]
    honest_top = fault if fault is not None else nearest(rankable, t_hat)
    top = honest_top if honest else ask.wrong_step([s for s in rankable if s != honest_top] or rankable, honest=honest_top)
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
            "a plan; the expected answer only where the prompt shows it or the task states it",
            "the wrong result's value as expected",
        ),
        Rule(
            "window",
            r"falat/window/\d+",
            _window,
            lambda ask: _window(ask, honest=False),
            "passive where a step repeats what was shown; outcome relevance by the result's numbers and names; "
            "inconsistencies at the step shown with the fault's words",
            "a symptom (else a plausible step) flagged instead",
        ),
        Rule(
            "links",
            r"falat/links/\d+",
            _links,
            lambda ask: _links(ask, honest=False),
            "follow_up from the fault (shown, or quoted by a summary); else by the texts",
            "one link misread",
        ),
        Rule(
            "ranking",
            r"falat/rank/\d+",
            _rank,
            lambda ask: _rank(ask, honest=False),
            "10 at the fault, 2 after it, 3 elsewhere",
            "the symptoms (else a plausible step) rated 10, the fault 5",
        ),
        Rule(
            "verify",
            r"falat/verify/\d+",
            _verify,
            lambda ask: _verify(ask, honest=False),
            "both true only at the step shown with the fault's words",
            "the fault missed, or a carrier passed",
        ),
        Rule(
            "re-search",
            r"falat/research",
            _research,
            lambda ask: _research(ask, honest=False),
            "the step shown with the fault's words first, else the step searched",
            "a plausible other step first",
        ),
    ],
    dropped_at=dropped_at,
)
