"""FALAT's rules, checked exactly on the scripted engine (the real-model runs are elsewhere)."""

from __future__ import annotations

import pytest

from localfa.engine.scripted import ScriptedEngine
from localfa.methods.base import MethodContext
from localfa.methods.falat.candidates import merge_regions
from localfa.methods.falat.ranking import SUSPICION_MAX, rank, suspicion
from localfa.methods.falat.transitions import candidate_pairs, follow_up_source, prune
from localfa.methods.falat.windows import StepSummary, split_windows
from localfa.methods.registry import MethodOptionError, get_method
from localfa.methods.runner import Job, method_job, run_jobs
from localfa.traces.model import Trace
from tests.methods.synthetic import synthetic_trace


def make_trace(n: int = 12, tid: str = "t1", long: int = 0, gt: str | None = "8") -> Trace:
    return synthetic_trace(n, tid, "step {i} says the count is {i} ", long, gt)


class Script:
    """Answers each FALAT grammar from the test's plan.

    flags: step -> (outcome_relevance, prior_inconsistency, execution_inconsistency); unflagged
    steps have no signal. labels: (i, j) -> transition label (default no_influence). verdicts:
    step -> (error_independence, counterfactual_sufficiency) (default both false). research_top:
    the step the re-search ranks first when it is in the window (default: t̂).
    """

    def __init__(
        self, flags=None, labels=None, verdicts=None, research_top=None, significance=None, focus=None, quote="the count is"
    ) -> None:
        self.flags = flags or {}
        self.labels = labels or {}
        self.verdicts = verdicts or {}
        self.research_top = research_top
        self.significance = significance or {}
        self.focus = focus or {}
        self.quote = quote

    def __call__(self, req):
        name = req.grammar.name
        if name == "falat_prior":
            out = {"expected_plan": "count even numbers", "must_do": ["check every address"]}
            if "expected_answer" in req.grammar.spec["properties"]:
                out = {"expected_plan": out["expected_plan"], "expected_answer": "8", "must_do": out["must_do"]}
            return out
        if name == "falat_window":
            props = req.grammar.spec["properties"]["steps"]["properties"]
            steps = {}
            for key, node in props.items():
                i = int(key)
                o, p, e = self.flags.get(i, (False, False, False))
                steps[key] = {
                    "agent": node["properties"]["agent"]["const"],
                    "action": f"a{i}",
                    "decision": f"d{i}",
                    "significance": self.significance.get(i, 1),
                    "outcome_relevance": o,
                    "prior_inconsistency": p,
                    "execution_inconsistency": e,
                }
            ids = [int(k) for k in props]
            focus = next((f for f in self.focus.values() if f in ids), ids[0])
            return {"steps": steps, "stage": {"summary": f"window {ids[0]}", "focus_step": focus}}
        if name == "falat_transition":
            _, _, i, j = req.key.split("/")
            return self.labels.get((int(i), int(j)), "no_influence")
        if name == "falat_verify":
            c = int(req.key.split("/")[-1])
            ei, cs = self.verdicts.get(c, (False, False))
            return {"reasons": f"r{c}", "quote": self.quote, "error_independence": ei, "counterfactual_sufficiency": cs}
        if name == "falat_research":
            ids = [int(k) for k in req.grammar.spec["properties"]["steps"]["properties"]]
            t_hat = int(req.messages[-1]["content"].split("points at step ")[1].split(".")[0])
            top = self.research_top if self.research_top in ids else t_hat
            ranking = [top] + [i for i in ids if i != top]
            return {
                "steps": {
                    str(i): {"for": f"for {i}", "against": f"against {i}", "role": "ROOT_CAUSE" if i == top else "PROPAGATION"} for i in ids
                },
                "ranking": ranking,
            }
        raise AssertionError(f"unexpected grammar {name}")


def run_one(script, trace=None, max_model_len=None, **options):
    trace = trace or make_trace()
    engine = ScriptedEngine(script, max_model_len=max_model_len)
    method = get_method("falat", **options)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=max_model_len)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
    return diag, engine


def batches_of(engine, grammar: str) -> list[list]:
    return [b for b in engine.batches if b and b[0].grammar.name == grammar]


def mid(i: int, o=False, p=False, e=False, sig=1) -> StepSummary:
    return StepSummary(i, "A", "a", "d", sig, o, p, e)


