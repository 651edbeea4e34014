"""One self-contained HTML page for one or many diagnoses: verdicts beside the trace they judge.

Per trace: on the left each diagnosis (verdict, reasoning, every evidence quote with where it was
found or a flag when it is not verbatim, and the method's own path); on the right the trace as a
timeline of steps, the decisive step highlighted, the labelled step and error spans too, every
quote marked where it occurs. Nothing is fetched: CSS is inline, there is no script, and the
page's content security policy forbids any request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localfa.durable import replace_durably
from localfa.limits import Limits, shorten
from localfa.methods.evidence import verify_quotes
from localfa.redact import redact
from localfa.traces.model import Step, Trace, normalize_agent
from localfa.view.code import code_text_html, is_code_heavy
from localfa.view.html import FOLD_CHARS, e, folded_text, step_number
from localfa.view.marks import Range, find_quotes, marked_html
from localfa.view.paths import base_name, method_path
from localfa.view.records import TraceGroup, changed_note
from localfa.view.style import CSP, CSS, GENERATOR, PALETTE


@dataclass(frozen=True)
class Quote:
    """One evidence quote of one diagnosis, numbered within its trace's section."""

    number: int
    record: int  # the diagnosis' position in its group
    text: str
    verbatim: bool | None  # None: the trace could not be read and the record says nothing


def label_of(group: TraceGroup) -> dict[str, Any]:
    """The trace's label (from the trace, else from a record), {} when it has none."""
    if group.trace is not None and group.trace.labels is not None:
        return group.trace.labels.model_dump(mode="json")
    for rec in group.records:
        lab = rec.get("label") or (rec.get("details") or {}).get("label")
        if lab:
            return dict(lab)
    return {}


def collect_quotes(group: TraceGroup) -> list[Quote]:
    """Every quote of every diagnosis of the trace, with its verbatim verdict."""
    out: list[Quote] = []
    for k, rec in enumerate(group.records):
        quotes = [str(q) for q in rec.get("evidence") or []]
        if group.trace is not None:
            flags: list[bool | None] = list(verify_quotes(group.trace, quotes))
        else:
            recorded = (rec.get("details") or {}).get("evidence_verbatim") or []
            flags = [bool(recorded[i]) if i < len(recorded) else None for i in range(len(quotes))]
        out.extend(Quote(len(out), k, q, f) for q, f in zip(quotes, flags))
    return out


# ---- the timeline ------------------------------------------------------------------------------


OBSERVATION_TAG = ' · <span class="obs">observation</span>'  # tool output, environment text: no agent wrote it


def page_step_chars() -> int:
    """The most characters of one step part the page shows: the cap prompts use
    (`localfa.limits`, $LOCALFA_MAX_STEP_CHARS), so a page costs memory by the cap, not the
    step (a 50 MB step once took 7.8 GB to mark). A bad setting falls back to the default."""
    try:
        return Limits.from_env().max_step_chars
    except ValueError:
        return Limits().max_step_chars


def step_parts(step: Step, cap: int | None = None) -> list[tuple[str, str]]:
    """(kind, text) of everything a step says, in reading order, each within `cap` characters
    (head and tail around a cut marker, as a prompt shows it; default `page_step_chars`)."""
    cap = page_step_chars() if cap is None else cap
    parts = [("content", step.content or "")]
    parts += [("tool call", json.dumps(c, ensure_ascii=False)) for c in step.tool_calls]
    parts += [(kind, text) for kind, text in (("input", step.input), ("observation", step.observation)) if text]
    return [(kind, shorten(text, cap)) for kind, text in parts]


def _decisive_steps(group: TraceGroup) -> dict[int, list[int]]:
    """Step -> the diagnoses (positions) that named it."""
    out: dict[int, list[int]] = {}
    for k, rec in enumerate(group.records):
        if isinstance(rec.get("step"), int) and not rec.get("error"):
            out.setdefault(rec["step"], []).append(k)
    return out


