"""DRIFT review findings (issue 33): each test failed on the code the review found.

Scripted engine: every answer is still validated against its grammar.
"""

from __future__ import annotations

import pytest

from localfa.bench.metrics import first_error_agreement
from localfa.engine.scripted import ScriptedEngine
from localfa.grammars.drift import MARK_ROLES, DriftLimits, ledger_max_tokens, tracer_claim_schema, tracer_ledger_schema
from localfa.methods.base import MethodContext
from localfa.methods.drift.ledger import Ledger
from localfa.methods.registry import get_method
from localfa.methods.runner import Job, run_jobs
from localfa.traces.model import Step, Trace
from tests.methods.test_drift_logic import RISKY, Script, _two_claims, make_trace, new_claim, run_one


def run_window(script, trace, window, **options):
    options.setdefault("tracer", "per-claim")
    engine = ScriptedEngine(script, max_model_len=window)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=window)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, get_method("drift", **options).run(ctx), lambda e: pytest.fail(e))]))
    return diag, engine


# ---- 1. every stage's run text is sized for the prompt that stage sends ---------------------------


def _long_trace(n_steps: int = 60, words: int = 250) -> Trace:
    contents = [(f"Agent{i % 3}", f"step {i} " + " ".join(f"w{i}x{k}" for k in range(words))) for i in range(n_steps)]
    return make_trace(contents, tid="long32k")


@pytest.mark.parametrize("tracer", ["ledger", "per-claim"])
def test_a_trace_that_fits_the_window_is_shown_uncut_to_the_keeper_and_the_tracer(tracer):
    trace = _long_trace()  # 60 steps of ~250 words: ~15k words, well inside a 32k window
    ledger = [{"new_claims": [new_claim("step 5 holds w5x1 w5x2", 5, 5, [6, 7]), new_claim("step 9 holds w9x1", 9, 9, [10])]}]
    tracer_answer = {"reason": "it led the run astray", "harmful": True, "marks": [{"span": 5, "role": "introduce"}]}
    answers = {
        "C1": tracer_answer,
        "ledger": {"reason": "C1 led astray", "harmful": ["C1"], "marks": [{"claim": "C1", "span": 5, "role": "introduce"}]},
    }
    diag, engine = run_window(
        Script(ledger=ledger, support={"C1": RISKY["C1"], "C2": RISKY["C1"]}, tracer=answers), trace, 32768, tracer=tracer
    )
    runs = diag.details["run_text"]
    assert runs["ledger"]["cut_steps"] == [] and runs["tracer"]["shown"] == "whole run"
    assert runs["support"]["shown"] == "packets"  # the authors' support reads packets, never the run
    assert len(diag.details["ledger_chunks"]) == 1  # the answer reserve no longer forces a second chunk
    for r in engine.requests:
        assert sum(engine.count_tokens(m["content"]) for m in r.messages) + r.sampling.max_tokens <= 32768


def test_the_ledger_answer_reserve_is_counted_in_tokens_not_characters():
    limits = DriftLimits()
    chars = 40 + limits.claims_per_chunk * (limits.claim_chars + 150)
    assert ledger_max_tokens(100, [], limits) < chars * 0.6


# ---- 2. contradictory claims stay apart ------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ("The riddle answer quotes the word 'fluffy'.", "The riddle answer quotes the word 'tricksy'."),
        ("The treasure is guarded by the dragon Fafnir.", "The treasure is not guarded by the dragon Fafnir."),
        ("Paris station is larger than Lyon station.", "Lyon station is larger than Paris station."),
        ("The museum in Springfield opened in 1901.", "The museum in Shelbyville opened in 1901."),
    ],
)
def test_contradictions_and_other_entities_are_two_claims(a, b):
    led = Ledger()
    led.merge({"new_claims": [new_claim(a, 1, 1, [2])]}, chunk=0)
    led.merge({"new_claims": [new_claim(b, 3, 3, [4], status="finalized")]}, chunk=0)
    assert len(led) == 2 and led.claims[1].introduced == 3


# ---- 3. page text inside an agent's step is evidence --------------------------------------------


