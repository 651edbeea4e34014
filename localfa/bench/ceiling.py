"""Accuracy against the oracle's p: one run directory per p, one report over all of them.

`scripts/bench_ceiling.py` sweeps the same traces and methods on the oracle engine at several p
(the share of calls it answers honestly), each p into its own run directory ``OUT/p=0.7/``, a
normal sweep (resumable, with its own manifest and report). The manifest records the engine's
p (its `describe()`), so every record carries the p it was made under. `localfa report OUT`
on the parent writes ``OUT/report.html``: a table per (method, budget, p) and a chart of step
accuracy against p, one line per method.

A miss at p = 1 is a defect of the method's machinery; `dropped_at` says where the labelled step
dropped out, from the record's details (the method's policy may say it better: `Policy.dropped_at`).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localfa.bench.metrics import GroupSummary, summarize
from localfa.bench.report import load_run, write_report
from localfa.durable import replace_durably
from localfa.results import ResultRecord
from localfa.view.charts import Series, line_chart
from localfa.view.style import PALETTE

MANIFEST = "manifest.json"
REPORT_HTML = "report.html"


def engine_p(manifest: dict[str, Any] | None) -> float | None:
    """The p a run's engine answered with (None: not an engine with a p)."""
    p = ((manifest or {}).get("engine") or {}).get("p")
    return float(p) if isinstance(p, (int, float)) else None


def p_run_dir(out: Path, p: float) -> Path:
    return out / f"p={p:g}"


def p_runs(parent: str | Path) -> list[tuple[float, Path]]:
    """(p, run directory) of every sub-run of `parent` made at some p, highest p first."""
    found = []
    root = Path(parent)
    for sub in sorted(root.iterdir()) if root.is_dir() else []:
        m = sub / MANIFEST
        if sub.is_dir() and m.exists():
            try:
                p = engine_p(json.loads(m.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError):
                continue
            if p is not None:
                found.append((p, sub))
    return sorted(found, key=lambda x: -x[0])


@dataclass
class PRun:
    """One p's records and their summaries (overall rows and per subset)."""

    p: float
    run_dir: Path
    records: list[ResultRecord]
    groups: list[GroupSummary]

    def overall(self) -> list[GroupSummary]:
        return [g for g in self.groups if g.subset == "overall"]


def load_p_runs(parent: str | Path, n_boot: int = 1000) -> list[PRun]:
    out = []
    for p, run_dir in p_runs(parent):
        records, manifest = load_run(run_dir)
        order = list((manifest or {}).get("methods") or {})
        out.append(PRun(p, run_dir, records, summarize(records, n_boot=n_boot, method_order=order)))
    return out


def group_name(g: GroupSummary) -> str:
    return g.method + ("" if g.budget == "none" else f" ({g.budget})")


def p_chart(runs: list[PRun], metric: str = "step", title: str = "Step accuracy against p (share of honest oracle answers)") -> str:
    """Accuracy against p, one line per (method, budget)."""
    names: list[str] = []
    points: dict[str, list[tuple[float, float | None]]] = {}
    for run in runs:
        for g in run.overall():
            name = group_name(g)
            if name not in points:
                names.append(name)
                points[name] = []
            est = g.metrics.get(metric)
            points[name].append((run.p, None if est is None else est.mean))
    series = [Series(n, tuple(sorted(points[n])), PALETTE[i % len(PALETTE)]) for i, n in enumerate(names)]
    return line_chart(series, title=title, x_label="p (share of calls answered honestly)", x_prefix="p=")


def _fmt(est: Any) -> str:
    if est is None or est.mean is None:
        return "n/a"
    return f"{est.mean:.3f} [{est.lo:.2f}, {est.hi:.2f}]"


def p_report_html(runs: list[PRun], parent: str) -> str:
    """The page for a parent of p-runs: the table, the chart against p, links to each run."""
    e = html.escape
    rows = []
    for run in runs:
        for g in run.overall():
            rows.append(
                f"<tr><td>{e(group_name(g))}</td><td class=num>{run.p:g}</td><td class=num>{g.traces}</td>"
                f"<td class=num>{e(_fmt(g.metrics.get('step')))}</td><td class=num>{e(_fmt(g.metrics.get('agent')))}</td>"
                f"<td class=num>{g.cost.get('calls', 0.0):.1f}</td><td class=num>{g.errors}</td></tr>"
            )
    links = "".join(f'<li><a href="{e(r.run_dir.name)}/{REPORT_HTML}">p = {r.p:g}</a> ({len(r.records)} records)</li>' for r in runs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>localfa: accuracy against p</title>'
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2em .5em}td.num{text-align:right}</style></head><body>"
        f"<h1>Accuracy against p</h1><p>Runs under <code>{e(parent)}</code>, one per p (the share of calls the "
        "engine answers honestly). At p = 1 a miss is a defect of the method's own machinery.</p>"
        "<table><thead><tr><th>method</th><th>p</th><th>traces</th><th>step acc [95%]</th><th>agent acc [95%]</th>"
        "<th>calls/trace</th><th>errors</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        f"<h2>Charts</h2>{p_chart(runs)}{p_chart(runs, 'agent', 'Agent accuracy against p')}"
        f"<h2>Runs</h2><ul>{links}</ul></body></html>\n"
    )


