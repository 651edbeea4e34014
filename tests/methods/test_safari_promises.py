"""SAFARI holds its promises (issue 24): forced answers survive the progress display, a budget is a
hard limit, the paper's evaluator is whole, the model is never told two contradictory things, the
answer is justified before it is committed, and forced answers name only steps the model saw."""

from __future__ import annotations

import io
import json
import random
from collections import Counter

import pytest
from rich.console import Console

from localfa.cli.progress import LiveProgress, watch
from localfa.engine.errors import ContextLengthError
from localfa.engine.scripted import ScriptedEngine
from localfa.grammars.safari import SafariLimits, evaluator_grammar, final_grammar, turn_grammar
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.tokens import line_pieces
from localfa.traces.lineview import LineView
from tests.methods.test_safari_logic import EVAL, READ, SEARCH, SUBMIT, Script, make_trace, observations, turn
from tests.methods.test_safari_rules import turns_of


def _run(engine, trace, budget=None, wrap=None, **options):
    options.setdefault("min_investigate_turns", 0)
    method = get_method("safari", transcript=True, **options)
    job = method_job(engine, method, MethodContext(trace, seed=0, budget=budget))
    if wrap is not None:
        job = wrap(job)
    ((_, diag),) = list(run_jobs(engine, [job]))
    return diag


def _record(diag) -> dict:
    rec = diag.record(with_transcript=True)
    rec.pop("wall_s")
    return rec


# ---- 1. forced finalisation under the progress display ------------------------------------------


def _cut_at_turn_2(req):
    if req.key == "turn/2":
        return ('{"next_action": "cut', "length")  # still cut after the retry: TruncatedOutputError
    return Script([turn(SEARCH, {"task_goal": "count evens"})], final_step=5)(req)


def test_a_truncated_turn_gives_the_same_forced_record_wrapped_and_unwrapped():
    plain = _run(ScriptedEngine(_cut_at_turn_2), make_trace())
    with LiveProgress("diagnose", 1, Console(file=io.StringIO(), force_terminal=False)) as live:
        wrapped = _run(ScriptedEngine(_cut_at_turn_2), make_trace(), wrap=live.wrap)
    assert plain.error is None and plain.stop_reason == "forced" and plain.details["forced_by"] == "turn_failure"
    assert _record(wrapped) == _record(plain)


def test_watch_passes_throw_and_close_through():
    events: list[str] = []

    def program():
        try:
            yield ["a"]
        except ValueError as exc:
            events.append(f"caught {exc}")
        try:
            yield ["b"]
        finally:
            events.append("closed")

    w = watch(program(), lambda b: events.append(f"batch {b[0]}"), lambda r: None)
    assert next(w) == ["a"]
    assert w.throw(ValueError("boom")) == ["b"]
    w.close()
    assert events == ["batch a", "caught boom", "batch b", "closed"]


def test_a_context_length_error_mid_run_is_a_turn_failure():
    def script(req):
        if req.key == "turn/2":
            raise ContextLengthError(9000, 8192)
        return Script([turn(SEARCH, {})], final_step=5)(req)

    diag = _run(ScriptedEngine(script), make_trace())
    assert diag.error is None and diag.stop_reason == "forced" and diag.step == 5
    assert diag.details["turn_failure"]["error"].startswith("ContextLengthError")


# ---- 2. a budget is a hard limit ------------------------------------------------------------------


class _Tokens(ScriptedEngine):
    """The scripted engine with a chat template: every message costs 8 more "tokens"."""

    def count_prompt_tokens(self, messages):
        return sum(self.count_tokens(m["content"]) + 8 for m in messages)


def _dense_trace(n: int = 30, words: int = 300):
    trace = make_trace(n)
    rng = random.Random(0)
    for step in trace.steps:
        step.content = " ".join(f"{rng.getrandbits(24):x}" for _ in range(words))  # a word each: token-dense
    return trace


