"""The one scorer: pure functions of a `ResultRecord`'s prediction and its `label`.

`diagnose`'s summary, the sweep's running accuracy and `report` all score through
`score_record`. A record (`localfa.results.ResultRecord`) carries the trace's labels
(``label``: mistake_step, mistake_agent, fault_steps, high_impact_steps; None when the trace has
none). Per record, each metric is 1.0, 0.0, or None when it does not apply:

- agent: normalised exact match (``normalize_agent``: case, spacing, ``(thought)`` suffixes).
- step: exact match of the 0-based step; ``tol_k``: ``|predicted - labelled| <= k``, k = 1..5.
- precision: the predicted step is one of the labelled faults (multi-fault labels).
- strict_precision: the predicted step is one of the high-impact faults.
- span_precision / span_recall / span_f1 (span methods only: records with `spans`, and every
  record of a group where any record has them; and only on traces whose labels carry spans:
  TRAIL-style `fault_spans`, or several fault steps, `has_span_labels`): precision, recall and F1 of the predicted steps against the
  labelled fault steps as sets (`gold_steps`: the labelled `fault_spans` and `fault_steps`
  together). Who&When labels one decisive step, not the chain of spans a span method is meant
  to find, so there step and agent accuracy apply, not a span F1.
- first_error (span methods, any labelled fault): the earliest predicted span overlaps the
  earliest labelled fault span (`first_error_hit`; two single steps: the same step). An empty
  prediction (no error found) or a failed one is a miss (0 on every span metric).
- no_error (runs labelled with no fault, TELBench's no-error cases): the method answered "no
  decisive error" (`localfa.methods.none_answer`, allowed with ``--allow-none``). On every other
  labelled run that answer names no step, so it scores 0 on step and agent like any miss.
- step_substring: Who&When's reference scorer, which tests ``str(label) in str(prediction)``, so
  a label "7" matches a prediction "17". Only to compare with published tables, never as ours.

A record that failed (error, no step) scores 0 where a prediction was needed: failures are never
dropped from the denominator. Aggregation (`AGGREGATION`) first averages a trace's records over
seeds, then averages traces; the 95% interval (`INTERVAL`) is a percentile bootstrap over traces
with a fixed seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from localfa.results import ResultRecord
from localfa.traces.model import Labels, normalize_agent, step_runs

TOLERANCES: tuple[int, ...] = (1, 2, 3, 4, 5)
METRICS: tuple[str, ...] = (
    "agent",
    "step",
    *(f"tol_{k}" for k in TOLERANCES),
    "precision",
    "strict_precision",
    "span_precision",
    "span_recall",
    "span_f1",
    "first_error",
    "no_error",
    "step_substring",
    "fallback",
    "step_found",
    "step_fallback",
    "ref_span_precision",
    "ref_span_recall",
    "ref_span_f1",
    "ref_first_error",
)
# A method that answers a step even when it found no error (DRIFT's fallback: `details.step_is_fallback`)
# is scored apart: the share of its answers that are fallbacks, and step accuracy over found errors
# and over fallback answers separately (a fallback that lands is a judgement, not a found error).
# The DRIFT authors' evaluation (NJU-LINK/DRIFT, src/drift_open/evaluate.py), beside ours and named
# apart: precision, recall and F1 of the predicted against the gold unit sets for EVERY labelled
# case (both empty = 1; empty prediction = 0 precision against a non-empty gold), averaged over
# cases (macro); first-error accuracy is the exact match of the first predicted and first gold
# unit. A unit is a step here (a TELBench span is one step, `localfa.traces.importers.telbench`).
# Ours: span P/R/F1 only where the gold lists every faulty step (`has_span_labels`), first error
# as an overlap of the earliest predicted and labelled ranges.
METRIC_TITLES: dict[str, str] = {
    "ref_span_precision": "span P (ref)",
    "ref_span_recall": "span R (ref)",
    "ref_span_f1": "span F1 (ref)",
    "ref_first_error": "first err (ref)",
    "fallback": "fallback share",
    "step_found": "step acc (found)",
    "step_fallback": "step acc (fallback)",
    "agent": "agent acc",
    "step": "step acc",
    **{f"tol_{k}": f"±{k}" for k in TOLERANCES},
    "precision": "precision",
    "strict_precision": "strict prec.",
    "span_precision": "span prec.",
    "span_recall": "span recall",
    "span_f1": "span F1",
    "first_error": "first-error acc",
    "no_error": "no-error acc",
    "step_substring": "step acc, W&W substring scorer (compare with published tables only)",
}
COST_FIELDS: tuple[str, ...] = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")
OVERALL = "overall"
AGGREGATION = "per-trace mean over seeds, then mean over traces"
INTERVAL = "95% percentile bootstrap over traces"


# ---- per record --------------------------------------------------------------------------------


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class StepRanges:
    """A set of steps kept as sorted, disjoint inclusive ranges: its size and overlaps cost the
    number of ranges, never their width, so a forged span of 10**9 steps costs nothing."""

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        merged: list[list[int]] = []
        for lo, hi in sorted((min(a, b), max(a, b)) for a, b in ranges):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self.ranges = [(lo, hi) for lo, hi in merged]

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __iter__(self) -> Any:
        for lo, hi in self.ranges:
            yield from range(lo, hi + 1)

    def __and__(self, other: "StepRanges") -> "StepRanges":
        out, i, j = [], 0, 0
        a, b = self.ranges, other.ranges
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return StepRanges(out)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StepRanges):
            return self.ranges == other.ranges
        if isinstance(other, (set, frozenset)):
            return self.ranges == StepRanges((s, s) for s in other).ranges
        return NotImplemented

    def __repr__(self) -> str:
        return f"StepRanges({self.ranges})"

    def min(self) -> int:
        return self.ranges[0][0]


def predicted_steps(record: ResultRecord) -> StepRanges:
    """Steps a span prediction covers (inclusive ranges); empty when there are no spans."""
    return StepRanges(_ranges(record.spans or []))


def gold_steps(label: Labels) -> StepRanges:
    """The labelled fault steps and the steps of the labelled fault spans; else the decisive step."""
    faults = StepRanges(_ranges(label.fault_spans) + [(s, s) for s in label.fault_steps])
    if not faults and label.mistake_step is not None:
        faults = StepRanges([(label.mistake_step, label.mistake_step)])
    return faults


def span_f1(pred: StepRanges | set[int], gold: StepRanges | set[int]) -> float:
    """F1 of two step sets (1.0 when both are empty)."""
    p, g = _as_ranges(pred), _as_ranges(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    return 2 * len(p & g) / (len(p) + len(g))


def _as_ranges(steps: StepRanges | set[int]) -> StepRanges:
    return steps if isinstance(steps, StepRanges) else StepRanges((s, s) for s in steps)


def substring_match(label_step: Any, predicted_step: Any) -> bool:
    """Who&When's reference rule: the label's digits appear anywhere in the prediction's."""
    if label_step is None or predicted_step is None:
        return False
    return str(label_step) in str(predicted_step)


