#!/usr/bin/env python
"""Benchmark `view`, `summarize` and `report` on a hostile run: one step of 50 MB and one forged record.

Builds a run directory with the scripted engine (no model): a few small Who&When-format traces
and one whose decisive step holds `--step-mb` MB of text (under the 256 MiB file limit), swept by
all-at-once and random; then appends a forged copy of a record whose ``spans`` claim
``[[0, 1000000000]]`` steps and whose ``n_steps`` says 10**9. Each command then runs in its own
process, as a user runs it; the parent reads that process's peak resident memory from the kernel
(`os.wait4`). Prints one line per command, ``command= seconds= peak_rss_mb= rc=``, then
``aim_seconds=60 aim_rss_mb=2048``. Before the caps of issue 55, `view` of a 50 MB step grew past
7.8 GB and `report` of the forged record was killed out of memory.

    python scripts/bench_hostile_run.py
    python scripts/bench_hostile_run.py --step-mb 10 --json docs/benchmarks/bench_hostile_run.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded

LOCALFA = [sys.executable, "-m", "localfa"]
AIM_SECONDS = 60
AIM_RSS_MB = 2048
FORGED_STEPS = 1_000_000_000


def write_traces(folder: Path, step_mb: int) -> None:
    """Five small labelled traces and one whose decisive step is `step_mb` MB of text."""
    folder.mkdir(parents=True)
    for i in range(5):
        history = [
            {"name": ("Planner", "Coder", "Checker")[j % 3], "role": "assistant", "content": f"run {i} step {j}: counted {40 + j} rows"}
            for j in range(6)
        ]
        data = {
            "question": "How many rows?",
            "history": history,
            "mistake_agent": "Checker",
            "mistake_step": "2",
            "mistake_reason": "miscounted",
        }
        (folder / f"small{i}.json").write_text(json.dumps(data), encoding="utf-8")
    line = "the table dump continues with another row of values 0123456789 and some words\n"
    big = line * (step_mb * 1024 * 1024 // len(line))
    history = [
        {"name": "Planner", "role": "assistant", "content": "Plan: fetch the table, count its rows."},
        {"name": "Coder", "role": "assistant", "content": "Fetching the table now."},
        {"name": "Coder", "role": "assistant", "content": big},
        {"name": "Checker", "role": "assistant", "content": "The table has 12 rows."},
    ]
    data = {
        "question": "How many rows?",
        "history": history,
        "mistake_agent": "Coder",
        "mistake_step": "2",
        "mistake_reason": "dumped the table",
    }
    (folder / "big.json").write_text(json.dumps(data), encoding="utf-8")


def forge(run: Path) -> None:
    """Append a forged copy of the run's first record: spans over 10**9 steps, n_steps 10**9."""
    results = run / "results.jsonl"
    first = json.loads(results.read_text(encoding="utf-8").splitlines()[0])
    first.update(trace="forged", method="drift", method_name="drift", spans=[[0, FORGED_STEPS]], n_steps=FORGED_STEPS)
    first["label"] = dict(first.get("label") or {}, fault_spans=[[0, FORGED_STEPS]])
    with results.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(first) + "\n")


def measured(args: list[str]) -> tuple[float, float, int]:
    """(seconds, peak resident MB, exit status) of one command in its own process."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - started
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        print(f"# {' '.join(args[2:4])} failed: {err.strip().splitlines()[-1:] or ['(no output)']}", file=sys.stderr)
    return took, usage.ru_maxrss / 1024, rc  # ru_maxrss is in KiB on Linux


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-mb", type=int, default=50, help="size of the big step, in MB")
    add_json_option(ap)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data, run = Path(tmp) / "data", Path(tmp) / "run"
        write_traces(data, args.step_mb)
        sweep = [
            *LOCALFA,
            "bench",
            str(data),
            "--methods",
            "all-at-once,random",
            "--engine",
            "scripted",
            "--out",
            str(run),
            "--no-progress",
        ]
        subprocess.run(sweep, check=True, capture_output=True)
        forge(run)
        print(f"step_mb={args.step_mb} forged_span_steps={FORGED_STEPS}")
        worst = 0
        for name, extra in (("view", ["--out", str(Path(tmp) / "view.html")]), ("summarize", []), ("report", [])):
            seconds, rss, rc = measured([*LOCALFA, name, str(run), *extra])
            print(f"command={name} seconds={seconds:.1f} peak_rss_mb={rss:.0f} rc={rc}")
            worst = max(worst, rc)
    print(f"aim_seconds={AIM_SECONDS} aim_rss_mb={AIM_RSS_MB}")
    return worst


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_hostile_run"))
