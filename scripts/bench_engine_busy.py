"""Is the engine kept busy? SAFARI, FALAT and DRIFT sweeps on an engine with a GPU's pace.

The latency engine (`localfa.testing.latency`, `--engine latency:...`) answers like the scripted
engine but in steps of continuous batching that take real time: a fixed cost per step plus a cost
per token processed (the uncached part of each new prompt, one decoded token per running
request); with the defaults a typical batch runs at about 50 calls a second. Whatever the harness
does between steps (prompts, grammars, validation, the runner, the driver's records) is time the
engine stands still, as it would beside a GPU.

For each method, one seed over the dev split (`--data`), run as `localfa bench` runs it:

- `local`: in this process (the engine steps only while the runner waits on it);
- `ray`: on `--workers` engine workers of a private local Ray instance (loopback only), each
  with its own latency engine, fed whole traces by the driver.

`engine_busy_share` = time the engine(s) spent stepping / time from each engine's first request
to its last answer (summed over workers). A one-trace warm-up per method loads imports and
templates first, as any long sweep has them loaded.

    python scripts/bench_engine_busy.py [--data ../shared/data/whowhen] [--methods safari,falat,drift]
        [--modes local,ray] [--workers 2] [--concurrency 16] [--engine latency:step_ms=8:token_us=4]

Prints one line per method and mode: `METHOD MODE calls= wall_s= busy_s= calls_per_s= mean_batch=
[harness_cpu_ms_per_call=] engine_busy_share=` (local runs also show the CPU this process spent
outside the engine's steps, per call: on a box shared with other jobs the wall-clock idle time
is larger than that, and the share lower, than on a machine of its own).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

import localfa  # noqa: F401  (sets Ray's offline switches before Ray is imported, as the CLI does)
from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.driver import run_units_sweep
from localfa.bench.executors import LocalExecutor
from localfa.bench.sweep import load_traces
from localfa.engine.factory import make_engine
from localfa.methods.registry import MethodSpec
from localfa.testing.busy import shares
from localfa.testing.latency import LatencyEngine

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"


def _quiet(_: str) -> None:
    pass


def _figures(stats: list[dict[str, float]]) -> tuple[float, float, float, float]:
    """(busy share, busy share of the run's span, mean batch, busy seconds) over the engines'
    `stats()` (the shares as `localfa.testing.busy.shares` defines them)."""
    share, run_share = shares(stats)
    steps = sum(s["steps"] for s in stats)
    mean_batch = sum(s["running_sum"] for s in stats) / max(1, steps)
    return share, run_share, mean_batch, sum(s["busy_s"] for s in stats)


def run_local(traces: list[Any], spec: MethodSpec, engine_name: str, concurrency: int) -> tuple[float, list[dict[str, float]], int]:
    engine = make_engine(engine_name, say=_quiet)
    assert isinstance(engine, LatencyEngine), engine_name
    with tempfile.TemporaryDirectory() as run_dir:
        t0, c0 = time.perf_counter(), time.process_time()
        result = run_units_sweep(Path(run_dir), traces, [spec], [0], LocalExecutor(engine), concurrency=concurrency, progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        calls = sum(int(r.usage.get("calls", 0)) for r in result.records)
    stats = engine.stats()
    stats["harness_cpu_s"] = cpu - stats["step_cpu_s"]  # this process's CPU outside the engine's steps
    return wall, [stats], calls


def run_ray(
    traces: list[Any], spec: MethodSpec, engine_name: str, concurrency: int, workers: int
) -> tuple[float, list[dict[str, float]], int]:
    from localfa.bench.ray_executor import RayExecutor

    class Measured(RayExecutor):
        """Reads every worker's engine figures when the run is over, before the workers stop."""

        engine_stats: list[dict[str, float]] = []

        def run(self, todo: list[Any], concurrency: int) -> Iterator[Any]:
            yield from super().run(todo, concurrency)
            self.engine_stats = [s["engine"] for s in self.worker_stats() if "engine" in s]

    executor = Measured("local", workers, {"engine": engine_name}, say=_quiet)
    with tempfile.TemporaryDirectory() as run_dir:
        t0 = time.perf_counter()
        result = run_units_sweep(Path(run_dir), traces, [spec], [0], executor, concurrency=concurrency, progress=False)
        wall = time.perf_counter() - t0
        calls = sum(int(r.usage.get("calls", 0)) for r in result.records)
    if len(executor.engine_stats) != workers:
        raise SystemExit(f"expected figures from {workers} workers, got {len(executor.engine_stats)}")
    return wall, executor.engine_stats, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--methods", default="safari,falat,drift")
    ap.add_argument("--modes", default="local,ray")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16, help="trace runs in flight per engine (localfa bench's default)")
    ap.add_argument("--engine", default="latency", help="latency:step_ms=N:token_us=N:max_batch=N")
    ap.add_argument("--traces", type=int, default=None, help="only the first N traces of each subset")
    add_json_option(ap)
    args = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    traces = load_traces([args.data], limit=args.traces)
    specs = [MethodSpec.parse(m) for m in args.methods.split(",") if m.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    print(
        f"{len(traces)} traces, one seed, concurrency {args.concurrency}, engine {args.engine}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the harness's wall time, so the share, suffers from it)"
    )
    for spec in specs:
        run_local(traces[:1], spec, args.engine, args.concurrency)  # warm-up: imports, templates
        for mode in modes:
            if mode == "local":
                wall, stats, calls = run_local(traces, spec, args.engine, args.concurrency)
            elif mode == "ray":
                wall, stats, calls = run_ray(traces, spec, args.engine, args.concurrency, args.workers)
            else:
                raise SystemExit(f"--modes: {mode!r} is not local or ray")
            share, run_share, batch, busy = _figures(stats)
            label = mode if mode == "local" else f"ray-{args.workers}"
            cpu = f"harness_cpu_ms_per_call={1000 * stats[0]['harness_cpu_s'] / max(1, calls):.3f} " if mode == "local" else ""
            print(
                f"{spec.label} {label} calls={calls} wall_s={wall:.1f} busy_s={busy:.1f} calls_per_s={calls / max(busy, 1e-9):.1f} "
                f"mean_batch={batch:.1f} {cpu}busy_share_of_run={run_share:.3f} engine_busy_share={share:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_engine_busy"))
