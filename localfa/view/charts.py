"""Charts as inline SVG strings: data in, SVG out, nothing fetched, no script.

Three pictures answer "which method wins, and at what cost" after a sweep:

- `bar_chart`: one bar per method (step accuracy) with its 95% interval as a whisker;
- `cost_chart`: accuracy against prompt tokens per trace on a log scale, the cost frontier (no
  other method is both cheaper and better) drawn through its points, so the cheapest good method
  stands out; methods that make no model call sit on a "0" tick left of the log axis;
- `line_chart`: accuracy within ±k steps, every method on one plot.

`report_charts` builds all three from the report's per-group summaries (overall rows).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Sequence

from localfa.view.style import PALETTE

FONT = "font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    color: str = PALETTE[0]


@dataclass(frozen=True)
class Point:
    label: str
    x: float  # cost (>= 0)
    y: float  # accuracy in [0, 1]
    color: str = PALETTE[0]


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float | None], ...]  # (x, y); y None = no value there
    color: str = PALETTE[0]
    notes: tuple[str, ...] = ()  # a short note written beside each point (e.g. "n=12"), if any


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


_BREAKS = ":,>+*= "
LINE_HEIGHT = 13


def wrap_label(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken after a spec's separators (``:``
    ``,`` ``>`` ``+`` ``=``, space) where it can be, inside a word where it cannot: a label is
    never cut, so two cascades that differ only at the end stay apart."""
    lines: list[str] = []
    rest = text
    while len(rest) > width:
        cut = max((rest.rfind(c, 0, width) for c in _BREAKS), default=-1)
        cut = cut + 1 if cut > 0 else width
        lines.append(rest[:cut])
        rest = rest[cut:]
    return [*lines, rest] if rest or not lines else lines


def _label_svg(x: float, y: float, text: str, width: int, anchor: str = "start", size: int = 12, suffix: str = "") -> str:
    """A label as one <text>, wrapped into <tspan> lines (`wrap_label`), the whole in its <title>;
    `y` is the first line's baseline."""
    lines = wrap_label(text, width)
    lines[-1] += suffix
    spans = "".join(f'<tspan x="{x:.1f}" dy="{0 if i == 0 else LINE_HEIGHT}">{_e(line)}</tspan>' for i, line in enumerate(lines))
    return f'<text class="label" x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"><title>{_e(text)}</title>{spans}</text>'


def _lines(text: str, width: int) -> int:
    return len(wrap_label(text, width))


def _svg(width: int, height: int, title: str, kind: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{kind}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}" style="{FONT}">',
        f'<text x="8" y="18" font-size="13" font-weight="bold">{_e(title)}</text>',
    ]


def _y_axis(parts: list[str], left: float, top: float, pw: float, ph: float, label: str) -> None:
    """Horizontal grid at 0, .25, ... 1 with labels, and the y-axis title."""
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        y = top + ph * (1 - v)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:g}</text>')
    cy = top + ph / 2
    parts.append(f'<text x="12" y="{cy:.1f}" font-size="12" text-anchor="middle" transform="rotate(-90 12 {cy:.1f})">{_e(label)}</text>')


def _empty(parts: list[str], cx: float, cy: float) -> None:
    parts.append(f'<text x="{cx:.1f}" y="{cy:.1f}" font-size="13" text-anchor="middle" fill="#777">no data</text>')


# ---- bars with intervals -----------------------------------------------------------------------


def bar_chart(bars: Sequence[Bar], title: str = "Step accuracy per method (95% interval)", width: int = 560, bar_height: int = 22) -> str:
    """Horizontal bars in [0, 1], one per entry, each with its interval as a whisker; a long
    label wraps onto more lines and its row grows to fit."""
    left, right, top, label_chars = 170, 50, 32, 26
    pw = width - left - right
    rows = [max(bar_height, _lines(b.label, label_chars) * LINE_HEIGHT + 4) for b in bars]
    ph = sum(r + 8 for r in rows) if bars else bar_height + 8
    height = top + ph + 34
    parts = _svg(width, height, title, "bars")
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        x = left + pw * v
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 16}" font-size="11" text-anchor="middle">{v:g}</text>')
    if not bars:
        _empty(parts, left + pw / 2, top + ph / 2)
    y = top + 4
    for b, row in zip(bars, rows):
        parts.append(_label_svg(left - 8, y + 12, b.label, label_chars, anchor="end"))
        by = y + (row - bar_height) / 2
        if b.value is None:
            parts.append(f'<text x="{left + 4}" y="{by + bar_height * 0.7:.1f}" font-size="11" fill="#777">no label</text>')
            y += row + 8
            continue
        w = pw * min(max(b.value, 0.0), 1.0)
        tip = f"{b.label}: {b.value:.3f}" + (f" [{b.lo:.2f}, {b.hi:.2f}]" if b.lo is not None and b.hi is not None else "")
        parts.append(
            f'<rect class="bar" x="{left}" y="{by:.1f}" width="{w:.1f}" height="{bar_height}" fill="{b.color}" '
            f'fill-opacity="0.8" data-value="{b.value:.4f}"><title>{_e(tip)}</title></rect>'
        )
        if b.lo is not None and b.hi is not None:
            x1, x2, cy = left + pw * b.lo, left + pw * b.hi, by + bar_height / 2
            parts.append(
                f'<g class="interval" stroke="#222" stroke-width="1.5"><line x1="{x1:.1f}" y1="{cy:.1f}" '
                f'x2="{x2:.1f}" y2="{cy:.1f}"/><line x1="{x1:.1f}" y1="{cy - 6:.1f}" x2="{x1:.1f}" '
                f'y2="{cy + 6:.1f}"/><line x1="{x2:.1f}" y1="{cy - 6:.1f}" x2="{x2:.1f}" y2="{cy + 6:.1f}"/></g>'
            )
        parts.append(f'<text x="{left + pw + 6}" y="{by + bar_height * 0.7:.1f}" font-size="11">{b.value:.3f}</text>')
        y += row + 8
    parts.append("</svg>")
    return "".join(parts)


