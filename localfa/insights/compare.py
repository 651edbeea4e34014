"""How two sweeps differ (before and after a fix): accuracy, the verdicts that moved, and which
categories grew or shrank, each with its 95% interval.

Accuracy (`accuracy_diffs`): per method both runs hold, step and agent accuracy over the traces
labelled in both (each trace's mean over its seeds, as `report` scores), and B minus A with a
paired percentile bootstrap over those traces (seeded, reproducible). Moved verdicts (`moves`):
per method and trace in both runs, the verdict (the step most of its seeds name, the earliest on a
tie, and the agent most of those name) in A and in B, where step or agent changed; with a label,
whether the change fixed or broke it.

Categories (`compare`):

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

from localfa.bench.metrics import score_record
from localfa.insights.summary import CONSENSUS, NO_CATEGORY, Diagnosed, consensus, diagnosed
from localfa.results import ResultRecord
from localfa.traces.model import normalize_agent

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


# ---- accuracy and moved verdicts ---------------------------------------------------------------

BOOTSTRAP = 2000


@dataclass(frozen=True)
class AccuracyDiff:
    """One method's accuracy in A and B over the traces labelled in both, and B - A."""

    method: str
    traces: int
    step_a: float | None
    step_b: float | None
    step_ci: tuple[float, float] | None
    agent_a: float | None
    agent_b: float | None
    agent_ci: tuple[float, float] | None

    @property
    def step_diff(self) -> float | None:
        return None if self.step_a is None or self.step_b is None else self.step_b - self.step_a

    @property
    def agent_diff(self) -> float | None:
        return None if self.agent_a is None or self.agent_b is None else self.agent_b - self.agent_a


def _per_trace(records: Sequence[ResultRecord], metric: str) -> dict[tuple[str, str], float]:
    """(method, trace) -> the mean of `metric` over the trace's scored records."""
    sums: dict[tuple[str, str], list[float]] = {}
    for r in records:
        value = score_record(r)[metric]
        if value is not None:
            sums.setdefault((r.method, r.trace), []).append(value)
    return {k: sum(v) / len(v) for k, v in sums.items()}


def paired_interval(a: Sequence[float], b: Sequence[float], n_boot: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of mean(b - a), resampling the pairs (traces)."""
    import numpy as np

    diffs = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if len(diffs) < 2 or np.all(diffs == diffs[0]):
        return float(diffs.mean()), float(diffs.mean())
    idx = np.random.default_rng(seed).integers(0, len(diffs), size=(n_boot, len(diffs)))
    lo, hi = np.percentile(diffs[idx].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def common_methods(a: Sequence[ResultRecord], b: Sequence[ResultRecord]) -> list[str]:
    """The method labels both runs hold, in A's order."""
    in_b = {r.method for r in b}
    return [m for m in dict.fromkeys(r.method for r in a) if m in in_b]


def accuracy_diffs(a: Sequence[ResultRecord], b: Sequence[ResultRecord]) -> list[AccuracyDiff]:
    """Per method both runs hold, its accuracy difference (see the module doc); methods with no
    trace labelled in both are left out."""
    out = []
    scores = {m: (_per_trace(a, m), _per_trace(b, m)) for m in ("step", "agent")}
    for method in common_methods(a, b):
        row: dict[str, tuple[float | None, float | None, tuple[float, float] | None]] = {}
        traces: set[str] = set()
        for metric, (sa, sb) in scores.items():
            keys = sorted(k for k in sa if k[0] == method and k in sb)
            traces.update(t for _, t in keys)
            if not keys:
                row[metric] = (None, None, None)
                continue
            va, vb = [sa[k] for k in keys], [sb[k] for k in keys]
            row[metric] = (sum(va) / len(va), sum(vb) / len(vb), paired_interval(va, vb))
        if traces:
            out.append(AccuracyDiff(method, len(traces), *row["step"], *row["agent"]))
    return out


@dataclass(frozen=True)
class Verdict:
    step: int | None
    agent: str | None
    error: bool = False

    def text(self) -> str:
        if self.error:
            return "error"
        return f"step {self.step} by {self.agent}" if self.step is not None else f"no step ({self.agent or 'no agent'})"


def verdicts(records: Sequence[ResultRecord]) -> dict[tuple[str, str], Verdict]:
    """(method, trace) -> its verdict over seeds (see the module doc); all seeds failed: error."""
    by_key: dict[tuple[str, str], list[ResultRecord]] = {}
    for r in records:
        by_key.setdefault((r.method, r.trace), []).append(r)
    out = {}
    for key, recs in by_key.items():
        answered = [r for r in recs if not r.error]
        if not answered:
            out[key] = Verdict(None, None, error=True)
            continue
        steps = Counter(r.step for r in answered)
        step = min(steps, key=lambda s: (-steps[s], -1 if s is None else s))
        agents = Counter(normalize_agent(r.agent) for r in answered if r.step == step and r.agent)
        agent = min(agents, key=lambda x: (-agents[x], x)) if agents else None
        shown = next((r.agent for r in answered if r.step == step and r.agent and normalize_agent(r.agent) == agent), None)
        out[key] = Verdict(step, shown)
    return out


@dataclass(frozen=True)
class Move:
    """A verdict that changed between A and B; `change` is fixed, broke or changed (no label,
    or right or wrong both times)."""

    method: str
    trace: str
    a: Verdict
    b: Verdict
    label_step: int | None
    label_agent: str | None
    change: str


def _right(v: Verdict, label_step: int | None) -> bool | None:
    return None if label_step is None else (not v.error and v.step == label_step)


def moves(a: Sequence[ResultRecord], b: Sequence[ResultRecord]) -> tuple[list[Move], int]:
    """(the verdicts that moved, the (method, trace) pairs compared)."""
    va, vb = verdicts(a), verdicts(b)
    labels = {r.trace: r.label for r in [*a, *b] if r.label is not None}
    methods = set(common_methods(a, b))
    pairs = sorted(k for k in va if k in vb and k[0] in methods)
    out = []
    for method, trace in pairs:
        x, y = va[(method, trace)], vb[(method, trace)]
        same_agent = (x.agent is None) == (y.agent is None) and normalize_agent(x.agent or "") == normalize_agent(y.agent or "")
        if x.error == y.error and x.step == y.step and same_agent:
            continue
        label = labels.get(trace)
        step = label.mistake_step if label is not None else None
        before, after = _right(x, step), _right(y, step)
        change = "fixed" if before is False and after else "broke" if before and after is False else "changed"
        out.append(Move(method, trace, x, y, step, label.mistake_agent if label is not None else None, change))
    return out, len(pairs)
