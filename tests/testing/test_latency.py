"""The latency engine (a GPU's pace for the harness benchmarks): scripted answers, continuous
batching in steps, a prefix cache, its figures, and selection by name like any engine. No
assertion here depends on how long anything took."""

from __future__ import annotations

import pytest

from localfa.engine.errors import EngineError
from localfa.engine.factory import make_engine
from localfa.engine.grammar import Grammar
from localfa.engine.scripted import scripted_default
from localfa.engine.types import Request, Sampling
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.testing.latency import LatencyEngine, parse_params
from tests.methods.synthetic import synthetic_trace

VERDICT = Grammar.json({"type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["score"]})


def _req(i: int, prompt: str = "shared prefix " * 50, grammar: Grammar = VERDICT) -> Request:
    return Request([{"role": "system", "content": prompt}, {"role": "user", "content": f"q{i}"}], grammar, Sampling(seed=i), key=f"k{i}")


def fast(**kw) -> LatencyEngine:
    return LatencyEngine(step_s=0.0, token_s=0.0, **kw)


def test_answers_are_the_scripted_engines_and_valid():
    reqs = [_req(i) for i in range(5)]
    assert [r.text for r in fast().generate(reqs)] == [r.text for r in scripted_default().generate(reqs)]


def test_a_session_returns_each_answer_as_soon_as_it_is_done_in_ticket_order():
    short = Grammar.choice(["y"], name="short")
    long = Grammar.regex("a{40}", name="long")  # 10 decode steps (4 characters a token)
    engine = fast()
    session = engine.session()
    t_long = session.submit([_req(0, grammar=long)])
    t_short = session.submit([_req(1, grammar=short), _req(2, grammar=short)])
    first = session.wait()
    assert [t for t, _ in first] == t_short  # the short ones first, the long one still decoding
    assert session.pending() == 1
    rest = session.wait()
    assert [t for t, _ in rest] == t_long and rest[0][1].text == "a" * 40
    assert engine.steps == 10 and engine.running_sum == 3 + 9  # one step with all three, then the long one alone


def test_the_batch_is_capped_and_requests_wait_their_turn():
    engine = fast(max_batch=2)
    session = engine.session()
    session.submit([_req(i, grammar=Grammar.choice(["y"], name="c")) for i in range(5)])
    done = []
    while session.pending():
        done += session.wait()
    assert len(done) == 5 and engine.steps == 3 and engine.running_sum == 5


def test_a_repeated_prompt_prefix_is_not_prefilled_again():
    engine = fast()
    first = engine._uncached_prompt_tokens(_req(0))
    again = engine._uncached_prompt_tokens(_req(1))  # same system message, another question
    assert first > again > 0
    assert engine._uncached_prompt_tokens(_req(1)) == 0


def test_figures_for_the_busy_share():
    engine = LatencyEngine(step_s=0.001, token_s=0.0)
    assert engine.busy_share() == 0.0  # nothing asked yet
    engine.generate([_req(i) for i in range(3)])
    stats = engine.stats()
    assert stats["steps"] >= 1 and stats["busy_s"] > 0 and stats["span_s"] >= stats["busy_s"] * 0.5
    assert 0 < engine.busy_share() <= 1.0 + 1e-6


def test_a_truncated_answer_is_retried_once_with_more_room():
    outputs = iter([('{"score":', "length"), '{"score":3}'])
    engine = LatencyEngine(lambda req: next(outputs), step_s=0.0, token_s=0.0)
    session = engine.session()
    session.submit([_req(0)])
    ((_, resp),) = session.wait()
    assert resp.value == {"score": 3} and resp.retried and resp.usage.calls == 2


def test_selected_by_name_with_parameters_and_runs_a_method():
    engine = make_engine("latency:step_ms=0:token_us=0:max_batch=8", say=lambda m: None)
    assert isinstance(engine, LatencyEngine) and engine.max_batch == 8 and engine.step_s == 0.0
    trace = synthetic_trace(6, "t1", "step {i} says hello")
    out = dict(run_jobs(engine, [method_job(engine, get_method("all-at-once"), MethodContext(trace))]))
    assert out["t1"].error is None and out["t1"].step is not None
    with pytest.raises(EngineError, match="step_ms=NUMBER"):
        parse_params("latency:steps=3")
    with pytest.raises(EngineError, match="not a number"):
        parse_params("latency:step_ms=fast")
