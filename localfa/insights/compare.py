"""Which categories grew or shrank between two sweeps (before and after a fix), with intervals.

The unit is a trace, not a record: the seeds of one trace are not independent runs of the agent,
so each trace counts once, with the category its records agree on (`summary.consensus` over the
records of the method compared, or of every method for the ``consensus`` row). A category's share
is the share of diagnosed traces in it; the shift is B's share minus A's, with Newcombe's hybrid
score interval (Wilson intervals of each share combined), which stays inside [-1, 1] and behaves
at shares near 0 or 1 and at a few dozen traces, where a normal approximation does not.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from localfa.insights.summary import CONSENSUS, NO_CATEGORY, Diagnosed, consensus, diagnosed
from localfa.results import ResultRecord

Z95 = 1.959964


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n ((0, 1) when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k_a: int, n_a: int, k_b: int, n_b: int, z: float = Z95) -> tuple[float, float]:
    """Interval of p_b - p_a (Newcombe 1998, method 10: hybrid score)."""
    p_a = k_a / n_a if n_a else 0.0
    p_b = k_b / n_b if n_b else 0.0
    lo_a, hi_a = wilson(k_a, n_a, z)
    lo_b, hi_b = wilson(k_b, n_b, z)
    d = p_b - p_a
    return d - math.sqrt((p_b - lo_b) ** 2 + (hi_a - p_a) ** 2), d + math.sqrt((hi_b - p_b) ** 2 + (p_a - lo_a) ** 2)


@dataclass(frozen=True)
class Shift:
    method: str
    category: str
    k_a: int
    n_a: int
    k_b: int
    n_b: int

    @property
    def share_a(self) -> float:
        return self.k_a / self.n_a if self.n_a else 0.0

    @property
    def share_b(self) -> float:
        return self.k_b / self.n_b if self.n_b else 0.0

    @property
    def shift(self) -> float:
        return self.share_b - self.share_a

    @property
    def ci95(self) -> tuple[float, float]:
        return newcombe(self.k_a, self.n_a, self.k_b, self.n_b)

    @property
    def significant(self) -> bool:
        lo, hi = self.ci95
        return lo > 0 or hi < 0


def per_trace(items: Sequence[Diagnosed]) -> Counter:
    """Category -> number of traces whose records agree on it (one vote per trace)."""
    return Counter(d.category or NO_CATEGORY for d in consensus(items))


def compare(a: Sequence[ResultRecord], b: Sequence[ResultRecord]) -> list[Shift]:
    """Per method label both runs hold (and the consensus of all), each category's shift."""
    da, db = diagnosed(a), diagnosed(b)
    methods = [m for m in dict.fromkeys(d.method for d in da) if any(x.method == m for x in db)]
    rows: list[Shift] = []
    groups = [(m, [d for d in da if d.method == m], [d for d in db if d.method == m]) for m in methods]
    if len(methods) != 1:
        groups.append((CONSENSUS, list(da), list(db)))
    for method, items_a, items_b in groups:
        ca, cb = per_trace(items_a), per_trace(items_b)
        n_a, n_b = sum(ca.values()), sum(cb.values())
        for cat in sorted(set(ca) | set(cb), key=lambda c: (-(cb[c] / max(n_b, 1) - ca[c] / max(n_a, 1)), c)):
            rows.append(Shift(method, cat, ca[cat], n_a, cb[cat], n_b))
    return rows
