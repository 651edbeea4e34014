"""prism's logic (issue 50): symptoms, candidates and the pass-2 ranking on known numbers; the
windows over a long run; the whole method on the scripted engine's score stand-in."""

from __future__ import annotations

import pytest

from localfa.engine.scripted import ScriptedEngine
from localfa.methods.base import MethodContext
from localfa.methods.prism.render import cut, windows
from localfa.methods.prism.signals import candidates, has_failure_words, rank, rank_by_nll, symptoms
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.model import Labels, Step, Trace


def test_symptoms_put_failure_words_first_then_the_highest_nll():
    nll = [1.0, 5.0, 2.0, 3.0, None, 4.0, 0.5, 0.7, 0.9, 1.1]
    failing = [False, False, True, False, False, False, False, False, False, False]
    assert symptoms(nll, failing, 0.2) == [1, 2]  # 20% of 9 scored steps: 2; step 2 first by its words
    assert symptoms(nll, [False] * 10, 0.2) == [1, 5]
    assert symptoms([None, None], [False, False], 0.2) == []
    assert has_failure_words("Traceback (most recent call last)") and not has_failure_words("All good.")


def test_candidates_are_the_earlier_steps_later_symptoms_attend_to():
    att = [[0.0] * 5 for _ in range(5)]
    att[3][1], att[3][0], att[4][1], att[4][2] = 0.5, 0.1, 0.2, 0.4
    assert candidates(att, [3, 4], {0, 1, 2, 3}, 2) == [1, 2]  # H_1 = 0.7, H_2 = 0.4, H_0 = 0.1
    assert candidates(att, [3, 4], {0, 2}, 5) == [2, 0]  # only allowed (action) steps


def test_rank_weighs_attention_by_the_nll_drop_and_support():
    att = [[0.0] * 4 for _ in range(4)]
    att[3][:3] = [0.1, 0.3, 0.2]  # mean 0.2: ratios 0.5, 1.5, 1.0
    nll = [1.0, 2.0, 0.0, 3.0]
    ranked = rank(att, nll, [3], [0, 1, 2], k=2)  # top-2 attended by 3: steps 1, 2
    # s(0|3) = 0.5 * (1 + 2) = 1.5; s(1|3) = 1.5 * 2 = 3 -> x1.3; s(2|3) = 1.0 * 4 = 4 -> x1.3
    assert ranked.scores == pytest.approx({0: 1.5, 1: 3.9, 2: 5.2})
    assert ranked.order() == [2, 1, 0] and ranked.support == {0: [], 1: [3], 2: [3]}
    assert ranked.margin() == pytest.approx((5.2 - 3.9) / 5.2)
    by_nll = rank_by_nll([1.0, 2.0, 1.8], [False, False, True], [0, 1, 2])
    assert by_nll.order() == [2, 1, 0]


def test_windows_overlap_and_cover_every_step():
    parts = windows([100] * 10, 350, 1)
    assert parts == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6, 7, 8], [8, 9]]
    assert windows([100] * 3, 1000, 2) == [[0, 1, 2]]
    assert windows([500, 500], 100, 1) == [[0], [1]]  # a step larger than the room still gets one
    assert cut("a b c d e f g h", 8, 4).endswith(" [...]") and cut("short", 1, 4) == "short"


def _trace(n: int, fault: int) -> Trace:
    steps = [
        Step(
            index=i,
            agent=("Planner", "Coder", "Runner")[i % 3],
            role="assistant",
            content=f"step {i}: " + ("Error: file not found. " if i == fault + 2 else "") + "word " * (20 + 7 * i),
        )
        for i in range(n)
    ]
    return Trace(
        id="t",
        source="t",
        format="whowhen",
        task="Count the words.",
        steps=steps,
        labels=Labels(mistake_step=fault, mistake_agent=steps[fault].agent),
    )


def _run(trace: Trace, spec: str = "prism", window: int | None = None):
    engine = ScriptedEngine(lambda req: {})
    ctx = MethodContext(trace=trace, seed=1, max_model_len=window)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method(spec), ctx)]))
    return diag, engine


def test_prism_scores_twice_and_answers_an_action_step_with_its_evidence():
    diag, engine = _run(_trace(10, 3))
    assert diag.error is None, diag.error
    assert [r.key for r in engine.requests] == ["prism/pass1", "prism/pass2"]
    assert all(r.score is not None and len(r.score.layers) == 6 for r in engine.requests)
    assert diag.step in diag.details["pass1"]["candidates"] and diag.agent
    assert 0.0 <= diag.confidence <= 1.0 and diag.evidence
    assert diag.details["variant"].startswith("attention") and diag.usage["completion_tokens"] == 0
    assert 5 in diag.details["pass1"]["symptoms"]  # the step with failure words
    nll_only, engine = _run(_trace(10, 3), "prism:layers=0")
    assert nll_only.details["variant"] == "nll-only" and all(r.score.layers == () for r in engine.requests)


def test_a_run_longer_than_the_window_is_scored_in_overlapping_windows():
    diag, engine = _run(_trace(60, 20), "prism:window_tokens=1024:step_tokens=64")
    assert diag.error is None, diag.error
    first = [r for r in engine.requests if r.key.startswith("prism/pass1")]
    assert diag.details["windows"] == len(first) > 1
    assert all(x is not None for x in diag.details["pass1"]["nll"])  # every step scored in some window


def test_a_cascade_settles_on_prism_where_its_margin_is_clear():
    trace = _trace(10, 3)
    sure = _run(trace)[0].confidence
    assert sure is not None and sure < 1
    settled, engine = _run(trace, f"cascade:stages=prism>all-at-once:margin={sure}")
    assert settled.error is None and settled.details["answered_by"]["stage"] == 0 and settled.step == _run(trace)[0].step
    assert all(r.score is not None for r in engine.requests)  # the careful stage never ran
    passed_on, engine = _run(trace, f"cascade:stages=prism>all-at-once:margin={(sure + 1) / 2}")
    assert passed_on.details["answered_by"]["stage"] == 1 and any(r.score is None for r in engine.requests)
