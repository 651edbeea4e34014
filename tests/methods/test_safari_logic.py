"""SAFARI's rules, checked exactly on the scripted engine (the real-model runs are elsewhere)."""

from __future__ import annotations

import json

import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.scripted import ScriptedEngine
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import Job, run_jobs
from localfa.methods.safari.history import History
from localfa.methods.safari.stm import ShortTermMemory
from localfa.traces.model import Labels, Trace
from tests.methods.synthetic import synthetic_trace


def make_trace(n: int = 12, tid: str = "t1", long: int = 0) -> Trace:
    labels = Labels(mistake_agent="Coder", mistake_step=4, fault_steps=[4], reason="r")
    return synthetic_trace(n, tid, "step {i} content ", long, labels=labels)


def turn(tool: dict, stm: dict | None = None, action: str = "next") -> dict:
    out = {"next_action": action, "tool": tool}
    if stm is not None:
        out = {"stm": stm, **out}
    return {"analysis": "Thinking it through.", **out}


READ = {"name": "read", "offset": 0, "limit": 5}
SEARCH = {"name": "search", "pattern": "step 4"}
EVAL = {
    "name": "evaluate",
    "questions": ["Is step 4 wrong?", "Is it the first?", "Never corrected?"],
    "reasoning": "Step 4 said 'step 4 content' which is wrong.",
}
SUBMIT = {"name": "submit_step", "step_id": 4, "reasoning": "Step 4 is the first uncorrected error."}


class Script:
    """Answers investigator turns from a list and evaluator calls with fixed scores."""

    def __init__(self, turns: list[dict], scores: list[int] | None = None, final_step: int = 2) -> None:
        self.turns = list(turns)
        self.scores = list(scores or [90, 80, 85])
        self.final_step = final_step

    def __call__(self, req):
        if req.grammar.name == "safari_turn":
            k = int(req.key.split("/")[1])
            return self.turns[k - 1] if k - 1 < len(self.turns) else turn(READ, {})
        if req.grammar.name == "safari_verdict":
            i = int(req.key.split("/")[2])
            return {"feedback": f"fb{i}", "score": self.scores[i % len(self.scores)]}
        return {"reasoning": "forced", "step_id": self.final_step}


def run_one(script, trace=None, **options):
    trace = trace or make_trace()
    engine = ScriptedEngine(script)
    budget = options.pop("budget", None)
    options.setdefault("min_investigate_turns", 0)  # the paper's 10-turn rule has its own tests
    method = get_method("safari", transcript=True, **options)
    ctx = MethodContext(trace, seed=0, budget=budget, count_tokens=engine.count_tokens)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
    return diag, engine


def observations(engine):
    """The tool results the investigator saw (last message of each turn request, STM stripped)."""
    return [r.messages[-1]["content"] for r in engine.requests if r.grammar.name != "safari_verdict"]


def test_stm_sparse_merge_matches_faults_by_step_id():
    stm = ShortTermMemory(task_goal="goal")
    stm.merge({"faults_identified_so_far": [{"step_id": 3, "reason": "a", "evidence": "x"}]})
    stm.merge({"faults_identified_so_far": [{"step_id": 5, "reason": "b", "evidence": "y"}]})
    changed = stm.merge({"faults_identified_so_far": [{"step_id": 3, "reason": "a2", "evidence": "x2"}], "still_need": ["read step 2"]})
    assert [f.step_id for f in stm.faults] == [3, 5]
    assert stm.fault(3).reason == "a2" and stm.fault(5).reason == "b"
    assert stm.task_goal == "goal"  # untouched key stays
    assert set(changed) == {"faults_identified_so_far", "still_need"}
    assert stm.merge({}) == [] and stm.merge(None) == []


def test_submit_before_evaluate_is_refused_then_accepted_after_evaluate():
    diag, engine = run_one(Script([turn(SUBMIT, {}), turn(EVAL, {}), turn(SUBMIT, {})]))
    obs = observations(engine)
    assert "submit_step refused" in obs[1]
    assert diag.stop_reason == "submitted" and diag.step == 4 and diag.agent == "Coder"
    assert diag.details["turns_used"] == 3


def test_evaluate_questions_go_as_one_batch_without_the_trace():
    diag, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})], scores=[90, 60, 90]))
    eval_batches = [b for b in engine.batches if b[0].grammar.name == "safari_verdict"]
    assert len(eval_batches) == 1 and len(eval_batches[0]) == 3
    for req in eval_batches[0]:
        text = json.dumps(req.messages)
        assert "step 7 content" not in text  # the evaluator never sees the trace
        assert EVAL["reasoning"] in text
    assert diag.details["evaluate_scores"] == [[90, 60, 90]]
    obs = observations(engine)[1]
    assert "average confidence 80.0 >= 70" in obs and "submit_step now" in obs


