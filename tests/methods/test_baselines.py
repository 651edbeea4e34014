"""Baseline logic on the scripted engine: grammars, call order, stopping rules, floors, fitting."""

from __future__ import annotations

import json

import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.scripted import ScriptedEngine
from localfa.methods import baselines
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import Job, run_jobs
from localfa.traces.model import Labels, Step, Trace


def make_trace(speakers, contents=None, tid="t1", label_step=None, label_agent=None, gt="42", task="Add the numbers."):
    contents = contents or [f"message {i} from {a}" for i, a in enumerate(speakers)]
    steps = [Step(index=i, agent=a, role="assistant", content=c) for i, (a, c) in enumerate(zip(speakers, contents))]
    labels = None
    if label_step is not None:
        labels = Labels(mistake_step=label_step, mistake_agent=label_agent or speakers[label_step], fault_steps=[label_step])
    return Trace(id=tid, source=f"{tid}.json", format="messages", subset="sub", task=task, steps=steps, ground_truth=gt, labels=labels)


def run_one(method, trace, engine, seed=0, budget=None, **ctx_kw):
    ctx = MethodContext(trace=trace, seed=seed, budget=budget, **ctx_kw)
    out = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: ctx.diagnosis(method.name, error=e))]))
    assert len(out) == 1
    return out[0][1]


SPEAKERS = ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer", "Orchestrator (thought)", "WebSurfer"]


# ---- all-at-once --------------------------------------------------------------------------------


def test_all_at_once_grammar_is_built_from_the_trace():
    eng = ScriptedEngine([{"agent": "WebSurfer", "step": 3, "reason": "clicked the wrong link"}])
    d = run_one(get_method("all-at-once"), make_trace(SPEAKERS, label_step=3), eng)
    assert (d.step, d.agent, d.reasoning, d.error) == (3, "WebSurfer", "clicked the wrong link", None)
    assert d.usage["calls"] == 1 and len(eng.batches) == 1
    req = eng.requests[0]
    schema = req.grammar.spec
    assert schema["properties"]["agent"]["enum"] == ["human", "Orchestrator", "WebSurfer"]
    assert (schema["properties"]["step"]["minimum"], schema["properties"]["step"]["maximum"]) == (0, 5)
    assert schema["properties"]["reason"]["maxLength"] == 200
    # derive_seed(run seed 0, trace "t1", key "aao"), pinned: changing the derivation would re-seed
    # (and so change) every run ever recorded
    assert req.key == "aao" and req.sampling.seed == 426514790
    # the longest answer the grammar admits, {"agent":"Orchestrator","step":5,"reason":"<200 chars>"},
    # is 245 characters, so at most 245 tokens; the method leaves 260
    assert req.sampling.max_tokens == 260
    # prompt order: system, then the trace, then the question (prefix caching)
    assert req.messages[0]["role"] == "system"
    user = req.messages[1]["content"]
    assert user.index("Add the numbers.") < user.index("[0] human:") < user.index("[5] WebSurfer:") < user.index("Reply as JSON")


def test_all_at_once_rejects_answers_outside_the_trace():
    for bad in ({"agent": "WebSurfer", "step": 6, "reason": ""}, {"agent": "Nobody", "step": 1, "reason": ""}):
        eng = ScriptedEngine(lambda req, bad=bad: bad)
        d = run_one(get_method("all-at-once"), make_trace(SPEAKERS), eng)
        assert d.step is None and "InvalidOutputError" in (d.error or "")
    with pytest.raises(InvalidOutputError):
        ScriptedEngine([{"agent": "WebSurfer", "step": -1, "reason": ""}]).generate(
            [
                MethodContext(make_trace(SPEAKERS)).request(
                    "x",
                    [{"role": "user", "content": "q"}],
                    baselines._agent_step_grammar(["WebSurfer"], list(range(6)), 10),
                    baselines.Sampling(),
                )
            ]
        )


def test_with_ground_truth_option_adds_the_answer():
    t = make_trace(SPEAKERS, gt="FunkMonk")
    answer = {"agent": "WebSurfer", "step": 3, "reason": ""}
    plain, with_g = ScriptedEngine([answer]), ScriptedEngine([answer])
    run_one(get_method("all-at-once"), t, plain)
    run_one(get_method("all-at-once", with_ground_truth=True), t, with_g)
    assert "FunkMonk" not in plain.requests[0].messages[1]["content"]
    assert "FunkMonk" in with_g.requests[0].messages[1]["content"]
    sbs = ScriptedEngine(["yes"])
    run_one(get_method("step-by-step", with_ground_truth=True), t, sbs)
    assert "FunkMonk" in sbs.requests[0].messages[1]["content"]


