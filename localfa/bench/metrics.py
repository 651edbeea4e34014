"""Scores over sweep records: pure functions of a record's prediction and its `label`.

A record is one JSON line of `results.jsonl` (see `localfa.bench.sweep`): a Diagnosis record plus
``label = {mistake_step, mistake_agent, fault_steps, high_impact_steps}`` (None when the trace
has no labels). Per record, each metric is 1.0, 0.0, or None when it does not apply:

- agent: normalised exact match (``normalize_agent``: case, spacing, ``(thought)`` suffixes).
- step: exact match of the 0-based step; ``tol_k``: ``|predicted - labelled| <= k``, k = 1..5.
- precision: the predicted step is one of the labelled faults (multi-fault labels).
- strict_precision: the predicted step is one of the high-impact faults.
- span_f1 / first_error (predictions with `spans` only): F1 of predicted steps against the
  labelled fault steps as sets; whether the earliest predicted step is the earliest fault.
- step_substring: Who&When's reference scorer, which tests ``str(label) in str(prediction)``, so
  a label "7" matches a prediction "17". Only to compare with published tables, never as ours.

A record that failed (error, no step) scores 0 where a prediction was needed: failures are never
dropped from the denominator. Aggregation first averages a trace's records over seeds, then
averages traces; the 95% interval is a percentile bootstrap over traces with a fixed seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from localfa.traces.model import normalize_agent

TOLERANCES: tuple[int, ...] = (1, 2, 3, 4, 5)
METRICS: tuple[str, ...] = (
    "agent", "step", *(f"tol_{k}" for k in TOLERANCES),
    "precision", "strict_precision", "span_f1", "first_error", "step_substring",
)
METRIC_TITLES: dict[str, str] = {
    "agent": "agent acc", "step": "step acc", **{f"tol_{k}": f"±{k}" for k in TOLERANCES},
    "precision": "precision", "strict_precision": "strict prec.", "span_f1": "span F1",
    "first_error": "first-error acc",
    "step_substring": "step acc, W&W substring scorer (compare with published tables only)",
}
COST_FIELDS: tuple[str, ...] = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")
OVERALL = "overall"


# ---- per record --------------------------------------------------------------------------------

def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def predicted_steps(record: dict[str, Any]) -> set[int]:
    """Steps a span prediction covers (inclusive ranges); empty when there are no spans."""
    out: set[int] = set()
    for span in record.get("spans") or []:
        a, b = _as_int(span[0]), _as_int(span[1])
        if a is None or b is None:
            continue
        lo, hi = min(a, b), max(a, b)
        out.update(range(lo, hi + 1))
    return out


def gold_steps(label: dict[str, Any]) -> set[int]:
    """The labelled fault steps; the decisive step alone when no fault list is given."""
    faults = {s for s in (_as_int(x) for x in label.get("fault_steps") or []) if s is not None}
    if not faults and _as_int(label.get("mistake_step")) is not None:
        faults = {_as_int(label["mistake_step"])}  # type: ignore[arg-type]
    return faults


def span_f1(pred: set[int], gold: set[int]) -> float:
    """F1 of two step sets (1.0 when both are empty)."""
    if not pred and not gold:
        return 1.0
    if not pred or not gold:
        return 0.0
    return 2 * len(pred & gold) / (len(pred) + len(gold))


def substring_match(label_step: Any, predicted_step: Any) -> bool:
    """Who&When's reference rule: the label's digits appear anywhere in the prediction's."""
    if label_step is None or predicted_step is None:
        return False
    return str(label_step) in str(predicted_step)


def score_record(record: dict[str, Any]) -> dict[str, float | None]:
    """Every metric for one record (None where it does not apply, e.g. no label)."""
    scores: dict[str, float | None] = {m: None for m in METRICS}
    label = record.get("label")
    if not label:
        return scores
    pred = _as_int(record.get("step"))
    gold = _as_int(label.get("mistake_step"))
    if label.get("mistake_agent"):
        agent = record.get("agent")
        scores["agent"] = float(bool(agent) and normalize_agent(str(agent)) == normalize_agent(str(label["mistake_agent"])))
    if gold is not None:
        scores["step"] = float(pred is not None and pred == gold)
        for k in TOLERANCES:
            scores[f"tol_{k}"] = float(pred is not None and abs(pred - gold) <= k)
        scores["step_substring"] = float(substring_match(gold, pred))
    faults = [s for s in (_as_int(x) for x in label.get("fault_steps") or []) if s is not None]
    if faults:
        scores["precision"] = float(pred is not None and pred in faults)
    high = [s for s in (_as_int(x) for x in label.get("high_impact_steps") or []) if s is not None]
    if high:
        scores["strict_precision"] = float(pred is not None and pred in high)
    if record.get("spans") is not None:
        g = gold_steps(label)
        if g:
            p = predicted_steps(record)
            scores["span_f1"] = span_f1(p, g)
            first = min(p) if p else pred
            scores["first_error"] = float(first is not None and first == min(g))
    return scores


