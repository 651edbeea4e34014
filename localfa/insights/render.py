"""A sweep's summary as markdown, JSON Lines (for dashboards) and a section of report.html.

Every string a record holds is escaped where it lands (markdown escapes HTML and table pipes;
the HTML section escapes every field): a results file is data, never markup.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from typing import Any, Iterator, Sequence

from localfa.insights.compare import AccuracyDiff, Move, Shift
from localfa.insights.summary import CONSENSUS, UNKNOWN_KIND, Counts, Summary
from localfa.terminal import plain, table

AXES_TITLES = {"category": "Category", "agent": "Responsible agent", "step_kind": "Step kind", "position": "Position in the run"}
SUMMARY_VIEW = "summary-view.html"


def _md(text: Any) -> str:
    """One markdown table cell: HTML escaped, pipes and line breaks made harmless."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


ROWS = 12  # rows a count table shows; the rest are summed in one "other" row


def _rows(counter: Any, n: int, limit: int = ROWS) -> list[tuple[str, int, float]]:
    """The `limit` commonest keys with their counts and shares, then one row for all the others
    (``other (8 more)``), so the rows always add up to `n`."""
    items = sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))
    rows = [(str(k), v, v / n if n else 0.0) for k, v in items[:limit]]
    rest = items[limit:]
    if rest:
        total = sum(v for _, v in rest)
        rows.append((f"other ({len(rest)} more)", total, total / n if n else 0.0))
    return rows


def _primary(summary: Summary) -> Counts | None:
    """The counts shown first: the consensus where several methods ran, else the one method."""
    return next((c for c in summary.counts if c.method == CONSENSUS), summary.counts[0] if summary.counts else None)


def exemplar_anchors(summary: Summary, href: str = SUMMARY_VIEW) -> dict[str, str]:
    """trace id -> its section in the exemplars' view (sections follow first-seen trace order)."""
    order = list(dict.fromkeys(e.trace for g in summary.groups for e in g.exemplars))
    return {tid: f"{href}#t{i}" for i, tid in enumerate(order)}


def summary_markdown(summary: Summary, anchors: dict[str, str] | None = None) -> str:
    lines = [f"# What failed: {summary.records} records, {len(summary.diagnosed)} diagnoses naming a step", ""]
    if summary.taxonomies:
        lines.append(f"Categories from taxonomy: {', '.join(summary.taxonomies)}.")
    else:
        lines.append("No record carries a category: run `localfa bench ... --categorise NAME` to add them.")
    unknown = sum(1 for d in summary.diagnosed if d.step_kind == UNKNOWN_KIND)
    if unknown:
        lines.append(f"The step kind of {unknown} diagnoses is unknown: their trace files could not be read (--traces DIR names a folder).")
    for c in summary.counts:
        lines += ["", f"## {_md(c.method)} ({c.n} diagnoses)"]
        for axis, counter in c.axes().items():
            lines += ["", f"| {AXES_TITLES[axis]} | n | share |", "|---|---:|---:|"]
            lines += [f"| {_md(k)} | {v} | {s:.3f} |" for k, v, s in _rows(counter, c.n)]
    lines += ["", f"## Groups of like diagnoses ({len(summary.groups)} groups; {summary.ungrouped} diagnoses in none)", ""]
    lines += ["| group | size | label | top category | exemplars |", "|---:|---:|---|---|---|"]
    for g in summary.groups:
        ex = ", ".join(
            (f"[{_md(e.trace)}]({anchors[e.trace]})" if anchors and e.trace in anchors else _md(e.trace))
            + f" ({_md(e.method)}, step {e.step})"
            for e in g.exemplars
        )
        lines.append(f"| {g.gid} | {g.size} | {_md(g.label)} | {_md(g.top_category() or '—')} | {ex} |")
    return "\n".join(lines) + "\n"


def summary_jsonl(summary: Summary) -> Iterator[str]:
    """One JSON object a line: every diagnosis with its category and group, every count, every group."""
    group_of = {(d.trace, d.method, d.seed): g.gid for g in summary.groups for d in g.members}
    for d in summary.diagnosed:
        yield json.dumps(
            {
                "type": "diagnosis",
                "trace": d.trace,
                "method": d.method,
                "seed": d.seed,
                "step": d.step,
                "agent": d.agent,
                "category": d.category,
                "step_kind": d.step_kind,
                "position": d.position,
                "group": group_of.get((d.trace, d.method, d.seed)),
            },
            ensure_ascii=False,
        )
    for c in summary.counts:
        for axis, counter in c.axes().items():
            for key, n in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0]))):
                yield json.dumps({"type": "count", "method": c.method, "axis": axis, "key": key, "n": n, "share": n / c.n if c.n else 0.0})
    for g in summary.groups:
        yield json.dumps(
            {
                "type": "group",
                "group": g.gid,
                "size": g.size,
                "label": g.label,
                "top_category": g.top_category(),
                "exemplars": [{"trace": e.trace, "method": e.method, "seed": e.seed, "step": e.step} for e in g.exemplars],
            },
            ensure_ascii=False,
        )


