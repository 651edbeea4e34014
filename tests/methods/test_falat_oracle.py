"""FALAT's oracle policy reads the prompt, never the answer key (issue 49): on the requests FALAT
really sends, a step is flagged only where its shown text carries the fault's words, a summary
carries those words only where its prompt showed them, a rating learns of an earlier fault only
from a summary that quotes it, and the prior states an expected answer only where the task does.
"""

from __future__ import annotations

import dataclasses
import json
import random
from functools import lru_cache

from localfa.engine.factory import make_engine
from localfa.engine.types import Request
from localfa.grammars.falat import FalatLimits, rank_grammar
from localfa.methods.base import MethodContext
from localfa.methods.falat.oracle import POLICY, stated_answer
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.oracle.labels import fingerprint_of
from localfa.oracle.mutants import blind_prompt
from localfa.oracle.policy import Ask
from localfa.traces.model import Labels, Step, Trace
from tests.methods.synthetic import synthetic_trace

FAULT = 6
FAULT_TEXT = "I read the archive ledger and take the harbour tariff of 1887 as the base rate without checking the newer schedule"


def _trace() -> Trace:
    trace = synthetic_trace(14, "oracle-falat", "step {i} says the count is {i} ", labels=Labels(mistake_agent="Coder", mistake_step=FAULT))
    steps = list(trace.steps)
    steps[FAULT] = Step(index=FAULT, agent=steps[FAULT].agent, role="assistant", content=FAULT_TEXT)
    return trace.model_copy(update={"steps": steps})


@lru_cache(maxsize=1)
def _run() -> tuple[Trace, list[Request], object]:
    """FALAT on the honest oracle: the trace, every request it sent, and its diagnosis."""
    trace = _trace()
    engine = make_engine("oracle", say=lambda _: None)
    sent: list[Request] = []
    answer = engine.answer

    def spy(req: Request) -> tuple[str, bool]:
        sent.append(req)
        return answer(req)

    engine.answer = spy  # type: ignore[method-assign]
    ((_, diagnosis),) = list(run_jobs(engine, [method_job(engine, get_method("falat"), MethodContext(trace, seed=0))]))
    return trace, sent, diagnosis


def _ask(req: Request, prompt: str | None = None) -> Ask:
    if prompt is not None:
        req = dataclasses.replace(req, messages=req.messages[:-1] + ({"role": "user", "content": prompt},))
    fingerprint = fingerprint_of(_run()[0])
    assert fingerprint is not None
    return Ask(req, fingerprint, random.Random(0))


def _honest(ask: Ask) -> dict:
    rule = POLICY.rule_for(ask.key)
    assert rule is not None, ask.key
    value = rule.honest(ask)
    return json.loads(json.dumps(value))


def _sent(prefix: str) -> list[Request]:
    return [r for r in _run()[1] if r.key.startswith(prefix)]


def test_falat_finds_a_fault_whose_words_it_reads():
    trace, _, diagnosis = _run()
    assert diagnosis.error is None and diagnosis.step == FAULT


def test_a_window_flags_the_step_shown_with_the_faults_words_and_nothing_once_they_are_nonsense():
    (window,) = [r for r in _sent("falat/window/") if str(FAULT) in r.grammar.spec["properties"]["steps"]["properties"]]
    steps = _honest(_ask(window))["steps"]
    assert [int(k) for k, s in steps.items() if s["prior_inconsistency"]] == [FAULT]
    for mode in ("removed", "nonsense"):
        blinded = _honest(_ask(window, blind_prompt(window.messages[-1]["content"], mode)))
        assert not any(s["prior_inconsistency"] or s["execution_inconsistency"] for s in blinded["steps"].values()), mode


def test_a_summary_carries_the_faults_words_only_where_its_prompt_showed_them():
    for req in _sent("falat/window/"):  # a window's stage summarises its own steps (the earlier ones are context)
        ask = _ask(req)
        stage = _honest(ask)["stage"]
        own = {int(k) for k in req.grammar.spec["properties"]["steps"]["properties"]}
        shows_fault = ask.fault_id({i: t for i, t in ask.shown_steps().items() if i in own}) is not None
        assert ask.quotes_fault(stage["summary"]) == shows_fault, (req.key, stage["summary"])


def test_a_rating_learns_of_an_earlier_fault_only_from_a_summary_that_quotes_it():
    # the rating call of the group shares the links call's prompt (its group block); the run
    # pruned all but one candidate, so the rating asks about the group's view itself
    (links,) = _sent("falat/links/")
    view = sorted(_ask(links).shown_steps())
    rank = dataclasses.replace(links, key=f"falat/rank/{view[0]}", grammar=rank_grammar(view, FalatLimits()))
    prompt = rank.messages[-1]["content"]
    ask = _ask(rank)
    ratings = _honest(ask)["ratings"]
    assert ratings[str(FAULT)]["suspicion"] == 10
    later = [int(c) for c in ratings if int(c) > FAULT]
    assert later and all(ratings[str(c)]["suspicion"] == 2 for c in later)
    # the fault's own text blinded, its summary line still quoting it: read from the summary
    blinded = blind_prompt(prompt, "nonsense")
    assert any(ask.quotes_fault(line) for line in blinded.splitlines() if line.lstrip().startswith(f"- step {FAULT} ("))
    carried = _honest(_ask(rank, blinded))["ratings"]
    assert all(carried[str(c)]["suspicion"] == 2 for c in later) and carried[str(FAULT)]["suspicion"] == 10
    # and with that line gone too, nothing is known either way
    unknown = "\n".join(line for line in blinded.splitlines() if not line.lstrip().startswith(f"- step {FAULT} ("))
    assert {r["suspicion"] for r in _honest(_ask(rank, unknown))["ratings"].values()} == {3}


def test_verification_passes_the_shown_fault_only_and_quotes_its_words():
    verdicts = {r.key: _honest(_ask(r)) for r in _sent("falat/verify/")}
    passed = [k for k, v in verdicts.items() if v["error_independence"] and v["counterfactual_sufficiency"]]
    assert passed == [f"falat/verify/{FAULT}"]
    assert verdicts[f"falat/verify/{FAULT}"]["quote"] in FAULT_TEXT


def test_the_prior_states_an_expected_answer_only_where_the_task_does():
    assert stated_answer("How many rooms? The expected answer is 412.") == "412"
    assert stated_answer("Your answer should be a numerical integer value.") == ""
    (prior,) = _sent("falat/prior")
    assert _honest(_ask(prior))["expected_answer"] == "unknown"  # the synthetic task states none
    told = prior.messages[-1]["content"].replace("Count the even addresses.", "Count the even addresses. The correct answer is 7.")
    assert _honest(_ask(prior, told))["expected_answer"] == "7"
