"""Method ceilings and robustness on the oracle engine: every method x p x seeds on labelled traces.

The oracle engine (`--engine oracle:p=P`, localfa/oracle/) answers each request from the trace's
labels through the sending method's own policy: honestly with probability p, else with a plausible
wrong answer of the same kind. Each p is a real sweep (runner, grammars, budgets, records) into
OUT/p=P/; `localfa report OUT` (written here too) draws accuracy against p, one line per method.

Prints per (method, p):
- `ceiling_step_accuracy=` (p = 1) and `step_accuracy=` with its 95% interval (`ci95=LO..HI`,
  percentile bootstrap over traces, per-trace mean over seeds), `agent_accuracy=`,
  `calls_per_trace=`, `errors=`;
- at p = 1, each missed trace: its labelled step, the prediction, and the stage where the
  labelled step dropped out (from the record's details; the method's policy may say it better).
  The misses also go to OUT/misses.md (and `--misses FILE`).

    python scripts/bench_ceiling.py --p 1.0
    python scripts/bench_ceiling.py --p 0.7 --seeds 0,1,2
    python scripts/bench_ceiling.py --methods falat,safari@scale:2 --limit 10 --out runs/ceiling
    python scripts/bench_ceiling.py --p 0.7 --noise real --seeds 0,1,2   # errors shaped like a model's
    python scripts/bench_ceiling.py --mutants [--methods drift,falat]    # does the ceiling catch each break?
    python scripts/bench_ceiling.py --calibrate  # fit the realistic error model to published baselines
    python scripts/bench_ceiling.py --table      # what each policy answers, per request kind (docs/ceilings.md)

`--mutants` sweeps every method with registered mutants intact and under each mutant (p = 1 seed
0; p = 0.7 under `--noise` (default real), `--seeds` (default 0,1,2)), prints one row per (method, mutant): p = 1
ceiling, p = 0.7 accuracy, calls and prefill per trace, the kill rule it tripped, then per method
`method=NAME mutants_killed=K/N ceiling_step_accuracy=...` (localfa/bench/mutant_sweep.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.ceiling import dropped_at, load_p_runs, p_run_dir, write_p_report
from localfa.bench.sweep import load_traces, parse_seeds, run_sweep
from localfa.engine.factory import make_engine
from localfa.methods.registry import MethodSpec
from localfa.oracle.fingerprint import RECOGNISE

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "whowhen"
DEFAULT_METHODS = (
    "safari,falat,drift,all-at-once,step-by-step,binary-search"  # scale:K budgets: --long (on Who&When they fall below the opening prompt)
)
DEFAULT_P = "1.0,0.9,0.7,0.5"


def parse_entries(text: str) -> list[tuple[MethodSpec, str]]:
    """``SPEC[@BUDGET],...`` -> [(spec, budget label)], e.g. ``safari@scale:2``."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            spec, _, budget = part.partition("@")
            out.append((MethodSpec.parse(spec), budget or "none"))
    return out


def run_p(
    p: float,
    traces: list,
    entries: list[tuple[MethodSpec, str]],
    seeds: list[int],
    out: Path,
    concurrency: int,
    noise: str = "iid",
    recognise: float | None = None,
) -> float:
    """Sweep every entry at p into OUT/p=P/ (one sweep per budget) under the `noise` error model
    (and the oracle's recognition threshold, where given); seconds taken."""
    run_dir = p_run_dir(out, p)
    started = time.perf_counter()
    threshold = "" if recognise is None else f":recognise={recognise:g}"
    engine = make_engine(f"oracle:p={p:g}:noise={noise}{threshold}", say=lambda _: None)
    try:
        for budget in dict.fromkeys(b for _, b in entries):
            specs = [s for s, b in entries if b == budget]
            run_sweep(run_dir, traces, specs, seeds, engine, [budget], concurrency=concurrency, progress=False, say=lambda _: None)
    finally:
        engine.close()
    return time.perf_counter() - started


