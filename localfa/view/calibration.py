"""Calibration: does an answer's confidence say how often it is right?

Records with a `confidence` (ensembles' agreement share, any method with a measure of its own)
are binned by confidence; each bin's step accuracy is plotted at the bin's mean confidence, one
curve per method, beside the ideal diagonal. A method whose curve follows the diagonal has a
confidence one can act on (e.g. escalate below 0.6). The x axis is labelled at the bin edges (the
bins' means can sit a hair apart and their labels would overlap); each point says how many runs
its bin holds (``n=12``): a bin of 2 runs says little.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from localfa.view.charts import PALETTE, Series, line_chart

BINS = 5  # [0, .2), [.2, .4), ... [.8, 1.0]


def _bin(confidence: float) -> int:
    return min(BINS - 1, max(0, int(confidence * BINS)))


def calibration_table(records: Sequence[Any]) -> dict[str, list[tuple[float, float, int]]]:
    """method -> [(mean confidence, step accuracy, runs)] per non-empty bin, from scored records.

    Records without a confidence, without a labelled step or that failed are left out.
    """
    from localfa.bench.metrics import score_record

    bins: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.confidence is None or r.error:
            continue
        step = score_record(r).get("step")
        if step is None:
            continue
        bins[r.method][_bin(float(r.confidence))].append((float(r.confidence), float(step)))
    table: dict[str, list[tuple[float, float, int]]] = {}
    for method, by_bin in bins.items():
        table[method] = [
            (sum(c for c, _ in pts) / len(pts), sum(s for _, s in pts) / len(pts), len(pts)) for _, pts in sorted(by_bin.items())
        ]
    return table


def calibration_chart(records: Sequence[Any]) -> str:
    """The chart as inline SVG, or "" when no record carries a confidence."""
    table = calibration_table(records)
    if not table:
        return ""
    series = [Series("ideal", ((0.0, 0.0), (1.0, 1.0)), "#bbbbbb")]
    series += [
        Series(
            method,
            tuple((round(c, 3), acc) for c, acc, _ in rows),
            PALETTE[(i + 1) % len(PALETTE)],
            notes=tuple(f"n={n}" for _, _, n in rows),
        )
        for i, (method, rows) in enumerate(sorted(table.items()))
    ]
    return line_chart(
        series,
        title="Calibration: step accuracy by confidence",
        x_label="confidence (binned; mean per bin; n = runs in the bin)",
        x_prefix="",
        x_ticks=[k / BINS for k in range(BINS + 1)],
    )
