"""Charts are pure: data in, SVG out. Positions are checked, not just presence."""

from __future__ import annotations

import re
from types import SimpleNamespace

from localfa.view.charts import Bar, Point, Series, bar_chart, cost_chart, line_chart, log_ticks, pareto_front, report_charts


def _attr(svg: str, cls: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(rf'class="{cls}[^"]*"[^>]*?\b{name}="([-\d.]+)"', svg)]


def test_bars_are_proportional_and_carry_their_interval():
    svg = bar_chart([Bar("a", 0.5, 0.25, 0.75), Bar("b", 1.0), Bar("c", None)], width=560)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    w = _attr(svg, "bar", "width")
    assert len(w) == 2 and abs(w[1] - 2 * w[0]) < 0.2  # 1.0 is twice 0.5
    assert svg.count('class="interval"') == 1  # only the bar that has one
    assert "a: 0.500 [0.25, 0.75]" in svg and "no label" in svg


def test_pareto_front_keeps_only_what_buys_accuracy():
    pts = [Point("free", 0, 0.1), Point("cheap", 100, 0.3), Point("worse", 200, 0.2), Point("dear", 5000, 0.6), Point("dearer", 9000, 0.6)]
    assert [p.label for p in pareto_front(pts)] == ["free", "cheap", "dear"]


def test_cost_axis_is_logarithmic_and_zero_cost_sits_left_of_it():
    assert log_ticks(730, 16_000) == [100.0, 1000.0, 10_000.0, 100_000.0]
    svg = cost_chart([Point("zero", 0, 0.2), Point("a", 100, 0.5), Point("b", 1000, 0.5), Point("c", 10_000, 0.9)])
    xs = _attr(svg, "point", "cx")
    assert xs[0] < xs[1] < xs[2] < xs[3]
    assert abs((xs[2] - xs[1]) - (xs[3] - xs[2])) < 0.2  # one decade = one equal step
    assert svg.count('class="point front"') == 3  # zero, a, c: b costs more than a for nothing
    assert 'class="frontier"' in svg and ">0</text>" in svg


def test_line_chart_draws_one_curve_per_series_and_skips_missing_points():
    svg = line_chart([Series("m1", ((0, 0.1), (1, 0.5), (2, None))), Series("m2", ((0, 0.2), (1, 0.4), (2, 0.6)))])
    assert svg.count('class="curve"') == 2
    assert svg.count("<circle") == 5
    assert "m2: ±2 = 0.600" in svg


def test_empty_charts_say_so():
    for svg in (bar_chart([]), cost_chart([]), line_chart([])):
        assert "no data" in svg


def test_labels_are_escaped():
    assert "<script>" not in bar_chart([Bar("<script>x</script>", 0.5)])


def _est(mean, lo=None, hi=None):
    return SimpleNamespace(mean=mean, lo=lo, hi=hi)


def test_report_charts_use_overall_rows_and_prompt_tokens():
    def group(method, subset, step, tokens):
        metrics = {"step": _est(step, 0.0, 1.0), **{f"tol_{k}": _est(min(1.0, step + 0.1 * k)) for k in (1, 2, 3, 4, 5)}}
        return SimpleNamespace(method=method, budget="none", subset=subset, metrics=metrics, cost={"prompt_tokens": tokens})

    html = report_charts(
        [group("safari", "hand-crafted", 0.95, 1e6), group("safari", "overall", 0.4, 20_000), group("random", "overall", 0.1, 0)]
    )
    assert html.count("<svg") == 3
    assert 'data-chart="bars"' in html and 'data-chart="cost"' in html and 'data-chart="lines"' in html
    assert "safari: 0.400" in html and "0.950" not in html  # the subset row is not charted
    assert "safari: 0.400 at 20,000 tokens" in html
    assert "random: ±5 = 0.600" in html
