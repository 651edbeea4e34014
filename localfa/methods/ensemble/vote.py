"""`vote`: several methods (or one method under several seeds) on a trace, the majority answer.

``vote:members=all-at-once+falat+drift`` or ``vote:members=safari:samples=3``. All member runs
are interleaved (their requests share batches and the trace's cached prefix); the answer is the
step most of them name (tie rule in `tally`), `confidence` the share of member runs that named it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from localfa.methods.base import MethodContext, Program
from localfa.methods.ensemble.common import Ensemble, answers, member_record, voters_evidence
from localfa.methods.ensemble.members import MAX_SAMPLES, Member, parse_members
from localfa.methods.ensemble.tally import tally, vote_of
from localfa.methods.none_answer import NONE, none_diagnosis

TIE_RULE = "most votes; a tie goes to the step whose first vote comes earliest in member order"


@dataclass
class VoteOptions:
    members: str = "all-at-once+falat+drift"  # NAME[(k=v;...)][*N] joined by '+'
    samples: int = 1  # runs of every member, each under its own derived seeds

    def __post_init__(self) -> None:
        if not 1 <= self.samples <= MAX_SAMPLES:
            raise ValueError(f"samples must be 1..{MAX_SAMPLES}")
        parse_members(self.members, "+", "vote")


class Vote(Ensemble):
    name: ClassVar[str] = "vote"
    Options: ClassVar[type] = VoteOptions
    view_path: ClassVar[str | None] = "localfa.view.ensemble:vote_path"

    def groups(self) -> list[list[Member]]:
        opts: VoteOptions = self.options
        return [[Member(m.spec, m.samples * opts.samples) for m in parse_members(opts.members, "+", "vote")]]

    def run(self, ctx: MethodContext) -> Program:
        [group] = self.groups()
        outcomes = yield from self.run_group(ctx, "vote", group)
        diagnoses = answers(outcomes)
        verdict = tally(diagnoses, ctx.trace)
        runs = len(outcomes)
        records = [member_record(m, s, o) for m, s, o in outcomes]
        details = {"members": records, "votes": _vote_counts(diagnoses), "agreement": f"{verdict.votes} of {runs}", "tie_rule": TIE_RULE}
        if verdict.step is None:
            return ctx.diagnosis(self.name, step=None, stop_reason="no_member_answered", details=details, confidence=0.0)
        if verdict.step == NONE:
            why = f"{verdict.votes} of {runs} member runs found no decisive error."
            return none_diagnosis(ctx, self.name, why, confidence=verdict.share(runs), details=details)
        first = diagnoses[verdict.voters[0]]
        reasoning = f"{verdict.votes} of {runs} member runs name step {verdict.step}. " + (first.reasoning if first else "")
        return ctx.diagnosis(
            self.name,
            step=int(verdict.step),
            agent=verdict.agent,
            reasoning=reasoning,
            evidence=voters_evidence(diagnoses, verdict.voters),
            stop_reason="voted",
            confidence=verdict.share(runs),
            details=details,
        )


def _vote_counts(diagnoses: list) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in map(vote_of, diagnoses):
        if v is not None:
            counts[str(v)] = counts.get(str(v), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
