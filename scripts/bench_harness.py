"""How much Python the harness spends per model call: it must never keep the engine waiting.

1. A sweep on the scripted engine (no model time at all) over the dev traces with every
   registered method and 3 seeds, written to a temporary run directory like `localfa bench`:
   `harness_ms_per_call` = wall time / model calls, `validation_ms_per_call` = time inside
   grammar validation / calls.
2. The real embedded model (vLLM CPU build), 8 traces, all-at-once: `engine_busy_share` = the
   share of wall time, from the first request to the last response, spent inside the engine's
   step loop (the in-process engine only steps while the runner waits on it, so every moment of
   harness Python between steps is idle engine time). `--no-real` skips it.

    python scripts/bench_harness.py [--data ../shared/data/whowhen] [--seeds 3] [--no-real]

Prints, last: calls=, harness_ms_per_call=, validation_ms_per_call= (and engine_busy_share=
before them when the real engine runs).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from localfa.bench.sweep import load_traces, run_sweep
from localfa.engine.grammar import Grammar
from localfa.engine.types import Request
from localfa.methods.registry import MethodSpec, method_names

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"


class _Timer:
    total = 0.0


def _time_validation() -> _Timer:
    """Wrap Grammar.parse so the time spent validating outputs is added up."""
    timer = _Timer()
    original = Grammar.parse

    def timed(self: Grammar, text: str) -> Any:
        t0 = time.perf_counter()
        try:
            return original(self, text)
        finally:
            timer.total += time.perf_counter() - t0

    Grammar.parse = timed  # type: ignore[method-assign]
    return timer


def scripted_sweep(data: Path, seeds: int) -> tuple[int, float, float]:
    from localfa.engine.scripted import scripted_default

    traces = load_traces([data])
    specs = [MethodSpec.parse(name) for name in method_names()]
    engine = scripted_default()
    timer = _time_validation()
    with tempfile.TemporaryDirectory() as run_dir:
        t0 = time.perf_counter()
        result = run_sweep(Path(run_dir), traces, specs, list(range(seeds)), engine, concurrency=16, progress=False)
        wall = time.perf_counter() - t0
    calls = sum(int(r.usage.get("calls", 0)) for r in result.records)
    errors = sum(1 for r in result.records if r.error)
    print(
        f"scripted sweep: {len(traces)} traces x {len(specs)} methods x {seeds} seeds = {result.planned} units, "
        f"{calls} calls, {errors} error records, {wall:.2f} s"
    )
    return calls, wall, timer.total


class _BusySession:
    """A session that adds up the time spent inside the engine's `wait` (its step loop)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.busy = 0.0
        self.first: float | None = None
        self.last = 0.0

    def submit(self, requests: Sequence[Request]) -> list[int]:
        if self.first is None:
            self.first = time.perf_counter()
        return self.inner.submit(requests)

    def wait(self) -> list[Any]:
        t0 = time.perf_counter()
        out = self.inner.wait()
        self.last = time.perf_counter()
        self.busy += self.last - t0
        return out

    def pending(self) -> int:
        return self.inner.pending()


def engine_busy_share(data: Path, n_traces: int) -> float:
    from localfa.api import diagnose_iter
    from localfa.engine.factory import make_engine

    traces = load_traces([data], limit=(n_traces + 1) // 2)[:n_traces]
    engine = make_engine("vllm")
    sessions: list[_BusySession] = []
    make_session = engine.session

    def session() -> _BusySession:
        sessions.append(_BusySession(make_session()))
        return sessions[-1]

    engine.session = session  # type: ignore[method-assign]
    try:
        list(diagnose_iter(engine, MethodSpec.parse("all-at-once:max_chars=6000"), traces[:1], seed=99))  # warm-up
        sessions.clear()
        list(diagnose_iter(engine, MethodSpec.parse("all-at-once:max_chars=6000"), traces, concurrency=len(traces)))
    finally:
        engine.close()
    s = sessions[0]
    span = s.last - (s.first or s.last)
    print(f"real engine: {len(traces)} traces, {span:.2f} s from first request to last response, {s.busy:.2f} s inside the engine")
    return s.busy / span if span > 0 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--traces", type=int, default=8, help="traces for the real-engine figure")
    ap.add_argument("--no-real", action="store_true", help="skip the real-engine figure")
    args = ap.parse_args()
    busy = None if args.no_real else engine_busy_share(args.data, args.traces)
    calls, wall, validation = scripted_sweep(args.data, args.seeds)
    if busy is not None:
        print(f"engine_busy_share={busy:.3f}")
    print(f"calls={calls}")
    print(f"harness_ms_per_call={1000 * wall / max(1, calls):.3f}")
    print(f"validation_ms_per_call={1000 * validation / max(1, calls):.3f}")


if __name__ == "__main__":
    main()
