"""DRIFT's rules, checked exactly on the scripted engine (the real-model run is test_drift_real)."""

from __future__ import annotations

import os

import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.scripted import ScriptedEngine
from localfa.grammars.drift import (
    DriftLimits,
    ledger_grammar,
    ledger_order_errors,
    segment_grammar,
    spans_from_starts,
    support_grammar,
    tracer_claim_grammar,
    tracer_ledger_grammar,
)
from localfa.methods.base import MethodContext
from localfa.methods.drift.ledger import Ledger
from localfa.methods.drift.spans import Span, SpanView, spans_from_ranges
from localfa.methods.drift.tracer import pick_step
from localfa.methods.registry import MethodOptionError, get_method
from localfa.methods.runner import Job, run_jobs
from localfa.traces.model import Step, Trace

CONTENTS = [
    ("user", "Find the population of Springfield in 2020 and double it."),
    ("Searcher", "Searching the census for Springfield.", "Springfield had 167,882 residents in the 2020 census."),
    ("Planner", "So the population is 170,000, we will use that."),
    ("Coder", "Doubling 170,000 gives 340,000."),
    ("Searcher", "Checking another source for the census figure."),
    ("Planner", "Final answer: 340,000."),
]


def make_trace(contents=CONTENTS, tid: str = "d1") -> Trace:
    steps = [Step(index=i, agent=a, role="assistant", content=c, observation=(o or [None])[0]) for i, (a, c, *o) in enumerate(contents)]
    return Trace(
        id=tid,
        source=f"{tid}.json",
        format="messages",
        task="Double the 2020 population of Springfield.",
        steps=steps,
        final_output="340,000",
    )


def new_claim(text, i, j, uses=(), status="consequential", typ="entity"):
    return {"text": text, "type": typ, "status": status, "introduced": i, "consequential": j, "uses": list(uses)}


DIRECT = {"status": "DIRECT", "evidence": "Doubling 170,000 gives 340,000.", "span": 3, "reason": "shown"}


class Script:
    """Canned answers by stage; every answer is still validated against its grammar."""

    def __init__(self, ledger=None, support=None, tracer=None, segment=None):
        self.ledger = ledger or [{"new_claims": []}]
        self.support = support or {}
        self.tracer = tracer or {}
        self.segment = segment or {}

    def __call__(self, req):
        stage, _, rest = req.key.removeprefix("drift/").partition("/")
        if stage == "segment":
            return self.segment[int(rest)]
        if stage == "ledger":
            return self.ledger[int(rest.split("/")[0])]  # a re-ask gets the chunk's answer again
        if stage == "support":  # one answer per claim the call checks (by id)
            return {cid: self.support.get(cid, DIRECT) for cid in req.grammar.spec["properties"]}
        if stage == "confirm":  # the chosen first error confirmed
            return {"reason": "confirmed", "earliest": req.grammar.spec["properties"]["earliest"]["maximum"]}
        over_ledger = req.grammar.spec["properties"]["harmful"].get("type") == "array"
        answer = self.tracer.get(rest, {"harmful": [] if over_ledger else False, "marks": []})
        return {"reason": "noise", **answer}  # the tracer's reason comes first


def run_one(script, trace=None, **options):
    options.setdefault("tracer", "per-claim")  # these tests script one answer per risky claim
    trace = trace or make_trace()
    engine = ScriptedEngine(script)
    method = get_method("drift", **options)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
    return diag, engine


# ---- the ledger -----------------------------------------------------------------------------------


def test_an_answer_cut_at_its_token_bound_is_a_recorded_bound_and_one_more_call_of_its_stage():
    """The engine asks a truncated answer again with more room; the run names the stage and the
    request, so a stage's calls still add up (found on the real 135M model, whose ledger filled
    its bound with junk claims)."""
    cut = {"drift/ledger/0": 1}

    def script(req):
        if cut.get(req.key):
            cut[req.key] -= 1
            return ('{"new_claims":[', "length")
        return Script()(req)

    diag, _ = run_one(script, keeper_reask=False)  # an empty ledger would be asked again (tested apart)
    assert diag.error is None
    assert diag.details["bounds_hit"]["max_tokens_retry"] == [{"stage": "ledger", "key": "drift/ledger/0"}]
    assert diag.details["cost"]["ledger"]["calls"] == len(diag.details["ledger_chunks"]) + 1