# ---- stage 1: windows, candidates, regions ---------------------------------------------------


def test_split_windows_short_last_window_and_one_step_trace():
    assert [list(w) for w in split_windows(12, 5)] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert [list(w) for w in split_windows(1, 5)] == [[0]]
    assert [list(w) for w in split_windows(10, 5)] == [list(range(5)), list(range(5, 10))]
    with pytest.raises(ValueError):
        split_windows(0, 5)


def test_all_windows_go_out_as_one_batch_sharing_the_prior_prefix():
    diag, engine = run_one(Script(flags={3: (True, False, False)}), make_trace(12))
    (batch,) = batches_of(engine, "falat_window")
    assert len(batch) == 3
    keys = [sorted(int(k) for k in r.grammar.spec["properties"]["steps"]["properties"]) for r in batch]
    assert keys == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert batch[2].grammar.spec["properties"]["stage"]["properties"]["focus_step"]["enum"] == [10, 11]
    prior_block = batch[0].messages[1]["content"].split("You now read one window")[0]
    assert "Expected output (an estimate, not verified): 8" in prior_block
    for r in engine.requests[1:]:  # every later prompt opens with the same system message and prior
        assert r.messages[0] == batch[0].messages[0]
        assert r.messages[1]["content"].startswith(prior_block)
    assert diag.details["windows"] == [[0, 4], [5, 9], [10, 11]] and diag.details["window"] == 5
    assert diag.details["cost"]["windows"]["batches"] == [3]


def test_one_step_trace_runs_end_to_end():
    diag, engine = run_one(Script(), make_trace(1))
    assert diag.error is None and diag.step == 0 and diag.agent == "Planner"
    assert diag.details["windows"] == [[0, 0]]
    assert diag.details["candidate_source"] == "stage_focus" and diag.details["candidates"] == [0]
    assert batches_of(engine, "falat_transition") == []  # one candidate: no pair to type
    assert diag.details["research"]["window"] == [0, 0] and diag.details["research"]["ranking"] == [0]
    assert list(diag.details["cost"]) == ["prior", "windows", "verify", "research"]


def test_merge_regions_across_a_window_boundary():
    assert merge_regions([7, 2, 3, 4, 9, 10]) == [(2, 4), (7, 7), (9, 10)]
    assert merge_regions([]) == []
    flags = {4: (True, False, False), 5: (False, True, False), 8: (False, False, True)}
    diag, _ = run_one(Script(flags=flags), make_trace(12), window=5)
    assert diag.details["candidates"] == [4, 5, 8]
    assert diag.details["regions"] == [[4, 5], [8, 8]]  # 4 and 5 sit in different windows
    assert diag.details["candidate_source"] == "signals"


def test_no_flag_falls_back_to_the_steps_stage_summaries_point_at():
    diag, _ = run_one(Script(focus={0: 2, 1: 7}), make_trace(12))
    assert diag.details["candidate_source"] == "stage_focus"
    assert diag.details["candidates"] == [2, 7, 10]  # the last window points at its first step


def test_step_text_is_clipped_to_the_step_token_cap_in_window_prompts():
    trace = make_trace(6, long=400)  # ~800 words a step; the scripted tokenizer counts words
    diag, engine = run_one(Script(flags={2: (True, True, True)}), trace, step_tokens=60)
    (batch,) = batches_of(engine, "falat_window")
    body = batch[0].messages[1]["content"]
    step0 = body.split("<<<STEP 0>>>")[1].split("<<<END STEP 0>>>")[0]
    assert len(step0.split()) <= 60 and "chars cut" in step0
    assert diag.details["step_token_cap"] == 60
    verify = [r for r in engine.requests if r.grammar.name == "falat_verify"][0]
    assert "chars cut" not in verify.messages[1]["content"]  # stage 3 sees the full text (fits 8192)


# ---- stage 2: pairs and pruning --------------------------------------------------------------


