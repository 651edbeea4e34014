"""The price of a diagnosis per method: calls, prompt tokens, the prefill a GPU must do, memory.

Each method runs at its strong-model defaults (32k window) on the honest oracle, first on the
dev split, then on long runs grown from a few of its traces (`localfa.traces.longruns`: 10k,
50k, 200k and 1M tokens, the fault half-way). Every prompt is rendered with a real chat template
and tokenizer (the embedded model's, or --tokenizer DIR) and replayed through an unbounded
16-token-block prefix cache (`localfa.bench.cost`): one per trace (`--cache trace`, the default:
each trace prefills its system prompt too) or one for the whole sweep (`--cache sweep`, as one
server serving the sweep: what every trace shares is prefilled once). Prints per method and set:

- `calls_per_trace=`, `prompt_tokens_per_trace=`, `uncached_prefill_per_trace_token=` (tokens a
  GPU must prefill over the trace's own tokens), for a method that records which runs it showed
  whole in one prompt (SAFARI) `traces_shown_whole=` and the same ratio over those runs
  (`uncached_prefill_per_trace_token_shown_whole=`), `completion_tokens_per_trace=`,
  `harness_ms_per_call=` (Python per call, real token counting included), `peak_memory_mb=`
  (growth of the diagnosing process's resident memory), `record_kb=` (largest record);
- per method, `growth_exponent_<figure>=`: the slope of log(figure) against log(run length)
  over the long runs; and an `aim` line per method (exponent <= 1.1, prefill ratio, memory, record).

A run past --timeout is stopped and printed as `unfinished`.

    python scripts/bench_cost.py
    python scripts/bench_cost.py --methods safari,all-at-once --limit 2 --lengths 10k,50k
    python scripts/bench_cost.py --json docs/data/bench_cost.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.cost import DEFAULT_WINDOW, TraceCost, cost_model, growth_by_trace, measure_isolated, summary
from localfa.bench.prefill import PromptTokens, load_tokenizer
from localfa.bench.sweep import load_traces
from localfa.traces.longruns import long_runs, parse_tokens

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "whowhen"
DEFAULT_METHODS = "safari,falat,drift,all-at-once,step-by-step,binary-search"
DEFAULT_LENGTHS = "10k,50k,200k,1M"
SHOWN = (
    "calls_per_trace",
    "prompt_tokens_per_trace",
    "uncached_prefill_per_trace_token",
    "traces_shown_whole",
    "uncached_prefill_per_trace_token_shown_whole",
    "completion_tokens_per_trace",
    "harness_ms_per_call",
    "peak_memory_mb",
    "record_kb",
    "step_accuracy",
    "errors",
)
# The aims at strong-model defaults: growth, prefill per trace token, memory, record size.
MAX_EXPONENT = 1.1
MAX_PREFILL = {"falat": 3.0}
DEFAULT_MAX_PREFILL = 2.0
MAX_MEMORY_MB = 1024.0
MAX_RECORD_KB = 1024.0


def line(method: str, where: str, figures: dict[str, float]) -> str:
    shown = " ".join(
        f"{k}={figures[k]:.3f}" if k.startswith("uncached_prefill_per_trace_token") or k == "step_accuracy" else f"{k}={figures[k]:.1f}"
        for k in SHOWN
        if k in figures
    )
    return f"method={method} {where} traces={int(figures.get('traces', 0))} {shown}"


def report_unfinished(costs: list[TraceCost], where: str) -> None:
    """One line per reason a diagnosis did not finish, with how many and which (the first three)."""
    why: dict[str, list[str]] = {}
    for c in costs:
        if not c.finished:
            why.setdefault(c.error or "unknown", []).append(c.trace)
    for reason, traces in why.items():
        more = f" (+{len(traces) - 3} more)" if len(traces) > 3 else ""
        print(f"unfinished method={costs[0].method} {where} traces={len(traces)} why={reason!r} [{', '.join(traces[:3])}{more}]")


def aims(method: str, dev: dict[str, float], growth: dict[str, float | None], longest: dict[str, float], longest_length: int) -> str:
    """One line: which of the issue's aims this method meets, with the figures (prefill on the dev
    split and on the longest run; memory and record on the longest run that finished)."""
    base = method.split(":", 1)[0]
    worst = max((v for k, v in growth.items() if v is not None and k not in ("peak_mb", "record_bytes")), default=None)
    prefill = max(dev.get("uncached_prefill_per_trace_token", 0.0), longest.get("uncached_prefill_per_trace_token", 0.0))
    limit = MAX_PREFILL.get(base, DEFAULT_MAX_PREFILL)
    whole = longest.get("traces", 0) > 0 and not longest.get("unfinished")
    checks = {
        "growth": worst is not None and worst <= MAX_EXPONENT,
        "prefill": prefill <= limit,
        "memory": whole and longest.get("peak_memory_mb", float("inf")) < MAX_MEMORY_MB,
        "record": whole and longest.get("record_kb", float("inf")) < MAX_RECORD_KB,
    }
    worst_text = "n/a" if worst is None else f"{worst:.2f}"
    return (
        f"aim method={method} growth_exponent_max={worst_text} prefill_ratio_max={prefill:.3f} (<= {limit:g}) longest_length={longest_length} "
        f"longest_unfinished={int(longest.get('unfinished', 0))} peak_memory_mb_longest={longest.get('peak_memory_mb', float('nan')):.1f} "
        f"record_kb_longest={longest.get('record_kb', float('nan')):.1f} " + " ".join(f"{k}_ok={int(v)}" for k, v in checks.items())
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default=DEFAULT_METHODS, help=f"method specs, comma-separated (default {DEFAULT_METHODS})")
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="labelled traces (default: the Who&When dev split)")
    ap.add_argument("--limit", type=int, default=None, help="at most N dev traces per subset")
    ap.add_argument(
        "--lengths", default=DEFAULT_LENGTHS, help=f"long-run lengths in tokens, e.g. 10k,1M ('' for none; default {DEFAULT_LENGTHS})"
    )
    ap.add_argument("--long-from", type=int, default=2, help="dev traces the long runs are grown from (default 2: one per subset)")
    ap.add_argument("--no-dev", action="store_true", help="only the long runs")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder with a chat template (default: the embedded model's)")
    ap.add_argument("--window", type=int, default=DEFAULT_WINDOW, help=f"context window the methods fit (default {DEFAULT_WINDOW})")
    ap.add_argument(
        "--cache",
        choices=("trace", "sweep"),
        default="trace",
        help="one prefix cache per trace (default) or one for the whole sweep, as one server serving it",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one diagnosis may take before it is stopped (default 600)")
    ap.add_argument(
        "--write-models",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the fitted cost models as JSON (localfa/bench/cost_models.json)",
    )
    ap.add_argument("--costs", type=Path, default=None, metavar="FILE", help="append every diagnosis's cost (JSON lines) to FILE")
    ap.add_argument(
        "--from-costs", type=Path, default=None, metavar="FILE", help="run nothing: report the costs an earlier --costs FILE kept"
    )
    add_json_option(ap)
    args = ap.parse_args()
    models: dict[str, dict[str, tuple[float, float]]] = {}

    if args.from_costs:
        kept = from_costs(args.from_costs)
        print(f"# from={args.from_costs} methods={len(kept)}")
        models = {spec: report(spec, dev_costs, long_costs) for spec, (dev_costs, long_costs) in kept.items()}
        if args.write_models:
            write_models(args.write_models, models, f"scripts/bench_cost.py --from-costs {args.from_costs.name}")
        return 0
    specs = [m.strip() for m in args.methods.split(",") if m.strip()]
    lengths = [parse_tokens(x) for x in args.lengths.split(",") if x.strip()]
    tokens = PromptTokens(load_tokenizer(args.tokenizer))
    dev = load_traces([args.data], limit=args.limit)
    grown = long_runs(load_traces([args.data]), lengths, count=args.long_from) if lengths else {}
    name = Path(args.tokenizer).name if args.tokenizer else "embedded SmolLM2-135M-Instruct"
    print(
        f"# tokenizer={name!r} exact_chunking={tokens.exact} window={args.window} dev_traces={len(dev)} "
        f"long_runs={sum(len(v) for v in grown.values())} cache={args.cache} date={time.strftime('%Y-%m-%d', time.gmtime())}"
    )
    shared = args.cache == "sweep"
    for spec in specs:
        dev_costs = [] if args.no_dev else list(measure_isolated(spec, dev, tokens, args.window, args.timeout, shared))
        long_costs = {n: list(measure_isolated(spec, runs, tokens, args.window, args.timeout, shared)) for n, runs in grown.items()}
        models[spec] = report(spec, dev_costs, long_costs)
        if args.costs:
            with args.costs.open("a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(asdict(c)) + "\n" for c in [*dev_costs, *(c for v in long_costs.values() for c in v)])
    if args.write_models:
        measured = f"scripts/bench_cost.py on {time.strftime('%Y-%m-%d', time.gmtime())}, {len(dev)} dev traces + long runs {args.lengths}, tokenizer {name}"
        write_models(args.write_models, models, measured)
    return 0


def report(spec: str, dev_costs: list[TraceCost], long_costs: dict[int, list[TraceCost]]) -> dict[str, tuple[float, float]]:
    """Print one method's figures (dev, each length, growth, aims, cost model); its cost model."""
    dev_fig: dict[str, float] = {}
    if dev_costs:
        report_unfinished(dev_costs, "set=dev")
        dev_fig = summary(dev_costs)
        print(line(spec, "set=dev", dev_fig), flush=True)
    longest: dict[str, float] = {}
    longest_length = 0
    for length, costs in sorted(long_costs.items()):
        report_unfinished(costs, f"set=long length={length}")
        fig = summary(costs)
        print(line(spec, f"set=long length={length} trace_tokens={fig.get('trace_tokens', 0):.0f}", fig), flush=True)
        longest, longest_length = fig, length
    grown_costs = [c for costs in long_costs.values() for c in costs]
    growth = growth_by_trace(grown_costs)
    if grown_costs:
        shown = " ".join(f"growth_exponent_{f}={'n/a' if v is None else f'{v:.2f}'}" for f, v in growth.items())
        print(f"method={spec} {shown}", flush=True)
    print(aims(spec, dev_fig, growth, longest, longest_length), flush=True)
    model = cost_model(dev_costs + grown_costs)  # what `localfa bench --estimate` predicts with
    for figure, (a, b) in model.items():
        print(f"cost_model method={spec} figure={figure} a={a:.4g} b={b:.4f}", flush=True)
    return model


