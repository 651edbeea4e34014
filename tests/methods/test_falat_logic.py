"""FALAT's rules, checked exactly on the scripted engine (the real-model runs are elsewhere)."""

from __future__ import annotations

from unittest import mock

import pytest

from localfa.engine.scripted import ScriptedEngine
from localfa.methods.base import MethodContext
from localfa.methods.falat import method as method_module
from localfa.methods.falat import transitions
from localfa.methods.falat.candidates import merge_regions
from localfa.methods.falat.groups import group_pairs, plan_groups
from localfa.methods.falat.ranking import CARRIER_PENALTY, RatingCalls, calibrate
from localfa.methods.falat.transitions import prune
from localfa.methods.falat.windows import split_windows
from localfa.methods.registry import MethodOptionError, get_method
from localfa.methods.runner import Job, method_job, run_jobs
from localfa.traces.model import Step, Trace
from tests.methods.synthetic import synthetic_trace


def make_trace(n: int = 12, tid: str = "t1", long: int = 0, gt: str | None = "8") -> Trace:
    return synthetic_trace(n, tid, "step {i} says the count is {i} ", long, gt)


class Script:
    """Answers each FALAT grammar from the test's plan.

    flags: step -> (outcome_relevance, prior_inconsistency, execution_inconsistency); unflagged
    steps have no signal. passive: steps the window calls passive. labels: (i, j) -> transition
    label (default no_influence). suspicion: step -> judged 0..10 (default 5). verdicts: step ->
    (error_independence, counterfactual_sufficiency) (default both false). research_top: the step
    the re-search ranks first when the grammar admits it (default: t̂).
    """

    def __init__(
        self,
        flags=None,
        labels=None,
        verdicts=None,
        research_top=None,
        focus=None,
        quote="the count is",
        passive=(),
        suspicion=None,
        answer="8",
    ) -> None:
        self.flags = flags or {}
        self.labels = labels or {}
        self.verdicts = verdicts or {}
        self.research_top = research_top
        self.focus = focus or {}
        self.quote = quote
        self.passive = set(passive)
        self.suspicion = suspicion or {}
        self.answer = answer

    def _stage(self, node):
        ids = [i for i in node["properties"]["focus_step"]["enum"] if i is not None]
        focus = next((f for f in self.focus.values() if f in ids), ids[0] if ids else None)
        return {"summary": f"window at {ids[0] if ids else 'none'}", "focus_step": focus}

    def __call__(self, req):
        name = req.grammar.name
        props = req.grammar.spec["properties"]
        if name == "falat_prior":
            out = {"expected_plan": "count even numbers"}
            if "expected_answer" in props:
                out["expected_answer"] = self.answer
            out["must_do"] = ["check every address"]
            return out
        if name == "falat_window":
            steps = {}
            for key, node in props["steps"]["properties"].items():
                i = int(key)
                o, p, e = self.flags.get(i, (False, False, False))
                fixed = node["properties"]["active"].get("const")
                steps[key] = {
                    "agent": node["properties"]["agent"]["const"],
                    "action": f"a{i}",
                    "decision": f"d{i}",
                    "active": fixed if fixed is not None else i not in self.passive,
                    "outcome_relevance": o,
                    "prior_inconsistency": p,
                    "execution_inconsistency": e,
                }
            out = {"steps": steps}
            if "stage" in props:
                out["stage"] = self._stage(props["stage"])
            return out
        if name == "falat_links":
            links = {}
            for key in props["links"]["properties"]:
                i, j = (int(x) for x in key.split(">"))
                links[key] = {"reason": f"r{i}-{j}", "label": self.labels.get((i, j), "no_influence")}
            return {"links": links}
        if name == "falat_rank":
            return {
                "ratings": {
                    key: {
                        "analysis": f"rated {key}",
                        "incorrect_execution": False,
                        "unsupported_information": False,
                        "affects_later": False,
                        "suspicion": self.suspicion.get(int(key), 5),
                    }
                    for key in props["ratings"]["properties"]
                }
            }
        if name == "falat_verify":
            c = int(req.key.split("/")[-1])
            ei, cs = self.verdicts.get(c, (False, False))
            return {"analysis": f"r{c}", "error_independence": ei, "counterfactual_sufficiency": cs, "quote": self.quote}
        if name == "falat_research":
            ids = [int(k) for k in props["steps"]["properties"]]
            rankable = props["ranking"]["enum"][0]
            t_hat = int(req.messages[-1]["content"].split("The search so far points at step ")[1].split(".")[0])
            top = self.research_top if self.research_top in rankable else t_hat
            ranking = [top] + [i for i in sorted(rankable) if i != top]
            return {
                "steps": {
                    str(i): {"for": f"for {i}", "against": f"against {i}", "role": "ROOT_CAUSE" if i == top else "PROPAGATION"} for i in ids
                },
                "ranking": ranking,
            }
        raise AssertionError(f"unexpected grammar {name}")


def run_one(script, trace=None, max_model_len=8192, **options):
    trace = trace or make_trace()
    engine = ScriptedEngine(script, max_model_len=max_model_len)
    method = get_method("falat", **options)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=max_model_len)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
    return diag, engine


def batches_of(engine, grammar: str) -> list[list]:
    return [b for b in engine.batches if b and b[0].grammar.name == grammar]


def with_steps(trace: Trace, **changes: dict) -> Trace:
    """The trace with some steps changed: `with_steps(t, s0={"role": "human"})`."""
    steps = [Step(**{**s.model_dump(), **changes.get(f"s{s.index}", {})}) for s in trace.steps]
    return trace.model_copy(update={"steps": steps})


