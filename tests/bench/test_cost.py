"""Pricing a diagnosis: the block-level prefix cache, real prompt tokens, a method's cost on the oracle."""

from __future__ import annotations

from array import array

import pytest

from localfa.bench.cost import TraceCost, growth_exponent, power_law, summary
from localfa.bench.prefill import BlockPrefixCache, PromptTokens, load_tokenizer, replay
from localfa.engine.model import embedded_model_dir_if_ready


def ids(*values: int) -> array:
    return array("i", values)


def seq(start: int, n: int) -> array:
    return array("i", range(start, start + n))


def test_a_block_hits_only_when_every_block_before_it_hit():
    cache = BlockPrefixCache()
    a = seq(0, 40)  # blocks [0,16) [16,32) and 8 tokens that fill no block
    assert cache.admit(a) == 0  # cold
    assert cache.admit(a) == 32  # both full blocks again
    shares_20 = array("i", [*range(0, 20), *range(900, 920)])
    assert cache.admit(shares_20) == 16  # the second block differs at token 20
    second_block_only = array("i", [*range(500, 516), *range(16, 40)])
    assert cache.admit(second_block_only) == 0  # same tokens 16..31, other prefix: no hit


def test_the_last_token_is_always_computed():
    cache = BlockPrefixCache()
    exact = seq(0, 32)
    cache.admit(exact)
    assert cache.admit(exact) == 16  # vLLM caps a hit at len - 1: the second block is recomputed
    assert cache.admit(seq(0, 33)) == 32


def test_replay_counts_uncached_tokens_in_order():
    system = seq(0, 64)
    trace = seq(1000, 160)
    prompts = [array("i", [*system, *trace, *seq(5000 + 100 * i, 20)]) for i in range(3)]
    out = replay(prompts)
    assert out.prompts == 3 and out.prompt_tokens == 3 * 244
    assert out.cached_tokens == 2 * 224  # system + trace (14 blocks) hit for the 2nd and 3rd calls
    assert out.uncached_tokens == 244 + 2 * 20


def test_growth_exponent_and_power_law():
    pts = [(x, 3.0 * x**1.5) for x in (10.0, 100.0, 1000.0)]
    assert growth_exponent(pts) == pytest.approx(1.5)
    assert power_law(pts) == pytest.approx((3.0, 1.5))
    assert growth_exponent([(10.0, 1.0)]) is None


def test_summary_is_per_trace_and_prefill_a_ratio_of_totals():
    costs = [
        TraceCost("m", "a", trace_tokens=100, calls=2, prompt_tokens=300, uncached_tokens=150, correct=True, harness_s=0.02, peak_mb=5.0),
        TraceCost("m", "b", trace_tokens=300, calls=4, prompt_tokens=900, uncached_tokens=450, correct=False, harness_s=0.04, peak_mb=9.0),
        TraceCost("m", "c", trace_tokens=500, finished=False, error="did not finish in 1 s"),
    ]
    s = summary(costs)
    assert s["traces"] == 2 and s["unfinished"] == 1
    assert s["calls_per_trace"] == 3 and s["uncached_prefill_per_trace_token"] == pytest.approx(600 / 400)
    assert s["harness_ms_per_call"] == pytest.approx(10.0) and s["peak_memory_mb"] == 9.0 and s["step_accuracy"] == 0.5


@pytest.fixture(scope="module")
def tokens() -> PromptTokens:
    folder = embedded_model_dir_if_ready()
    if folder is None:
        pytest.skip("the embedded model is not converted (scripts/setup_cpu.sh)")
    return PromptTokens(load_tokenizer(folder))


def test_chunked_tokenizing_equals_the_whole(tokens):
    assert tokens.exact
    trace = 'Step 1. The agent said: "open the file".\nIt did. Then it <|im_end|> quoted a token.\n\n  indented\nEnd. ' * 30
    for messages in (
        [{"role": "user", "content": trace}],
        [{"role": "system", "content": "Find the faulty step."}, {"role": "user", "content": trace + "Which step?"}],
    ):
        whole = tokens.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        expected = tokens.tok.backend_tokenizer.encode(whole, add_special_tokens=False).ids
        assert list(tokens.prompt_ids(messages)) == expected
    assert tokens.count("hello world") == len(tokens.tok.backend_tokenizer.encode("hello world", add_special_tokens=False).ids)


def test_a_method_priced_on_the_oracle(tokens):
    from localfa.bench.cost import measure
    from tests.bench.test_longruns import small_run

    cost = measure("all-at-once", small_run(), tokens)
    assert cost.finished and cost.error is None and cost.correct is True
    assert cost.calls == 1 and cost.prompt_tokens > cost.trace_tokens > 0
    assert cost.uncached_tokens == cost.prompt_tokens  # one call: nothing cached before it
    assert cost.completion_tokens > 0 and cost.record_bytes > 0


def test_isolated_runs_report_memory_and_stop_at_the_time_limit(tokens):
    from localfa.bench.cost import measure_isolated
    from tests.bench.test_longruns import small_run

    done = list(measure_isolated("all-at-once", [small_run()], tokens, timeout_s=120))
    assert len(done) == 1 and done[0].finished and done[0].peak_mb is not None and done[0].calls == 1
    stopped = list(measure_isolated("all-at-once", [small_run(), small_run()], tokens, timeout_s=0.001))
    assert [c.finished for c in stopped] == [False, False]
    assert stopped[0].error == "did not finish in 0.001 s"
