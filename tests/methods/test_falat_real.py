"""FALAT end to end on the REAL embedded model (vLLM CPU build), in the shared real sweep (tests/realsweep.py).

The 135M model cannot find real faults; what must hold is that the machinery is real: every
stage's output parsed under its grammar (a violation would be an error record) and obeys the
orderings the grammars build in, and cost per stage adds up (same seed, same records:
tests/methods/test_reproducible.py). One short Who&When run keeps the test lean.
"""

from __future__ import annotations

import pytest

from localfa.methods.falat.candidates import PASSIVE_JUDGED
from localfa.methods.falat.method import ALL_PASSIVE_WARNING
from localfa.view.page import build_page
from localfa.view.records import group_records
from tests.realsweep import FALAT_LEAN

pytestmark = pytest.mark.real

LABELS = {"follow_up", "redundancy", "no_influence", "error_shift", "correction", "dead_end"}
ROLES = {"ROOT_CAUSE", "PROPAGATION", "SYMPTOM", "CONTRIBUTING"}
# Every stage runs. The embedded model's profile (serving/profiles/cpu-embedded.toml) sizes the
# bounds; one pair per candidate each way, shorter step text and short texts (the 135M model
# writes every string to its bound) keep the run in CI's time. Canonical:
# options sorted.
LEAN = FALAT_LEAN


def _check(rec, trace):
    n = len(trace.steps)
    assert rec["error"] is None, rec["error"]
    assert rec["method"] == LEAN and rec["seed"] == 7
    d = rec["details"]
    opts = d["options"]  # the strong-model defaults, overridden by the embedded model's profile, then the spec
    assert opts["profile"] == "cpu-embedded" and opts["from_profile"]["rank_step_tokens"] == 200
    assert opts["values"]["pair_quota"] == 1 and "pair_quota" not in opts["from_profile"]
    assert d["context_window"] == {"tokens": 8192, "source": "engine"}
    assert set(d["warnings"]) <= {ALL_PASSIVE_WARNING}  # the 135M model may judge every step of a short run passive
    assert d["window"] == 3 and d["windows"][0][0] == 0 and d["windows"][-1][1] == n - 1
    recorded = [m["index"] for m in d["mid_level"]]  # the steps the search ended near, in order; the rest counted
    assert recorded == sorted(set(recorded)) and len(recorded) + d["mid_level_left_out"] == n
    assert all(m["agent"] == trace.steps[m["index"]].agent for m in d["mid_level"])
    assert len(d["stages"]) == len(d["windows"])
    for s in d["stages"]:
        assert s["focus_step"] is None or s["window"][0] <= s["focus_step"] <= s["window"][1]
    judged = set(d["passive"].get(PASSIVE_JUDGED, []))
    never = {s for why, steps in d["passive"].items() if why != PASSIVE_JUDGED for s in steps}  # observations, human turns
    assert all(not m["active"] for m in d["mid_level"] if m["index"] in judged)
    assert not set(d["candidates"]) & never
    assert all(p["label"] in LABELS and p["i"] < p["j"] and p["reason"] for p in d["pairs"])
    assert sum(d["pair_counts"].values()) >= len(d["pairs"])
    assert set(d["refined"]) <= set(d["candidates"])
    assert sorted(r["step"] for r in d["ranking"]) == sorted(d["refined"])
    assert 1 <= len(d["top"]) <= 3 and [t["step"] for t in d["top"]] == [r["step"] for r in d["ranking"][:3]]
    passing = [t["step"] for t in d["top"] if t["passed"]]
    assert d["t_hat"] == (min(passing) if passing else d["top"][0]["step"])
    lo, hi = d["research"]["window"]
    assert (lo, hi) == (max(0, d["t_hat"] - 2), min(n - 1, d["t_hat"] + 2))
    assert set(d["research"]["ranking"]) <= set(range(lo, hi + 1)) and d["t_hat"] in d["research"]["ranking"]
    assert all(r["role"] in ROLES for r in d["research"]["roles"].values())
    assert rec["step"] == d["final_step"]
    first, confirmation = d["research"]["ranking"][0], d["research_confirmation"]
    assert d["final_step"] in (d["t_hat"], first) and (d["research_not_taken"] is None) == (d["final_step"] == first)
    if confirmation:  # the re-search's first step, never checked, got its own check and wins only by passing it
        assert confirmation["step"] == first and (d["final_step"] == first) == confirmation["passed"]
    elif d["t_hat_verified"]:  # an earlier top-k step that passed would be t̂ itself: t̂ stands
        assert d["final_step"] == d["t_hat"]
    else:  # nothing passed: the re-search picks among the top k
        assert d["final_step"] == d["t_hat"] or first in [t["step"] for t in d["top"]]
    assert rec["step"] not in never or d["warnings"]  # never an observation or a human turn
    assert rec["agent"] == trace.agent_at(rec["step"])
    assert all(e["verbatim"] for e in d["evidence_checked"] if e["quote"] in rec["evidence"])
    cost = d["cost"]
    assert sum(c["calls"] for c in cost.values()) == rec["usage"]["calls"]
    assert sum(c["prompt_tokens"] for c in cost.values()) == rec["usage"]["prompt_tokens"]
    assert cost["windows"]["batches"] == [len(d["windows"])] and cost["verify"]["batches"] == [len(d["top"])]
    assert cost["prior"]["calls"] == cost["research"]["calls"] == 1
    assert rec["usage"]["cached_tokens"] > 0  # siblings share the system prompt and prior block
    # the trace view draws this real record's stages (no FALAT key left to "Other details")
    html = build_page(group_records([rec]))
    assert "Judged ranking" in html or len(d["refined"]) == 1
    assert "Top candidates and verdicts" in html and "Local re-search" in html and "Other details" not in html


def test_falat_on_the_real_sweep(real_sweep):
    for rec, trace in real_sweep.with_traces("falat"):
        _check(rec, trace)