def test_ledger_merges_the_same_claim_across_chunks_into_one_entry():
    first = {"new_claims": [new_claim("The population is 170,000.", 1, 1, [2])]}
    again = {"new_claims": [new_claim("the population is 170,000", 4, 4, [5], status="finalized")], "updates": []}
    diag, engine = run_one(Script(ledger=[first, again]), chunk_max_spans=3)
    ledger = diag.details["ledger"]
    assert len(ledger) == 1
    c = ledger[0]
    assert (c["id"], c["status"], c["introduced"], c["consequential"]) == ("C1", "finalized", 1, 1)
    assert c["uses"] == [2, 4, 5] and c["seen_in_chunks"] == [0, 1]
    assert [(c["spans"], c["ended"]) for c in diag.details["ledger_chunks"]] == [([0, 2], "chunk_max_spans"), ([3, 5], "end of run")]
    assert diag.details["bounds_hit"]["chunk_max_spans"] == [0]
    # the second chunk was shown the carried ledger, one line per entry, and may only update real ids
    second = next(r for r in engine.requests if r.key == "drift/ledger/1")
    assert (
        "<<<LEDGER>>>\nC1 | entity, consequential | introduced 1, relied on from 1, used in 2 | The population is 170,000.\n<<<END LEDGER>>>"
    ) in second.messages[1]["content"]
    assert second.grammar.spec["properties"]["updates"]["items"]["properties"]["claim"]["enum"] == ["C1"]


def test_ledger_update_by_id_commits_at_its_first_use():
    led = Ledger()
    led.merge({"new_claims": [new_claim("Doubling is the right operation.", 0, 0, [], status="tentative", typ="constraint")]}, chunk=0)
    assert led.claims[0].consequential is None  # tentative: not yet relied on
    led.merge({"new_claims": [], "updates": [{"claim": "C1", "status": "consequential", "uses": [4, 3]}]}, chunk=1)
    c = led.claims[0]
    assert (c.status, c.introduced, c.consequential, c.uses) == ("consequential", 0, 3, [3, 4])
    # status never moves back; an unknown id is ignored
    led.merge(
        {
            "new_claims": [],
            "updates": [{"claim": "C1", "status": "exploratory", "uses": [5]}, {"claim": "C9", "status": "finalized", "uses": [5]}],
        },
        chunk=2,
    )
    assert c.status == "consequential" and c.uses == [3, 4, 5] and len(led) == 1


def test_ledger_grammar_bounds_span_ids_and_ids_and_ordering_is_checked_after_parsing():
    limits = DriftLimits()
    g = ledger_grammar(2, 5, ["C1"], limits)
    ok = (
        '{"new_claims":[{"text":"A claim here","type":"entity","status":"consequential",'
        '"introduced":2,"consequential":4,"uses":[4,5]}],"updates":[{"claim":"C1","status":"finalized","uses":[3]}]}'
    )
    assert g.parse(ok)["new_claims"][0]["consequential"] == 4 and ledger_order_errors(g.parse(ok)) == []
    late = g.parse(ok.replace('"introduced":2', '"introduced":0'))  # recognised late: an earlier span is allowed
    assert late["new_claims"][0]["introduced"] == 0
    bad = [
        ok.replace('"uses":[4,5]', '"uses":[6]'),  # a span that does not exist yet
        ok.replace('"introduced":2', '"introduced":6'),
        ok.replace('"claim":"C1"', '"claim":"C2"'),  # an id not in the ledger
        ok.replace('"uses":[3]', '"uses":[1]'),  # an update's use outside this chunk
        ok.replace('"type":"entity"', '"type":"opinion"'),
    ]
    for text in bad:
        with pytest.raises(InvalidOutputError):
            g.parse(text)
    swapped = g.parse(ok.replace('"introduced":2,"consequential":4,"uses":[4,5]', '"introduced":4,"consequential":2,"uses":[3,1]'))
    assert ledger_order_errors(swapped) == [
        "new claim 1: consequential span 2 is before its introduced span 4",
        "new claim 1: uses [1] are before its consequential span 2",
    ]
    assert "updates" not in ledger_grammar(0, 3, [], limits).spec["properties"]  # nothing to update yet


# ---- support --------------------------------------------------------------------------------------


def _two_claims():
    return [
        {
            "new_claims": [
                new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [2]),
                new_claim("The population is 170,000.", 2, 2, [3, 5], typ="computation"),
                new_claim("Another source may differ.", 4, 4, [], status="exploratory"),
            ]
        }
    ]


