"""`cascade`: cheap stages first; the next stage runs only while the answers so far disagree.

``cascade:stages=all-at-once*3>falat>safari:agree=2``. After each stage the answers of every stage
run so far are tallied; when the top step has at least `agree` votes the cascade stops and answers
it. When the last stage ends without such agreement, the last stage's own majority is the answer
(the most expensive stage is the one trusted most). `confidence` is the answer's votes over all
member runs made; the record's usage is the whole cost, `details` the cost of each stage.

``margin=M`` also settles a stage whose top answer was given by a member sure of it: a member run
naming that step with its own `confidence` >= M (prism's score margin), e.g.
``cascade:stages=prism>safari:margin=0.5``: prism's cheap answer stands where its margin is
clear, and SAFARI investigates only the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from localfa.engine.types import Usage
from localfa.methods.base import MethodContext, Program
from localfa.methods.ensemble.common import Ensemble, answers, member_record, voters_evidence
from localfa.methods.ensemble.members import Member, parse_members
from localfa.methods.ensemble.tally import Verdict, tally, vote_of
from localfa.methods.ensemble.vote import TIE_RULE
from localfa.methods.none_answer import NONE, none_diagnosis


@dataclass
class CascadeOptions:
    stages: str = "all-at-once*3>falat>safari"  # members joined by '>', cheapest first
    agree: int = 2  # votes the top step needs (over all stages so far) to stop
    margin: float | None = None  # a member's own confidence that also settles a stage (None: votes only)

    def __post_init__(self) -> None:
        if self.agree < 1:
            raise ValueError("agree must be at least 1")
        if self.margin is not None and not 0 <= self.margin <= 1:
            raise ValueError("margin must lie in [0, 1]")
        parse_members(self.stages, ">", "cascade")


class Cascade(Ensemble):
    name: ClassVar[str] = "cascade"
    Options: ClassVar[type] = CascadeOptions
    view_path: ClassVar[str | None] = "localfa.view.ensemble:cascade_path"

    def groups(self) -> list[list[Member]]:
        return [[m] for m in parse_members(self.options.stages, ">", "cascade")]

    def run(self, ctx: MethodContext) -> Program:
        opts: CascadeOptions = self.options
        stages = self.groups()
        so_far: list[Any] = []  # every member run's diagnosis (None: failed), stage by stage
        stage_records: list[dict[str, Any]] = []
        answered_by = None
        for k, group in enumerate(stages):
            outcomes = yield from self.run_group(ctx, f"cascade.{k}", group)
            mine = answers(outcomes)
            so_far.extend(mine)
            usage = Usage()
            for _, _, o in outcomes:
                usage.add(o.usage)
            verdict = tally(so_far, ctx.trace)
            agreed = verdict.votes >= opts.agree or _sure(so_far, verdict, opts.margin)
            stage_records.append(
                {
                    "stage": k,
                    "members": "+".join(m.label for m in group),
                    "runs": [member_record(m, s, o) for m, s, o in outcomes],
                    "usage": usage.as_dict(),
                    "top_votes": verdict.votes,
                    "agreed": agreed,
                }
            )
            if agreed:
                answered_by = k
                break
        if answered_by is None:  # no agreement: the last stage's own majority
            answered_by = len(stage_records) - 1
            verdict = _last_stage_verdict(so_far, mine, ctx)
        details = {
            "answered_by": {
                "stage": answered_by,
                "members": stage_records[answered_by]["members"],
                "agreed": stage_records[answered_by]["agreed"],
            },
            "stages_run": len(stage_records),
            "stages_planned": len(stages),
            "agree": opts.agree,
            "stages": stage_records,
            "tie_rule": TIE_RULE,
        }
        runs = len(so_far)
        if verdict.step is None:
            return ctx.diagnosis(self.name, step=None, stop_reason="no_member_answered", details=details, confidence=0.0)
        how = "agreed" if stage_records[answered_by]["agreed"] else "no agreement; the last stage's majority"
        if verdict.step == NONE:
            why = f"stage {answered_by} ({how}): {verdict.votes} of {runs} member runs found no decisive error."
            return none_diagnosis(ctx, self.name, why, confidence=verdict.share(runs), details=details)
        first = so_far[verdict.voters[0]]
        return ctx.diagnosis(
            self.name,
            step=int(verdict.step),
            agent=verdict.agent,
            reasoning=f"stage {answered_by} ({how}): {verdict.votes} of {runs} member runs name step {verdict.step}. "
            + (first.reasoning if first else ""),
            evidence=voters_evidence(so_far, verdict.voters),
            stop_reason="agreed" if stage_records[answered_by]["agreed"] else "last_stage",
            confidence=verdict.share(runs),
            details=details,
        )


def _sure(so_far: list[Any], verdict: Verdict, margin: float | None) -> bool:
    """Whether a member run that named the top answer was at least `margin` sure of it."""
    if margin is None:
        return False
    return any((so_far[v].confidence or 0.0) >= margin for v in verdict.voters if so_far[v] is not None)


def _last_stage_verdict(so_far: list[Any], last_stage: list[Any], ctx: MethodContext) -> Verdict:
    """The last stage's majority, its votes counted over every run so far (for the confidence)."""
    last = tally(last_stage, ctx.trace)
    if last.step is None:  # the last stage gave no answer: every stage's majority instead
        return tally(so_far, ctx.trace)
    offset = len(so_far) - len(last_stage)
    votes = sum(1 for d in so_far if vote_of(d) == last.step)
    answered = sum(1 for d in so_far if vote_of(d) is not None)
    return Verdict(last.step, last.agent, votes, answered, tuple(offset + v for v in last.voters))
