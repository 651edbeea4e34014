"""DRIFT at full strength (issue 23): a ledger sized by tokens alone, no hidden claim caps, late
claims at their true introduction, the riskiest claims checked first, reworded claims merged,
honest run text, evidence before the verdict, stable sampling, an answered step that an agent
acted at. Scripted engine: every answer is still validated against its grammar."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from localfa.engine.scripted import ScriptedEngine
from localfa.grammars.drift import ledger_schema, support_schema
from localfa.methods.base import MethodContext
from localfa.methods.drift.excerpts import RADIUS
from localfa.methods.drift.ledger import Ledger
from localfa.methods.drift.options import AS_BEFORE, DriftOptions
from localfa.methods.drift.packets import Packer
from localfa.methods.drift.spans import Span, SpanView
from localfa.methods.drift.tracer import pick_step
from localfa.methods.registry import get_method
from localfa.methods.runner import Job, run_jobs
from localfa.tokens import approx_tokens
from localfa.traces.model import Step, Trace
from localfa.view.paths import drift_path
from tests.methods.test_drift_logic import RISKY, Script, _two_claims, make_trace, new_claim, run_one

PROFILE = Path(__file__).resolve().parents[2] / "serving" / "profiles" / "cpu-embedded.toml"


def run_window(script, trace, window, **options):
    options.setdefault("tracer", "per-claim")
    engine = ScriptedEngine(script, max_model_len=window)
    ctx = MethodContext(trace, seed=0, count_tokens=engine.count_tokens, max_model_len=window)
    ((_, diag),) = list(run_jobs(engine, [Job(trace.id, get_method("drift", **options).run(ctx), lambda e: pytest.fail(e))]))
    return diag, engine


# ---- 1. the ledger reads what the window holds ------------------------------------------------------


def test_a_30_span_chunk_on_a_32k_window_is_one_ledger_call():
    contents = [(f"Agent{i % 3}", f"step {i} " + "searched the archive and found more text " * 40) for i in range(30)]
    diag, engine = run_window(Script(), make_trace(contents, tid="t30"), 32768, keeper_reask=False)
    assert [r.key for r in engine.requests if r.key.startswith("drift/ledger")] == ["drift/ledger/0"]
    (chunk,) = diag.details["ledger_chunks"]
    assert chunk["spans"] == [0, 29] and chunk["ended"] == "end of run" and chunk["cut_steps"] == []


def test_the_ledger_grammar_grows_linearly_with_the_spans():
    small = json.dumps(ledger_schema(0, 29, ["C1"], DriftOptions()))
    large = json.dumps(ledger_schema(0, 299, ["C1"], DriftOptions()))
    assert len(large) - len(small) < 20  # bounded integers: the span count only changes digits
    many = json.dumps(ledger_schema(0, 29, [f"C{k}" for k in range(1, 201)], DriftOptions()))
    assert len(many) - len(small) < 200 * 8  # one enum entry per existing claim


def test_an_answer_out_of_span_order_is_asked_again_once_then_repaired():
    bad = {"new_claims": [new_claim("The population is 170,000.", 3, 2, [1])]}
    good = {"new_claims": [new_claim("The population is 170,000.", 2, 2, [3])]}
    answers = {"0": bad, "0/retry": good}

    class Retry(Script):
        def __call__(self, req):
            stage, _, rest = req.key.removeprefix("drift/").partition("/")
            return answers[rest] if stage == "ledger" else super().__call__(req)

    diag, engine = run_one(Retry())
    retry = next(r for r in engine.requests if r.key == "drift/ledger/0/retry")
    assert "consequential span 2 is before its introduced span 3" in retry.messages[1]["content"]
    first = next(r for r in engine.requests if r.key == "drift/ledger/0")
    assert retry.messages[1]["content"].startswith(first.messages[1]["content"])  # same prefix, note appended
    (c,) = diag.details["ledger"]
    assert (c["introduced"], c["consequential"], c["uses"]) == (2, 2, [3])
    assert diag.details["ledger_retries"][0]["repaired_after_retry"] == []
    assert diag.details["cost"]["ledger"]["calls"] == 2


# ---- 2. strong-model defaults, small values in the embedded profile, every bound recorded ----------


def test_defaults_are_the_authors_and_the_embedded_profile_holds_the_small_values():
    """Issue 51: the authors' keeper sizing, check count, joint tracer and temperature 0.1 by
    default; our earlier defaults reachable as options (`AS_BEFORE`)."""
    d = DriftOptions()
    assert (d.claims_per_chunk, d.claims_per_call, d.tracer, d.support) == (5, 8, "joint", "ledger")
    assert d.keeper_temperature == d.tracer_temperature == d.check_temperature == 0.1
    assert d.chunk_max_spans is None and d.uses_per_claim >= 10 and d.marks_per_claim >= 40  # ten spans, every role in each
    before = get_method(f"drift:{AS_BEFORE}").options
    assert (before.claims_per_chunk, before.max_checked_claims, before.tracer, before.keeper_temperature) == (20, 32, "per-claim", 0.2)
    table = tomllib.loads(PROFILE.read_text())["methods"]["drift"]
    DriftOptions(**table)  # valid options
    for name in ("claims_per_chunk", "updates_per_chunk", "uses_per_claim", "marks_per_claim"):
        assert table[name] < getattr(d, name), name


def test_every_bound_hit_is_recorded_and_every_bound_is_stated_in_the_prompt():
    tracer = {"C1": {"harmful": True, "marks": [{"span": 2, "role": "commit"}]}}
    diag, engine = run_one(
        Script(ledger=_two_claims(), support=RISKY, tracer=tracer),
        claims_per_chunk=3,
        max_checked_claims=1,
        marks_per_claim=1,
        uses_per_claim=2,
    )
    hit = diag.details["bounds_hit"]
    assert hit["claims_per_chunk"] == [0] and hit["uses_per_claim"] == [0] and hit["marks_per_claim"] == ["C1"]
    assert hit["max_checked_claims"] == [{"unchecked": ["C2"]}] and diag.details["unchecked_claims"] == ["C2"]
    prompts = {r.key.split("/")[1]: r.messages[1]["content"] for r in engine.requests}
    assert (
        "at most 3 claims" in prompts["ledger"] and "at most 2 spans" in prompts["ledger"] and "at most 160 characters" in prompts["ledger"]
    )
    assert "at most 300 characters" in prompts["support"] and "at most 240 characters" in prompts["support"]
    assert "at most 1 objects" in prompts["tracer"]


def test_a_small_window_lowers_the_answer_bounds_and_says_so():
    diag, engine = run_window(Script(), make_trace(), 4096)
    assert "window:claims_per_chunk" in diag.details["bounds_hit"]
    for r in engine.requests:
        assert sum(engine.count_tokens(m["content"]) for m in r.messages) + r.sampling.max_tokens <= 4096


# ---- 3. a claim recognised late keeps its true introduction -----------------------------------------


def test_a_claim_recorded_late_is_marked_at_its_earlier_span():
    late = {"new_claims": [new_claim("The population is 170,000.", 2, 2, [3, 5])]}
    tracer = {"C1": {"harmful": True, "marks": [{"span": 2, "role": "commit"}, {"span": 5, "role": "finalize"}]}}
    diag, engine = run_one(Script(ledger=[{"new_claims": []}, late], support={"C1": RISKY["C2"]}, tracer=tracer), chunk_max_spans=3)
    assert [c["spans"] for c in diag.details["ledger_chunks"]] == [[0, 2], [3, 5]]
    assert diag.details["ledger"][0]["introduced"] == 2  # recorded in chunk 1 (spans 3-5), made in span 2
    assert diag.spans == [(2, 2), (5, 5)] and diag.step == 2 and diag.details["first_error_span"] == 2
    tracer_req = next(r for r in engine.requests if r.key == "drift/tracer/C1")
    assert tracer_req.grammar.spec["properties"]["marks"]["items"]["properties"]["span"]["minimum"] == 0  # early_marks
    _, engine = run_one(
        Script(ledger=[{"new_claims": []}, late], support={"C1": RISKY["C2"]}, tracer=tracer), chunk_max_spans=3, early_marks=False
    )
    tracer_req = next(r for r in engine.requests if r.key == "drift/tracer/C1")
    assert tracer_req.grammar.spec["properties"]["marks"]["items"]["properties"]["span"]["minimum"] == 2


def test_every_ledger_entry_is_shown_and_can_be_updated():
    many = {"new_claims": [new_claim(f"Candidate number {k} is ruled out.", 0, 0, [], typ="decision") for k in range(15)]}
    diag, engine = run_one(Script(ledger=[many, {"new_claims": [], "updates": []}]), chunk_max_spans=3, claims_per_chunk=15)
    second = next(r for r in engine.requests if r.key == "drift/ledger/1")
    text = second.messages[1]["content"]
    assert all(f"C{k} | decision, consequential" in text for k in range(1, 16))
    assert second.grammar.spec["properties"]["updates"]["items"]["properties"]["claim"]["enum"] == [f"C{k}" for k in range(1, 16)]


# ---- 4. the riskiest claims are checked first ---------------------------------------------------------


def test_finalized_and_decision_claims_are_checked_before_ledger_order():
    ledger = [
        {
            "new_claims": [
                new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [2]),
                new_claim("We use the 2020 census figure.", 2, 2, [3], typ="decision"),
                new_claim("Final answer: 340,000.", 5, 5, [], status="finalized", typ="computation"),
            ]
        }
    ]
    _, engine = run_one(Script(ledger=ledger), max_checked_claims=2, support="per-claim")
    assert [r.key for r in engine.requests if r.key.startswith("drift/support/")] == ["drift/support/C3", "drift/support/C2"]
    _, engine = run_one(Script(ledger=ledger), max_checked_claims=2)
    (call,) = [r for r in engine.requests if r.key.startswith("drift/support/")]
    assert list(call.grammar.spec["properties"]) == ["C3", "C2"]  # one call, the riskiest first


# ---- 5. one claim, one entry ----------------------------------------------------------------------------


def test_a_reworded_claim_merges_into_its_entry_and_a_different_value_does_not():
    led = Ledger()
    led.merge({"new_claims": [new_claim("The population of Springfield is 170,000.", 2, 2, [3])]}, chunk=0)
    led.merge({"new_claims": [new_claim("Springfield's population is 170,000.", 4, 4, [5], status="finalized")]}, chunk=1)
    led.merge({"new_claims": [new_claim("The population of Springfield is 167,882.", 1, 1, [])]}, chunk=1)
    assert len(led) == 2
    c = led.claims[0]
    assert c.said_as == ["Springfield's population is 170,000."] and c.status == "finalized" and c.uses == [3, 4, 5]


# ---- 6. honest run text ---------------------------------------------------------------------------------


def _packer(contents, count=approx_tokens):
    trace = make_trace(contents, tid="packets")
    view = SpanView(trace)
    spans = [Span(i, i, i) for i in range(view.n_steps)]
    return Packer(view, spans, count, 4.0)


def test_a_packet_shows_the_claims_own_spans_whole_then_the_passages_that_mention_it():
    page = "r " * 1000 + "The 2020 census counted 167,882 residents in Springfield. " + "s " * 1000 + "END-OF-PAGE"
    packer = _packer(
        [
            ("user", "Find the population of Springfield in 2020."),
            ("Searcher", "Opened the census archive; the page reads: " + page),
            ("Planner", "q " * 2000 + "Springfield had 167,882 residents, so we use that. " + "t " * 2000),
            ("Planner", "Final answer: 167,882."),
        ]
    )
    claim = Ledger()
    claim.merge({"new_claims": [new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [3])]})
    packet = packer.packet(claim.claims[0], 2000)
    assert packet.own_steps == [1, 3] and packet.own_cut == [] and "END-OF-PAGE" in packet.text  # its own spans whole
    assert packet.text.startswith("Span 1 (step 1):") and "Span 3 (step 3):" in packet.text
    assert "Span 2 (step 2):\nFrom step 2, characters" in packet.text and "so we use that" in packet.text  # a mention elsewhere
    assert packet.text.count("q ") < 2 * RADIUS  # a passage around the mention, not the whole step
    assert packet.tokens <= 2000 and "<<<STEP 0>>>" not in packet.text  # the task step only as a passage


def test_a_packets_size_is_its_token_budget_whatever_the_run_length():
    """Issue 51: a packet never grows with the run: counted by the engine's tokenizer, within its
    budget on a run of 20 steps and one of 2,000, the claim's own long step cut head and tail."""
    sizes = []
    for n in (20, 2000):
        contents = [(f"Agent{i % 3}", f"step {i}: Springfield had 167,882 residents. " + "words " * 400) for i in range(n)]
        packer = _packer(contents, count=lambda t: len(t) // 3)  # a denser tokenizer than the packer's guess
        claim = Ledger()
        claim.merge({"new_claims": [new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [n - 1])]})
        packet = packer.packet(claim.claims[0], 600)
        assert packet.tokens <= 600 and packet.left_out > 0
        sizes.append(packet.tokens)
    assert abs(sizes[0] - sizes[1]) < 100