def test_a_direct_quote_of_the_page_an_agent_step_shows_stays_direct():
    contents = [
        ("user", "Who guards the treasure?"),
        (
            "WebSurfer",
            "I opened the saga page.\nThe viewport shows the following text:\nIn the saga the treasure is guarded by Fafnir, a dwarf turned dragon.",
        ),
        ("Orchestrator", "The treasure is guarded by Fafnir."),
    ]
    ledger = [{"new_claims": [new_claim("The treasure is guarded by Fafnir.", 1, 1, [2])]}]
    support = {"C1": {"evidence": "the treasure is guarded by Fafnir", "span": 1, "reason": "the page says so", "status": "DIRECT"}}
    diag, engine = run_one(Script(ledger=ledger, support=support), trace=make_trace(contents, tid="page"))
    (check,) = diag.details["support"]
    assert check["status"] == "DIRECT" and check["demoted"] is None
    assert not [r for r in engine.requests if r.key.startswith("drift/tracer")]
    # the agent restating the claim in its own sentence is still no evidence
    support = {"C1": {"evidence": "The treasure is guarded by Fafnir.", "span": 2, "reason": "it says so", "status": "DIRECT"}}
    ledger = [{"new_claims": [new_claim("The treasure is guarded by Fafnir.", 2, 2, [])]}]
    diag, _ = run_one(Script(ledger=ledger, support=support), trace=make_trace(contents, tid="page"))
    assert diag.details["support"][0]["status"] == "WEAK"


# ---- 4. the tracer reasons before its verdict ------------------------------------------------------


def test_the_tracer_writes_its_reason_before_the_verdict():
    limits = DriftLimits()
    assert list(tracer_claim_schema(0, 5, limits)["properties"])[:2] == ["reason", "harmful"]
    assert list(tracer_ledger_schema({"C1": 0}, 5, 8, limits)["properties"])[:2] == ["reason", "harmful"]
    tracer = {"C2": {"reason": "the planner invents 170,000", "harmful": True, "marks": [{"span": 2, "role": "introduce"}]}}
    diag, engine = run_one(Script(ledger=_two_claims(), support=RISKY, tracer=tracer))
    prompt = next(r for r in engine.requests if r.key == "drift/tracer/C2").messages[1]["content"]
    assert prompt.index('"reason"') < prompt.index('"harmful"') and f"at most {limits.reason_chars} characters" in prompt
    assert diag.details["tracer"]["reasons"] == {"C1": "noise", "C2": "the planner invents 170,000"}


# ---- 5. the error is where the claim was made, not where it was adopted ----------------------------


def test_the_introducing_span_is_the_first_error_and_adopters_are_consequences():
    assert "introduce" in MARK_ROLES
    tracer = {"C2": {"reason": "adopted later", "harmful": True, "marks": [{"span": 3, "role": "commit"}, {"span": 5, "role": "finalize"}]}}
    diag, _ = run_one(Script(ledger=_two_claims(), support={"C2": RISKY["C2"]}, tracer=tracer))
    assert diag.details["first_error_span"] == 2 and (diag.step, diag.agent) == (2, "Planner")
    marks = diag.details["tracer"]["marks"]
    assert {"claim": "C2", "span": 2, "role": "introduce", "fallback": True} in marks
    assert diag.details["tracer"]["consequences"] == {"C2": [3, 5]}


def test_a_harmful_claim_without_marks_is_marked_where_it_was_introduced():
    ledger = [{"new_claims": [new_claim("The population is 170,000.", 2, 3, [3, 5])]}]
    tracer = {"C1": {"reason": "wrong", "harmful": True, "marks": []}}
    diag, _ = run_one(Script(ledger=ledger, support={"C1": RISKY["C1"]}, tracer=tracer))
    assert diag.details["error_spans"] == [2] and diag.step == 2


# ---- 6. the fallback is a judgement ----------------------------------------------------------------


def test_with_no_error_found_the_fallback_is_the_weakest_claims_introduction():
    ledger = [
        {
            "new_claims": [
                new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [2]),
                new_claim("The population is 170,000.", 2, 2, [3, 5], typ="computation"),
                new_claim("Final answer: 340,000.", 5, 5, [], status="finalized"),
            ]
        }
    ]
    support = {
        "C1": {"status": "WEAK", "evidence": "", "span": 1, "reason": "partial"},
        "C2": {"status": "MISSING", "evidence": "", "span": 2, "reason": "nothing"},
        "C3": {"status": "DIRECT", "evidence": "Springfield had 167,882 residents", "span": 1, "reason": "shown"},
    }
    diag, _ = run_one(Script(ledger=ledger, support=support))  # the tracer finds nothing harmful
    assert diag.details["step_is_fallback"] is True and diag.details["fallback_span"] == 2 and diag.step == 2
    assert diag.details["fallback_claim"] == "C2"
    assert "no_error_span" not in diag.details and "harmless" in diag.details["no_error_reason"]