def markdown_p_table(runs: list[PRun]) -> str:
    lines = ["| method | p | traces | step acc [95%] | agent acc [95%] | calls/trace | errors |", "|---|---|---|---|---|---|---|"]
    for run in runs:
        for g in run.overall():
            lines.append(
                f"| {group_name(g)} | {run.p:g} | {g.traces} | {_fmt(g.metrics.get('step'))} | {_fmt(g.metrics.get('agent'))} "
                f"| {g.cost.get('calls', 0.0):.1f} | {g.errors} |"
            )
    return "\n".join(lines) + "\n"


def write_p_report(parent: str | Path, html_path: str | Path | None = None, n_boot: int = 1000) -> tuple[str, Path]:
    """(markdown table, HTML path) for a parent of p-runs; each run's own report.html too."""
    runs = load_p_runs(parent, n_boot=n_boot)
    for run in runs:
        write_report(run.run_dir, n_boot=n_boot)
    path = Path(html_path) if html_path else Path(parent) / REPORT_HTML
    replace_durably(path, p_report_html(runs, str(parent)))
    return markdown_p_table(runs), path


# ---- misses at p = 1 ---------------------------------------------------------------------------


_NOT_STEPS = (
    "cost",
    "token",
    "call",
    "char",
    "cap",
    "budget",
    "score",
    "limit",
    "turn",
    "batch",
    "size",
    "len",
    "count",
    "seed",
    "threshold",
)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _mentions(value: Any, step: int, counts: bool = True) -> bool:
    """Whether a details entry names `step`: an int (outside counters such as costs and
    scores), a "step N" text, a key "N", or an inclusive [lo, hi] range that holds it."""
    if _is_int(value):
        return counts and value == step
    if isinstance(value, str):
        return re.search(rf"\bstep {step}\b", value, re.IGNORECASE) is not None
    if isinstance(value, dict):
        return any(
            str(k) == str(step) or _mentions(v, step, counts and not any(w in str(k).lower() for w in _NOT_STEPS)) for k, v in value.items()
        )
    if isinstance(value, (list, tuple)):
        if counts and len(value) == 2 and all(_is_int(v) for v in value) and value[0] < value[1] and value[0] <= step <= value[1]:
            return True
        return any(_mentions(v, step, counts) for v in value)
    return False


def dropped_at(record: ResultRecord) -> str:
    """Where the labelled step dropped out: the method policy's own account when it has one
    (`Policy.dropped_at`), else the first stage of the record's details after the last one that
    still names the labelled step."""
    label = record.label
    step = None if label is None else label.mistake_step
    if record.error:
        return "error: " + (record.error.splitlines()[0] if record.error else "")
    if step is None:
        return "no labelled step"
    details = {k: v for k, v in (record.details or {}).items() if k not in ("label", "options")}
    from localfa.oracle.registry import registered_policies

    entry = registered_policies().by_method.get(record.method_name or record.method.split(":", 1)[0])
    if entry is not None and entry[1].dropped_at is not None:
        return entry[1].dropped_at(details, step)
    stages = list(details)
    seen = [k for k in stages if _mentions(details[k], step)]
    if not seen:
        return f"no stage of the details names step {step} (stages: {', '.join(stages) or 'none'})"
    last = stages.index(seen[-1])
    after = stages[last + 1 :]
    return f"step {step} last named in {seen[-1]!r}" + (f", not in {after[0]!r}" if after else "") + f" (named in: {', '.join(seen)})"
