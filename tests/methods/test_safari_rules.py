"""SAFARI's mends (issue 10), each checked on the scripted engine: the model's behaviour is the input."""

from __future__ import annotations

import json
import re

import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.scripted import ScriptedEngine
from localfa.grammars.safari import OUTPUT_CHARS_PER_TOKEN, SafariLimits, final_grammar, turn_grammar
from localfa.methods.base import MethodContext
from localfa.methods.budget import TEMPLATE_TOKENS_PER_MESSAGE, BudgetError
from localfa.methods.fencing import fenced_blocks
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.methods.safari.history import History
from localfa.methods.safari.meter import AIM_UNDER
from localfa.traces.lineview import LineView, shown_lines
from localfa.traces.model import Step, Trace
from tests.methods.test_safari_logic import EVAL, READ, SEARCH, SUBMIT, Script, make_trace, observations, run_one, turn

LINE = re.compile(r"^\s*(\d+) \(step (\d+)\)\| ")


def turns_of(engine):
    return [r for r in engine.requests if r.grammar.name == "safari_turn"]


def run_error(trace, budget, engine=None, **options):
    """Run one trace through the runner as a sweep does; return its Diagnosis (maybe an error)."""
    engine = engine or ScriptedEngine(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    method = get_method("safari", min_investigate_turns=0, **options)
    ctx = MethodContext(trace, seed=0, budget=budget)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, method, ctx)]))
    return diag, engine


# ---- 1. no hidden length caps ------------------------------------------------------------------


def _bounds(schema, name="", out=None):
    """(field name, bound) for every maxLength / maxItems in a JSON schema."""
    out = [] if out is None else out
    if isinstance(schema, dict):
        for key in ("maxLength", "maxItems"):
            if key in schema:
                out.append((name, schema[key]))
        for k, v in schema.get("properties", {}).items():
            _bounds(v, k, out)
        if "items" in schema:
            _bounds(schema["items"], name, out)
        for v in schema.get("anyOf", []):
            _bounds(v, name, out)
    return out


def _stated(prompt: str, name: str, bound: int) -> bool:
    return any(f'"{name}"' in line and str(bound) in line for line in prompt.splitlines())


def test_every_bound_the_turn_grammar_enforces_is_stated_in_the_system_prompt():
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    req = turns_of(engine)[0]
    system = req.messages[0]["content"]
    bounds = _bounds(req.grammar.spec)
    names = {n for n, _ in bounds}
    assert {
        "task_goal",
        "final_output",
        "faults_identified_so_far",
        "still_need",
        "next_action",
        "pattern",
        "questions",
        "reasoning",
        "reason",
        "evidence",
    } <= names
    missing = [(n, b) for n, b in bounds if not _stated(system, n, b)]
    assert missing == []
    max_read = next(t for t in req.grammar.spec["properties"]["tool"]["anyOf"] if t["properties"]["name"]["const"] == "read")["properties"][
        "limit"
    ]["maximum"]
    assert f'"limit": 1 to {max_read}' in system


def test_evaluator_and_final_bounds_are_stated_in_their_prompts():
    _, engine = run_one(Script([turn(EVAL, {})] + [turn({"name": "read", "offset": i, "limit": 3}, {}) for i in range(3)]), max_turns=4)
    verdict = next(r for r in engine.requests if r.grammar.name == "safari_verdict")
    assert _bounds(verdict.grammar.spec) == [("feedback", 2000)]
    assert "at most 2000 characters" in verdict.messages[0]["content"]
    final = engine.requests[-1]
    assert final.grammar.name == "safari_final" and _bounds(final.grammar.spec) == [("reasoning", 800)]
    assert "reasoning of at most 800 characters" in final.messages[-1]["content"]


