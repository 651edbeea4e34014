"""`localfa bench` with `--ray` and/or `--shard`: the command's distributed branch.

Kept here so `localfa/cli/bench.py` only declares the flags and calls `bench_distributed`;
nothing heavy is imported until a flag is used.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localfa.bench.sweep import SweepResult
    from localfa.cluster.shard import Shard
    from localfa.methods.registry import MethodSpec
    from localfa.traces.model import Trace

RAY_HELP = (
    "Run the sweep on engine workers of a Ray cluster: 'local' starts one on this machine (loopback "
    "only), 'auto' joins the one running here, HOST:PORT joins that one (token authentication)"
)
WORKERS_HELP = "Engine workers (Ray actors) to start with --ray; each builds one engine from the engine options"
SHARD_HELP = (
    "Run only shard I of N of the work units (a Slurm array task, a Kubernetes Job), "
    "into RUN_DIR/results.shard-I-of-N.jsonl; report and resume read every shard's file"
)


def parse_shard(text: str | None, ray: str | None = None, workers: int = 1) -> "Shard | None":
    """The `--shard` value (and a `--workers` without `--ray`), or one `error:` line and exit status 2."""
    from localfa.cli.errors import fail
    from localfa.cluster.shard import Shard

    if workers > 1 and not ray:
        fail("--workers", "engine workers run on Ray: add --ray local (this machine) or --ray auto")
    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as exc:
        fail("--shard", str(exc))


def bench_distributed(
    out: Path,
    traces: "list[Trace]",
    specs: "list[MethodSpec]",
    seeds: list[int],
    budgets: list[str],
    choice: Any,
    engine: Any,
    *,
    ray: str | None,
    workers: int,
    shard: "Shard | None",
    **sweep: Any,
) -> "SweepResult":
    """Run the sweep on Ray workers (`ray`) or on `engine` here, all units or `shard`'s."""
    from localfa.cli.errors import fail
    from localfa.cluster.driver import LocalExecutor, run_units_sweep
    from localfa.cluster.ray_driver import ClusterError, RayExecutor

    try:
        executor: Any = RayExecutor(ray, workers, asdict(choice.options())) if ray else LocalExecutor(engine, specs)
        return run_units_sweep(out, traces, specs, seeds, executor, budgets, shard=shard, **sweep)
    except ClusterError as exc:
        fail(exc.path, exc.message, code=1)
