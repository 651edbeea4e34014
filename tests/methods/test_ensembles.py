"""vote and cascade: the tally and its tie rule, early stopping, shared batches, failed members."""

from __future__ import annotations

from typing import Any

import pytest

from localfa.engine.scripted import ScriptedEngine
from localfa.engine.types import Request
from localfa.methods.base import MethodContext, base_key
from localfa.methods.registry import MethodOptionError, get_method
from localfa.methods.runner import method_job, run_jobs
from tests.methods.synthetic import synthetic_trace

TRACE = synthetic_trace(8, "t-ens", "step {i} says something")


def answering(steps: dict[str, int]) -> Any:
    """A script answering all-at-once requests by their full key (member prefix included)."""

    def answer(req: Request) -> Any:
        assert base_key(req.key) == "aao", req.key
        step = steps[req.key]
        return {"agent": TRACE.agent_at(step), "step": step, "reason": f"from {req.key}"}

    return answer


def run(spec: str, engine: ScriptedEngine):
    job = method_job(engine, get_method(spec), MethodContext(TRACE, seed=0))
    [(_, diag)] = list(run_jobs(engine, [job]))
    return diag


def test_vote_breaks_a_tie_by_member_order_and_reports_agreement() -> None:
    keys = {"vote.0.0|aao": 5, "vote.0.1|aao": 2, "vote.0.2|aao": 2, "vote.0.3|aao": 5}
    engine = ScriptedEngine(answering(keys))
    diag = run("vote:members=all-at-once*4", engine)
    assert diag.error is None
    assert diag.step == 5  # 2 votes each; step 5's first vote (member run 0) comes first
    assert diag.agent == TRACE.agent_at(5)
    assert diag.confidence == 0.5
    assert diag.details["votes"] == {"5": 2, "2": 2}
    assert [m["step"] for m in diag.details["members"]] == [5, 2, 2, 5]
    assert diag.evidence == []  # all-at-once quotes nothing
    assert len(engine.batches) == 1 and len(engine.batches[0]) == 4  # one shared batch
    assert diag.usage["calls"] == 4


def test_vote_over_samples_uses_distinct_seeds() -> None:
    keys = {f"vote.0.{s}|aao": 3 for s in range(3)}
    engine = ScriptedEngine(answering(keys))
    diag = run("vote:members=all-at-once:samples=3", engine)
    assert diag.step == 3 and diag.confidence == 1.0
    seeds = {r.sampling.seed for r in engine.requests}
    assert len(seeds) == 3


def test_members_of_different_methods_share_batches() -> None:
    seen: list[list[str]] = []

    def answer(req: Request) -> Any:
        from localfa.engine.examples import example_text

        if base_key(req.key) == "aao":
            return {"agent": TRACE.agent_at(4), "step": 4, "reason": "r"}
        return example_text(req.grammar, req.sampling.seed)

    engine = ScriptedEngine(answer)
    diag = run("vote:members=all-at-once+binary-search", engine)
    assert diag.error is None
    seen = [[base_key(r.key) for r in batch] for batch in engine.batches]
    assert "aao" in seen[0] and any(k.startswith("bs/") for k in seen[0])  # first round together


def test_cascade_stops_at_stage_one_when_its_members_agree() -> None:
    keys = {"cascade.0.0.0|aao": 4, "cascade.0.0.1|aao": 4, "cascade.0.0.2|aao": 6}
    engine = ScriptedEngine(answering(keys))
    diag = run("cascade:stages=all-at-once*3>all-at-once(with_ground_truth=true):agree=2", engine)
    assert diag.step == 4
    assert diag.details["answered_by"]["stage"] == 0 and diag.details["stages_run"] == 1
    assert diag.usage["calls"] == 3  # stage 2 never ran
    assert diag.confidence == pytest.approx(2 / 3, abs=1e-3)
    assert diag.stop_reason == "agreed"


def test_cascade_reaches_stage_two_when_they_disagree() -> None:
    keys = {"cascade.0.0.0|aao": 1, "cascade.0.0.1|aao": 2, "cascade.0.0.2|aao": 3, "cascade.1.0.0|aao": 2}
    engine = ScriptedEngine(answering(keys))
    diag = run("cascade:stages=all-at-once*3>all-at-once(with_ground_truth=true):agree=2", engine)
    assert diag.usage["calls"] == 4
    assert diag.details["stages_run"] == 2
    assert diag.details["answered_by"]["stage"] == 1
    assert diag.step == 2 and diag.stop_reason == "agreed"  # stage 2 agrees with one stage-1 answer
    assert [s["usage"]["calls"] for s in diag.details["stages"]] == [3, 1]


