"""No clairvoyance: an honest answer that names a step its prompt hides, or recognises a fault its
prompt does not carry, fails the audit (always on); every display format the methods use counts
as shown; every registered policy passes on dev traces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from localfa.api import diagnose_iter
from localfa.engine.factory import make_engine
from localfa.engine.grammar import Grammar
from localfa.engine.types import Request, Sampling
from localfa.methods.base import BaseMethod, MethodContext, Program
from localfa.methods.fencing import fence
from localfa.methods.registry import METHODS, get_method
from localfa.oracle.audit import ClairvoyantAnswer, answer_ids, audit_answer
from localfa.oracle.engine import OracleEngine
from localfa.oracle.fingerprint import FaultFingerprint, FaultText, distinctive_shingles
from localfa.oracle.policy import Ask, Policy, Rule
from localfa.oracle.registry import Policies, registered_policies
from localfa.traces.load import load_trace
from tests.methods.synthetic import synthetic_trace

SHOWN = (0, 1, 2)


class _Peek(BaseMethod):
    """Shows steps 0..2 only, then asks which step is the decisive one (any step of the trace)."""

    name = "peek-probe"

    def run(self, ctx: MethodContext) -> Program:
        shown = "\n".join(fence(ctx.trace.steps[i].content, f"STEP {i}") for i in SHOWN)
        schema = {
            "type": "object",
            "properties": {"step": {"type": "integer", "minimum": 0, "maximum": len(ctx.trace.steps) - 1}},
            "required": ["step"],
        }
        req = ctx.request("peek/ask", [{"role": "user", "content": shown}], Grammar.json(schema, name="peek"), Sampling(max_tokens=20))
        (resp,) = yield [req]
        return ctx.diagnosis(self.name, step=resp.value["step"])


def _names_a_hidden_step(ask: Ask) -> dict[str, int]:
    return {"step": max(SHOWN) + 1}  # a step the prompt does not show, whatever it says


def _honest(ask: Ask) -> dict[str, int]:
    shown = sorted(ask.shown_step_ids())
    found = ask.fault_id()
    return {"step": found if found is not None else ask.blind_step(shown)}


def _engine(answer, audit: bool = True) -> OracleEngine:
    policy = Policy([Rule("ask", r"peek/ask", answer, answer)])
    return OracleEngine(1.0, policies=Policies({"peek-probe": ("tests:PEEK", policy)}, ()), audit=audit)


def _run(engine, method, traces):
    out = dict(diagnose_iter(engine, method, traces, seed=0, concurrency=4))
    return [out[i] for i in range(len(traces))]


def test_a_policy_that_names_a_step_its_prompt_hides_fails_the_audit():
    trace = synthetic_trace(12, "syn/12", "step {i}: the agent reports {i}")  # labelled step 4: not shown
    assert trace.labels.mistake_step not in SHOWN
    (d,) = _run(_engine(_names_a_hidden_step), _Peek(), [trace])
    assert d.error and "answer.step names step 3" in d.error and "does not show" in d.error, d.error
    (unaudited,) = _run(_engine(_names_a_hidden_step, audit=False), _Peek(), [trace])
    assert unaudited.error is None and unaudited.step == 3  # what the audit exists to catch
    (fair,) = _run(_engine(_honest), _Peek(), [trace])
    assert fair.error is None and fair.step in SHOWN


def test_the_audit_is_always_on(monkeypatch):
    monkeypatch.setenv("LOCALFA_ORACLE_AUDIT", "0")  # the old switch turns nothing off
    assert OracleEngine(1.0).audit and make_engine("oracle:p=0.5", say=lambda _: None).audit


def _forged_recognition(ask: Ask) -> dict[str, int]:
    ask.recognitions.append(1)  # claims to have seen the fault at step 1, which shows other words
    return {"step": 1}


def test_a_recognition_the_prompt_does_not_bear_out_fails_the_audit():
    trace = synthetic_trace(12, "syn/12", "step {i}: the agent reports {i}")
    (d,) = _run(_engine(_forged_recognition), _Peek(), [trace])
    assert d.error and "recognised at id 1" in d.error, d.error
    (fair,) = _run(_engine(_honest), _Peek(), [trace])  # the fault (step 4) is not shown: a blind pick
    assert fair.error is None and fair.step in SHOWN


def _ask(text: str, grammar: Grammar | None = None) -> Ask:
    trace = synthetic_trace(40, "syn/40", "step {i}")
    req = Request(({"role": "user", "content": text},), grammar or Grammar.choice(["a"]), Sampling(), key="k", route=trace.id)
    return Ask(req, FaultFingerprint((distinctive_shingles(trace.steps[4].content, []),)), random.Random(0))


def test_shown_step_ids_knows_every_display_format():
    text = "\n".join(
        [
            fence("a fenced step", "STEP 3"),
            fence("a passage of a cut step", "PASSAGE 7"),
            "  541 (step 11)| a line of SAFARI's numbered view",
            "Span 5 (steps 20-22):",
            "Span 6 (step 23):",
            fence('{"faults_identified_so_far": [{"step_id": 30, "reason": "x"}]}', "STM"),
            fence("C1 | entity, finalized | introduced 31, relied on from 32, used in 33,34 | text", "LEDGER"),
            "Claim C2 (entity, tentative; introduced in span 35, relied on from span -, used in spans none recorded):",
            "prose that mentions step 39 is not a display of it",
        ]
    )
    shown = _ask(text).shown_step_ids()
    assert shown == {3, 7, 11, 5, 20, 21, 22, 6, 23, 30, 31, 32, 33, 34, 35}


def test_answer_ids_reads_step_fields_lists_nested_objects_and_id_lists():
    ask = _ask("")
    value = {
        "steps": {"3": {"significance": 2, "active": True}},
        "ranking": [4, 5],
        "stm": {"faults_identified_so_far": [{"step_id": 6}]},
        "new_claims": [{"introduced": 7, "consequential": 8, "uses": [9]}],
        "marks": [{"span": 10, "role": "commit"}],
        "score": 90,
        "limit": 3,
    }
    assert sorted(i for _, i in answer_ids(ask, value)) == [3, 4, 5, 6, 7, 8, 9, 10]
    assert [i for _, i in answer_ids(_ask("", Grammar.regex("0(,2)?(,5)?", name="seg")), "0,2,5")] == [0, 2, 5]
    with pytest.raises(ClairvoyantAnswer, match=r"answer.ranking\[0\] names step 4"):
        audit_answer(_ask(fence("x", "STEP 5")), {"ranking": [4, 5]})


def _dev_traces(whowhen: Path) -> list:
    return [load_trace(whowhen / sub / f"{n}.json") for sub in ("algorithm-generated", "hand-crafted") for n in (1, 2)]


# Methods whose policy still names what its prompt hides: (method, issue that makes it honest).
PENDING: dict[str, str] = {}


def test_recognition_is_by_content_not_by_header_or_length():
    """The issue-49 cases: a header over other text, text of the right length that says something
    else, and the fault's own words under another id."""
    fault = "the agent multiplied 17 by 3 and reported 41 as the final count"
    fp = FaultFingerprint((distinctive_shingles(fault, ["an unrelated step says other things entirely"]),))

    def ask(text: str) -> Ask:
        req = Request(({"role": "user", "content": text},), Grammar.choice(["a"]), Sampling(), key="k", route="t")
        return Ask(req, fp, random.Random(0))

    assert ask(fence("(hidden)", "STEP 7")).fault_id() is None
    same_shape = " ".join("x" * len(w) for w in fault.split())
    assert ask(fence(same_shape, "STEP 7")).fault_id() is None
    assert ask(fence("unrelated", "STEP 7") + "\n" + fence(fault, "STEP 9")).fault_id() == 9
    assert ask("  12 (step 5)| " + '{"step_id": 5, "agent": "A", "content": "' + fault + '"}').fault_id() == 5
    assert FaultText(frozenset()).share(fault) == 0.0


@pytest.mark.parametrize("method", sorted(set(registered_policies().by_method) & set(METHODS)))  # methods, not passes
def test_every_registered_policy_passes_the_audit_on_dev_traces(method, whowhen):
    if method in PENDING:
        pytest.xfail(f"{method}'s policy is made honest in {PENDING[method]}")
    traces = _dev_traces(whowhen)
    for t, d in zip(traces, _run(OracleEngine(1.0, audit=True), get_method(method), traces)):
        assert d.error is None, f"{method} on {t.id}: {d.error}"
