"""How a method got to its verdict, as read from a record's `details` and `transcript`.

SAFARI gets a turn-by-turn view (tool call, STM update and the STM after the turn, claims with
their scores, what the tool returned). FALAT's path is drawn by `localfa.view.falat` from the keys
it records. DRIFT's path opens with its answer as it records it (prediction, error spans, first
error), then its stages in the paper's order, each drawn by the generic renderer. Keys no stage claims, and
every method this module does not know, end up in one "other details" block: a new method still
shows everything it recorded.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from localfa.view.html import StepLink, e, folded_text, json_block, section, step_number, value_html

# Keys shown elsewhere on the page (the label card), never as part of a method's path.
SHOWN_ELSEWHERE = frozenset({"label"})

Stage = tuple[str, tuple[str, ...]]  # (title, key names or fragments that belong to it)

DRIFT_STAGES: tuple[Stage, ...] = (  # after DRIFT's own Prediction / Error spans / First error (drift_path)
    ("Spans", ("spans", "segmented", "segment_chunks")),
    ("Claim ledger", ("ledger", "ledger_chunks", "ledger_retries", "unchecked_claims")),
    ("Support checks", ("support",)),
    ("Dependency tracer", ("tracer",)),
    ("Bounds hit and text cut", ("bounds_hit", "limits_hit", "run_text", "budget_note")),
    ("Cost per stage", ("cost",)),
)
DRIFT_PREDICTION = frozenset(
    {"error_spans", "endpoint_spans", "first_error_span", "no_error_reason", "step_is_fallback", "fallback_span", "fallback_claim"}
)


def base_name(record: dict[str, Any]) -> str:
    """The method's registry name: `safari` for a record labelled ``safari:max_turns=20``."""
    return str(record.get("method_name") or record.get("method") or "").split(":")[0]


def _belongs(key: str, names: tuple[str, ...]) -> bool:
    k = key.lower()
    return any(k == n or n in k for n in names)


def staged_details(details: dict[str, Any], stages: tuple[Stage, ...], link: StepLink, skip: frozenset[str] = frozenset()) -> str:
    """`details` split into the given stages (first match wins), the rest as "other details"."""
    left = {k: v for k, v in details.items() if k not in SHOWN_ELSEWHERE and k not in skip}
    out = []
    for title, names in stages:
        mine = {k: v for k, v in left.items() if _belongs(k, names)}
        if not mine:
            continue
        for k in mine:
            left.pop(k)
        body = value_html(mine[next(iter(mine))], link, next(iter(mine))) if len(mine) == 1 else value_html(mine, link)
        out.append(section(title, body, css="stage"))
    if left:
        out.append(section("Other details", value_html(left, link), open_=not stages, css="stage"))
        out.append(json_block(left, "raw JSON"))
    return "".join(out)


# ---- SAFARI ------------------------------------------------------------------------------------

_LONG_PARAMS = frozenset({"reasoning", "questions"})


def tool_call_text(tool: dict[str, Any]) -> str:
    """``read(offset=10, limit=40)``: the call without its long arguments (shown below it)."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in tool.items() if k != "name" and k not in _LONG_PARAMS)
    return f"{tool.get('name', '?')}({args})"


def stm_after_each_turn(transcript: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The short-term memory as it stood after each turn, replayed from the turns' sparse updates.

    The transcript records only what each turn changed; SAFARI's own merge rules rebuild the rest.
    """
    from localfa.methods.safari.stm import ShortTermMemory

    stm = ShortTermMemory()
    out: list[dict[str, Any] | None] = []
    for turn in transcript:
        update = (turn.get("output") or {}).get("stm")
        if isinstance(update, dict):
            try:
                stm.merge(update)
            except (KeyError, TypeError, ValueError):
                out.append(None)  # an update this version cannot replay: show none rather than a wrong one
                continue
        out.append({k: v for k, v in stm.as_dict().items() if k != "past_tool_calls"})
    return out


