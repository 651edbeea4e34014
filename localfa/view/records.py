"""What a page shows: diagnosis records, each with the trace it diagnosed when that can be read.

Input is a results file (`localfa diagnose --out`, or a sweep's `results.jsonl`) or a run
directory (its results.jsonl and shard files, read by the one reader `report` and resume use).
A record names its trace file in `source`, but a results file is input like any other and may
be hostile: a `source` is opened only when it is one of the run's own trace files (as its manifest
lists them) or lies under a folder the user names (`TraceFiles`), never because a record says so.
A trace that cannot be read (moved, deleted, not allowed) leaves its records on the page with a
note, without a timeline: the verdict and the method's path are still worth seeing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from localfa.errors import LocatedError
from localfa.traces.model import Trace

if TYPE_CHECKING:
    from localfa.results import ResultRecord


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
    return [_shown(r) for r in records]


def _shown(record: ResultRecord) -> dict[str, Any]:
    """The record as the page's dict; one whose details cannot be written back (nested past the
    serialiser's depth: a forged line) is shown by its identity and why, never ends the page."""
    try:
        return dict(record.record(with_transcript=True))
    except (ValueError, RecursionError) as exc:
        what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {
            "trace": record.trace,
            "source": record.source,
            "method": record.method,
            "seed": record.seed,
            "error": f"this record cannot be shown: {what}",
        }


@dataclass(frozen=True)
class TraceFiles:
    """The trace files a page may open: the run's own (`files`, as its manifest lists them) and
    any file under the folders the user named (`folders`); both resolved, links followed."""

    files: frozenset[Path] = frozenset()
    folders: tuple[Path, ...] = ()
    base: Path | None = None  # where a relative `source` is also looked for (the results' folder)

    @classmethod
    def of_run(cls, results: Path, folders: Iterable[str | Path] = ()) -> "TraceFiles":
        """The trace files of the run behind `results` (a run directory or a results file) by
        its manifest (a sweep's ``manifest.json``, a ``diagnose --out`` file's ``FILE.manifest.json``),
        plus `folders`."""
        base = results if results.is_dir() else results.parent
        manifests = [results / "manifest.json"] if results.is_dir() else [Path(f"{results}.manifest.json"), base / "manifest.json"]
        files: set[Path] = set()
        for m in manifests:
            for name in _listed_trace_files(m):
                files.update(_resolved(c) for c in (Path(name), base / name))
        return cls(frozenset(files), tuple(_resolved(Path(f)) for f in folders), base)

    def allows(self, path: Path) -> bool:
        real = _resolved(path)
        return real in self.files or any(real.is_relative_to(d) for d in self.folders)

    def root_of(self, path: Path) -> Path:
        """The folder given with --traces that holds `path` (a harness run's reports may lie
        anywhere under it), else the file's own folder."""
        real = _resolved(path)
        return next((d for d in self.folders if real.is_relative_to(d)), path.parent)

    def locate(self, source: str) -> Path:
        """The allowed file `source` names (as given, else under `base`); OSError when none."""
        if not source:
            raise OSError("the record names no trace file")
        candidates = [Path(source)] + ([self.base / source] if self.base is not None and not Path(source).is_absolute() else [])
        for c in candidates:
            if self.allows(c) and c.is_file():
                return c
        raise OSError(
            f"not opened: {source} is not one of this run's trace files (its manifest) nor under a folder given "
            "with --traces; a results file cannot make the page read another file"
        )


def _listed_trace_files(manifest: Path) -> list[str]:
    """The `trace_files` a manifest lists ([] when there is no readable one)."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return []
    listed = data.get("trace_files") if isinstance(data, dict) else None
    return [str(x) for x in listed if isinstance(x, str) and x] if isinstance(listed, list) else []


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a link loop
        return p.absolute()


def group_records(
    records: list[dict[str, Any]], traces: dict[str, Trace] | None = None, readable: TraceFiles | None = None
) -> list[TraceGroup]:
    """Records grouped by trace (first-seen order), each group with its trace loaded once.

    `traces` (id -> Trace) are used as given (`diagnose --html` has them in memory); any other
    trace is read from its record's `source` only where `readable` allows that file (by default
    none: a record never decides which file is opened).
    """
    from localfa.traces.errors import TraceError
    from localfa.traces.load import load_traces
    from localfa.traces.runs import with_harness

    known = dict(traces or {})
    allowed = readable or TraceFiles()
    groups: dict[str, TraceGroup] = {}
    for rec in records:
        tid = str(rec.get("trace"))
        group = groups.get(tid)
        if group is None:
            source = str(rec.get("source") or "")
            trace, problem = known.get(tid), None
            if trace is None:
                try:
                    path = allowed.locate(source)
                    trace = with_harness(_the_run(load_traces(path), tid), allowed.root_of(path), path)  # as the methods saw it
                except TraceError as exc:
                    problem = str(exc)
                except OSError as exc:
                    problem = f"{source}: {exc.strerror or exc}"
            group = groups[tid] = TraceGroup(tid, source, trace, problem=problem)
        group.records.append(rec)
    return list(groups.values())


def _the_run(runs: list[Trace], tid: str) -> Trace:
    """The run a record names in its file: the only one, else (an inspect_ai log of several
    samples) the one whose id the record's ends with."""
    if len(runs) == 1:
        return runs[0]
    found = next((t for t in runs if tid == t.id or tid.endswith("/" + t.id.rsplit("/", 1)[-1])), None)
    if found is None:
        from localfa.traces.errors import TraceError

        raise TraceError(runs[0].source, f"none of its {len(runs)} runs is {tid!r}")
    return found