def _span_steps(group: TraceGroup, n_steps: int) -> set[int]:
    """The steps inside any diagnosis' error span, clamped to the trace's `n_steps` (a record may
    claim a span of 10**12 steps: the page marks what exists)."""
    steps: set[int] = set()
    for rec in group.records:
        for span in rec.get("spans") or []:
            if not isinstance(span, (list, tuple)) or len(span) != 2:
                continue
            a, b = step_number(span[0]), step_number(span[1])
            if a is None or b is None:
                continue
            steps.update(range(max(0, min(a, b)), min(n_steps, max(a, b) + 1)))
    return steps


def timeline_html(group: TraceGroup, gid: int, quotes: list[Quote], colors: dict[str, str], where: dict[int, list[int]]) -> str:
    """The trace's steps; `where` (quote number -> steps) is filled as quotes are found."""
    trace = group.trace
    assert trace is not None
    label = label_of(group)
    labelled = label.get("mistake_step")
    decisive = _decisive_steps(group)
    spans = _span_steps(group, len(trace.steps))
    texts = [q.text for q in quotes]
    cap = page_step_chars()
    items = []
    for step in trace.steps:
        i = step.index
        classes = (
            ["step"]
            + (["decisive"] if i in decisive else [])
            + (["labelled"] if i == labelled else [])
            + (["inspan"] if i in spans else [])
        )
        badges = "".join(
            f'<span class="badge" style="--c:{colors[_label(group.records[k])]}">▶ {e(_label(group.records[k]))}</span>'
            for k in decisive.get(i, [])
        )
        if i == labelled:
            badges += '<span class="badge label">labelled fault</span>'
        elif i in set(label.get("fault_steps") or []):
            badges += '<span class="badge label">labelled fault (other)</span>'
        if i in spans:
            badges += '<span class="badge span">error span</span>'
        head = (
            f'<div class="stephead"><a href="#t{gid}-s{i}">[{i}]</a> <b>{e(step.agent)}</b> · {e(step.role)}'
            f"{' · ' + e(step.name) if step.name else ''}"
            f"{OBSERVATION_TAG if step.kind == 'observation' else ''}{badges}</div>"
        )
        body = []
        for kind, text in step_parts(step, cap):
            ranges: list[Range] = find_quotes(text, texts) if texts and text else []
            for _, _, q in ranges:
                where.setdefault(q, [])
                if i not in where[q]:
                    where[q].append(i)
            highlight = bool(ranges) or i in decisive or i == labelled
            tag = "" if kind == "content" else f'<span class="muted">{e(kind)}</span>'
            if is_code_heavy(text):  # code and diffs unwrapped, long output folded with head and tail shown
                shown = code_text_html(text, ranges, open_=highlight)
            else:
                shown = folded_text(text, FOLD_CHARS, open_=highlight, inner=marked_html(text, ranges))
            body.append(f'<div class="part">{tag}{shown}</div>')
        items.append(f'<li id="t{gid}-s{i}" class="{" ".join(classes)}">{head}{"".join(body)}</li>')
    return f'<ol class="timeline">{"".join(items)}</ol>'


# ---- the verdicts ------------------------------------------------------------------------------


def _label(rec: dict[str, Any]) -> str:
    return str(rec.get("method") or "?")


def _hit(pred: Any, gold: Any, agent: bool = False) -> str:
    if gold is None or pred is None:
        return ""
    ok = normalize_agent(str(pred)) == normalize_agent(str(gold)) if agent else pred == gold
    return ' <span class="hit">✓</span>' if ok else ' <span class="miss">✗</span>'


def evidence_html(quotes: list[Quote], where: dict[int, list[int]], gid: int) -> str:
    """The quotes of one diagnosis: where each was found, or a flag when it is not verbatim."""
    if not quotes:
        return '<p class="muted">No evidence quoted.</p>'
    items = []
    for q in quotes:
        steps = where.get(q.number, [])
        if q.verbatim is False:
            state = '<span class="flag">not verbatim in the trace</span>'
        elif steps:
            links = ", ".join(f'<a href="#t{gid}-s{s}">step {s}</a>' for s in steps)
            state = f'<span class="ok">verbatim</span> found at {links}'
        elif q.verbatim:
            state = '<span class="ok">verbatim</span> <span class="muted">(across steps or in the task, not inside one step)</span>'
        else:
            state = '<span class="muted">not checked: the trace could not be read</span>'
        cls = "unverified" if q.verbatim is False else "verified"
        items.append(f'<li class="{cls}" data-quote="{q.number}"><blockquote>{e(q.text)}</blockquote>{state}</li>')
    return f'<ol class="evidence">{"".join(items)}</ol>'