def _head_size(trace, budget: int) -> int:
    """The first prompt under `budget` (system, user, bootstrap read, empty STM) on _Tokens."""
    engine = _Tokens(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    _run(engine, trace, budget=str(budget), max_turns=1)
    return engine.count_prompt_tokens(turns_of(engine)[0].messages)


def _words(n: int, w: str) -> str:
    return " ".join([w] * n)


def test_every_prompt_sent_fits_the_budget_shrinking_the_newest_result_when_it_must():
    trace, budget = _dense_trace(), 2430
    spare = budget - _head_size(trace, budget)
    # ~220 words of notes, in the turn's text and again in the STM: with older results summarised
    # and old turns evicted, a 14-line read (~400 tokens) still does not fit whole
    notes = {"task_goal": _words(110, "g"), "final_output": _words(110, "f")}
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 14}, notes if i == 0 else {}) for i in range(6)]
    engine = _Tokens(Script(reads + [turn(EVAL, {})], final_step=0))
    diag = _run(engine, trace, budget=str(budget), max_turns=8)
    assert diag.error is None and diag.details["max_read_lines"] >= 14 and 400 < spare < 600
    sizes = [engine.count_prompt_tokens(r.messages) for r in turns_of(engine) + [engine.requests[-1]]]
    assert max(sizes) <= budget and diag.details["largest_prompt"] == max(sizes)
    # once the engine has counted a prompt, the next is its messages' counts anchored on that count,
    # never recounted whole (issue 53.2)
    assert diag.details["prompt_measure"].get("message_counts+engine_drift", 0) >= 1 and diag.details["token_unit"] == "tokens"
    assert not diag.details["prompt_measure"].get("chat_template")
    assert diag.details["shrunk_observations"] >= 1
    assert any("shortened to fit the context budget" in o for o in observations(engine))


def test_a_prompt_that_cannot_fit_ends_the_search_with_a_forced_answer():
    trace, budget = _dense_trace(), 2430
    spare = budget - _head_size(trace, budget)
    fault = {"step_id": 29, "reason": _words(300, "r"), "evidence": _words(150, "e")}
    grown = {"task_goal": _words(199, "g"), "faults_identified_so_far": [fault]}  # ~650 words more in the STM
    engine = _Tokens(Script([turn(READ, grown)] * 3, final_step=29))
    diag = _run(engine, trace, budget=str(budget), max_turns=10)
    assert 400 < spare < 600
    assert diag.error is None and diag.stop_reason == "forced" and diag.details["forced_by"] == "budget"
    # older results are summarised before the search ends: one more turn fits than with eviction alone
    assert diag.details["budget_stop"]["turn"] in (2, 3)
    assert "context budget is full" in engine.requests[-1].messages[-1]["content"]
    assert max(engine.count_prompt_tokens(r.messages) for r in engine.requests) <= budget


