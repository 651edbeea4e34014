"""Ensembles against their members, on the oracle engine (labels known, wrong with probability 1 - p).

One sweep (dev split × seeds) runs the vote, each of its members alone, the cascade and its most
expensive stage alone, all at the same p, and prints, side by side:

- `vote_step_accuracy=` and `best_member_step_accuracy=` (the best single member), each with its
  95% interval (bootstrap over traces, per-trace mean over seeds);
- `cascade_step_accuracy=` / `top_stage_step_accuracy=` and `cascade_calls_per_trace=` /
  `top_stage_calls_per_trace=`: what escalating only when unsure saves, and what it costs in accuracy.

    python scripts/bench_ensembles.py                      # p = 0.7, seeds 0,1,2, the whole dev split
    python scripts/bench_ensembles.py --p 0.9 --limit 10 --out runs/ensembles
    python scripts/bench_ensembles.py --noise real         # correlated errors (and iid beside them)

With `--noise real` (the oracle's realistic error model: errors correlated within a trace) the
same sweep also runs under independent errors (OUT/iid/ beside OUT/real/) and prints how much
each ensemble gains over its best member under each, `vote_gain_real=` beside `vote_gain_iid=`
(and the cascade's over its top stage): members fooled by the same hard trace outvote nobody.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

import localfa
from localfa.bench.benchjson import add_json_option, run_recorded
from localfa.bench.metrics import GroupSummary, summarize
from localfa.bench.report import load_run
from localfa.methods.ensemble.members import parse_members
from localfa.methods.registry import MethodSpec

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "whowhen"


def _acc(g: GroupSummary) -> str:
    est = g.metrics["step"]
    return f"{est.mean:.3f} ci95={est.lo:.3f}..{est.hi:.3f}"


def _step(g: GroupSummary) -> float:
    return g.metrics["step"].mean or 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=float, default=0.7, help="the oracle's share of honest answers (default 0.7)")
    ap.add_argument("--noise", choices=["iid", "real"], default="iid", help="the oracle's error model; real runs iid beside it")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--vote", default="all-at-once+falat+drift", help="the vote's members (default all-at-once+falat+drift)")
    ap.add_argument("--cascade", default="all-at-once*3>falat>safari", help="the cascade's stages")
    ap.add_argument("--agree", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="at most N traces per subset")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--out", default=None, help="run directory (default: a fresh runs/ensembles-TIME/)")
    add_json_option(ap)
    args = ap.parse_args(argv)

    vote = MethodSpec.of("vote", members=args.vote)
    cascade = MethodSpec.of("cascade", stages=args.cascade, agree=args.agree)
    members = [m.spec for m in parse_members(args.vote, "+", "vote")]
    top = parse_members(args.cascade, ">", "cascade")[-1].spec
    specs = list({s.label: s for s in [vote, *members, cascade, top]}.values())
    out = Path(args.out or f"runs/ensembles-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    noises = ["real", "iid"] if args.noise == "real" else ["iid"]
    gains: dict[str, tuple[float, float]] = {}
    for noise in noises:
        run_dir = out / noise if len(noises) > 1 else out
        engine = localfa.make_engine(f"oracle:p={args.p:g}:noise={noise}", say=lambda _: None)
        started = time.perf_counter()
        try:
            localfa.bench([args.data], run_dir, specs, seeds=seeds, limit=args.limit, engine=engine, concurrency=64)
        finally:
            engine.close()
        records, _ = load_run(run_dir)
        groups = {g.method: g for g in summarize(records) if g.subset == "overall"}
        tag = f" noise={noise}" if len(noises) > 1 else ""
        print(
            f"p={args.p:g}{tag} seeds={args.seeds} traces={groups[vote.label].traces} out={run_dir} wall_s={time.perf_counter() - started:.1f}"
        )
        gains[noise] = _print_comparison(groups, records, vote, members, cascade, top)
    if len(noises) > 1:
        for i, name in enumerate(("vote", "cascade")):
            real, iid = gains["real"][i], gains["iid"][i]
            print(f"{name}_gain_real={real:+.3f} {name}_gain_iid={iid:+.3f} {name}_gain_lost_to_correlation={iid - real:+.3f}")
    return 0


def _print_comparison(groups: dict[str, GroupSummary], records: list, vote, members, cascade, top) -> tuple[float, float]:
    """Print each method's line, the vote against its best member and the cascade against its top
    stage; (vote gain, cascade gain) in step accuracy."""
    for label in groups:
        g = groups[label]
        print(f"method={label} step_accuracy={_acc(g)} calls_per_trace={g.cost.get('calls', 0.0):.2f} errors={g.errors}")
    best = max((groups[m.label] for m in members), key=_step)
    print(f"vote_step_accuracy={_acc(groups[vote.label])}")
    print(f"best_member_step_accuracy={_acc(best)} best_member={best.method}")
    c, t = groups[cascade.label], groups[top.label]
    print(f"cascade_step_accuracy={_acc(c)}")
    print(f"top_stage_step_accuracy={_acc(t)} top_stage={t.method}")
    print(f"cascade_calls_per_trace={c.cost.get('calls', 0.0):.2f}")
    print(f"top_stage_calls_per_trace={t.cost.get('calls', 0.0):.2f}")
    answered = [r.details.get("answered_by", {}).get("stage") for r in records if r.method == cascade.label and not r.error]
    shares = {k: round(answered.count(k) / len(answered), 3) for k in sorted({a for a in answered if a is not None})} if answered else {}
    print(f"cascade_answered_by_stage={shares}")
    return _step(groups[vote.label]) - _step(best), _step(c) - _step(t)


if __name__ == "__main__":
    raise SystemExit(run_recorded(main, "bench_ensembles"))