# The paper's own examples (Appendix E/F) must fit the grammar's bounds.
PAPER_QUESTION = (
    "Does the quoted content from step 3 confirm the agent hallucinated the identity of the dinosaur "
    "article as Tyrannosaurus rex without performing any web search, stating 'I know that the only "
    "dinosaur article to ever reach Featured Article status on English Wikipedia is the Tyrannosaurus "
    "rex article'?"
)
PAPER_REASONING = (
    "At step 3, the agent's action was 'go to shelf 1'. The task required 'put a clean bowl in shelf', "
    "meaning the bowl had to be cleaned first at the sinkbasin. The agent picked up the bowl at step 2 "
    "but went directly to the shelf at step 3, skipping the sinkbasin entirely. Steps 1 and 2 were "
    "correct (finding and picking up the bowl). No later step visited the sinkbasin - from step 4 "
    "onwards the agent repeatedly examined the shelf, believing the task complete."
)
PAPER_FINAL_OUTPUT = (
    "The agent's final answer was 'User:Darwin'. The correct answer is likely 'FunkMonk' (the actual "
    "nominator of the Tyrannosaurus rex FA nomination promoted in November 2016). The agent "
    "hallucinated the answer without ever successfully retrieving the information from Wikipedia."
)


def test_the_papers_examples_fit_the_grammar():
    assert len(PAPER_QUESTION) > 250 and len(PAPER_REASONING) > 400 and len(PAPER_FINAL_OUTPUT) > 250
    grammar = turn_grammar(12, 40, 100, SafariLimits())
    out = turn(
        {"name": "evaluate", "questions": [PAPER_QUESTION] * 3, "reasoning": PAPER_REASONING},
        {
            "task_goal": "Find who nominated the only Featured Article about a dinosaur promoted in November 2016",
            "final_output": PAPER_FINAL_OUTPUT,
            "still_need": ["Confirm the agent never actually called search_agent - need to check if there's a search_agent tool call span"],
        },
    )
    assert grammar.parse(json.dumps(out))["tool"]["questions"][0] == PAPER_QUESTION


def test_max_tokens_fits_the_longest_turn_the_grammar_admits():
    limits = SafariLimits()
    longest = turn(
        {"name": "evaluate", "questions": ["q" * limits.question_chars] * limits.max_questions, "reasoning": "r" * limits.reasoning_chars},
        {
            "task_goal": "g" * limits.note_chars,
            "final_output": "f" * limits.note_chars,
            "faults_identified_so_far": [{"step_id": 11, "reason": "r" * limits.reason_chars, "evidence": "e" * limits.evidence_chars}],
            "still_need": ["n" * limits.still_need_chars] * limits.still_need_items,
        },
        action="a" * limits.next_action_chars,
    )
    text = json.dumps(turn_grammar(12, 40, 100, limits).parse(json.dumps(longest)), separators=(",", ":"))
    assert len(text) <= limits.turn_max_tokens() * OUTPUT_CHARS_PER_TOKEN
    final = json.dumps({"reasoning": "r" * limits.submit_reasoning_chars, "step_id": 11}, separators=(",", ":"))
    final_grammar(12, limits).parse(final)
    assert len(final) <= limits.final_max_tokens() * OUTPUT_CHARS_PER_TOKEN


def test_a_long_task_is_shortened_with_a_marker_never_silently():
    trace = make_trace()
    trace.task = "word " * 2000
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace)
    user = turns_of(engine)[0].messages[1]["content"]
    assert re.search(r"\[\.\.\. \d+ chars cut \.\.\.\]", user)


# ---- 2. budgets that are what they say -------------------------------------------------------


def test_without_a_budget_the_window_still_evicts_and_the_record_says_so():
    trace = make_trace(60, long=40)
    engine = ScriptedEngine(
        Script([turn({"name": "read", "offset": 9 * i, "limit": 9}, {}) for i in range(10)] + [turn(EVAL, {}), turn(SUBMIT, {})]),
        max_model_len=7000,
    )
    diag, _ = run_error(trace, None, engine=engine)
    limit = 7000 - 2 * SafariLimits().turn_max_tokens() - 64
    assert diag.error is None
    assert diag.details["budget"] == "window" and diag.details["budget_limit"] == limit
    assert diag.details["evicted_turns"] > 0 and diag.details["trace_fits"] is False
    first = turns_of(engine)[0]
    assert f"capped at {limit} tokens (the model's own context window)" in first.messages[0]["content"]
    assert "OLDEST turns are silently dropped" in first.messages[0]["content"]
    assert "LARGER than your context" in first.messages[1]["content"]
    assert "large contiguous sections" not in first.messages[1]["content"]


