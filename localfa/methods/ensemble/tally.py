"""Counting members' answers: the majority step, its agent, the agreement share.

Tie rule (stated in the README): among steps named equally often, the one whose first vote comes
earliest in member order wins, so list members best first. The agent is the one most of the
winning step's voters named (ties: the earliest such voter's), normalised for comparison and
written as the trace spells it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from localfa.diagnosis import Diagnosis
from localfa.traces.model import Trace, normalize_agent


@dataclass(frozen=True)
class Verdict:
    """The ensemble's answer from its members' diagnoses."""

    step: int | None
    agent: str | None
    votes: int  # members that named `step`
    answered: int  # members that named any step
    voters: tuple[int, ...]  # positions (in member order) of the members that named `step`

    def share(self, total: int) -> float | None:
        """Agreement share: votes for the answer over `total` member runs (failed ones included)."""
        return round(self.votes / total, 4) if total else None


def tally(diagnoses: list[Diagnosis | None], trace: Trace) -> Verdict:
    """The majority step of `diagnoses` (None for a member that failed), by the tie rule above."""
    named = [(pos, d, d.step) for pos, d in enumerate(diagnoses) if d is not None and d.error is None and d.step is not None]
    if not named:
        return Verdict(None, None, 0, 0, ())
    counts = Counter(step for _, _, step in named)
    first_vote: dict[int, int] = {}
    for pos, _, step in named:
        first_vote.setdefault(step, pos)
    best = max(counts, key=lambda s: (counts[s], -first_vote[s]))
    voters = tuple(pos for pos, _, step in named if step == best)
    return Verdict(best, _agent(best, [d for _, d, step in named if step == best], trace), counts[best], len(named), voters)


def _agent(step: int, voters: list[Diagnosis], trace: Trace) -> str | None:
    names = [normalize_agent(d.agent) for d in voters if d.agent]
    if not names:
        return trace.agent_at(step) if 0 <= step < len(trace.steps) else None
    counts = Counter(names)
    winner = max(counts, key=lambda n: (counts[n], -names.index(n)))
    spelled = next(d.agent for d in voters if d.agent and normalize_agent(d.agent) == winner)
    return trace.resolve_agent(spelled) or spelled