def report_misses(name: str, records: list) -> list[str]:
    """Print each trace missed at p = 1 (seeds that agree on one line; a reason shared by many
    traces, such as a missing policy, once with their ids); return them as markdown."""
    missed: dict[tuple, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.trace, r.seed)):
        want = None if r.label is None else r.label.mistake_step
        if r.error or want is None or r.step != want:
            missed.setdefault((r.trace, want, r.step, dropped_at(r)[:400]), []).append(r.seed)
    by_reason: dict[str, list[tuple]] = {}
    for key in missed:
        by_reason.setdefault(key[3], []).append(key)
    lines = [f"\n## {name}: {sum(len(v) for v in missed.values())} of {len(records)} runs missed at p=1\n"]
    for where, keys in by_reason.items():
        if len(keys) >= 4:
            ids = ", ".join(k[0] for k in keys)
            print(f"  miss method={name} traces={len(keys)} dropped_at: {where} [{ids}]")
            lines.append(f"- {len(keys)} traces: {where} ({ids})")
            continue
        for key in keys:
            trace, want, got, _ = key
            seeds_text = ",".join(map(str, missed[key]))
            print(f"  miss method={name} trace={trace} seeds={seeds_text} label_step={want} predicted={got} dropped_at: {where}")
            lines.append(f"- {trace} (seeds {seeds_text}): label step {want}, predicted {got}: {where}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", default=DEFAULT_P, help=f"comma-separated p values (default {DEFAULT_P})")
    ap.add_argument("--seeds", default="0,1,2", help="run seeds (default 0,1,2)")
    ap.add_argument("--methods", default=DEFAULT_METHODS, help=f"SPEC[@BUDGET],... (default {DEFAULT_METHODS})")
    ap.add_argument("--limit", type=int, default=None, help="at most N traces per dataset folder")
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="labelled traces (default: the Who&When dev split)")
    ap.add_argument("--out", default=None, help="run directory (default: a fresh runs/ceiling-TIME/ in the repository)")
    ap.add_argument("--misses", default=None, help="also write the misses at p = 1 (markdown) to this file")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--noise", choices=["iid", "real"], default=None, help="the oracle's error model (default iid; real with --mutants)")
    ap.add_argument(
        "--recognise",
        type=float,
        default=None,
        help="the share of a fault's shingles a block must hold to carry it (the oracle's default 0.5)",
    )
    ap.add_argument("--mutants", action="store_true", help="sweep every method's registered mutants against it intact and print the kills")
    ap.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="--mutants: variants measured at once, one process each (default: the cores)",
    )
    ap.add_argument("--long", action="store_true", help="p = 1 on dev runs grown so the fault sits at 1x, 2x, 5x a 32k window (issue 36)")
    ap.add_argument("--calibrate", action="store_true", help="fit the realistic error model to published baseline figures and predict")
    ap.add_argument(
        "--table", action="store_true", help="print the policies' table (method x request kind), write it into docs/ceilings.md"
    )
    add_json_option(ap)
    args = ap.parse_args(argv)
    if args.table:
        return table_main()
    if args.mutants:
        return mutants_main(args)
    if args.calibrate:
        return calibrate_main(args)

    ps = [float(x) for x in args.p.split(",") if x.strip()]
    seeds = parse_seeds(args.seeds)
    entries = parse_entries(args.methods)
    traces = load_traces([args.data], limit=args.limit)
    out = Path(args.out or REPO / "runs" / f"ceiling-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    out.mkdir(parents=True, exist_ok=True)
    if args.long:
        from localfa.bench.longruns import long_ceilings

        return long_ceilings(
            traces, out, lambda grown, run_dir: run_p(1.0, grown, entries, seeds, run_dir, args.concurrency, recognise=args.recognise)
        )
    print(
        f"traces={len(traces)} methods={len(entries)} p={','.join(f'{p:g}' for p in ps)} seeds={args.seeds} "
        f"noise={args.noise or 'iid'} recognise={args.recognise if args.recognise is not None else RECOGNISE:g} out={out}"
    )
    for p in ps:
        took = run_p(p, traces, entries, seeds, out, args.concurrency, args.noise or "iid", args.recognise)
        print(f"# p={p:g}: swept in {took:.1f}s", file=sys.stderr)

    misses_md: list[str] = []
    summary: list[str] = []
    for run in load_p_runs(out):
        for g in run.overall():
            name = g.method + ("" if g.budget == "none" else f"@{g.budget}")
            step, agent = g.metrics["step"], g.metrics["agent"]
            ceiling = f"ceiling_step_accuracy={step.mean:.3f} " if run.p == 1.0 else ""
            summary.append(
                f"method={name} p={run.p:g} traces={g.traces} seeds={len(g.seeds)} {ceiling}step_accuracy={step.mean:.3f} "
                f"ci95={step.lo:.3f}..{step.hi:.3f} agent_accuracy={agent.mean:.3f} "
                f"calls_per_trace={g.cost.get('calls', 0.0):.2f} errors={g.errors}"
            )
            if run.p == 1.0:
                recs = [r for r in run.records if r.method == g.method and r.budget == g.budget]
                misses_md += report_misses(name, recs)
    print("\n".join(summary))
    if misses_md:
        text = f"# Misses at p = 1 ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {out})\n" + "\n".join(misses_md) + "\n"
        (out / "misses.md").write_text(text, encoding="utf-8")
        if args.misses:
            Path(args.misses).write_text(text, encoding="utf-8")
    _, html = write_p_report(out)
    print(f"report={html}")
    return 0


def table_main() -> int:
    """Print the policies' table and write it into docs/ceilings.md between its markers."""
    from localfa.oracle.registry import policy_table, write_policy_table

    print(policy_table(), end="")
    changed = write_policy_table(REPO / "docs" / "ceilings.md")
    print(f"# docs/ceilings.md {'updated' if changed else 'already up to date'}", file=sys.stderr)
    return 0


def mutants_main(args: argparse.Namespace) -> int:
    """`--mutants`: every registered mutant against its method intact (localfa/bench/mutant_sweep.py)."""
    from localfa.bench.mutant_sweep import run_mutants, table_lines
    from localfa.oracle.mutants import registered_mutants, unloadable_mutants

    found = registered_mutants()
    for method, error in unloadable_mutants().items():
        print(f"# {method}: its mutants did not load ({error})", file=sys.stderr)
    chosen = [m.strip() for m in args.methods.split(",")] if args.methods != DEFAULT_METHODS else list(found)
    unknown = [m for m in chosen if m not in found]
    if unknown:
        print(f"bench_ceiling: no registered mutants for {', '.join(unknown)} (methods with mutants: {', '.join(found) or 'none'})")
        return 2
    traces = load_traces([args.data], limit=args.limit)
    out = Path(args.out or REPO / "runs" / f"mutants-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    noise = args.noise or "real"
    started = time.perf_counter()
    print(f"traces={len(traces)} methods={','.join(chosen)} noise={noise} seeds={args.seeds} workers={args.workers} out={out}")
    rows = run_mutants(
        out,
        traces,
        {m: found[m] for m in chosen},
        noise=noise,
        concurrency=args.concurrency,
        say=lambda s: print(s, file=sys.stderr),
        seeds=parse_seeds(args.seeds),
        workers=args.workers,
    )
    print("\n".join(table_lines(rows)))
    print(f"wall_s={time.perf_counter() - started:.1f}")
    return 0


def calibrate_main(args: argparse.Namespace) -> int:
    """`--calibrate`: fit (p, spread) so the simulated baselines land near their published figures."""
    from localfa.bench.calibration import calibrate, calibration_lines

    traces = load_traces([args.data], limit=args.limit)
    out = Path(args.out or REPO / "runs" / f"calibrate-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    result = calibrate(traces, out, seeds=parse_seeds(args.seeds), concurrency=args.concurrency, say=lambda s: print(s, file=sys.stderr))
    print("\n".join(calibration_lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_ceiling"))