# ---- stage 1: windows, candidates, regions ---------------------------------------------------


def test_split_windows_short_last_window_and_one_step_trace():
    assert [list(w) for w in split_windows(12, 5)] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert [list(w) for w in split_windows(1, 5)] == [[0]]
    assert [list(w) for w in split_windows(10, 5)] == [list(range(5)), list(range(5, 10))]
    with pytest.raises(ValueError):
        split_windows(0, 5)


def test_one_call_per_window_on_a_prefix_that_grows_through_the_run():
    """Issue 52: each window's mid level and stage in one call; its prompt shows the run's steps
    up to its own last step, so window w+1 opens with window w's prompt before its question,
    and the links calls open with the last window's."""
    diag, engine = run_one(Script(flags={3: (True, False, False), 7: (False, True, False)}), make_trace(12))
    assert batches_of(engine, "falat_stage") == []
    (window_batch,) = batches_of(engine, "falat_window")
    keys = [sorted(int(k) for k in r.grammar.spec["properties"]["steps"]["properties"]) for r in window_batch]
    assert keys == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert all("stage" in r.grammar.spec["properties"] for r in window_batch)
    bodies = [r.messages[1]["content"] for r in window_batch]
    heads = [b.split("Summarise one window")[0] for b in bodies]
    assert "[4]" in heads[0] and "[5]" not in heads[0] and "[0]" in heads[2] and "[11]" in heads[2]
    assert heads[1].startswith(heads[0].rstrip()) and heads[2].startswith(heads[1].rstrip())
    assert "judge only the window's steps" in bodies[1] and "judge only" not in bodies[0]
    prior_block = bodies[0].split("The run has")[0]
    assert "Expected output (an estimate, not verified): 8" in prior_block
    for r in engine.requests[1:]:
        assert r.messages[0] == window_batch[0].messages[0] and r.messages[1]["content"].startswith(prior_block)
    (links,) = batches_of(engine, "falat_links")
    assert all(r.messages[1]["content"].startswith(heads[2].rstrip()) for r in links)  # the steps read from the cache
    assert diag.details["windows"] == [[0, 4], [5, 9], [10, 11]] and diag.details["window"] == 5
    assert [s["summary"] for s in diag.details["stages"]] == ["window at 0", "window at 5", "window at 10"]
    assert "stages" not in diag.details["cost"] and diag.details["cost"]["windows"]["batches"] == [3]
    assert "window_segments" not in diag.details["bounds_hit"]


def test_a_run_too_long_for_one_prompt_is_cut_into_segments_each_its_own_prefix():
    diag, engine = run_one(Script(flags={3: (True, False, False)}), make_trace(30, long=1200), max_model_len=4096, step_tokens=300)
    (window_batch,) = batches_of(engine, "falat_window")
    segments = diag.details["bounds_hit"]["window_segments"]["segments"]
    assert segments > 1
    starts = [int(r.messages[1]["content"].split("Below are its steps from step ")[1].split(" ")[0]) for r in window_batch]
    assert starts[0] == 0 and len(set(starts)) == segments and starts == sorted(starts)
    for w, start in enumerate(starts):
        assert start <= 5 * w and (start == 5 * w or starts[w - 1] == start)  # a segment starts at a window


def test_one_step_trace_runs_end_to_end():
    diag, engine = run_one(Script(), make_trace(1))
    assert diag.error is None and diag.step == 0 and diag.agent == "Planner"
    assert diag.details["windows"] == [[0, 0]]
    assert diag.details["candidate_source"] == "stage_focus" and diag.details["candidates"] == [0]
    assert batches_of(engine, "falat_transition") == [] and batches_of(engine, "falat_stage") == []
    assert diag.details["research"]["window"] == [0, 0] and diag.details["research"]["ranking"] == [0]
    assert list(diag.details["cost"]) == ["prior", "windows", "verify", "research"]


def test_merge_regions_across_a_window_boundary():
    assert merge_regions([7, 2, 3, 4, 9, 10]) == [(2, 4), (7, 7), (9, 10)]
    assert merge_regions([]) == []
    flags = {4: (True, False, False), 5: (False, True, False), 8: (False, False, True)}
    diag, _ = run_one(Script(flags=flags), make_trace(12), window=5)
    assert diag.details["candidates"] == [4, 5, 8]
    assert diag.details["regions"] == [{"steps": [4, 5], "crosses_window": True}, {"steps": [8, 8], "crosses_window": False}]
    assert diag.details["candidate_source"] == "signals"


def test_a_region_across_a_window_boundary_is_verified_as_one_neighbourhood():
    flags = {i: (True, True, False) for i in (3, 4, 5, 6)}
    labels = {(3, 4): "error_shift", (5, 6): "error_shift", (4, 5): "error_shift"}
    diag, engine = run_one(Script(flags=flags, labels=labels, suspicion={4: 9, 8: 9}), make_trace(12))
    req = next(r for r in engine.requests if r.key == "falat/verify/4")
    body = req.messages[1]["content"]
    assert all(f"<<<STEP {i}>>>" in body for i in (3, 4, 5, 6)) and "Its neighbours are steps 3 to 6" in body
    assert next(t for t in diag.details["top"] if t["step"] == 4)["span"] == [3, 6]
    shared = next(r for r in engine.requests if r.grammar.name == "falat_links").messages[1]["content"]
    assert "region 3-6 (spans a window boundary" in shared
    # a region inside one window keeps the paper's i-1 .. i+1
    diag, engine = run_one(Script(flags={1: (True, True, False), 2: (True, True, False)}), make_trace(12))
    assert {t["step"]: t["span"] for t in diag.details["top"]} == {1: [0, 2], 2: [1, 3]}


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
    assert diag.details["bounds_hit"]["step_tokens"] == {"limit": 60, "steps_cut": [0, 1, 2, 3, 4, 5]}
    verify = [r for r in engine.requests if r.grammar.name == "falat_verify"][0]
    assert "chars cut" not in verify.messages[1]["content"]  # stage 3 sees the full text (fits 8192)


