"""What FALAT costs: on the honest oracle at strong-model defaults (the default), or on a real engine.

`--engine oracle` (the default): every dev trace, FALAT at its strong-model defaults (32k window)
on the honest oracle (p = 1); every prompt is rendered with a real chat template and tokenizer
(the embedded model's) and replayed through an unbounded 16-token-block prefix cache, per trace
(`localfa.bench.cost`, the issue-36 benchmark's measure). Prints per-stage calls and prompt tokens
in the method's stage order, then `ceiling_step_accuracy=`, `calls_per_trace=` (and its
`calls_per_trace_max=`, with the trace) and
`uncached_prefill_per_trace_token=` (tokens a GPU must prefill over the traces' own tokens, a ratio
of totals; `..._mean=` is the mean of the per-trace ratios), `record_kb_max=`.

`--engine vllm` (or another real engine): 8 dev traces (`--traces`), half from each subset, the
shortest ones, diagnosed concurrently on one engine, with the engine's profile applied (the
embedded model: cpu-embedded.toml's `[methods.falat]` table), from a cold start: the warm-up's
cached prefixes and compiled grammars are forgotten first. Prints per-stage calls, tokens and
FALAT's own batch sizes, then, last:

- `calls_per_trace=`      model calls per trace (mean);
- `batched_share=`        share of calls that reached the engine in a batch of 2 or more: sent
                          together with, or while the engine was still working on, at least one
                          other request (continuous batching: they share forward passes);
                          `yielded_batched_share=` before it counts only the batches FALAT itself
                          yields per trace (from each record's `details.cost`), without the
                          runner's interleaving of traces;
- `cached_prompt_share=`  prompt tokens served from vLLM's prefix cache / all prompt tokens.

    python scripts/bench_falat.py                       # the oracle, every dev trace
    python scripts/bench_falat.py --engine vllm [--data ../shared/data/whowhen] [--traces 8] [--method falat]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext
from localfa.methods.falat.method import STAGES
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


def print_stages(records) -> None:
    """Calls and tokens per stage, summed over the records, in the method's stage order."""
    stages: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for d in records:
        for name, cost in d.details.get("cost", {}).items():
            for key in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens"):
                stages[name][key] += cost[key]
    for name in [s for s in STAGES if s in stages]:
        sizes = [n for d in records for n in d.details.get("cost", {}).get(name, {}).get("batches", [])]
        shown = f"batch sizes {sorted(sizes)}" if len(sizes) <= 16 else f"{len(sizes)} batches of {min(sizes)} to {max(sizes)}"
        print(f"stage {name}: " + ", ".join(f"{k} {v}" for k, v in stages[name].items()) + f", {shown}")


def oracle_main(args: argparse.Namespace) -> None:
    """The honest oracle on every dev trace: accuracy, calls and the prefill a GPU must do."""
    from localfa.bench.cost import measure, summary
    from localfa.bench.prefill import PromptTokens, load_tokenizer
    from localfa.bench.sweep import load_traces

    traces = load_traces([args.data])
    engine = make_engine("oracle", say=lambda _: None)
    method = get_method(args.method)
    jobs = [method_job(engine, method, MethodContext(t, seed=args.seed)) for t in traces]
    print_stages(sorted((d for _, d in run_jobs(engine, jobs, concurrency=16)), key=lambda d: d.trace))
    tokens = PromptTokens(load_tokenizer(args.tokenizer))
    costs = [measure(args.method, t, tokens) for t in traces]
    s = summary(costs)
    mean_ratio = sum(c.uncached_tokens / max(1, c.trace_tokens) for c in costs) / max(1, len(costs))
    print(f"traces={len(traces)} method={args.method} engine=oracle errors={int(s['errors'])}")
    print(f"ceiling_step_accuracy={s['step_accuracy']:.3f}")
    print(f"calls_per_trace={s['calls_per_trace']:.2f}")
    busiest = max(costs, key=lambda c: c.calls)
    print(f"calls_per_trace_max={busiest.calls} ({busiest.trace})")
    print(f"uncached_prefill_per_trace_token={s['uncached_prefill_per_trace_token']:.3f}")
    print(f"uncached_prefill_per_trace_token_mean={mean_ratio:.3f}")
    print(f"record_kb_max={s['record_kb']:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--traces", type=int, default=8, help="traces on a real engine (the oracle runs every dev trace)")
    ap.add_argument("--method", default="falat", help="a FALAT spec, e.g. falat:window=3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="oracle", help="oracle (default: cost at strong-model defaults) or a real engine (vllm)")
    ap.add_argument(
        "--tokenizer", default=None, help="with the oracle: a tokenizer folder with a chat template (default: the embedded model's)"
    )
    add_json_option(ap)
    args = ap.parse_args()
    if args.engine == "oracle":
        oracle_main(args)
        return
    traces = pick_traces(args.data, args.traces)
    method = get_method(args.method)
    engine = make_engine(args.engine)
    try:
        warm = [method_job(engine, method, MethodContext(traces[0], seed=args.seed + 99))]
        list(run_jobs(engine, warm, concurrency=1))  # grammar compile, kernels
        engine.start_cold()  # the measured run compiles its own grammars and fills its own cache
        watched = BatchCounter(engine)
        jobs = [method_job(watched, method, MethodContext(t, seed=args.seed)) for t in traces]
        t0 = time.perf_counter()
        results = [d for _, d in run_jobs(watched, jobs, concurrency=len(jobs))]
        wall = time.perf_counter() - t0
    finally:
        engine.close()
    errors = [d for d in results if d.error]
    print_stages(results)
    for d in errors:
        print(f"error {d.trace}: {(d.error or '').splitlines()[0]}")
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