def from_costs(path: Path) -> dict[str, tuple[list[TraceCost], dict[int, list[TraceCost]]]]:
    """Costs kept by an earlier `--costs FILE`, by method: (dev split, {asked length: long runs})."""
    out: dict[str, tuple[list[TraceCost], dict[int, list[TraceCost]]]] = {}
    for row in path.read_text(encoding="utf-8").splitlines():
        cost = TraceCost(**json.loads(row))
        dev_costs, long_costs = out.setdefault(cost.method, ([], {}))
        asked = re.search(r"-long-L(\d+)-", cost.trace)
        if asked:
            long_costs.setdefault(int(asked.group(1)), []).append(cost)
        else:
            dev_costs.append(cost)
    return out


def write_models(path: Path, models: dict[str, dict[str, tuple[float, float]]], measured: str) -> None:
    """The fitted models as JSON data (localfa/bench/cost_models.json), for `localfa bench --estimate`.
    Methods not measured this time keep their models and say when they were measured."""
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    kept = {m: v for m, v in old.get("models", {}).items() if m not in models}
    by = {m: old.get("measured_by", {}).get(m, old.get("measured", "unknown")) for m in kept}
    by.update({m: measured for m in models})
    fitted = {m: {f: [float(f"{a:.6g}"), float(f"{b:.6g}")] for f, (a, b) in figs.items()} for m, figs in models.items()}
    groups: dict[str, list[str]] = {}
    for m, how in by.items():
        groups.setdefault(how, []).append(m)
    data = {
        "measured": "; ".join(f"{', '.join(ms)}: {how}" for how, ms in groups.items()),
        "measured_by": by,
        "note": "Per-method cost models for `localfa bench --estimate`: per-trace figure = a * tokens**b (tokens at "
        "4 characters each). Written by scripts/bench_cost.py --write-models; do not edit by hand.",
        "models": {**kept, **fitted},
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run_recorded(main, "bench_cost"))