# ---- active steps only ------------------------------------------------------------------------


def test_a_passive_step_is_never_a_candidate_nor_answered():
    trace = with_steps(make_trace(8), s0={"role": "human", "agent": "human"}, s3={"kind": "observation"})
    flags = {0: (True, True, True), 3: (True, True, True), 5: (True, True, True), 2: (True, False, False)}
    script = Script(flags=flags, passive=[5], research_top=3, focus={0: 0}, labels={(2, 4): "error_shift", (2, 5): "error_shift"})
    diag, engine = run_one(script, trace)
    assert diag.details["passive"] == {  # by reason, each written once (the record stays small)
        "human turn: the task or a person's message, not an agent's act": [0],
        "observation: environment or tool output, no agent acted": [3],
        "its window judged it passive (only forwards earlier information): kept answerable, ranked lower": [5],
    }
    assert diag.details["candidates"] == [2, 5]  # a judged-passive step stays a candidate (issue 34)
    # 2: 2·5 + a path; 5: 2·5 + two inconsistencies, less the passive penalty
    assert {r["step"]: r["score"] for r in diag.details["ranking"]} == {2: 11, 5: 10}
    window0 = batches_of(engine, "falat_window")[0][0]
    steps = window0.grammar.spec["properties"]["steps"]["properties"]
    assert steps["0"]["properties"]["active"] == {"const": False} and steps["3"]["properties"]["active"] == {"const": False}
    assert steps["2"]["properties"]["active"] == {"type": "boolean"}
    assert "Steps 0, 3 are not an agent's own act" in window0.messages[1]["content"]
    research = next(r for r in engine.requests if r.grammar.name == "falat_research")
    assert {i for p in research.grammar.spec["properties"]["ranking"]["enum"] for i in p} == {1, 2, 4}  # 0 human, 3 observation
    assert diag.step == 2 and diag.details["research"]["ranking"][0] == 2


def test_no_passive_step_is_answered_even_when_only_passive_steps_are_flagged():
    trace = with_steps(make_trace(4), s0={"role": "human", "agent": "human"}, s1={"kind": "observation"})
    diag, engine = run_one(Script(flags={0: (True, True, True), 1: (True, True, True)}, focus={0: 0}), trace)
    assert 0 not in diag.details["candidates"] and 1 not in diag.details["candidates"]
    assert diag.step in (2, 3)
    (stage,) = [r for r in engine.requests if r.grammar.name == "falat_window"]
    assert stage.grammar.spec["properties"]["stage"]["properties"]["focus_step"]["enum"] == [2, 3]


# ---- stage 2: pairs and pruning --------------------------------------------------------------


def test_groups_share_one_prefix_and_each_candidate_reaches_its_next_quota():
    assert plan_groups([1, 2, 4, 8, 9, 11], group_size=2, quota=2) == [((1, 2), (1, 2, 4, 8)), ((4, 8), (4, 8, 9, 11)), ((9, 11), (9, 11))]
    assert group_pairs((4, 8), [1, 2, 4, 8, 9, 11], 2) == [(4, 8), (4, 9), (8, 9), (8, 11)]
    flags = {i: (True, False, False) for i in (1, 2, 4, 6, 7)}
    shifts = {(1, 2): "error_shift", (2, 4): "error_shift", (4, 6): "error_shift", (6, 7): "error_shift"}
    diag, engine = run_one(Script(flags=flags, labels=shifts), make_trace(9), pair_quota=2, group_size=2)
    (links,) = batches_of(engine, "falat_links")
    (rank,) = batches_of(engine, "falat_rank")
    assert [r.key for r in links] == ["falat/links/1", "falat/links/4", "falat/links/7"][: len(links)]
    for lk in links:  # the rating of a group reads the links call's prompt up to its question
        rk = next(r for r in rank if r.key == lk.key.replace("links", "rank"))
        head = lk.messages[1]["content"].split("Now say how each listed pair")[0]
        assert rk.messages[1]["content"].startswith(head)
    first = links[0].grammar.spec["properties"]["links"]["properties"]
    assert list(first) == ["1>2", "1>4", "2>4", "2>6"]
    # the whole run fits: every group opens with the last window's prefix (the run's steps, cached)
    heads = {lk.messages[1]["content"].split("Now say how each listed pair")[0] for lk in links}
    assert len(heads) == 1 and all(f"<<<STEP {i}>>>" in next(iter(heads)) for i in range(9))
    assert [r.key for r in rank] == ["falat/rank/1", "falat/rank/4", "falat/rank/7"]
    assert diag.details["groups"] == 3 and diag.details["pair_counts"] == {"error_shift": 4, "no_influence": 3}
    # steps the windows showed cut shorter than a group shows them: the group shows its own view
    _, engine = run_one(Script(flags=flags, labels=shifts), make_trace(9, long=600), pair_quota=2, group_size=2, step_tokens=64)
    body = batches_of(engine, "falat_links")[0][0].messages[1]["content"]
    assert all(f"<<<STEP {i}>>>" in body.split("SUSPECT STEPS' OWN TEXT")[1] for i in (1, 2, 4, 6)) and "<<<STEP 7>>>" not in body


