"""DRIFT end to end on the REAL embedded model (vLLM CPU build), in the shared real sweep (tests/realsweep.py).

The 135M model cannot audit claims well; what must hold is that the machinery is real: every
stage's output parsed under its grammar (a violation would be an error record), the ledger keeps
its ordering, spans lie inside the trace, and cost per stage adds up (same seed, same records:
tests/methods/test_reproducible.py). Segmentation is on, so all four stages can run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from localfa.methods.drift.audit import STAGES

pytestmark = pytest.mark.real


def _check(rec, trace):
    n = len(trace.steps)
    assert rec["error"] is None, rec["error"]
    assert rec["method"].startswith("drift") and rec["seed"] == 7
    details = rec["details"]
    spans = details["spans"]  # contiguous, ordered, covering the trace
    assert spans[0][0] == 0 and spans[-1][1] == n - 1
    assert all(b[0] == a[1] + 1 and a[0] <= a[1] for a, b in zip(spans, spans[1:]))
    assert all(list(s) in spans for s in rec["spans"])  # predicted spans are real spans
    marked, added = details["error_spans"], details["endpoint_spans"]  # the tracer's, then the late endpoints
    assert sorted(spans.index(list(s)) for s in rec["spans"]) == sorted(marked + added)
    assert details["step_is_fallback"] is (not marked)
    if marked:
        first = spans[marked[0]]
        assert first[0] <= rec["step"] <= first[1] and all(i > marked[0] for i in added)
    assert rec["agent"] == trace.agent_at(rec["step"]) and rec["step"] in trace.action_steps()
    options = details["options"]  # the embedded model's small bounds came from its profile
    assert options["profile"] == "cpu-embedded" and options["from_profile"]["claims_per_chunk"] == 3
    for c in details["ledger"]:
        assert 0 <= c["introduced"] < len(spans)
        if c["consequential"] is not None:
            assert c["introduced"] <= c["consequential"] <= min(c["uses"], default=len(spans))
        assert all(u < len(spans) for u in c["uses"])
    for s in details["support"]:
        assert s["status"] in ("DIRECT", "WEAK", "MISSING", "CONFLICTING") and 0 <= s["span"] < len(spans)
    cost = details["cost"]
    # an answer cut at its token bound is asked again with more room (one more call), and recorded
    retried = Counter(r["stage"] for r in details["bounds_hit"].get("max_tokens_retry", []))
    assert sum(cost[s]["calls"] for s in STAGES) == rec["usage"]["calls"]
    assert sum(cost[s]["prompt_tokens"] for s in STAGES) == rec["usage"]["prompt_tokens"]
    assert cost["segment"]["calls"] - retried["segment"] == len(details["segment_chunks"]) >= 1
    reasked = 1 if details.get("ledger_reasked") else 0  # the keeper's second look (issue 51): one more ledger call
    assert cost["ledger"]["calls"] - retried["ledger"] == len(details["ledger_chunks"]) + len(details["ledger_retries"]) + reasked >= 1
    assert cost["support"]["calls"] - retried["support"] == len(details["support"])
    assert (details["first_error_span"] is None) == (details["no_error_reason"] is not None)


def test_drift_on_the_real_sweep(real_sweep):
    for rec, trace in real_sweep.with_traces("drift"):
        _check(rec, trace)