def _legend_rows(labels: Sequence[str], top: float, chars: int) -> list[float]:
    """The baseline of each legend entry, each entry as tall as its wrapped label."""
    ys, y = [], top + 14
    for label in labels:
        ys.append(y)
        y += _lines(label, chars) * LINE_HEIGHT + 5
    return ys


# ---- accuracy against cost ---------------------------------------------------------------------


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """The points no other point beats on both axes (cheaper or as cheap, and better or as good),
    cheapest first: read left to right, each one buys accuracy the previous could not."""
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p.x, -p.y)):
        if not front or p.y > front[-1].y:
            front.append(p)
    return front


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering [lo, hi] (lo, hi > 0)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return [10.0**k for k in range(a, b + 1)]


def _tick_label(v: float) -> str:
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def cost_chart(
    points: Sequence[Point],
    title: str = "Step accuracy against cost (★ cost frontier)",
    x_label: str = "prompt tokens per trace (log scale)",
    y_label: str = "step accuracy",
    width: int = 600,
    height: int = 340,
) -> str:
    """Accuracy (y) against a cost (x, log scale), the cost frontier dashed through its points."""
    left, right, top, bottom, chars = 58, 180, 32, 46, 24
    legend = _legend_rows([p.label for p in points], top, chars)
    height = max(height, int(legend[-1]) + bottom if legend else height)
    pw, ph = width - left - right, height - top - bottom
    parts = _svg(width, height, title, "cost")
    _y_axis(parts, left, top, pw, ph, y_label)
    paid = [p.x for p in points if p.x > 0]
    zero_gap = 48 if any(p.x <= 0 for p in points) else 0
    ticks = log_ticks(min(paid), max(paid)) if paid else [1.0, 10.0]
    lx0, lx1 = math.log10(ticks[0]), math.log10(ticks[-1])

    def x(v: float) -> float:
        if v <= 0:
            return left + zero_gap / 2
        return left + zero_gap + (pw - zero_gap) * (math.log10(v) - lx0) / (lx1 - lx0)

    def y(v: float) -> float:
        return top + ph * (1 - v)

    for t in ticks:
        parts.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{top + ph}" stroke="#eee"/>')
        parts.append(f'<text x="{x(t):.1f}" y="{top + ph + 16}" font-size="11" text-anchor="middle">{_tick_label(t)}</text>')
    if zero_gap:
        parts.append(f'<text x="{x(0):.1f}" y="{top + ph + 16}" font-size="11" text-anchor="middle">0</text>')
        parts.append(
            f'<line x1="{left + zero_gap:.1f}" y1="{top}" x2="{left + zero_gap:.1f}" y2="{top + ph}" stroke="#bbb" stroke-dasharray="2,3"/>'
        )
    parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 8}" font-size="12" text-anchor="middle">{_e(x_label)}</text>')
    if not points:
        _empty(parts, left + pw / 2, top + ph / 2)
    front = pareto_front(points)
    if len(front) > 1:
        coords = " ".join(f"{x(p.x):.1f},{y(p.y):.1f}" for p in front)
        parts.append(f'<polyline class="frontier" points="{coords}" fill="none" stroke="#555" stroke-dasharray="5,4"/>')
    on_front = {id(p) for p in front}
    for i, p in enumerate(points):
        best = id(p) in on_front
        parts.append(
            f'<circle class="point{" front" if best else ""}" cx="{x(p.x):.1f}" cy="{y(p.y):.1f}" '
            f'r="{6 if best else 4.5}" fill="{p.color}" stroke="{"#111" if best else "none"}">'
            f"<title>{_e(p.label)}: {p.y:.3f} at {p.x:,.0f} tokens</title></circle>"
        )
        ly = legend[i]
        parts.append(f'<circle cx="{left + pw + 18}" cy="{ly - 4}" r="5" fill="{p.color}"/>')
        parts.append(_label_svg(left + pw + 28, ly, p.label, chars, size=11, suffix=" ★" if best else ""))
    parts.append("</svg>")
    return "".join(parts)


