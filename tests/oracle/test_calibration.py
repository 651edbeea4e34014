"""`--calibrate`: the grid point nearest the published baselines is kept, and every method's
prediction is printed beside its paper's figure."""

from __future__ import annotations

import math
import re

from localfa.bench.calibration import BASELINE_FIGURES, calibrate, calibration_lines, weighted
from localfa.bench.sweep import load_traces


def test_calibration_keeps_the_nearest_point_and_prints_predictions_beside_papers(whowhen, tmp_path):
    traces = load_traces([whowhen], limit=6)
    result = calibrate(
        traces, tmp_path, seeds=(0,), p_grid=(0.2, 1.0), spread_grid=(math.inf,), length_grid=(0.0,), predict=("no-such-method",)
    )
    assert [g[0] for g in result.grid] == [0.2, 1.0]
    assert result.p == 0.2  # published baselines score far below a perfect model
    assert result.loss == min(g[3] for g in result.grid)
    text = "\n".join(calibration_lines(result))
    for fig in BASELINE_FIGURES:
        assert re.search(rf"method={fig.method} fitted predicted_step_accuracy=\d\.\d+ paper_step_accuracy=\d\.\d+", text)
    assert "method=no-such-method" not in text  # a method that cannot be built is left out, not fatal


def test_weighted_figures_follow_the_dev_mix():
    assert weighted({"a": 0.5, "b": 0.2}, {"a": 40, "b": 20}) == 0.4
    assert weighted({}, {"a": 1}) is None