def test_a_claims_defining_step_is_shown_whole_in_room_of_its_own_beside_the_budget():
    """The authors show a claim's own spans uncut: the step that makes the claim, longer than the
    packet's budget, is shown whole in the room the prompt's window leaves each claim
    (`whole_tokens`); its uses still share the budget, and without that room it is cut head and tail."""
    made = "Opened the archive: " + "r " * 1500 + "MIDDLE-OF-PAGE " + "r " * 1500 + "Springfield had 167,882 residents. " + "s " * 3000
    packer = _packer([("user", "Find the population."), ("Searcher", made), ("Planner", "u " * 3000 + "so 167,882 it is" + " v" * 3000)])
    ledger = Ledger()
    ledger.merge({"new_claims": [new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [2])]})
    claim = ledger.claims[0]
    assert packer.defining_steps(claim) == {1}
    cut = packer.packet(claim, 600)
    assert cut.own_cut[:1] == [1] and "MIDDLE-OF-PAGE" not in cut.text and cut.tokens <= 600
    whole = packer.packet(claim, 600, whole_tokens=5000)
    assert whole.own_steps[0] == 1 and 1 not in whole.own_cut and "MIDDLE-OF-PAGE" in whole.text
    assert 2 in whole.own_cut and whole.tokens <= 5600  # its use shares the 600 tokens: cut


