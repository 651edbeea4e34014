"""A run folder is input like a trace (issue 55): what `summarize`, `report`, `view` and a resumed
`bench` read from it cannot crash them or exhaust memory. Each case is a repro from the issue:
reasons without a counted word (1), a 2 MB step (2, memory measured), a forged span of 10**9 steps
(3), a confidence of NaN (12)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from localfa.bench.metrics import StepRanges, gold_steps, predicted_steps, score_record
from localfa.cli import main
from localfa.insights.summary import summarize
from localfa.results import ResultRecord
from localfa.traces.model import Labels, Step, Trace
from localfa.view.page import build_page
from localfa.view.records import TraceGroup
from tests.bench.test_report import rec
from tests.insights.sample import write_sample


def sweep(tmp_path: Path, n: int = 6, methods: str = "all-at-once") -> Path:
    write_sample(tmp_path / "data", n)
    run = tmp_path / "run"
    assert main(["bench", str(tmp_path / "data"), "--methods", methods, "--engine", "scripted", "--out", str(run), "--no-progress"]) == 0
    return run


def edit_records(run: Path, edit) -> None:
    """Apply `edit(record dict, i)` to every line of the run's results (it may return None to keep)."""
    path = run / "results.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    out = []
    for i, r in enumerate(lines):
        edit(r, i)
        out.append(json.dumps(r))
    path.write_text("\n".join(out) + "\n")


# ---- 1: a reason with no counted word ---------------------------------------------------------


def test_summary_groups_reasons_beside_reasons_with_no_counted_word():
    worded = [rec(f"t{i}", "safari", 1, 1, reasoning="the agent misread the table and reported the wrong row count") for i in range(4)]
    bare = [rec(f"u{i}", "safari", 1, 1, reasoning=r) for i, r in enumerate(["x", "Agent1", "![t]"])]
    summary = summarize(worded + bare)
    assert summary.groups and summary.groups[0].size == 4
    assert summary.ungrouped == 3


def test_summarize_of_a_plain_60_trace_scripted_sweep(tmp_path, capsys):
    run = sweep(tmp_path, 60, "all-at-once,random")
    assert main(["summarize", str(run)]) == 0
    assert "Traceback" not in capsys.readouterr().err


# ---- 2: a big step costs the page its cap, not its size --------------------------------------


def test_a_page_of_a_2mb_step_stays_within_a_small_multiple_of_the_cap():
    big = "row of the table dump 0123456789\n" * 64_000  # ~2 MB; the old marking took ~190x a step
    steps = [Step(index=i, agent="Coder", role="assistant", content=big if i == 1 else f"step {i}") for i in range(3)]
    trace = Trace(id="big", source="big.json", format="messages", steps=steps, labels=Labels(mistake_step=1, mistake_agent="Coder"))
    record = {"trace": "big", "method": "all-at-once", "seed": 0, "step": 1, "agent": "Coder", "evidence": ["row of the table dump"]}
    tracemalloc.start()
    try:
        page = build_page([TraceGroup("big", "big.json", trace, [record])])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB building the page"
    assert "chars cut" in page and len(page) < 500_000
    assert '<mark class="ev"' in page  # the quote is still marked in the part shown


# ---- 3: a forged span -------------------------------------------------------------------------


def test_a_forged_span_is_clamped_to_the_trace_when_read():
    r = rec("t1", "drift", 2, 2)
    data = r.record() | {"spans": [[0, 10**9], [7, 3], [-5, -1]], "n_steps": 6}
    data["label"] = dict(data["label"], fault_spans=[[2, 10**9]])
    back = ResultRecord.model_validate(data)
    assert back.spans == [(0, 5), (3, 5)]
    assert back.label is not None and back.label.fault_spans == [(2, 5)]


def test_span_scores_cost_the_number_of_ranges_not_their_width():
    r = rec("t1", "drift", 2, 2)
    data = r.record() | {"spans": [[0, 10**9]], "n_steps": 10**9}  # n_steps forged too: no clamp helps
    data["label"] = dict(data["label"], fault_spans=[[0, 10**6 - 1]], fault_steps=[2, 3])
    forged = ResultRecord.model_validate(data)
    assert len(predicted_steps(forged)) == 10**9
    scores = score_record(forged)
    assert scores["span_recall"] == 1.0 and scores["span_precision"] == 0.001
    assert gold_steps(Labels(fault_spans=[(3, 5)], fault_steps=[8])) == StepRanges([(3, 5), (8, 8)])
    assert StepRanges([(0, 4), (10, 12)]) & StepRanges([(3, 11)]) == StepRanges([(3, 4), (10, 11)])


def test_report_summarize_and_a_resumed_bench_over_a_forged_span(tmp_path, capsys):
    run = sweep(tmp_path)

    def forge(r, i):
        if i == 0:
            r.update(spans=[[0, 1_000_000_000]], n_steps=1_000_000_000)
            r["label"]["fault_spans"] = [[0, 1_000_000_000]]

    edit_records(run, forge)
    for command in (["report", str(run)], ["summarize", str(run)]):
        assert main(command) == 0, command
    args = ["bench", str(tmp_path / "data"), "--methods", "all-at-once", "--engine", "scripted", "--out", str(run), "--no-progress"]
    assert main(args) == 0
    assert "Traceback" not in capsys.readouterr().err


# ---- 12: a confidence of NaN ------------------------------------------------------------------


def test_report_and_summarize_read_a_nan_confidence_as_none(tmp_path, capsys):
    run = sweep(tmp_path)

    def nan(r, i):
        r["confidence"] = float("nan") if i == 0 else (7.5 if i == 1 else r["confidence"])
        r["wall_s"] = float("inf") if i == 2 else r["wall_s"]

    edit_records(run, nan)
    assert "NaN" in (run / "results.jsonl").read_text()
    assert main(["report", str(run)]) == 0
    assert main(["summarize", str(run)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    recs = [ResultRecord.from_line(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert recs[0].confidence is None and recs[1].confidence == 1.0 and recs[2].wall_s == 0.0
