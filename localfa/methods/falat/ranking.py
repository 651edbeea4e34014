"""Stage 3a (paper §2.3, app. A): a judged ranking of the refined candidates.

One request per group of candidates (`groups.py`) that kept a member, all in one batch (skipped
when one candidate is left), on the very prefix the group's links call used (shared context, then
the group's raw text), so it reads that text from the prefix cache. Per surviving member, with
its labelled transitions listed, the model reasons first, then judges the paper's three ranking
signals and rates it on the bounded suspicion scale (0..SUSPICION_MAX).

The combination rule (the paper names the signals and the scale, not a formula):

    score = 2 · suspicion + signals - (2 if its window judged it passive) - (2 if a kept carrier)

where `signals` counts the three ranking signals, each true when the judge says so or an
earlier stage found it: an incorrect execution decision (the judge's `incorrect_execution`, or
the window's execution inconsistency), unverified or fabricated information (`unsupported_information`,
or the window's prior inconsistency), a typed path that reaches later steps (`affects_later`, or an
outgoing follow_up / error_shift label, or the source of a carrier chain). The judged rating
leads; the signals separate candidates it rates within a point of each other. Ties go to the
earlier step (temporal precedence). A step its window judged passive stays rankable (that
judgement can be wrong: a task message that is also the decisive step) but loses a suspicion
point against an active one; so does a carrier kept for an inconsistency of its own (it is in
`sources`, `transitions.prune`'s rule 2): verification decides between it and its source. The
top k (3) are verified. Ratings from different calls are put on one scale by an anchor every
call rates (`calibrate`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import SUSPICION_MAX, rank_grammar, rank_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.groups import Group
from localfa.methods.falat.transitions import Pair
from localfa.methods.falat.windows import StepSummary
from localfa.templates import render

PATH_LABELS = frozenset({"follow_up", "error_shift"})
PASSIVE_PENALTY = 2  # one suspicion point: a judged-passive step ranks below an active one it ties
CARRIER_PENALTY = 2  # one suspicion point: a kept carrier ranks below a candidate it ties


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


class LinkIndex:
    """The typed links by step, built once: each step's links in order, with their reasons."""

    def __init__(self, labels: Mapping[Pair, str], reasons: Mapping[Pair, str] | None = None) -> None:
        self.by_step: dict[int, list[dict[str, Any]]] = {}
        for (i, j), lab in sorted(labels.items()):
            link = {"i": i, "j": j, "label": lab, "reason": (reasons or {}).get((i, j), "")}
            self.by_step.setdefault(i, []).append(link)
            if j != i:
                self.by_step.setdefault(j, []).append(link)
        self.leaving_path = {i for (i, _), lab in labels.items() if lab in PATH_LABELS}

    def of(self, step: int) -> list[dict[str, Any]]:
        """The links that involve `step`, in order."""
        return self.by_step.get(step, [])

    def around(self, steps: Sequence[int]) -> list[dict[str, Any]]:
        """The links that involve any of `steps`, each once, in order."""
        seen: dict[tuple[int, int], dict[str, Any]] = {}
        for s in steps:
            for link in self.of(s):
                seen[(link["i"], link["j"])] = link
        return [seen[k] for k in sorted(seen)]


def on_path(step: int, links: LinkIndex, sources: Mapping[int, int]) -> bool:
    """Does a typed path lead from `step` to later candidates?"""
    return step in links.leaving_path or step in sources.values()


@dataclass(frozen=True)
class RatingCalls:
    """The rating requests, the members each rates, and the anchor every call rates when there
    is more than one (None: one call, one scale)."""

    requests: list[Request]
    rated: list[list[int]]
    anchor: int | None