def test_pair_cap_keeps_nearest_pairs_and_records_the_cut():
    kept, cut = candidate_pairs([1, 2, 4, 8], cap=3)
    assert kept == [(1, 2), (2, 4), (1, 4)] and cut == [(4, 8), (2, 8), (1, 8)]
    flags = {i: (True, False, False) for i in (1, 2, 4, 8)}
    diag, engine = run_one(Script(flags=flags), make_trace(10), pair_cap=3)
    (batch,) = batches_of(engine, "falat_transition")
    assert [r.key for r in batch] == ["falat/pair/1/2", "falat/pair/2/4", "falat/pair/1/4"]
    assert diag.details["pairs_cut"] == [[4, 8], [2, 8], [1, 8]]
    # the pair comes last: the shared part (prior, summaries) is identical across the batch
    shared = {r.messages[1]["content"].split("STEP i:")[0] for r in batch}
    assert len(shared) == 1


@pytest.mark.parametrize(
    "label, pruned_step, why",
    [("correction", 2, "corrected"), ("redundancy", 5, "redundant"), ("dead_end", 2, "dead_end"), ("no_influence", 2, "no_influence")],
)
def test_each_pruning_label(label, pruned_step, why):
    result = prune([2, 5], {(2, 5): label}, {})
    assert result.pruned == {pruned_step: why}
    assert result.kept == [s for s in (2, 5) if s != pruned_step]
    spared = prune([2, 5], {(2, 5): label}, {pruned_step: True})  # deviates from the prior on its own
    assert spared.pruned == {} and spared.spared == {pruned_step: why} and spared.kept == [2, 5]


def test_error_shift_endpoints_are_kept_even_when_other_labels_would_prune():
    labels = {(2, 5): "error_shift", (2, 7): "correction", (5, 7): "no_influence"}
    result = prune([2, 5, 7], labels, {})
    assert result.kept == [2, 5, 7] and result.pruned == {}


def test_follow_up_chain_is_traced_back_to_its_source():
    labels = {(2, 5): "follow_up", (5, 8): "follow_up", (2, 8): "no_influence"}
    assert follow_up_source(8, labels) == 2
    result = prune([2, 5, 8], labels, {})
    assert result.kept == [2]
    assert result.sources == {5: 2, 8: 2}
    assert result.pruned == {5: "follow_up carrier of step 2", 8: "follow_up carrier of step 2"}


def test_pruning_order_and_the_all_pruned_fallback():
    result = prune([2, 5, 6], {(2, 5): "correction", (5, 6): "correction", (2, 6): "correction"}, {})
    assert result.pruned == {2: "corrected", 5: "corrected"} and result.kept == [6]
    result = prune([2, 5], {(2, 5): "follow_up"}, {})
    assert result.kept == [2]
    result = prune([3, 5], {(3, 5): "redundancy"}, {})
    assert result.kept == [3]
    all_gone = prune([3, 5], {(3, 5): "redundancy", (3, 4): "correction"}, {})
    assert all_gone.kept == [3, 5] and all_gone.fallback


def test_pruning_runs_on_the_model_labels_end_to_end():
    flags = {i: (True, False, False) for i in (1, 3, 5)}
    labels = {(1, 3): "follow_up", (3, 5): "follow_up", (1, 5): "no_influence"}
    diag, _ = run_one(Script(flags=flags, labels=labels), make_trace(8))
    assert diag.details["refined"] == [1]
    assert diag.details["follow_up_sources"] == {"3": 1, "5": 1}
    assert [t["step"] for t in diag.details["top"]] == [1]


# ---- stage 3: ranking and verification --------------------------------------------------------


def test_suspicion_is_a_bounded_pure_function():
    assert suspicion(mid(0), on_path=False) == 1
    assert suspicion(mid(0, o=True, p=True, e=True, sig=3), on_path=True) == SUSPICION_MAX == 12
    assert suspicion(mid(0, e=True, sig=0), on_path=False) == 3
    assert suspicion(mid(0, p=True, sig=0), on_path=True) == 5
    assert suspicion(mid(0, sig=99), on_path=False) == 3  # clamped to the grammar's bound


def test_rank_orders_by_suspicion_then_earlier_step():
    mids = {1: mid(1, o=True), 4: mid(4, e=True), 6: mid(6, e=True), 9: mid(9, p=True, e=True)}
    ranked = rank([1, 4, 6, 9], mids, {(6, 9): "follow_up"}, {})
    assert [(r.step, r.suspicion) for r in ranked] == [(9, 7), (6, 6), (4, 4), (1, 2)]
    ranked = rank([4, 6], {4: mid(4, e=True), 6: mid(6, e=True)}, {}, {})
    assert [r.step for r in ranked] == [4, 6]