def test_support_is_one_call_over_the_ledger_or_one_per_claim_in_one_batch():
    """Issue 51: the authors' one support call over the checked claims, each with its evidence
    packet (its own spans, not the whole run); `support=per-claim` sends one call each, all in
    one batch, sharing one prefix up to the claim."""
    diag, engine = run_one(Script(ledger=_two_claims()))
    support = [b for b in engine.batches if b[0].key.startswith("drift/support/")]
    assert len(support) == 1 and [r.key for r in support[0]] == ["drift/support/ledger/C1"]
    prompt = support[0][0].messages[1]["content"]
    assert "not shown whole here" in prompt and "Evidence packet for C1:" in prompt and "Evidence packet for C2:" in prompt
    assert "Span 2 (step 2):" in prompt and "<<<STEP 0>>>" not in prompt  # C1's own span, not the run's first step
    assert [s["claim"] for s in diag.details["support"]] == ["C1", "C2"]  # exploratory C3 not checked
    assert diag.details["cost"]["support"]["calls"] == 1
    diag, engine = run_one(Script(ledger=_two_claims()), support="per-claim")
    support = [b for b in engine.batches if b[0].key.startswith("drift/support/")]
    assert len(support) == 1 and [r.key for r in support[0]] == ["drift/support/C1", "drift/support/C2"]
    a, b = (r.messages[1]["content"] for r in support[0])
    assert os.path.commonprefix([a, b]).endswith("Claim C")  # the claim and its packet last
    assert diag.details["cost"]["support"]["calls"] == 2


def test_claims_without_support_are_marked_and_unverified_direct_is_demoted():
    support = {
        "C1": {
            "status": "DIRECT",
            "evidence": "Springfield had 167,882 residents in the 2020 census.",
            "span": 1,
            "reason": "the search result says so",
        },
        "C2": {"status": "DIRECT", "evidence": "the census says 170,000", "span": 1, "reason": "made up quote"},
    }
    diag, engine = run_one(Script(ledger=_two_claims(), support=support))
    checks = {s["claim"]: s for s in diag.details["support"]}
    assert checks["C1"]["status"] == "DIRECT" and checks["C1"]["evidence_verbatim"] is True
    assert checks["C1"]["evidence_span"] == 1
    assert checks["C2"]["model_status"] == "DIRECT" and checks["C2"]["status"] == "WEAK"
    assert checks["C2"]["evidence_verbatim"] is False and checks["C2"]["evidence_span"] is None
    # only the risky claim goes to the tracer
    assert [r.key for r in engine.requests if r.key.startswith("drift/tracer/")] == ["drift/tracer/C2"]
    missing = {"C1": {"status": "MISSING", "evidence": "", "span": 0, "reason": "nothing shows it"}}
    diag, engine = run_one(Script(ledger=_two_claims(), support=missing))
    assert {s["claim"]: s["status"] for s in diag.details["support"]} == {"C1": "MISSING", "C2": "DIRECT"}
    assert [r.key for r in engine.requests if r.key.startswith("drift/tracer/")] == ["drift/tracer/C1"]


def test_support_grammar_bounds_span_and_evidence():
    g = support_grammar(["C1", "C4"], 6, DriftLimits(evidence_chars=20))
    ok = '{"status":"WEAK","evidence":"","span":5,"reason":"r"}'
    assert g.parse('{"C1":' + ok + ',"C4":' + ok + "}")["C4"]["span"] == 5
    for text in (
        '{"status":"WEAK","evidence":"","span":6,"reason":"r"}',
        '{"status":"SURE","evidence":"","span":0,"reason":"r"}',
        '{"status":"WEAK","evidence":"' + "x" * 21 + '","span":0,"reason":"r"}',
    ):
        with pytest.raises(InvalidOutputError):
            g.parse('{"C1":' + ok + ',"C4":' + text + "}")
    with pytest.raises(InvalidOutputError):
        g.parse('{"C1":' + ok + "}")  # every claim is answered


# ---- tracer, first error, step and agent ---------------------------------------------------------

RISKY = {
    "C1": {"status": "WEAK", "evidence": "", "span": 1, "reason": "partial"},
    "C2": {"status": "CONFLICTING", "evidence": "Springfield had 167,882 residents", "span": 1, "reason": "the search says 167,882"},
}