def score_record(record: ResultRecord, span_method: bool = False) -> dict[str, float | None]:
    """Every metric for one record (None where it does not apply, e.g. no label).

    `span_method`: the record comes from a method that predicts spans, so a record without
    spans (a failure) scores 0 on the span metrics instead of leaving them out.
    """
    scores: dict[str, float | None] = {m: None for m in METRICS}
    label = record.label
    if label is None:
        return scores
    if label.no_fault:  # the right answer is "no decisive error"
        scores["no_error"] = float(record.no_error and not record.error)
    pred = record.step
    gold = label.mistake_step
    if label.mistake_agent:
        agent = record.agent
        scores["agent"] = float(bool(agent) and normalize_agent(str(agent)) == normalize_agent(label.mistake_agent))
    if gold is not None:
        scores["step"] = float(pred is not None and pred == gold)
        for k in TOLERANCES:
            scores[f"tol_{k}"] = float(pred is not None and abs(pred - gold) <= k)
        scores["step_substring"] = float(substring_match(gold, pred))
        fallback = (record.details or {}).get("step_is_fallback")
        if isinstance(fallback, bool) and not record.error:
            scores["fallback"] = float(fallback)
            scores["step_fallback" if fallback else "step_found"] = scores["step"]
    if label.fault_steps:
        scores["precision"] = float(pred is not None and pred in label.fault_steps)
    if label.high_impact_steps:
        scores["strict_precision"] = float(pred is not None and pred in label.high_impact_steps)
    if record.spans is not None or span_method:
        g = gold_steps(label)
        if g and has_span_labels(label):
            p = predicted_steps(record)
            scores["span_precision"] = len(p & g) / len(p) if p else 0.0
            scores["span_recall"] = len(p & g) / len(g)
            scores["span_f1"] = span_f1(p, g)
        if g:
            scores["first_error"] = first_error_hit(record, label)
        scores.update(reference_span_scores(predicted_steps(record), g, label))
    return scores


