"""The sweep index: one row per diagnosis, sortable and filterable by every column and by free text.

A sweep's diagnoses are too many for one page of trace views (76 traces made a 6.9 MB page), so
`localfa view` writes this index beside one page per trace (`localfa.view.sweep`). The index ships
its rows as one JSON block and a small script draws only the rows in view, so it opens at once
whatever the sweep's size; each row links to its trace's page, read only when opened.

The rows are the records' own words, so they are treated as hostile: every value is cut to a
bounded length, numbers are kept only when they are finite numbers, the JSON block escapes every
``<``, ``>`` and ``&`` (nothing in it can end the block), and the script puts values on the page
as text, never as markup. The content security policy admits that one script by its hash and
nothing else: no request can leave the page.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from localfa.traces.model import normalize_agent
from localfa.view.html import e, step_number
from localfa.view.page import label_of
from localfa.view.records import TraceGroup
from localfa.view.style import GENERATOR

TEXT_CHARS = 200  # a cell's text is cut here (a record may hold megabytes in any field)
PAGE_DIGITS = 5  # trace pages are named 00000.html, 00001.html, ... (index.js pads the same way)


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    kind: Literal["text", "num"]
    width: int  # px
    tip: str
    digits: int | None = None  # decimals shown for a number (None: an integer with thousands separators)
    always: bool = False  # shown even when no row has a value
    hidden: bool = False  # in the column menu but not shown until asked for

    def spec(self, width: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "title": self.title, "kind": self.kind, "width": width or self.width, "tip": self.tip}
        if self.digits is not None:
            out["digits"] = self.digits
        return out


COLUMNS: tuple[Column, ...] = (
    Column("trace", "trace", "text", 260, "the trace's id; opens its page", always=True),
    Column("subset", "subset", "text", 150, "the trace's subset (Who&When: algorithm-generated or hand-crafted)"),
    Column("method", "method", "text", 220, "the method's label", always=True),
    Column("seed", "seed", "num", 46, "the run seed"),
    Column("budget", "budget", "text", 70, "the context budget"),
    Column("step", "step", "num", 48, "the decisive step the method named", always=True),
    Column("agent", "agent", "text", 150, "the agent the method held responsible", always=True),
    Column("label_step", "label", "num", 50, "the labelled decisive step"),
    Column("label_agent", "label agent", "text", 170, "the labelled responsible agent", hidden=True),
    Column("step_ok", "step ✓", "text", 64, "yes: the named step is the labelled one"),
    Column("agent_ok", "agent ✓", "text", 70, "yes: the named agent is the labelled one"),
    Column("category", "category", "text", 180, "the failure category (localfa bench --categorise)"),
    Column("confidence", "conf.", "num", 50, "the method's confidence (an ensemble's agreement share)", digits=2),
    Column("harness", "harness", "text", 66, "what the harness said of the run (failed, passed)"),
    Column("stop", "stop", "text", 110, "why the method stopped; error: it failed (such rows are red)", always=True, hidden=True),
    Column("calls", "calls", "num", 52, "model calls", hidden=True),
    Column("tokens", "tokens", "num", 74, "prompt + completion tokens"),
    Column("seconds", "s", "num", 50, "wall seconds", digits=1, hidden=True),
    Column("reason", "reasoning", "text", 240, "the start of the method's reasoning, or the error", always=True),
)


def _text(value: Any) -> str | None:
    """A record's value as one bounded line of text (None when empty)."""
    if value is None or value == "":
        return None
    flat = " ".join(str(value).split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"


def _number(value: Any) -> float | int | None:
    """A finite number, else None (a record's "number" may be text, a bool, NaN or 1e999)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _match(pred: Any, gold: Any, agent: bool = False) -> str | None:
    if gold is None or gold == "":
        return None
    if pred is None:
        return "no"
    same = normalize_agent(str(pred)) == normalize_agent(str(gold)) if agent else pred == gold
    return "yes" if same else "no"


def harness_verdict(record: dict[str, Any], group: TraceGroup) -> str | None:
    """What the harness said of the run: from the record, else from its trace as read."""
    verdict = record.get("harness")
    if not isinstance(verdict, dict) and group.trace is not None:
        verdict = group.trace.metadata.get("harness")
    if not isinstance(verdict, dict):
        return None
    return {True: "failed", False: "passed"}.get(verdict.get("failed"), "no verdict")  # type: ignore[arg-type]


def row_values(record: dict[str, Any], group: TraceGroup) -> dict[str, Any]:
    """The index's cells for one record of `group` (see `COLUMNS`)."""
    label = label_of(group)
    usage = record.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    step = step_number(record.get("step"))
    tokens = [_number(usage.get(k)) for k in ("prompt_tokens", "completion_tokens")]
    error = record.get("error")
    reason = f"error: {str(error).strip().splitlines()[0] if str(error).strip() else error}" if error else record.get("reasoning")
    gold_step = step_number(label.get("mistake_step"))
    budget = record.get("budget")
    return {
        "trace": _text(group.trace_id),
        "subset": _text(record.get("subset")),
        "method": _text(record.get("method")) or "?",
        "seed": _number(record.get("seed")),
        "budget": None if budget in (None, "", "none") else _text(budget),
        "step": step,
        "agent": _text(record.get("agent")),
        "label_step": gold_step,
        "label_agent": _text(label.get("mistake_agent")),
        "step_ok": None if error else _match(step, gold_step),
        "agent_ok": None if error else _match(record.get("agent"), label.get("mistake_agent"), agent=True),
        "category": _text(record.get("category")),
        "confidence": _number(record.get("confidence")),
        "harness": harness_verdict(record, group),
        "stop": "error" if error else _text(record.get("stop_reason")),
        "calls": _number(usage.get("calls")),
        "tokens": sum(t for t in tokens if t is not None) if any(t is not None for t in tokens) else None,
        "seconds": _number(record.get("wall_s")),
        "reason": _text(reason),
    }


CHAR_PX = 7.4  # about one character of the table's font
TITLE_PX = 7.6  # ... of a title (bold)
PAD_PX = 14  # a cell's padding
TITLE_PAD_PX = 20  # ... and room for the sort mark


def column_width(column: Column, values: list[Any]) -> int:
    """Pixels for `column`: its title, and 9 values in 10 up to its `width` (a few long ones are
    cut with an ellipsis and shown whole on hover); the last column (the reasoning) takes what the
    window has left, so it keeps its own."""
    if column.key == COLUMNS[-1].key:
        return column.width
    texts = sorted(
        len(f"{v:,}" if isinstance(v, int) else f"{v:.{column.digits or 0}f}" if isinstance(v, float) else str(v))
        for v in values
        if v is not None
    )
    typical = texts[int(0.9 * (len(texts) - 1))] if texts else 0
    title = len(column.title) * TITLE_PX + TITLE_PAD_PX
    return int(max(title, min(column.width, typical * CHAR_PX + PAD_PX)))


def _redundant_subset(cells: list[dict[str, Any]]) -> bool:
    """Every trace id already names its subset (Who&When's ``whowhen/hand-crafted/6``)."""
    return all(not v["subset"] or str(v["subset"]) in str(v["trace"]) for v in cells)


def index_data(groups: list[TraceGroup], pages_dir: str) -> dict[str, Any]:
    """The JSON the index script reads: the columns that have something to show, one row per
    record (its cells, then its trace page's number and its place on that page)."""
    cells = [(gid, k, row_values(r, g)) for gid, g in enumerate(groups) for k, r in enumerate(g.records)]
    columns = [c for c in COLUMNS if c.always or any(v[c.key] is not None for _, _, v in cells)]
    hidden = [c.key for c in columns if c.hidden or (c.key == "subset" and _redundant_subset([v for _, _, v in cells]))]
    return {
        "columns": [c.spec(column_width(c, [v[c.key] for _, _, v in cells])) for c in columns],
        "hidden": hidden,
        "pages": pages_dir,
        "rows": [[v[c.key] for c in columns] + [gid, k] for gid, k, v in cells],
    }


def page_name(gid: int) -> str:
    """The file name of trace page `gid` (the script builds the same from the number)."""
    return f"{gid:0{PAGE_DIGITS}d}.html"


def json_block(data: Any) -> str:
    """`data` as JSON that cannot end its <script> element: ASCII only (a lone surrogate in a
    record stays an escape), with ``<``, ``>`` and ``&`` escaped as JSON escapes."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@lru_cache(maxsize=1)
def script() -> str:
    return resources.files("localfa.view").joinpath("index.js").read_text(encoding="utf-8")


def csp(source: str) -> str:
    """The index's policy: this one script (by its hash), inline styles, nothing fetched."""
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'"
    )


