"""Engine benchmark on the embedded model (vLLM CPU build by default), measured side by side.

1. batch_speedup: N requests sent one by one vs the same N requests (same prompts, same seeds)
   as one batch, on the same engine, each phase from a cold start (no cached prefix, the grammar
   compiled again); measured as the ratio of generated tokens per second (the outputs of the
   two phases can differ in length).
2. prefix_cache_hit_ratio: a batch of N requests sharing a long system prompt; the share of
   prompt tokens vLLM served from its prefix cache.

    python scripts/bench_engine.py [--n 8] [--engine vllm] [--max-tokens 200]
"""

from __future__ import annotations

import argparse
import time

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here
from pydantic import BaseModel, Field

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.engine.factory import make_engine
from localfa.engine.grammar import Grammar
from localfa.engine.types import Request, Sampling


class Finding(BaseModel):
    step_id: int = Field(ge=0, le=99)
    agent: str = Field(min_length=1, max_length=40)
    reason: str = Field(min_length=20, max_length=120)


SYSTEM = (
    "You audit failed multi-agent runs. Each step lists an agent and its action. Identify the decisive "
    "faulty step, the agent that made it, and explain the reason in one or two sentences. "
) * 30


def requests(n: int, max_tokens: int, shared_system: bool) -> list[Request]:
    out = []
    for i in range(n):
        msgs = [{"role": "user", "content": f"Run {i}: step 3 used a number no tool returned. Who failed, and why?"}]
        if shared_system:
            msgs.insert(0, {"role": "system", "content": SYSTEM})
        out.append(Request(msgs, Grammar.json(Finding), Sampling(temperature=0.8, max_tokens=max_tokens, seed=1000 + i), key=f"r{i}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--max-tokens", type=int, default=200)
    add_json_option(ap)
    args = ap.parse_args()
    engine = make_engine(args.engine)
    try:
        reqs = requests(args.n, args.max_tokens, shared_system=False)
        engine.generate(reqs[:2])  # warm-up: grammar compile, first kernels
        engine.start_cold()
        t0 = time.perf_counter()
        one_by_one = [engine.generate([r])[0] for r in reqs]
        t_seq = time.perf_counter() - t0
        engine.start_cold()
        t0 = time.perf_counter()
        batched = engine.generate(reqs)
        t_batch = time.perf_counter() - t0
        tokens_seq = sum(r.usage.completion_tokens for r in one_by_one)
        tokens_batch = sum(r.usage.completion_tokens for r in batched)
        same = sum(a.text == b.text for a, b in zip(one_by_one, batched))
        print(f"one-by-one: {t_seq:.2f} s, {tokens_seq} tokens ({tokens_seq / t_seq:.1f} tok/s)")
        print(f"batched:    {t_batch:.2f} s, {tokens_batch} tokens ({tokens_batch / t_batch:.1f} tok/s)")
        print(f"identical outputs one-by-one vs batched: {same}/{len(reqs)}")

        engine.start_cold()
        shared = engine.generate(requests(args.n, args.max_tokens, shared_system=True))
        prompt = sum(r.usage.prompt_tokens for r in shared)
        cached = sum(r.usage.cached_tokens for r in shared)
        print(f"shared-prefix batch: {prompt} prompt tokens, {cached} served from the prefix cache")
        # Outputs differ between the two phases (batch composition changes CPU numerics, so sampled
        # tokens differ), so the speedup is the ratio of generated tokens per second; the plain
        # wall-time ratio is printed above it for reference.
        print(f"wall-time ratio (different output lengths): {t_seq / t_batch:.2f}")
        print(f"batch_speedup={(tokens_batch / t_batch) / (tokens_seq / t_seq):.2f}")
        print(f"prefix_cache_hit_ratio={cached / prompt:.3f}")
    finally:
        engine.close()


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_engine"))