def reference_span_scores(pred: StepRanges, gold: StepRanges, label: Labels) -> dict[str, float]:
    """The DRIFT authors' per-case span scores over unit (step) sets (see METRIC_TITLES' note)."""
    tp = len(pred & gold)
    precision = tp / len(pred) if pred else float(not gold)
    recall = tp / len(gold) if gold else float(not pred)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    first_gold = label.mistake_step if label.mistake_step is not None else (gold.min() if gold else None)
    first = float(not pred) if first_gold is None else float(bool(pred) and pred.min() == first_gold)
    return {"ref_span_precision": precision, "ref_span_recall": recall, "ref_span_f1": f1, "ref_first_error": first}


def has_span_labels(label: Labels) -> bool:
    """The label lists every faulty step (spans, or several steps), not one decisive step."""
    return bool(label.fault_spans) or len(set(label.fault_steps)) > 1


def _ranges(spans: Iterable[Any]) -> list[tuple[int, int]]:
    out = []
    for span in spans:
        a, b = _as_int(span[0]), _as_int(span[1])
        if a is not None and b is not None:
            out.append((min(a, b), max(a, b)))
    return out


def first_error_hit(record: ResultRecord, label: Labels) -> float:
    """1.0 when the earliest predicted span overlaps the earliest labelled fault span.

    Labelled spans are `fault_spans` and the runs of consecutive `fault_steps`, else the decisive
    step. A prediction of span (3, 6) against a decisive step 5 is a hit; no predicted span is a miss.
    """
    gold = _ranges(label.fault_spans) + step_runs(label.fault_steps)
    if not gold and label.mistake_step is not None:
        gold = [(label.mistake_step, label.mistake_step)]
    pred = _ranges(record.spans or [])
    if not gold or not pred:
        return 0.0
    (pa, pb), (ga, gb) = min(pred), min(gold)
    return float(pa <= gb and ga <= pb)


def is_multi_fault(label: Labels | None) -> bool:
    """A label with several faults or a high-impact subset (precision metrics apply)."""
    if label is None:
        return False
    return len(label.fault_steps) > 1 or bool(label.high_impact_steps)


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
    transient_errors: int = 0  # engine errors a resumed sweep retries
    unreadable: int = 0  # errors of trace files that could not be read (no label: not scored)
    forced: int = 0  # answers forced out of the model (SAFARI: turns, budget or a failed turn ran out)
    turn_failures: int = 0  # runs where a turn the engine could not produce ended the search
    metrics: dict[str, Estimate] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)  # per trace-run (record) means
    multi_fault: bool = False
    spans: bool = False

    @property
    def balanced(self) -> bool:
        """Every trace has a record for every seed (else some runs are missing)."""
        return self.records == len(self.seeds) * self.traces

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "budget": self.budget,
            "subset": self.subset,
            "records": self.records,
            "traces": self.traces,
            "seeds": self.seeds,
            "errors": self.errors,
            "transient_errors": self.transient_errors,
            "unreadable": self.unreadable,
            "forced": self.forced,
            "turn_failures": self.turn_failures,
            "balanced": self.balanced,
            "aggregation": AGGREGATION,
            "interval": INTERVAL,
            "metrics": {k: v.as_dict() for k, v in self.metrics.items()},
            "cost": self.cost,
            "multi_fault": self.multi_fault,
            "spans": self.spans,
        }


