"""Issue 35's review points: what a forced answer may name, no busywork when the run was shown
whole, scaled budgets on top of the opening prompt, a bounded call list, the honest oracle."""

from __future__ import annotations

import pytest

from localfa.grammars.safari import SafariLimits
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import Job, run_jobs
from localfa.methods.safari.mutants import MUTANTS, UNFIT_TRACES
from localfa.oracle.mutants import registered_mutants
from localfa.traces.lineview import LineView, steps_shown
from localfa.traces.model import Labels
from tests.methods.test_safari_logic import EVAL, READ, SEARCH, SUBMIT, Script, make_trace, run_one, turn


def _final_grammar_steps(engine) -> list[int]:
    (final,) = [r for r in engine.requests if r.key == "final"]
    node = final.grammar.spec["properties"]["step_id"]
    return node.get("enum") or list(range(node["minimum"], node["maximum"] + 1))


def test_a_forced_answer_may_name_a_step_the_last_result_showed():
    trace = make_trace(n=300)  # 300 lines: the bootstrap read shows only the end
    script = Script([turn({"name": "read", "offset": 4, "limit": 3}, {})], final_step=4)
    diag, engine = run_one(script, trace, max_turns=1)
    assert 4 in _final_grammar_steps(engine)
    assert (diag.error, diag.step, diag.stop_reason) == (None, 4, "forced")


def test_a_step_only_written_into_the_stm_is_not_answerable():
    trace = make_trace(n=300)
    note = {"faults_identified_so_far": [{"step_id": 2, "reason": "r", "evidence": "e"}]}
    diag, engine = run_one(Script([turn({"name": "read", "offset": 50, "limit": 3}, note)], final_step=50), trace, max_turns=1)
    assert 2 not in _final_grammar_steps(engine)
    assert diag.step == 50


def test_a_run_shown_whole_meets_the_minimum_of_investigating_turns():
    diag, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), make_trace(), min_investigate_turns=10)
    assert diag.details["whole_run_shown"] and diag.details["trace_fits"]
    assert (diag.step, diag.details["turns_used"]) == (4, 2)
    assert not any("evaluate refused" in r.messages[-1]["content"] for r in engine.requests)


def test_a_run_not_shown_whole_still_waits_for_the_minimum():
    diag, engine = run_one(Script([turn(EVAL, {})] + [turn(READ, {})] * 3), make_trace(n=300), min_investigate_turns=3, max_turns=6)
    assert "evaluate refused" in engine.requests[1].messages[-1]["content"]


def test_the_turn_grammar_thinks_first_within_a_stated_bound():
    diag, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), make_trace())
    spec = engine.requests[0].grammar.spec
    assert list(spec["properties"])[0] == "analysis"
    assert spec["properties"]["analysis"]["maxLength"] == SafariLimits().analysis_chars
    assert f"at most {SafariLimits().analysis_chars} characters" in engine.requests[0].messages[0]["content"]


def test_a_scaled_budget_applies_on_top_of_the_opening_prompt():
    trace = make_trace(n=300)
    trace.labels = Labels(mistake_agent="Coder", mistake_step=250, fault_steps=[250], reason="r")
    diag, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), trace, budget="scale:2", min_investigate_turns=0)
    opening = sum(len(m["content"].split()) for m in engine.requests[0].messages[:2])
    assert diag.error is None
    assert diag.details["budget_limit"] >= opening


def test_the_past_calls_listed_are_bounded():
    reads = [turn({"name": "read", "offset": i, "limit": 1}, {}) for i in range(20)]
    _, engine = run_one(Script(reads), make_trace(n=300), max_turns=20)
    last = engine.requests[-2].messages[-1]["content"]
    assert "earlier calls not listed" in last


def test_read_and_search_return_the_steps_they_show_in_the_one_line_format():
    view = LineView(make_trace(n=30))
    for shown in (view.read_shown(3, 4), view.search_shown("step 1[0-2] ")):
        assert set(shown.steps) == steps_shown(shown.text)


def test_safari_registers_its_mutants_with_every_one_issue_32_lists():
    names = {m.name for m in registered_mutants()["safari"]}
    assert {"read_shows_no_lines", "evaluator_without_reasoning", "search_literal_step_id_only"} <= names
    # issue 53.4: the paper's evaluator rubric earns its place; issue 53.3's stub variant is a blind
    # spot of the oracle since the fill rule (docs/methods/safari.md), kept by the summary tests below
    assert "invented_rubric" in names and "stub_summaries" not in names
    assert len(MUTANTS) >= 6


