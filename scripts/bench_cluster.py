"""Ray sweep on 1 and on 2 engine workers: the same 8 Who&When dev traces, all-at-once, embedded model.

Prints, last, `cluster_speedup=` (tokens per second, 2 workers / 1 worker, over the sweep's wall
time after the engines are up) and `cluster_overhead=` (share of the 2-worker sweep's wall time
the driver spent outside engine work: wall time minus the busiest worker's engine time, over the
wall time). `worker_idle_share` also counts the time a worker waited while the other finished.
On a 2-core box the speedup is capped by the cores: two engines split the same two cores that
one engine used alone. No response cache: both runs compute every answer.

    python scripts/bench_cluster.py [--data ../shared/data/whowhen] [--limit 4] [--kv-gib 1]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded


def sweep(data: Path, limit: int, workers: int, profile: Path, out: Path) -> dict[str, float]:
    from localfa.bench.driver import run_units_sweep
    from localfa.bench.ray_executor import RayExecutor
    from localfa.bench.sweep import load_traces, parse_methods

    traces = load_traces([data], limit=limit)
    methods = parse_methods("all-at-once")
    ex = RayExecutor("local", workers, {"engine": "vllm", "profile": str(profile)})
    res = run_units_sweep(out, traces, methods, [0], ex, concurrency=16, progress=False)
    tokens = sum(r.usage["prompt_tokens"] + r.usage["completion_tokens"] for r in res.records)
    errors = sum(1 for r in res.records if r.error)
    wall = ex.loop_s
    return {
        "records": len(res.records),
        "errors": errors,
        "tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall,
        "overhead": (wall - max(ex.busy_s)) / wall,
        "idle": 1 - sum(ex.busy_s) / (len(ex.busy_s) * wall),
        "start_s": sum(ex.timing.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "whowhen")
    ap.add_argument("--limit", type=int, default=4, help="traces per subset (4 -> 8 traces)")
    ap.add_argument("--kv-gib", type=int, default=1, help="KV cache per CPU engine")
    add_json_option(ap)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    profile = tmp / "profile.toml"
    profile.write_text(f"[engine]\ncpu_kv_cache_gib = {args.kv_gib}\n")
    one = sweep(args.data, args.limit, 1, profile, tmp / "w1")
    two = sweep(args.data, args.limit, 2, profile, tmp / "w2")
    for name, r in (("1 worker", one), ("2 workers", two)):
        print(
            f"{name}: {r['records']} records ({r['errors']} errors), {r['tokens']} tokens in {r['wall_s']:.1f} s "
            f"= {r['tokens_per_s']:.0f} tok/s; engines up in {r['start_s']:.1f} s; "
            f"worker_idle_share={r['idle']:.3f}"
        )
    print(f"cluster_speedup={two['tokens_per_s'] / one['tokens_per_s']:.2f}")
    print(f"cluster_overhead={two['overhead']:.3f}")


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_cluster"))
