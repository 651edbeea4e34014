"""What a page shows: diagnosis records, each with the trace it diagnosed when that can be read.

Input is a results file (`localfa diagnose --out`, or a sweep's `results.jsonl`) or a run
directory (its results.jsonl and shard files, read by the one reader `report` and resume use).
A record names its trace file in `source`; the trace is loaded from there once per file. A trace that cannot be read any more (moved, deleted) leaves its records on the
page with a note, without a timeline: the verdict and the method's path are still worth seeing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfa.errors import LocatedError
from localfa.traces.model import Trace


class ViewError(LocatedError):
    """Input the viewer cannot use; str = "path: message"."""


@dataclass
class TraceGroup:
    """One trace and every diagnosis of it, in input order; `trace` None when unreadable."""

    trace_id: str
    source: str
    trace: Trace | None
    records: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None  # why the trace could not be read


def results_path(path: str | Path) -> Path:
    """The results behind `path`: a JSONL file, or a run directory holding results.jsonl and/or
    the shard files of `bench --shard I/N`."""
    from localfa.bench.store import results_files

    p = Path(path)
    if p.is_dir():
        if not results_files(p):
            raise ViewError(p / "results.jsonl", "no results file in this run directory")
    elif not p.exists():
        raise ViewError(p, "no such file or run directory")
    return p


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """One record per (trace, method, budget, seed), decided as resume and `report` decide it
    (`localfa.bench.store.wins`: a retried unit is shown once, by its record that counts), from
    a results file or every results file of a run directory (shards too).

    A damaged line is an error naming it; a partial last line (a sweep killed mid-write) is
    skipped, as the sweep itself does.
    """
    from localfa.bench.store import StoreError, read_records, read_run_records

    p = results_path(path)
    try:
        records = read_run_records(p) if p.is_dir() else read_records(p)
    except StoreError as exc:
        raise ViewError(exc.path, exc.message.replace("result record", "diagnosis record")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ViewError(p, f"cannot read: {exc}") from None
    if not records:
        raise ViewError(p, "no diagnosis records in this file")
    return [r.record(with_transcript=True) for r in records]


def group_records(records: list[dict[str, Any]], traces: dict[str, Trace] | None = None, base: Path | None = None) -> list[TraceGroup]:
    """Records grouped by trace (first-seen order), each group with its trace loaded once.

    `traces` (id -> Trace) are used as given (`diagnose --html` has them in memory); otherwise a
    relative `source` is tried as given, then against `base` (the results file's folder).
    """
    from localfa.traces.errors import TraceError
    from localfa.traces.load import load_trace

    known = dict(traces or {})
    groups: dict[str, TraceGroup] = {}
    for rec in records:
        tid = str(rec.get("trace"))
        group = groups.get(tid)
        if group is None:
            source = str(rec.get("source") or "")
            trace, problem = known.get(tid), None
            if trace is None:
                try:
                    trace = load_trace(_locate(source, base))
                except TraceError as exc:
                    problem = str(exc)
                except OSError as exc:
                    problem = f"{source}: {exc.strerror or exc}"
            group = groups[tid] = TraceGroup(tid, source, trace, problem=problem)
        group.records.append(rec)
    return list(groups.values())


def _locate(source: str, base: Path | None) -> Path:
    p = Path(source)
    if not source:
        raise OSError("the record names no trace file")
    if p.exists() or p.is_absolute() or base is None:
        return p
    return base / p if (base / p).exists() else p
