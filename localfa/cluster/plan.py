"""The sweep pieces a distributed run needs, taken from `localfa.bench.sweep`.

A Ray sweep and a shard run the same units, build the same method contexts and write the same
records as `run_sweep`, so everything here calls sweep.py's own pieces (`_Unit`, `make_record`,
`_collision`, `prepare_manifest`, `build_manifest`). Three of them are still inline in
`run_sweep`; until sweep.py offers them as functions, the thin adapters below mirror those lines
exactly (marked ADAPTER): unit planning, choosing what is left to do, and the manifest's fields.
"""

from __future__ import annotations

from typing import Any, Iterable

from localfa.bench.store import ResultStore
from localfa.bench.sweep import SweepError, _collision, _Unit, make_record  # noqa: F401 (re-exported)
from localfa.methods.base import MethodContext
from localfa.methods.registry import MethodOptionError, MethodSpec, get_method
from localfa.methods.runner import Job, method_job
from localfa.results import trace_digest
from localfa.traces.model import Trace

Unit = _Unit


def build_methods(specs: Iterable[MethodSpec]) -> dict[str, Any]:
    """label -> configured method; a bad option is a `SweepError`, as in `run_sweep`."""
    built: dict[str, Any] = {}
    for spec in specs:
        try:
            built[spec.label] = get_method(spec)
        except MethodOptionError as exc:
            raise SweepError(None, str(exc)) from None
    return built


def plan_units(traces: list[Trace], specs: list[MethodSpec], budgets: list[str], seeds: list[int]) -> list[Unit]:
    """ADAPTER (run_sweep's planning loop): trace-major, so a trace's units sit together."""
    return [Unit(t, s, b, seed) for t in traces for s in specs for b in budgets for seed in seeds]


def select_todo(units: list[Unit], store: ResultStore, *, force: bool,
                retry_errors: bool) -> tuple[list[Unit], int]:
    """ADAPTER (run_sweep's resume filter): (units to run, how many of them re-run a failed record)."""
    digests = {u.trace.id: trace_digest(u.trace) for u in units}
    todo: list[Unit] = []
    retried = 0
    for u in units:
        old = store.get(u.key)
        if old is None:
            todo.append(u)
            continue
        clash = _collision(u, old, digests[u.trace.id])
        if clash and not force:
            raise SweepError(store.run_dir, clash)
        if not old.is_final(retry_errors):
            todo.append(u)
            retried += 1
    return todo, retried


def sweep_manifest(engine: Any, specs: list[MethodSpec], built: dict[str, Any], seeds: list[int],
                   budgets: list[str], traces: list[Trace], extra: dict[str, Any]) -> dict[str, Any]:
    """ADAPTER (run_sweep's `build_manifest` call): the same fields, plus `extra` (cluster, shard)."""
    from localfa.manifest import build_manifest

    return build_manifest(
        engine, seeds=list(seeds),
        methods={s.label: {"name": s.name, "options": s.options_dict, "resolved": built[s.label].describe()}
                 for s in specs},
        extra={"budgets": list(budgets), "trace_files": sorted({t.source for t in traces}), **extra},
    )


def unit_job(engine: Any, method: Any, unit: Unit, key: str) -> Job:
    """ADAPTER (run_sweep's `job`): the unit's method program, seeded exactly as in one process."""
    ctx = MethodContext(trace=unit.trace, seed=unit.seed, budget=None if unit.budget == "none" else unit.budget,
                        options=unit.spec.options_dict)
    return method_job(engine, method, ctx, key=key, label=unit.spec.label)
