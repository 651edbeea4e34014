"""The trace view: what a page must show, checked on its HTML (the browser test checks rendering)."""

from __future__ import annotations

import json
import re

from localfa.traces.load import load_trace
from localfa.view import write_view
from localfa.view.page import build_page
from localfa.view.paths import stm_after_each_turn
from localfa.view.records import TraceFiles
from tests.view.conftest import EXAMPLE, LABELLED, localfa, run_groups


def _step_li(html: str, gid: int, step: int) -> str:
    m = re.search(rf'<li id="t{gid}-s{step}" class="([^"]*)">(.*?)</li>', html, re.S)
    assert m, f"step {step} of trace {gid} not on the page"
    return m.group(1) + "|" + m.group(2)


def test_view_command_highlights_the_decisive_and_labelled_steps(scripted_results, tmp_path):
    page = tmp_path / "page.html"
    localfa("view", str(scripted_results), "--one-page", "--out", str(page))
    html = page.read_text()
    records = [json.loads(line) for line in scripted_results.read_text().splitlines()]
    step = records[0]["step"]
    assert "decisive" in _step_li(html, 0, step).split("|")[0]
    assert html.count('class="step decisive') + html.count('class="step decisive labelled') >= 1
    label = load_trace(LABELLED).labels
    assert "labelled" in _step_li(html, 1, label.mistake_step).split("|")[0]
    assert "labelled fault" in _step_li(html, 1, label.mistake_step)
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "default-src 'none'" in html


def test_evidence_is_marked_where_it_occurs_and_a_made_up_quote_is_flagged(scripted_results):
    html = build_page(run_groups(scripted_results))
    step4 = _step_li(html, 0, 4)
    assert '<mark class="ev" data-quote="0">Searched \'Sydney population 2021 census\'.</mark>' in step4
    assert '<mark class="ev" data-quote="1">Greater Sydney, 2021 Census</mark>' in step4
    assert html.count("<mark") == 2  # the third quote occurs nowhere
    ev = re.search(r'<ol class="evidence">(.*?)</ol>', html, re.S).group(1)
    items = re.findall(r'<li class="(\w+)" data-quote="(\d)">(.*?)</li>', ev, re.S)
    assert [(c, q) for c, q, _ in items] == [("verified", "0"), ("verified", "1"), ("unverified", "2")]
    assert 'href="#t0-s4">step 4' in items[0][2]
    assert "not verbatim in the trace" in items[2][2]


def test_safari_turns_show_tool_calls_and_the_stm_after_each_turn(scripted_results):
    html = build_page(run_groups(scripted_results))
    records = [json.loads(line) for line in scripted_results.read_text().splitlines()]
    turns = [t for t in records[0]["transcript"] if t["turn"] != "final"]
    assert html.count('<li class="turn">') == 2 * len(turns)  # both traces ran 4 turns
    first = turns[0]["output"]["tool"]
    assert f"{first['name']}(" in html
    assert html.count("STM after turn") == 2 * len(turns)
    assert "forced final answer" in html


def test_stm_is_replayed_from_sparse_updates():
    transcript = [
        {"turn": 1, "output": {"stm": {"task_goal": "find the capital"}}},
        {"turn": 2, "output": {"stm": {"faults_identified_so_far": [{"step_id": 4, "reason": "wrong city", "evidence": "Sydney"}]}}},
        {"turn": 3, "output": {"stm": {}}},
        {"turn": "final", "output": {"step_id": 4, "reasoning": "r"}},
    ]
    stms = stm_after_each_turn(transcript)
    assert stms[0]["task_goal"] == "find the capital" and stms[0]["faults_identified_so_far"] == []
    assert stms[1]["task_goal"] == "find the capital"
    assert stms[2]["faults_identified_so_far"] == [{"step_id": 4, "reason": "wrong city", "evidence": "Sydney"}]


def _record(method: str, **extra) -> dict:
    rec = {
        "trace": "failed_run",
        "source": str(EXAMPLE),
        "method": method,
        "seed": 0,
        "step": 4,
        "agent": "WebSurfer",
        "evidence": [],
        "usage": {},
        "details": {},
    }
    rec.update(extra)
    return rec


def test_falat_drift_and_unknown_methods_show_their_paths(tmp_path):
    falat = _record(
        "falat",
        details={
            "candidates": [3, 4],
            "regions": [{"steps": [3, 4], "crosses_window": False}],
            "top": [
                {"step": 4, "passed": True, "analysis": "decisive", "quote": "q"},
                {"step": 3, "passed": False, "analysis": "no", "quote": "q"},
            ],
            "t_hat": 4,
            "final_step": 4,
            "brand_new_key": {"x": 1},
        },
    )
    drift = _record(
        "drift:tracer=ledger",
        spans=[[4, 5]],
        details={
            "ledger": [{"id": "c1", "text": "Sydney is the capital", "status": "consequential"}],
            "support": [{"claim": "c1", "status": "CONFLICTING", "evidence": "Canberra is the capital city"}],
        },
    )
    unknown = _record("mystery", details={"knobs": [1, 2, 3]})
    page = write_view([falat, drift, unknown], tmp_path / "p.html", readable=TraceFiles(folders=(EXAMPLE.parent,)))
    html = page.read_text()
    assert "Candidates and regions" in html and "Top candidates and verdicts" in html and "Local re-search" in html
    assert 'href="#t0-s4">step 4</a>' in html  # t_hat and the verified steps link to the timeline
    assert "brand_new_key" in html and "Other details" in html
    assert "Claim ledger" in html and "Support checks" in html and "CONFLICTING" in html
    assert "inspan" in _step_li(html, 0, 5).split("|")[0] and "inspan" not in _step_li(html, 0, 3).split("|")[0]
    assert "knobs" in html and "raw JSON" in html
    assert html.count('class="diag"') == 3 and html.count("<section") == 1  # one trace, three verdicts


def test_a_trace_that_cannot_be_read_still_shows_its_verdict(tmp_path):
    rec = _record("all-at-once", source=str(tmp_path / "gone.json"), evidence=["a quote"], reasoning="because", details={})
    html = write_view([rec], tmp_path / "p.html").read_text()
    assert "The trace could not be read" in html and "because" in html
    assert "not checked: the trace could not be read" in html


def test_diagnose_html_writes_the_page_and_keeps_stdout_json(tmp_path):
    page = tmp_path / "d.html"
    proc = localfa("diagnose", str(EXAMPLE), "--engine", "scripted", "--max-turns", "2", "--html", str(page), "--json")
    (line,) = proc.stdout.splitlines()
    rec = json.loads(line)
    assert "transcript" not in rec  # --html keeps transcripts for the page only
    assert rec["method"] == "safari:max_turns=2"  # ... and leaves the method's label as asked (was safari:max_turns=2:transcript=true)
    html = page.read_text()
    assert f'id="t0-s{rec["step"]}" class="step decisive' in html
    assert html.count('<li class="turn">') == 2
