"""The trace view's section for ensembles: each member's verdict and how they agreed."""

from __future__ import annotations

from typing import Any

from localfa.view.html import StepLink, e, section, value_html


def _runs_table(runs: list[dict[str, Any]], answer: Any, link: StepLink) -> str:
    rows = []
    for r in runs:
        step = r.get("step")
        cell = f'<a class="steplink" href="{link(int(step))}">{int(step)}</a>' if isinstance(step, int) else "—"
        agrees = "✓" if step is not None and step == answer else ""
        note = e(r.get("error") or r.get("stop_reason") or "")
        rows.append(
            f"<tr><td>{e(r.get('member'))}</td><td>{e(r.get('sample'))}</td><td>{cell}</td><td>{e(r.get('agent') or '')}</td>"
            f"<td>{agrees}</td><td>{e((r.get('usage') or {}).get('calls', ''))}</td><td>{note}</td></tr>"
        )
    head = "<tr><th>member</th><th>sample</th><th>step</th><th>agent</th><th>agrees</th><th>calls</th><th>end</th></tr>"
    return f'<table class="grid">{head}{"".join(rows)}</table>'


def _members_paths(runs: list[dict[str, Any]], link: StepLink) -> str:
    return "".join(
        section(f"{r.get('member')} #{r.get('sample')}: details", value_html(r.get("details") or {}, link), open_=False, css="stage")
        for r in runs
    )


def vote_path(record: dict[str, Any], link: StepLink) -> str:
    details = record.get("details") or {}
    runs = details.get("members") or []
    head = (
        f"<p>agreement: {e(details.get('agreement', '?'))} (confidence {e(record.get('confidence'))}); {e(details.get('tie_rule', ''))}</p>"
    )
    return head + _runs_table(runs, record.get("step"), link) + _members_paths(runs, link)


def cascade_path(record: dict[str, Any], link: StepLink) -> str:
    details = record.get("details") or {}
    by = details.get("answered_by") or {}
    out = [
        f"<p>answered by stage {e(by.get('stage'))} ({e(by.get('members'))}, "
        f"{'agreed' if by.get('agreed') else 'no agreement: its own majority'}); "
        f"{e(details.get('stages_run'))} of {e(details.get('stages_planned'))} stages run; agree = {e(details.get('agree'))}; "
        f"confidence {e(record.get('confidence'))}</p>"
    ]
    for st in details.get("stages") or []:
        runs = st.get("runs") or []
        title = f"stage {st.get('stage')}: {st.get('members')} — top votes {st.get('top_votes')}, {(st.get('usage') or {}).get('calls', '?')} calls"
        out.append(section(title, _runs_table(runs, record.get("step"), link) + _members_paths(runs, link), css="stage"))
    return "".join(out)