def test_tracer_marks_commit_reuse_finalize_spans_and_first_error():
    tracer = {
        "C1": {"harmful": False, "marks": [{"span": 1, "role": "commit"}]},  # harmless: ignored
        "C2": {
            "harmful": True,
            "marks": [
                {"span": 5, "role": "finalize"},
                {"span": 2, "role": "commit"},
                {"span": 3, "role": "reuse"},
                {"span": 3, "role": "amplify"},
            ],
        },
    }
    diag, _ = run_one(Script(ledger=_two_claims(), support=RISKY, tracer=tracer))
    assert diag.spans == [(2, 2), (3, 3), (5, 5)]
    assert diag.details["error_spans"] == [2, 3, 5] and diag.details["first_error_span"] == 2
    assert (diag.step, diag.agent) == (2, "Planner")
    assert diag.details["tracer"]["harmful"] == ["C2"]
    marks = [(m["span"], m["role"]) for m in diag.details["tracer"]["marks"]]
    # every role a span plays; where the claim was made is marked though the tracer did not
    assert marks == [(2, "introduce"), (5, "finalize"), (2, "commit"), (3, "reuse"), (3, "amplify")]
    assert diag.evidence == ["Springfield had 167,882 residents"]  # verbatim quotes only
    assert diag.details["no_error_reason"] is None


def test_harmful_claim_without_marks_is_marked_where_introduced():
    tracer = {"C1": {"harmful": True, "marks": []}}
    diag, _ = run_one(Script(ledger=_two_claims(), support=RISKY, tracer=tracer))
    assert diag.details["error_spans"] == [1] and diag.step == 1 and diag.agent == "Searcher"
    assert diag.details["tracer"]["marks"] == [{"claim": "C1", "span": 1, "role": "introduce", "fallback": True}]


def test_tracer_ledger_mode_is_one_call_and_drops_marks_of_harmless_claims():
    tracer = {
        "ledger": {"harmful": ["C2"], "marks": [{"claim": "C1", "span": 1, "role": "commit"}, {"claim": "C2", "span": 3, "role": "reuse"}]}
    }
    diag, engine = run_one(Script(ledger=_two_claims(), support=RISKY, tracer=tracer), tracer="ledger")
    assert [r.key for r in engine.requests if r.key.startswith("drift/tracer")] == ["drift/tracer/ledger"]
    # C2 was made in span 2 (the Planner) and reused in span 3: the error is where it was made
    assert diag.details["error_spans"] == [2, 3] and diag.step == 2 and diag.agent == "Planner"


def test_tracer_grammars_only_allow_spans_from_the_claims_introduction():
    limits = DriftLimits()
    g = tracer_claim_grammar(2, 6, limits)
    assert g.parse('{"reason":"r","harmful":true,"marks":[{"span":2,"role":"commit"}]}')["marks"][0]["span"] == 2
    for text in (
        '{"reason":"r","harmful":true,"marks":[{"span":1,"role":"commit"}]}',
        '{"reason":"r","harmful":true,"marks":[{"span":6,"role":"reuse"}]}',
        '{"reason":"r","harmful":true,"marks":[{"span":3,"role":"blame"}]}',
        '{"harmful":true,"marks":[{"span":2,"role":"commit"}]}',  # no reason
    ):
        with pytest.raises(InvalidOutputError):
            g.parse(text)
    g = tracer_ledger_grammar({"C1": 1, "C2": 3}, 6, 8, limits)
    g.parse('{"reason":"r","harmful":["C2"],"marks":[{"claim":"C2","span":3,"role":"reuse"}]}')
    with pytest.raises(InvalidOutputError):
        g.parse('{"reason":"r","harmful":["C2"],"marks":[{"claim":"C2","span":2,"role":"reuse"}]}')


def test_no_risky_claim_still_answers_a_fallback_step():
    ledger = [{"new_claims": [new_claim("Final answer: 340,000.", 5, 5, [], status="finalized")]}]
    diag, engine = run_one(Script(ledger=ledger), late_endpoints=False)
    assert not [r for r in engine.requests if r.key.startswith("drift/tracer")]
    assert (diag.step, diag.agent, diag.spans) == (5, "Planner", [])  # the paper's empty prediction
    assert diag.details["step_is_fallback"] is True and diag.details["fallback_span"] == 5
    assert diag.details["no_error_reason"].startswith("no committed claim lacks support")
    diag, _ = run_one(Script())  # nothing recorded at all: the last span
    assert diag.step == 5 and "no committed claim was recorded" in diag.details["no_error_reason"]
    assert diag.spans == [] and diag.details["endpoint_spans"] == []