def test_a_run_too_long_for_the_window_gives_the_tracer_packets_and_never_overflows():
    contents = [(f"Agent{i % 3}", f"step {i}: Springfield had 167,882 residents. " + "words " * 300) for i in range(60)]
    trace = make_trace(contents, tid="long")
    ledger = [{"new_claims": [new_claim("Springfield had 167,882 residents in 2020.", 1, 1, [2])]}] + [
        {"new_claims": [], "updates": []}
    ] * 60
    diag, engine = run_window(Script(ledger=ledger, support={"C1": RISKY["C1"]}), trace, 4096)
    assert len(diag.details["ledger_chunks"]) > 1 and diag.details["run_text"]["tracer"]["shown"] == "packets"
    assert diag.details["run_text"]["tracer"]["claim_spans_tokens"] > 0  # the window's room left for its defining spans
    tracer = next(r for r in engine.requests if r.key == "drift/tracer/C1").messages[1]["content"]
    assert "not shown whole here" in tracer and "Evidence packet for C1:" in tracer and "<<<STEP 1>>>" in tracer
    for r in engine.requests:
        assert sum(engine.count_tokens(m["content"]) for m in r.messages) + r.sampling.max_tokens <= 4096


# ---- 7. evidence before the verdict ---------------------------------------------------------------------