def test_top_three_with_fewer_survivors_verifies_all_of_them():
    flags = {3: (True, False, False), 7: (False, True, False)}
    diag, engine = run_one(Script(flags=flags, labels={(3, 7): "error_shift"}), make_trace(10))
    (batch,) = batches_of(engine, "falat_verify")
    assert sorted(r.key for r in batch) == ["falat/verify/3", "falat/verify/7"]
    assert len(diag.details["top"]) == 2


def test_top_three_of_many_in_one_batch_and_earliest_passing_wins():
    flags = {1: (True, False, False), 3: (False, True, True), 5: (False, False, True), 8: (True, True, True)}
    labels = {p: "error_shift" for p in [(1, 3), (3, 5), (5, 8)]}
    verdicts = {3: (True, True), 8: (True, True), 5: (True, False)}
    script = Script(flags=flags, labels=labels, verdicts=verdicts, significance={8: 3})
    diag, engine = run_one(script, make_trace(10))
    assert [(r["step"], r["suspicion"]) for r in diag.details["ranking"]] == [(8, 10), (3, 9), (5, 6), (1, 4)]
    (batch,) = batches_of(engine, "falat_verify")
    assert [r.key for r in batch] == ["falat/verify/8", "falat/verify/3", "falat/verify/5"]  # ranked order
    assert diag.details["t_hat"] == 3 and diag.details["t_hat_verified"] is True
    assert diag.stop_reason == "verified" and diag.step == 3


def test_none_passing_takes_the_best_ranked_and_says_so():
    flags = {2: (False, False, True), 6: (True, True, True)}
    diag, _ = run_one(Script(flags=flags, labels={(2, 6): "error_shift"}, verdicts={2: (True, False)}), make_trace(10))
    assert diag.details["t_hat"] == 6 and diag.details["t_hat_verified"] is False
    assert diag.stop_reason == "none_verified"


def test_verification_sees_neighbours_in_full_and_the_pair_labels():
    flags = {4: (False, True, True), 6: (True, False, False)}
    diag, engine = run_one(Script(flags=flags, labels={(4, 6): "error_shift"}), make_trace(10, long=300))
    req = next(r for r in engine.requests if r.key == "falat/verify/4")
    body = req.messages[1]["content"]
    assert "<<<STEP 3>>>" in body and "<<<STEP 5>>>" in body and "<<<STEP 6>>>" not in body
    assert "step 4 -> step 6: error_shift" in body
    assert "chars cut" not in body


# ---- stage 4: re-search, expected output, evidence -------------------------------------------


@pytest.mark.parametrize("t_hat, window", [(0, [0, 1, 2]), (1, [0, 1, 2, 3]), (9, [7, 8, 9]), (5, [3, 4, 5, 6, 7])])
def test_research_window_is_two_steps_each_side_clipped_at_the_edges(t_hat, window):
    flags = {t_hat: (True, True, True)}
    diag, engine = run_one(Script(flags=flags), make_trace(10))
    req = next(r for r in engine.requests if r.grammar.name == "falat_research")
    ids = [int(k) for k in req.grammar.spec["properties"]["steps"]["properties"]]
    assert ids == window
    perms = req.grammar.spec["properties"]["ranking"]["enum"]
    assert all(sorted(p) == window for p in perms) and len(perms) == len({tuple(p) for p in perms})
    assert diag.details["research"]["window"] == [window[0], window[-1]]


def test_research_confirms_or_replaces_t_hat():
    flags = {4: (True, True, True)}
    diag, _ = run_one(Script(flags=flags, verdicts={4: (True, True)}), make_trace(10))
    assert diag.step == 4 and diag.details["research_changed"] is False
    diag, _ = run_one(Script(flags=flags, verdicts={4: (True, True)}, research_top=3), make_trace(10))
    assert diag.details["t_hat"] == 4 and diag.step == 3 and diag.agent == "Planner"
    assert diag.details["research_changed"] is True
    assert diag.details["research"]["roles"]["3"]["role"] == "ROOT_CAUSE"


