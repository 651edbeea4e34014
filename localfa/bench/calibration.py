"""Calibrate the realistic error model against published baseline figures, then predict.

The oracle's ``noise=real`` model (`localfa.oracle.noise`) has three free parameters: the share of
honest calls p (on a short run), the per-trace difficulty spread and how much harder long runs are
(length). `calibrate` sweeps the baselines whose published Who&When step accuracies we hold for
one backbone (`BASELINE_FIGURES`) on the dev split over a small grid of (p, spread, length), keeps the point whose simulated per-subset accuracies land
nearest the published ones (least squares), and then runs SAFARI, FALAT and DRIFT at that point:
what the same error model predicts for them, printed beside their papers' figures
(`METHOD_FIGURES`). A prediction to compare, not a target: nothing here tunes a method.

Figures are step-level accuracy (exact step) per Who&When subset, as shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from localfa.bench.mutant_sweep import step_accuracy, sweep_records
from localfa.methods.registry import MethodSpec, get_method
from localfa.results import ResultRecord
from localfa.traces.model import Trace

ALGO, HAND = "algorithm-generated", "hand-crafted"


@dataclass(frozen=True)
class Published:
    """One method's published step accuracy per subset, and where it comes from."""

    method: str
    by_subset: dict[str, float]
    source: str


def _published() -> tuple[tuple[Published, ...], tuple[Published, ...]]:
    """(fitted, predicted) figures from published_figures.toml beside this module (data, with sources)."""
    import tomllib
    from importlib import resources

    rows = tomllib.loads(resources.files("localfa.bench").joinpath("published_figures.toml").read_text(encoding="utf-8"))["figure"]
    figs = [(r["role"], Published(r["method"], {s: float(r[s]) for s in (ALGO, HAND) if s in r}, r["source"])) for r in rows]
    return tuple(f for role, f in figs if role == "fitted"), tuple(f for role, f in figs if role == "predicted")


BASELINE_FIGURES, METHOD_FIGURES = _published()
P_GRID: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
SPREAD_GRID: tuple[float, ...] = (1.0, 2.0, 4.0, math.inf)
LENGTH_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


def weighted(by_subset: dict[str, float], counts: dict[str, int]) -> float | None:
    """A per-subset figure as one number over the dev split's subset mix (None: no figure)."""
    total = sum(counts.get(s, 0) for s in by_subset)
    if not by_subset or not total:
        return None
    return sum(v * counts.get(s, 0) for s, v in by_subset.items()) / total


def subset_accuracy(records: Sequence[ResultRecord], method: str) -> dict[str, float]:
    mine = [r for r in records if r.method == method]
    return {s: step_accuracy([r for r in mine if r.subset == s]) for s in sorted({r.subset for r in mine if r.subset})}


@dataclass
class Calibration:
    """The fitted point, the grid it was chosen from, and the predictions at that point."""

    p: float
    spread: float
    length: float
    loss: float
    counts: dict[str, int]
    grid: list[tuple[float, float, float, float]] = field(default_factory=list)  # (p, spread, length, loss)
    simulated: dict[str, dict[str, float]] = field(default_factory=dict)  # method -> subset -> accuracy


def engine_spec(p: float, spread: float, length: float) -> str:
    return f"oracle:p={p:g}:noise=real:spread={'inf' if math.isinf(spread) else f'{spread:g}'}:length={length:g}"


def calibrate(
    traces: list[Trace],
    out: Path,
    seeds: Sequence[int] = (0, 1, 2),
    grid_seeds: Sequence[int] = (0,),
    p_grid: Sequence[float] = P_GRID,
    spread_grid: Sequence[float] = SPREAD_GRID,
    length_grid: Sequence[float] = LENGTH_GRID,
    predict: Sequence[str] | None = None,
    concurrency: int = 64,
    say: Callable[[str], None] = lambda _: None,
) -> Calibration:
    """Fit (p, spread, length) on the baselines (grid seeds), then run everything at the fit (`seeds`):
    the fitted baselines and `predict` (default: every method published_figures.toml predicts)."""
    counts: dict[str, int] = {}
    for t in traces:
        counts[t.subset or ""] = counts.get(t.subset or "", 0) + 1
    baselines = [MethodSpec.parse(b.method) for b in BASELINE_FIGURES]
    best: tuple[float, float, float, float] | None = None
    grid = []
    for p in p_grid:
        for spread in spread_grid:
            for length in length_grid:
                where = out / "grid" / f"p={p:g}-spread={spread:g}-length={length:g}"
                records = sweep_records(where, traces, baselines, grid_seeds, engine_spec(p, spread, length), concurrency)
                loss = 0.0
                for fig in BASELINE_FIGURES:
                    got = subset_accuracy(records, fig.method)
                    loss += sum((got.get(s, 0.0) - v) ** 2 for s, v in fig.by_subset.items() if s in counts)
                grid.append((p, spread, length, loss))
                say(f"# calibrate p={p:g} spread={spread:g} length={length:g} loss={loss:.4f}")
                if best is None or loss < best[3]:
                    best = (p, spread, length, loss)
    assert best is not None, "an empty calibration grid"
    p, spread, length, loss = best
    wanted = predict if predict is not None else [f.method for f in METHOD_FIGURES]
    specs = baselines + [s for s in map(MethodSpec.parse, wanted) if _loads(s, say)]
    records = sweep_records(out / "fitted", traces, specs, seeds, engine_spec(p, spread, length), concurrency)
    simulated = {s.label: subset_accuracy(records, s.label) for s in specs}
    return Calibration(p, spread, length, loss, counts, grid, simulated)


def _loads(spec: MethodSpec, say: Callable[[str], None]) -> bool:
    """Whether a method to predict can be built (one that cannot is named and left out)."""
    try:
        get_method(spec.label)
    except Exception as exc:  # noqa: BLE001 - a broken method must not stop the others' predictions
        say(f"# calibrate: {spec.label} left out: {type(exc).__name__}: {exc}")
        return False
    return True


def calibration_lines(c: Calibration) -> list[str]:
    """What `--calibrate` prints: the fit, then per method the simulated (predicted) accuracy beside
    the published one, each as one number over the dev split's subset mix and per subset."""
    spread = "inf" if math.isinf(c.spread) else f"{c.spread:g}"
    lines = [
        f"fitted p={c.p:g} spread={spread} length={c.length:g} loss={c.loss:.4f} "
        f"(engine {engine_spec(c.p, c.spread, c.length)}; grid of {len(c.grid)} points; traces {c.counts})"
    ]
    for fig in (*BASELINE_FIGURES, *METHOD_FIGURES):
        sim = c.simulated.get(fig.method)
        if sim is None:
            continue
        predicted = weighted(sim, c.counts)
        paper = weighted(fig.by_subset, c.counts)
        role = "fitted" if fig in BASELINE_FIGURES else "predicted"
        per = " ".join(f"{s}={v:.3f}/{fig.by_subset[s]:.3f}" if s in fig.by_subset else f"{s}={v:.3f}/n/a" for s, v in sim.items())
        lines.append(
            f"method={fig.method} {role} predicted_step_accuracy={predicted if predicted is not None else float('nan'):.3f} "
            f"paper_step_accuracy={'n/a' if paper is None else f'{paper:.3f}'} per_subset(sim/paper): {per} source: {fig.source}"
        )
    return lines
