"""DRIFT on the embedded model: dev traces audited concurrently, cost per stage, stability per tracer mode.

Per tracer mode (``--tracers per-claim,ledger``) and seed (``--seeds 0,1,2``): the calls and tokens
of each stage and how many traces got an error span. Then, per tracer mode:

- `first_error_agreement=`: the share of traces whose first error (the first error span's answered
  step) is the same under every seed, counted only over traces where at least one seed found an
  error (`found_none=` traces where none did: agreeing on nothing is no skill); `pairwise=` the
  same over seed pairs.
  The ledger decides everything downstream, so this is the figure the keeper's and the tracer's
  temperatures (`keeper_temperature`, `tracer_temperature`) and the default tracer mode follow.

Last, for the first mode and seed, the two numbers the Support Seeker is built for:

- `support_batch_size=`: support requests per engine batch: for each support request, how many
  support requests were in the engine with it when it was submitted (its own trace's siblings and
  other traces'), averaged over requests;
- `cached_prompt_share=`: prompt tokens of the support checks served from vLLM's prefix cache.

    python scripts/bench_drift.py [--data ../shared/data/whowhen] [--traces 8] [--subset algorithm-generated]
                                  [--seeds 0,1,2] [--tracers per-claim,ledger] [--options segment=true]
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here
from bench_safari import DEFAULT_DATA, pick_traces  # scripts/ is on sys.path when run as a script

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.metrics import first_error_agreement
from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext, base_key
from localfa.methods.drift.audit import STAGES
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs


class SupportBatches:
    """The engine with its session watched: for every support request, the support requests in
    the engine at the moment it was submitted (itself included)."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self.sizes: list[int] = []

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def session(self):
        inner, sizes = self._engine.session(), self.sizes
        live: set[int] = set()

        class Watched:
            def submit(self, requests):
                tickets = inner.submit(requests)
                mine = [t for t, r in zip(tickets, requests) if base_key(r.key).startswith("drift/support/")]
                live.update(mine)
                sizes.extend([len(live)] * len(mine))
                return tickets

            def wait(self):
                done = inner.wait()
                live.difference_update(t for t, _ in done)
                return done

            def pending(self):
                return inner.pending()

        return Watched()


def run(engine, method, traces, seed: int):
    jobs = [method_job(engine, method, MethodContext(t, seed=seed)) for t in traces]
    t0 = time.perf_counter()
    results = dict(run_jobs(engine, jobs, concurrency=len(jobs)))
    return results, time.perf_counter() - t0


def stage_totals(results) -> dict[str, dict[str, int]]:
    out = {s: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0} for s in STAGES}
    for d in results.values():
        for s in STAGES:
            for k, v in ((d.details.get("cost") or {}).get(s) or {}).items():
                if k in out[s]:
                    out[s][k] += v
    return out


def first_error(d) -> object:
    """The first error's answered step; None when no error span was found; "failed" on an error."""
    if d.error:
        return "failed"
    return None if d.details.get("step_is_fallback") else d.step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--traces", type=int, default=8)
    ap.add_argument("--subset", default=None, help="take every trace from this Who&When subset (default: half each)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated run seeds")
    ap.add_argument("--tracers", default="per-claim,ledger,joint", help="comma-separated tracer modes to compare")
    ap.add_argument("--options", default="", help="extra DRIFT options, e.g. segment=true:chunk_tokens=3000")
    ap.add_argument("--engine", default="vllm")
    add_json_option(ap)
    args = ap.parse_args()
    traces = pick_traces(args.data / args.subset if args.subset else args.data, args.traces)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    modes = [m.strip() for m in args.tracers.split(",") if m.strip()]
    extra = f":{args.options}" if args.options else ""
    engine = make_engine(args.engine)
    watched = SupportBatches(engine)
    runs: dict[str, dict[int, dict]] = {m: {} for m in modes}
    first_sizes: list[int] = []
    print(f"traces={len(traces)} seeds={','.join(map(str, seeds))} tracers={','.join(modes)} engine={args.engine}")
    try:
        run(engine, get_method(f"drift:tracer={modes[0]}{extra}"), traces[:1], seeds[0] + 99)  # warm-up
        for mode, seed in itertools.product(modes, seeds):
            engine.start_cold()  # every run starts cold: its cache hits and grammar compiles are its own
            watched.sizes = []
            results, wall = run(watched, get_method(f"drift:tracer={mode}{extra}"), traces, seed)
            runs[mode][seed] = results
            if not first_sizes:
                first_sizes = list(watched.sizes)
            totals = stage_totals(results)
            errors = sum(1 for d in results.values() if d.error)
            print(f"tracer={mode} seed={seed}: {len(traces)} traces in {wall:.1f} s, errors={errors}")
            for s in STAGES:
                t = totals[s]
                print(
                    f"  {s:8s} calls={t['calls']:3d} prompt={t['prompt_tokens']:7d} completion={t['completion_tokens']:6d} cached={t['cached_tokens']:7d}"
                )
            print(f"  traces with an error span: {sum(1 for d in results.values() if d.details.get('error_spans'))}")
    finally:
        engine.close()
    ids = list(runs[modes[0]][seeds[0]])
    for mode in modes:
        agreed = first_error_agreement({s: {t: first_error(d) for t, d in runs[mode][s].items()} for s in seeds})
        print(
            f"tracer={mode} first_error_agreement={agreed.share:.3f} pairwise={agreed.pairwise:.3f} "
            f"traces={agreed.traces} found_none={agreed.found_none} seeds={len(seeds)}"
        )
    for seed in seeds:
        for a, b in itertools.combinations(modes, 2):
            same_n = sum(first_error(runs[a][seed][t]) == first_error(runs[b][seed][t]) for t in ids)
            print(f"seed {seed}: tracer={a} and tracer={b} give the same first error on {same_n}/{len(ids)} traces")
    support = stage_totals(runs[modes[0]][seeds[0]])["support"]
    print(f"support_batch_size={sum(first_sizes) / len(first_sizes) if first_sizes else 0.0:.2f}")
    print(f"cached_prompt_share={support['cached_tokens'] / max(1, support['prompt_tokens']):.3f}")


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_drift"))
