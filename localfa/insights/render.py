"""A sweep's summary as markdown, JSON Lines (for dashboards) and a section of report.html.

Every string a record holds is escaped where it lands (markdown escapes HTML and table pipes;
the HTML section escapes every field): a results file is data, never markup.
"""

from __future__ import annotations

import html
import json
from typing import Any, Iterator, Sequence

from localfa.insights.compare import Shift
from localfa.insights.summary import CONSENSUS, Counts, Summary

AXES_TITLES = {"category": "Category", "agent": "Responsible agent", "step_kind": "Step kind", "position": "Position in the run"}
SUMMARY_VIEW = "summary-view.html"


def _md(text: Any) -> str:
    """One markdown table cell: HTML escaped, pipes and line breaks made harmless."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _rows(counter: Any, n: int, limit: int = 12) -> list[tuple[str, int, float]]:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))[:limit]
    return [(str(k), v, v / n if n else 0.0) for k, v in items]


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


def shifts_text(shifts: Sequence[Shift]) -> list[str]:
    """One `name=value` line per (method, category) shift."""
    return [
        f"method={s.method} category={json.dumps(s.category, ensure_ascii=False)} traces_a={s.n_a} traces_b={s.n_b} "
        f"share_a={s.share_a:.3f} share_b={s.share_b:.3f} shift={s.shift:+.3f} ci95={s.ci95[0]:+.3f}..{s.ci95[1]:+.3f}"
        + (" significant" if s.significant else "")
        for s in shifts
    ]
