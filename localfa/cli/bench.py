"""`localfa bench DATASET... --methods ... --seeds ... --out RUN_DIR`: a resumable sweep.

One record per (trace, method, budget, seed) is appended to RUN_DIR/results.jsonl as soon as it
is done; re-running the same command resumes. Bad input exits with status 2 and one line
``error: <file>: <what>`` on stderr. A trace file that cannot be read is one such line too, but
the sweep goes on: each unit the file would have had is an error record naming it, which the
report counts, a resume keeps, and a resume after the file is repaired replaces by its run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from localfa.cli.engine_options import EngineChoice, with_engine_options
from localfa.cli.errors import fail, fail_trace
from localfa.cli.trace_options import AllowNoneOpt, FailedOnlyOpt, FollowLinksOpt, with_allow_none
from localfa.methods.registry import DEFAULT_METHOD, SPEC_HELP
from localfa.traces.errors import TraceError

if TYPE_CHECKING:
    from localfa.bench.shard import Shard
    from localfa.insights.taxonomy import Taxonomy

METHODS_HELP = "Comma-separated method specs, each " + SPEC_HELP + ". The full text is the method's label."
RAY_HELP = (
    "Run the sweep on engine workers of a Ray cluster: 'local' starts one on this machine (loopback "
    "only), 'auto' joins the one running here, HOST:PORT joins that one (token authentication)"
)
WORKERS_HELP = "Engine workers (Ray actors) to start with --ray; each builds one engine from the engine options"
SKIP_BAD_HELP = (
    "Kept for old scripts; does nothing: an unreadable trace file never stops a sweep, each of its "
    "units is an error record naming the file (the report counts them; repair the file and resume to run it)"
)
CATEGORISE_HELP = (
    "After the sweep, ask the model which category of TAXONOMY each diagnosed step falls in, with a reason "
    "(built in: trail, mast, agentrx; or a TOML file); records that already carry it are not asked again. "
    "See `localfa summarize RUN_DIR`"
)
ESTIMATE_HELP = (
    "Run nothing: print each method's predicted calls, prompt tokens, uncached prefill and GPU time on "
    "these traces for --profile (default gpu-single), from cost models measured by scripts/bench_cost.py"
)
SHARD_HELP = (
    "Run only shard I of N of the work units (a Slurm array task, a Kubernetes Job), "
    "into RUN_DIR/results.shard-I-of-N.jsonl; report, view and resume read every shard's file"
)


@with_engine_options
def bench(
    datasets: Annotated[list[str], typer.Argument(metavar="DATASET", help="Trace files or folders (e.g. a Who&When checkout)")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory: results.jsonl, manifest.json, cache/")] = None,
    methods: Annotated[str, typer.Option("--methods", help=METHODS_HELP)] = DEFAULT_METHOD,
    seeds: Annotated[str, typer.Option("--seeds", help="Run seeds: 0,1,2 or 0-4")] = "0",
    budgets: Annotated[
        Optional[str],
        typer.Option(
            "--budgets",
            help="Context budgets, comma-separated: none, 25k (tokens), 100000c (characters), "
            "scale:2 (fixed scaling factor: budget = token position of the labelled fault / 2)",
        ),
    ] = None,
    limit: Annotated[
        Optional[int],
        typer.Option(
            "--limit",
            min=1,
            help="Only the first N traces of each subset (Who&When: N algorithm-generated "
            "AND N hand-crafted; other data: per folder), in natural file order",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Trace runs in flight at once (the engine batches their calls)")
    ] = 16,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Resume even if what changes answers changed (model, backend, prompts, "
            "grammars, method options, max model length, dtype, ...)",
        ),
    ] = False,
    retry_errors: Annotated[
        bool,
        typer.Option("--retry-errors", help="On resume, run every error record again (engine errors such as timeouts are always retried)"),
    ] = False,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help=SKIP_BAD_HELP)] = False,
    failed_only: FailedOnlyOpt = False,
    follow_links: FollowLinksOpt = False,
    allow_none: AllowNoneOpt = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not keep a response cache (default: RUN_DIR/cache)")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar")] = False,
    ray: Annotated[Optional[str], typer.Option("--ray", help=RAY_HELP)] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help=WORKERS_HELP)] = 1,
    shard: Annotated[Optional[str], typer.Option("--shard", help=SHARD_HELP)] = None,
    categorise: Annotated[Optional[str], typer.Option("--categorise", help=CATEGORISE_HELP)] = None,
    estimate: Annotated[bool, typer.Option("--estimate", help=ESTIMATE_HELP)] = False,
    *,
    engine_choice: EngineChoice,
) -> None:
    """Run methods over datasets (traces x methods x budgets x seeds), resumably, into RUN_DIR."""
    from localfa.bench.driver import run_units_sweep
    from localfa.bench.run_manifest import recorded_trace_ids
    from localfa.bench.store import StoreError, StoreWriteError
    from localfa.bench.sweep import SweepError, load_traces, parse_budgets, parse_methods, parse_seeds
    from localfa.bench.units import Unreadable
    from localfa.cluster.runtime import ClusterError
    from localfa.durable import may_pass
    from localfa.methods.registry import MethodOptionError, only_scoring

    try:
        specs = with_allow_none(parse_methods(methods), allow_none)
        # options are checked before traces are read or an engine is loaded (minutes)
        scoring_only = only_scoring(specs)
    except MethodOptionError as exc:
        fail("--methods", str(exc))
    try:
        seed_list = parse_seeds(seeds)
    except ValueError as exc:
        fail("--seeds", str(exc))
    try:
        budget_list = parse_budgets(budgets)
    except ValueError as exc:
        fail("--budgets", str(exc))
    shard_of = parse_shard(shard, ray, workers)
    taxonomy = load_taxonomy_or_fail(categorise) if categorise else None
    if out is None and not estimate:
        fail("--out", "give the run directory (or --estimate to only predict the cost)")
    if out is not None and out.exists() and not out.is_dir():
        fail(str(out), "--out must be a directory (the run directory), not a file")
    unreadable: list[Unreadable] = []
    try:
        traces = load_traces(
            datasets,
            limit=limit,
            failed_only=failed_only,
            unreadable=unreadable,
            follow_links=follow_links,
            recorded_ids=recorded_trace_ids(out),
        )
    except TraceError as exc:
        fail_trace(exc)
    except SweepError as exc:
        fail(exc.path, exc.message)
    if not traces and unreadable:  # nothing to run: bad input (each file's error line is above)
        raise typer.Exit(2)
    if not traces:
        fail(" ".join(datasets), "--failed-only: no trial the harness marked failed" if failed_only else "no trace files found")
    if estimate:
        print_estimate(traces, [s.label for s in specs], engine_choice.profile)
        return
    assert out is not None  # checked above: only --estimate runs without one
    cache = None if no_cache else str(Path(engine_choice.cache_dir or out / "cache").resolve())
    choice = dataclasses.replace(engine_choice, cache_dir=cache, scoring_only=scoring_only)
    try:
        result = run_units_sweep(
            out,
            traces,
            specs,
            seed_list,
            make_executor(choice, ray, workers),  # engines start only once the run's lock is held
            budget_list,
            shard=shard_of,
            concurrency=concurrency,
            force=force,
            retry_errors=retry_errors,
            progress=not no_progress,
            manifest_extra={"limit": limit, "dataset_args": list(datasets), "response_cache": cache},
            cache_dir=cache,
            unreadable=unreadable,
        )
    except (StoreError, SweepError, ClusterError) as exc:
        fail(exc.path, exc.message, code=1 if isinstance(exc, (ClusterError, StoreWriteError)) else 2)
    except OSError as exc:  # disk full or an I/O error outside the results file (manifest, cache, run folder)
        again = "run the same command again to resume" if may_pass(exc) else "give a run folder you can write (--out)"
        fail(str(exc.filename or out), f"cannot write: {exc.strerror or exc}; {again}", code=1)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished records are in {out / 'results.jsonl'}; run the same command again to resume", err=True)
        raise typer.Exit(130) from None
    typer.echo(
        f"{result.written} new records ({result.errors} with errors"
        + (f", {result.retried} were retries of failed records" if result.retried else "")
        + (f"; {len(unreadable)} trace file{'s' if len(unreadable) != 1 else ''} could not be read: error records" if unreadable else "")
        + f"), {result.skipped} already done, "
        f"{result.planned} planned; {out / 'results.jsonl'}  ({result.wall_s:.1f}s)",
        err=True,
    )
    if taxonomy is not None:
        run_categorise_pass(out, traces, taxonomy, choice, concurrency)
    if result.failed:  # as `diagnose`: a run that holds error records is not a clean run
        typer.echo(f"{result.failed} of {result.planned} planned units hold an error record", err=True)
        raise typer.Exit(1)


def load_taxonomy_or_fail(spec: str) -> "Taxonomy":
    """The `--categorise` taxonomy, or one `error:` line and exit status 2 (before any engine starts)."""
    from localfa.insights.taxonomy import TaxonomyError, load_taxonomy

    try:
        return load_taxonomy(spec)
    except TaxonomyError as exc:
        fail(exc.path or "--categorise", exc.message)


def run_categorise_pass(out: Path, traces: list[Any], taxonomy: "Taxonomy", choice: EngineChoice, concurrency: int) -> None:
    """The categorise pass over the finished sweep, on an engine of this process (localfa.insights.categorise)."""
    from localfa.insights.categorise import categorise_run

    engine = choice.build()
    try:
        done = categorise_run(out, traces, taxonomy, engine, concurrency=max(concurrency, 16))
    finally:
        engine.close()
    typer.echo(
        f"categorised {done.categorised} records with taxonomy {taxonomy.name} ({done.failed} failed, {done.skipped} not asked)", err=True
    )
    for line in (done.errors or [])[:5]:
        typer.echo(f"  category not found: {line.splitlines()[0]}", err=True)


def print_estimate(traces: list, methods: list[str], profile: str | None) -> None:
    """`--estimate`: each method's predicted cost on these traces, no model run (localfa.bench.estimate)."""
    from localfa.bench.estimate import estimate_lines

    try:
        lines = estimate_lines(traces, methods, profile)
    except ValueError as exc:
        fail("--profile", str(exc))
    for line in lines:
        typer.echo(line)


def make_executor(choice: EngineChoice, ray: str | None, workers: int) -> Any:
    """Ray workers (`--ray`), or this process's engine, built when the driver starts it."""
    if ray:
        from localfa.bench.ray_executor import RayExecutor

        return RayExecutor(ray, workers, dataclasses.asdict(choice.options()))
    from localfa.bench.executors import LocalExecutor

    return LocalExecutor(build=choice.build)


def parse_shard(text: str | None, ray: str | None = None, workers: int = 1) -> "Shard | None":
    """The `--shard` value (and a `--workers` without `--ray`), or one `error:` line and exit status 2."""
    from localfa.bench.shard import Shard

    if workers > 1 and not ray:
        fail("--workers", "engine workers run on Ray: add --ray local (this machine) or --ray auto")
    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as exc:
        fail("--shard", str(exc))
