"""Counting members' answers: the majority step, its agent, the agreement share.

Tie rule (stated in the README): among steps named equally often, the one whose first vote comes
earliest in member order wins, so list members best first. A member's "no decisive error" answer
(`localfa.methods.none_answer`) is a vote like a step, `NONE`. The agent is the one most of the
winning step's voters named (ties: the earliest such voter's), normalised for comparison and
written as the trace spells it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from localfa.diagnosis import Diagnosis
from localfa.methods.none_answer import NONE
from localfa.traces.model import Trace, normalize_agent


@dataclass(frozen=True)
class Verdict:
    """The ensemble's answer from its members' diagnoses."""

    step: int | str | None  # a step, NONE (most members found no decisive error), or None (no answer)
    agent: str | None
    votes: int  # members that named `step`
    answered: int  # members that named any step
    voters: tuple[int, ...]  # positions (in member order) of the members that named `step`

    def share(self, total: int) -> float | None:
        """Agreement share: votes for the answer over `total` member runs (failed ones included)."""
        return round(self.votes / total, 4) if total else None


def vote_of(d: Diagnosis | None) -> int | str | None:
    """A member run's vote: its step, `NONE` for its "no decisive error" answer, None when it
    failed or named nothing."""
    if d is None or d.error is not None:
        return None
    return NONE if d.no_error else d.step


def tally(diagnoses: list[Diagnosis | None], trace: Trace) -> Verdict:
    """The majority vote of `diagnoses` (None for a member that failed), by the tie rule above."""
    named = [(pos, d, v) for pos, d in enumerate(diagnoses) if d is not None and (v := vote_of(d)) is not None]
    if not named:
        return Verdict(None, None, 0, 0, ())
    counts = Counter(v for _, _, v in named)
    first_vote: dict[int | str, int] = {}
    for pos, _, v in named:
        first_vote.setdefault(v, pos)
    best = max(counts, key=lambda s: (counts[s], -first_vote[s]))
    voters = tuple(pos for pos, _, v in named if v == best)
    agent = None if best == NONE else _agent(int(best), [d for _, d, v in named if v == best], trace)
    return Verdict(best, agent, counts[best], len(named), voters)


def _agent(step: int, voters: list[Diagnosis], trace: Trace) -> str | None:
    names = [normalize_agent(d.agent) for d in voters if d.agent]
    if not names:
        return trace.agent_at(step) if 0 <= step < len(trace.steps) else None
    counts = Counter(names)
    winner = max(counts, key=lambda n: (counts[n], -names.index(n)))
    spelled = next(d.agent for d in voters if d.agent and normalize_agent(d.agent) == winner)
    return trace.resolve_agent(spelled) or spelled
