"""DRIFT's named mutants (`localfa.oracle.mutants`): one deliberate break per stage or rule, which
the blind oracle (`localfa.methods.drift.oracle`) must notice.

They patch DRIFT's machinery, so they live here and not beside the policy (a policy module may
import nothing that reaches a trace: tests/architecture/test_oracle_blind.py).

Content-blind mutants (issue 49): every template that shows the run's text (the keeper's chunks,
the support checks, both tracer prompts) with that text removed and replaced by same-shape
nonsense, and ``support-blind`` (the support checks shown no run text at all). Segmentation's
prompt is left out: it is off by default (``segment=false``), so blinding it changes nothing.

`traces` (the CI subset, tests/oracle/test_mutants.py) is chosen by a rule stated beside each
mutant, never by where the kill shows; a mutant without one runs on the default subset.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from localfa.methods.drift import audit, ledger, packets, spans, support, verdict
from localfa.methods.drift.options import DriftOptions
from localfa.methods.drift.tracer import Mark
from localfa.oracle.mutants import Mutant, content_blind_mutants, patched

# The dev traces whose run does not fit the tracer's window at 32k (124k-165k characters): the
# tracer reads each claim's evidence packet there, not the run.
PACKET_TRACES = ("hand-crafted/8", "hand-crafted/15")  # (hand-crafted/20 too, but intact misses it: its fault's words are not its own)
# The dev traces whose fault step is longer than a packet's room for its own spans at the default
# budget (3,000 characters: 1,000 tokens at 4 characters a token, three quarters of it), answerable
# ones: where showing a claim's defining spans whole beside the budget can matter.
LONG_STEP_TRACES = (
    "algorithm-generated/9",
    "algorithm-generated/20",
    "algorithm-generated/35",
    "hand-crafted/7",
    "hand-crafted/17",
    "hand-crafted/18",
)
# Every algorithm-generated dev trace (short runs: the fallback's weakest claim against the last
# span).
FALLBACK_TRACES = tuple(f"algorithm-generated/{n}" for n in range(1, 41))
# The option that selects each tracer mode where it is not the default ('' where it is). Support is
# the gate to the per-claim tracer (a claim called DIRECT is not traced): its breaks are swept there,
# where they cost calls; under the joint tracer (the default) every checked claim is traced whatever
# support says. The no-error fallback acts only
# where the tracer marks nothing: under the joint tracer that never happened at p = 0.7 on the 39
# answerable algorithm-generated traces (3 seeds), so it is swept under the per-claim tracer.
CONFIRM = "confirm=true:confirm_when=always"  # the confirming call is off by default (docs/methods/drift.md)
REAL_CONFIRM = audit.Audit._confirm
REAL_OVER_LEDGER = audit.Audit._trace_over_ledger
PER_CLAIM = "" if DriftOptions().tracer == "per-claim" else "tracer=per-claim"
JOINT = "" if DriftOptions().tracer == "joint" else "tracer=joint"


def _no_support(self: Any, spans: Any, checked: Any) -> Any:
    """Support checks removed: nothing is checked, so nothing is risky or traced."""
    return []
    yield  # a generator stage that asks nothing


def _support_blind_prompt(self: Any, items: Any, n: int) -> Any:
    """The support prompt with no packets (the claims and instructions only)."""
    return self._user("drift/support.j2", "", run="", items=[{**i, "packet": ""} for i in items], n_spans=n, limits=self.limits)


def _no_own_steps(self: Any, claim: Any) -> list[int]:
    """The evidence packet without the claim's own spans (its term passages only)."""
    return []


def _empty_packet(self: Any, claim: Any, tokens: int, shown: Any = None, whole_tokens: int = 0) -> Any:
    """Every evidence packet empty."""
    return packets.Packet(claim.id, "", 0)


def _demote_direct(claim: Any, answer: dict[str, Any], view: Any, spans: Any, verify: bool = True) -> Any:
    check = support.check_from_answer(claim, answer, view, spans, verify)
    if check.status == "DIRECT":
        check.status, check.demoted = "WEAK", "mutant: every DIRECT demoted"
    return check


def _view_cut_to(chars: int, view: Any) -> Any:
    """`SpanView.view` with every run text cut to at most `chars` characters."""

    def cut(self: Any, spans: Any, char_budget: int | None, tags: bool = True) -> Any:
        return view(self, spans, chars if char_budget is None else min(char_budget, chars), tags)

    return cut


def _first_call_only(self: Any, spans: Any, risky: Any) -> Any:
    """The joint tracer judges only its first `claims_per_call` claims (its later calls dropped)."""
    return (yield from REAL_OVER_LEDGER(self, spans, risky[: self.opts.claims_per_call]))


def _confirm_says_zero(self: Any, spans: Any, first: int, at_first: Any) -> Any:
    """The confirming call's answer misread: every first error moved to span 0."""
    said = yield from REAL_CONFIRM(self, spans, first, at_first)
    return {**said, "earliest": 0}


def _no_reask(self: Any, k: int, messages: Any, grammar: Any, max_tokens: int, first: dict[str, Any]) -> Any:
    """The keeper's second look removed: an empty ledger stays empty."""
    return first
    yield  # a generator stage that asks nothing


def _keep_nothing(self: Any, answer: dict[str, Any], chunk: int = 0) -> list[str]:
    return []