def test_support_answers_evidence_then_reason_then_status_and_self_assertion_is_weak():
    assert list(support_schema(6, DriftOptions())["properties"]) == ["evidence", "span", "reason", "status"]
    support = {
        "C1": {
            "evidence": "Springfield had 167,882 residents in the 2020 census.",
            "span": 1,
            "reason": "the tool says so",
            "status": "DIRECT",
        },
        "C2": {"evidence": "So the population is 170,000", "span": 2, "reason": "the planner says so", "status": "DIRECT"},
    }
    diag, engine = run_one(Script(ledger=_two_claims(), support=support))
    checks = {s["claim"]: s for s in diag.details["support"]}
    assert checks["C1"]["status"] == "DIRECT" and checks["C1"]["demoted"] is None  # a tool result in the same span
    assert checks["C2"]["status"] == "WEAK" and "own assertion" in checks["C2"]["demoted"]
    prompt = next(r for r in engine.requests if r.key == "drift/support/ledger/C1").messages[1]["content"]
    assert prompt.index('"evidence"') < prompt.index('"reason"') < prompt.index('"status"')


# ---- 9. the keeper and the tracer sample at their own temperatures ---------------------------------------


def test_keeper_and_tracer_temperatures_are_their_own_options():
    tracer = {"C2": {"harmful": True, "marks": [{"span": 2, "role": "commit"}]}}
    _, engine = run_one(
        Script(ledger=_two_claims(), support=RISKY, tracer=tracer),
        keeper_temperature=0.4,
        tracer_temperature=0.3,
        confirm=True,
        confirm_when="always",
    )
    temps = {r.key.split("/")[1]: r.sampling.temperature for r in engine.requests}
    assert temps == {"ledger": 0.4, "support": DriftOptions().check_temperature, "tracer": 0.3, "confirm": 0.3}


