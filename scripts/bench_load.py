#!/usr/bin/env python
"""Benchmark loading a 100 MB trace file and building its line view (timings kept out of tests).

Writes a synthetic Who&When file of about 100 MB (some 25,600 steps of 4 KB each), then measures
- `load_100mb_s=`  seconds for `load_trace` (parse, validate, labels) on it;
- `lineview_s=`    seconds to build the `LineView` of the loaded trace (records, wrapping, offsets),
                   which an investigator does once per trace before its first read.
The last two lines printed are those two. Aims on 2 CPU cores: load_100mb_s <= 30, lineview_s <= 30.
The line view's search timings (literal and catastrophic patterns) are in scripts/bench_search.py.

    python scripts/bench_load.py [--mb 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localfa.bench.benchjson import add_json_option, run_recorded  # noqa: E402
from localfa.traces import LineView, load_trace  # noqa: E402


def write_whowhen(path: Path, target_bytes: int) -> int:
    """A Who&When file of about `target_bytes` (identical 4 KB steps), written in one go; returns its step count."""
    step = json.dumps({"content": "x" * 4000 + " words\n", "role": "user", "name": "Agent_A"})
    n = target_bytes // (len(step) + 1) + 1
    head = '{"question": "q", "ground_truth": "a", "is_correct": false, "mistake_agent": "Agent_A", "mistake_step": "3", "history": ['
    path.write_text(head + ",".join([step] * n) + "]}", encoding="utf-8")
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="file size in MiB")
    add_json_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        n = write_whowhen(path, args.mb * 1024 * 1024)
        t0 = time.perf_counter()
        trace = load_trace(path)
        t1 = time.perf_counter()
        view = LineView(trace)
        t2 = time.perf_counter()
    assert len(trace.steps) == n, (len(trace.steps), n)
    print(f"file_mb={args.mb} steps={n} lines={view.total_lines} chars={view.total_chars}")
    print(f"load_100mb_s={t1 - t0:.2f}")
    print(f"lineview_s={t2 - t1:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_load"))