# ---- 7. the per-claim tracer sees the entries its claim depends on --------------------------------


def test_the_per_claim_tracer_prompt_shows_the_claims_dependencies():
    tracer = {"C2": {"reason": "x", "harmful": True, "marks": [{"span": 2, "role": "introduce"}]}}
    _, engine = run_one(Script(ledger=_two_claims(), support={"C2": RISKY["C2"]}, tracer=tracer))
    prompt = next(r for r in engine.requests if r.key == "drift/tracer/C2").messages[1]["content"]
    deps = prompt.split("Ledger entries this claim depends on", 1)[1]
    assert "C1 | entity, consequential | introduced 1" in deps  # used in span 2, where C2 was made


# ---- 8. small ones ---------------------------------------------------------------------------------------


def test_the_task_cut_is_recorded():
    trace = make_trace()
    trace = trace.model_copy(update={"task": "Find it. " * 400})
    diag, _ = run_one(Script(), trace=trace)
    assert diag.details["bounds_hit"]["task_chars"] == [len(trace.task.strip())]


def test_first_error_agreement_does_not_reward_finding_nothing():
    runs = {0: {"a": None, "b": 3, "c": None}, 1: {"a": None, "b": 3, "c": 4}}
    agreement = first_error_agreement(runs)
    assert agreement.found_none == 1  # trace a: no run found an error; not counted as agreement
    assert agreement.traces == 2 and agreement.same == 1


def test_one_chunk_packer_and_names_defined_once():
    import localfa.methods.drift.audit as audit
    import localfa.methods.drift.spans as spans

    assert not hasattr(spans, "pack_chunks") and hasattr(spans, "take_chunk")
    src = open(audit.__file__, encoding="utf-8").read()
    assert "_budget_chars" not in src and "_chars_per_token" not in src  # no private helpers of baselines
    bench = open("scripts/bench_drift.py", encoding="utf-8").read()
    assert "STAGES = (" not in bench


def test_step_text_is_folded_once_per_view():
    from localfa.methods.drift import spans as spans_mod

    view = spans_mod.SpanView(make_trace())
    assert view.folded(2) == " ".join(view.texts[2].split())
    assert view.folded(2) is view.folded(2)


def test_agents_step_of_the_observation_kind_still_counts_for_own_assertion():
    steps = [
        Step(index=0, agent="user", role="user", content="q"),
        Step(index=1, agent="Coder", role="assistant", content="The answer is 42 by my reckoning."),
    ]
    trace = Trace(id="o", source="o.json", format="messages", task="t", steps=steps)
    ledger = [{"new_claims": [new_claim("The answer is 42.", 1, 1, [])]}]
    support = {"C1": {"evidence": "The answer is 42", "span": 1, "reason": "said", "status": "DIRECT"}}
    diag, _ = run_one(Script(ledger=ledger, support=support), trace=trace)
    assert diag.details["support"][0]["status"] == "WEAK"


# ---- 9. held against the authors' code ---------------------------------------------------------------


def test_the_joint_tracer_sees_every_checked_claim_and_states_the_first_error_rule():
    support = {"C1": {"status": "DIRECT", "evidence": "Springfield had 167,882 residents", "span": 1, "reason": "shown"}}
    answer = {"reason": "C2 invents a figure", "harmful": ["C2"], "marks": [{"claim": "C2", "span": 2, "role": "introduce"}]}
    diag, engine = run_one(Script(ledger=_two_claims(), support=support, tracer={"joint": answer}), tracer="joint")
    (req,) = [r for r in engine.requests if r.key.startswith("drift/tracer")]
    prompt = req.messages[1]["content"]
    assert req.key == "drift/tracer/joint" and "Claim C1" in prompt and "Claim C2" in prompt  # DIRECT C1 too
    assert "not its earliest mere mention" in prompt
    assert diag.details["first_error_span"] == 2 and diag.details["tracer"]["mode"] == "joint"
    # with every claim DIRECT it still traces (the ledger tracer would not)
    direct = {c: support["C1"] for c in ("C1", "C2")}
    _, engine = run_one(Script(ledger=_two_claims(), support=direct, tracer={"joint": {"harmful": [], "marks": []}}), tracer="joint")
    assert [r.key for r in engine.requests if r.key.startswith("drift/tracer")] == ["drift/tracer/joint"]
    _, engine = run_one(Script(ledger=_two_claims(), support=direct), tracer="ledger")
    assert not [r for r in engine.requests if r.key.startswith("drift/tracer")]


