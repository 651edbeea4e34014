"""Prism's arithmetic on prefill signals: symptoms, candidates and the pass-2 ranking.

Pure functions over per-step mean token NLL (`nll[i]`, None: not scored) and step-to-step
attention (`att[m][k]`: step m's tokens' attention to step k's, averaged over m's tokens, the
heads and the last layers), as `localfa.engine.scoring` returns them. Following the design note
(`../shared/papers/masprism-note.md`, from secondary sources):

- symptoms: steps sorted by NLL, those holding failure words first; the top `share` (20% on
  Who&When), at least one;
- candidates: H_k = sum over later symptoms m of att[m][k]; the top K earlier steps;
- ranking (pass 2): s(k|m) = (att[m][k] / mean_j<m att[m][j]) * (1 + max(0, N_m - N_k)),
  Fuse(k) = sum over symptoms m after k of s(k|m), Score(k) = Fuse(k) * (1 + 0.3 |V_k|), V_k the
  symptoms whose top-K attended earlier steps include k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import regex as re

FAILURE_WORDS = re.compile(
    r"\b(error|errors|exception|traceback|failed|fails|failure|unable|cannot|can't|not found|invalid|incorrect|"
    r"wrong|timed? ?out|denied|refused|mistake|unsuccessful|no results?)\b",
    re.IGNORECASE,
)
SUPPORT_BONUS = 0.3  # Score(k) = Fuse(k) * (1 + 0.3 |V_k|)

Matrix = list[list[float]]


def has_failure_words(text: str) -> bool:
    return FAILURE_WORDS.search(text) is not None


def symptoms(nll: list[float | None], failing: list[bool], share: float) -> list[int]:
    """The top `share` of scored steps by NLL, steps with failure words first (at least one)."""
    scored = [i for i, x in enumerate(nll) if x is not None]
    if not scored:
        return []
    ordered = sorted(scored, key=lambda i: (not failing[i], -(nll[i] or 0.0), i))
    return sorted(ordered[: max(1, math.ceil(share * len(scored)))])


def top_attended(att: Matrix, m: int, k: int, among: set[int] | None = None) -> list[int]:
    """The `k` earlier steps m attends to most (restricted to `among` where given)."""
    earlier = [j for j in range(m) if among is None or j in among]
    return sorted(earlier, key=lambda j: (-att[m][j], j))[:k]


def candidates(att: Matrix, symptom_steps: list[int], allowed: set[int], k: int) -> list[int]:
    """H_j = sum over symptoms m after j of att[m][j]; the top `k` allowed steps with H_j > 0."""
    h = {j: sum(att[m][j] for m in symptom_steps if m > j) for j in allowed}
    ranked = sorted((j for j in h if h[j] > 0), key=lambda j: (-h[j], j))
    return ranked[:k]


@dataclass
class Ranked:
    """Pass 2's ranking: every candidate's score, its support, and the links that gave it."""

    scores: dict[int, float]
    support: dict[int, list[int]]  # candidate -> symptoms whose top-K attended steps include it
    links: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # candidate -> (symptom, s(k|m))

    def order(self) -> list[int]:
        return sorted(self.scores, key=lambda k: (-self.scores[k], k))

    def margin(self) -> float:
        """(best - second) / best: 1 when one candidate stands alone, 0 on a tie or no signal."""
        top = sorted(self.scores.values(), reverse=True)
        if not top or top[0] <= 0:
            return 0.0
        return (top[0] - (top[1] if len(top) > 1 else 0.0)) / top[0]


def rank(att: Matrix, nll: list[float | None], symptom_steps: list[int], cands: list[int], k: int) -> Ranked:
    """Score each candidate by the attention later symptoms pay it, weighted by the NLL drop."""
    scores: dict[int, float] = {}
    links: dict[int, list[tuple[int, float]]] = {c: [] for c in cands}
    support: dict[int, list[int]] = {c: [] for c in cands}
    for m in symptom_steps:
        if m == 0:
            continue
        mean = sum(att[m][:m]) / m
        if mean <= 0:
            continue
        top = set(top_attended(att, m, k))
        n_m = nll[m] or 0.0
        for c in cands:
            if c >= m:
                continue
            s = att[m][c] / mean * (1 + max(0.0, n_m - (nll[c] or 0.0)))
            links[c].append((m, s))
            if c in top:
                support[c].append(m)
    for c in cands:
        scores[c] = sum(s for _, s in links[c]) * (1 + SUPPORT_BONUS * len(support[c]))
    return Ranked(scores, support, links)


def rank_by_nll(nll: list[float | None], failing: list[bool], cands: list[int]) -> Ranked:
    """The NLL-only variant (no attention, e.g. vLLM): a candidate's pass-2 NLL, raised by 30%
    where it holds failure words; support is empty."""
    scores = {c: (nll[c] or 0.0) * (1 + SUPPORT_BONUS * failing[c]) for c in cands}
    return Ranked(scores, {c: [] for c in cands})