INDEX_CSS = """
*{box-sizing:border-box}
html,body{height:100%}
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#222;display:flex;flex-direction:column}
header{padding:.8em 1.2em .5em}h1{font-size:1.35em;margin:0 0 .2em}
.note{color:#555;font-size:.88em;margin:.2em 0}
.bar{display:flex;gap:.8em;align-items:center;flex-wrap:wrap;margin-top:.4em}
#q{width:32em;max-width:100%;padding:.3em .5em;font-size:.95em}
#status{color:#333;font-size:.9em}
#cols{position:relative;font-size:.9em}#cols>summary{cursor:pointer;color:#0b5cad}
#cols div{position:absolute;z-index:3;background:#fff;border:1px solid #ccc;padding:.4em .6em;columns:2;width:22em}
#cols label{display:block;white-space:nowrap}
button{font-size:.9em}
details.help{font-size:.85em;color:#444}details.help summary{cursor:pointer;color:#0b5cad}
#grid{flex:1;overflow:auto;border-top:1px solid #ddd;min-height:12em}
table{border-collapse:separate;border-spacing:0;table-layout:fixed;font-size:.85em}
th,td{border-bottom:1px solid #eee;padding:0 .4em;height:26px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;text-align:left}
thead th{position:sticky;background:#f3f3f3;z-index:2}
tr.titles th{top:0;cursor:pointer;user-select:none;font-weight:600;border-bottom:1px solid #ddd}
tr.filters th{top:26px;padding:2px .2em;border-bottom:2px solid #ccc}
tr.filters input{width:100%;font-size:.95em;padding:1px .3em;border:1px solid #ccc;border-radius:3px}
tr.filters input.bad{border-color:#b42318;background:#fde7e5}
th.asc::after{content:" ▲";font-size:.75em}th.desc::after{content:" ▼";font-size:.75em}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tbody tr[data-p]{cursor:pointer}tbody tr[data-p]:hover td{background:#f5f9ff}
tr.sel td{background:#e4efff!important}tr.error td{color:#b42318}
td.yes{color:#1a7f37;font-weight:600}td.no{color:#b42318;font-weight:600}
tr.spacer td{padding:0;border:0;height:auto}
td.empty{color:#777;padding:1em}
a{color:#0b5cad}
"""