# ---- curves ------------------------------------------------------------------------------------


def line_chart(
    series: Sequence[Series],
    title: str = "Accuracy within ±k steps",
    x_label: str = "k (steps of tolerance; 0 = exact)",
    y_label: str = "accuracy",
    width: int = 600,
    height: int = 340,
    x_prefix: str = "±",
    x_ticks: Sequence[float] | None = None,
) -> str:
    """Curves in [0, 1] over a shared numeric x axis, one per series, with a legend (each point's
    tooltip reads "label: {x_prefix}x = y"). The x axis is labelled at `x_ticks` when given (else
    at every x a series has); a series' `notes` are written above its points."""
    left, right, top, bottom, chars = 58, 180, 32, 46, 22
    legend = _legend_rows([s.label for s in series], top, chars)
    height = max(height, int(legend[-1]) + bottom if legend else height)
    pw, ph = width - left - right, height - top - bottom
    parts = _svg(width, height, title, "lines")
    _y_axis(parts, left, top, pw, ph, y_label)
    xs = sorted({float(t) for t in x_ticks} if x_ticks else {px for s in series for px, _ in s.points}) or [0.0, 1.0]
    x0, x1 = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1

    def x(v: float) -> float:
        return left + pw * (v - x0) / (x1 - x0)

    def y(v: float) -> float:
        return top + ph * (1 - v)

    for v in xs:
        parts.append(f'<text class="xtick" x="{x(v):.1f}" y="{top + ph + 16}" font-size="11" text-anchor="middle">{v:g}</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 8}" font-size="12" text-anchor="middle">{_e(x_label)}</text>')
    if not series:
        _empty(parts, left + pw / 2, top + ph / 2)
    for i, s in enumerate(series):
        pts = [(px, py) for px, py in s.points if py is not None]
        if pts:
            coords = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in pts)
            parts.append(f'<polyline class="curve" points="{coords}" fill="none" stroke="{s.color}" stroke-width="2"/>')
            parts.extend(
                f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="3" fill="{s.color}"><title>{_e(s.label)}: '
                f"{_e(x_prefix)}{px:g} = {py:.3f}</title></circle>"
                for px, py in pts
            )
            noted = [(px, py, n) for (px, py), n in zip(s.points, s.notes) if py is not None and n]
            parts.extend(
                f'<text class="pointnote" x="{x(px) + 5:.1f}" y="{y(py) - 6:.1f}" font-size="10" fill="{s.color}">{_e(n)}</text>'
                for px, py, n in noted
            )
        ly = legend[i]
        parts.append(f'<line x1="{left + pw + 12}" y1="{ly - 4}" x2="{left + pw + 32}" y2="{ly - 4}" stroke="{s.color}" stroke-width="3"/>')
        parts.append(_label_svg(left + pw + 38, ly, s.label, chars, size=11))
    parts.append("</svg>")
    return "".join(parts)


# ---- the report's three charts -----------------------------------------------------------------


def report_charts(groups: Sequence[Any]) -> str:
    """The report's charts from its `GroupSummary`s (overall rows only), as one HTML fragment.

    A group is read through `method`, `budget`, `subset`, `metrics` (name -> estimate with
    `mean`, `lo`, `hi`) and `cost` (`prompt_tokens` per trace run).
    """
    overall = [g for g in groups if g.subset == "overall"]
    budgets = {g.budget for g in overall}
    named = [(g.method + (f" ({g.budget})" if len(budgets) > 1 else ""), g, PALETTE[i % len(PALETTE)]) for i, g in enumerate(overall)]
    bars, points = [], []
    for name, g, color in named:
        step = g.metrics.get("step")
        bars.append(Bar(name, _mean(g, "step"), getattr(step, "lo", None), getattr(step, "hi", None), color))
        mean = _mean(g, "step")
        if mean is not None:
            points.append(Point(name, float(g.cost.get("prompt_tokens", 0.0) or 0.0), mean, color))
    ks = sorted(int(k[4:]) for k in (overall[0].metrics if overall else {}) if k.startswith("tol_"))
    curves = [
        Series(name, tuple((float(k), _mean(g, "step" if k == 0 else f"tol_{k}")) for k in [0, *ks]), color) for name, g, color in named
    ]
    return (
        '<div class="charts" style="display:flex;flex-wrap:wrap;gap:1em 2em;align-items:flex-start">'
        f"{bar_chart(bars)}{cost_chart(points)}{line_chart(curves)}</div>"
    )


def _mean(group: Any, metric: str) -> float | None:
    est = group.metrics.get(metric)
    return None if est is None else est.mean
