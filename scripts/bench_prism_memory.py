"""prism's peak memory on a long run, on the embedded model (transformers backend).

A dev run (hand-crafted/4) has every step's text repeated until the run holds `--tokens` tokens
(32k by default), then `prism` diagnoses it once. Prints the run's size, the tokens prism scored,
the time, and the process's peak resident memory (`ru_maxrss`: weights, runtime and activations
together) before and after the run:

    run_tokens=N scored_tokens=T seconds=S rss_before_mb=A peak_rss_mb=B

prism never holds more than one window's activations: logits in 512-row chunks, attention in
`chunk` query rows (`localfa.engine.scoring`), so the peak follows the window, not the run.

    python scripts/bench_prism_memory.py [--tokens 32768] [--spec prism]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.engine.factory import make_engine
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.load import load_trace
from localfa.traces.model import Trace

DEFAULT_RUN = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen" / "hand-crafted" / "4.json"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def grown(trace: Trace, tokens: int, count: object) -> tuple[Trace, int]:
    """`trace` with each step's text repeated until the run holds about `tokens` tokens."""
    texts = [s.content or s.observation or "" for s in trace.steps]
    base = sum(count(t) for t in texts)  # type: ignore[operator]
    times = max(1, -(-tokens // max(base, 1)))
    steps = [s.model_copy(update={"content": "\n".join([t] * times)}) for s, t in zip(trace.steps, texts)]
    return trace.model_copy(update={"steps": steps}), base * times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=DEFAULT_RUN)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--spec", default="prism")
    add_json_option(ap)
    args = ap.parse_args()
    engine = make_engine("transformers")
    try:
        trace, size = grown(load_trace(args.run), args.tokens, engine.count_tokens)
        before = peak_mb()
        started = time.perf_counter()
        ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method(args.spec), MethodContext(trace=trace, seed=0))]))
        seconds = time.perf_counter() - started
        if diag.error:
            raise SystemExit(f"bench_prism_memory: {diag.error}")
        print(f"model={engine.model_info.get('name', '?')} spec={args.spec} windows={diag.details['windows']}")
        print(
            f"run_tokens={size} scored_tokens={diag.usage['prompt_tokens']} seconds={seconds:.1f} "
            f"rss_before_mb={before:.0f} peak_rss_mb={peak_mb():.0f}"
        )
    finally:
        engine.close()


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_prism_memory"))