def test_the_whole_run_fits_compares_characters_with_characters():
    trace = make_trace(80)  # long enough that the end read alone cannot show all of it
    view_chars = len(LineView(trace).read(0, LineView(trace).total_lines))
    engine = ScriptedEngine(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    probe = _run(engine, trace, budget="1000000c")
    head = sum(len(m["content"]) for m in turns_of(engine)[0].messages[:2])
    room_for_turn = SafariLimits().turn_max_tokens()
    # room for the view when a turn's output is counted in tokens, not when counted in characters
    budget = head + view_chars + room_for_turn * 2
    engine = ScriptedEngine(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    diag = _run(engine, trace, budget=f"{budget}c")
    assert probe.details["trace_fits"] is True
    assert diag.details["trace_fits"] is False and diag.details["budget_unit"] == "chars"
    assert "LARGER than your context" in turns_of(engine)[0].messages[1]["content"]


class _CountingEngine(ScriptedEngine):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.counted: list[str] = []

    def count_tokens(self, text):
        self.counted.append(text)
        return super().count_tokens(text)


def test_the_fits_test_counts_the_whole_view_once():
    """Counted exactly, once (issue 53.2), though measured for the fits test, the history and the
    sealed tail: through a server (a call per count) the whole view in one call, never line by
    line; in process, piece by piece (`line_pieces`), each piece once, so a message that shows
    the same lines again costs no tokenising."""
    trace = make_trace(300)
    view = LineView(trace).read(0, LineView(trace).total_lines)
    for in_process in (False, True):
        engine = _CountingEngine(Script([turn(EVAL, {}), turn(dict(SUBMIT, step_id=299), {})]))
        engine.counts_in_process = in_process
        diag = _run(engine, trace, budget="100000")
        assert diag.stop_reason == "submitted" and diag.details["trace_fits"] is True
        assert set(diag.details["prompt_measure"]) == {"message_counts", "message_counts+engine_drift"}  # never the whole prompt
        counted = Counter(engine.counted)
        if in_process:
            assert counted[view] == 0 and all(counted[p] == 1 for p in line_pieces(view))
        else:
            assert counted[view] == 1 and not set(LineView(trace).lines) & set(counted)


@pytest.mark.real
def test_a_real_tokenizer_and_chat_template_keep_token_dense_prompts_within_the_budget(embedded_model_dir):
    """SmolLM2's own tokenizer and chat template on hex text (~2 characters a token, half the
    usual 4): every prompt sent stays within the budget, as the model would count it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(embedded_model_dir))

    class _Real(ScriptedEngine):
        def count_tokens(self, text):
            return len(tok.encode(text, add_special_tokens=False))

        def count_prompt_tokens(self, messages):
            return len(tok.apply_chat_template(list(messages), tokenize=True, add_generation_prompt=True, return_dict=False))

    trace = _dense_trace(40, 200)
    reads = [turn({"name": "read", "offset": 17 * i, "limit": 30}, {}) for i in range(7)]
    engine = _Real(Script(reads + [turn(SEARCH, {}), turn(EVAL, {})], final_step=39))
    diag = _run(engine, trace, budget="6k", max_turns=10)
    sent = [engine.count_prompt_tokens(r.messages) for r in engine.requests if r.grammar.name != "safari_verdict"]
    assert diag.error is None and len(sent) >= 9
    assert max(sent) <= 6000 and diag.details["largest_prompt"] == max(sent)
    # exact counts use the budget: the peak prompt is past 90% of the cap (issue 53.2)
    assert max(sent) >= 0.9 * 6000
    assert set(diag.details["prompt_measure"]) <= {"message_counts", "message_counts+engine_drift", "chat_template"}


# ---- 3. the paper's evaluator, whole --------------------------------------------------------------

# The three evaluator feedbacks of the paper's Appendix E (Listing 3), 878-1,261 characters each.
_FEEDBACK_LENGTHS = (1261, 1026, 878)


def test_the_papers_evaluator_feedbacks_fit_the_verdict_grammar_and_its_max_tokens():
    limits = SafariLimits()
    grammar = evaluator_grammar(limits)
    for n in _FEEDBACK_LENGTHS:
        text = ("The reasoning quotes step 3 verbatim and answers the question. " * 30)[:n]
        assert grammar.parse(json.dumps({"feedback": text, "score": 75}))["score"] == 75
        assert limits.verdict_max_tokens() * 3 >= n + 40  # room at three characters a token
    assert limits.feedback_chars >= 1.5 * max(_FEEDBACK_LENGTHS)


# ---- 4. no contradictions -------------------------------------------------------------------------


def test_the_read_footer_says_where_the_read_ended_and_nothing_more():
    view = LineView(make_trace(30, long=30))
    footer = view.read(3, 4).splitlines()[-1]
    assert footer == f"[shown lines 3-6 of 0-{view.total_lines - 1}]"
    assert "offset" not in footer


def test_fetching_an_evicted_result_again_is_no_loop():
    trace = make_trace(40, long=30)
    search = {"name": "search", "pattern": "step 3 content"}
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 5}, {}) for i in range(6)]
    script = [turn(search, {})] + reads + [turn(search, {})] + reads + [turn(search, {}), turn(EVAL, {}), turn(SUBMIT, {})]
    engine = ScriptedEngine(Script(script))
    diag = _run(engine, trace, budget="2500", max_turns=20)
    refetches = [t for t in diag.transcript if t.get("refetched") and t["output"]["tool"]["name"] == "search"]
    assert [t["turn"] for t in refetches] == [8, 15]  # the result was gone both times
    assert not any(t.get("loop_warning") for t in diag.transcript)
    assert not any("STUCK IN A LOOP" in o for o in observations(engine))


# ---- 5. justify, then commit ----------------------------------------------------------------------


def test_submit_and_forced_final_both_put_reasoning_before_the_step():
    tools = turn_grammar(12, 40, 100, SafariLimits()).spec["properties"]["tool"]["anyOf"]
    submit = next(t for t in tools if t["properties"]["name"]["const"] == "submit_step")
    assert list(submit["properties"]) == ["name", "reasoning", "step_id"] == submit["required"]
    final = final_grammar(12, SafariLimits()).spec
    assert list(final["properties"]) == ["reasoning", "step_id"] == final["required"]
    engine = ScriptedEngine(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    _run(engine, make_trace())
    system = turns_of(engine)[0].messages[0]["content"]
    line = next(x for x in system.splitlines() if '"name": "submit_step"' in x)
    assert line.index('"reasoning"') < line.index('"step_id"')


# ---- 6. forced answers are honest -----------------------------------------------------------------


def test_a_submit_of_a_step_never_shown_is_refused_until_it_is_read():
    trace = make_trace(40, long=30)  # the bootstrap read shows only the end of the run
    first = LineView(trace).line_of_step(4)
    script = [turn(EVAL, {}), turn(SUBMIT, {}), turn({"name": "read", "offset": first, "limit": 5}, {}), turn(SUBMIT, {})]
    engine = ScriptedEngine(Script(script))
    diag = _run(engine, trace, budget="2500")
    assert "step 4 has not appeared in any tool result" in observations(engine)[2]
    assert diag.stop_reason == "submitted" and diag.step == 4 and diag.details["turns_used"] == 4


def test_forced_finalisation_names_only_a_seen_action_step():
    trace = make_trace(40, long=30)
    trace.steps[38].kind = "observation"
    engine = ScriptedEngine(
        Script([turn(READ, {"faults_identified_so_far": [{"step_id": 20, "reason": "r", "evidence": "e"}]})], final_step=39)
    )
    diag = _run(engine, trace, budget="2500", max_turns=2)
    final = engine.requests[-1]
    allowed = final.grammar.spec["properties"]["step_id"]["enum"]
    # seen; observation; unseen; only in the STM (not shown: not answerable, issue 35.4)
    assert 39 in allowed and 38 not in allowed and 10 not in allowed and 20 not in allowed
    assert 0 in allowed  # READ showed step 0
    assert diag.stop_reason == "forced" and diag.step == 39


def test_observation_steps_are_never_answerable():
    trace = make_trace(12)
    trace.steps[5].kind = "observation"
    tools = turn_grammar(trace.action_steps(), 40, 100, SafariLimits()).spec["properties"]["tool"]["anyOf"]
    submit = next(t for t in tools if t["properties"]["name"]["const"] == "submit_step")
    assert 5 not in submit["properties"]["step_id"]["enum"] and 4 in submit["properties"]["step_id"]["enum"]


def test_with_no_step_seen_there_is_no_forced_answer_and_the_record_says_why():
    trace = make_trace(40, long=30)
    for step in trace.steps[30:]:
        step.kind = "observation"  # all the bootstrap read shows is environment output
    engine = ScriptedEngine(Script([turn(EVAL, {})]))
    diag = _run(engine, trace, budget="2500", max_turns=1)
    assert diag.error is None and diag.step is None and diag.stop_reason == "no_seen_step"
    assert diag.details["forced_by"] == "max_turns" and "safari_final" not in {r.grammar.name for r in engine.requests}


# ---- 7. the token unit is recorded; a fallback is a warning ---------------------------------------


class _Approx(ScriptedEngine):
    def token_unit(self):
        return "chars/4"


def test_without_exact_token_counts_a_token_budget_is_applied_in_characters_with_a_warning():
    engine = _Approx(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    diag = _run(engine, make_trace(), budget="5000")
    assert (diag.details["token_unit"], diag.details["budget_unit"], diag.details["budget_limit"]) == ("chars/4", "chars", 20000)
    assert any("applied as 20000 characters" in w for w in diag.details["warnings"])


class _FallsBack(ScriptedEngine):
    """Counts exactly until its counting server goes away after the first turn."""

    def token_unit(self):
        return "tokens" if len(self.batches) < 1 else "tokens+chars/4"


def test_a_token_count_that_falls_back_mid_run_is_a_warning_in_the_record():
    engine = _FallsBack(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    diag = _run(engine, make_trace(), budget="20000")
    assert diag.details["budget_unit"] == "tokens"
    assert any("fell back to an estimate (turn 1)" in w for w in diag.details["warnings"])


# ---- 6b. the report shows forced answers and failed turns per method ------------------------------


def test_the_report_counts_forced_answers_and_turn_failures_per_method():
    from localfa.bench.metrics import summarize
    from localfa.bench.report import table_rows
    from localfa.results import ResultRecord

    trace = make_trace()
    forced = _run(ScriptedEngine(_cut_at_turn_2), trace)
    submitted = _run(ScriptedEngine(Script([turn(EVAL, {}), turn(SUBMIT, {})])), make_trace(tid="t2"))
    by_turns = _run(ScriptedEngine(Script([turn(READ, {})], final_step=5)), make_trace(tid="t3"), max_turns=2)
    records = [ResultRecord.from_diagnosis(d, trace) for d in (forced, submitted, by_turns)]
    records[1].trace, records[2].trace = "t2", "t3"
    head, rows = table_rows(summarize(records, n_boot=10))
    row = dict(zip(head, rows[-1]))
    assert (row["forced"], row["turn failures"]) == ("2", "1")


def _cut_turn_2_and_final(req):
    if req.key in ("turn/2", "final"):
        return ('{"reasoning": "cut', "length")  # cut after the retry: TruncatedOutputError
    note = {"faults_identified_so_far": [{"step_id": 3, "reason": "wrong", "evidence": "step 3 content"}]}
    return Script([turn(SEARCH, note)], final_step=5)(req)


def test_a_forced_final_that_cannot_be_produced_answers_from_memory():
    """Issue 53.6: the final cut too: the STM's noted fault, with no call, marked as such."""
    diag = _run(ScriptedEngine(_cut_turn_2_and_final), make_trace())
    assert diag.error is None and diag.stop_reason == "memory" and diag.step == 3
    assert diag.details["forced_by"] == "turn_failure" and diag.details["final_failure"].startswith("TruncatedOutputError")
    assert "answered from memory: the fault its memory notes last" in diag.reasoning


def test_with_nothing_noted_the_answer_from_memory_is_the_last_step_shown():
    def cut(req):
        if req.key in ("turn/2", "final"):
            return ('{"reasoning": "cut', "length")
        return Script([turn({"name": "read", "offset": 4, "limit": 1}, {})])(req)

    diag = _run(ScriptedEngine(cut), make_trace(n=300))
    assert diag.error is None and diag.stop_reason == "memory" and diag.step == 4  # read(offset=4, limit=1) showed step 4 last
    assert "the last step it was shown" in diag.reasoning


def test_the_budget_is_used_to_nine_tenths_before_anything_read_is_summarised():
    """Issue 53.2: while the prompt without its newest result is under 90% of the cap, a result
    that overflows is shortened to the room left; older results are summarised only past that."""
    trace, budget = _dense_trace(n=40), 6000
    reads = [turn({"name": "read", "offset": 36 * i, "limit": 36}, {}) for i in range(8)]  # reads of ~20% of the cap
    engine = _Tokens(Script(reads + [turn(EVAL, {})], final_step=0))
    diag = _run(engine, trace, budget=str(budget), max_turns=10)
    sent = [e for e in diag.transcript if e.get("prompt_tokens")]
    before = [e["prompt_tokens"] for e in sent if e.get("summarised_before") == 0]
    assert diag.error is None and diag.details["summarised_results"] >= 1
    assert max(e["prompt_tokens"] for e in sent) <= budget
    assert max(before) >= 0.9 * budget, (before, budget)
    assert diag.details["shrunk_observations"] >= 1
