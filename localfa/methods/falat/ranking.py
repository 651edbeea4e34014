"""Stage 3a (paper §2.3, app. A): a judged ranking of the refined candidates.

One request per refined candidate, all in one batch (skipped when one candidate is left): the
model sees the shared context (prior, stage summaries, suspects by region), the candidate's
labelled transitions and its raw text, reasons first, then judges the paper's three ranking
signals and rates the candidate on the bounded suspicion scale (0..SUSPICION_MAX).

The combination rule (the paper names the signals and the scale, not a formula):

    score = 2 · suspicion + signals                                   (0 .. 2·SUSPICION_MAX + 3)

where `signals` counts the three ranking signals, each true when the judge says so or an
earlier stage found it: an incorrect execution decision (the judge's `incorrect_execution`, or
the window's execution inconsistency), unverified or fabricated information (`unsupported_information`,
or the window's prior inconsistency), a typed path that reaches later steps (`affects_later`, or an
outgoing follow_up / error_shift label, or the source of a carrier chain). The judged rating
leads; the signals separate candidates it rates within a point of each other. Ties go to the
earlier step (temporal precedence). The top k (3) are verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import SUSPICION_MAX, rank_grammar, rank_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.transitions import Pair
from localfa.methods.falat.windows import StepSummary
from localfa.templates import render

PATH_LABELS = frozenset({"follow_up", "error_shift"})
SCORE_MAX = 2 * SUSPICION_MAX + 3


@dataclass(frozen=True)
class Rating:
    """The judge's answer for one candidate."""

    analysis: str
    incorrect_execution: bool
    unsupported_information: bool
    affects_later: bool
    suspicion: int

    @classmethod
    def parse(cls, value: Mapping[str, Any]) -> "Rating":
        return cls(
            value["analysis"],
            bool(value["incorrect_execution"]),
            bool(value["unsupported_information"]),
            bool(value["affects_later"]),
            min(max(int(value["suspicion"]), 0), SUSPICION_MAX),
        )


@dataclass(frozen=True)
class Ranked:
    step: int
    score: int
    suspicion: int | None  # None: not rated (a single refined candidate needs no ranking call)
    signals: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "score": self.score, "suspicion": self.suspicion, "signals": list(self.signals)}


def transitions_of(step: int, labels: Mapping[Pair, str]) -> list[dict[str, Any]]:
    """The labelled pairs that involve `step`, in order."""
    return [{"i": i, "j": j, "label": lab} for (i, j), lab in sorted(labels.items()) if step in (i, j)]


def on_path(step: int, labels: Mapping[Pair, str], sources: Mapping[int, int]) -> bool:
    """Does a typed path lead from `step` to later candidates?"""
    return any(i == step and lab in PATH_LABELS for (i, _), lab in labels.items()) or step in sources.values()


def rank_requests(
    g: Ground, shared: str, refined: Sequence[int], labels: Mapping[Pair, str], mids: Mapping[int, StepSummary]
) -> list[Request]:
    grammar = rank_grammar(g.limits)
    sampling = g.opts.sampling(rank_max_tokens(g.limits), judge=True)
    reqs = []
    for c in refined:
        (shown,) = g.view.shown([c], [g.view.clipped(c, g.opts.rank_step_tokens)])
        body = render("falat/rank.j2", limits=g.limits, scale=SUSPICION_MAX, step=shown, mid=mids[c], transitions=transitions_of(c, labels))
        reqs.append(g.ctx.request(f"falat/rank/{c}", [g.system, {"role": "user", "content": shared + "\n\n" + body}], grammar, sampling))
    return reqs


def signals_of(
    step: int, mid: StepSummary, rating: Rating | None, labels: Mapping[Pair, str], sources: Mapping[int, int]
) -> tuple[str, ...]:
    """The paper's three ranking signals that hold for `step` (judge or earlier stage)."""
    r = rating
    found = {
        "incorrect_execution": mid.execution_inconsistency or bool(r and r.incorrect_execution),
        "unsupported_information": mid.prior_inconsistency or bool(r and r.unsupported_information),
        "affects_later": on_path(step, labels, sources) or bool(r and r.affects_later),
    }
    return tuple(k for k, v in found.items() if v)


def rank(
    refined: Sequence[int],
    mids: Mapping[int, StepSummary],
    labels: Mapping[Pair, str],
    sources: Mapping[int, int],
    ratings: Mapping[int, Rating],
) -> list[Ranked]:
    """Refined candidates by score, highest first; ties to the earlier step."""
    ranked = []
    for s in refined:
        rating = ratings.get(s)
        sig = signals_of(s, mids[s], rating, labels, sources)
        judged = rating.suspicion if rating else None
        ranked.append(Ranked(s, 2 * (judged or 0) + len(sig), judged, sig))
    return sorted(ranked, key=lambda r: (-r.score, r.step))


def top_k(ranked: Sequence[Ranked], k: int) -> list[Ranked]:
    """The k best (all of them when fewer survive)."""
    return list(ranked[:k])