def summary_html(summary: Summary, anchors: dict[str, str] | None = None) -> str:
    """The report's section: a chart of category shares, the counts tables, the groups with
    exemplars linked to their place in the exemplars' trace view (`anchors`: trace id -> href)."""
    from localfa.view.charts import Bar, bar_chart
    from localfa.view.style import PALETTE

    parts = ['<section id="what-failed"><h2>What failed</h2>']
    primary = _primary(summary)
    if primary is None:
        return parts[0] + "<p>No diagnosis names a step.</p></section>"
    axis = "category" if summary.taxonomies else "agent"
    counter = primary.axes()[axis]
    bars = [Bar(k, s, color=PALETTE[i % len(PALETTE)]) for i, (k, _, s) in enumerate(_rows(counter, primary.n))]
    parts.append(bar_chart(bars, title=f"{AXES_TITLES[axis]} share of {_e(primary.method)} diagnoses"))
    for axis_name, counter in primary.axes().items():
        rows = "".join(
            f"<tr><td>{_e(k)}</td><td class=num>{v}</td><td class=num>{s:.3f}</td></tr>" for k, v, s in _rows(counter, primary.n)
        )
        parts.append(f"<h3>{_e(AXES_TITLES[axis_name])}</h3><table><tr><th></th><th>n</th><th>share</th></tr>{rows}</table>")
    parts.append(f"<h3>Groups of like diagnoses</h3><p class=note>{summary.ungrouped} diagnoses fell in no group.</p>")
    group_rows = []
    for g in summary.groups:
        links = []
        for e in g.exemplars:
            href = (anchors or {}).get(e.trace)
            name = _e(e.trace)
            links.append((f'<a href="{_e(href)}">{name}</a>' if href else name) + f" ({_e(e.method)}, step {e.step})")
        group_rows.append(
            f"<tr class=group><td class=num>{g.gid}</td><td class=num>{g.size}</td><td>{_e(g.label)}</td>"
            f"<td>{_e(g.top_category() or '—')}</td><td>{', '.join(links)}</td></tr>"
        )
    parts.append(
        "<table><tr><th>group</th><th>size</th><th>label</th><th>top category</th><th>exemplars</th></tr>"
        + "".join(group_rows)
        + "</table>"
    )
    parts.append("</section>")
    return "".join(parts)


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def _share(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def accuracy_lines(diffs: Sequence[AccuracyDiff], width: int = 100) -> list[str]:
    """The accuracy of each method in A and B and the difference, with its interval."""
    if not diffs:
        return ["Accuracy: no trace is labelled in both runs, so there is none to compare."]
    head = ["method", "traces", "", "A", "B", "Δ = B - A [95%]"]
    rows = []
    for d in diffs:
        rows.append([d.method, str(d.traces), "step", _share(d.step_a), _share(d.step_b), f"{_signed(d.step_diff)} {_interval(d.step_ci)}"])
        if d.agent_a is not None or d.agent_b is not None:
            rows.append(["", "", "agent", _share(d.agent_a), _share(d.agent_b), f"{_signed(d.agent_diff)} {_interval(d.agent_ci)}"])
    lines = ["Accuracy on the traces labelled in both (per trace, mean over seeds; paired bootstrap):"]
    return lines + table(head, rows, width, shrink=(0,), right=(1, 3, 4, 5))


def _move_text(m: Move) -> str:
    """``step 3 → step 5 (by Coder)``, naming agents only where they differ."""
    a, b = m.a, m.b
    if a.error or b.error or (a.agent or "") != (b.agent or ""):
        return f"{a.text()} → {b.text()}"
    return f"step {a.step} → step {b.step} (by {b.agent})"


def moves_lines(moved: Sequence[Move], pairs: int, width: int = 100, limit: int = 40) -> list[str]:
    """The verdicts that moved, fixed and broken first, one line each."""
    if not moved:
        return [f"Verdicts: none moved ({pairs} method and trace pairs in both runs)."]
    counts = Counter(m.change for m in moved)
    said = ", ".join(f"{counts[c]} {c}" for c in ("fixed", "broke", "changed") if counts[c])
    lines = [f"Verdicts that moved: {len(moved)} of {pairs} method and trace pairs ({said}):"]
    order = {"fixed": 0, "broke": 1, "changed": 2}
    shown = sorted(moved, key=lambda m: (order[m.change], m.method, m.trace))[:limit]
    pad = max(len(plain(m.method, 40)) for m in shown)
    for m in shown:
        label = "" if m.label_step is None else f" (label step {m.label_step})"
        lines.append(f"  {m.change:<7}  {plain(m.method, 40):<{pad}}  {plain(m.trace, 60)}{label}: {plain(_move_text(m), 160)}")
    if len(moved) > limit:
        lines.append(f"  ... and {len(moved) - limit} more (every one in --jsonl FILE).")
    return lines


def shifts_lines(shifts: Sequence[Shift], width: int = 100) -> list[str]:
    """Each category's share of traces in A and B and the shift, with Newcombe's interval."""
    head = ["method", "category", "n A", "n B", "A", "B", "shift [95%]", ""]
    rows = [
        [s.method, s.category, str(s.n_a), str(s.n_b), f"{s.share_a:.3f}", f"{s.share_b:.3f}"]
        + [f"{s.shift:+.3f} [{s.ci95[0]:+.2f}, {s.ci95[1]:+.2f}]", "significant" if s.significant else ""]
        for s in shifts
    ]
    lines = ["Categories (share of traces, each with the category its records agree on; Newcombe's interval):"]
    return lines + table(head, rows, width, shrink=(0, 1), right=(2, 3, 4, 5, 6))
