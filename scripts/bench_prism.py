"""prism on the embedded model: the project's first accuracy figures from a real model.

Runs `prism` (transformers backend: NLL and attention, nothing decoded) over a fixed subset of
the Who&When dev split, the first `--per-split` traces of each subset in natural id order (chosen
by id, never by result), beside the random and heuristic floors on the same traces, and prints

    <method> step_accuracy=A ci95=[lo, hi] agent_accuracy=B ci95=[lo, hi] n=N
    <method> seconds_per_trace=S prompt_tokens_per_trace=T

with Wilson 95% intervals. `--aao` adds all-at-once on the same model (slow on a CPU: it
decodes). The labels are read here, to score, never by the method.

Cheap first, careful later (`--cascade safari,falat,drift`): each careful method runs on the
oracle engine (`--careful-engine`, default `oracle:p=0.7:noise=real`, seeds `--seeds`) over the
same traces, and the cascade `cascade:stages=prism>M:margin=X` is composed from the two runs by
the cascade's own rule (a member at least `margin` sure of its answer settles the trace; the
rest go on). The runner drives one engine per sweep, so a real first stage and an oracle careful
stage cannot share one run; the composition is exact because the stages do not see each other.
For each margin it prints the share prism settles, prism's accuracy on those, the careful
method's on the rest, the cascade's and the careful method's alone, and calls per trace.

    python scripts/bench_prism.py --json docs/benchmarks/bench_prism.json [--per-split 3] [--cascade safari,falat,drift]
    python scripts/bench_prism.py --methods all-at-once,random,heuristic --engine vllm --json docs/benchmarks/bench_prism_aao.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.sweep import parse_seeds
from localfa.engine.factory import make_engine
from localfa.insights.compare import wilson
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.load import iter_trace_files, load_trace
from localfa.traces.model import Trace, normalize_agent

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"
SUBSETS = ("algorithm-generated", "hand-crafted")
# Budgets sized for two loaded CPU cores (the method's defaults are 96 / 512 / 4096 tokens).
DEFAULT_SPEC = "prism:step_tokens=64:full_tokens=256:window_tokens=2048"


def pick(root: Path, per_split: int) -> list[Trace]:
    """The first `per_split` traces of each subset, in natural file order (by id)."""
    files = [f for sub in SUBSETS if (root / sub).is_dir() for f in iter_trace_files([root / sub])[:per_split]]
    return [load_trace(f) for f in files]


def hits(trace: Trace, diag: Any) -> tuple[bool, bool]:
    """(step right, agent right) against the trace's label."""
    label = trace.labels
    assert label is not None
    step = diag.error is None and diag.step is not None and diag.step == label.mistake_step
    agent = diag.error is None and bool(diag.agent) and normalize_agent(str(diag.agent)) == normalize_agent(label.mistake_agent or "")
    return step, agent


