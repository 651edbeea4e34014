"""SAFARI throughput on the embedded model: 8 dev traces investigated concurrently, then one by
one with the same seeds, on one engine, measured side by side.

Prints `concurrency_speedup` (one-by-one wall time / concurrent wall time) and
`cached_prompt_share` (prompt tokens served from vLLM's prefix cache, concurrent run), and
beside them where the engine's time went, from vLLM's own scheduler (in-process engine), for
each run: `mean_batch_size` (requests in an engine step, averaged over steps),
`prefill_token_share` (prompt tokens computed / all tokens computed: prompt tokens past the
prefix cache plus generated ones) and `prefill_share` (the share of step time spent on prompt
tokens: each step's time split between its prompt and generated tokens by their counts; on a
CPU a token costs about the same in either). A high prefill share with a large batch means
batching works and prefill on the cores is the limit; a batch near 1 means it does not.

    python scripts/bench_safari.py [--data ../shared/data/whowhen] [--traces 8] [--max-turns K]

Both phases start cold (`Engine.start_cold`: no cached prefix, no compiled grammar), so neither
reuses what the warm-up or the other phase compiled. By default the investigation runs as users run it (the method's own K = 30 turns, its defaults
or the serving profile's); `--max-turns` cuts it short for a quick look.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
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


class StepMeter:
    """Per engine step of the in-process vLLM engine: requests scheduled, prompt (prefill) and
    generated (decode) tokens computed, and the step's time. Wraps the scheduler's `schedule`
    and the engine's `_step`; nothing else changes."""

    def __init__(self, engine) -> None:
        self.steps: list[tuple[int, int, int, float]] = []  # (requests, prefill, decode, seconds)
        self._last: tuple[int, int, int] = (0, 0, 0)
        try:
            scheduler = engine.llm.llm_engine.engine_core.engine_core.scheduler
        except AttributeError:
            raise SystemExit("bench_safari: the step figures need vLLM's in-process engine (--engine vllm)") from None
        schedule, step = scheduler.schedule, engine._step

        def counted_schedule(*args, **kwargs):
            before = {rid: (r.num_computed_tokens, r.num_prompt_tokens) for rid, r in scheduler.requests.items()}
            out = schedule(*args, **kwargs)
            prefill = decode = 0
            for rid, n in out.num_scheduled_tokens.items():
                done, prompt = before.get(rid, (0, 1))
                if rid not in before or done < prompt:  # new (its uncached prompt) or a prompt chunk
                    prefill += n
                else:
                    decode += n
            self._last = (len(out.num_scheduled_tokens), prefill, decode)
            return out

        def timed_step():
            self._last = (0, 0, 0)
            t0 = time.perf_counter()
            out = step()
            if self._last[0]:
                self.steps.append((*self._last, time.perf_counter() - t0))
            return out

        scheduler.schedule = counted_schedule
        engine._step = timed_step

    def take(self) -> dict[str, float]:
        steps, self.steps = self.steps, []
        seconds = sum(s[3] for s in steps) or 1e-9
        tokens = sum(s[1] + s[2] for s in steps) or 1
        on_prefill = sum(s[3] * s[1] / max(1, s[1] + s[2]) for s in steps)
        return {
            "steps": len(steps),
            "mean_batch_size": sum(s[0] for s in steps) / max(1, len(steps)),
            "prefill_token_share": sum(s[1] for s in steps) / tokens,
            "prefill_share": on_prefill / seconds,
            "step_s": seconds,
        }


def run(engine, method, traces, seed: int, concurrency: int):
    jobs = [method_job(engine, method, MethodContext(t, seed=seed)) for t in traces]
    t0 = time.perf_counter()
    results = dict(run_jobs(engine, jobs, concurrency=concurrency))
    return results, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--traces", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=None, help="cut the investigation at K turns (default: the method's own)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="vllm")
    add_json_option(ap)
    args = ap.parse_args()
    traces = pick_traces(args.data, args.traces)
    method = get_method("safari") if args.max_turns is None else get_method("safari", max_turns=args.max_turns)
    engine = make_engine(args.engine)
    try:
        meter = StepMeter(engine)
        run(engine, method, traces[:1], args.seed + 99, 1)  # warm-up (grammar compile, kernels)
        meter.take()
        engine.start_cold()  # each phase pays what a fresh sweep pays: prefill and grammar compiles
        together, t_conc = run(engine, method, traces, args.seed, concurrency=len(traces))
        conc = meter.take()
        engine.start_cold()
        alone: dict = {}
        t_seq = 0.0
        for t in traces:
            res, dt = run(engine, method, [t], args.seed, concurrency=1)
            alone.update(res)
            t_seq += dt
        seq = meter.take()
    finally:
        engine.close()
    errors = [k for k, d in {**together, **alone}.items() if d.error]
    prompt = sum(d.usage["prompt_tokens"] for d in together.values())
    cached = sum(d.usage["cached_tokens"] for d in together.values())
    calls = sum(d.usage["calls"] for d in together.values())
    same = sum(together[k].step == alone[k].step for k in together)
    print(f"traces={len(traces)} max_turns={method.options.max_turns} calls={calls} errors={len(errors)}")
    print(f"concurrent: {t_conc:.1f} s; one by one: {t_seq:.1f} s; same step in both runs: {same}/{len(traces)}")
    print(f"prompt tokens {prompt}, cached {cached}")
    for label, m in (("one by one", seq), ("concurrent", conc)):
        print(
            f"{label}: {m['steps']} engine steps, {m['step_s']:.1f} s stepping, mean batch {m['mean_batch_size']:.2f}, "
            f"prefill {m['prefill_token_share']:.3f} of tokens and {m['prefill_share']:.3f} of step time"
        )
    print(f"concurrency_speedup={t_seq / t_conc:.2f}")
    print(f"cached_prompt_share={cached / prompt:.3f}")
    print(f"prefill_share={conc['prefill_share']:.3f}")
    print(f"prefill_token_share={conc['prefill_token_share']:.3f}")
    print(f"mean_batch_size={conc['mean_batch_size']:.2f}")


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_safari"))
