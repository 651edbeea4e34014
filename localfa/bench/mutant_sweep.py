"""Mutants against their intact method: does the oracle ceiling notice each deliberate break?

For each method with registered mutants (`localfa.oracle.mutants.registered_mutants`), the intact
method and every mutant are swept on the same traces, each variant in its own run directory:

- ``OUT/METHOD/VARIANT/p=1/``: the honest oracle, seed 0 (p = 1 is deterministic): the ceiling,
  and the cost (calls and prompt tokens per trace, from the records' usage);
- ``OUT/METHOD/VARIANT/p=0.7-real/``: p = 0.7 under the realistic error model, seeds 0, 1, 2 (or
  the `seeds` given: more seeds where a stage's effect is near the 3-point rule): the step accuracy
  the kill rule `p07` compares;
- ``OUT/METHOD/VARIANT/long-Mx/``: for a method with a mutant marked `long`, the honest oracle on
  the traces grown so the fault sits at M x a 32k window (`LONG_MULTIPLES`): the ceiling the kill
  rule `long` compares.

A mutant is applied in-process around its sweeps (`Mutant.patch()`, and `Mutant.method_spec` for
spec options), and judged against the intact figures by `localfa.oracle.mutants.killed_by`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from localfa.bench.longruns import grown_depths
from localfa.bench.metrics import score_record
from localfa.bench.report import load_run
from localfa.bench.sweep import run_sweep
from localfa.engine.factory import make_engine
from localfa.methods.registry import MethodSpec
from localfa.oracle.mutants import Figures, KillRule, Mutant, killed_by, registered_mutants
from localfa.results import ResultRecord
from localfa.traces.model import Trace

INTACT = "intact"
NOISY_P = 0.7
NOISY_SEEDS: tuple[int, ...] = (0, 1, 2)
LONG_WINDOW = 32768
LONG_MULTIPLES: tuple[float, ...] = (2.0, 5.0)  # past the window: where memory and summaries must work


@dataclass
class Variant:
    """One row of the table: a method intact or under one mutant, and what it measured."""

    method: str
    mutant: Mutant | None
    figures: Figures
    killed: list[KillRule] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0

    @property
    def name(self) -> str:
        return INTACT if self.mutant is None else self.mutant.name


def step_accuracy(records: Sequence[ResultRecord]) -> float:
    """Exact-step accuracy: per trace the mean over its seeds, then the mean over traces
    (a failed record scores 0)."""
    by_trace: dict[str, list[float]] = {}
    for r in records:
        by_trace.setdefault(r.trace, []).append(score_record(r)["step"] or 0.0)
    return sum(sum(v) / len(v) for v in by_trace.values()) / len(by_trace) if by_trace else 0.0


def per_trace(records: Sequence[ResultRecord], field_name: str) -> float:
    """The mean of a usage field per record (calls, prompt_tokens)."""
    return sum(float(r.usage.get(field_name, 0) or 0) for r in records) / len(records) if records else 0.0


def sweep_records(
    run_dir: Path, traces: list[Trace], specs: Sequence[MethodSpec], seeds: Sequence[int], engine_spec: str, concurrency: int = 64
) -> list[ResultRecord]:
    """One quiet sweep on a fresh engine (`engine_spec`, e.g. ``oracle:p=0.7:noise=real``); its records."""
    engine = make_engine(engine_spec, say=lambda _: None)
    try:
        run_sweep(run_dir, traces, list(specs), list(seeds), engine, concurrency=concurrency, progress=False, say=lambda _: None)
    finally:
        engine.close()
    records, _ = load_run(run_dir)
    return records


def measure(
    out: Path,
    traces: list[Trace],
    method: str,
    mutant: Mutant | None,
    noisy: bool = True,
    noise: str = "real",
    concurrency: int = 64,
    seeds: Sequence[int] = NOISY_SEEDS,
    long: bool = False,
) -> Variant:
    """Sweep one variant (at p = 1, at p = 0.7 unless `noisy` is False, and with `long` at p = 1 on
    long runs) and measure it."""
    started = time.perf_counter()
    spec = MethodSpec.parse(mutant.method_spec(method) if mutant else method)
    where = out / method / (INTACT if mutant is None else mutant.name)
    with mutant.patch() if mutant else contextlib.nullcontext():
        exact = sweep_records(where / "p=1", traces, [spec], [0], "oracle:p=1", concurrency)
        noisy_records = (
            sweep_records(where / f"p={NOISY_P:g}-{noise}", traces, [spec], seeds, f"oracle:p={NOISY_P:g}:noise={noise}", concurrency)
            if noisy
            else []
        )
        long_records = long_runs(where, traces, spec, concurrency) if long else []
    figures = Figures(
        ceiling=step_accuracy(exact),
        noisy_accuracy=step_accuracy(noisy_records) if noisy else None,
        calls_per_trace=per_trace(exact, "calls"),
        prefill_per_trace=per_trace(exact, "prompt_tokens"),
        long_ceiling=step_accuracy(long_records) if long else None,
    )
    errors = sum(1 for r in [*exact, *noisy_records, *long_records] if r.error)
    return Variant(method, mutant, figures, errors=errors, wall_s=time.perf_counter() - started)


def long_runs(where: Path, traces: list[Trace], spec: MethodSpec, concurrency: int) -> list[ResultRecord]:
    """p = 1 records on `traces` grown so the fault sits at each of `LONG_MULTIPLES` x the window
    (a trace whose fault already lies deeper is left out of that depth)."""
    records: list[ResultRecord] = []
    for multiple, _, _, grown, _ in grown_depths(traces, LONG_WINDOW, LONG_MULTIPLES):
        if grown:
            records += sweep_records(where / f"long-{multiple:g}x", grown, [spec], [0], "oracle:p=1", concurrency)
    return records


@dataclass(frozen=True)
class Job:
    """One variant to measure in a worker process: a registered mutant is named, not passed (its
    patch is code, which does not cross a process boundary), and looked up again there."""

    method: str
    mutant: str | None  # None: the method intact
    traces: tuple[Trace, ...]
    noisy: bool = True
    noise: str = "real"
    concurrency: int = 64
    seeds: tuple[int, ...] = NOISY_SEEDS
    long: bool = False
    subdir: str = ""  # jobs on different traces or settings keep apart under one `out`


@dataclass(frozen=True)
class Measured:
    """What a worker sends back: the figures and counts, or the error it met as text."""

    figures: Figures | None
    errors: int = 0
    wall_s: float = 0.0
    failure: str | None = None


def _registered(method: str, name: str) -> Mutant:
    found = [m for m in registered_mutants().get(method, ()) if m.name == name]
    if not found:
        raise ValueError(f"{method} has no registered mutant {name!r}: a worker process finds mutants by name")
    return found[0]


def _measure_job(args: tuple[str, Job]) -> Measured:
    out, job = args
    try:
        mutant = None if job.mutant is None else _registered(job.method, job.mutant)
        v = measure(
            Path(out) / job.subdir, list(job.traces), job.method, mutant, job.noisy, job.noise, job.concurrency, job.seeds, job.long
        )
        return Measured(v.figures, v.errors, v.wall_s)
    except Exception as exc:  # noqa: BLE001 - reported by whoever needs this job
        return Measured(None, failure=f"{type(exc).__name__}: {exc}")


def measure_jobs(out: Path, jobs: Sequence[Job], workers: int = 2) -> Iterator[Measured]:
    """Each job measured in one of `workers` spawned processes (the oracle is single-threaded
    Python, and a mutant patches module state), yielded in the jobs' order as each is done."""
    with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(_measure_job, [(str(out), job) for job in jobs], chunksize=1)