def test_late_endpoints_complete_the_prediction_as_the_authors_code_does():
    """NJU-LINK/DRIFT's `add_late_support_endpoints`: committed claims' consequential spans and
    last uses join the prediction, after the first error, or all of them with none found; the
    answered step stays the tracer's or the fallback's."""
    ledger = [{"new_claims": [new_claim("Final answer: 340,000.", 4, 4, [5], status="finalized")]}]
    diag, _ = run_one(Script(ledger=ledger))
    assert diag.details["step_is_fallback"] is True and diag.details["error_spans"] == []
    assert diag.details["endpoint_spans"] == [4, 5] and [list(s) for s in diag.spans] == [[4, 4], [5, 5]]
    assert diag.step == 4  # the weakest claim's introduction, not the first endpoint
    tracer = {"C2": {"harmful": True, "marks": [{"span": 2, "role": "introduce"}]}}
    diag, _ = run_one(Script(ledger=_two_claims(), support=RISKY, tracer=tracer))
    # C1 (committed at 1, last used at 2) is before the first error; C2's consequential span is the
    # error itself, its last use (5) comes after it; the exploratory claim adds nothing
    assert diag.details["error_spans"] == [2] and diag.details["endpoint_spans"] == [5]
    assert [list(s) for s in diag.spans] == [[2, 2], [5, 5]] and diag.details["first_error_span"] == 2


def test_span_to_step_mapping_picks_the_step_that_makes_the_claim():
    trace = make_trace()
    view = SpanView(trace)
    span = Span(0, 0, 3)
    assert pick_step(view, span, ["The population is 170,000."]) == 2
    assert pick_step(view, span, ["Doubling 170,000"]) == 3
    assert pick_step(view, span, []) == 1  # no text: the first step that is not the human's
    assert pick_step(view, Span(0, 0, 0), ["anything"]) == 0  # only the human: then it


# ---- segmentation ---------------------------------------------------------------------------------


def test_segmentation_grammar_only_allows_contiguous_covering_ordered_ranges():
    g = segment_grammar(3, 7)
    assert spans_from_starts(g.parse("3,5,6"), 3, 7) == [(3, 4), (5, 5), (6, 7)]
    assert spans_from_starts(g.parse("3"), 3, 7) == [(3, 7)]
    for text in ("3,6,5", "4,5", "3,3", "3,8", "3, 5", "0,5"):
        with pytest.raises(InvalidOutputError):
            g.parse(text)
    with pytest.raises(ValueError):
        spans_from_ranges([(0, 1), (3, 4)], 5)  # a gap
    with pytest.raises(ValueError):
        spans_from_ranges([(0, 1), (2, 3)], 5)  # does not cover


def test_segment_option_groups_steps_in_one_batched_pass():
    segment = {0: "0,2", 1: "3,5"}
    ledger = [{"new_claims": [new_claim("The population is 170,000.", 1, 1, [2])]}]
    tracer = {"C1": {"harmful": True, "marks": [{"span": 1, "role": "commit"}]}}
    diag, engine = run_one(
        Script(segment=segment, ledger=ledger, support={"C1": RISKY["C1"]}, tracer=tracer),
        segment=True,
        segment_max_steps=3,
        late_endpoints=False,
    )
    seg = [b for b in engine.batches if b[0].key.startswith("drift/segment/")]
    assert len(seg) == 1 and len(seg[0]) == 2  # both chunks in ONE batch
    assert diag.details["bounds_hit"]["segment_max_steps"] == [[0]]  # the first chunk ended at the cap
    assert diag.details["spans"] == [[0, 1], [2, 2], [3, 4], [5, 5]]
    # span 1 is step 2 alone: error span (2, 2), step 2 by the Planner
    assert diag.spans == [(2, 2)] and diag.step == 2
    assert "Claim C1" in next(r for r in engine.requests if r.key == "drift/support/ledger/C1").messages[1]["content"]