def test_long_contents_are_cut_to_the_char_budget():
    contents = ["short"] + ["x" * 20000] * 3 + ["tiny", "y" * 50]
    t = make_trace(SPEAKERS, contents)
    eng = ScriptedEngine([{"agent": "WebSurfer", "step": 1, "reason": ""}])
    d = run_one(get_method("all-at-once", max_chars=3000), t, eng)
    user = eng.requests[0].messages[1]["content"]
    # 3000 chars less the 6 headers ("[0] human:" ... 124 chars), 2 newlines and 30 chars of fences
    # each leaves 2684 for content; less "short", "tiny" and the 50 y's, 2625 for the 3 long ones: 875 each
    assert d.details["content_cap"] == 875
    assert user.count(" [... 19125 chars cut ...] ") == 3
    for short in ("\nshort\n", "\ntiny\n", "\n" + "y" * 50 + "\n"):
        assert short in user


def test_prompt_is_shrunk_to_fit_the_context_window():
    t = make_trace(SPEAKERS, ["word " * 3000] * 6)
    eng = ScriptedEngine([{"agent": "WebSurfer", "step": 1, "reason": ""}])
    count = lambda text: len(text.split())  # noqa: E731
    run_one(get_method("all-at-once", max_chars=100000), t, eng, count_tokens=count, max_model_len=2048)
    req = eng.requests[0]
    used = sum(count(m["content"]) + 8 for m in req.messages)
    assert used + req.sampling.max_tokens <= 2048
    # default max_chars: as much as the window holds, then measured and shrunk to fit
    for name, script in (
        ("all-at-once", [{"agent": "WebSurfer", "step": 1, "reason": ""}]),
        ("step-by-step", ["no"] * 6),
        ("binary-search", ["upper", "upper", {"step": 0, "reason": ""}]),
    ):
        eng = ScriptedEngine(script)
        d = run_one(get_method(name), t, eng, count_tokens=count, max_model_len=2048)
        assert d.error is None, d.error
        for req in eng.requests:
            assert sum(count(m["content"]) + 8 for m in req.messages) + req.sampling.max_tokens <= 2048
        assert d.details["char_budget"] > 3000  # more than a blind default would give a 2k window


def test_char_budget_from_the_sweep_budget():
    t = make_trace(SPEAKERS, ["z" * 5000] * 6, label_step=2)
    eng = ScriptedEngine([{"agent": "WebSurfer", "step": 1, "reason": ""}] * 2)
    d = run_one(get_method("all-at-once"), t, eng, budget="1000c")
    assert d.details["char_budget"] == 1000
    d = run_one(get_method("all-at-once"), t, eng, budget="scale:2")  # fault position / 2, in tokens
    # the fault (step 2) starts after two line-view records of 5069 and 5086 chars, i.e. 1268 + 1272
    # tokens at 4 chars a token (no tokenizer here); / 2 = 1270 tokens = 5080 chars
    assert d.error is None and d.details["char_budget"] == 5080
    assert d.details["budget_note"] == "budget scale:2 -> 5080 chars"
    d = run_one(get_method("all-at-once"), make_trace(SPEAKERS), ScriptedEngine([]), budget="scale:2")
    assert d.error and "no labelled fault" in d.error


# ---- step-by-step -------------------------------------------------------------------------------


def test_step_by_step_stops_at_the_first_yes():
    eng = ScriptedEngine(["no", "no", "yes", "no"])
    d = run_one(get_method("step-by-step"), make_trace(SPEAKERS), eng)
    assert d.step == 2 and d.agent == "Orchestrator (-> WebSurfer)"
    assert d.usage["calls"] == 3 and [len(b) for b in eng.batches] == [1, 1, 1]
    assert [r.key for r in eng.requests] == ["sbs/step/0", "sbs/step/1", "sbs/step/2"]
    assert eng.requests[0].grammar.kind == "choice" and eng.requests[0].grammar.spec == ("yes", "no")
    prompts = [r.messages[1]["content"] for r in eng.requests]
    # each prompt shows the log up to the step in question, and the earlier log is its prefix
    assert "[1]" not in prompts[0] and "[2]" in prompts[2] and "[3]" not in prompts[2]
    head = lambda p: p[: p.index("\n\nThe log above")]  # noqa: E731
    assert head(prompts[2]).startswith(head(prompts[1]))


def test_step_by_step_without_a_yes_predicts_the_last_step():
    eng = ScriptedEngine(["no"] * 6)
    d = run_one(get_method("step-by-step"), make_trace(SPEAKERS), eng)
    assert d.step == 5 and d.stop_reason == "no_step_flagged" and d.usage["calls"] == 6


