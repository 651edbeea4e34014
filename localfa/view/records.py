"""What a page shows: diagnosis records, each with the trace it diagnosed when that can be read.

Input is a results file (`localfa diagnose --out`, or a sweep's `results.jsonl`) or a run
directory (its results.jsonl and shard files, read by the one reader `report` and resume use).
A record names its trace file in `source`, but a results file is input like any other and may
be hostile, and so is the run folder around it (its manifest too). A file is opened when it lies
under a folder the user names (`TraceFiles`, ``--traces``), or when the run folder names it (one of
its manifest's trace files) and it holds the very trace its records were made on: its
`trace_digest` is a record's ``trace_sha256``. A forged manifest can then name no file whose
content its forger did not already have. A trace that cannot be read (moved, deleted, not
allowed) leaves its records on the page with a note, without a timeline: the verdict and the
method's path are still worth seeing.

A trace file edited since its diagnoses were made (under a folder the user names) is shown as it
is now, and the page says which diagnoses were made on other content (`TraceGroup.changed`), as
`view` does on stderr: `report` scores them as they were made.
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
    changed: list[int] = field(default_factory=list)  # records (positions) made on other content than the file's now


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
        return real in self.files or self.vouched(path)

    def vouched(self, path: Path) -> bool:
        """Under a folder the user named: opened whatever the run folder says of it."""
        real = _resolved(path)
        return any(real.is_relative_to(d) for d in self.folders)

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
    trace is read from its records' `source` only where `readable` allows that file, and a file
    only the run folder names only when it holds the trace diagnosed (see the module doc; by
    default no file: a record never decides which file is opened).
    """
    known = dict(traces or {})
    allowed = readable or TraceFiles()
    groups: dict[str, TraceGroup] = {}
    for rec in records:
        tid = str(rec.get("trace"))
        if tid not in groups:
            groups[tid] = TraceGroup(tid, str(rec.get("source") or ""), known.get(tid))
        groups[tid].records.append(rec)
    for group in groups.values():
        if group.trace is None:
            _read_trace(group, allowed)
    return list(groups.values())


def _read_trace(group: TraceGroup, allowed: TraceFiles) -> None:
    """Load `group`'s trace where `allowed` lets it, and note which records were made on other content."""
    from localfa.traces.errors import TraceError
    from localfa.traces.load import load_traces
    from localfa.traces.runs import with_harness

    source = group.source
    try:
        path = allowed.locate(source)
        trace = _the_run(load_traces(path), group.trace_id)
    except TraceError as exc:
        group.problem = str(exc)
        return
    except OSError as exc:
        group.problem = f"{source}: {exc.strerror or exc}"
        return
    now = trace_digests(trace, path)
    recorded = [(k, str(r["trace_sha256"])) for k, r in enumerate(group.records) if r.get("trace_sha256")]
    changed = [k for k, digest in recorded if digest not in now]
    if len(changed) == len(recorded) and not allowed.vouched(path):
        group.problem = (
            f"not opened: {source} does not hold the trace these diagnoses were made on (no record's trace_sha256 is its "
            "content's), and a run folder can make the page read only the traces it diagnosed; if the file was edited since, "
            "give its folder with --traces to see it as it is now"
        )
        return
    group.trace, group.changed = with_harness(trace, allowed.root_of(path), path, load_traces), changed  # as the methods saw it


def trace_digests(trace: Trace, path: Path) -> set[str]:
    """The `trace_digest`s a sweep may have recorded for the run `trace` read from `path`: as read,
    and with its harness's verdict (a sweep adds it, `localfa.traces.runs.with_harness`; a
    SWE-bench run's reports may sit up to two folders above the trajectory)."""
    from localfa.results import trace_digest
    from localfa.traces.runs import with_harness

    out = {trace_digest(trace)}
    for root in [path.parent, *list(path.parents)[1:3]]:
        judged = with_harness(trace, root, path)
        if judged is not trace:
            out.add(trace_digest(judged))
    return out


def changed_note(group: TraceGroup) -> str | None:
    """What to say of a trace shown beside diagnoses made on other content, or None."""
    if not group.changed:
        return None
    n, total = len(group.changed), len(group.records)
    return (
        f"{group.source}: the trace file has changed since {n} of its {total} diagnos{'is' if total == 1 else 'es'} "
        "were made (their trace_sha256 is not its content's): the page shows the file as it is now, "
        "while report scores those diagnoses as they were made"
    )


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
