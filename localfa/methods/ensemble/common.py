"""What vote and cascade share: building members for a model, running a group of them on a
trace, and recording each member run."""

from __future__ import annotations

import dataclasses
from typing import Any

from localfa.diagnosis import Diagnosis
from localfa.methods.base import MEMBER_SEP, BaseMethod, Calls, MethodContext
from localfa.methods.ensemble.interleave import Outcome, interleave
from localfa.methods.ensemble.members import Member

# Member details the ensemble's record drops: shown once on the ensemble's own record.
_DROPPED = ("label", "options")


class Ensemble(BaseMethod):
    """A method that runs other methods; `groups()` lists its members (a vote: one group; a
    cascade: one group per stage)."""

    def groups(self) -> list[list[Member]]:
        raise NotImplementedError

    def __init__(self, options: Any = None, given: dict[str, Any] | None = None, allow_none: bool | None = None) -> None:
        super().__init__(options, given, allow_none)
        self._built: dict[str, BaseMethod] = {m.spec.label: m.build() for group in self.groups() for m in group}

    def for_model(self, defaults: Any) -> BaseMethod:
        """Members take the model's profile values too (each under its own spec's options)."""
        key = ("ensemble", defaults.profile, repr(sorted(defaults.tables.items())))
        if key not in self._for_model:
            resolved = super().for_model(defaults)
            if resolved is self:  # nothing for the ensemble itself: still a copy, its members resolved
                resolved = type(self)(self.options, self.given, self.allow_none)
            assert isinstance(resolved, Ensemble)
            resolved._built = {label: m.for_model(defaults) for label, m in self._built.items()}
            self._for_model[key] = resolved
        return self._for_model[key]

    def run_group(self, ctx: MethodContext, tag: str, group: list[Member]) -> Calls[list[tuple[Member, int, Outcome]]]:
        """Every sample of every member of `group` on ctx's trace, interleaved; keys get the
        prefix ``{tag}.{member}.{sample}|`` so each run has its own seeds."""
        runs = [(pos, m, s) for pos, m in enumerate(group) for s in range(m.samples)]
        programs = [
            self._built[m.spec.label].run(dataclasses.replace(ctx, key_prefix=f"{ctx.key_prefix}{tag}.{pos}.{s}{MEMBER_SEP}"))
            for pos, m, s in runs
        ]
        outcomes = yield from interleave(programs)
        return [(m, s, o) for (_, m, s), o in zip(runs, outcomes)]


def member_record(member: Member, sample: int, outcome: Outcome) -> dict[str, Any]:
    """One member run as the ensemble's `details` keep it: its answer, how it ended, its cost."""
    d = outcome.diagnosis
    entry: dict[str, Any] = {"member": member.spec.label, "sample": sample, "usage": outcome.usage.as_dict()}
    if d is None:
        err = outcome.error
        entry.update(step=None, agent=None, error=f"{type(err).__name__}: {err}" if err else "no answer")
        return entry
    entry.update(
        step=d.step,
        agent=d.agent,
        confidence=d.confidence,
        stop_reason=d.stop_reason,
        error=d.error,
        evidence=d.evidence,
        reasoning=d.reasoning,
        spans=d.spans,
        details={k: v for k, v in d.details.items() if k not in _DROPPED},
    )
    return entry


def answers(outcomes: list[tuple[Member, int, Outcome]]) -> list[Diagnosis | None]:
    return [o.diagnosis for _, _, o in outcomes]


def voters_evidence(diagnoses: list[Diagnosis | None], voters: tuple[int, ...]) -> list[str]:
    """The quotes of the members that named the answer, each once, in member order."""
    seen: dict[str, None] = {}
    for pos in voters:
        d = diagnoses[pos]
        for quote in d.evidence if d is not None else []:
            seen.setdefault(quote, None)
    return list(seen)