def run_mutants(
    out: Path,
    traces: list[Trace],
    mutants: dict[str, tuple[Mutant, ...]],
    noisy: bool = True,
    noise: str = "real",
    concurrency: int = 64,
    say: Callable[[str], None] = lambda _: None,
    seeds: Sequence[int] = NOISY_SEEDS,
    workers: int = 1,
) -> list[Variant]:
    """Every method intact, then under each of its mutants; each mutant's `killed` filled in.
    With `workers` > 1 the variants run in that many processes; the mutants must then be registered
    ones (a worker finds them by name)."""
    plan = [(method, mutant, any(m.long for m in found)) for method, found in mutants.items() for mutant in (None, *found)]
    rows: list[Variant] = []
    for got in _measured(out, traces, plan, noisy, noise, concurrency, seeds, workers):
        if got.mutant is not None:
            intact = next(r for r in reversed(rows) if r.method == got.method and r.mutant is None)
            got.killed = killed_by(intact.figures, got.figures)
        say(f"# {got.method} {got.name}: {got.wall_s:.1f}s")
        rows.append(got)
    return rows


def _measured(
    out: Path,
    traces: list[Trace],
    plan: list[tuple[str, Mutant | None, bool]],
    noisy: bool,
    noise: str,
    concurrency: int,
    seeds: Sequence[int],
    workers: int,
) -> Iterator[Variant]:
    """The plan's variants measured in order: in this process, or in `workers` processes. A mutant
    runs long where it says so; the intact method where any of its mutants does."""
    variants = [(method, mutant, mutant.long if mutant else any_long) for method, mutant, any_long in plan]
    if workers <= 1:
        for method, mutant, long in variants:
            yield measure(out, traces, method, mutant, noisy, noise, concurrency, seeds, long=long)
        return
    jobs = [
        Job(method, mutant.name if mutant else None, tuple(traces), noisy, noise, concurrency, tuple(seeds), long)
        for method, mutant, long in variants
    ]
    for job in jobs:
        if job.mutant is not None:
            _registered(job.method, job.mutant)  # refused here, before any process starts
    for (method, mutant, _), job, got in zip(plan, jobs, measure_jobs(out, jobs, workers)):
        if got.figures is None:
            raise RuntimeError(f"measuring {method} {job.mutant or INTACT} failed: {got.failure}")
        yield Variant(method, mutant, got.figures, errors=got.errors, wall_s=got.wall_s)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def table_lines(rows: Sequence[Variant]) -> list[str]:
    """The printed table (one line per variant) and, per method, ``method=NAME
    mutants_killed=K/N`` and its intact ``ceiling_step_accuracy=``."""
    head = f"{'method':<14} {'mutant':<28} {'expect':<6} {'p=1':>6} {'p=0.7':>6} {'long':>6} {'calls/tr':>9} {'prefill/tr':>11} {'err':>4}  killed"
    lines = [head]
    for r in rows:
        f = r.figures
        killed = ",".join(r.killed) if r.mutant else "-"
        if r.mutant and not r.killed:
            killed = "NOT KILLED"
        elif r.mutant and r.mutant.expect not in r.killed:
            killed += f" (expected {r.mutant.expect})"
        lines.append(
            f"{r.method:<14} {r.name:<28} {(r.mutant.expect if r.mutant else '-'):<6} {_num(f.ceiling):>6} {_num(f.noisy_accuracy):>6} {_num(f.long_ceiling):>6} "
            f"{f.calls_per_trace:>9.1f} {f.prefill_per_trace:>11.0f} {r.errors:>4}  {killed}"
        )
    for method in dict.fromkeys(r.method for r in rows):
        mine = [r for r in rows if r.method == method]
        intact = next(r for r in mine if r.mutant is None)
        muts = [r for r in mine if r.mutant is not None]
        lines.append(
            f"method={method} mutants_killed={sum(1 for r in muts if r.killed)}/{len(muts)} "
            f"ceiling_step_accuracy={intact.figures.ceiling:.3f} noisy_step_accuracy={_num(intact.figures.noisy_accuracy)}"
        )
    return lines
