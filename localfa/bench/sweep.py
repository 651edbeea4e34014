"""Sweeps: traces x methods x budgets x seeds, one durable record each, resumable after a kill.

This module is the entry point (`run_sweep`, `load_traces`, the command line's lists). The
pieces live beside it: `units` (what a unit is and how it runs into its record), `driver` (the
one process that owns RUN_DIR), `executors` (this process's engine), `shard` (`--shard I/N`),
`ray_executor` (engine workers on Ray, plumbing in `localfa.cluster`), `store` (results files
and the one rule deciding which record of a key counts), `run_manifest`, `progress`.

- Records (`localfa.results.ResultRecord`) are keyed by (trace id, method label, budget label,
  seed) and appended to ``RUN_DIR/results.jsonl`` as soon as each is done (see
  `localfa.bench.store`). Re-running the same command skips finished keys, except records that
  failed on an engine error (timeout, connection refused, HTTP 5xx): those run again, and with
  ``retry_errors`` every error record does. A sweep killed with SIGKILL loses at most the records
  that were in flight (and with the response cache, which `localfa bench` keeps in RUN_DIR/cache
  by default, even their finished model calls are replayed, not recomputed).
- Trace ids are distinct per file and never move (`localfa.traces.ids.distinct_ids`); a key
  already in the run for a different trace (another file with the same id) is an error naming
  both files, and a file whose id changed since the run's manifest is refused.
- ``RUN_DIR/manifest.json`` is written at the start. On resume everything that changes answers
  (`localfa.manifest.comparable`: model, backend, prompts, grammars, engine settings such as max
  model length, dtype, structured-outputs backend and vLLM version, chat template, sampling
  defaults), the options of every method and the id of every trace file already in the run
  must match, else the sweep
  refuses (``force=True`` continues anyway and notes it in the manifest). Adding seeds, budgets,
  methods or traces to an existing run is allowed: that only adds records.
- Every trace runs concurrently through `run_jobs`, so the engine sees full batches.
- Each record carries the trace's labels (``label``), so metrics never need the trace files.
- The running accuracy shown while it runs comes from the report's scorer (`score_record`).

Methods are given as ``NAME`` or ``NAME:key=value:key=value`` (e.g.
``all-at-once:with_ground_truth=true``); the canonical spec is the record's `method` label.
Budgets: ``none``, ``25k`` (tokens), ``100000c`` (characters) or ``scale:2`` (SAFARI's fixed
scaling factor: budget = token position of the labelled fault / 2, resolved per trace by the
method from ``ctx.budget``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from localfa.bench.driver import SweepResult, run_units_sweep
from localfa.bench.executors import LocalExecutor
from localfa.bench.run_manifest import MANIFEST  # noqa: F401 (the run's manifest file name)
from localfa.bench.units import SweepError, Unreadable
from localfa.methods.budget import parse_budget
from localfa.methods.registry import MethodOptionError, MethodSpec, get_method, parse_methods  # noqa: F401
from localfa.terminal import terminal_safe
from localfa.traces.errors import TraceError
from localfa.traces.model import Trace

TIMING_FIELDS = ("wall_s", "finished_at")
__all__ = ["SweepError", "SweepResult", "load_traces", "parse_budgets", "parse_seeds", "run_sweep"]


# ---- parsing the command line's lists ----------------------------------------------------------


MAX_SEEDS = 10_000  # a sweep's seeds multiply its units: more is a typo, not a plan


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` or ``0-4`` (inclusive) or a mix; at most `MAX_SEEDS` of them, counted before a
    range is expanded (``0-100000000`` is refused in a line, not a MemoryError)."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1) if not part.startswith("-") else (part, "")
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                if len(seeds) + hi - lo + 1 > MAX_SEEDS:
                    raise OverflowError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except OverflowError:
            raise ValueError(f"seeds {text!r}: at most {MAX_SEEDS:,} seeds in one sweep") from None
        except ValueError:
            raise ValueError(f"seeds {text!r}: use whole numbers such as 0,1,2 or 0-4") from None
        if len(seeds) > MAX_SEEDS:
            raise ValueError(f"seeds {text!r}: at most {MAX_SEEDS:,} seeds in one sweep")
    if not seeds:
        raise ValueError("no seeds given")
    return list(dict.fromkeys(seeds))


def parse_budgets(text: str | None) -> list[str]:
    """Canonical budget labels (``none``, ``25000``, ``100000c``, ``scale:2``), in order, distinct."""
    if text is None or not text.strip():
        return ["none"]
    out = [parse_budget(p.strip()).label for p in text.split(",") if p.strip()]
    return list(dict.fromkeys(out)) or ["none"]


# ---- traces ------------------------------------------------------------------------------------


def load_traces(
    paths: Sequence[str | Path],
    limit: int | None = None,
    skip_bad: bool = False,
    warn: Callable[[str], None] | None = None,
    failed_only: bool = False,
    unreadable: list[Unreadable] | None = None,
    follow_links: bool = False,
    recorded_ids: dict[str, str] | None = None,
) -> list[Trace]:
    """Traces under `paths` in a stable (natural) order, ids distinct per file; `limit` = first N per subset.
    A file keeps the id `recorded_ids` (resolved path -> id: the run's manifest, `recorded_trace_ids`) gives it.

    A "subset" is the trace's own subset (Who&When: algorithm-generated, hand-crafted, whatever
    the folders' case) or else the folder the file sits in, counted separately for each path
    given. Ids are made distinct over every file found before `limit` applies, so a trace keeps
    its id whatever the limit. Files that cannot be read go into `unreadable` when it is given (a
    list), each with an ``error:`` line through `warn`, so a sweep records their units as errors
    (`Unreadable`; such a file counts toward `limit` in the subset of the traces beside it);
    without it they raise `TraceError`, or with `skip_bad` are reported through `warn` and skipped.
    Trials of a harness run (a Harbor job, a SWE-bench run) carry the
    harness's verdict in ``metadata["harness"]``; `failed_only` keeps those it marked failed and
    says through `warn` how many it skipped and why (`localfa.traces.runs.harness_traces`, as diagnose).
    A link inside a folder to a file outside it is skipped with a warning unless `follow_links`.
    """
    from localfa.bench.units import read_trace_file
    from localfa.traces.load import repair_note, trace_files_with_roots
    from localfa.traces.runs import harness_traces

    if limit is not None and limit < 1:
        raise SweepError(None, f"--limit must be at least 1, got {limit}")
    say = warn or _stderr

    def load(f: Path) -> list[Trace]:
        traces = read_trace_file(f)
        for note in filter(None, map(repair_note, traces)):
            say(f"warning: {note}")
        return traces

    bad: list[Unreadable] = []

    def on_error(root: Path, f: Path, exc: TraceError) -> None:
        if unreadable is not None:
            bad.append(Unreadable(root, f, exc))
        elif not skip_bad:
            raise exc
        else:
            say(f"warning: skipping {exc}")

    found = trace_files_with_roots(list(paths), follow_links, say)
    kept = harness_traces(found, load, on_error, [Path(p) for p in paths], failed_only, say, recorded_ids)
    if failed_only:
        bad = [u for u in bad if u.failed_by_harness()]
    out: list[Trace] = []
    for item in within_limit(found, kept, bad, limit):
        if isinstance(item, Trace):
            out.append(item)
        elif unreadable is not None:  # (only then are there any)
            say(f"error: {item.error}")
            unreadable.append(item)
    return out


def within_limit(
    found: list[tuple[Path, Path]], kept: list[tuple[Path, Path, Trace]], bad: list[Unreadable], limit: int | None
) -> list[Trace | Unreadable]:
    """The traces and unreadable files in file order, the first `limit` of each subset (a trace's
    own, else its folder; an unreadable file's is that of the traces in its folder)."""
    order = {f: i for i, (_, f) in enumerate(found)}
    subset = {(r, f.parent): t.subset or str(f.parent) for r, f, t in reversed(kept)}  # the first trace's
    items: list[tuple[int, Path, Path, Trace | Unreadable]] = [(order[f], r, f, t) for r, f, t in kept]
    items += [(order[u.path], u.root, u.path, u) for u in bad]
    counts: dict[tuple[str, str], int] = {}
    out: list[Trace | Unreadable] = []
    for _, root, f, item in sorted(items, key=lambda x: x[0]):
        name = (item.subset or str(f.parent)) if isinstance(item, Trace) else subset.get((root, f.parent), str(f.parent))
        group = (str(root), name)
        if limit is not None and counts.get(group, 0) >= limit:
            continue
        counts[group] = counts.get(group, 0) + 1
        out.append(item)
    return out


def _stderr(msg: str) -> None:
    print(terminal_safe(msg), file=sys.stderr, flush=True)


# ---- the sweep ---------------------------------------------------------------------------------


def run_sweep(
    run_dir: str | Path,
    traces: list[Trace],
    methods: list[MethodSpec],
    seeds: list[int],
    engine: Any,
    budgets: list[str] | None = None,
    **options: Any,
) -> SweepResult:
    """Run every (trace, method, budget, seed) without a final record in RUN_DIR/results.jsonl.

    A record that failed on an engine error is not final (it runs again); with `retry_errors`
    no error record is. `engine` (left open) runs the units, on the same driver a Ray sweep or a
    shard uses, so all of them resume and record alike; `options` are that driver's keywords
    (`concurrency`, `force`, `retry_errors`, `progress`, `manifest_extra`, `cache_dir`, `say`:
    see `localfa.bench.driver.run_units_sweep`).
    """
    return run_units_sweep(run_dir, traces, methods, seeds, LocalExecutor(engine), budgets, **options)
