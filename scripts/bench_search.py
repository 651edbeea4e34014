#!/usr/bin/env python
"""Benchmark the line view's search on a trace as long as the longest TRAIL traces (~2M tokens).

Builds a synthetic trace in memory (deterministic: fixed seed), then measures
- the median time of a literal, case-insensitive search over the whole view, and
- the time until the timeout answer for the catastrophic pattern ``(a+)+$`` on a long line.
The last two lines printed are ``search_ms=<median ms>`` and ``evil_regex_ms=<ms>``.
Aims: search_ms <= 50, evil_regex_ms <= 1500, no hang.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localfa.bench.benchjson import add_json_option, run_recorded  # noqa: E402
from localfa.traces.lineview import LineView, approx_tokens  # noqa: E402
from localfa.traces.model import AgentInfo, Step, Trace  # noqa: E402

AGENTS = ["Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer", "Coder", "ComputerTerminal"]


def build_trace(target_tokens: int, seed: int = 0) -> Trace:
    """A synthetic multi-agent run of about `target_tokens` approximate tokens."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 10))) for _ in range(20_000)]
    steps: list[Step] = []
    chars = 0
    target_chars = target_tokens * 4
    i = 0
    while chars < target_chars:
        n_words = rng.randint(100, 6_000)
        lines = []
        for _ in range(max(1, n_words // 40)):
            lines.append(" ".join(rng.choices(vocab, k=40)))
        content = "\n".join(lines)
        if i in (37, 300):  # a couple of needles for the literal search (~385 steps at 2M tokens)
            content += "\nThe flag of Lebanon has a green cedar tree."
        if i == 100:  # one long line for the catastrophic pattern
            content = "a" * 60_000 + "!"
        steps.append(Step(index=i, agent=AGENTS[i % len(AGENTS)], role="assistant", content=content))
        chars += len(content)
        i += 1
    return Trace(
        id="bench/synthetic",
        source="<memory>",
        format="messages",
        subset=None,
        task="synthetic benchmark trace",
        agents=[AgentInfo(name=a.split(" (")[0]) for a in AGENTS[::2]],
        steps=steps,
        final_output=None,
        ground_truth=None,
        labels=None,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2_000_000, help="approximate trace size in tokens")
    ap.add_argument("--repeats", type=int, default=9, help="timed runs of the literal search")
    ap.add_argument("--timeout", type=float, default=1.0, help="search timeout in seconds")
    add_json_option(ap)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    trace = build_trace(args.tokens)
    t1 = time.perf_counter()
    view = LineView(trace)
    t2 = time.perf_counter()
    print(
        f"steps={len(trace.steps)} lines={view.total_lines} chars={view.total_chars} "
        f"tokens~{view.tokens()} (approx, {approx_tokens('abcd')} token per 4 chars)"
    )
    print(f"build_trace_s={t1 - t0:.2f} build_view_s={t2 - t1:.2f}")

    literal = "cedar tree"
    timings = []
    hits = None
    for _ in range(args.repeats):
        start = time.perf_counter()
        res = view.search_hits(literal, timeout_s=args.timeout)
        timings.append((time.perf_counter() - start) * 1000)
        hits = res
    assert hits is not None and not hits.error, hits
    print(f"literal {literal!r}: {len(hits.hits)} hits at lines {[h[0] for h in hits.hits]}; runs ms={[round(t, 1) for t in timings]}")

    start = time.perf_counter()
    evil = view.search("(a+)+$", timeout_s=args.timeout)
    evil_ms = (time.perf_counter() - start) * 1000
    print(f"evil pattern answer: {evil.splitlines()[-1]}")

    print(f"search_ms={statistics.median(timings):.1f}")
    print(f"evil_regex_ms={evil_ms:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_search"))
