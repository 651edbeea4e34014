"""FALAT on the embedded model: 8 dev traces diagnosed concurrently on one engine, and what it cost.

Half the traces come from each Who&When subset (the shortest ones, so the run stays short on a
CPU). The method runs with the engine's profile applied (the embedded model: cpu-embedded.toml's
`[methods.falat]` table under FALAT's strong-model defaults). Prints per-stage calls, tokens and
FALAT's own batch sizes, then, last:

- `calls_per_trace=`      model calls per trace (mean);
- `batched_share=`        share of calls that reached the engine in a batch of 2 or more: sent
                          together with, or while the engine was still working on, at least one
                          other request (continuous batching: they share forward passes);
                          `yielded_batched_share=` before it counts only the batches FALAT itself
                          yields per trace (from each record's `details.cost`), without the
                          runner's interleaving of traces;
- `cached_prompt_share=`  prompt tokens served from vLLM's prefix cache / all prompt tokens.

    python scripts/bench_falat.py [--data ../shared/data/whowhen] [--traces 8] [--method falat]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.load import iter_trace_files, load_trace

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"


def pick_traces(root: Path, n: int):
    """The n/2 shortest traces (fewest steps, then name) of each subset."""
    picked = []
    for sub in ("algorithm-generated", "hand-crafted"):
        folder = root / sub
        if not folder.is_dir():
            continue
        traces = [load_trace(f) for f in iter_trace_files([folder])]
        picked += sorted(traces, key=lambda t: (len(t.steps), t.id))[: (n + 1) // 2]
    return picked[:n]


def yielded_batched_share(records) -> float:
    """Calls sent in a yielded batch of at least 2, over all calls."""
    total = batched = 0
    for d in records:
        for stage in d.details.get("cost", {}).values():
            for size in stage["batches"]:
                total += size
                batched += size if size >= 2 else 0
    return batched / max(1, total)


class BatchCounter:
    """The engine, with its session watched: how many calls reached it alongside another request."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self.calls = 0
        self.batched = 0

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def session(self):
        inner = self._engine.session()
        counter = self

        class Watched:
            def submit(self, requests):
                n = len(requests)
                counter.calls += n
                if n + inner.pending() >= 2:
                    counter.batched += n
                return inner.submit(requests)

            def wait(self):
                return inner.wait()

            def pending(self):
                return inner.pending()

        return Watched()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--traces", type=int, default=8)
    ap.add_argument("--method", default="falat", help="a FALAT spec, e.g. falat:window=3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="vllm")
    add_json_option(ap)
    args = ap.parse_args()
    traces = pick_traces(args.data, args.traces)
    method = get_method(args.method)
    engine = make_engine(args.engine)
    try:
        warm = [method_job(engine, method, MethodContext(traces[0], seed=args.seed + 99))]
        list(run_jobs(engine, warm, concurrency=1))  # grammar compile, kernels
        engine.reset_prefix_cache()
        watched = BatchCounter(engine)
        jobs = [method_job(watched, method, MethodContext(t, seed=args.seed)) for t in traces]
        t0 = time.perf_counter()
        results = [d for _, d in run_jobs(watched, jobs, concurrency=len(jobs))]
        wall = time.perf_counter() - t0
    finally:
        engine.close()
    errors = [d for d in results if d.error]
    stages: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for d in results:
        for name, cost in d.details.get("cost", {}).items():
            for key in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens"):
                stages[name][key] += cost[key]
    for name, cost in stages.items():
        sizes = [n for d in results for n in d.details.get("cost", {}).get(name, {}).get("batches", [])]
        print(f"stage {name}: " + ", ".join(f"{k} {v}" for k, v in cost.items()) + f", batch sizes {sorted(sizes)}")
    for d in errors:
        print(f"error {d.trace}: {d.error.splitlines()[0]}")
    calls = sum(d.usage["calls"] for d in results)
    prompt = sum(d.usage["prompt_tokens"] for d in results)
    cached = sum(d.usage["cached_tokens"] for d in results)
    steps = sum(len(t.steps) for t in traces)
    print(
        f"traces={len(traces)} steps={steps} method={args.method} calls={calls} errors={len(errors)} "
        f"wall_s={wall:.1f} prompt_tokens={prompt} completion_tokens={sum(d.usage['completion_tokens'] for d in results)}"
    )
    print(f"calls_per_trace={calls / max(1, len(results)):.2f}")
    print(f"yielded_batched_share={yielded_batched_share(results):.3f}")
    print(f"batched_share={watched.batched / max(1, watched.calls):.3f}")
    print(f"cached_prompt_share={cached / max(1, prompt):.3f}")


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_falat"))
