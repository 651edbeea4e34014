"""The "no decisive error" answer (issue 54): one mechanism, honoured by every method only where
the caller allows it (`localfa.methods.none_answer`).

- No grammar admits "none" unless allowed: every registered method runs under a script that puts
  "none" wherever an answer names a step or an agent and sends it whenever the grammar accepts it.
- Where allowed, a method whose final answer is the model's answers it when the model does, and a
  method whose final answer is its own rule answers it when that rule finds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.examples import example_text
from localfa.engine.scripted import ScriptedEngine
from localfa.engine.types import Request
from localfa.methods.base import MethodContext
from localfa.methods.none_answer import NONE, allows_none
from localfa.methods.registry import MethodOptionError, MethodSpec, get_method, method_names, method_option_names
from localfa.methods.runner import Job, method_job, run_jobs
from localfa.traces.model import Labels, Trace
from tests.methods.test_observation_steps import AGENT_KEYS, STEP_KEYS, coding_trace

NAMING = STEP_KEYS | AGENT_KEYS


def _naysay(value: Any, key: str = "") -> Any:
    """`value` with every step id (an int under a step key) and every agent set to "none"."""
    if isinstance(value, dict):
        return {k: _naysay(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_naysay(v, key) for v in value]
    if key in STEP_KEYS and isinstance(value, int) and not isinstance(value, bool):
        return NONE
    return NONE if key in AGENT_KEYS and value is not None else value


def _names_a_step(value: Any, key: str = "") -> bool:
    """Whether `value` names a step id as an int anywhere (what "none" replaces)."""
    if isinstance(value, dict):
        return any(_names_a_step(v, k) for k, v in value.items())
    if isinstance(value, list):
        return any(_names_a_step(v, key) for v in value)
    return key in STEP_KEYS and isinstance(value, int) and not isinstance(value, bool)


class Naysayer:
    """A script that answers "none" wherever a grammar lets it, else an example answer."""

    def __init__(self, verdicts: dict[str, str] | None = None) -> None:
        self.admitted: list[str] = []
        self.verdicts = verdicts or {}

    def __call__(self, req: Request) -> str:
        if req.grammar.kind == "choice":
            for option in req.grammar.spec:
                if option in self.verdicts.get(req.grammar.name, ""):
                    return str(option)
        text = example_text(req.grammar, req.sampling.seed)
        if req.grammar.kind != "json":
            return text
        if not _names_a_step(json.loads(text)) and not req.grammar.spec.get("anyOf"):
            return text  # nothing here names a step: no "none" to give
        nay = json.dumps(_naysay(json.loads(text)), separators=(",", ":"))
        for candidate in (nay, *_other_alternatives(req)):
            try:
                req.grammar.parse(candidate)
            except InvalidOutputError:
                continue
            self.admitted.append(req.key)
            return candidate
        return text


def _other_alternatives(req: Request) -> list[str]:
    """Example answers of each alternative of a top-level anyOf (the "none" twin among them)."""
    out = []
    for alt in req.grammar.spec.get("anyOf", []):
        from localfa.engine.grammar import Grammar

        text = example_text(Grammar.json({**alt, "title": "alt"}), req.sampling.seed)
        value = json.loads(text)
        if any(value.get(k) == NONE for k in NAMING):
            out.append(text)
    return out


def _run(name: str, allow: bool | None, trace: Trace | None = None, script: Any = None) -> tuple[Any, Any]:
    trace = trace or coding_trace()
    script = script or Naysayer()
    engine = ScriptedEngine(script)
    ctx = MethodContext(trace=trace, seed=5, allow_none=allow)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method(name), ctx)]))
    return diag, script


@pytest.mark.parametrize("name", method_names())
def test_no_grammar_admits_none_unless_allowed(name: str) -> None:
    diag, script = _run(name, allow=None)  # a labelled run: the default is no
    assert diag.error is None, diag.error
    assert script.admitted == [] and diag.no_error is False and diag.step is not None


@pytest.mark.parametrize("name", ["all-at-once", "binary-search", "safari", "vote"])
def test_a_models_final_answer_may_be_none_where_allowed(name: str) -> None:
    diag, script = _run(name, allow=True)
    assert diag.error is None, diag.error
    assert (diag.no_error, diag.step, diag.agent) == (True, None, None) and script.admitted


def test_step_by_step_answers_none_when_no_step_is_judged_decisive() -> None:
    no = Naysayer(verdicts={"decisive_yes_no": "no"})
    diag, _ = _run("step-by-step", allow=True, script=no)
    assert diag.no_error and diag.stop_reason == "no_error" and diag.details["checked_steps"] == 4
    diag, _ = _run("step-by-step", allow=False, script=Naysayer(verdicts={"decisive_yes_no": "no"}))
    assert not diag.no_error and diag.stop_reason == "no_step_flagged" and diag.step == 8  # the reference rule: the last agent step


def test_drift_answers_none_when_no_error_span_is_marked() -> None:
    from tests.methods.test_drift_logic import Script, make_trace, new_claim

    ledger = [{"new_claims": [new_claim("Final answer: 340,000.", 5, 5, [], status="finalized")]}]
    trace = make_trace()
    engine = ScriptedEngine(Script(ledger=ledger))
    for allow, expect in ((True, (True, None, [])), (False, (False, 5, []))):
        ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, allow_none=allow)
        method = get_method("drift", tracer="per-claim", late_endpoints=False)
        ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
        assert (diag.no_error, diag.step, diag.spans) == expect
        assert diag.details["step_is_fallback"] is (not allow)


def test_falat_answers_none_when_no_candidate_passes_the_counterfactual_check() -> None:
    from tests.methods.test_falat_logic import Script, make_trace

    flags = {2: (False, False, True), 6: (True, True, True)}
    script = Script(flags=flags, labels={(2, 6): "error_shift"}, suspicion={2: 3, 6: 8})  # no verdict passes
    trace = make_trace(10)
    for allow in (True, False):
        engine = ScriptedEngine(script, max_model_len=8192)
        ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=8192, allow_none=allow)
        ((_, diag),) = list(run_jobs(engine, [Job(trace.id, get_method("falat").run(ctx), lambda e: pytest.fail(e))]))
        assert diag.stop_reason == "none_verified" and diag.no_error is allow and (diag.step is None) is allow


def test_the_default_allows_none_only_on_unlabelled_runs_a_harness_passed() -> None:
    trace = coding_trace()
    passed = trace.model_copy(update={"labels": None, "metadata": {"harness": {"harness": "harbor", "failed": False}}})
    failed = trace.model_copy(update={"labels": None, "metadata": {"harness": {"harness": "harbor", "failed": True}}})
    plain = trace.model_copy(update={"labels": None})
    assert [allows_none(t, None) for t in (passed, failed, plain, trace)] == [True, False, False, False]
    assert allows_none(trace, True) and not allows_none(passed, False)


def test_allow_none_is_an_option_of_every_method() -> None:
    for name in method_names():
        assert "allow_none" in method_option_names(name)
    method = get_method("safari:allow_none=true")
    assert method.allow_none is True and MethodSpec.parse("safari:allow_none=true").label == "safari:allow_none=true"
    with pytest.raises(MethodOptionError, match="allow_none: must be true or false"):
        get_method("safari:allow_none=3")
    engine = ScriptedEngine(Naysayer())
    ctx = MethodContext(trace=coding_trace().model_copy(update={"labels": Labels()}), seed=1)
    job = method_job(engine, get_method("all-at-once:allow_none=true"), ctx)
    ((_, diag),) = list(run_jobs(engine, [job]))
    assert ctx.allow_none is True and diag.no_error


def test_a_vote_of_none_answers_is_none_and_a_mixed_vote_counts_them() -> None:
    from localfa.diagnosis import Diagnosis
    from localfa.methods.ensemble.tally import tally

    trace = coding_trace()
    d = lambda **kw: Diagnosis(trace=trace.id, method="m", seed=0, **kw)  # noqa: E731
    verdict = tally([d(no_error=True), d(step=4, agent=trace.steps[4].agent), d(no_error=True)], trace)
    assert (verdict.step, verdict.agent, verdict.votes, verdict.answered) == (NONE, None, 2, 3)
    verdict = tally([d(step=4), d(no_error=True), d(step=4)], trace)
    assert verdict.step == 4 and verdict.votes == 2


def test_the_none_script_does_tempt() -> None:
    """Where a grammar admits it, the same script does answer "none" (the first test can fail)."""
    from localfa.engine.grammar import Grammar
    from localfa.engine.types import Sampling
    from localfa.methods.none_answer import step_or_none

    loose = Grammar.json(
        {
            "type": "object",
            "properties": {"step": step_or_none({"type": "integer", "minimum": 0, "maximum": 3}, True)},
            "required": ["step"],
        }
    )
    script = Naysayer()
    assert json.loads(script(Request((), loose, Sampling(seed=1), key="k"))) == {"step": NONE} and script.admitted == ["k"]


def test_metrics_score_none_on_no_fault_labels_and_as_a_miss_elsewhere() -> None:
    from localfa.bench.metrics import score_record
    from localfa.results import ResultRecord

    base = {"trace": "t", "method": "m", "seed": 0}
    none_on_clean = ResultRecord(**base, no_error=True, label=Labels())
    step_on_clean = ResultRecord(**base, step=2, agent="a", label=Labels())
    none_on_fault = ResultRecord(**base, no_error=True, label=Labels(mistake_agent="a", mistake_step=2, fault_steps=[2]))
    assert score_record(none_on_clean)["no_error"] == 1.0 and score_record(step_on_clean)["no_error"] == 0.0
    scores = score_record(none_on_fault)
    assert scores["no_error"] is None and scores["step"] == 0.0 and scores["agent"] == 0.0


def test_telbench_no_error_case_scores_with_allow_none_on_the_oracle(tmp_path, capsys) -> None:
    """TELBench's no-error case (`gold.error_span_ids: []`): with --allow-none the oracle answers
    "none" and the report scores it; without, the request admits no "none" and the oracle guesses a step."""
    import localfa.cli as cli
    from localfa.bench.store import read_records

    cases = Path(__file__).resolve().parents[1] / "fixtures" / "telbench" / "cases.jsonl"
    run = tmp_path / "run"
    argv = ["bench", str(cases), "--methods", "all-at-once", "--allow-none", "--engine", "oracle", "--out", str(run), "--no-progress"]
    assert cli.main(argv) in (0, None)
    records = {r.trace.rsplit("/", 1)[-1]: r for r in read_records(run / "results.jsonl")}
    assert records["tb-002"].no_error and records["tb-002"].step is None and records["tb-001"].step == 2
    assert cli.main(["report", str(run), "--markdown"]) in (0, None)
    table = capsys.readouterr().out
    header = next(line for line in table.splitlines() if line.startswith("| method"))
    row = next(line for line in table.splitlines() if line.startswith("| all-at-once:allow_none=true"))
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["no-error acc"].startswith("1.000") and cells["step acc"].startswith("1.000")
    plain = tmp_path / "plain"
    assert cli.main([*argv[:4], "--engine", "oracle", "--out", str(plain), "--no-progress"]) in (0, None)
    # without "none" to answer, a careful model that sees no fault still has to name a step: a guess
    guessed = {r.trace.rsplit("/", 1)[-1]: r for r in read_records(plain / "results.jsonl")}["tb-002"]
    assert guessed.error is None and guessed.step is not None and not guessed.no_error


@pytest.mark.real
def test_the_embedded_model_answers_under_the_none_grammars(vllm_engine) -> None:
    """The real model under the real grammars: where "none" is allowed, every answer is either a
    step where an agent acted with that agent, or "none" with neither (never a mix)."""
    from localfa.api import diagnose
    from localfa.traces.load import load_traces

    cases = Path(__file__).resolve().parents[1] / "fixtures" / "telbench" / "cases.jsonl"
    for trace in load_traces(cases):
        for method in ("all-at-once:allow_none=true", "binary-search:allow_none=true"):
            diag = diagnose(trace, method=method, engine=vllm_engine, seed=3)
            assert diag.error is None, diag.error
            if diag.no_error:
                assert diag.step is None and diag.agent is None
            else:
                assert diag.step in trace.action_steps() and diag.agent == trace.agent_at(diag.step)