HELP = (
    "Click a title to sort (again: reverse, a third time: unsorted). A column's filter takes text "
    "(<code>safari</code>), several choices (<code>a,b</code>), an exclusion (<code>!random</code>) or an exact value "
    "(<code>=0</code>); a number column takes <code>4</code>, <code>&lt;3</code>, <code>&gt;=0.5</code>, "
    "<code>2..5</code> or <code>none</code>. The search box matches words anywhere in a row, its reasoning included. "
    "Keys: <kbd>/</kbd> search, <kbd>j</kbd>/<kbd>k</kbd> or arrows move, <kbd>Enter</kbd> opens. "
    "The view is kept in the address (bookmark it; Back from a trace returns to it)."
)


def build_index(groups: list[TraceGroup], pages_dir: str, title: str, note: str = "") -> str:
    """The index page as one HTML document (its trace pages are written by `localfa.view.sweep`)."""
    source = script()
    n = sum(len(g.records) for g in groups)
    lead = (
        f"{n:,} diagnos{'is' if n == 1 else 'es'} of {len(groups):,} trace{'' if len(groups) == 1 else 's'}. "
        "Each row opens its trace's page: the verdicts beside the trace, the decisive step highlighted."
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp(source)}">{GENERATOR}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{INDEX_CSS}</style></head><body>"
        f'<header><h1>{e(title)}</h1><p class="note">{e(lead)}{(" " + e(note)) if note else ""}</p>'
        '<div class="bar"><input id="q" type="search" placeholder="Search every column and the reasoning ( / )" '
        'autocomplete="off" aria-label="search"><span id="status"></span>'
        '<details id="cols"><summary>Columns</summary><div></div></details>'
        '<button id="clear" type="button">Clear filters</button>'
        f'<details class="help"><summary>How to filter</summary>{HELP}</details></div></header>'
        '<div id="grid"><table><colgroup></colgroup><thead><tr class="titles"></tr><tr class="filters"></tr></thead>'
        "<tbody></tbody></table></div>"
        f'<noscript><p class="note">This index needs JavaScript to draw its rows; every trace\'s page is in '
        f"{e(pages_dir)}/ and opens without it.</p></noscript>"
        f'<script type="application/json" id="rows">{json_block(index_data(groups, pages_dir))}</script>'
        f"<script>{source}</script></body></html>\n"
    )