def test_telbench_cases_load_one_step_per_span_with_gold_error_spans():
    from pathlib import Path

    from localfa.traces.load import load_traces

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "telbench" / "cases.jsonl"
    first, second = load_traces(fixture)
    assert (first.id, first.format, len(first.steps)) == ("telbench/tb-001", "telbench", 4)
    assert [s.span_id for s in first.steps] == ["S1", "S2", "S3", "S4"] and first.task.startswith("Which city")
    assert first.labels.mistake_step == 2 and first.labels.fault_steps == [2, 3] and first.labels.fault_spans == [(2, 3)]
    assert second.labels.mistake_step is None and second.labels.fault_steps == []
    diag, _ = run_one(Script(), trace=first)  # DRIFT audits it like any trace
    assert diag.details["spans"] == [[0, 0], [1, 1], [2, 2], [3, 3]]


def test_a_bad_telbench_case_is_named_with_its_field(tmp_path):
    from localfa.traces.errors import TraceError
    from localfa.traces.load import load_traces

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x", "question": "q", "spans": [{"id": "S1", "raw": "a"}], "gold": {"error_span_ids": ["S9"]}}\n', encoding="utf-8"
    )
    with pytest.raises(TraceError, match=r"bad.jsonl.*gold.error_span_ids.*S9"):
        load_traces(bad)


def test_the_report_scores_fallback_answers_apart_from_found_errors():
    from localfa.bench.metrics import summarize
    from localfa.bench.report import metric_columns
    from localfa.results import ResultRecord
    from localfa.traces.model import Labels

    def rec(trace, step, fallback):
        return ResultRecord(
            trace=trace,
            method="drift",
            budget="none",
            seed=0,
            step=step,
            label=Labels(mistake_step=3),
            details={"step_is_fallback": fallback},
        )

    records = [rec("a", 3, False), rec("b", 5, False), rec("c", 3, True), rec("d", 1, True)]
    (overall,) = [g for g in summarize(records) if g.subset == "overall"]
    assert overall.metrics["fallback"].mean == 0.5
    assert overall.metrics["step_found"].mean == 0.5 and overall.metrics["step_fallback"].mean == 0.5
    assert overall.metrics["step_found"].n == 2 and overall.metrics["step_fallback"].n == 2
    assert {"fallback", "step_found", "step_fallback"} <= set(metric_columns([overall]))


def test_the_reference_span_metrics_are_reported_beside_ours():
    from localfa.bench.metrics import score_record
    from localfa.results import ResultRecord
    from localfa.traces.model import Labels

    label = Labels(mistake_step=3)  # one decisive step: ours leaves span F1 out, the reference scores it
    hit = ResultRecord(trace="a", method="drift", budget="none", seed=0, step=3, spans=[(3, 3), (5, 6)], label=label)
    s = score_record(hit)
    assert s["span_f1"] is None and s["first_error"] == 1.0
    assert s["ref_span_precision"] == pytest.approx(1 / 3) and s["ref_span_recall"] == 1.0 and s["ref_first_error"] == 1.0
    late = ResultRecord(trace="b", method="drift", budget="none", seed=0, step=2, spans=[(2, 4)], label=label)
    s = score_record(late)
    assert s["first_error"] == 1.0 and s["ref_first_error"] == 0.0  # ours: ranges overlap; the reference: exact first unit
    nothing = ResultRecord(trace="c", method="drift", budget="none", seed=0, step=9, spans=[], label=label)
    assert score_record(nothing)["ref_span_f1"] == 0.0
