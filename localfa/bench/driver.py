"""The sweep driver: the one process that owns the run directory, whatever runs the units.

An `Executor` runs units: this process's engine (`executors.LocalExecutor`, also for a shard) or
engine workers on a Ray cluster (`ray_executor.RayExecutor`). The driver alone takes the run's
lock (before any engine starts), checks and writes the manifest, plans the units (a `Shard`'s
only, if given), picks what is left to run with the store's one rule (`store.wins`), appends
every finished record to the results file, shows the progress bar, and when the run is over
merges the response-cache files its engines wrote (`localfa.engine.cache_files`). A sweep killed
even with SIGKILL resumes by re-running the same command.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from localfa.bench.progress import Progress
from localfa.bench.run_manifest import ManifestLock, prepare_manifest, sweep_manifest
from localfa.bench.shard import Shard
from localfa.bench.store import RESULTS, Kept, ResultStore, read_run_records
from localfa.bench.units import SweepError, Unit, Unreadable, build_methods, check_sweep_args, plan_units
from localfa.methods.registry import MethodSpec
from localfa.results import Key, ResultRecord, trace_digest
from localfa.terminal import terminal_safe
from localfa.traces.model import Trace


class Executor(Protocol):
    """What runs the units: started once (after the run's lock is taken), then handed the units left."""

    engine: Any  # has describe() and model_info, for the manifest (set by `start`)

    def start(self, run_dir: Path | None = None) -> None: ...

    def describe(self) -> dict[str, Any] | None: ...

    def run(self, todo: list[Unit], concurrency: int) -> Iterator[tuple[int, ResultRecord]]: ...

    def close(self) -> None: ...


@dataclass
class SweepResult:
    """Counts of one sweep command; `records` reads back the records it wrote (never held in memory)."""

    run_dir: Path
    planned: int = 0
    skipped: int = 0
    written: int = 0
    errors: int = 0
    retried: int = 0
    failed: int = 0  # planned units whose record in the run (new or kept) is an error: the command's exit status
    repaired_bytes: int = 0
    wall_s: float = 0.0
    written_keys: list[Key] = field(default_factory=list)

    @cached_property
    def records(self) -> list[ResultRecord]:
        """The records this sweep wrote (as the run's reader decides them), in the order written;
        read from disk on first use, after the sweep (it never holds them while it runs)."""
        by_key = {r.key: r for r in read_run_records(self.run_dir)}
        return [by_key[k] for k in dict.fromkeys(self.written_keys) if k in by_key]


def _stderr(msg: str) -> None:
    print(terminal_safe(msg), file=sys.stderr, flush=True)


def _collision(unit: Unit, old: Kept, digest: str) -> str | None:
    """Why `old` (already in the run under `unit`'s key) is not a record of `unit`'s trace, or None."""
    if old.trace_sha256 is None or old.trace_sha256 == digest:
        return None
    same = old.source == unit.trace.source
    what = "was changed since" if same else f"{unit.trace.source} has the same id as {old.source}, whose"
    return f"trace id {unit.trace.id!r}: {what} records were written into this run (different content); use a new --out" + (
        ", or --force to run it again and supersede them" if same else ", or give the two files distinct names"
    )


def stored_contents(store: ResultStore) -> dict[str, dict[str, Kept]]:
    """Trace id -> {content hash: a record of it} over every record in the run (any seed,
    method or budget): what each trace said when its records were written."""
    out: dict[str, dict[str, Kept]] = {}
    for key, kept in store.items():
        if kept.trace_sha256:
            out.setdefault(key[0], {}).setdefault(kept.trace_sha256, kept)
    return out


def select_todo(units: list[Unit], store: ResultStore, *, force: bool, retry_errors: bool) -> tuple[list[Unit], int]:
    """(units to run, how many of them re-run a stored record).

    A unit of a trace whose content differs from that of any record of its id in the run (the
    file was edited, or another file has its id) is refused unless `force`, whether or not its own
    key has a record: a new seed must not be scored against a label the run's other records never
    saw. With `force` its stored records are run again; those outside this command's plan stay,
    superseded (`localfa.bench.store.split_superseded`: the report leaves them out and says so).
    """
    contents = stored_contents(store)
    digests: dict[str, str] = {}
    todo: list[Unit] = []
    retried = 0
    for u in units:
        stored = contents.get(u.trace.id)
        digest = None
        if stored:
            digest = digests.get(u.trace.id) or digests.setdefault(u.trace.id, trace_digest(u.trace))
            other = next((k for d, k in stored.items() if d != digest), None)
            clash = _collision(u, other, digest) if other is not None else None
            if clash and not force:
                raise SweepError(store.run_dir, clash)
        old = store.get(u.key)
        if old is None:
            todo.append(u)
            continue
        stale = digest is not None and old.trace_sha256 not in (None, digest)  # forced: run against the new content
        if stale or not old.is_final(retry_errors) or old.never_read:  # never_read: the file reads now (repaired)
            todo.append(u)
            retried += 1
    return todo, retried


def check_unreadable_ids(traces: list[Trace], unreadable: Sequence[Unreadable]) -> None:
    """Refuse an unreadable file whose id (its path under its dataset folder) is also another
    file's: their records would share keys."""
    owner = {t.id: t.source for t in traces}
    for f in unreadable:
        if f.id in owner:
            raise SweepError(
                f.path,
                f"cannot be read, and its id {f.id!r} (its path under {f.root}) is also the id of {owner[f.id]}; "
                "results are keyed by trace id: rename one of the files",
            )
        owner[f.id] = str(f.path)


def write_unreadable(
    store: ResultStore,
    unreadable: Sequence[Unreadable],
    specs: list[MethodSpec],
    budgets: list[str],
    seeds: list[int],
    shard: Shard | None,
    result: SweepResult,
) -> None:
    """The error record of each unit (of `shard`) of each file that could not be read, unless its
    key already has a final record: a resume neither redoes nor repeats them."""
    for f in unreadable:
        for rec in f.records(specs, budgets, seeds):
            if shard is not None and not shard.owns(rec.key):
                continue
            result.planned += 1
            old = store.get(rec.key)
            if old is not None and old.is_final():
                result.skipped += 1
                continue
            store.append(rec, replace=old is not None)
            result.written += 1
            result.errors += 1
            result.written_keys.append(rec.key)


def unreadable_keys(
    unreadable: Sequence[Unreadable], specs: list[MethodSpec], budgets: list[str], seeds: list[int], shard: Shard | None
) -> list[Key]:
    """The keys of the unreadable files' units (of `shard`)."""
    keys = [rec.key for f in unreadable for rec in f.records(specs, budgets, seeds)]
    return [k for k in keys if shard is None or shard.owns(k)]


def count_failed(store: ResultStore, keys: list[Key]) -> int:
    """How many of `keys` hold an error record in the run now (whichever command wrote it)."""
    return sum(1 for k in keys if (kept := store.get(k)) is not None and kept.error)


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
    cache_dir: str | Path | None = None,
    say: Callable[[str], None] = _stderr,
    unreadable: Sequence[Unreadable] = (),
) -> SweepResult:
    """Run every unit (of `shard`, if given) without a final record in the run, on `executor`.

    `unreadable`: trace files that could not be read; each of their units becomes an error record
    (`write_unreadable`) and the sweep goes on with the others.

    `cache_dir`: the response cache the engines wrote to; its per-writer files are merged into
    its main file when the run is over (see `localfa.engine.cache_files`).
    """
    run_dir = Path(run_dir)
    budgets = check_sweep_args(budgets, concurrency)
    built = build_methods(specs)
    check_unreadable_ids(traces, unreadable)
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
        manifest = sweep_manifest(executor.engine, specs, built, seeds, budgets, traces, extra, [str(f.path) for f in unreadable])
        with ManifestLock(run_dir):
            prepare_manifest(run_dir, manifest, force)
        result.repaired_bytes = store.repaired_bytes
        if store.repaired_bytes:
            say(f"localfa: cut a partial last line ({store.repaired_bytes} bytes) from {store.path}")
        units = plan_units(traces, specs, budgets, seeds)
        if shard is not None:
            units = [u for u in units if shard.owns(u.key)]
        todo, retried = select_todo(units, store, force=force, retry_errors=retry_errors)
        write_unreadable(store, unreadable, specs, budgets, seeds, shard, result)
        result.planned += len(units)
        result.skipped += len(units) - len(todo)
        result.retried = retried
        if result.skipped or retried:
            say(
                f"localfa: resuming {run_dir}: {result.skipped} of {result.planned} records already done"
                + (f", {retried} failed records to run again" if retried else "")
            )
        planned = {u.key for u in units}
        finished = [k for key, k in store.items() if key in planned and k.is_final(retry_errors) and not k.never_read]
        del planned
        with Progress(progress, total=len(units), done=len(units) - len(todo), finished=finished) as bar:
            del finished
            for idx, rec in executor.run(todo, concurrency):
                if store.append(rec, replace=todo[idx].key in store):
                    result.written += 1
                    result.written_keys.append(rec.key)
                    result.errors += int(bool(rec.error))
                bar.advance(Kept.of(rec))
        result.wall_s = round(time.perf_counter() - started, 3)
        result.failed = count_failed(store, [u.key for u in units] + unreadable_keys(unreadable, specs, budgets, seeds, shard))
    finally:
        try:
            executor.close()
        finally:
            store.close()
            if cache_dir is not None:
                _merge_cache(Path(cache_dir), say)
    return result


def _merge_cache(cache_dir: Path, say: Callable[[str], None]) -> None:
    """Fold the run's per-writer cache files into the main one; a failure only warns (the parts stay)."""
    from localfa.engine.cache_files import merge_parts

    try:
        merge_parts(cache_dir, say)
    except Exception as exc:  # the records are safe; the parts are merged by the next run
        say(f"localfa: warning: could not merge the response cache files in {cache_dir}: {type(exc).__name__}: {exc}")