def test_ratings_from_different_calls_are_put_on_the_anchors_scale():
    """Issue 52: each rating call also rates the anchor (the first refined candidate); a call that
    rated it 2 points lower than the anchor's own call had its members shifted 2 points up."""
    flags = {i: (True, False, False) for i in (1, 2, 4, 6, 7)}
    shifts = {(1, 2): "error_shift", (2, 4): "error_shift", (4, 6): "error_shift", (6, 7): "error_shift"}
    _, engine = run_one(Script(flags=flags, labels=shifts), make_trace(9), pair_quota=2, group_size=2)
    (rank,) = batches_of(engine, "falat_rank")
    rated = [sorted(int(k) for k in r.grammar.spec["properties"]["ratings"]["properties"]) for r in rank]
    assert rated == [[1, 2], [1, 4, 6], [1, 7]]
    assert "reference step" in rank[1].messages[1]["content"] and "reference step" not in rank[0].messages[1]["content"]
    calls = RatingCalls(rank, [[1, 2], [4, 6], [7]], anchor=1)

    def answer(scores):
        return {
            str(c): {"analysis": "", "incorrect_execution": False, "unsupported_information": False, "affects_later": False, "suspicion": v}
            for c, v in scores.items()
        }

    got = calibrate(calls, [answer({1: 6, 2: 5}), answer({1: 4, 4: 7, 6: 9}), answer({1: 6, 7: 3})])
    assert {c: r.suspicion for c, r in got.items()} == {1: 6, 2: 5, 4: 9, 6: 10, 7: 3}  # 9 + 2 clamped to the scale
    one = RatingCalls(rank[:1], [[1, 2]], anchor=None)
    assert {c: r.suspicion for c, r in calibrate(one, [answer({1: 6, 2: 5})]).items()} == {1: 6, 2: 5}


def test_a_fifty_candidate_trace_costs_calls_linear_in_its_candidates():
    flags = {i: (True, False, False) for i in range(50)}
    diag, engine = run_one(Script(flags=flags), make_trace(50), max_model_len=32768)
    assert diag.details["pair_quota"] == 3 and len(diag.details["candidates"]) == 50
    (batch,) = batches_of(engine, "falat_links")
    assert len(batch) == 5  # groups of 12, not one call per pair (was 97 calls for 97 pairs)
    typed = {tuple(int(x) for x in k.split(">")) for r in batch for k in r.grammar.spec["properties"]["links"]["properties"]}
    assert typed == {(i, j) for i in range(50) for j in range(i + 1, min(50, i + 4))}
    assert diag.details["pairs_untyped"] == 50 * 49 // 2 - len(typed)
    assert diag.details["bounds_hit"]["pair_quota"] == {"quota": 3, "pairs_untyped": 1225 - 144, "candidates_with_untyped": 50}
    assert "pairs_cut" not in diag.details  # counts, not every untyped pair


def test_no_influence_and_dead_end_never_prune_a_candidate_with_untyped_links():
    for label in ("no_influence", "dead_end"):
        result = prune([1, 2, 3], {(1, 2): label, (2, 3): label}, {}, untyped={1})
        assert 1 in result.kept and result.held_by_unknown == {1: label}
        assert result.pruned == {2: label}
    flags = {i: (True, False, False) for i in (1, 2, 3)}
    diag, _ = run_one(Script(flags=flags), make_trace(6), pair_quota=1)
    assert diag.details["held_by_unknown"] == {"1": "no_influence"} and diag.details["pruned"] == {"2": "no_influence"}
    assert diag.details["refined"] == [1, 3]


@pytest.mark.parametrize(
    "label, pruned_step, why",
    [("correction", 2, "corrected"), ("redundancy", 5, "redundant"), ("dead_end", 2, "dead_end"), ("no_influence", 2, "no_influence")],
)
def test_each_pruning_label(label, pruned_step, why):
    result = prune([2, 5], {(2, 5): label}, {})
    assert result.pruned == {pruned_step: why}
    assert result.kept == [s for s in (2, 5) if s != pruned_step]
    spared = prune([2, 5], {(2, 5): label}, {pruned_step: True})  # an inconsistency of its own
    assert spared.pruned == {} and spared.spared == {pruned_step: why} and spared.kept == [2, 5]


def test_error_shift_endpoints_are_kept_even_when_other_labels_would_prune():
    labels = {(2, 5): "error_shift", (2, 7): "correction", (5, 7): "no_influence"}
    result = prune([2, 5, 7], labels, {})
    assert result.kept == [2, 5, 7] and result.pruned == {}


def test_follow_up_from_a_clean_step_marks_no_carrier():
    # the case: step 0 (the task message) has no inconsistency of its own, step 5 does
    assert prune([0, 5], {(0, 5): "follow_up"}, {5: True}).kept == [0, 5]
    assert prune([0, 5], {(0, 5): "follow_up"}, {}).kept == [0, 5]


def test_follow_up_from_a_suspect_step_prunes_its_carrier():
    result = prune([2, 5], {(2, 5): "follow_up"}, {2: True})
    assert result.kept == [2] and result.sources == {5: 2} and result.pruned == {5: "follow_up carrier of step 2"}
    # a carrier with an inconsistency of its own is not pruned (the paper's exception, issue 52):
    # it is kept, recorded as spared and with its source (ranked with a penalty)
    own = prune([2, 5], {(2, 5): "follow_up"}, {2: True, 5: True})
    assert own.kept == [2, 5] and own.spared == {5: "follow_up carrier of step 2"} and own.sources == {5: 2} and own.pruned == {}
    # the source of an error_shift is suspect too
    shifted = prune([1, 2, 6], {(1, 2): "error_shift", (1, 6): "follow_up", (2, 6): "no_influence"}, {})
    assert shifted.sources == {6: 1} and shifted.kept == [1, 2]


