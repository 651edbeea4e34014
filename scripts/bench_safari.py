"""SAFARI throughput on the embedded model: 8 dev traces investigated concurrently, then one by
one with the same seeds, on one engine, measured side by side.

Prints `concurrency_speedup` (one-by-one wall time / concurrent wall time) and
`cached_prompt_share` (prompt tokens served from vLLM's prefix cache, concurrent run).

    python scripts/bench_safari.py [--data ../shared/data/whowhen] [--traces 8] [--max-turns 4]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.load import iter_trace_files, load_trace

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"


def pick_traces(root: Path, n: int):
    """Half from each Who&When subset (the first files in natural order)."""
    files = []
    for sub in ("algorithm-generated", "hand-crafted"):
        folder = root / sub
        if folder.is_dir():
            files += iter_trace_files([folder])[: (n + 1) // 2]
    files = files[:n] or iter_trace_files([root])[:n]
    return [load_trace(f) for f in files]


def run(engine, method, traces, seed: int, concurrency: int):
    jobs = [method_job(engine, method, MethodContext(t, seed=seed)) for t in traces]
    t0 = time.perf_counter()
    results = dict(run_jobs(engine, jobs, concurrency=concurrency))
    return results, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--traces", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="vllm")
    args = ap.parse_args()
    traces = pick_traces(args.data, args.traces)
    method = get_method("safari", max_turns=args.max_turns)
    engine = make_engine(args.engine)
    try:
        run(engine, method, traces[:1], args.seed + 99, 1)  # warm-up (grammar compile, kernels)
        engine.reset_prefix_cache()
        together, t_conc = run(engine, method, traces, args.seed, concurrency=len(traces))
        engine.reset_prefix_cache()
        alone: dict = {}
        t_seq = 0.0
        for t in traces:
            res, dt = run(engine, method, [t], args.seed, concurrency=1)
            alone.update(res)
            t_seq += dt
    finally:
        engine.close()
    errors = [k for k, d in {**together, **alone}.items() if d.error]
    prompt = sum(d.usage["prompt_tokens"] for d in together.values())
    cached = sum(d.usage["cached_tokens"] for d in together.values())
    calls = sum(d.usage["calls"] for d in together.values())
    same = sum(together[k].step == alone[k].step for k in together)
    print(f"traces={len(traces)} max_turns={args.max_turns} calls={calls} errors={len(errors)}")
    print(f"concurrent: {t_conc:.1f} s; one by one: {t_seq:.1f} s; same step in both runs: {same}/{len(traces)}")
    print(f"prompt tokens {prompt}, cached {cached}")
    print(f"concurrency_speedup={t_seq / t_conc:.2f}")
    print(f"cached_prompt_share={cached / prompt:.3f}")


if __name__ == "__main__":
    main()