def is_multi_fault(label: dict[str, Any] | None) -> bool:
    """A label with several faults or a high-impact subset (precision metrics apply)."""
    if not label:
        return False
    return len(label.get("fault_steps") or []) > 1 or bool(label.get("high_impact_steps"))


# ---- aggregation -------------------------------------------------------------------------------

@dataclass
class Estimate:
    """A mean over traces with its bootstrap 95% interval; n = traces that had the metric."""

    mean: float | None
    lo: float | None
    hi: float | None
    n: int

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n}


def bootstrap_ci(values: Iterable[float], n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> Estimate:
    """Mean and percentile-bootstrap interval of per-trace values (fixed seed: reproducible)."""
    vals = np.asarray(list(values), dtype=float)
    n = len(vals)
    if n == 0:
        return Estimate(None, None, None, 0)
    mean = float(vals.mean())
    if n == 1 or n_boot <= 0 or np.all(vals == vals[0]):
        return Estimate(mean, mean, mean, n)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    means = vals[idx].mean(axis=1)
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Estimate(mean, float(lo), float(hi), n)


@dataclass
class GroupSummary:
    """Metrics and cost of one (method, budget, subset) group."""

    method: str
    budget: str
    subset: str
    records: int = 0
    traces: int = 0
    seeds: list[int] = field(default_factory=list)
    errors: int = 0
    metrics: dict[str, Estimate] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)  # per trace-run (record) means
    multi_fault: bool = False
    spans: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method, "budget": self.budget, "subset": self.subset,
            "records": self.records, "traces": self.traces, "seeds": self.seeds, "errors": self.errors,
            "metrics": {k: v.as_dict() for k, v in self.metrics.items()}, "cost": self.cost,
            "multi_fault": self.multi_fault, "spans": self.spans,
        }


def _budget_of(record: dict[str, Any]) -> str:
    return str(record.get("budget") or "none")


def summarize_group(method: str, budget: str, subset: str, records: list[dict[str, Any]],
                    n_boot: int = 1000, seed: int = 0) -> GroupSummary:
    """Aggregate one group: per trace, mean over its seeds; then mean and CI over traces."""
    g = GroupSummary(method, budget, subset, records=len(records))
    g.seeds = sorted({int(r.get("seed", 0)) for r in records})
    g.errors = sum(1 for r in records if r.get("error"))
    g.multi_fault = any(is_multi_fault(r.get("label")) for r in records)
    g.spans = any(r.get("spans") is not None for r in records)
    by_trace: dict[str, list[dict[str, float | None]]] = {}
    for r in records:
        by_trace.setdefault(str(r.get("trace")), []).append(score_record(r))
    g.traces = len(by_trace)
    for m in METRICS:
        per_trace: list[float] = []
        for scores in by_trace.values():
            vals = [s[m] for s in scores if s[m] is not None]
            if vals:
                per_trace.append(sum(vals) / len(vals))  # type: ignore[arg-type]
        g.metrics[m] = bootstrap_ci(per_trace, n_boot=n_boot, seed=seed)
    n = max(1, len(records))
    for f in COST_FIELDS:
        g.cost[f] = sum(float((r.get("usage") or {}).get(f, 0) or 0) for r in records) / n
    g.cost["tokens"] = g.cost["prompt_tokens"] + g.cost["completion_tokens"]
    g.cost["wall_s"] = sum(float(r.get("wall_s") or 0.0) for r in records) / n
    return g


def summarize(records: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0,
              method_order: list[str] | None = None) -> list[GroupSummary]:
    """One GroupSummary per (method, budget) and subset, plus an "overall" row for each.

    Order: methods as in `method_order` (e.g. the manifest's), then as first seen in the records;
    budgets as first seen; subsets sorted, overall last. An empty run gives an empty list.
    """
    order: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        key = (str(r.get("method")), _budget_of(r))
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(r)
    rank = {m: i for i, m in enumerate(method_order or [])}
    order.sort(key=lambda k: rank.get(k[0], len(rank)))  # stable: first-seen order otherwise
    out: list[GroupSummary] = []
    for method, budget in order:
        recs = groups[(method, budget)]
        subsets = sorted({str(r.get("subset")) for r in recs if r.get("subset")})
        for sub in subsets:
            out.append(summarize_group(method, budget, sub, [r for r in recs if str(r.get("subset")) == sub], n_boot, seed))
        out.append(summarize_group(method, budget, OVERALL, recs, n_boot, seed))
    return out


def tolerance_curve(summary: GroupSummary) -> list[tuple[int, float | None]]:
    """(k, accuracy within ±k) for k = 0..5 (k = 0 is step accuracy)."""
    pts = [(0, summary.metrics["step"].mean)]
    pts += [(k, summary.metrics[f"tol_{k}"].mean) for k in TOLERANCES]
    return pts