def test_low_evaluate_score_returns_every_claims_verdict_with_its_number():
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})], scores=[90, 30, 50]))
    obs = observations(engine)[1]
    assert "average confidence 56.7 < 70" in obs
    for i, (question, score) in enumerate(zip(EVAL["questions"], [90, 30, 50])):
        assert f"Question {i + 1} [{score}/100]: {question}\nFeedback: fb{i}" in obs


def test_after_three_evaluations_it_must_submit():
    script = Script(
        [
            turn(EVAL, {}),
            turn(dict(EVAL, reasoning="again, first retry"), {}),
            turn(dict(EVAL, reasoning="again, second retry"), {}),
            turn(dict(EVAL, reasoning="again, third retry"), {}),
            turn(SUBMIT, {}),
        ],
        scores=[10],
    )
    diag, engine = run_one(script)
    obs = observations(engine)
    assert "no evaluations left" in obs[3]
    assert "used all 3 evaluations" in obs[4]
    assert len(diag.details["evaluate_scores"]) == 3 and diag.stop_reason == "submitted"


def test_identical_call_gets_a_reminder_not_a_result():
    diag, engine = run_one(Script([turn(SEARCH, {}), turn(SEARCH, {}), turn(EVAL, {}), turn(SUBMIT, {})]))
    obs = observations(engine)
    assert "returned:" in obs[1] and "REMINDER" not in obs[1]
    assert "REMINDER" in obs[2] and "turn 1" in obs[2]


def test_turn_counter_and_forced_finalisation():
    diag, engine = run_one(Script([turn({"name": "read", "offset": i, "limit": 3}, {}) for i in range(4)], final_step=7), max_turns=4)
    obs = observations(engine)
    assert obs[1].startswith("[Turn 1/4 — 3 turns remaining]")
    assert obs[4].startswith("[Turn 4/4 — 0 turns remaining]")
    assert engine.requests[-1].grammar.name == "safari_final"
    assert diag.stop_reason == "forced" and diag.step == 7 and diag.agent == "Coder"


def test_grammar_is_built_for_the_trace():
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), trace=make_trace(9))
    schema = engine.requests[0].grammar.spec
    tools = {t["properties"]["name"]["const"]: t for t in schema["properties"]["tool"]["anyOf"]}
    assert set(tools) == {"read", "search", "evaluate", "submit_step"}
    assert tools["submit_step"]["properties"]["step_id"]["maximum"] == 8
    assert tools["evaluate"]["properties"]["questions"]["maxItems"] == 3
    lines = tools["read"]["properties"]["offset"]["maximum"]
    assert lines >= 8  # offsets stay inside the line view
    with pytest.raises(InvalidOutputError):
        engine.requests[0].grammar.parse(json.dumps(turn(dict(SUBMIT, step_id=9), {})))


def test_history_is_append_only_and_stm_rides_at_the_end():
    _, engine = run_one(Script([turn(READ, {"task_goal": "count evens"}), turn(SEARCH, {}), turn(EVAL, {}), turn(SUBMIT, {})]))
    turns = [r for r in engine.requests if r.grammar.name == "safari_turn"]
    for a, b in zip(turns, turns[1:]):
        assert "<<<STM>>>" in a.messages[-1]["content"] and "<<<STM>>>" in b.messages[-1]["content"]
        # Every message a call sent is repeated, exactly, by the next call (append-only).
        assert list(b.messages[: len(a.messages)]) == list(a.messages)
        assert len(b.messages) == len(a.messages) + 2
    assert '"task_goal": "count evens"' in turns[1].messages[-1]["content"]


def test_no_turn_rewrites_an_earlier_message_except_a_batch_summary():
    """Under a budget that summarises and evicts: every message a call holds that the previous
    call did not send is one of the two newest (the model's turn, its result) or a summary."""
    trace = make_trace(40, long=30)
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 5}, {"still_need": [f"item {i}"]}) for i in range(8)]
    diag, engine = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace, budget="14000c")
    assert diag.details["summarised_results"] > 0  # the budget is tight enough to test the rule
    turns = [r for r in engine.requests if r.grammar.name == "safari_turn"]
    for a, b in zip(turns, turns[1:]):
        changed = [m["content"] for m in b.messages[:-2] if m not in a.messages]
        assert all("was summarised" in c for c in changed), changed[:1]
        kept = [m for m in a.messages if m in b.messages]
        later = iter(b.messages)
        assert all(m in later for m in kept)  # in the same order (a subsequence: two turns may say the same)


def test_eviction_keeps_head_and_stm():
    trace = make_trace(40, long=30)
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 5}, {"still_need": [f"item {i}"]}) for i in range(8)]
    diag, engine = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace, budget="14000c")
    assert diag.details["summarised_results"] + diag.details["evicted_turns"] > 0  # older results summarised first
    last = [r for r in engine.requests if r.grammar.name == "safari_turn"][-1]
    total = sum(len(m["content"]) for m in last.messages)
    assert total <= 14000 + 2000  # the budget (plus the newest turn, which always stays)
    assert last.messages[0]["role"] == "system" and "Find the FIRST step" in last.messages[1]["content"]
    assert "read(offset=" in last.messages[3]["content"]  # the bootstrap read stays
    assert "item 7" in last.messages[-1]["content"]  # the STM survives eviction