def _tracer_silent_claim(claim: Any, answer: dict[str, Any]) -> tuple[bool, list[Any]]:
    return False, []


def _tracer_silent_ledger(claims: Any, answer: dict[str, Any]) -> tuple[set[str], list[Any]]:
    return set(), []


def _all_missing(claim: Any, answer: dict[str, Any], view: Any, spans: Any, verify: bool = True) -> Any:
    check = support.check_from_answer(claim, answer, view, spans, verify)
    check.status = "MISSING"
    return check


def _all_harmful(claim: Any, answer: dict[str, Any]) -> tuple[bool, list[Any]]:
    return True, [Mark(claim.id, claim.introduced, "introduce")]


def _all_harmful_ledger(claims: Any, answer: dict[str, Any]) -> tuple[set[str], list[Any]]:
    return {c.id for c in claims}, [Mark(c.id, c.introduced, "introduce") for c in claims]


def _last_first(marks: list[Any]) -> list[int]:
    return sorted({m.span for m in marks}, reverse=True)


def _no_weakest(checked: Any, checks: Any) -> None:
    return None


def _content_blind() -> list[Mutant]:
    """Both blindings of every template that shows run text; the tracer template the default mode
    does not send is swept under the mode that does."""
    out = content_blind_mutants({"drift/ledger.j2": "p1"})
    out += [replace(m, spec=PER_CLAIM) for m in content_blind_mutants({"drift/support.j2": "cost"})]
    out += [replace(m, spec=PER_CLAIM) for m in content_blind_mutants({"drift/tracer_claim.j2": "p1"})]
    out += [replace(m, spec=JOINT) for m in content_blind_mutants({"drift/tracer_ledger.j2": "p1"})]
    return out


def _mutants() -> list[Mutant]:
    silent = patched((audit, "marks_for_claim", _tracer_silent_claim), (audit, "marks_for_ledger", _tracer_silent_ledger))
    return [
        Mutant("no-support-no-tracer", "support seeker and tracer", "p1", patched((audit.Audit, "_seek_support", _no_support))),
        Mutant(
            "support-blind",
            "support seeker shown no run text (claim and instructions only)",
            "cost",
            patched((audit.Audit, "_support_prompt", _support_blind_prompt)),
            spec=PER_CLAIM,
        ),
        Mutant(
            "packet-empty",
            "evidence packets (what support reads, and the tracer where the run does not fit)",
            "p1",
            patched((packets.Packer, "packet", _empty_packet)),
            traces=PACKET_TRACES,
            long=True,
        ),
        Mutant(
            "packet-without-own-spans",
            "evidence packets: the claim's own spans shown whole",
            "long",
            patched((packets.Packer, "own_steps", _no_own_steps)),
            traces=PACKET_TRACES,
            long=True,
        ),
        Mutant(
            "claim-spans-cut",
            "evidence packets: the spans that make and commit a claim shown whole beside the budget (the authors' own spans uncut)",
            "long",
            spec="claim_spans_whole=false",
            traces=LONG_STEP_TRACES,
            long=True,
        ),
        Mutant(
            "joint-first-call-only",
            "the joint tracer's calls: every checked claim judged, 8 a call (a long run records more)",
            "long",
            patched((audit.Audit, "_trace_over_ledger", _first_call_only)),
            spec=JOINT,
            long=True,
        ),
        Mutant(
            "confirm-misread",
            "the confirming call's answer (swept with the call on: it is off by default)",
            "p1",
            patched((audit.Audit, "_confirm", _confirm_says_zero)),
            spec=CONFIRM,
        ),
        Mutant(
            "direct-demoted",
            "support verdict DIRECT (the gate to the per-claim tracer; under joint every checked claim is traced)",
            "cost",
            patched((audit, "check_from_answer", _demote_direct)),
            spec=PER_CLAIM,
        ),
        Mutant(
            "run-text-256", "run text shown to every stage", "p1", patched((spans.SpanView, "view", _view_cut_to(256, spans.SpanView.view)))
        ),
        Mutant(
            "keeper-no-second-look",
            "the keeper re-asked when it commits to nothing",
            "p07",
            patched((audit.Audit, "_reask_keeper", _no_reask)),
            traces=FALLBACK_TRACES,
        ),
        Mutant("keeper-records-nothing", "claim keeper (ledger)", "p1", patched((ledger.Ledger, "merge", _keep_nothing))),
        Mutant("tracer-silent", "dependency tracer verdicts", "p1", silent),
        Mutant(
            "verdicts-ignored",
            "support and tracer verdicts (every claim risky and harmful)",
            "p1",
            patched(
                (audit, "check_from_answer", _all_missing),
                (audit, "marks_for_claim", _all_harmful),
                (audit, "marks_for_ledger", _all_harmful_ledger),
            ),
        ),
        Mutant("first-error-latest", "first-error pick (earliest marked span)", "p1", patched((verdict, "error_spans", _last_first))),
        Mutant(
            "fallback-last-span",
            "no-error fallback (weakest support)",
            "p07",
            patched((verdict, "weakest_claim", _no_weakest)),
            traces=FALLBACK_TRACES,
            spec=PER_CLAIM,
        ),
        *_content_blind(),
    ]


MUTANTS = _mutants()