def test_an_early_false_flag_does_not_prune_the_fault_it_seems_to_carry():
    """algorithm-generated/83's case (issue 52): a false flag at step 5, the fault at 8 flagged
    too, 5 -> 8 follow_up. The fault is kept as an inconsistent carrier, ranked with a penalty,
    and verification decides; with the exception off (the mutant) it is pruned and lost."""
    script = Script(
        flags={5: (True, True, False), 8: (True, True, True)},
        labels={(5, 8): "follow_up"},
        verdicts={8: (True, True)},
        suspicion={5: 7, 8: 9},
    )
    diag, _ = run_one(script, make_trace(12))
    assert diag.details["refined"] == [5, 8] and diag.details["spared_by_inconsistency"] == {"8": "follow_up carrier of step 5"}
    ranked = {r["step"]: r for r in diag.details["ranking"]}
    assert ranked[8]["score"] == 2 * 9 + len(ranked[8]["signals"]) - CARRIER_PENALTY  # less the carrier's penalty
    assert ranked[5]["score"] == 2 * 7 + len(ranked[5]["signals"])
    assert diag.step == 8
    with mock.patch.object(transitions, "CARRIER_EXCEPTION", False):
        lost, _ = run_one(script, make_trace(12))
    assert lost.details["pruned"] == {"8": "follow_up carrier of step 5"} and lost.step != 8


def test_the_early_false_flag_mutant_loses_a_fault_the_exception_keeps():
    """The mutant's injection (a false flag on the candidate before each inconsistent one, linked
    follow_up to it) costs nothing with the exception on, and prunes the fault with it off."""
    from localfa.methods.falat.mutants import _early_false_flag

    script = Script(flags={3: (True, False, False), 8: (True, True, True)}, verdicts={8: (True, True)}, suspicion={3: 4, 8: 9})
    for exception, found in ((True, True), (False, False)):
        with mock.patch.object(method_module, "prune", _early_false_flag(exception)):
            diag, _ = run_one(script, make_trace(12))
        assert (diag.step == 8) is found, (exception, diag.details["pruned"])


def test_follow_up_chains_are_traced_transitively_to_their_source():
    labels = {(2, 5): "follow_up", (5, 8): "follow_up", (8, 11): "follow_up", (2, 8): "no_influence"}
    # 5 carries 2's error, so 5 is corrupted for the next hop: 8 and 11 are carriers of 2 too
    result = prune([2, 5, 8, 11], labels, {2: True})
    assert result.kept == [2] and result.sources == {5: 2, 8: 2, 11: 2}
    # a chain broken by a clean step marks nothing after it
    assert prune([2, 5, 8], {(2, 5): "no_influence", (5, 8): "follow_up"}, {2: True}).sources == {}
    # error_shift endpoints stay whatever else holds
    chain = prune([1, 3, 5], {(1, 3): "follow_up", (3, 5): "error_shift", (1, 5): "follow_up"}, {1: True})
    assert chain.kept == [1, 3, 5]


def test_pruning_order_and_the_all_pruned_fallback():
    result = prune([2, 5, 6], {(2, 5): "correction", (5, 6): "correction", (2, 6): "correction"}, {})
    assert result.pruned == {2: "corrected", 5: "corrected"} and result.kept == [6]
    result = prune([3, 5], {(3, 5): "redundancy"}, {})
    assert result.kept == [3]
    all_gone = prune([3, 5], {(3, 5): "redundancy", (3, 4): "correction"}, {})
    assert all_gone.kept == [3, 5] and all_gone.fallback


def test_pruning_runs_on_the_model_labels_end_to_end():
    flags = {1: (True, True, False), 3: (True, False, False), 5: (True, False, False)}
    labels = {(1, 3): "follow_up", (1, 5): "follow_up", (3, 5): "follow_up"}
    diag, _ = run_one(Script(flags=flags, labels=labels), make_trace(8))
    assert diag.details["refined"] == [1]
    assert diag.details["follow_up_sources"] == {"3": 1, "5": 1}
    assert [t["step"] for t in diag.details["top"]] == [1]
    assert {(p["i"], p["j"]): p["reason"] for p in diag.details["pairs"]}[(1, 3)] == "r1-3"


# ---- reason first, low temperature -------------------------------------------------------------


def test_labels_and_verdicts_reason_first_at_the_judge_temperature():
    flags = {i: (True, False, False) for i in (2, 4, 6)}
    diag, engine = run_one(Script(flags=flags, labels={(2, 4): "error_shift", (4, 6): "error_shift"}), make_trace(8))
    by_grammar = {r.grammar.name: r for r in engine.requests}
    links = by_grammar["falat_links"].grammar.spec["properties"]["links"]["properties"]
    assert all(list(node["properties"]) == ["reason", "label"] for node in links.values())
    assert list(by_grammar["falat_verify"].grammar.spec["properties"]) == [
        "analysis",
        "error_independence",
        "counterfactual_sufficiency",
        "quote",
    ]
    ratings = by_grammar["falat_rank"].grammar.spec["properties"]["ratings"]["properties"]
    assert all(list(node["properties"])[0] == "analysis" for node in ratings.values())
    temps = {name: r.sampling.temperature for name, r in by_grammar.items()}
    assert temps == {  # every call that decides which steps stay in the search is a judge's (issue 34)
        "falat_prior": 0.7,
        "falat_window": 0.2,
        "falat_links": 0.2,
        "falat_rank": 0.2,
        "falat_verify": 0.2,
        "falat_research": 0.2,
    }
    _, engine = run_one(Script(flags=flags), make_trace(8), judge_temperature=0.0)
    assert {r.sampling.temperature for r in engine.requests if r.grammar.name == "falat_verify"} == {0.0}