def test_without_budget_nothing_is_evicted():
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 5}, {}) for i in range(8)]
    diag, _ = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=make_trace(40, long=30))
    assert diag.details["evicted_turns"] == 0


def test_history_eviction_unit():
    h = History(measure=len)
    h.add_head("system", "s" * 10)
    h.add_head("user", "u" * 10)
    for _ in range(5):
        h.add_turn("a" * 10, "o" * 10)
    assert h.evict_to(45, "t" * 5) == 4 and len(h.turns) == 1 and h.evicted == 4
    assert h.messages("tail")[-1]["content"].endswith("tail")


def test_no_stm_ablation_drops_the_memory():
    _, engine = run_one(Script([turn(EVAL), turn(SUBMIT)]), use_stm=False)
    first = engine.requests[0]
    assert "stm" not in first.grammar.spec["properties"]
    assert "<<<STM>>>" not in first.messages[-1]["content"]


def test_several_traces_share_engine_batches():
    engine = ScriptedEngine(Script([turn(READ, {}), turn(EVAL, {}), turn(SUBMIT, {})]))
    method = get_method("safari", min_investigate_turns=0)
    jobs = []
    for i in range(3):
        t = make_trace(tid=f"t{i}")
        ctx = MethodContext(t, seed=0, count_tokens=engine.count_tokens)
        jobs.append(Job(t.id, method.run(ctx), lambda e: pytest.fail(e)))
    results = dict(run_jobs(engine, jobs, concurrency=3))
    assert len(results) == 3
    assert len(engine.batches[0]) == 3  # the first turns of all three traces in one batch
    assert max(len(b) for b in engine.batches) == 9  # three evaluates of three questions together
    seeds = {r.sampling.seed for r in engine.batches[0]}
    assert len(seeds) == 3  # seeds differ per trace, derived, not positional


def test_quotes_found_verbatim_in_the_trace_become_evidence():
    submit = dict(SUBMIT, reasoning="Step 4 wrote 'step 4 content lorem' and 'a quote that is nowhere'.")
    stm = {"faults_identified_so_far": [{"step_id": 4, "reason": "wrong", "evidence": "step 4 content"}]}
    diag, _ = run_one(Script([turn(EVAL, stm), turn(submit, {})]), trace=make_trace(long=1))
    assert diag.evidence == ["step 4 content", "step 4 content lorem"]
    assert diag.details["evidence_verbatim"] == [True, True]


def test_scale_budget_is_fault_position_over_factor():
    from localfa.traces.lineview import LineView

    trace = make_trace(60, long=40)
    trace.labels.mistake_step = 50
    reads = [turn({"name": "read", "offset": 9 * i, "limit": 9}, {}) for i in range(12)]
    engine_counter = ScriptedEngine([]).count_tokens
    diag, _ = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace, budget="scale:2")
    pos = LineView(trace, count_tokens=engine_counter).token_position_of_step(50)
    assert diag.details["budget"] == "scale:2"
    assert diag.details["investigation_budget"] == pos // 2  # no hidden floor
    assert diag.details["budget_limit"] > pos // 2  # on top of the fixed opening prompt
    assert diag.details["summarised_results"] + diag.details["evicted_turns"] > 0


@pytest.mark.real
def test_the_real_engine_cannot_emit_a_step_outside_the_trace(vllm_engine):
    """The model is told to copy a submit with step_id 9; under the turn grammar of a 9-step trace
    it cannot: the same copy under a grammar without the bound shows the model would."""
    from localfa.engine.types import Request, Sampling
    from localfa.grammars.safari import SafariLimits, turn_grammar

    wanted = json.dumps(turn(dict(SUBMIT, step_id=9), {}), separators=(",", ":"))
    prompt = f"Repeat this JSON object exactly, character for character:\n{wanted}"
    bounded = turn_grammar(9, 30, 20, SafariLimits())
    unbounded_spec = json.loads(json.dumps(bounded.spec))
    for tool in unbounded_spec["properties"]["tool"]["anyOf"]:
        tool["properties"].get("step_id", {}).pop("maximum", None)
    from localfa.engine.grammar import Grammar

    unbounded = Grammar.json(unbounded_spec, name="safari_turn_unbounded")
    msgs = ({"role": "user", "content": prompt},)
    reqs = [Request(msgs, g, Sampling(temperature=0.0, max_tokens=200, seed=1), key=g.name) for g in (unbounded, bounded)]
    free, held = vllm_engine.generate(reqs)
    assert free.value["tool"] == {"name": "submit_step", "step_id": 9, "reasoning": SUBMIT["reasoning"]}
    assert held.value["tool"]["name"] == "submit_step" and 0 <= held.value["tool"]["step_id"] <= 8
    with pytest.raises(InvalidOutputError):
        bounded.parse(free.text)