def summarize_group(
    method: str, budget: str, subset: str, records: list[ResultRecord], n_boot: int = 1000, seed: int = 0, span_method: bool | None = None
) -> GroupSummary:
    """Aggregate one group: per trace, mean over its seeds; then mean and CI over traces.

    `span_method` (default: any record of the group has spans) scores records without spans
    as span misses.
    """
    g = GroupSummary(method, budget, subset, records=len(records))
    g.seeds = sorted({r.seed for r in records})
    g.errors = sum(1 for r in records if r.error)
    g.transient_errors = sum(1 for r in records if r.error and r.error_kind == "transient")
    g.unreadable = sum(1 for r in records if r.never_read)
    g.forced = sum(1 for r in records if r.stop_reason == "forced" or (r.details or {}).get("forced_by"))
    g.turn_failures = sum(1 for r in records if (r.details or {}).get("turn_failure"))
    g.multi_fault = any(is_multi_fault(r.label) for r in records)
    g.spans = any(r.spans is not None for r in records) if span_method is None else span_method
    by_trace: dict[str, list[dict[str, float | None]]] = {}
    for r in records:
        by_trace.setdefault(r.trace, []).append(score_record(r, span_method=g.spans))
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
        g.cost[f] = sum(float(r.usage.get(f, 0) or 0) for r in records) / n
    g.cost["tokens"] = g.cost["prompt_tokens"] + g.cost["completion_tokens"]
    g.cost["wall_s"] = sum(float(r.wall_s or 0.0) for r in records) / n
    return g


def summarize(records: list[ResultRecord], n_boot: int = 1000, seed: int = 0, method_order: list[str] | None = None) -> list[GroupSummary]:
    """One GroupSummary per (method, budget) and subset, plus an "overall" row for each.

    Order: methods as in `method_order` (e.g. the manifest's), then as first seen in the records;
    budgets as first seen; subsets sorted, overall last. An empty run gives an empty list.
    """
    order: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[ResultRecord]] = {}
    for r in records:
        key = (r.method, r.budget)
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(r)
    rank = {m: i for i, m in enumerate(method_order or [])}
    order.sort(key=lambda k: rank.get(k[0], len(rank)))  # stable: first-seen order otherwise
    out: list[GroupSummary] = []
    for method, budget in order:
        recs = groups[(method, budget)]
        spans = any(r.spans is not None for r in recs)  # a span method: its failures are span misses
        subsets = sorted({r.subset for r in recs if r.subset})
        for sub in subsets:
            out.append(summarize_group(method, budget, sub, [r for r in recs if r.subset == sub], n_boot, seed, spans))
        out.append(summarize_group(method, budget, OVERALL, recs, n_boot, seed, spans))
    return out


def tolerance_curve(summary: GroupSummary) -> list[tuple[int, float | None]]:
    """(k, accuracy within ±k) for k = 0..5 (k = 0 is step accuracy)."""
    pts = [(0, summary.metrics["step"].mean)]
    pts += [(k, summary.metrics[f"tol_{k}"].mean) for k in TOLERANCES]
    return pts


@dataclass(frozen=True)
class Agreement:
    """How stable a method's first error is across seeds (`first_error_agreement`)."""

    same: int  # traces where every seed gives the same first error
    traces: int  # traces where at least one seed found an error (the ones agreement is counted over)
    found_none: int  # traces where no seed found any error (not counted: agreeing on nothing is no skill)
    pairwise: float  # share of seed pairs that agree, over the counted traces

    @property
    def share(self) -> float:
        return self.same / self.traces if self.traces else 0.0


def first_error_agreement(runs: dict[int, dict[str, object]]) -> Agreement:
    """Agreement of the first error across seeds: `runs` is seed -> trace -> first error (None:
    that run found no error). Counted only where at least one run found an error."""
    import itertools

    seeds = sorted(runs)
    traces = sorted({t for r in runs.values() for t in r})
    counted = [t for t in traces if any(runs[s].get(t) is not None for s in seeds)]
    same = sum(len({runs[s].get(t) for s in seeds}) == 1 for t in counted)
    pairs = [runs[a].get(t) == runs[b].get(t) for a, b in itertools.combinations(seeds, 2) for t in counted]
    return Agreement(same, len(counted), len(traces) - len(counted), sum(pairs) / len(pairs) if pairs else 0.0)
