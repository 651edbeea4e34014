"""DRIFT on the embedded model: 8 dev traces audited concurrently, cost per stage measured.

Prints per tracer mode (``--tracers per-claim,ledger`` compares them: same seed, so wherever the
run text is not cut the ledger and support requests are the same and only the tracer differs;
``ledger`` reserves more of the window for its one long answer, so long runs are cut more) the calls and tokens of
each stage, how often the modes agree, and, with several ``--seeds``, how often each mode gives the
same first error across seeds. Last, for the first mode and seed, the two numbers the Support
Seeker is built for:

- `support_batch_size`: mean claims per Support Seeker batch (one batch per trace that had any);
- `cached_prompt_share`: prompt tokens of the support checks served from vLLM's prefix cache.

    python scripts/bench_drift.py [--data ../shared/data/whowhen] [--traces 8] [--subset algorithm-generated]
                                  [--seeds 0,1] [--tracers per-claim,ledger] [--options segment=true]
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from bench_safari import DEFAULT_DATA, pick_traces  # scripts/ is on sys.path when run as a script

from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs

STAGES = ("segment", "ledger", "support", "tracer")


def run(engine, method, traces, seed: int, concurrency: int):
    jobs = [method_job(engine, method, MethodContext(t, seed=seed)) for t in traces]
    t0 = time.perf_counter()
    results = dict(run_jobs(engine, jobs, concurrency=concurrency))
    return results, time.perf_counter() - t0


def stage_totals(results) -> dict[str, dict[str, int]]:
    out = {s: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0} for s in STAGES}
    for d in results.values():
        for s in STAGES:
            for k, v in ((d.details.get("cost") or {}).get(s) or {}).items():
                out[s][k] += v
    return out


def first_error(d) -> tuple | None:
    return None if d.error else (d.step, tuple(map(tuple, d.spans or [])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--traces", type=int, default=8)
    ap.add_argument("--subset", default=None, help="take every trace from this Who&When subset (default: half each)")
    ap.add_argument("--seeds", default="0", help="comma-separated run seeds")
    ap.add_argument("--tracers", default="per-claim", help="comma-separated tracer modes to compare")
    ap.add_argument("--options", default="", help="extra DRIFT options, e.g. segment=true:chunk_tokens=3000")
    ap.add_argument("--engine", default="vllm")
    args = ap.parse_args()
    traces = pick_traces(args.data / args.subset if args.subset else args.data, args.traces)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    modes = [m.strip() for m in args.tracers.split(",") if m.strip()]
    extra = f":{args.options}" if args.options else ""
    engine = make_engine(args.engine)
    runs: dict[tuple[str, int], dict] = {}
    try:
        run(engine, get_method(f"drift:tracer={modes[0]}{extra}"), traces[:1], seeds[0] + 99, 1)  # warm-up
        for mode, seed in itertools.product(modes, seeds):
            engine.reset_prefix_cache()  # every run starts cold: its cache hits are its own
            results, wall = run(engine, get_method(f"drift:tracer={mode}{extra}"), traces, seed, len(traces))
            runs[(mode, seed)] = results
            totals = stage_totals(results)
            errors = sum(1 for d in results.values() if d.error)
            print(f"tracer={mode} seed={seed}: {len(traces)} traces in {wall:.1f} s, errors={errors}")
            for s in STAGES:
                t = totals[s]
                print(
                    f"  {s:8s} calls={t['calls']:3d} prompt={t['prompt_tokens']:7d} "
                    f"completion={t['completion_tokens']:6d} cached={t['cached_tokens']:7d}"
                )
            print(f"  traces with an error span: {sum(1 for d in results.values() if d.details.get('error_spans'))}")
    finally:
        engine.close()
    for seed in seeds:
        for a, b in itertools.combinations(modes, 2):
            same = sum(first_error(runs[(a, seed)][k]) == first_error(runs[(b, seed)][k]) for k in runs[(a, seed)])
            print(f"seed {seed}: {a} and {b} give the same step and spans on {same}/{len(traces)} traces")
    for mode in modes:
        for s1, s2 in itertools.combinations(seeds, 2):
            same = sum(first_error(runs[(mode, s1)][k]) == first_error(runs[(mode, s2)][k]) for k in runs[(mode, s1)])
            print(f"tracer={mode}: seeds {s1} and {s2} give the same step and spans on {same}/{len(traces)} traces")
    first = runs[(modes[0], seeds[0])]
    batches = [d.details["cost"]["support"]["calls"] for d in first.values() if not d.error and d.details["cost"]["support"]["calls"]]
    support = stage_totals(first)["support"]
    print(f"support_batch_size={sum(batches) / len(batches) if batches else 0.0:.2f}")
    print(f"cached_prompt_share={support['cached_tokens'] / max(1, support['prompt_tokens']):.3f}")


if __name__ == "__main__":
    main()
