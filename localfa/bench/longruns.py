"""Ceilings on long runs: every method at p = 1 on dev runs grown past the window, per depth.

`scripts/bench_ceiling.py --long` grows each labelled dev trace (`localfa.traces.longruns`) so
its fault sits at 1x, 2x and 5x the window (32k by default) with half a window after it, sweeps
every method on the honest oracle into OUT/depth=Mx/p=1/, and prints one line per method and
depth: `ceiling_step_accuracy=`. A trace whose fault already lies deeper than a depth is left
out of that depth (the count is printed). SAFARI is built for faults past the window; a method
that cannot reach a depth shows it here, and docs/cost.md says why.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

from localfa.bench.ceiling import load_p_runs
from localfa.traces.longruns import LongRunError, lengthen, window_depths
from localfa.traces.model import Trace

DEFAULT_MULTIPLES = (1.0, 2.0, 5.0)

Sweep = Callable[[list[Trace], Path], float]  # (traces, run dir) -> seconds: one p = 1 sweep


def grown_for_depth(traces: list[Trace], length: int, depth: int, seed: int = 0) -> tuple[list[Trace], list[str]]:
    """Each trace grown to `length` with its fault at `depth`; the ids that could not be."""
    grown, skipped = [], []
    for t in traces:
        try:
            grown.append(lengthen(t, length, depth, seed=seed))
        except LongRunError:
            skipped.append(t.id)
    return grown, skipped


def grown_depths(
    traces: list[Trace], window: int, multiples: tuple[float, ...], seed: int = 0
) -> Iterator[tuple[float, int, int, list[Trace], list[str]]]:
    """Per multiple of `window`: (multiple, length, depth, the traces grown to it, the ids that could not be)."""
    for multiple, (length, depth) in zip(multiples, window_depths(window, list(multiples))):
        grown, skipped = grown_for_depth(traces, length, depth, seed)
        yield multiple, length, depth, grown, skipped


def long_ceilings(
    traces: list[Trace], out: Path, sweep: Sweep, window: int = 32768, multiples: tuple[float, ...] = DEFAULT_MULTIPLES, seed: int = 0
) -> int:
    """Sweep and print the ceiling per method and depth (see module doc); exit status 0."""
    lines = []
    for multiple, length, depth, grown, skipped in grown_depths(traces, window, multiples, seed):
        run_dir = out / f"depth={multiple:g}x"
        print(
            f"# depth={multiple:g}x fault_at={depth} length={length} traces={len(grown)} skipped={len(skipped)} out={run_dir}", flush=True
        )
        if not grown:
            continue
        started = time.perf_counter()
        sweep(grown, run_dir)
        print(f"# depth={multiple:g}x: swept in {time.perf_counter() - started:.1f}s", flush=True)
        for run in load_p_runs(run_dir, n_boot=200):
            if run.p != 1.0:
                continue
            for g in run.overall():
                name = g.method + ("" if g.budget == "none" else f"@{g.budget}")
                step = g.metrics["step"]
                lines.append(
                    f"method={name} depth={multiple:g}x window={window} traces={g.traces} ceiling_step_accuracy={step.mean:.3f} "
                    f"calls_per_trace={g.cost.get('calls', 0.0):.2f} errors={g.errors}"
                )
                print(lines[-1], flush=True)
    return 0