def test_segmented_span_maps_to_the_step_whose_agent_made_the_claim():
    segment = {0: "0,4"}
    ledger = [{"new_claims": [new_claim("Doubling 170,000 gives 340,000.", 0, 0, [1], typ="computation")]}]
    tracer = {"C1": {"harmful": True, "marks": [{"span": 0, "role": "commit"}]}}
    diag, _ = run_one(
        Script(segment=segment, ledger=ledger, support={"C1": RISKY["C1"]}, tracer=tracer), segment=True, late_endpoints=False
    )
    assert diag.details["spans"] == [[0, 3], [4, 5]]
    assert diag.spans == [(0, 3)] and (diag.step, diag.agent) == (3, "Coder")


# ---- options and chunking ----------------------------------------------------------------------------


def test_options_are_validated_and_recorded():
    with pytest.raises(MethodOptionError, match="tracer"):
        get_method("drift:tracer=guess")
    with pytest.raises(MethodOptionError, match="chunk_tokens"):
        get_method("drift:chunk_tokens=10")
    m = get_method("drift:segment=true:chunk_tokens=900")
    assert m.describe()["segment"] is True and m.describe()["chunk_tokens"] == 900


def test_long_trace_is_read_in_chunks_that_fit_the_window():
    contents = [("Agent" + str(i % 2), f"step {i} " + "words " * 300) for i in range(12)]
    trace = make_trace(contents, tid="long")
    engine = ScriptedEngine(Script(ledger=[{"new_claims": []}] * 12), max_model_len=4096)
    method = get_method("drift", chunk_tokens=800)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=4096)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, method.run(ctx), lambda e: pytest.fail(e))]))
    chunks = [c["spans"] for c in diag.details["ledger_chunks"]]
    assert len(chunks) >= 4 and chunks[0][0] == 0 and chunks[-1][1] == 11
    assert all(b[0] == a[1] + 1 for a, b in zip(chunks, chunks[1:]))  # in order, nothing skipped
    assert {c["chunk_tokens"] for c in diag.details["ledger_chunks"]} == {800}
    assert [c["ended"] for c in diag.details["ledger_chunks"]] == ["token budget"] * (len(chunks) - 1) + ["end of run"]
    for r in engine.requests:
        used = sum(engine.count_tokens(m["content"]) for m in r.messages)
        assert used + r.sampling.max_tokens <= 4096


def test_a_run_that_fits_is_shown_whole_to_the_tracer_sharing_the_keepers_prefix():
    diag, engine = run_one(Script(ledger=_two_claims(), support=RISKY))
    ledger = next(r for r in engine.requests if r.key == "drift/ledger/0").messages[1]["content"]
    tracer = next(r for r in engine.requests if r.key == "drift/tracer/C1").messages[1]["content"]
    common = os.path.commonprefix([ledger, tracer])
    assert common.startswith("Task given to the agents:") and "<<<END STEP 5>>>" in common
    assert "Evidence packet" not in tracer and diag.details["run_text"]["tracer"]["shown"] == "whole run"
    assert "The run's final output" in tracer  # after the run: the prefix stays shared


def test_a_ledger_with_nothing_committed_is_asked_again_once_before_any_fallback():
    """Issue 51's second look: the last chunk is asked again when the whole ledger commits to
    nothing; the second answer's claims are kept, and a second empty answer leaves the first."""
    claim = {"new_claims": [new_claim("The population is 170,000.", 2, 2, [3])]}
    answers = {"drift/ledger/0": {"new_claims": []}, "drift/ledger/0/again": claim}

    def script(req):
        return answers[req.key] if req.key in answers else Script()(req)

    diag, engine = run_one(script)
    assert [r.key for r in engine.requests if r.key.startswith("drift/ledger/")] == ["drift/ledger/0", "drift/ledger/0/again"]
    assert "records no claim the agents relied on" in engine.requests[1].messages[1]["content"]
    assert [c["text"] for c in diag.details["ledger"]] == ["The population is 170,000."]
    assert diag.details["ledger_reasked"] == {"chunk": 0, "committed_after": True}
    off, engine = run_one(script, keeper_reask=False)
    assert [r.key for r in engine.requests if r.key.startswith("drift/ledger/")] == ["drift/ledger/0"] and off.details["ledger"] == []


# ---- the confirming call and the tracer's reach (issue 51) -------------------------------------------