def _evaluation_html(evaluation: dict[str, Any]) -> str:
    rows = "".join(
        f'<tr><td>{e(v.get("question"))}</td><td class="num score">{e(v.get("score"))}</td><td>{e(v.get("feedback"))}</td></tr>'
        for v in evaluation.get("verdicts") or []
    )
    return (
        f'<div class="claims"><b>evaluate</b>: mean score <b>{e(evaluation.get("mean"))}</b>'
        f'<table class="grid"><thead><tr><th>claim</th><th>score</th><th>feedback</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def safari_turn_html(turn: dict[str, Any], stm_after: dict[str, Any] | None, link: StepLink) -> str:
    """One investigator turn: what it called and why, what it remembered, what came back."""
    out = turn.get("output") or {}
    n = turn.get("turn")
    if n == "final":
        step = out.get("step_id")
        return (
            f'<li class="turn final"><div class="turnhead"><b>forced final answer</b>: '
            f"{value_html(step, link, 'step_id')}</div>{folded_text(str(out.get('reasoning') or ''))}</li>"
        )
    tool = out.get("tool") or {}
    flags = "".join(f' <span class="flag">{name}</span>' for name in ("refused", "reminder") if turn.get(name))
    cost = f"prompt {turn.get('prompt_tokens', '?')} tok, cached {turn.get('cached_tokens', '?')}"
    parts = [
        f'<li class="turn"><div class="turnhead"><b>turn {e(n)}</b> <code class="call">{e(tool_call_text(tool))}</code>'
        f'{flags} <span class="muted">{e(cost)}</span></div>'
    ]
    if out.get("next_action"):
        parts.append(f'<div class="why">{e(out["next_action"])}</div>')
    if tool.get("name") == "submit_step":
        parts.append(f"<div>submits {value_html(tool.get('step_id'), link, 'step_id')}: {e(tool.get('reasoning'))}</div>")
    if tool.get("name") == "evaluate":
        parts.append(f'<div class="why">hypothesis: {e(tool.get("reasoning"))}</div>')
    if turn.get("evaluation"):
        parts.append(_evaluation_html(turn["evaluation"]))
    update = out.get("stm")
    if update:
        changed = ", ".join(turn.get("stm_changed") or []) or "nothing"
        parts.append(section(f"STM update (changed: {changed})", value_html(update, link), open_=False, css="sub"))
    if stm_after is not None:
        parts.append(section(f"STM after turn {n}", value_html(stm_after, link), open_=False, css="sub stm"))
    if turn.get("observation"):
        parts.append(section("observation", folded_text(str(turn["observation"]), limit=400), open_=False, css="sub"))
    parts.append("</li>")
    return "".join(parts)


def safari_path(record: dict[str, Any], link: StepLink) -> str:
    """SAFARI's turns when the record has a transcript; else its scores and final STM."""
    details = record.get("details") or {}
    head = (
        f"<p>{e(details.get('turns_used', '?'))} turns, stop: {e(record.get('stop_reason'))}, "
        f"evaluate means: {e(details.get('evaluate_means') or 'none')}, "
        f"evicted turns: {e(details.get('evicted_turns', 0))}</p>"
    )
    transcript = record.get("transcript") or []
    if transcript:
        stms = stm_after_each_turn(transcript)
        turns = "".join(safari_turn_html(t, s, link) for t, s in zip(transcript, stms))
        body = head + f'<ol class="turns">{turns}</ol>'
    else:
        body = head + (
            '<p class="muted">No transcript in this record: run `localfa diagnose --transcript` (or `--html`) to see each turn.</p>'
        )
    scores = details.get("evaluate_scores")
    if scores:
        rows = "".join(f"<tr><td>{i + 1}</td><td>{e(', '.join(map(str, s)))}</td></tr>" for i, s in enumerate(scores))
        body += section("evaluate scores", f'<table class="grid"><tr><th>#</th><th>claim scores</th></tr>{rows}</table>', css="stage")
    if details.get("stm"):
        body += section("final STM", value_html(details["stm"], link), open_=not transcript, css="stage stm")
    body += staged_details(
        details, (), link, skip=frozenset({"turns_used", "evaluate_scores", "evaluate_means", "evicted_turns", "stm", "evidence_verbatim"})
    )
    return body


# ---- dispatch ----------------------------------------------------------------------------------


def _step_range(a: Any, b: Any, link: StepLink, text: str | None = None) -> str:
    """A link to step `a` reading "steps a–b"; values that are not step numbers are shown as text."""
    lo, hi = step_number(a), step_number(b)
    if lo is None or hi is None:
        return e(f"steps {a}–{b}")
    shown = text or (f"step {lo}" if lo == hi else f"steps {lo}–{hi}")
    return f'<a class="steplink" href="{e(link(lo))}">{e(shown)}</a>'


def _span_pair(span: Any) -> tuple[Any, Any]:
    """(first, last) of a recorded span, whatever shape the record gave it."""
    if isinstance(span, (list, tuple)) and len(span) == 2:
        return span[0], span[1]
    return span, span


def drift_prediction_html(record: dict[str, Any], link: StepLink) -> str:
    """DRIFT's answer as it records it: the answered step and agent (a fallback when no error span
    was found), the error spans, and the first error with the claims marked there."""
    d = record.get("details") or {}
    spans = [_span_pair(x) for x in d.get("spans") or []] if isinstance(d.get("spans"), list) else []
    step, agent = record.get("step"), record.get("agent")
    answered = value_html(step, link, "step") if step is not None else "none"
    why = f'<p class="muted">fallback: {e(d.get("no_error_reason"))}</p>' if d.get("step_is_fallback") else ""
    out = [section("Prediction", f"<p>answered {answered}, agent <b>{e(agent)}</b></p>{why}", css="stage")]
    err = [i for i in _list(d.get("error_spans")) if step_number(i) is not None and 0 <= i < len(spans)]
    items = "".join(f"<li>span {i}: {_step_range(spans[i][0], spans[i][1], link)}</li>" for i in err)
    out.append(section("Error spans", f"<ol>{items}</ol>" if items else '<p class="muted">none marked</p>', css="stage"))
    late = [i for i in _list(d.get("endpoint_spans")) if step_number(i) is not None and 0 <= i < len(spans)]
    if late:  # the authors' completion of the prediction: committed claims' consequential spans and last uses
        items = "".join(f"<li>span {i}: {_step_range(spans[i][0], spans[i][1], link)}</li>" for i in late)
        out.append(section("Late endpoints (also predicted)", f"<ol>{items}</ol>", css="stage"))
    first = step_number(d.get("first_error_span"))
    if first is not None and 0 <= first < len(spans):
        tracer = d.get("tracer")
        tracer = tracer if isinstance(tracer, dict) else {}
        marks = [m for m in _list(tracer.get("marks")) if isinstance(m, dict) and m.get("span") == first]
        roles = ", ".join(f"{e(m.get('claim'))} ({e(m.get('role'))})" for m in marks) or "none"
        body = f"<p>span {first}: {_step_range(spans[first][0], spans[first][1], link)}; claims marked there: {roles}</p>"
    else:
        body = '<p class="muted">none</p>'
    out.append(section("First error", body, css="stage"))
    return "".join(out)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def drift_path(record: dict[str, Any], link: StepLink) -> str:
    return drift_prediction_html(record, link) + staged_details(record.get("details") or {}, DRIFT_STAGES, link, skip=DRIFT_PREDICTION)


def method_path(record: dict[str, Any], link: StepLink) -> str:
    """The method's own path: the renderer its class names (`BaseMethod.view_path`); a method
    without one, or one not registered, shows its details generically."""
    import importlib

    from localfa.methods.registry import MethodOptionError, method_class

    details = record.get("details") or {}
    try:
        target = method_class(base_name(record)).view_path
    except MethodOptionError:
        target = None
    spans = _spans_html(record, link)
    if target:
        module, _, attr = target.partition(":")
        renderer: Callable[[dict[str, Any], StepLink], str] = getattr(importlib.import_module(module), attr)
        try:
            return spans + renderer(record, link)
        except Exception as exc:  # noqa: BLE001 - a record its method's renderer cannot draw is shown as it is
            note = f'<p class="muted">{e(base_name(record))}\'s own view could not draw this record ({e(type(exc).__name__)}); its details as recorded:</p>'
            return spans + note + staged_details(details, (), link)
    body = spans + staged_details(details, (), link)
    if record.get("transcript"):
        body += json_block(record["transcript"], "transcript")
    return body or '<p class="muted">This method recorded no details.</p>'


def _spans_html(record: dict[str, Any], link: StepLink) -> str:
    spans = _list(record.get("spans"))
    if not spans:
        return ""
    items = ", ".join(_step_range(a, b, link, text=f"{a}–{b}") for a, b in map(_span_pair, spans))
    return f"<p>error spans (steps): {items}</p>"
