"""SAFARI end to end on the REAL embedded model (vLLM CPU build), in the shared real sweep (tests/realsweep.py).

The 135M model cannot find real faults; what must hold is that the machinery is real: every turn
parses under the grammar and the answer is a step of the trace (same seed, same records:
tests/methods/test_reproducible.py).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.real


def test_safari_on_the_real_sweep(real_sweep):
    for rec, trace in real_sweep.with_traces("safari"):
        assert rec["method"] == "safari:max_turns=3:transcript=true" and rec["method_name"] == "safari"
        assert rec["seed"] == 7 and rec["error"] is None
        assert rec["stop_reason"] in ("submitted", "forced", "memory")  # a forced final the model cannot write: from memory
        assert 0 <= rec["step"] < len(trace.steps)
        assert rec["agent"] == trace.agent_at(rec["step"])
        assert set(rec["usage"]) >= {"calls", "prompt_tokens", "completion_tokens", "cached_tokens"}
        assert rec["usage"]["calls"] >= 3 and rec["usage"]["cached_tokens"] > 0
        turns = [t for t in rec["transcript"] if t["turn"] != "final"]
        assert 1 <= len(turns) <= 3
        for t in turns:
            assert t["output"]["tool"]["name"] in ("read", "search", "evaluate", "submit_step")


def test_window_budget_and_head_refusal_in_process(vllm_engine, whowhen):
    """No budget on a trace far past the window: the window is the budget, and the record says so; a
    budget below the fixed head is that trace's error record, with no model call. The window the
    method is given is 5120 tokens, as a smaller engine's (the session engine's is 8192; SAFARI's
    head here is 3,747): the same sizing against the real tokenizer and chat template, at less
    prefill (52 s at 8192)."""
    from localfa.grammars.safari import SafariLimits
    from localfa.methods.base import MethodContext
    from localfa.methods.registry import get_method
    from localfa.methods.runner import method_job, run_jobs
    from localfa.traces.load import load_trace

    trace = load_trace(whowhen / "hand-crafted" / "19.json")
    # the shortest texts: the 135M model writes every string to its bound, and the budget is the
    # point here (79 s with 60-80 characters a text, 48 s with 20). The final's reasoning is 20 too:
    # the model fills it with escapes (`\n\n\"`, a token each), and at 80 it was cut at its token
    # allowance and asked again.
    lean = dict(analysis_chars=20, note_chars=20, reason_chars=20, evidence_chars=20, still_need_chars=20, still_need_items=1)
    lean |= dict(next_action_chars=20, pattern_chars=20, question_chars=20, max_questions=1, reasoning_chars=20)
    lean |= dict(submit_reasoning_chars=20, feedback_chars=20)
    # one turn, then the forced final: both prompts sized against the window
    method = get_method("safari", max_turns=1, transcript=True, limits=lean)
    window = 5120
    assert vllm_engine.max_model_len > window
    jobs = [
        method_job(vllm_engine, method, MethodContext(trace, seed=3, budget=b, max_model_len=window), key=str(b)) for b in (None, "500")
    ]
    results = dict(run_jobs(vllm_engine, jobs))
    rec, refused = results["None"], results["500"]
    limits: SafariLimits = method.for_model(vllm_engine.method_defaults).options.limits  # the spec's, over the profile's
    limit = window - 2 * limits.turn_max_tokens() - 64
    assert limits.analysis_chars == 20
    # a forced final the model cannot write is answered from memory (issue 53.6): any of the three
    assert rec.error is None and rec.stop_reason in ("submitted", "forced", "memory")
    assert (rec.details["budget"], rec.details["budget_limit"], rec.details["trace_fits"]) == ("window", limit, False)
    first = rec.transcript[0]
    assert 0 < first["prompt_tokens"] <= limit  # chat-template tokens, as the model counted them
    assert all(t["prompt_tokens"] < window for t in rec.transcript)
    assert refused.stop_reason == "error" and refused.usage["calls"] == 0
    assert "BudgetError: budget 500 (500 tokens) is smaller than SAFARI's fixed head" in refused.error