def test_the_read_it_all_advice_only_where_nothing_can_be_evicted():
    small = make_trace(6)
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), trace=small)  # no window, no budget
    first = turns_of(engine)[0]
    assert "has been read for you, every line of it" in first.messages[1]["content"]
    assert "silently dropped" not in first.messages[0]["content"]
    diag, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), trace=small, budget="100k")
    assert diag.details["trace_fits"] is True and diag.details["budget"] == "100000"
    user = turns_of(engine)[0].messages[1]["content"]
    assert "The whole run fits in your context and has been read for you" in user
    assert "silently dropped" in turns_of(engine)[0].messages[0]["content"]  # a cap exists: the warning stays


def test_a_token_budget_counts_the_chat_template_per_message():
    h = History(measure=lambda s: len(s.split()), per_message=TEMPLATE_TOKENS_PER_MESSAGE)
    h.add_head("system", "a b c")
    h.add_head("user", "d e")
    h.add_turn("x", "y z", 1)
    assert h.size() == (3 + 8) + (2 + 8) + (1 + 8) + (2 + 8)
    trace = make_trace(40, long=30)
    reads = [turn({"name": "read", "offset": 10 * i, "limit": 5}, {}) for i in range(8)]
    diag, engine = run_one(Script(reads + [turn(EVAL, {}), turn(SUBMIT, {})]), trace=trace, budget="2500")
    assert diag.details["summarised_results"] + diag.details["evicted_turns"] >= 4
    sizes = [sum(engine.count_tokens(m["content"]) + TEMPLATE_TOKENS_PER_MESSAGE for m in req.messages) for req in turns_of(engine)]
    # filled to just under the budget (evictions aim AIM_UNDER below it), never past it
    assert max(sizes) <= 2500 and max(sizes) > 2500 * (1 - 2 * AIM_UNDER)


def test_a_budget_below_the_fixed_head_is_that_traces_error_record():
    diag, engine = run_error(make_trace(40, long=30), "300")
    assert diag.stop_reason == "error" and engine.batches == []
    assert "BudgetError: budget 300 (300 tokens) is smaller than SAFARI's fixed head" in diag.error


def test_scale_on_an_unlabelled_trace_fails_that_trace_only():
    engine = ScriptedEngine(Script([turn(EVAL, {}), turn(dict(SUBMIT, step_id=79), {})]))  # a step the bootstrap read showed
    method = get_method("safari", min_investigate_turns=0)
    labelled = make_trace(80, tid="ok", long=40)
    labelled.labels.mistake_step = 70
    unlabelled = make_trace(12, tid="nolabel")
    unlabelled.labels = None
    jobs = [method_job(engine, method, MethodContext(t, seed=0, budget="scale:2"), key=t.id) for t in (labelled, unlabelled)]
    results = dict(run_jobs(engine, jobs))
    assert results["nolabel"].stop_reason == "error"
    assert "BudgetError: budget scale:2: the trace has no labelled fault step" in results["nolabel"].error
    assert results["ok"].error is None and results["ok"].stop_reason == "submitted"


def test_a_traces_investigation_is_built_only_when_first_advanced():
    counted: list[str] = []
    trace = make_trace(12)
    trace.labels = None
    method = get_method("safari")
    ctx = MethodContext(trace, seed=0, budget="scale:2", count_tokens=lambda s: counted.append(s) or 1)
    program = method.run(ctx)  # a sweep makes every program up front: nothing may happen yet
    assert counted == []
    with pytest.raises(BudgetError, match="no labelled fault step"):
        next(program)


# ---- 3. evicted text can be fetched again ----------------------------------------------------


