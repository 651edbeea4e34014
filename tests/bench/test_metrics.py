"""Metrics against hand-computed expectations: exact, tolerance, agent, substring trap, spans, CIs."""

from __future__ import annotations

import math

import pytest

from localfa.bench.metrics import bootstrap_ci, score_record, span_f1, substring_match, summarize, summarize_group, tolerance_curve
from localfa.results import ResultRecord


def rec(
    trace,
    step,
    agent=None,
    *,
    label_step=None,
    label_agent=None,
    faults=None,
    high=None,
    spans=None,
    method="m",
    seed=0,
    subset="s",
    error=None,
    budget="none",
    usage=None,
):
    label = None
    if label_step is not None or faults is not None or label_agent is not None:
        label = {
            "mistake_step": label_step,
            "mistake_agent": label_agent,
            "fault_steps": faults if faults is not None else ([label_step] if label_step is not None else []),
            "high_impact_steps": high or [],
        }
    return ResultRecord.model_validate(
        {
            "trace": trace,
            "method": method,
            "seed": seed,
            "budget": budget,
            "subset": subset,
            "step": step,
            "agent": agent,
            "spans": spans,
            "error": error,
            "label": label,
            "usage": usage or {"calls": 1, "prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 0},
            "wall_s": 0.5,
        }
    )


# ---- per record ---------------------------------------------------------------------------------


def test_exact_step_and_tolerances():
    s = score_record(rec("t", 4, label_step=3))
    assert s["step"] == 0.0
    assert [s[f"tol_{k}"] for k in range(1, 6)] == [1.0] * 5
    s = score_record(rec("t", 9, label_step=3))  # off by 6: outside every tolerance
    assert [s[f"tol_{k}"] for k in range(1, 6)] == [0.0] * 5
    s = score_record(rec("t", 6, label_step=3))  # off by 3
    assert [s[f"tol_{k}"] for k in range(1, 6)] == [0.0, 0.0, 1.0, 1.0, 1.0]
    s = score_record(rec("t", 3, label_step=3))
    assert s["step"] == 1.0 and s["tol_1"] == 1.0


def test_substring_trap():
    # Who&When's reference scorer: label "7" is found inside prediction "17".
    assert substring_match(7, 17) is True
    assert substring_match(1, 10) is True
    assert substring_match(17, 7) is False
    assert substring_match(7, None) is False
    s = score_record(rec("t", 17, label_step=7))
    assert s["step"] == 0.0  # ours: exact, so wrong
    assert s["step_substring"] == 1.0  # the reference scorer would count it right
    assert s["tol_5"] == 0.0


def test_agent_normalised_exact_match():
    assert score_record(rec("t", 0, "websurfer", label_step=0, label_agent="WebSurfer"))["agent"] == 1.0
    assert score_record(rec("t", 0, "Orchestrator (thought)", label_step=0, label_agent="Orchestrator"))["agent"] == 1.0
    assert score_record(rec("t", 0, "Web Surfer", label_step=0, label_agent="WebSurfer"))["agent"] == 0.0
    assert score_record(rec("t", 0, "Verification_Expert", label_step=0, label_agent="VerificationExpert"))["agent"] == 0.0
    assert score_record(rec("t", 0, None, label_step=0, label_agent="Coder"))["agent"] == 0.0


def test_failed_run_counts_as_wrong_and_unlabelled_is_skipped():
    s = score_record(rec("t", None, None, label_step=2, label_agent="A", error="boom"))
    assert s["step"] == 0.0 and s["agent"] == 0.0 and s["tol_5"] == 0.0 and s["step_substring"] == 0.0
    s = score_record(rec("t", 2, "A"))  # no label at all
    assert all(v is None for v in s.values())


def test_precision_and_strict_precision():
    lab = dict(label_step=5, faults=[2, 5, 9], high=[5])
    assert (score_record(rec("t", 2, **lab))["precision"], score_record(rec("t", 2, **lab))["strict_precision"]) == (1.0, 0.0)
    assert (score_record(rec("t", 5, **lab))["precision"], score_record(rec("t", 5, **lab))["strict_precision"]) == (1.0, 1.0)
    assert (score_record(rec("t", 4, **lab))["precision"], score_record(rec("t", 4, **lab))["strict_precision"]) == (0.0, 0.0)
    # no high-impact subset: strict precision does not apply
    assert score_record(rec("t", 2, label_step=2, faults=[2, 3]))["strict_precision"] is None


def test_span_f1_and_first_error():
    # predicted {2,3,4} vs labelled {3,4,5,6}: overlap 2 -> F1 = 2*2/(3+4) = 4/7; span 2-4 overlaps 3-6
    s = score_record(rec("t", 2, label_step=3, faults=[3, 4, 5, 6], spans=[[2, 4]]))
    assert math.isclose(s["span_f1"], 4 / 7)
    assert s["first_error"] == 1.0
    assert score_record(rec("t", 0, label_step=3, faults=[3, 4], spans=[[0, 1]]))["first_error"] == 0.0
    # predicted {3,8,9} vs {3,4}: overlap 1 -> 2*1/(3+2) = 0.4; first 3 == 3
    s = score_record(rec("t", 3, label_step=3, faults=[3, 4], spans=[[3, 3], [9, 8]]))
    assert math.isclose(s["span_f1"], 0.4)
    assert s["first_error"] == 1.0
    # no spans: span metrics do not apply
    s = score_record(rec("t", 3, label_step=3, faults=[3, 4]))
    assert s["span_f1"] is None and s["first_error"] is None
    assert span_f1(set(), set()) == 1.0 and span_f1({1}, set()) == 0.0


# ---- aggregation --------------------------------------------------------------------------------


def test_seeds_are_averaged_within_a_trace_then_over_traces():
    records = [
        rec("A", 3, "x", label_step=3, label_agent="x", seed=0),  # right
        rec("A", 5, "y", label_step=3, label_agent="x", seed=1),  # wrong (off by 2)
        rec("B", 1, "x", label_step=1, label_agent="x", seed=0),  # right
        rec("B", 1, "x", label_step=1, label_agent="x", seed=1),  # right
    ]
    g = summarize_group("m", "none", "overall", records, n_boot=200)
    # trace A: step 0.5, trace B: 1.0 -> mean 0.75 over 2 traces
    assert g.metrics["step"].mean == pytest.approx(0.75)
    assert g.metrics["step"].n == 2
    assert g.metrics["agent"].mean == pytest.approx(0.75)
    assert g.metrics["tol_1"].mean == pytest.approx(0.75)  # A seed1 off by 2
    assert g.metrics["tol_2"].mean == pytest.approx(1.0)
    assert g.traces == 2 and g.records == 4 and g.seeds == [0, 1]
    assert g.cost["calls"] == 1.0 and g.cost["tokens"] == 110.0


def test_subsets_and_overall_rows():
    records = [
        rec("A", 3, label_step=3, subset="algorithm-generated"),
        rec("B", 0, label_step=2, subset="algorithm-generated"),
        rec("C", 7, label_step=7, subset="hand-crafted"),
        rec("C", 17, label_step=7, subset="hand-crafted", method="other"),
    ]
    groups = summarize(records, n_boot=100)
    rows = {(g.method, g.subset): g for g in groups}
    assert rows[("m", "algorithm-generated")].metrics["step"].mean == pytest.approx(0.5)
    assert rows[("m", "hand-crafted")].metrics["step"].mean == pytest.approx(1.0)
    assert rows[("m", "overall")].metrics["step"].mean == pytest.approx(2 / 3)
    assert rows[("other", "overall")].metrics["step"].mean == 0.0
    assert rows[("other", "overall")].metrics["step_substring"].mean == 1.0  # the trap, visible
    assert [g.subset for g in groups if g.method == "m"] == ["algorithm-generated", "hand-crafted", "overall"]
    assert tolerance_curve(rows[("m", "overall")])[0] == (0, pytest.approx(2 / 3))


def test_bootstrap_interval_is_reproducible_and_sane():
    vals = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    a = bootstrap_ci(vals, n_boot=500, seed=0)
    b = bootstrap_ci(vals, n_boot=500, seed=0)
    assert (a.mean, a.lo, a.hi) == (b.mean, b.lo, b.hi)
    assert a.mean == pytest.approx(0.7)
    assert 0.0 <= a.lo <= a.mean <= a.hi <= 1.0
    assert a.lo < a.hi
    one = bootstrap_ci([0.5])
    assert (one.mean, one.lo, one.hi, one.n) == (0.5, 0.5, 0.5, 1)
    same = bootstrap_ci([1, 1, 1])
    assert (same.lo, same.hi) == (1.0, 1.0)


def test_empty_run():
    assert summarize([]) == []
    e = bootstrap_ci([])
    assert (e.mean, e.lo, e.hi, e.n) == (None, None, None, 0)
    g = summarize_group("m", "none", "overall", [])
    assert g.records == 0 and g.traces == 0 and g.metrics["step"].mean is None
    # a run of unlabelled traces: rows exist, metrics do not apply
    g = summarize_group("m", "none", "overall", [rec("A", 1)])
    assert g.traces == 1 and g.metrics["step"].mean is None and g.metrics["step"].n == 0


def test_a_failed_span_prediction_is_a_span_miss():
    ok = rec("A", 3, label_step=3, faults=[3, 4], spans=[[3, 4]])  # F1 1.0, first error right
    failed = rec("B", None, label_step=2, faults=[2, 3], error="EngineUnavailableError: refused")
    g = summarize_group("drift", "none", "overall", [ok, failed], n_boot=0)
    assert (g.metrics["span_f1"].mean, g.metrics["span_f1"].n) == (0.5, 2)
    assert (g.metrics["first_error"].mean, g.metrics["first_error"].n) == (0.5, 2)
    assert g.spans and (g.errors, g.transient_errors) == (1, 1)
    # the same failure in a subset row of its own still counts, because the method predicts spans
    rows = summarize([ok.model_copy(update={"subset": "x"}), failed.model_copy(update={"subset": "y"})], n_boot=0)
    y = next(r for r in rows if r.subset == "y")
    assert (y.metrics["span_f1"].mean, y.metrics["span_f1"].n) == (0.0, 1)
    # a method without spans has no span metrics at all
    assert summarize_group("m", "none", "overall", [failed], n_boot=0).metrics["span_f1"].n == 0


def test_bootstrap_interval_against_hand_computed_quantiles():
    # 7 of 10 traces right: a resample's mean is Binomial(10, 0.7) / 10.
    # P(X <= 3) = 0.0106 < 2.5% < P(X <= 4) = 0.0473, so the 2.5th percentile is 0.4;
    # P(X <= 9) = 1 - 0.7**10 = 0.9718 < 97.5%, so the 97.5th percentile is 1.0.
    e = bootstrap_ci([1, 1, 1, 1, 1, 1, 1, 0, 0, 0], n_boot=20000, seed=3)
    assert (e.mean, e.lo, e.hi, e.n) == (pytest.approx(0.7), pytest.approx(0.4), pytest.approx(1.0), 10)
    # 2 traces, one right: resample means 0, 0.5, 1 with probability 1/4, 1/2, 1/4 -> [0, 1]
    two = bootstrap_ci([0, 1], n_boot=4000, seed=0)
    assert (two.mean, two.lo, two.hi) == (0.5, 0.0, 1.0)
    # 20 traces, 19 right: P(X <= 17) = 0.0755 > 2.5% > P(X <= 16) = 0.0159 -> lo = 17/20; hi = 1.0
    many = bootstrap_ci([1] * 19 + [0], n_boot=20000, seed=1)
    assert (many.lo, many.hi) == (pytest.approx(0.85), 1.0)