def test_cascade_without_agreement_answers_the_last_stage() -> None:
    keys = {"cascade.0.0.0|aao": 1, "cascade.0.0.1|aao": 2, "cascade.0.0.2|aao": 3, "cascade.1.0.0|aao": 7}
    engine = ScriptedEngine(answering(keys))
    diag = run("cascade:stages=all-at-once*3>all-at-once(with_ground_truth=true):agree=2", engine)
    assert diag.step == 7 and diag.stop_reason == "last_stage"
    assert diag.confidence == 0.25


def test_a_failed_member_ends_only_itself() -> None:
    def answer(req: Request) -> Any:
        if req.key == "vote.0.1|aao":
            return ("{", "length")  # cut twice: TruncatedOutputError for this member only
        return {"agent": TRACE.agent_at(3), "step": 3, "reason": "r"}

    diag = run("vote:members=all-at-once*3", ScriptedEngine(answer))
    assert diag.error is None and diag.step == 3
    errors = [m["error"] for m in diag.details["members"]]
    assert errors[0] is None and "TruncatedOutputError" in errors[1] and errors[2] is None
    assert diag.confidence == pytest.approx(2 / 3, abs=1e-3)


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("vote:members=nosuch", "unknown method 'nosuch'"),
        ("vote:members=", "no members"),
        ("vote:members=all-at-once*0", "samples"),
        ("cascade:stages=all-at-once>vote", "itself an ensemble"),
        ("cascade:stages=falat:agree=0", "agree"),
        ("vote:members=all-at-once(nope=1)", "unknown option"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, msg: str) -> None:
    with pytest.raises(MethodOptionError, match=msg):
        get_method(spec)


def test_single_methods_have_no_confidence_of_their_own() -> None:
    diag = run("all-at-once", ScriptedEngine(lambda req: {"agent": TRACE.agent_at(1), "step": 1, "reason": "r"}))
    assert diag.confidence is None


def test_the_trace_view_shows_each_member_and_the_agreement() -> None:
    from localfa.results import ResultRecord
    from localfa.view.page import build_page
    from localfa.view.records import group_records

    keys = {"cascade.0.0.0|aao": 1, "cascade.0.0.1|aao": 2, "cascade.0.0.2|aao": 3, "cascade.1.0.0|aao": 2}
    diag = run("cascade:stages=all-at-once*3>all-at-once(with_ground_truth=true):agree=2", ScriptedEngine(answering(keys)))
    record = ResultRecord.from_diagnosis(diag, TRACE).record()
    html = build_page(group_records([record], traces={TRACE.id: TRACE}))
    assert "answered by stage 1" in html and "2 of 2 stages run" in html
    assert html.count("<td>all-at-once</td>") == 3 and "all-at-once:with_ground_truth=true" in html
    assert "confidence 0.5" in html


def test_calibration_bins_records_by_confidence() -> None:
    from localfa.results import ResultRecord
    from localfa.view.calibration import calibration_chart, calibration_table

    def rec(conf: float | None, step: int) -> ResultRecord:
        d = run("all-at-once", ScriptedEngine(lambda req: {"agent": TRACE.agent_at(step), "step": step, "reason": "r"}))
        d.confidence = conf
        return ResultRecord.from_diagnosis(d, TRACE, method="vote")

    gold = TRACE.labels.mistake_step
    records = [rec(0.9, gold), rec(0.95, gold), rec(0.85, gold + 1), rec(0.3, gold + 1), rec(None, gold)]
    table = calibration_table(records)
    assert [(round(c, 2), round(a, 3), n) for c, a, n in table["vote"]] == [(0.3, 0.0, 1), (0.9, 0.667, 3)]
    assert "Calibration" in calibration_chart(records)
    assert calibration_chart(records[-1:]) == ""


def test_cascade_whose_last_stage_fails_answers_from_the_earlier_stages() -> None:
    def answer(req: Request) -> Any:
        if req.key.startswith("cascade.1."):
            return ("{", "length")
        step = {"cascade.0.0.0|aao": 1, "cascade.0.0.1|aao": 2, "cascade.0.0.2|aao": 1}[req.key]
        return {"agent": TRACE.agent_at(step), "step": step, "reason": "r"}

    diag = run("cascade:stages=all-at-once*3>all-at-once(with_ground_truth=true):agree=3", ScriptedEngine(answer))
    assert diag.step == 1 and diag.details["stages_run"] == 2
    assert "TruncatedOutputError" in diag.details["stages"][1]["runs"][0]["error"]