def test_a_repeat_gets_a_reminder_while_held_and_the_result_once_evicted():
    trace = make_trace(40, long=30)
    search = {"name": "search", "pattern": "step 3 content"}
    script = (
        [turn(search, {}), turn(search, {})]
        + [turn({"name": "read", "offset": 10 * i, "limit": 5}, {}) for i in range(10)]
        + [turn(search, {}), turn(EVAL, {}), turn(SUBMIT, {})]
    )
    diag, engine = run_one(Script(script), trace=trace, budget="2500")
    obs = observations(engine)
    assert "REMINDER" in obs[2] and "at turn 1" in obs[2]  # turn 1's result is still in context
    assert not any(
        'search(pattern="step 3 content") returned:' in m["content"] for m in turns_of(engine)[12].messages[4:-1]
    )  # turn 1's result summarised or evicted by turn 13 (the budget is used up first)
    assert 'search(pattern="step 3 content") returned:' in obs[13] and "shown again" in obs[13]
    assert "REMINDER" not in obs[13]
    assert diag.transcript[12]["refetched"] is True


# ---- 4. evidence that verifies -----------------------------------------------------------------


def test_quotes_with_apostrophes_and_inner_quotes_become_verified_evidence():
    trace = make_trace(6)
    trace.steps[4].content = "The coder said: the list's total is \"8\", so I'll report 4 instead."
    reasoning = "Step 4 wrote 'the list's total is \"8\", so I'll report 4' and then \"a quote that is nowhere\"."
    diag, _ = run_one(Script([turn(EVAL, {}), turn(dict(SUBMIT, reasoning=reasoning), {})]), trace=trace)
    assert diag.evidence == ["the list's total is \"8\", so I'll report 4"]
    assert diag.details["evidence_verbatim"] == [True]


# ---- 5. step ids never confused with line numbers -------------------------------------------


def test_every_line_the_model_sees_shows_its_step():
    trace = make_trace(12, long=40)  # records wrap onto continuation lines
    view = LineView(trace)
    _, engine = run_one(
        Script(
            [
                turn({"name": "read", "offset": 3, "limit": 9}, {}),
                turn({"name": "search", "pattern": "lorem ipsum lorem"}, {}),
                turn(EVAL, {}),
                turn(SUBMIT, {}),
            ]
        ),
        trace=trace,
    )
    shown = []
    for req in turns_of(engine)[:3]:
        block = [text for label, text in fenced_blocks(req.messages[-1]["content"]) if label == "RUN LINES"][-1]
        rows = [ln for ln in block.strip().splitlines() if not ln.startswith("[")]
        assert rows
        for row in rows:
            m = LINE.match(row)
            assert m, row
            shown.append((int(m[1]), int(m[2])))
    assert all(view.step_at_line(line) == step for line, step in shown)
    assert any(view.line_of_step(step) != line for line, step in shown)  # continuation lines included


# ---- 6. a clean no-STM ablation ----------------------------------------------------------------


def test_no_stm_prompts_never_mention_the_memory():
    script = [turn(SEARCH), turn(SEARCH), turn(SUBMIT), turn(EVAL)] + [turn(READ)] * 3
    diag, engine = run_one(Script(script), use_stm=False, max_turns=5, budget="100k")
    assert diag.stop_reason == "forced"
    text = "\n".join(m["content"] for r in engine.requests for m in r.messages).lower()
    for word in ("stm", "short-term", "memory", "past_tool_calls", "past tool calls"):
        assert word not in text, word
    assert diag.details["stm"] is None


def test_with_stm_the_past_tool_calls_ride_inside_the_memory():
    _, engine = run_one(Script([turn(SEARCH, {}), turn(EVAL, {}), turn(SUBMIT, {})]))
    last = turns_of(engine)[2].messages[-1]["content"]
    (stm,) = [text for label, text in fenced_blocks(last) if label == "STM"]
    assert 'past_tool_calls (read-only; do not repeat): read(offset=0, limit=12); search(pattern="step 4")' in stm


