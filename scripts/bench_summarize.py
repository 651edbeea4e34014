#!/usr/bin/env python
"""Benchmark `localfa summarize` on a 10,000-record run, on one core, without a model.

Builds a synthetic categorised run (deterministic: fixed seed) of N records over N/2 traces and
two methods, with reasons drawn from a few dozen failure stories in varied words, writes it as a
run directory, and times the summary (counts, consensus, TF-IDF + clustering, exemplars, the
markdown, the JSON Lines and report.html) in this process pinned to one core with one BLAS thread.
Prints ``records=`` ``groups=`` ``summary_seconds=`` and ``aim_seconds=30``.

    python scripts/bench_summarize.py               # 10,000 records
    python scripts/bench_summarize.py --records 2000 --json docs/benchmarks/bench_summarize.json
"""

from __future__ import annotations

import os

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one core, before numpy loads
    os.environ[_var] = "1"

import argparse  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localfa.bench.benchjson import add_json_option, run_recorded  # noqa: E402
from localfa.insights.taxonomy import load_taxonomy  # noqa: E402
from localfa.results import ResultRecord  # noqa: E402

STORIES = [
    "misread the {thing} in the tool output and used {n} instead",
    "invented the {thing} without any source and reported {n}",
    "called the {tool} tool with a missing {arg} argument",
    "skipped the verification of the {thing} that the plan required",
    "accepted the {thing} from another agent without checking it",
    "looped on the {tool} tool without progress after a timeout",
    "answered before the {thing} was found, ending the run early",
    "searched for the wrong {thing} and never corrected the query",
]
WORDS = {
    "thing": ["population figure", "release year", "row count", "author name", "file path", "price", "unit", "version"],
    "tool": ["search", "browser", "python", "shell", "calendar", "database"],
    "arg": ["query", "path", "limit", "date"],
}
AGENTS = ["WebSurfer", "Orchestrator", "Coder", "Assistant", "Planner"]


def synthetic_records(n: int, seed: int = 0) -> list[ResultRecord]:
    rng = random.Random(seed)
    names = load_taxonomy("trail").names
    out = []
    for i in range(n):
        story = rng.choice(STORIES).format(
            thing=rng.choice(WORDS["thing"]), tool=rng.choice(WORDS["tool"]), arg=rng.choice(WORDS["arg"]), n=rng.randint(1, 999)
        )
        n_steps = rng.randint(5, 130)
        out.append(
            ResultRecord(
                trace=f"run-{i // 2:05d}",
                method=("safari", "drift")[i % 2],
                seed=0,
                step=rng.randrange(n_steps),
                agent=rng.choice(AGENTS),
                reasoning=f"The {rng.choice(AGENTS)} {story}.",
                n_steps=n_steps,
                category=rng.choice(names),
                category_reason=f"At this step the agent {story}.",
                taxonomy="trail",
                details={"step_kind": rng.choice(["action", "action", "observation"])},
                finished_at="2026-12-03T00:00:00+0000",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    add_json_option(ap)
    args = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    records = synthetic_records(args.records)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "results.jsonl").write_text("".join(r.to_line() for r in records), encoding="utf-8")
        from localfa.insights.write import write_summary

        started = time.perf_counter()
        written = write_summary(run)
        took = time.perf_counter() - started
    print(f"records={args.records} diagnoses={len(written.summary.diagnosed)} groups={len(written.summary.groups)} cores=1")
    print(f"summary_seconds={took:.2f} aim_seconds=30")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_summarize"))