# ---- stage 3: judged ranking and verification ---------------------------------------------------


def test_the_judged_ranking_leads_and_ties_go_to_the_earlier_step():
    flags = {1: (True, False, False), 3: (True, False, True), 5: (True, False, False), 8: (True, False, False)}
    labels = {p: "error_shift" for p in [(1, 3), (3, 5), (5, 8)]}
    script = Script(flags=flags, labels=labels, suspicion={1: 2, 3: 6, 5: 7, 8: 7}, verdicts={3: (True, True), 5: (True, True)})
    diag, engine = run_one(script, make_trace(10))
    ((req,),) = batches_of(engine, "falat_rank")  # one group: one call rates all four
    assert list(req.grammar.spec["properties"]["ratings"]["properties"]) == ["1", "3", "5", "8"]
    # score = 2·suspicion + signals: 5 has a path (14+1), 3 an execution inconsistency and a path
    # (12+2), 8 none (14), 1 a path (4+1); 3 and 8 tie and the earlier goes first
    assert [(r["step"], r["score"]) for r in diag.details["ranking"]] == [(5, 15), (3, 14), (8, 14), (1, 5)]
    assert diag.details["ranking"][0]["signals"] == ["affects_later"] and diag.details["ranking"][0]["analysis"] == "rated 5"
    assert diag.details["t_hat"] == 3 and diag.step == 3  # the earliest passing of the top 3
    assert diag.details["bounds_hit"]["top_k"] == {"limit": 3, "not_verified": 1}
    flags = {2: (True, False, False), 6: (True, False, True)}
    even = run_one(Script(flags=flags, labels={(2, 6): "error_shift"}, suspicion={2: 4, 6: 4}), make_trace(8))[0]
    assert [(r["step"], r["score"]) for r in even.details["ranking"]] == [(2, 9), (6, 9)]


def test_a_single_refined_candidate_needs_no_ranking_call():
    diag, engine = run_one(Script(flags={3: (True, True, True)}), make_trace(8))
    assert batches_of(engine, "falat_rank") == [] and diag.details["ranking"][0]["suspicion"] is None


def test_none_passing_takes_the_best_ranked_and_says_so():
    flags = {2: (False, False, True), 6: (True, True, True)}
    script = Script(flags=flags, labels={(2, 6): "error_shift"}, verdicts={2: (True, False)}, suspicion={2: 3, 6: 8})
    diag, _ = run_one(script, make_trace(10))
    assert diag.details["t_hat"] == 6 and diag.details["t_hat_verified"] is False
    assert diag.stop_reason == "none_verified"


def test_verification_sees_neighbours_in_full_and_the_pair_labels():
    flags = {1: (True, False, False), 6: (False, True, True)}
    diag, engine = run_one(Script(flags=flags, labels={(1, 6): "error_shift"}, suspicion={1: 1, 6: 9}), make_trace(10, long=300), top_k=1)
    req = next(r for r in engine.requests if r.key == "falat/verify/6")
    body = req.messages[1]["content"]
    assert all(f"<<<STEP {i}>>>" in body for i in (5, 6, 7)) and "Its neighbours are steps 5 to 7" in body
    # the linked step further back than i-2, in full, and the relation with its reason (issue 34, point 3)
    assert "<<<STEP 1>>>" in body and "link it to are also above: 1" in body
    assert "step 1 -> step 6: error_shift (r1-6)" in body
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


def test_research_confirms_t_hat_or_replaces_it_by_a_neighbour_that_passes_its_own_check():
    flags = {4: (True, True, True)}
    diag, engine = run_one(Script(flags=flags, verdicts={4: (True, True)}), make_trace(10))
    assert diag.step == 4 and diag.details["research_changed"] is False and diag.details["research_not_taken"] is None
    assert "confirm" not in diag.details["cost"] and diag.details["research_confirmation"] is None
    # t̂ = 4 failed verification; the re-search names 3, never checked: it is checked, and replaces t̂ only if it passes
    diag, engine = run_one(Script(flags=flags, research_top=3, verdicts={3: (True, True)}), make_trace(10))
    assert diag.details["t_hat"] == 4 and not diag.details["t_hat_verified"] and diag.step == 3 and diag.agent == "Planner"
    assert diag.details["research_changed"] is True and diag.details["research_confirmation"]["passed"] is True
    assert diag.details["research"]["roles"]["3"]["role"] == "ROOT_CAUSE" and diag.stop_reason == "verified"
    confirm = [r for r in engine.requests if r.key == "falat/verify/3"]
    assert len(confirm) == 1 and "SUSPECT: step 3" in confirm[0].messages[1]["content"]
    diag, _ = run_one(Script(flags=flags, research_top=3), make_trace(10))  # 3 fails its check too: t̂ stands
    assert diag.step == 4 and diag.details["research_not_taken"] == 3 and diag.details["research_confirmation"]["passed"] is False
    # a verified t̂ yields to an earlier neighbour that passes (the earliest passing step), never to a later one
    diag, _ = run_one(Script(flags=flags, verdicts={3: (True, True), 4: (True, True)}, research_top=3), make_trace(10))
    assert diag.step == 3 and diag.details["t_hat"] == 4 and diag.details["research_changed"] is True
    diag, engine = run_one(Script(flags=flags, verdicts={4: (True, True), 5: (True, True)}, research_top=5), make_trace(10))
    assert diag.step == 4 and diag.details["research_not_taken"] == 5 and diag.details["research_confirmation"] is None
    assert not [r for r in engine.requests if r.key == "falat/verify/5"]  # it could not win: not checked
    diag, _ = run_one(Script(flags=flags, verdicts={4: (True, True)}, research_top=3), make_trace(10))
    assert diag.step == 4 and diag.details["research_not_taken"] == 3 and diag.details["research_changed"] is False