# ---- 7. the paper's investigation rules --------------------------------------------------------


def test_evaluate_waits_for_the_minimum_investigating_turns():
    reads = [turn({"name": "read", "offset": i, "limit": 3}, {}) for i in range(3)]
    long = make_trace(300)  # not shown whole by the first read (a run shown whole meets the minimum)
    diag, engine = run_one(Script([turn(EVAL, {})] + reads + [turn(EVAL, {}), turn(SUBMIT, {})]), long, min_investigate_turns=3)
    obs = observations(engine)
    assert "evaluate refused" in obs[1] and "At least 3 turns of read or search" in obs[1]
    assert "average confidence" in obs[5]
    assert diag.details["min_investigate_turns"] == 3 and diag.details["turns_used"] == 6
    assert "at least 3 turns of read or search before your first evaluate" in turns_of(engine)[0].messages[0]["content"]
    assert get_method("safari").describe()["min_investigate_turns"] == 10  # the paper's value by default


def test_the_minimum_leaves_room_for_evaluate_and_submit():
    diag, _ = run_one(Script([turn(READ, {}), turn(EVAL, {}), turn(SUBMIT, {})]), min_investigate_turns=10, max_turns=4)
    assert diag.details["min_investigate_turns"] == 2
    diag, engine = run_one(Script([turn(SUBMIT, {}), turn(EVAL, {}), turn(SUBMIT, {})]), min_investigate_turns=10, max_turns=3)
    assert diag.stop_reason == "submitted" and "average confidence" in observations(engine)[2]


def test_the_system_prompt_carries_the_papers_rules():
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]))
    system = turns_of(engine)[0].messages[0]["content"]
    assert "at least 80 lines per read (at most 200)" in system
    assert "Do NOT scan sequentially" in system
    assert "Had this step been done right, with everything else unchanged, would the run have succeeded?" in system
    assert "stuck in a loop" in system


def test_a_loop_warning_when_the_model_goes_round_in_circles():
    script = [turn(SEARCH, {}), turn(READ, {}), turn(SEARCH, {}), turn(READ, {}), turn(EVAL, {}), turn(SUBMIT, {})]
    diag, engine = run_one(Script(script), trace=make_trace(40))
    obs = observations(engine)
    assert ["STUCK IN A LOOP" in o for o in obs[1:5]] == [False, False, False, True]
    assert diag.transcript[3]["loop_warning"] is True
    _, engine = run_one(Script([turn(SEARCH, {})] * 4 + [turn(EVAL, {}), turn(SUBMIT, {})]))
    assert ["STUCK IN A LOOP" in o for o in observations(engine)[1:5]] == [False, False, True, True]


# ---- 8. one bad turn does not lose the trace -------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "error"), [(('{"next_action": "cut', "length"), "TruncatedOutputError"), ("this is not JSON", "InvalidOutputError")]
)
def test_a_turn_the_engine_cannot_produce_goes_to_forced_finalisation(bad, error):
    def script(req):
        if req.key == "turn/2":
            return bad
        return Script([turn(SEARCH, {"task_goal": "count evens"})], final_step=5)(req)

    diag, engine = run_error(make_trace(), None, engine=ScriptedEngine(script), transcript=True)
    assert diag.error is None and diag.stop_reason == "forced" and diag.step == 5
    assert diag.details["forced_by"] == "turn_failure" and diag.details["turn_failure"]["turn"] == 2
    assert diag.details["turn_failure"]["error"].startswith(error)
    final = engine.requests[-1]
    assert final.grammar.name == "safari_final" and "could not be used" in final.messages[-1]["content"]
    assert '"task_goal": "count evens"' in final.messages[-1]["content"]  # what the STM holds


