"""The Python API: the front door for notebooks and pipelines; the CLI commands wrap it.

    import localfa
    trace = localfa.load_trace("examples/failed_run.json")
    d = localfa.diagnose(trace, method="all-at-once", engine="scripted")
    print(d.step, d.agent)

`engine` is a backend name (``"vllm"``, ...), an `EngineOptions`, or an engine you built with
`make_engine` (then it stays open for your next call); None means the embedded model on the best
installed backend. A method is a spec string, the same as on the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, overload

from localfa.diagnosis import Diagnosis
from localfa.engine.factory import EngineOptions, build_engine, make_engine
from localfa.engine.types import Engine
from localfa.methods.base import BaseMethod, MethodContext
from localfa.methods.registry import DEFAULT_METHOD, MethodSpec, get_method, only_scoring
from localfa.traces.load import load_trace
from localfa.traces.model import Trace

if TYPE_CHECKING:
    from localfa.methods.runner import Job

__all__ = ["Diagnosis", "Trace", "bench", "diagnose", "diagnose_iter", "load_trace", "make_engine"]

TraceLike = Trace | str | Path


def _as_trace(item: TraceLike) -> Trace:
    return item if isinstance(item, Trace) else load_trace(item)


class _EngineScope:
    """An engine for one call: built here (and closed after) unless the caller passed one."""

    def __init__(self, engine: Engine | EngineOptions | str | None, engine_options: dict[str, Any]) -> None:
        self.given = engine if not isinstance(engine, (str, EngineOptions)) and engine is not None else None
        if isinstance(engine, EngineOptions):
            self.options = engine
        else:
            self.options = EngineOptions(engine=engine if isinstance(engine, str) else None, **engine_options)
        self.engine: Engine | None = None

    def __enter__(self) -> Engine:
        self.engine = self.given or build_engine(self.options)
        return self.engine

    def __exit__(self, *exc: Any) -> None:
        if self.given is None and self.engine is not None:
            self.engine.close()


def diagnose_iter(
    engine: Engine,
    method: str | MethodSpec | BaseMethod,
    traces: Sequence[Trace],
    *,
    seed: int = 0,
    budget: str | None = None,
    concurrency: int = 8,
    wrap: Callable[[Job], Job] | None = None,
) -> Iterator[tuple[int, Diagnosis]]:
    """(index in `traces`, diagnosis) as each trace finishes, all run concurrently on `engine`.

    `wrap` may replace each job before it runs (the CLI's live progress watches them this way).
    """
    from localfa.methods.runner import method_job, run_jobs

    chosen = method if isinstance(method, BaseMethod) else get_method(method)
    jobs = [method_job(engine, chosen, MethodContext(t, seed=seed, budget=budget), key=str(i)) for i, t in enumerate(traces)]
    if wrap is not None:
        jobs = [wrap(j) for j in jobs]
    for key, diag in run_jobs(engine, jobs, concurrency=concurrency):
        yield int(key), diag


@overload
def diagnose(traces: TraceLike, method: str | MethodSpec = ..., **kwargs: Any) -> Diagnosis: ...
@overload
def diagnose(traces: Sequence[TraceLike], method: str | MethodSpec = ..., **kwargs: Any) -> list[Diagnosis]: ...


def diagnose(
    traces: TraceLike | Sequence[TraceLike],
    method: str | MethodSpec = DEFAULT_METHOD,
    *,
    engine: Engine | EngineOptions | str | None = None,
    seed: int = 0,
    budget: str | None = None,
    concurrency: int = 8,
    on_result: Callable[[Diagnosis], None] | None = None,
    **engine_options: Any,
) -> Diagnosis | list[Diagnosis]:
    """Diagnose one trace (returns a `Diagnosis`) or many (a list, in input order).

    Traces may be `Trace` objects or file paths. A trace that fails gets a Diagnosis with `error`
    set; the others are still diagnosed. `engine_options` are `EngineOptions` fields (model,
    profile, base_urls, api_key, cache_dir, max_model_len) used when `engine` is not an engine.
    """
    items: Sequence[TraceLike] = [traces] if isinstance(traces, (Trace, str, Path)) else traces  # type: ignore[list-item]
    single = len(items) == 1 and items[0] is traces
    loaded = [_as_trace(t) for t in items]
    scoring = only_scoring([method])
    results: list[Diagnosis | None] = [None] * len(loaded)
    with _EngineScope(engine, {"scoring_only": scoring, **engine_options}) as eng:
        for i, diag in diagnose_iter(eng, method, loaded, seed=seed, budget=budget, concurrency=concurrency):
            results[i] = diag
            if on_result is not None:
                on_result(diag)
    done = [d for d in results if d is not None]
    return done[0] if single else done


def bench(
    datasets: Sequence[str | Path],
    out: str | Path,
    methods: str | Sequence[str | MethodSpec] = DEFAULT_METHOD,
    *,
    seeds: Sequence[int] = (0,),
    budgets: Sequence[str] | None = None,
    limit: int | None = None,
    engine: Engine | EngineOptions | str | None = None,
    concurrency: int = 16,
    force: bool = False,
    progress: bool = False,
    **engine_options: Any,
) -> Any:
    """A resumable sweep (traces x methods x budgets x seeds) into the run directory `out`.

    Returns the sweep's result (counts and the records written); re-running resumes. A trace file
    that cannot be read is an error record per unit it would have had, as with `localfa bench`
    (a `TraceError` only when no file can be read).
    """
    from localfa.bench.sweep import load_traces, run_sweep
    from localfa.bench.units import Unreadable
    from localfa.methods.registry import parse_methods

    if isinstance(methods, str):
        specs = parse_methods(methods)
    else:
        specs = [m if isinstance(m, MethodSpec) else MethodSpec.parse(m) for m in methods]
    scoring = only_scoring(specs)
    unreadable: list[Unreadable] = []
    traces = load_traces([str(d) for d in datasets], limit=limit, unreadable=unreadable)
    if not traces and unreadable:
        raise unreadable[0].error
    with _EngineScope(engine, {"scoring_only": scoring, **engine_options}) as eng:
        return run_sweep(
            Path(out),
            traces,
            specs,
            list(seeds),
            eng,
            list(budgets) if budgets else None,
            concurrency=concurrency,
            force=force,
            progress=progress,
            unreadable=unreadable,
        )