def _ceiling(traces, patch=None) -> float:
    import contextlib
    import tempfile
    from pathlib import Path

    from localfa.bench.sweep import run_sweep
    from localfa.engine.factory import make_engine
    from localfa.methods.registry import MethodSpec

    engine = make_engine("oracle:p=1", say=lambda _: None)
    with tempfile.TemporaryDirectory() as run_dir, patch() if patch else contextlib.nullcontext():
        records = run_sweep(
            Path(run_dir), traces, [MethodSpec.parse("safari")], [0], engine, ["none"], progress=False, say=lambda _: None
        ).records
    engine.close()
    return sum(r.error is None and r.step == r.label.mistake_step for r in records) / len(records)


def test_the_honest_oracle_ceiling_falls_when_read_or_search_is_broken(whowhen):
    """Runs the first read does not show whole (`UNFIT_TRACES`): the fault is found only by reading
    what searches point to (the p = 1 kills of two of issue 32's mutants)."""
    from localfa.bench.sweep import load_traces

    traces = [t for t in load_traces([whowhen / "hand-crafted"]) if t.id.split("/", 1)[1] in UNFIT_TRACES]
    assert len(traces) == len(UNFIT_TRACES)
    mutants = {m.name: m for m in MUTANTS}
    assert _ceiling(traces) == 1.0
    assert _ceiling(traces, mutants["read_shows_no_lines"].patch) < 1.0
    assert _ceiling(traces, mutants["search_literal_step_id_only"].patch) < 1.0


def test_older_results_are_summarised_before_turns_are_evicted_and_the_newest_stays_raw():
    trace = make_trace(40, long=30)
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 5}, {}) for i in range(6)]
    diag, engine = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace, budget="14000c")
    assert diag.details["summarised_results"] > 0 and diag.details["evicted_turns"] == 0
    last = [r for r in engine.requests if r.grammar.name == "safari_turn"][-1].messages
    assert any("was summarised" in m["content"] for m in last)
    assert any("read(offset=50, limit=5) returned:" in m["content"] for m in last)  # the newest result, raw
    assert sum(m["role"] == "assistant" for m in last) == 1 + 7  # the bootstrap and every model turn kept


def test_each_turn_records_how_its_prompt_was_measured():
    diag, _ = run_one(Script([turn(READ, {}), turn(EVAL, {}), turn(SUBMIT, {})]), make_trace(), budget="100000")
    measures = [e["prompt_measure"] for e in diag.transcript if isinstance(e["turn"], int)]
    # the first prompt by its messages' counts; later ones anchored on the engine's count of the last (issue 53.2)
    assert measures == ["message_counts"] + ["message_counts+engine_drift"] * (len(measures) - 1)


def test_a_summarised_result_keeps_the_lines_noted_in_memory_and_stubs_the_rest():
    """Issue 53.3: the result whose line the STM notes as evidence keeps that line verbatim when
    summarised; a result nothing referred to becomes a stub; the fault note is never lost."""
    trace = make_trace(40, long=30)
    note = {"faults_identified_so_far": [{"step_id": 4, "reason": "wrong", "evidence": '"content": "step 4 content lorem ipsum'}]}
    reads = [turn({"name": "read", "offset": 10, "limit": 5}, note)]
    reads += [turn({"name": "read", "offset": 20 + 10 * i, "limit": 5}, {}) for i in range(6)]
    diag, engine = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace, budget="14000c")
    assert diag.details["summarised_results"] > 0
    last = [r for r in engine.requests if r.grammar.name == "safari_turn"][-1].messages
    kept = [m["content"] for m in last if "read(offset=10, limit=5): its result" in m["content"]]
    assert kept and "lines you quoted, noted or named values from, verbatim" in kept[0]
    assert '  12 (step 4)| {"step_id": 4, "agent": "Coder"' in kept[0]  # the noted line, verbatim
    assert any("nothing in it was quoted or noted" in m["content"] for m in last)  # a result nobody referred to


