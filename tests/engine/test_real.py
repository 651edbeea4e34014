"""The engine layer on the REAL embedded model: vLLM CPU build, transformers + Outlines, and a
real `vllm serve` behind the openai backend. Every output must satisfy its grammar."""

from __future__ import annotations

import pytest

from localfa.engine.errors import ContextLengthError, GrammarError, TruncatedOutputError
from localfa.engine.grammar import Grammar
from localfa.engine.types import Request, Sampling
from tests.engine.grammar_cases import GRAMMARS, LONG_PREFIX, Verdict, mixed_batch

pytestmark = pytest.mark.real


def _check_mixed_batch(engine):
    reqs = mixed_batch(8)
    out = engine.generate(reqs)
    assert len(out) == 8
    for req, resp in zip(reqs, out):
        req.grammar.parse(resp.text)  # re-validated independently
        assert resp.finish_reason == "stop"
        assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert isinstance(out[0].value, Verdict) and 0 <= out[0].value.score <= 100
    assert out[2].value in ("yes", "no", "maybe")
    again = engine.generate(reqs)
    assert [r.text for r in out] == [r.text for r in again], "same seeds must give identical outputs"
    return out


def test_vllm_mixed_grammar_batch_validates_and_is_reproducible(vllm_engine):
    _check_mixed_batch(vllm_engine)


def test_vllm_checked_itself_at_start_and_says_so_in_describe(vllm_engine):
    expected = {"grammar_compilation_synchronous": True, "in_process_engine": True, "cached_tokens_reported": True}
    assert vllm_engine.self_checks == expected
    described = vllm_engine.describe()
    assert described["self_checks"] == expected
    assert described["chat_template_kwargs"] == {"enable_thinking": False}


def test_seeds_are_really_used_different_seeds_sample_differently(vllm_engine):
    """temperature 1.0 over a free-ish regex: 6 seeds give more than one distinct answer,
    and each seed repeated gives its own answer back."""
    g = Grammar.regex(r"[a-z]{4,12}", name="word")
    msgs = [{"role": "user", "content": "Write one made-up word."}]
    reqs = [Request(msgs, g, Sampling(temperature=1.0, top_p=1.0, max_tokens=8, seed=s)) for s in range(6)]
    first = [r.text for r in vllm_engine.generate(reqs)]
    again = [r.text for r in vllm_engine.generate(reqs)]
    assert first == again
    assert len(set(first)) > 1, first


def test_vllm_shared_prefix_reports_cached_tokens(vllm_engine):
    out = vllm_engine.generate(mixed_batch(8, seed_base=100, prefix=LONG_PREFIX))
    assert sum(r.usage.cached_tokens for r in out) > 0
    assert max(r.usage.cached_tokens for r in out) >= 512


def test_vllm_truncation_is_retried_then_raised(vllm_engine):
    g = Grammar.json(Verdict)
    req = Request([{"role": "user", "content": "Rate step 3."}], g, Sampling(max_tokens=3, seed=1))
    with pytest.raises(TruncatedOutputError) as info:
        vllm_engine.generate([req])
    assert info.value.max_tokens == 6 and info.value.grammar_name == "Verdict"


def test_vllm_prompt_too_long_is_a_typed_error(vllm_engine):
    long = "word " * (vllm_engine.max_model_len + 100)
    with pytest.raises(ContextLengthError) as info:
        vllm_engine.generate([Request([{"role": "user", "content": long}], GRAMMARS[2])])
    assert info.value.prompt_tokens > info.value.max_model_len == vllm_engine.max_model_len


def test_vllm_rejects_an_unenforceable_grammar_by_name(vllm_engine):
    bad = Grammar("bogus_schema", "json", {"type": "object", "properties": {"x": {"type": "no-such-type"}}})
    with pytest.raises(GrammarError, match="bogus_schema"):
        vllm_engine.generate([Request([{"role": "user", "content": "x"}], bad, Sampling(max_tokens=8, seed=0))])


def test_transformers_mixed_grammar_batch_validates_and_is_reproducible(transformers_engine):
    _check_mixed_batch(transformers_engine)


def test_openai_backend_against_real_vllm_serve(vllm_server):
    from localfa.engine.factory import make_engine

    engine = make_engine("openai", base_urls=[vllm_server])
    try:
        _check_mixed_batch(engine)
        out = engine.generate(mixed_batch(8, seed_base=200, prefix=LONG_PREFIX))
        assert sum(r.usage.cached_tokens for r in out) > 0
        assert engine.self_checks == {"prompt_tokens_details": True}
    finally:
        engine.close()
