"""FALAT's path in the trace view, drawn from the `details` the method records, stage by stage:
prior, windows (stage summaries, step summaries, passive steps by reason), candidates and regions,
typed links (counts by label, the links around the verified candidates), pruning, the judged ranking, the verdicts, the re-search,
then cost and every bound hit. Keys no section claims still show, under "Other details"."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from localfa.view.html import StepLink, e, folded_text, scalar_html, section, value_html
from localfa.view.paths import staged_details

Details = dict[str, Any]


def _step(i: Any, link: StepLink) -> str:
    return scalar_html("step", i, link) if isinstance(i, int) and not isinstance(i, bool) else e(i)


def _steps(xs: Iterable[Any], link: StepLink) -> str:
    items = [_step(x, link) for x in xs]
    return ", ".join(items) if items else '<span class="muted">none</span>'


def _grid(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="grid"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _text(v: Any) -> str:
    return folded_text(str(v), limit=300) if isinstance(v, str) and len(v) > 300 else e(v)


def _yes(v: Any) -> str:
    return scalar_html("", bool(v))


def _windows(d: Details, link: StepLink) -> str:
    stages = _grid(
        ["steps", "stage summary", "points at"],
        [
            [f"{e(s['window'][0])}–{e(s['window'][1])}", _text(s.get("summary")), _step(s.get("focus_step"), link)]
            for s in d.get("stages") or []
        ],
    )
    mids = _grid(
        ["step", "agent", "action", "decision", "active", "signals"],
        [
            [
                _step(m["index"], link),
                e(m.get("agent")),
                _text(m.get("action")),
                _text(m.get("decision")),
                _yes(m.get("active", True)),
                e(", ".join(m.get("signals") or [])),
            ]
            for m in d.get("mid_level") or []
        ],
    )
    passive = d.get("passive") or {}
    rows = "".join(f"<li>{e(why)}: {_steps(steps, link)}</li>" for why, steps in passive.items())
    left = d.get("mid_level_left_out")
    head = f"<p>{e(d.get('window'))} steps a window; step text capped at {e(d.get('step_token_cap'))} tokens.</p>"
    return (
        head
        + stages
        + section("step summaries (mid level)", mids, open_=False, css="sub")
        + (f"<p class='muted'>{e(left)} more step summaries not recorded (only the steps the search ended near).</p>" if left else "")
        + (f"<p>passive steps:</p><ul>{rows}</ul>" if rows else "")
    )


def _candidates(d: Details, link: StepLink) -> str:
    regions = ", ".join(
        f"{_step(r['steps'][0], link)}–{e(r['steps'][1])}" + (" (spans a window boundary)" if r.get("crosses_window") else "")
        for r in d.get("regions") or []
    )
    return f"<p>{_steps(d.get('candidates') or [], link)} <span class='muted'>(from {e(d.get('candidate_source'))})</span></p><p>regions: {regions or 'none'}</p>"


def _pairs(d: Details, link: StepLink) -> str:
    table = _grid(
        ["i", "j", "label", "reason"],
        [[_step(p["i"], link), _step(p["j"], link), f"<b>{e(p['label'])}</b>", _text(p.get("reason"))] for p in d.get("pairs") or []],
    )
    counts = ", ".join(f"{e(label)} {e(n)}" for label, n in (d.get("pair_counts") or {}).items()) or "none"
    head = (
        f"<p>each candidate's links to its next {e(d.get('pair_quota'))} candidates, typed in {e(d.get('groups'))} group calls: "
        f"{counts}; {e(d.get('pairs_untyped', 0))} pairs further apart left untyped (never evidence). "
        "The links around the verified candidates, with their reasons:</p>"
    )
    return head + table


def _pruning(d: Details, link: StepLink) -> str:
    parts = [
        f"<p>refined set: {_steps(d.get('refined') or [], link)}"
        + (" <b>(every candidate was pruned: all kept)</b>" if d.get("all_pruned_fallback") else "")
        + "</p>"
    ]
    for key, title in (
        ("pruned", "pruned"),
        ("spared_by_inconsistency", "spared (an inconsistency of its own)"),
        ("held_by_unknown", "kept (an untyped pair blocked the rule)"),
        ("follow_up_sources", "carriers traced back to"),
    ):
        rows = d.get(key) or {}
        if rows:
            parts.append(
                f"<p>{e(title)}:</p><ul>"
                + "".join(f"<li>{_step(int(k), link)}: {_step(v, link) if isinstance(v, int) else e(v)}</li>" for k, v in rows.items())
                + "</ul>"
            )
    return "".join(parts)


def _ranking(d: Details, link: StepLink) -> str:
    left = d.get("ranking_left_out")
    more = f"<p class='muted'>{e(left)} lower-ranked candidates not listed.</p>" if left else ""
    return more + _grid(
        ["step", "score", "judged suspicion", "signals", "analysis"],
        [
            [
                _step(r["step"], link),
                e(r.get("score")),
                e(r.get("suspicion") if r.get("suspicion") is not None else "—"),
                e(", ".join(r.get("signals") or [])),
                _text(r.get("analysis")),
            ]
            for r in d.get("ranking") or []
        ],
    )


def _verdicts(d: Details, link: StepLink) -> str:
    table = _grid(
        ["step", "steps shown", "error independence", "counterfactual sufficiency", "passed", "analysis", "quote"],
        [
            [
                _step(t["step"], link),
                f"{e(t['span'][0])}–{e(t['span'][1])}" if t.get("span") else "",
                _yes(t.get("error_independence")),
                _yes(t.get("counterfactual_sufficiency")),
                _yes(t.get("passed")),
                _text(t.get("analysis", t.get("reasons"))),
                f"<q>{e(t.get('quote'))}</q>",
            ]
            for t in d.get("top") or []
        ],
    )
    verified = "verified" if d.get("t_hat_verified") else "none passed: the best-ranked"
    quotes = "".join(
        f"<li><q>{e(q.get('quote'))}</q>: {'verbatim' if q.get('verbatim') else 'not in the trace'}</li>"
        for q in d.get("evidence_checked") or []
    )
    return f"<p>t̂ = {_step(d.get('t_hat'), link)} ({verified})</p>" + table + (f"<p>quotes checked:</p><ul>{quotes}</ul>" if quotes else "")


def _research(d: Details, link: StepLink) -> str:
    r = d.get("research") or {}
    roles = r.get("roles") or {}
    table = _grid(
        ["step", "role", "for", "against"],
        [[_step(int(k), link), f"<b>{e(v.get('role'))}</b>", _text(v.get("for")), _text(v.get("against"))] for k, v in roles.items()],
    )
    changed = " (replaces t̂)" if d.get("research_changed") else " (confirms t̂)"
    confirmation = d.get("research_confirmation")
    if d.get("research_not_taken") is not None:
        first = _step(d["research_not_taken"], link)
        why = (
            "which failed its own counterfactual check"
            if confirmation
            else "but t̂ passed verification and comes first"
            if d.get("t_hat_verified")
            else "which failed verification"
        )
        changed = f" (t̂ stands: the re-search ranked {first} first, {why})"
    elif confirmation:
        changed = f" (replaces t̂: {_step(confirmation.get('step'), link)} passed its own counterfactual check)"
    return f"<p>ranking: {_steps(r.get('ranking') or [], link)}; answer {_step(d.get('final_step'), link)}{changed}</p>" + table


def _cost(d: Details, link: StepLink) -> str:
    cost = d.get("cost") or {}
    return _grid(
        ["stage", "calls", "prompt tokens", "cached", "completion tokens", "batches"],
        [
            [
                e(s),
                e(c.get("calls")),
                e(c.get("prompt_tokens")),
                e(c.get("cached_tokens")),
                e(c.get("completion_tokens")),
                e(c.get("batches")),
            ]
            for s, c in cost.items()
        ],
    )


Renderer = Callable[[Details, StepLink], str]
SECTIONS: tuple[tuple[str, tuple[str, ...], Renderer | None], ...] = (
    ("Prior (expected plan and output)", ("prior", "expected_output_source", "context_window", "warnings"), None),
    (
        "Windows: stage and step summaries",
        ("window", "windows", "step_token_cap", "stages", "mid_level", "mid_level_left_out", "passive"),
        _windows,
    ),
    ("Candidates and regions", ("candidates", "candidate_source", "regions"), _candidates),
    ("Typed pairs", ("pair_quota", "groups", "pair_counts", "pairs", "pairs_untyped"), _pairs),
    ("Pruning", ("pruned", "spared_by_inconsistency", "held_by_unknown", "follow_up_sources", "refined", "all_pruned_fallback"), _pruning),
    ("Judged ranking", ("ranking", "ranking_left_out"), _ranking),
    ("Top candidates and verdicts", ("top", "t_hat", "t_hat_verified", "evidence_checked"), _verdicts),
    ("Local re-search", ("research", "final_step", "research_changed", "research_not_taken", "research_confirmation"), _research),
    ("Cost per stage", ("cost",), _cost),
    ("Bounds hit", ("bounds_hit", "limits_hit", "budget_applied"), None),
    ("Options (and which the model's profile set)", ("options",), None),
)


def falat_path(record: dict[str, Any], link: StepLink) -> str:
    """FALAT's stages from the record's details; what no section knows goes under "Other details"."""
    details: Details = dict(record.get("details") or {})
    out = []
    for title, keys, render in SECTIONS:
        mine = {k: details.pop(k) for k in keys if k in details}
        if not mine:
            continue
        try:
            body = render(mine, link) if render else value_html(mine, link)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):  # a record of another shape
            body = value_html(mine, link)
        out.append(section(title, body, css="stage"))
    return "".join(out) + staged_details(details, (), link)
