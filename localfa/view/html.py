"""Small HTML building blocks shared by the page and the method panels.

`value_html` renders any JSON value readably without knowing its meaning: a list of flat objects
becomes a table, an object a key/value list, long text a folded block, and a value under a key
that names a step (``step``, ``t_hat``, ``step_id``...) links to that step on the timeline. This
is what lets a method whose `details` keys change, or a new method, still show its path.
"""

from __future__ import annotations

import html
import json
from typing import Any, Callable

STEP_KEYS = frozenset({"step", "step_id", "t_hat", "final_step", "predicted_step", "mistake_step", "first_error_step"})
FOLD_CHARS = 600  # text longer than this is folded behind its first part
MAX_ROWS = 200  # a list longer than this shows its head and says how much is left out

StepLink = Callable[[int], str]  # step index -> href


def e(value: Any) -> str:
    """HTML-escaped text of a value (None -> empty)."""
    return html.escape("" if value is None else str(value), quote=True)


def step_number(value: Any) -> int | None:
    """`value` when it is a step number (an int, not a bool), else None: a record's values are
    never trusted to be what their key says."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def folded_text(text: str, limit: int = FOLD_CHARS, open_: bool = False, inner: str | None = None) -> str:
    """`text` in a <div>, or behind a <details> showing its start when it is longer than `limit`.

    `inner` is the already-escaped body to show (e.g. with <mark>s); default: `text` escaped.
    """
    body = inner if inner is not None else e(text)
    if len(text) <= limit:
        return f'<div class="text">{body}</div>'
    head = e(" ".join(text[:160].split()))
    return (
        f'<details class="fold"{" open" if open_ else ""}><summary><span class="head">{head}…</span> '
        f'<span class="muted">({len(text):,} characters)</span></summary><div class="text">{body}</div></details>'
    )


def json_block(value: Any, title: str = "JSON", open_: bool = False) -> str:
    """A collapsible pretty-printed JSON block (the fallback for anything unrecognised)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f'<details class="json"{" open" if open_ else ""}><summary>{e(title)}</summary><pre>{e(text)}</pre></details>'


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _step_value(key: str, v: Any, link: StepLink | None) -> str | None:
    if link is None or key not in STEP_KEYS or isinstance(v, bool) or not isinstance(v, int):
        return None
    return f'<a class="steplink" href="{link(v)}">step {v}</a>'


def scalar_html(key: str, v: Any, link: StepLink | None = None) -> str:
    """One scalar value: a step link, a number, yes/no, or (folded when long) text."""
    linked = _step_value(key, v, link)
    if linked:
        return linked
    if isinstance(v, bool):
        return '<span class="yes">yes</span>' if v else '<span class="no">no</span>'
    if v is None:
        return '<span class="muted">—</span>'
    if isinstance(v, float):
        return f"{v:.3g}"
    return folded_text(str(v), limit=300) if isinstance(v, str) and len(v) > 300 else e(v)


def value_html(value: Any, link: StepLink | None = None, key: str = "", depth: int = 0) -> str:
    """Any JSON value as readable HTML (see the module docstring)."""
    if _is_scalar(value):
        return scalar_html(key, value, link)
    if depth >= 4:
        return json_block(value, "…")
    if isinstance(value, dict):
        if not value:
            return '<span class="muted">{}</span>'
        rows = "".join(f"<tr><th>{e(k)}</th><td>{value_html(v, link, str(k), depth + 1)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    items = list(value)
    if not items:
        return '<span class="muted">none</span>'
    if all(_is_scalar(x) for x in items):
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items) or len(items) <= 1:
            return ", ".join(scalar_html(key, x, link) for x in items)
        return "<ul>" + "".join(f"<li>{scalar_html(key, x, link)}</li>" for x in items) + "</ul>"
    more = len(items) - MAX_ROWS
    shown = items[:MAX_ROWS]
    tail = f'<p class="muted">… {more} more not shown</p>' if more > 0 else ""
    if all(isinstance(x, dict) for x in shown):
        cols: list[str] = []
        for x in shown:
            cols.extend(k for k in x if k not in cols)
        head = "".join(f"<th>{e(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{value_html(x.get(c), link, c, depth + 1)}</td>" for c in cols) + "</tr>" for x in shown)
        return f'<table class="grid"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}'
    return "<ol start=0>" + "".join(f"<li>{value_html(x, link, key, depth + 1)}</li>" for x in shown) + f"</ol>{tail}"


def section(title: str, body: str, open_: bool = True, css: str = "panel") -> str:
    """A titled, collapsible block."""
    return f'<details class="{css}"{" open" if open_ else ""}><summary>{e(title)}</summary>{body}</details>'
