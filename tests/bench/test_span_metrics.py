"""Span labels and span metrics: labelled fault spans, span precision / recall / F1, first error,
failed span predictions counted as misses, and the report's span columns."""

from __future__ import annotations

import math
from pathlib import Path

from localfa.bench.metrics import gold_steps, score_record, summarize
from localfa.bench.report import metric_columns, table_rows
from localfa.results import ResultRecord
from localfa.traces.load import load_trace
from localfa.traces.model import Labels, step_runs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def rec(trace, step, *, spans=None, error=None, fault_steps=(), fault_spans=(), mistake=None, method="drift"):
    label = {
        "mistake_step": mistake,
        "mistake_agent": None,
        "fault_steps": list(fault_steps),
        "fault_spans": [list(s) for s in fault_spans],
        "high_impact_steps": [],
    }
    return ResultRecord.model_validate(
        {
            "trace": trace,
            "method": method,
            "seed": 0,
            "budget": "none",
            "subset": "s",
            "step": step,
            "agent": None,
            "spans": spans,
            "error": error,
            "label": label,
            "usage": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 1, "cached_tokens": 0},
            "wall_s": 0.1,
        }
    )


def test_step_runs_make_spans_of_consecutive_steps():
    assert step_runs([7, 2, 3, 4, 9, 3]) == [(2, 4), (7, 7), (9, 9)]
    assert step_runs([]) == []


def test_importers_fill_fault_spans_where_every_faulty_step_is_listed():
    trail = load_trace(FIXTURES / "openinference_trail_row.json")
    assert trail.labels.fault_steps == [3, 6] and trail.labels.fault_spans == [(3, 3), (6, 6)]  # step 2 is plumbing: its model call
    ww = load_trace(FIXTURES / "whowhen_handcrafted.json")  # one decisive step only: no span label
    assert ww.labels.fault_spans == []


def test_gold_steps_join_fault_spans_and_fault_steps():
    assert gold_steps(Labels(fault_spans=[(3, 5)], fault_steps=[8])) == {3, 4, 5, 8}
    assert gold_steps(Labels(mistake_step=2)) == {2}


def test_span_precision_recall_f1_and_first_error():
    # predicted {2,3,4} vs labelled span 3-6 -> {3,4,5,6}: P = 2/3, R = 2/4, F1 = 4/7; the spans overlap
    s = score_record(rec("t", 2, spans=[[2, 4]], fault_spans=[(3, 6)]))
    assert math.isclose(s["span_precision"], 2 / 3) and math.isclose(s["span_recall"], 0.5)
    assert math.isclose(s["span_f1"], 4 / 7) and s["first_error"] == 1.0
    s = score_record(rec("t", 0, spans=[[0, 1], [3, 3]], fault_spans=[(3, 6)]))
    assert s["first_error"] == 0.0  # the earliest predicted span (0-1) misses the earliest fault span
    s = score_record(rec("t", 3, spans=[[3, 4]], fault_spans=[(3, 4)]))
    assert (s["span_precision"], s["span_recall"], s["span_f1"], s["first_error"]) == (1.0, 1.0, 1.0, 1.0)


def test_failed_span_predictions_count_as_misses_never_dropped():
    good = rec("a", 3, spans=[[3, 4]], fault_spans=[(3, 4)])
    failed = rec("b", None, spans=None, error="ContextLengthError: too long", fault_spans=[(1, 1)])
    (g,) = [x for x in summarize([good, failed], n_boot=0) if x.subset == "overall"]
    assert g.spans and g.errors == 1
    for m in ("span_precision", "span_recall", "span_f1", "first_error"):
        assert g.metrics[m].n == 2 and g.metrics[m].mean == 0.5, m


def test_report_shows_span_columns_for_span_methods_only():
    span_group = summarize([rec("a", 3, spans=[[3, 4]], fault_spans=[(3, 4)])], n_boot=0)
    plain = summarize([rec("a", 3, method="all-at-once", mistake=3, fault_steps=[3])], n_boot=0)
    cols = metric_columns(span_group)
    assert cols[-8:] == [
        *("span_precision", "span_recall", "span_f1", "first_error"),
        *("ref_span_precision", "ref_span_recall", "ref_span_f1", "ref_first_error"),  # the DRIFT authors' definitions beside ours
    ]
    assert "span_f1" not in metric_columns(plain)
    head, rows = table_rows(span_group + plain, ci=False)
    for title in ("span prec.", "span recall", "span F1", "first-error acc"):
        assert title in head
    row = rows[-1 if rows[-1][0] == "drift" else 0]
    assert row[head.index("span F1")] == "1.000"


def test_first_error_scores_the_earliest_predicted_span_by_overlap():
    # DRIFT's span (3, 6) holds its answered step 5, the labelled decisive step: a hit
    s = score_record(rec("t", 5, spans=[[3, 6]], mistake=5))
    assert s["first_error"] == 1.0
    assert score_record(rec("t", 4, spans=[[4, 4]], mistake=5))["first_error"] == 0.0  # single steps: the same step
    assert score_record(rec("t", 5, spans=[[5, 5], [1, 2]], mistake=5))["first_error"] == 0.0  # the earliest span is 1-2


def test_who_and_when_records_carry_no_span_f1_only_step_agent_and_first_error():
    s = score_record(rec("t", 5, spans=[[5, 5], [7, 7], [9, 9]], mistake=5))  # a decisive step, no span labels
    assert s["span_precision"] is None and s["span_recall"] is None and s["span_f1"] is None
    assert s["step"] == 1.0 and s["first_error"] == 1.0
    groups = summarize([rec("a", 5, spans=[[5, 5]], mistake=5)], n_boot=0)
    assert "span_f1" not in metric_columns(groups) and "first_error" in metric_columns(groups)


def test_an_empty_prediction_is_a_span_miss_and_keeps_its_fallback_step():
    s = score_record(rec("t", 3, spans=[], fault_spans=[(3, 3)]))  # no error found: Ê = ∅, step 3 a fallback
    assert (s["span_precision"], s["span_recall"], s["span_f1"], s["first_error"]) == (0.0, 0.0, 0.0, 0.0)
    s = score_record(rec("t", 3, spans=[], mistake=3))
    assert s["step"] == 1.0 and s["first_error"] == 0.0
