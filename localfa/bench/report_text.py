"""`localfa report`'s terminal output: a short table that fits 100 columns.

report.html holds everything (every ±k, span metrics, cost columns, stages, charts, per trace);
`--json` the metrics; `--markdown` the full table. The terminal gets what one reads first: per
method and subset, agent and step accuracy with their intervals, tokens per trace and errors.
A sweep without labels gets one line saying so and what is known without them
(`localfa.bench.unlabelled`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from localfa.bench.metrics import OVERALL, GroupSummary, summarize
from localfa.bench.report import fmt_errors, fmt_estimate, method_notes, substring_rows, superseded_note
from localfa.bench.unlabelled import labelled_traces, no_label_line, profiles, shares, step_agreement
from localfa.results import ResultRecord
from localfa.terminal import clip, plain, table

WIDTH = 100


def headline(records: Sequence[ResultRecord], manifest: dict[str, Any] | None, run_dir: str) -> str:
    model = ((manifest or {}).get("model") or {}).get("name")
    backend = ((manifest or {}).get("engine") or {}).get("backend")
    engine = " on ".join(dict.fromkeys(str(b) for b in (model, backend) if b))
    methods = len({(r.method, r.budget) for r in records})
    traces = len({r.trace for r in records})
    bits = [f"{len(records):,} records", f"{traces:,} traces", f"{methods} method{'' if methods == 1 else 's'}"]
    return f"localfa report: {plain(run_dir)}{' (' + plain(engine) + ')' if engine else ''}: " + ", ".join(bits)


def accuracy_table(groups: list[GroupSummary], width: int = WIDTH) -> list[str]:
    """Per method (and budget) its overall row, then its subsets indented under it."""
    head = ["method / subset", "traces", "runs", "agent acc [95%]", "step acc [95%]", "tokens/trace", "errors"]
    rows = []
    by_method: dict[tuple[str, str], list[GroupSummary]] = {}
    for g in groups:
        by_method.setdefault((g.method, g.budget), []).append(g)
    for (method, budget), mine in by_method.items():
        for g in sorted(mine, key=lambda g: g.subset != OVERALL):  # overall first, subsets in their order
            name = (method + ("" if budget == "none" else f" ({budget})")) if g.subset == OVERALL else f"  {g.subset}"
            rows.append([name, str(g.traces), str(g.records), fmt_estimate(g.metrics["agent"]), fmt_estimate(g.metrics["step"])])
            rows[-1] += [f"{g.cost['tokens']:,.0f}", fmt_errors(g)]
    return table(head, rows, width, shrink=(0,), right=tuple(range(1, len(head))))


def unlabelled_lines(records: Sequence[ResultRecord], method_order: Sequence[str], width: int = WIDTH) -> list[str]:
    """Per method: runs, errors, confidence and cost; then who it blames and in which categories."""
    found = profiles(records, method_order)
    names = [p.method + ("" if p.budget == "none" else f" ({p.budget})") for p in found]
    head = ["method", "traces", "runs", "errors", "mean conf.", "tokens/run"]
    rows = [
        [
            name,
            str(p.traces),
            str(p.runs),
            str(p.errors),
            "—" if p.mean_confidence is None else f"{p.mean_confidence:.2f}",
            f"{p.tokens:,.0f}",
        ]
        for name, p in zip(names, found)
    ]
    lines = table(head, rows, width, shrink=(0,), right=(1, 2, 3, 4, 5))
    pad = min(max(len(plain(n)) for n in names), 30)
    for title, counts in (
        ("Agents named", lambda p: (p.agents, p.answered)),
        ("Categories", lambda p: (p.categories, sum(p.categories.values()))),
    ):
        shown = [(name, *counts(p)) for name, p in zip(names, found) if counts(p)[0]]
        if shown:
            lines += ["", f"{title} (share of each method's answers):"]
            lines += [clip(f"  {plain(name, pad):<{pad}}  {shares(c, n, top=4)}", width) for name, c, n in shown]
    agree, compared = step_agreement(records)
    if compared:
        lines += ["", f"The methods name the same step in {agree} of the {compared} traces two or more of them answered."]
    return lines


def terminal_report(
    records: list[ResultRecord],
    manifest: dict[str, Any] | None,
    run_dir: str,
    html_path: Path,
    *,
    n_boot: int = 1000,
    substring: bool = False,
    width: int = WIDTH,
) -> str:
    """The whole terminal report (see the module doc)."""
    order = list((manifest or {}).get("methods") or {})
    out = [headline(records, manifest, run_dir)]
    if not records:
        return "\n".join(out + ["No records in this run yet."]) + "\n"
    note = superseded_note(manifest)
    if note:
        out.append(note)
    labelled, traces = labelled_traces(records)
    if not labelled:
        out += [no_label_line(run_dir), ""] + unlabelled_lines(records, order, width)
    else:
        if labelled < traces:
            out.append(f"{labelled} of {traces} traces carry labels: accuracy is over those.")
        groups = summarize(records, n_boot=n_boot, method_order=order)
        out += [""] + accuracy_table(groups, width)
        notes = method_notes(groups)
        if notes:
            out += [""] + [f"- {plain(n)}" for n in notes]
        if substring:
            head, rows = substring_rows(groups)
            out += ["", "Who&When's reference scorer (substring match, '7' matches '17'; only to compare with published tables):"]
            out += table(head, rows, width, shrink=(0,), right=tuple(range(head.index("traces"), len(head))))
    out += ["", f"Everything else (±k, spans, cost, stages, charts, each trace): {html_path}; --json FILE, --markdown."]
    return "\n".join(out) + "\n"