def test_many_traces_share_batches():
    traces = [make_trace(SPEAKERS, tid=f"t{i}") for i in range(4)]
    eng = ScriptedEngine(lambda req: "no")
    m = get_method("step-by-step")
    jobs = []
    for t in traces:
        ctx = MethodContext(trace=t, seed=0)
        jobs.append(Job(t.id, m.run(ctx), lambda e, ctx=ctx: ctx.diagnosis("x", error=e)))
    out = dict(run_jobs(eng, jobs, concurrency=8))
    assert set(out) == {"t0", "t1", "t2", "t3"}
    assert [len(b) for b in eng.batches] == [4] * 6  # one request per trace per round


# ---- binary search ------------------------------------------------------------------------------


def test_binary_search_halves_then_picks():
    speakers = ["A", "B"] * 4  # 8 steps
    eng = ScriptedEngine(["lower", "upper", {"step": 5, "reason": "wrong sum"}])
    d = run_one(get_method("binary-search"), make_trace(speakers), eng)
    # [0,7] -> lower [4,7] -> upper [4,5] -> final pick among 4..5
    assert d.step == 5 and d.agent == "B" and d.reasoning == "wrong sum"
    assert [r.key for r in eng.requests] == ["bs/round/0", "bs/round/1", "bs/final"]
    assert [p["segment"] for p in d.details["path"]] == [[0, 7], [4, 7]]
    final = eng.requests[-1]
    assert (final.grammar.spec["properties"]["step"]["minimum"], final.grammar.spec["properties"]["step"]["maximum"]) == (4, 5)
    first = eng.requests[0].messages[1]["content"]
    assert "upper (steps 0 to 3)" in first and "lower (steps 4 to 7)" in first
    second = eng.requests[1].messages[1]["content"]
    assert "[3]" not in second and "[4]" in second and "[7]" in second


def test_binary_search_ending_on_one_step_needs_no_final_call():
    eng = ScriptedEngine(["lower", "lower"])
    d = run_one(get_method("binary-search"), make_trace(["A", "B", "C"]), eng)
    # [0,2] is 3 steps > final_window=2: one round; "lower" -> [2,2], nothing left to ask
    assert d.step == 2 and d.usage["calls"] == 1


def test_binary_search_final_window_option():
    eng = ScriptedEngine([{"step": 0, "reason": ""}])
    d = run_one(get_method("binary-search", final_window=8), make_trace(["A", "B"] * 4), eng)
    assert d.step == 0 and [r.key for r in eng.requests] == ["bs/final"]


# ---- floors -------------------------------------------------------------------------------------


def test_random_floor_is_seeded_and_makes_no_call():
    t = make_trace(["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"])
    eng = ScriptedEngine([])
    picks = [run_one(get_method("random"), t, eng, seed=s).step for s in range(20)]
    again = [run_one(get_method("random"), t, eng, seed=s).step for s in range(20)]
    assert picks == again and len(set(picks)) > 2 and all(0 <= p < 10 for p in picks)
    assert eng.batches == []


def test_heuristic_floor_rule():
    # human at 0; Orchestrator: steps 1,2,4 (3 steps); WebSurfer: 3,5 (2 steps) -> first Orchestrator step
    eng = ScriptedEngine([])
    d = run_one(get_method("heuristic"), make_trace(SPEAKERS), eng)
    assert d.step == 1 and d.usage["calls"] == 0 and eng.batches == []
    assert baselines.heuristic_step(make_trace(["user", "B", "C", "C", "B"])) == 1  # tie -> spoke first
    assert baselines.heuristic_step(make_trace(["human", "human"])) == 0


def test_unknown_option_is_refused():
    with pytest.raises(ValueError, match="unknown option"):
        get_method("all-at-once", nonsense=1)
    with pytest.raises(ValueError):
        get_method("random", with_ground_truth=True)


def test_shorten_and_water_fill():
    assert baselines.shorten("abc", 10) == "abc"
    cut = baselines.shorten("a" * 100 + "b" * 100, 60)
    assert cut.startswith("a") and cut.endswith("b") and "chars cut" in cut and len(cut) <= 60
    assert baselines.water_fill_cap([10, 10], 100) is None
    # 10 stays whole; the two long ones share 90 - 10 = 80 -> cap 40
    assert baselines.water_fill_cap([10, 1000, 1000], 90) == 40


def test_records_are_json_serialisable():
    eng = ScriptedEngine(["lower", "upper", {"step": 5, "reason": "r"}])
    d = run_one(get_method("binary-search"), make_trace(["A", "B"] * 4), eng)
    json.dumps(d.record())