def diagnosis_html(
    rec: dict[str, Any], k: int, group: TraceGroup, gid: int, quotes: list[Quote], where: dict[int, list[int]], color: str, open_path: bool
) -> str:
    """One diagnosis: verdict, cost, reasoning, evidence, and the method's path."""
    label = label_of(group)
    link = lambda i: f"#t{gid}-s{i}"  # noqa: E731
    u = rec.get("usage") or {}
    step = rec.get("step")
    step_html = f'<a href="{link(step)}">step {e(step)}</a>' if isinstance(step, int) else "no step"
    parts = [
        f'<article class="diag" id="d{gid}-{k}" style="--c:{color}">',
        f'<div class="verdict"><span class="badge">{e(_label(rec))}</span> '
        f"<b>{step_html}</b>{_hit(step, label.get('mistake_step'))} by <b>{e(rec.get('agent'))}</b>"
        f"{_hit(rec.get('agent'), label.get('mistake_agent'), agent=True)}</div>",
        f'<div class="muted">seed {e(rec.get("seed"))} · budget {e(rec.get("budget") or "none")} · '
        f"stop {e(rec.get('stop_reason'))} · {e(u.get('calls', 0))} calls · "
        f"{int(u.get('prompt_tokens', 0) or 0):,} prompt + {int(u.get('completion_tokens', 0) or 0):,} completion tokens "
        f"({int(u.get('cached_tokens', 0) or 0):,} cached) · {float(rec.get('wall_s') or 0):.1f} s</div>",
    ]
    if k in group.changed:
        parts.append('<div class="err">⚠ made on other content than the trace shown (the file has changed since)</div>')
    if rec.get("error"):
        parts.append(f'<div class="err">{e(str(rec["error"])[:3000])}</div>')
    if rec.get("reasoning"):
        parts.append(f'<h3>Reasoning</h3><div class="reasoning">{e(rec["reasoning"])}</div>')
    parts.append("<h3>Evidence</h3>" + evidence_html([q for q in quotes if q.record == k], where, gid))
    parts.append(
        f'<details class="panel"{" open" if open_path else ""}><summary>How {e(base_name(rec) or "the method")} '
        f"got there</summary>{method_path(rec, link)}</details></article>"
    )
    return "".join(parts)


def _agents(trace: Trace) -> str:
    """The agents as `localfa inspect` counts them: those the trace names (else its speakers);
    the user, the system and the environment are no agents."""
    n = len([a for a in trace.agents if not a.environment]) or len(trace.agent_names())
    return f"{n} agent" if n == 1 else f"{n} agents"


def outcome_html(trace: Trace) -> str:
    """The harness's verdict and its verifier's output (reward, failed tests), read first by a
    person; empty where no harness judged the run."""
    harness = trace.metadata.get("harness")
    if not isinstance(harness, dict) and not trace.outcome:
        return ""
    verdict = ""
    if isinstance(harness, dict):
        failed = harness.get("failed")
        state = "failed" if failed is True else "passed" if failed is False else "no verdict"
        verdict = f" {e(harness.get('harness'))}: <b>{e(state)}</b> ({e(harness.get('why'))})"
    shown = code_text_html(trace.outcome, []) if trace.outcome else ""
    return f'<div class="task outcome"><b>Outcome</b>{verdict}{shown}</div>'