def rank_requests(
    g: Ground, groups: Sequence[Group], refined: Sequence[int], links: LinkIndex, mids: Mapping[int, StepSummary], passive: Collection[int]
) -> RatingCalls:
    """One rating request per group with surviving members. With more than one, each also rates
    the anchor (the first refined candidate, rated in its own group's call), so `calibrate` can
    put every call's ratings on the anchor's call's scale (issue 52: a 7 from one call and a 7
    from another were compared as if one judge had given both)."""
    kept = set(refined)
    planned = [(group, [c for c in group.members if c in kept]) for group in groups]
    planned = [(group, members) for group, members in planned if members]
    anchor = min(kept) if len(planned) > 1 else None
    reqs, rated = [], []
    for group, members in planned:
        asked = sorted({*members, anchor}) if anchor is not None else members
        suspects = [
            {
                "index": c,
                "agent": g.view.agent(c),
                "mid": mids[c],
                "passive": c in passive,
                "transitions": links.of(c),
                "anchor": c == anchor and c not in members,
            }
            for c in asked
        ]
        extra = [] if anchor is None or group.shows(anchor) else g.view.shown([anchor], [g.view.clipped(anchor, g.opts.rank_step_tokens)])
        body = render("falat/rank.j2", limits=g.limits, scale=SUSPICION_MAX, suspects=suspects, anchor_text=extra)
        messages = [g.system, {"role": "user", "content": group.block + "\n\n" + body}]
        sampling = g.opts.sampling(rank_max_tokens(len(asked), g.limits), judge=True)
        reqs.append(g.ctx.request(f"falat/rank/{group.key}", messages, rank_grammar(asked, g.limits), sampling))
        rated.append(members)
    return RatingCalls(reqs, rated, anchor)


def calibrate(calls: RatingCalls, answers: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[int, Rating]:
    """Every member's rating, each call's suspicions shifted by how far that call rated the
    anchor from the anchor's own call (clamped to the scale): no label, only the shared reference."""
    ratings: list[dict[int, Rating]] = [{int(k): Rating.parse(v) for k, v in a.items()} for a in answers]
    anchor = calls.anchor
    if anchor is None:
        return {c: r[c] for members, r in zip(calls.rated, ratings) for c in members}
    reference = next(r[anchor].suspicion for members, r in zip(calls.rated, ratings) if anchor in members)
    out: dict[int, Rating] = {}
    for members, r in zip(calls.rated, ratings):
        shift = reference - r[anchor].suspicion
        for c in members:
            out[c] = dataclasses.replace(r[c], suspicion=min(max(r[c].suspicion + shift, 0), SUSPICION_MAX))
    return out


def signals_of(step: int, mid: StepSummary, rating: Rating | None, links: LinkIndex, sources: Mapping[int, int]) -> tuple[str, ...]:
    """The paper's three ranking signals that hold for `step` (judge or earlier stage)."""
    r = rating
    found = {
        "incorrect_execution": mid.execution_inconsistency or bool(r and r.incorrect_execution),
        "unsupported_information": mid.prior_inconsistency or bool(r and r.unsupported_information),
        "affects_later": on_path(step, links, sources) or bool(r and r.affects_later),
    }
    return tuple(k for k, v in found.items() if v)


def rank(
    refined: Sequence[int], mids: Mapping[int, StepSummary], links: LinkIndex, sources: Mapping[int, int], ratings: Mapping[int, Rating]
) -> list[Ranked]:
    """Refined candidates by score, highest first; ties to the earlier step. `sources`: carrier ->
    the source of its chain; a carrier among `refined` was kept for an inconsistency of its own."""
    ranked = []
    for s in refined:
        rating = ratings.get(s)
        sig = signals_of(s, mids[s], rating, links, sources)
        judged = rating.suspicion if rating else None
        penalty = (0 if mids[s].active else PASSIVE_PENALTY) + (CARRIER_PENALTY if s in sources else 0)
        ranked.append(Ranked(s, 2 * (judged or 0) + len(sig) - penalty, judged, sig))
    return sorted(ranked, key=lambda r: (-r.score, r.step))


def top_k(ranked: Sequence[Ranked], k: int) -> list[Ranked]:
    """The k best (all of them when fewer survive)."""
    return list(ranked[:k])