def test_the_evaluator_scores_the_papers_three_conditions():
    """Issue 53.4: a genuine fault, the earliest one (is an earlier step to blame?), not corrected
    later; the score follows from those, not from the form of the evidence."""
    diag, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), make_trace())
    (system, _user) = [r for r in engine.requests if r.grammar.name == "safari_verdict"][0].messages
    text = system["content"]
    for condition in ("genuine fault", "the earliest one", "not corrected later", "earlier step"):
        assert condition in text, condition
    assert "Quoted, specific, consistent" not in text


def test_the_prompts_never_say_none_or_zero_turns_left():
    """Issue 53.5: no 'LARGER than your context (None)' without a cap, no 'Only 0 turns left',
    no 'you never see it all at once' beside a run shown whole."""
    diag, engine = run_one(Script([turn(READ, {})] * 3), make_trace(n=300), max_turns=3)
    first = engine.requests[0].messages
    assert "(None)" not in first[1]["content"] and "longer than one read shows" in first[1]["content"]
    assert "never see it all at once" not in first[0]["content"]
    texts = [m["content"] for r in engine.requests for m in r.messages]
    assert not any("Only 0 turns" in t for t in texts) and any("That was your last turn." in t for t in texts)
    assert any("Only 1 turn left" in t for t in texts)


def test_search_shows_the_latest_hits_first_and_says_so():
    """Issue 53.5: the strategy traces back from the end, so SAFARI's search lists the latest
    matching lines first, the last ones when there are more, as its system prompt states."""
    view = LineView(make_trace(n=30))
    forward = view.search_hits("content", max_results=5)
    backward = view.search_hits("content", max_results=5, from_end=True)
    assert forward.truncated and backward.truncated
    every = [line for line, _ in view.search_hits("content", max_results=100).hits]
    assert [line for line, _ in forward.hits] == every[:5]
    assert [line for line, _ in backward.hits] == every[-5:][::-1]
    assert "last 5 matching lines shown, latest first; more exist earlier" in view.search("content", 5, from_end=True)
    diag, engine = run_one(Script([turn(SEARCH, {}), turn(EVAL, {}), turn(SUBMIT, {})]), make_trace(n=300))
    assert "latest first" in engine.requests[0].messages[0]["content"]
    result = engine.requests[1].messages[-1]["content"]
    lines = [int(x.split("(")[0]) for x in result.splitlines() if "(step " in x and "|" in x]
    assert lines == sorted(lines, reverse=True) and len(lines) > 1


def test_the_stm_fault_list_is_bounded_stated_and_recorded():
    """Issue 53.5: the fault list sits in the part of the prompt never evicted, so it has a bound,
    stated in the prompt; past it the entry at the latest step goes and the record says which."""
    notes = [turn(READ, {"faults_identified_so_far": [{"step_id": s, "reason": "r", "evidence": "e"}]}) for s in (9, 3, 7)]
    diag, engine = run_one(Script([*notes, turn(EVAL, {}), turn(SUBMIT, {})]), make_trace(), limits={"max_faults": 2})
    assert "keeps at most 2 entries" in engine.requests[0].messages[0]["content"]
    assert [f["step_id"] for f in diag.details["stm"]["faults_identified_so_far"]] == [3, 7]
    assert diag.details["stm_faults_dropped"] == [9]


def test_the_engine_drift_is_measured_against_the_messages_own_sum_so_it_holds_every_turn():
    """An engine that counts 7 tokens the chat template's calibration cannot see (joins around a
    tool result): once it has counted one such prompt, the harness's count of every later prompt is
    the engine's exactly. The drift was once measured against a size that already held it, so it
    held only every other turn."""
    from localfa.engine.scripted import ScriptedEngine

    class Joins(ScriptedEngine):
        def count_prompt_tokens(self, messages):
            hidden = 7 if any("returned:" in m.get("content", "") for m in messages) else 0
            return super().count_prompt_tokens(messages) + hidden

    trace = make_trace()
    engine = Joins(Script([turn(READ, {}), turn(SEARCH, {}), turn(READ, {}), turn(SEARCH, {}), turn(EVAL, {}), turn(SUBMIT, {})]))
    method = get_method("safari", transcript=True, min_investigate_turns=0)
    ctx = MethodContext(trace, seed=0, budget="100000", count_tokens=engine.count_tokens, count_prompt_tokens=engine.count_prompt_tokens)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
    turns = [e for e in diag.transcript if isinstance(e["turn"], int)]
    assert len(turns) >= 5
    assert [e["prompt_counted"] for e in turns[1:]] == [e["prompt_tokens"] for e in turns[1:]]