def trace_section(group: TraceGroup, gid: int, colors: dict[str, str]) -> str:
    """A trace's verdicts (left) beside its timeline (right)."""
    quotes = collect_quotes(group)
    where: dict[int, list[int]] = {}
    label = label_of(group)
    trace: Trace | None = group.trace
    timeline = (
        timeline_html(group, gid, quotes, colors, where)
        if trace is not None
        else f'<p class="err">The trace could not be read: {e(group.problem)}</p>'
    )
    head = [f'<section class="trace" id="t{gid}"><h2>{e(group.trace_id)}</h2>']
    changed = changed_note(group)
    if changed:
        head.append(f'<p class="err">⚠ {e(changed)}.</p>')
    if trace is not None:
        head.append(f'<p class="muted">{e(trace.format)} · {len(trace.steps)} steps · {_agents(trace)} · {e(group.source)}</p>')
        if trace.task:
            head.append(f'<div class="task"><b>Task</b>{folded_text(shorten(trace.task, page_step_chars()), 400)}</div>')
        if trace.final_output:  # a submitted patch is read whole (`code_text_html` folds no diff)
            final = shorten(trace.final_output, page_step_chars())
            shown = code_text_html(final, []) if is_code_heavy(final) else folded_text(final, 400)
            head.append(f'<div class="task final"><b>Final output</b>{shown}</div>')
        head.append(outcome_html(trace))
    if label:
        head.append(
            f'<p>Label: <a href="#t{gid}-s{e(label.get("mistake_step"))}">step {e(label.get("mistake_step"))}</a> '
            f"by <b>{e(label.get('mistake_agent'))}</b>"
            f"{' — ' + e(label['reason']) if label.get('reason') else ''}</p>"
        )
    single = len(group.records) == 1
    cards = "".join(diagnosis_html(r, k, group, gid, quotes, where, colors[_label(r)], single) for k, r in enumerate(group.records))
    return (
        f'{"".join(head)}<div class="layout"><div class="verdicts">{cards}</div>'
        f'<div class="trace-steps"><h3>Trace</h3>{timeline}</div></div></section>'
    )


def index_html(groups: list[TraceGroup]) -> str:
    """A table of every diagnosis on the page, linking to it (only when there is more than one)."""
    rows = []
    for gid, g in enumerate(groups):
        label = label_of(g)
        for k, r in enumerate(g.records):
            rows.append(
                f'<tr><td><a href="#d{gid}-{k}">{e(g.trace_id)}</a></td><td>{e(_label(r))}</td>'
                f'<td class="num">{e(r.get("seed"))}</td><td class="num">{e(r.get("step"))}'
                f"{_hit(r.get('step'), label.get('mistake_step'))}</td><td>{e(r.get('agent'))}</td>"
                f'<td class="num">{e(label.get("mistake_step"))}</td>'
                f'<td class="num">{int((r.get("usage") or {}).get("prompt_tokens", 0) or 0):,}</td>'
                f"<td>{'error' if r.get('error') else e(r.get('stop_reason'))}</td></tr>"
            )
    return (
        '<table class="grid"><thead><tr><th>trace</th><th>method</th><th>seed</th><th>step</th><th>agent</th>'
        f"<th>label</th><th>prompt tokens</th><th>stop</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def method_colors(groups: list[TraceGroup]) -> dict[str, str]:
    """One colour per method label, in order of first appearance."""
    labels: list[str] = []
    for g in groups:
        for r in g.records:
            if _label(r) not in labels:
                labels.append(_label(r))
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(labels)}


def build_page(groups: list[TraceGroup], title: str = "localfa diagnoses", nav: str = "") -> str:
    """The whole page as one HTML document (no external resource of any kind); `nav` is markup
    the caller built (a link back to the sweep's index), put above the title."""
    colors = method_colors(groups)
    n = sum(len(g.records) for g in groups)
    body = [
        nav,
        f"<h1>{e(title)}</h1>",
        f'<p class="note">{n} diagnos{"is" if n == 1 else "es"} of {len(groups)} trace{"" if len(groups) == 1 else "s"}. '
        "Highlighted in red: the step a method named; amber: the labelled fault; purple: error spans; "
        "yellow marks: evidence quotes where they occur.</p>",
    ]
    if n > 1:
        body.append(index_html(groups))
    body += [trace_section(g, gid, colors) for gid, g in enumerate(groups)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">{GENERATOR}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )


def write_page(groups: list[TraceGroup], out: str | Path, title: str = "localfa diagnoses") -> Path:
    """Write the page atomically (a reader never sees half a file), every secret masked (a
    results file from elsewhere may carry one: `localfa.redact`); returns its path."""
    return replace_durably(out, redact(build_page(groups, title)))