def interval(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"[{lo:.3f}, {hi:.3f}]"


def measure(engine: Any, spec: str, traces: list[Trace], seed: int) -> dict[str, Any]:
    """Run `spec` on each trace in turn; accuracy, seconds and tokens per trace."""
    method = get_method(spec)
    rows = []
    for trace in traces:
        started = time.perf_counter()
        ((_, diag),) = list(run_jobs(engine, [method_job(engine, method, MethodContext(trace=trace, seed=seed))]))
        wall = time.perf_counter() - started
        step, agent = hits(trace, diag)
        rows.append(
            {
                "trace": trace.id,
                "step": step,
                "agent": agent,
                "wall_s": wall,
                "tokens": diag.usage.get("prompt_tokens", 0),
                "calls": diag.usage.get("calls", 0),
                "margin": diag.confidence,
                "error": diag.error,
            }
        )
        label = trace.labels.mistake_step if trace.labels else None
        print(
            f"trace={trace.id} method={spec.split(':', 1)[0]} answer={diag.step} label={label} margin={diag.confidence} wall_s={wall:.1f}",
            flush=True,
        )
    return {"rows": rows}


def report(name: str, rows: list[dict[str, Any]]) -> None:
    n = len(rows)
    k_step, k_agent = sum(r["step"] for r in rows), sum(r["agent"] for r in rows)
    print(
        f"method={name} step_accuracy={k_step / n:.3f} ci95={interval(k_step, n)} "
        f"agent_accuracy={k_agent / n:.3f} ci95={interval(k_agent, n)} n={n} errors={sum(bool(r['error']) for r in rows)}"
    )
    print(
        f"method={name} seconds_per_trace={sum(r['wall_s'] for r in rows) / n:.2f} "
        f"prompt_tokens_per_trace={sum(r['tokens'] for r in rows) / n:.0f}"
    )


def share(rows: list[dict[str, Any]]) -> str:
    """Step accuracy over `rows`, or n/a for none."""
    return f"{sum(r['step'] for r in rows) / len(rows):.3f}" if rows else "n/a"


def cascade(first: list[dict[str, Any]], careful: dict[str, list[list[dict[str, Any]]]], margins: list[float]) -> None:
    """Compose `prism>careful` at each margin by the cascade's rule: prism settles a trace where its
    own confidence is at least the margin (an error record never settles); the careful method
    answers the rest. Careful figures average over its seeds."""
    n = len(first)
    for name, runs in careful.items():
        alone = [r for run in runs for r in run]
        for margin in margins:
            settled = [i for i, r in enumerate(first) if not r["error"] and (r["margin"] or 0.0) >= margin]
            rest = [i for i in range(n) if i not in settled]
            mine = [first[i] for i in settled]
            theirs = [run[i] for run in runs for i in rest]
            right = sum(r["step"] for r in mine) * len(runs) + sum(r["step"] for r in theirs)
            calls = (sum(r["calls"] for r in first) * len(runs) + sum(r["calls"] for r in theirs)) / (n * len(runs))
            print(
                f"cascade=prism>{name} margin={margin:g} settled_share={len(settled) / n:.3f} "
                f"settled_step_accuracy={share(mine)} deferred_step_accuracy={share(theirs)} "
                f"cascade_step_accuracy={right / (n * len(runs)):.3f} careful_alone_step_accuracy={share(alone)} "
                f"cascade_calls_per_trace={calls:.2f} careful_calls_per_trace={sum(r['calls'] for r in alone) / len(alone):.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--per-split", type=int, default=3, help="traces per subset (the first, by id)")
    ap.add_argument("--spec", default=DEFAULT_SPEC, help="the prism spec to measure")
    ap.add_argument("--engine", default="transformers", help="transformers: NLL and attention; vllm: the NLL-only variant")
    ap.add_argument("--aao", action="store_true", help="also all-at-once on the same model (decodes: slow on a CPU)")
    ap.add_argument("--methods", default=None, help="comma-separated specs to run instead (e.g. all-at-once,random,heuristic)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cascade", default="", help="careful methods to compose after prism (e.g. safari,falat,drift), run on --careful-engine"
    )
    ap.add_argument(
        "--careful-engine",
        default="oracle:p=0.7:noise=real",
        help="the engine of the careful stage (default: the oracle's realistic errors)",
    )
    ap.add_argument("--seeds", default="0,1,2", help="the careful stage's seeds")
    ap.add_argument("--margins", default="0.25,0.5,0.75", help="prism margins at which a trace is settled")
    add_json_option(ap)
    args = ap.parse_args()
    traces = pick(args.data, args.per_split)
    cascade_names = [m.strip() for m in args.cascade.split(",") if m.strip()]
    engine = make_engine(args.engine)
    try:
        print(f"model={engine.model_info.get('name', '?')} engine={args.engine} traces={len(traces)} spec={args.methods or args.spec}")
        print("trace_ids=" + ",".join(t.id.rsplit("/", 2)[-2][0] + t.id.rsplit("/", 1)[-1] for t in traces))
        specs = [args.spec, "random", "heuristic"] + (["all-at-once"] if args.aao else [])
        if args.methods:
            specs = [m.strip() for m in args.methods.split(",") if m.strip()]
        if cascade_names and args.spec not in specs:  # the cascade's first stage is measured too
            specs.append(args.spec)
        measured = {}
        for spec in specs:
            rows = measured[spec] = measure(engine, spec, traces, args.seed)["rows"]
            report(spec.split(":", 1)[0], rows)
            for sub in SUBSETS:
                mine = [r for t, r in zip(traces, rows) if t.subset == sub]
                if mine:
                    report(f"{spec.split(':', 1)[0]}@{sub}", mine)
    finally:
        engine.close()
    if cascade_names:
        careful = {}
        oracle = make_engine(args.careful_engine, say=lambda _: None)
        try:
            for name in cascade_names:
                careful[name] = [measure(oracle, name, traces, seed)["rows"] for seed in parse_seeds(args.seeds)]
        finally:
            oracle.close()
        cascade(measured[args.spec], careful, [float(m) for m in args.margins.split(",")])


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_prism"))