def test_with_nothing_verified_the_research_picks_among_the_top_k_and_a_failed_one_is_not_checked_again():
    flags = {3: (True, True, True), 4: (True, True, True)}
    script = Script(flags=flags, suspicion={3: 5, 4: 9}, research_top=3)
    diag, engine = run_one(script, make_trace(10))
    assert diag.details["t_hat"] == 4 and not diag.details["t_hat_verified"]
    assert diag.step == 3 and diag.details["research_confirmation"] is None and diag.stop_reason == "none_verified"
    assert [r.key for r in engine.requests].count("falat/verify/3") == 1


@pytest.mark.parametrize(
    "t_hat, proposed, verdicts, confirmation, expected",
    [
        (4, 4, {4: True}, None, (4, None)),
        (4, 3, {4: True}, None, (4, 3)),  # not checked (the caller had no call to make)
        (4, 3, {4: True}, False, (4, 3)),
        (4, 3, {4: True}, True, (3, None)),
        (4, 5, {4: True, 5: True}, None, (4, 5)),  # later passing: temporal precedence keeps t̂
        (4, 3, {4: False}, True, (3, None)),
        (4, 3, {4: False}, False, (4, 3)),
        (4, 3, {4: False, 3: False}, None, (3, None)),  # both failed, the re-search breaks the tie among the top k
        (4, 3, {4: True, 3: False}, None, (4, 3)),
    ],
)
def test_settle_takes_a_checked_neighbour_by_the_verifications_rule(t_hat, proposed, verdicts, confirmation, expected):
    from localfa.methods.falat.method import settle
    from localfa.methods.falat.verify import Verdict

    checked = [Verdict(s, "", "", ok, ok) for s, ok in verdicts.items()]
    conf = None if confirmation is None else Verdict(proposed, "", "", confirmation, confirmation)
    assert settle(t_hat, proposed, checked, conf) == expected


def test_expected_output_comes_from_ground_truth_only_when_asked():
    diag, engine = run_one(Script(), make_trace(4, gt="42"))
    assert diag.details["expected_output_source"] == "prior" and diag.details["prior"]["expected_output"] == "8"
    assert "42" not in engine.requests[0].messages[1]["content"]
    assert engine.requests[0].grammar.spec["properties"]["expected_answer"]["maxLength"] == 600  # room for a real answer
    assert "at most 600 characters" in engine.requests[0].messages[1]["content"]
    diag, engine = run_one(Script(), make_trace(4, gt="42"), with_ground_truth=True)
    prior_req = engine.requests[0]
    assert "expected_answer" not in prior_req.grammar.spec["properties"]
    assert diag.details["expected_output_source"] == "ground_truth" and diag.details["prior"]["expected_output"] == "42"
    assert "known correct answer" in engine.requests[1].messages[1]["content"]
    diag, _ = run_one(Script(), make_trace(4, gt=None), with_ground_truth=True)  # none in the trace
    assert diag.details["expected_output_source"] == "prior"


def test_an_expected_output_equal_to_the_wrong_one_is_flagged():
    flags = {2: (True, True, True)}
    diag, engine = run_one(Script(flags=flags, answer=" 4. "), make_trace(6))  # the run's final output is "4"
    assert diag.details["prior"]["expected_equals_wrong"] is True
    verify = next(r for r in engine.requests if r.grammar.name == "falat_verify")
    assert "says the same as what the run produced" in verify.messages[1]["content"]
    research = next(r for r in engine.requests if r.grammar.name == "falat_research")  # the same caution (issue 34)
    assert "says the same as what the run produced" in research.messages[1]["content"].split("The search so far")[1]
    diag, engine = run_one(Script(flags=flags), make_trace(6))
    assert diag.details["prior"]["expected_equals_wrong"] is False
    assert (
        "says the same as what the run produced"
        not in next(r for r in engine.requests if r.grammar.name == "falat_verify").messages[1]["content"]
    )


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
    assert list(cost) == ["prior", "windows", "transitions", "ranking", "verify", "research"]
    assert [cost[s]["batches"] for s in cost] == [[1], [2], [1], [1], [3], [1]]
    assert sum(c["calls"] for c in cost.values()) == len(engine.requests) == diag.usage["calls"]
    assert sum(c["prompt_tokens"] for c in cost.values()) == diag.usage["prompt_tokens"]


def test_text_cut_at_its_bound_is_recorded():
    class Long(Script):
        def __call__(self, req):
            out = super().__call__(req)
            if req.grammar.name == "falat_verify":
                out["analysis"] = "x" * req.grammar.spec["properties"]["analysis"]["maxLength"]
            return out

    diag, _ = run_one(Long(flags={3: (True, True, True)}), make_trace(8), analysis_chars=40)
    assert diag.details["bounds_hit"]["text_at_bound"] == {"verify": {"analysis": 1}}


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


# ---- options: strong-model defaults, the embedded model's profile ---------------------------------


