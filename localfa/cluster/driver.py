"""The distributed sweep's driver: the one process that owns the run directory.

Whatever runs the units (this process's own engine, or engine workers on a Ray cluster: an
`Executor`), the driver alone plans the units, checks and writes the manifest, appends every
finished record to the results file and shows the progress bar. It resumes like `run_sweep`
(killed even with SIGKILL, the same command skips finished keys) because it uses the same store,
the same unit keys and the same resume filter. With a `Shard`, only that shard's units run and
they go to the shard's own results file.
"""

from __future__ import annotations

import fcntl
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from localfa.bench.store import RESULTS, ResultStore
from localfa.bench.sweep import SweepResult, _Progress, check_sweep_args, prepare_manifest
from localfa.cluster.plan import Unit, build_methods, make_record, plan_units, select_todo, sweep_manifest, unit_job
from localfa.cluster.shard import Shard
from localfa.methods.registry import MethodSpec
from localfa.methods.runner import run_jobs
from localfa.results import ResultRecord, trace_digest
from localfa.traces.model import Trace


class Executor(Protocol):
    """What runs the units: started once, then handed the units left to do."""

    engine: Any  # has describe() and model_info, for the manifest

    def start(self, run_dir: Path | None = None) -> None: ...

    def describe(self) -> dict[str, Any] | None: ...

    def run(self, todo: list[Unit], concurrency: int) -> Iterator[tuple[int, ResultRecord]]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """This process's engine, exactly as `run_sweep` runs it (used by `--shard` without `--ray`)."""

    def __init__(self, engine: Any, specs: list[MethodSpec]) -> None:
        self.engine = engine
        self._built = build_methods(specs)

    def start(self, run_dir: Path | None = None) -> None:
        pass

    def describe(self) -> dict[str, Any] | None:
        return None

    def run(self, todo: list[Unit], concurrency: int) -> Iterator[tuple[int, ResultRecord]]:
        digests = {u.trace.id: trace_digest(u.trace) for u in todo}
        jobs = [unit_job(self.engine, self._built[u.spec.label], u, key=str(i)) for i, u in enumerate(todo)]
        for key, diag in run_jobs(self.engine, jobs, concurrency=concurrency):
            unit = todo[int(key)]
            yield int(key), make_record(diag, unit, digests[unit.trace.id])

    def close(self) -> None:
        pass


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _ManifestLock:
    """Shards of one run start together (a Slurm array): one at a time reads and extends the manifest."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".manifest.lock"
        self._fh: Any = None

    def __enter__(self) -> "_ManifestLock":
        self._fh = open(self.path, "a+")
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._fh.close()


def run_units_sweep(
    run_dir: str | Path,
    traces: list[Trace],
    specs: list[MethodSpec],
    seeds: list[int],
    executor: Executor,
    budgets: list[str] | None = None,
    *,
    shard: Shard | None = None,
    concurrency: int = 8,
    force: bool = False,
    retry_errors: bool = False,
    progress: bool = True,
    manifest_extra: dict[str, Any] | None = None,
    say: Callable[[str], None] = _stderr,
) -> SweepResult:
    """Run every unit (of `shard`, if given) without a final record in the run, on `executor`."""
    run_dir = Path(run_dir)
    budgets = check_sweep_args(budgets, concurrency)
    built = build_methods(specs)
    result = SweepResult(run_dir)
    store = ResultStore(run_dir, shard.results_name if shard else RESULTS)
    store.open()  # lock first: no engine starts for a run another process is writing
    try:
        executor.start(run_dir)
        started = time.perf_counter()
        extra = dict(manifest_extra or {})
        if executor.describe() is not None:
            extra["cluster"] = executor.describe()
        if shard is not None:
            extra["shard"] = shard.label
        manifest = sweep_manifest(executor.engine, specs, built, seeds, budgets, traces, extra)
        with _ManifestLock(run_dir):
            prepare_manifest(run_dir, manifest, force)
        result.repaired_bytes = store.repaired_bytes
        if store.repaired_bytes:
            say(f"localfa: cut a partial last line ({store.repaired_bytes} bytes) from {store.path}")
        units = plan_units(traces, specs, budgets, seeds)
        if shard is not None:
            units = [u for u in units if shard.owns(u.key)]
        todo, retried = select_todo(units, store, force=force, retry_errors=retry_errors)
        result.planned = len(units)
        result.skipped = len(units) - len(todo)
        result.retried = retried
        if result.skipped or retried:
            say(
                f"localfa: resuming {run_dir}: {result.skipped} of {result.planned} records already done"
                + (f", {retried} failed records to run again" if retried else "")
            )
        planned = {u.key for u in units}
        finished = [r for r in store.records if r.key in planned and r.is_final(retry_errors)]
        with _Progress(progress, total=len(units), done=result.skipped, records=finished) as bar:
            for idx, rec in executor.run(todo, concurrency):
                if store.append(rec, replace=todo[idx].key in store):
                    result.written += 1
                    result.records.append(rec)
                    result.errors += int(bool(rec.error))
                bar.advance(rec)
        result.wall_s = round(time.perf_counter() - started, 3)
    finally:
        try:
            executor.close()
        finally:
            store.close()
    return result