def test_the_confirming_call_may_move_the_first_error_earlier_and_only_earlier():
    tracer = {"C2": {"harmful": True, "marks": [{"span": 3, "role": "reuse"}]}}
    earlier = {"drift/confirm": {"reason": "span 2 states it first", "earliest": 2}}

    def script(req):
        return earlier[req.key] if req.key in earlier else Script(ledger=_two_claims(), support=RISKY, tracer=tracer)(req)

    diag, engine = run_one(script, confirm=True, confirm_when="always")
    (confirm,) = [r for r in engine.requests if r.key == "drift/confirm"]
    assert confirm.grammar.spec["properties"]["earliest"]["maximum"] == 2  # C2 is introduced in span 2: marked there first
    assert "first went wrong in span 2" in confirm.messages[1]["content"] and "Claim C2" in confirm.messages[1]["content"]
    assert diag.details["confirm"]["first"] == 2 and diag.details["cost"]["confirm"]["calls"] == 1
    tracer = {"C2": {"harmful": True, "marks": [{"span": 3, "role": "introduce"}]}}
    earlier["drift/confirm"] = {"reason": "span 1 states it first", "earliest": 1}
    diag, _ = run_one(script, confirm=True)  # the tracer's span 3 is not C2's introduction (2): asked
    assert diag.details["confirm"] == {"first": 3, "earliest": 1, "reason": "span 1 states it first", "shown_from": 0}
    assert diag.details["first_error_span"] == 1 and diag.details["error_spans"][0] == 1
    off, engine = run_one(script)  # off by default
    assert off.details["first_error_span"] == 3 and off.details["confirm"] is None
    assert not [r for r in engine.requests if r.key == "drift/confirm"]
    tracer = {"C2": {"harmful": True, "marks": [{"span": 2, "role": "introduce"}]}}
    agree, engine = run_one(script, confirm=True)  # the tracer and the ledger agree on span 2: not asked
    assert agree.details["confirm"] is None and not [r for r in engine.requests if r.key == "drift/confirm"]


def test_more_claims_than_one_call_judges_go_out_in_several_calls_in_one_batch():
    ledger = [{"new_claims": [new_claim(f"Value {k} is {k * 1000}.", k % 6, k % 6, []) for k in range(5)]}]
    tracer = {
        "joint/C1": {"harmful": [], "marks": []},
        "joint/C3": {"harmful": ["C4"], "marks": []},
        "joint/C5": {"harmful": [], "marks": []},
    }
    diag, engine = run_one(Script(ledger=ledger, tracer=tracer), tracer="joint", claims_per_call=2)
    (support,) = [b for b in engine.batches if b[0].key.startswith("drift/support/")]
    assert [r.key for r in support] == ["drift/support/ledger/C1", "drift/support/ledger/C3", "drift/support/ledger/C5"]
    (calls,) = [b for b in engine.batches if b[0].key.startswith("drift/tracer/")]
    assert [r.key for r in calls] == ["drift/tracer/joint/C1", "drift/tracer/joint/C3", "drift/tracer/joint/C5"]
    assert "Claim C3" in calls[1].messages[1]["content"] and "Claim C1" not in calls[1].messages[1]["content"]
    assert diag.details["tracer"]["harmful"] == ["C4"] and diag.details["first_error_span"] == 3


def test_a_long_ledger_is_shown_to_each_chunk_within_its_share_of_the_window():
    contents = [(f"Agent{i % 3}", f"step {i} " + "words " * 200) for i in range(40)]
    trace = make_trace(contents, tid="ledger")

    def script(req):
        if req.key.startswith("drift/ledger/"):
            lo = req.grammar.spec["properties"]["new_claims"]["items"]["properties"]["introduced"]["minimum"]
            node = req.grammar.spec["properties"]["new_claims"]
            hi = node["items"]["properties"]["introduced"]["maximum"]
            claims = [
                new_claim(f"Candidate {hi}-{k} is ruled out for a long list of reasons.", lo, lo, []) for k in range(node["maxItems"])
            ]
            return {"new_claims": claims, **({"updates": []} if "updates" in req.grammar.spec["properties"] else {})}
        return Script()(req)

    engine = ScriptedEngine(script, max_model_len=4096)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=4096)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, get_method("drift", chunk_tokens=400).run(ctx), lambda e: pytest.fail(e))]))
    assert diag.details["bounds_hit"]["ledger_shown"][0]["left_out"] > 0
    for r in engine.requests:
        assert sum(engine.count_tokens(m["content"]) for m in r.messages) + r.sampling.max_tokens <= 4096