def test_a_failed_final_answer_is_answered_from_memory_not_an_error_record():
    """Issue 53.6: an invalid final answer no longer turns the trace into an error record; the
    answer comes from what was shown, with no call, and says so."""

    def script(req):
        if req.key == "final":
            return "not JSON"
        return Script([turn(READ, {})])(req)

    diag, _ = run_error(make_trace(), None, engine=ScriptedEngine(script), max_turns=2)
    assert diag.error is None and diag.stop_reason == "memory" and diag.step is not None
    assert diag.details["final_failure"].startswith("InvalidOutputError")


# ---- 9. every claim's verdict returns ---------------------------------------------------------


def test_a_passed_evaluate_also_shows_every_claim():
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})], scores=[90, 60, 95]))
    obs = observations(engine)[1]
    assert [f"Question {i} [{s}/100]" in obs for i, s in ((1, 90), (2, 60), (3, 95))] == [True] * 3


# ---- 11. agent names as the trace spells them ------------------------------------------------


def test_the_user_prompt_keeps_the_traces_agent_spelling():
    steps = [
        Step(index=i, agent=a, role="assistant", content=f"c{i}")
        for i, a in enumerate(["Orchestrator (thought)", "WebSurfer", "Orchestrator (-> WebSurfer)", "WebSurfer"])
    ]
    trace = Trace(id="m1", source="m1.json", format="messages", subset=None, task="t", agents=[], steps=steps)
    _, engine = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {"task_goal": "t"})]), trace=trace)
    assert "Agents, as the run names them: Orchestrator, WebSurfer." in turns_of(engine)[0].messages[1]["content"]


def test_in_window_mode_traces_share_one_system_prompt_for_the_prefix_cache():
    # b's step 4 is never shown, so its submit is refused and it ends forced on a step it saw
    engine = ScriptedEngine(Script([turn(EVAL, {}), turn(SUBMIT, {})], final_step=59), max_model_len=7000)
    method = get_method("safari", min_investigate_turns=0)
    short, long = make_trace(8, tid="a"), make_trace(60, tid="b", long=40)
    long.steps[3].content = "数字 " * 400  # a different characters-per-token ratio
    results = dict(run_jobs(engine, [method_job(engine, method, MethodContext(t, seed=0), key=t.id) for t in (short, long)]))
    assert [results[k].details["budget"] for k in "ab"] == ["window", "window"]
    systems = {r.messages[0]["content"] for r in turns_of(engine)}
    assert len(systems) == 1


def test_a_run_shown_whole_is_shown_in_wide_lines_and_a_navigated_one_keeps_narrow_lines():
    """`whole_line_width`: a run that fits is shown, and then read, in its wide lines (fewer line
    labels to prefill); one that does not fit keeps `line_width` lines to page through."""
    trace = make_trace(12, long=60)  # records of several 200-character lines
    narrow, wide = LineView(trace, width=200), LineView(trace, width=1000)
    assert wide.total_lines < narrow.total_lines
    for whole_width, view in ((1000, wide), (0, narrow)):
        script = Script([turn({"name": "read", "offset": view.total_lines - 1, "limit": 1}, {}), turn(EVAL, {}), turn(SUBMIT, {})])
        diag, engine = run_one(script, trace=trace, budget="100k", whole_line_width=whole_width)
        first, second = turns_of(engine)[:2]
        assert diag.details["trace_fits"] is True and diag.details["line_width"] == view.width
        assert f"printed as {view.total_lines} lines" in first.messages[1]["content"]
        assert [(n, s) for n, s, _ in shown_lines(first.messages[3]["content"])] == [
            (n, view.step_at_line(n)) for n in range(view.total_lines)
        ]
        assert [n for n, _, _ in shown_lines(second.messages[-1]["content"])] == [view.total_lines - 1]  # a later read too
        with pytest.raises(InvalidOutputError):  # offsets are bounded by the lines shown
            first.grammar.parse(json.dumps(turn({"name": "read", "offset": view.total_lines, "limit": 1}, {})))
    diag, _ = run_one(Script([turn(EVAL, {}), turn(SUBMIT, {})]), trace=make_trace(40, long=30), budget="14000c")
    assert diag.details["trace_fits"] is False and diag.details["line_width"] == 200
