"""Which cascade stage answered: the share of a cascade's runs each stage settled.

A cascade (`localfa.methods.ensemble.cascade`) records the stage that gave its answer in
``details["answered_by"]``. Per cascade label, both reports show how many runs each stage
answered: a cascade whose last, expensive stage answers most runs saves little over running that
stage alone.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any, Sequence

StageRow = tuple[str, int, str, int, int]  # (cascade label, stage, its members, runs it answered, runs)


def stage_rows(records: Sequence[Any]) -> list[StageRow]:
    """Per cascade label and stage: (label, stage, members, runs answered, runs of the label),
    from records without an error; stages planned but never answering get a row too."""
    answered: dict[str, Counter[int]] = {}
    members: dict[tuple[str, int], str] = {}
    for r in records:
        details = r.details if isinstance(getattr(r, "details", None), dict) else {}
        by = details.get("answered_by")
        if r.error or not isinstance(by, dict) or not isinstance(by.get("stage"), int):
            continue
        answered.setdefault(r.method, Counter())[by["stage"]] += 1
        for st in details.get("stages") or []:
            if isinstance(st, dict) and isinstance(st.get("stage"), int):
                members.setdefault((r.method, st["stage"]), str(st.get("members", "")))
        for k in range(int(details.get("stages_planned") or 0)):
            members.setdefault((r.method, k), "")
    rows: list[StageRow] = []
    for label, counts in sorted(answered.items()):
        total = sum(counts.values())
        stages = sorted({k for (m, k) in members if m == label} | set(counts))
        rows += [(label, k, members.get((label, k), ""), counts.get(k, 0), total) for k in stages]
    return rows


def share(answered: int, total: int) -> str:
    return f"{answered}/{total} ({answered / total:.0%})" if total else "0"


def stage_table_html(records: Sequence[Any]) -> str:
    """The stage shares as an HTML table (with a heading), or "" when the run has no cascade."""
    rows = stage_rows(records)
    if not rows:
        return ""
    e = lambda x: html.escape(str(x), quote=True)  # noqa: E731
    body = "".join(
        f'<tr data-cascade="{e(label)}" data-stage="{k}"><td>{e(label)}</td><td class="num">{k}</td><td>{e(members)}</td>'
        f'<td class="num share">{e(share(n, total))}</td></tr>'
        for label, k, members, n, total in rows
    )
    return (
        '<h3>Cascade stages: the share of runs each stage answered</h3><table class="stages">'
        "<tr><th>cascade</th><th>stage</th><th>members</th><th>answered</th></tr>" + body + "</table>"
    )


def stage_table_markdown(records: Sequence[Any]) -> str:
    """The stage shares as a markdown table (with a heading), or "" when the run has no cascade."""
    rows = stage_rows(records)
    if not rows:
        return ""
    cell = lambda x: str(x).replace("|", "\\|").replace("<", "&lt;")  # noqa: E731
    lines = [
        "### Cascade stages: the share of runs each stage answered",
        "",
        "| cascade | stage | members | answered |",
        "|---|---:|---|---:|",
    ]
    lines += [f"| {cell(label)} | {k} | {cell(members)} | {share(n, total)} |" for label, k, members, n, total in rows]
    return "\n".join(lines) + "\n"