def test_defaults_are_sized_for_a_strong_model_and_every_bound_is_an_option():
    m = get_method("falat")
    d = m.describe()
    assert (d["step_tokens"], d["pair_step_tokens"], d["pair_quota"], d["answer_chars"], d["analysis_chars"]) == (2048, 1024, 3, 600, 1200)
    for bound in (
        "plan_chars",
        "requirements",
        "action_chars",
        "stage_chars",
        "pair_reason_chars",
        "rank_reason_chars",
        "quote_chars",
        "argument_chars",
        "rank_step_tokens",
        "context_tokens",
        "judge_temperature",
    ):
        assert bound in d
    m = get_method("falat:window=3:pair_quota=10:answer_chars=900")
    assert m.options.window == 3 and m.options.pair_quota == 10 and m.options.limits.answer_chars == 900
    for bad in ("falat:window=0", "falat:top_k=0", "falat:pair_quota=0", "falat:nope=1", "falat:pair_cap=5", "falat:answer_chars=5"):
        with pytest.raises(MethodOptionError):
            get_method(bad)


def test_the_embedded_profile_carries_the_small_values():
    from localfa.engine.factory import EngineOptions, method_defaults

    resolved = get_method("falat:pair_quota=3").for_model(method_defaults(EngineOptions(), "vllm"))
    rec = resolved.options_record()
    assert rec["profile"] == "cpu-embedded"
    assert rec["values"]["step_tokens"] == 400 and rec["values"]["answer_chars"] == 160
    assert rec["values"]["pair_quota"] == 3 and "pair_quota" not in rec["from_profile"]  # the user's spec wins
    assert get_method("falat").describe()["step_tokens"] == 2048  # the method's own default is untouched


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


def test_the_prior_inputs_record_what_their_bounds_left_out_and_open_every_later_prompt():
    trace = make_trace(12).model_copy(update={"task": "Count the even addresses. " * 20})
    diag, engine = run_one(Script(), trace, task_chars=100)
    assert diag.details["bounds_hit"]["task_chars"] == {"limit": 100, "chars": len(trace.task.strip())}
    opening = engine.requests[0].messages[1]["content"].split("A team of agents failed")[0]
    assert "<<<END RESULT>>>" in opening  # task and wrong result first, in the prior block's words
    assert all(r.messages[1]["content"].startswith(opening) for r in engine.requests[1:])


# ---- issue 34, point 6: one definition each, what the record says is what happened -----------------


def test_one_neighbourhood_radius_serves_verification_and_the_re_search():
    from localfa.grammars.falat import RESEARCH_MAX_STEPS, RESEARCH_RADIUS
    from localfa.methods.falat.candidates import REGION_REACH, neighbourhood, verify_span
    from localfa.methods.falat.research import research_window

    assert RESEARCH_MAX_STEPS == 2 * RESEARCH_RADIUS + 1 and REGION_REACH == RESEARCH_RADIUS
    assert research_window(5, 10) == neighbourhood(5, 10, RESEARCH_RADIUS) == range(3, 8)
    assert verify_span(5, [], [range(0, 10)], 10) == range(4, 7)


def test_no_unused_score_scale_or_significance():
    import localfa.methods.falat.ranking as ranking

    assert not hasattr(ranking, "SCORE_MAX")
    diag, engine = run_one(Script(flags={2: (True, True, False)}), make_trace(6))
    (window,) = [r for r in engine.requests if r.grammar.name == "falat_window"][:1]
    step = window.grammar.spec["properties"]["steps"]["properties"]["0"]["properties"]
    assert "significance" not in step and "significance" not in window.messages[1]["content"]
    assert all("significance" not in m for m in diag.details["mid_level"])


def test_links_are_indexed_by_step_once():
    from localfa.methods.falat.ranking import LinkIndex

    links = LinkIndex({(5, 8): "follow_up", (2, 5): "error_shift", (2, 9): "no_influence"}, {(2, 5): "why"})
    assert [(t["i"], t["j"]) for t in links.of(5)] == [(2, 5), (5, 8)] and links.of(5)[0]["reason"] == "why"
    assert [(t["i"], t["j"]) for t in links.around([8, 9])] == [(2, 9), (5, 8)]
    assert links.leaving_path == {2, 5} and links.of(7) == []


def test_the_benchmark_prints_stages_in_the_method_order(capsys):
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_falat.py"
    spec = importlib.util.spec_from_file_location("bench_falat", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cost = {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "cached_tokens": 0, "batches": [1]}
    record = SimpleNamespace(details={"cost": {s: cost for s in ("research", "verify", "prior", "windows")}})
    bench.print_stages([record])
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == [
        "stage prior",
        "stage windows",
        "stage verify",
        "stage research",
    ]


def test_the_every_step_fallback_keeps_judged_passive_steps_answerable():
    """Nothing flagged, nothing pointed at: every answerable step is a candidate, a step its
    window judged passive too (issue 52: that judgement can be wrong, as for a task message)."""
    from localfa.methods.falat import candidates

    def nothing_stands_out(flagged, focus, answerable):
        return candidates.select_candidates([], [], answerable)

    with mock.patch.object(method_module, "select_candidates", nothing_stands_out):
        diag, _ = run_one(Script(passive=[3, 7]), make_trace(12))
    assert diag.details["candidate_source"] == "active_steps"
    assert diag.details["candidates"] == list(range(12))


def test_the_suspects_block_puts_each_stage_summary_on_its_own_line():
    """A stage line ended by its `{% endif %}` ran into the next one (issue 52)."""
    from localfa.methods.falat.windows import StageSummary
    from localfa.templates import render

    stages = [StageSummary((0, 4), "read the task", 2), StageSummary((5, 9), "counted", None), StageSummary((10, 11), "answered", 10)]
    block = render("falat/_suspects.j2", stages=stages, regions=[])
    lines = [line for line in block.splitlines() if line.startswith("- steps ")]
    assert lines == ["- steps 0-4: read the task (points at step 2)", "- steps 5-9: counted", "- steps 10-11: answered (points at step 10)"]