# ---- the answered step is an action step, the first of the claim's agent in its span ----------------------


def test_the_answered_step_is_an_action_step_of_the_claims_agent():
    steps = [
        Step(index=0, agent="user", role="user", content="Find the population of Springfield."),
        Step(index=1, agent="WebSurfer", role="assistant", content="Opening the census site."),
        Step(index=2, agent="Orchestrator", role="assistant", content="Continue."),
        Step(index=3, agent="WebSurfer", role="assistant", content="The population is 170,000."),
        Step(index=4, agent="browser", role="tool", content="The population is 170,000 per the page.", kind="observation"),
    ]
    trace = Trace(id="obs", source="obs.json", format="messages", task="t", steps=steps)
    view = SpanView(trace)
    assert pick_step(view, Span(0, 1, 4), ["The population is 170,000."]) == 1  # WebSurfer's first step in the span
    assert pick_step(view, Span(0, 4, 4), ["The population is 170,000."]) == 3  # an observation alone: the action before it
    ledger = [{"new_claims": [new_claim("The population is 170,000.", 4, 4, [])]}]
    tracer = {"C1": {"harmful": True, "marks": [{"span": 4, "role": "commit"}]}}
    diag, _ = run_one(Script(ledger=ledger, support={"C1": RISKY["C1"]}, tracer=tracer), trace=trace)
    assert diag.spans == [(4, 4)] and (diag.step, diag.agent) == (3, "WebSurfer")


# ---- 10. the view shows DRIFT as it records ---------------------------------------------------------------


def test_the_view_shows_prediction_error_spans_and_first_error_from_a_drift_record():
    tracer = {"C2": {"harmful": True, "marks": [{"span": 2, "role": "commit"}, {"span": 5, "role": "finalize"}]}}
    diag, _ = run_one(Script(ledger=_two_claims(), support=RISKY, tracer=tracer))
    html = drift_path(diag.record(), lambda i: f"#s{i}")
    prediction = html.split("<summary>Prediction</summary>", 1)[1].split("</details>", 1)[0]
    assert 'href="#s2"' in prediction and "Planner" in prediction
    spans = html.split("<summary>Error spans</summary>", 1)[1].split("</details>", 1)[0]
    assert "span 2" in spans and "span 5" in spans and 'href="#s5"' in spans
    first = html.split("<summary>First error</summary>", 1)[1].split("</details>", 1)[0]
    assert "span 2" in first and "C2 (commit)" in first
    listed = html.split("<summary>Spans</summary>", 1)[1].split("</details>", 1)[0]
    assert "error_spans" not in listed
    fallback, _ = run_one(Script())
    html = drift_path(fallback.record(), lambda i: f"#s{i}")
    assert "fallback" in html.split("<summary>Prediction</summary>", 1)[1].split("</details>", 1)[0]
    assert "none marked" in html and "Late endpoints" not in html  # nothing recorded, nothing added
    ledger = [{"new_claims": [new_claim("Final answer: 340,000.", 4, 4, [5], status="finalized")]}]
    completed, _ = run_one(Script(ledger=ledger))
    html = drift_path(completed.record(), lambda i: f"#s{i}")
    late = html.split("<summary>Late endpoints (also predicted)</summary>", 1)[1].split("</details>", 1)[0]
    assert "span 4" in late and 'href="#s5"' in late
