"""What a sweep says without labels: who each method blames, in which categories, how sure it
is, what it cost, and how often the methods agree.

A sweep of private traces has no answer key, so `report` has no accuracy to show; these are the
facts that need none (`localfa summarize` goes further: groups of like diagnoses, exemplars).
The terminal report (`localfa.bench.report_text`) and report.html both draw from `profiles`.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from localfa.results import ResultRecord
from localfa.terminal import plain
from localfa.traces.model import normalize_agent


def has_label(record: ResultRecord) -> bool:
    """The record's trace is labelled with something a method is scored against."""
    return record.label is not None and (record.label.mistake_step is not None or bool(record.label.mistake_agent))


def labelled_traces(records: Sequence[ResultRecord]) -> tuple[int, int]:
    """(traces with a label, traces)."""
    traces = {r.trace for r in records}
    return len({r.trace for r in records if has_label(r)}), len(traces)


@dataclass
class Profile:
    """One (method, budget)'s diagnoses, without labels."""

    method: str
    budget: str
    runs: int = 0
    traces: int = 0
    errors: int = 0
    agents: Counter = field(default_factory=Counter)  # agent named -> runs
    categories: Counter = field(default_factory=Counter)  # category -> runs
    confidences: list[float] = field(default_factory=list)
    calls: float = 0.0  # per run
    tokens: float = 0.0  # prompt + completion, per run

    @property
    def answered(self) -> int:
        return sum(self.agents.values())

    @property
    def mean_confidence(self) -> float | None:
        return sum(self.confidences) / len(self.confidences) if self.confidences else None

    def as_dict(self) -> dict[str, object]:
        return {
            "method": self.method,
            "budget": self.budget,
            "runs": self.runs,
            "traces": self.traces,
            "errors": self.errors,
            "agents": dict(self.agents.most_common()),
            "categories": dict(self.categories.most_common()),
            "mean_confidence": self.mean_confidence,
            "calls_per_run": self.calls,
            "tokens_per_run": self.tokens,
        }


def profiles(records: Sequence[ResultRecord], method_order: Sequence[str] = ()) -> list[Profile]:
    """One profile per (method, budget), in `method_order` then first-seen order."""
    out: dict[tuple[str, str], Profile] = {}
    shown: dict[tuple[str, str], dict[str, str]] = {}  # an agent is counted by its normalised name, shown as first written
    traces: dict[tuple[str, str], set[str]] = {}
    for r in records:
        key = (r.method, r.budget)
        p = out.setdefault(key, Profile(r.method, r.budget))
        traces.setdefault(key, set()).add(r.trace)
        p.runs += 1
        p.calls += float(r.usage.get("calls", 0) or 0)
        p.tokens += float(r.usage.get("prompt_tokens", 0) or 0) + float(r.usage.get("completion_tokens", 0) or 0)
        if r.error:
            p.errors += 1
            continue
        if r.agent:
            names = shown.setdefault(key, {})
            p.agents[names.setdefault(normalize_agent(r.agent), r.agent)] += 1
        if r.category:
            p.categories[r.category] += 1
        if r.confidence is not None:
            p.confidences.append(float(r.confidence))
    for key, p in out.items():
        p.traces = len(traces[key])
        p.calls /= max(1, p.runs)
        p.tokens /= max(1, p.runs)
    rank = {m: i for i, m in enumerate(method_order)}
    return sorted(out.values(), key=lambda p: rank.get(p.method, len(rank)))


def step_agreement(records: Sequence[ResultRecord]) -> tuple[int, int]:
    """(traces where every method's commonest step is the same, traces that two or more methods
    answered): without labels, agreement is the one cross-check there is."""
    steps: dict[str, dict[str, Counter]] = {}
    for r in records:
        if not r.error and r.step is not None:
            steps.setdefault(r.trace, {}).setdefault(r.method, Counter())[r.step] += 1
    compared = [by_method for by_method in steps.values() if len(by_method) > 1]
    agree = sum(1 for by_method in compared if len({min(c, key=lambda s: (-c[s], s)) for c in by_method.values()}) == 1)
    return agree, len(compared)


def shares(counter: Counter, total: int, top: int = 3) -> str:
    """``Coder 0.43, WebSurfer 0.29 (+2 more)``: the commonest keys and their shares of `total`."""
    if not counter or not total:
        return "—"
    items = counter.most_common()
    text = ", ".join(f"{plain(k, 60)} {v / total:.2f}" for k, v in items[:top])
    return text + (f" (+{len(items) - top} more)" if len(items) > top else "")


def no_label_line(run_dir: str) -> str:
    return f"This sweep has no labels, so there is no accuracy to report; `localfa summarize {run_dir}` says what failed."


def unlabelled_html(records: Sequence[ResultRecord], method_order: Sequence[str] = ()) -> str:
    """report.html's section for a sweep without labels: the profiles and the agreement."""
    e = html.escape
    rows = []
    for p in profiles(records, method_order):
        agents = "".join(
            f"<li>{e(str(k))} <span class=note>{v} ({v / max(1, p.answered):.2f})</span></li>" for k, v in p.agents.most_common(8)
        )
        more = f"<li class=note>… {len(p.agents) - 8} more</li>" if len(p.agents) > 8 else ""
        cats = "".join(f"<li>{e(str(k))} <span class=note>{v}</span></li>" for k, v in p.categories.most_common(8))
        conf = f"{p.mean_confidence:.2f} ({len(p.confidences)} runs)" if p.mean_confidence is not None else "—"
        cat_list = f"<ul class=flat>{cats}</ul>" if cats else "—"
        rows.append(
            f"<tr><td>{e(p.method)}</td><td>{e(p.budget)}</td><td class=num>{p.traces}</td><td class=num>{p.runs}</td>"
            f"<td class=num>{p.errors}</td><td><ul class=flat>{agents}{more}</ul></td><td>{cat_list}</td>"
            f"<td class=num>{conf}</td><td class=num>{p.calls:.1f}</td><td class=num>{p.tokens:,.0f}</td></tr>"
        )
    agree, compared = step_agreement(records)
    agreement = (
        f"<p class=note>The methods name the same step (each its commonest over seeds) in {agree} of the {compared} "
        "traces that two or more of them answered.</p>"
        if compared
        else ""
    )
    return (
        "<h2>Without labels</h2><table><thead><tr><th>method</th><th>budget</th><th>traces</th><th>runs</th><th>errors</th>"
        "<th>agents named (runs, share of answers)</th><th>categories</th><th>mean confidence</th><th>calls/run</th>"
        f"<th>tokens/run</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{agreement}"
    )