def test_expected_output_comes_from_ground_truth_only_when_asked():
    diag, engine = run_one(Script(), make_trace(4, gt="42"))
    assert diag.details["expected_output_source"] == "prior" and diag.details["prior"]["expected_output"] == "8"
    assert "42" not in engine.requests[0].messages[1]["content"]
    diag, engine = run_one(Script(), make_trace(4, gt="42"), with_ground_truth=True)
    prior_req = engine.requests[0]
    assert "expected_answer" not in prior_req.grammar.spec["properties"]
    assert diag.details["expected_output_source"] == "ground_truth" and diag.details["prior"]["expected_output"] == "42"
    assert "known correct answer" in engine.requests[1].messages[1]["content"]
    diag, _ = run_one(Script(), make_trace(4, gt=None), with_ground_truth=True)  # none in the trace
    assert diag.details["expected_output_source"] == "prior"


def test_evidence_keeps_only_verbatim_quotes():
    flags = {4: (True, True, True)}
    diag, _ = run_one(Script(flags=flags, verdicts={4: (True, True)}), make_trace(10))
    assert diag.evidence == ["the count is"]
    diag, _ = run_one(Script(flags=flags, verdicts={4: (True, True)}, quote="never said"), make_trace(10))
    assert diag.evidence == [] and diag.details["evidence_checked"] == [{"quote": "never said", "verbatim": False}]


def test_cost_is_recorded_per_stage():
    flags = {i: (True, False, False) for i in (1, 2, 5)}
    diag, engine = run_one(Script(flags=flags, labels={(1, 2): "error_shift", (2, 5): "error_shift"}), make_trace(10))
    cost = diag.details["cost"]
    assert [cost[s]["batches"] for s in cost] == [[1], [2], [3], [3], [1]]
    assert sum(c["calls"] for c in cost.values()) == len(engine.requests) == diag.usage["calls"]
    assert sum(c["prompt_tokens"] for c in cost.values()) == diag.usage["prompt_tokens"]


def test_a_truncated_stage_ends_the_trace_with_an_error_record():
    def script(req):
        if req.grammar.name == "falat_window":
            return ('{"steps":', "length")
        return Script()(req)

    engine = ScriptedEngine(script)
    trace = make_trace(6)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method("falat"), ctx)]))
    assert diag.error is not None and "falat_window" in diag.error and diag.step is None


def test_options_are_validated_and_parse_from_a_spec():
    m = get_method("falat:window=3:pair_cap=10")
    assert m.options.window == 3 and m.options.pair_cap == 10
    assert m.describe()["window"] == 3 and m.describe()["step_tokens"] == 400
    for bad in ("falat:window=0", "falat:top_k=0", "falat:pair_cap=0", "falat:nope=1"):
        with pytest.raises(MethodOptionError):
            get_method(bad)


def test_same_seed_same_requests():
    flags = {2: (True, True, False), 5: (False, False, True)}
    _, a = run_one(Script(flags=flags), make_trace(10))
    _, b = run_one(Script(flags=flags), make_trace(10))
    assert [(r.key, r.sampling.seed, r.messages) for r in a.requests] == [(r.key, r.sampling.seed, r.messages) for r in b.requests]
    assert len({r.key for r in a.requests}) == len(a.requests)  # keys unique per trace


def test_host_limits_bound_the_steps_judged_and_are_reported(monkeypatch):
    monkeypatch.setenv("LOCALFA_MAX_STEPS", "7")
    monkeypatch.setenv("LOCALFA_MAX_STEP_CHARS", "200")
    diag, engine = run_one(Script(flags={6: (True, True, True)}), make_trace(12, long=100))
    assert diag.details["windows"] == [[0, 4], [5, 6]]
    assert diag.details["research"]["window"] == [4, 6]  # t̂ + 2 would be 8: past the steps judged
    assert diag.details["limits_hit"]["max_steps"] == {"limit": 7, "trace_steps": 12}
    assert diag.details["limits_hit"]["max_step_chars"]["steps_cut"] == 7
    assert all("<<<STEP 7>>>" not in r.messages[1]["content"] for r in engine.requests)


def test_a_trace_without_steps_is_an_error_record_not_a_crash():
    engine = ScriptedEngine(Script())
    empty = Trace(id="empty", source="empty.json", format="messages", steps=[])
    ok = make_trace(4, tid="ok")
    method = get_method("falat")
    jobs = [method_job(engine, method, MethodContext(t, seed=0, count_tokens=engine.count_tokens)) for t in (empty, ok)]
    results = dict(run_jobs(engine, jobs))
    assert "the trace has no steps" in results["empty"].error and results["empty"].usage["calls"] == 0
    assert results["ok"].error is None  # the sweep goes on
