"""Work units of a sweep: what to run, what is left to run, and how one runs into its record.

A unit is (trace, method, budget, seed). Every executor (this process, a shard, a Ray worker)
turns units into records with `run_units`, so a unit builds the same method context, gets the
same seeds (from run seed, trace id and call key) and writes the same record wherever it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from localfa.diagnosis import Diagnosis
from localfa.errors import LocatedError
from localfa.methods.base import MethodContext
from localfa.methods.budget import parse_budget
from localfa.methods.registry import MethodOptionError, MethodSpec, get_method
from localfa.methods.runner import Job, method_job, run_jobs
from localfa.results import Key, ResultRecord, trace_digest
from localfa.traces.errors import TraceError
from localfa.traces.model import Trace


class SweepError(LocatedError):
    """Bad sweep input or a run directory that cannot be resumed; str = "path: message"."""


@dataclass
class Unit:
    trace: Trace
    spec: MethodSpec
    budget: str
    seed: int

    @property
    def key(self) -> Key:
        return (self.trace.id, self.spec.label, self.budget, self.seed)


WorkItem = tuple[int, Unit]  # (the unit's index in the driver's plan, the unit)


@dataclass(frozen=True)
class Unreadable:
    """A trace file of the sweep that could not be read, and why. Each unit it would have had is
    an error record (`records`): the report counts it, a resume keeps it, and once the
    file reads again it is run (`localfa.results`: error kind ``unreadable``)."""

    root: Path  # the dataset folder it was found under (its id is its path there)
    path: Path
    error: Exception

    @property
    def id(self) -> str:
        from localfa.traces.ids import file_trace_id

        return file_trace_id(self.root, self.path)

    def failed_by_harness(self) -> bool:
        """Whether `--failed-only` keeps the file, as it would if it could be read: its harness
        marked its trial failed, or it is no harness's trial (`localfa.traces.runs.keep_failed`)."""
        from localfa.traces.runs import kept_as_failed, verdict_of

        verdict = verdict_of(self.root, self.path)
        return kept_as_failed(verdict is not None, verdict.failed if verdict is not None else None)

    def records(self, specs: Iterable[MethodSpec], budgets: list[str], seeds: list[int]) -> list[ResultRecord]:
        """One error record per (method, budget, seed), keyed like the units of a trace."""
        return [
            ResultRecord.unreadable(self.id, str(self.path), self.error, method=s.label, method_name=s.name, budget=b, seed=seed)
            for s in specs
            for b in budgets
            for seed in seeds
        ]


def read_trace_file(path: Path, fmt: str | None = None) -> list[Trace]:
    """`load_traces` (the runs a file holds: one, or one per inspect_ai sample), with any failure a
    `TraceError` naming the file (one an importer did not foresee included): reading a trace is
    part of its units, so one bad file is that file's error records (`Unreadable`), never the end
    of a sweep or of `diagnose`."""
    from localfa.traces.load import load_traces

    try:
        return load_traces(path, fmt)
    except TraceError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a hostile file sets off, it is that file's error
        raise TraceError(str(path), f"cannot be read: {type(exc).__name__}: {exc}") from None


def check_sweep_args(budgets: list[str] | None, concurrency: int) -> list[str]:
    """The budgets' canonical labels (default: none), distinct; bad budgets or concurrency refused."""
    try:
        labels = list(dict.fromkeys(parse_budget(b).label for b in (budgets or ["none"])))
    except ValueError as exc:
        raise SweepError(None, str(exc)) from None
    if concurrency < 1:
        raise SweepError(None, f"concurrency must be at least 1, got {concurrency}")
    return labels


def build_methods(specs: Iterable[MethodSpec]) -> dict[str, Any]:
    """label -> configured method; a bad option is a `SweepError`."""
    built: dict[str, Any] = {}
    for spec in specs:
        try:
            built[spec.label] = get_method(spec)
        except MethodOptionError as exc:
            raise SweepError(None, str(exc)) from None
    return built


def plan_units(traces: list[Trace], specs: list[MethodSpec], budgets: list[str], seeds: list[int]) -> list[Unit]:
    """Every (trace, method, budget, seed), trace-major, so a trace's units sit together."""
    return [Unit(t, s, b, seed) for t in traces for s in specs for b in budgets for seed in seeds]


def make_record(diag: Diagnosis, unit: Unit, digest: str | None = None) -> ResultRecord:
    """The results.jsonl line: the Diagnosis, its sweep identity, and the trace's label."""
    return ResultRecord.from_diagnosis(
        diag, unit.trace, method=unit.spec.label, method_name=unit.spec.name, budget=unit.budget, seed=unit.seed, digest=digest
    )


def error_record(unit: Unit, detail: str, kind: str = "final") -> ResultRecord:
    """The record of a unit that never produced a diagnosis (it killed its workers)."""
    diag = Diagnosis(trace=unit.trace.id, method=unit.spec.label, seed=unit.seed, stop_reason="error", error=detail, error_kind=kind)  # type: ignore[arg-type]
    return make_record(diag, unit)


def unit_job(engine: Any, method: Any, unit: Unit, key: str) -> Job:
    """The unit's method program, seeded from (run seed, trace id, call key) wherever it runs."""
    ctx = MethodContext(
        trace=unit.trace, seed=unit.seed, budget=None if unit.budget == "none" else unit.budget, options=unit.spec.options_dict
    )
    return method_job(engine, method, ctx, key=key, label=unit.spec.label)


def run_units(
    engine: Any, items: Iterable[WorkItem | None], concurrency: int, digests: dict[str, str] | None = None
) -> Iterator[tuple[int, ResultRecord]]:
    """(plan index, record) for each work item as it finishes, `concurrency` programs in flight.

    `items` may be fed while this runs (a cluster worker's inbox); a None item means "nothing
    more right now" (see `run_jobs`), so the programs in flight go on without waiting for it.
    Methods are built once per label; each trace is hashed once, here or before the run
    (`digests`, trace id -> `trace_digest`: off the engine's path when the traces are known).
    """
    methods: dict[str, Any] = {}
    digests = {} if digests is None else digests
    units: dict[str, Unit] = {}

    def jobs() -> Iterator[Job | None]:
        for item in items:
            if item is None:
                yield None
                continue
            idx, unit = item
            method = methods.get(unit.spec.label)
            if method is None:
                method = methods[unit.spec.label] = get_method(unit.spec)
            units[str(idx)] = unit
            yield unit_job(engine, method, unit, key=str(idx))

    for key, diag in run_jobs(engine, jobs(), concurrency=concurrency):
        unit = units.pop(key)
        digest = digests.get(unit.trace.id)
        if digest is None:
            digest = digests[unit.trace.id] = trace_digest(unit.trace)
        yield int(key), make_record(diag, unit, digest)
