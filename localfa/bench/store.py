"""`results.jsonl`: append-only, one `ResultRecord` per line, written before the next one starts.

Every record is written with a single `write` of ``json + "\\n"`` and flushed to the kernel, so a
killed process loses nothing it stored; a background thread fsyncs the file (coalescing records
that arrive while it syncs), so the disk's latency never holds up the sweep, whose in-process
engine would wait on it, and `close` waits for the last fsync. A process
killed mid-write (SIGKILL) can only leave a partial *last* line without its newline; opening the
store for writing cuts that fragment off, so the next record starts on a clean line. Records are
keyed by (trace, method, budget, seed). A key is written once, except that a sweep may write a
new record for a key whose record failed (a retried error, see `ResultRecord.is_final`).

One rule decides which record of a key counts, wherever it is read (resume, `report`, `view`),
whichever file of the run holds it (results.jsonl or a shard's file): a success beats an error;
among equals the latest `finished_at` wins, then the later line (`wins`); and the records of a
trace file that could not be read give way to records of that file read (`drop_repaired`: a file
repaired since, whatever id it now has). A lock file keeps two
sweeps from appending to the same file at once. An open store keeps a small summary of each
key (`Kept`), not the records, so its memory stays small however large the sweep.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Protocol

from localfa.durable import fsync_dir, may_pass
from localfa.errors import LocatedError
from localfa.results import UNREADABLE, Key, ResultRecord, is_final

RESULTS = "results.jsonl"
LOCK = ".sweep.lock"
SHARD_RESULTS = "results.shard-*-of-*.jsonl"  # `localfa bench --shard I/N` (localfa.bench.shard)


class StoreError(LocatedError):
    """A results file that cannot be used; str = "path: message"."""


class StoreWriteError(StoreError):
    """A record that could not be written (disk full, I/O error): the run stops there, and the
    same command resumes it once the cause is gone."""

    @classmethod
    def of(cls, path: Path, exc: OSError) -> "StoreWriteError":
        again = (
            "run the same command again to resume" if may_pass(exc) else "make the run folder writable (or give another --out) to resume"
        )
        return cls(path, f"cannot write: {exc.strerror or exc}; the records before it are kept, {again}")


def record_key(record: ResultRecord) -> Key:
    """The identity of a record: (trace id, method label, budget label, seed)."""
    return record.key


class _Outcome(Protocol):
    error: str | None
    finished_at: str | None
    taxonomy: str | None


def _when(stamp: str | None) -> float:
    """`finished_at` as a POSIX time (records written in other time zones compare right); -inf if absent."""
    if not stamp:
        return float("-inf")
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return float("-inf")


def wins(new: _Outcome, old: _Outcome) -> bool:
    """Whether `new` (read or written after `old`) is the record of their key: a success beats
    an error; between two errors the later one (a retry's error is news, whatever a skewed clock
    stamped on the older one); between two successes the later `finished_at`, and at equal
    times the categorised one (the categorise pass appends its copy with the original's time to
    results.jsonl, which is read before a shard's file holding the original), else the later one."""
    if bool(new.error) != bool(old.error):
        return not new.error
    if new.error:
        return True
    a, b = _when(new.finished_at), _when(old.finished_at)
    if a == b and bool(new.taxonomy) != bool(old.taxonomy):
        return bool(new.taxonomy)
    return a >= b


@dataclass(slots=True)
class Kept:
    """What a sweep needs to know of a key's record: is it final, whose trace, its score."""

    error: str | None
    error_kind: str | None
    finished_at: str | None
    trace_sha256: str | None
    source: str
    step_score: float | None
    taxonomy: str | None = None

    @classmethod
    def of(cls, record: ResultRecord) -> "Kept":
        from localfa.bench.metrics import score_record

        error = record.error.splitlines()[0][:200] if record.error else None
        return cls(
            error, record.error_kind, record.finished_at, record.trace_sha256, record.source, score_record(record)["step"], record.taxonomy
        )

    def is_final(self, retry_errors: bool = False) -> bool:
        """Whether a resumed sweep keeps this record (False: run its unit again)."""
        return is_final(self.error, self.error_kind, retry_errors)

    @property
    def never_read(self) -> bool:
        """The record of a trace file that could not be read (`ResultRecord.unreadable`)."""
        return self.error_kind == UNREADABLE


def read_records(path: str | Path) -> list[ResultRecord]:
    """Every complete record of a results file (a partial last line is ignored).

    A damaged line anywhere else is an error naming the line. A key seen twice keeps the record
    that `wins`, at the position of its first line.
    """
    p = Path(path)
    if not p.exists():
        return []
    records, _ = _parse(p.read_bytes(), p)
    drop_repaired(records)
    return list(records.values())


def results_files(run_dir: str | Path) -> list[Path]:
    """Every results file of a run: results.jsonl first, then the shard files (`--shard I/N`) in name order."""
    run = Path(run_dir)
    main = [run / RESULTS] if (run / RESULTS).exists() else []
    return main + sorted(run.glob(SHARD_RESULTS))


def keep_winner(records: dict[Key, ResultRecord], key: Key, rec: ResultRecord) -> None:
    """Put `rec` under `key` unless the record already there `wins` over it."""
    if key not in records or wins(rec, records[key]):
        records[key] = rec


def drop_repaired(records: dict[Key, ResultRecord]) -> None:
    """Drop the records of a file that could not be read (`ResultRecord.never_read`) that the run
    also holds a record of the file read for (same source, method, budget, seed): the file was
    repaired and run since, maybe under another id than its path (Who&When's importer names
    ``hand-crafted/12.json`` ``whowhen/hand-crafted/12``), so its unit counts once, as read.
    Readers apply it (report, view, a sweep's `records`); an open store keeps every key, so a
    resume never writes them again, even for a file that breaks again after its repair."""
    read = {(r.source, r.method, r.budget, r.seed) for r in records.values() if not r.never_read}
    for key in [k for k, r in records.items() if r.never_read and (r.source, r.method, r.budget, r.seed) in read]:
        del records[key]


def split_superseded(records: list[ResultRecord]) -> tuple[list[ResultRecord], list[ResultRecord]]:
    """(current, superseded): a record is superseded when its trace's content hash differs from
    that of the trace's most recently finished record (the file was edited and the run forced on:
    `localfa.bench.driver.select_todo`); such a record was scored against a label that is gone."""
    latest: dict[str, tuple[float, str]] = {}
    for r in records:
        if r.trace_sha256 and (r.trace not in latest or _when(r.finished_at) >= latest[r.trace][0]):
            latest[r.trace] = (_when(r.finished_at), r.trace_sha256)
    current: list[ResultRecord] = []
    old: list[ResultRecord] = []
    for r in records:
        (old if r.trace_sha256 and latest[r.trace][1] != r.trace_sha256 else current).append(r)
    return current, old


def read_run_records(run_dir: str | Path) -> list[ResultRecord]:
    """The records of all results files of a run, one per key: the one that `wins`."""
    merged: dict[Key, ResultRecord] = {}
    for f in results_files(run_dir):
        for key, rec in _parse(f.read_bytes(), f)[0].items():
            keep_winner(merged, key, rec)
    drop_repaired(merged)
    return list(merged.values())


def _parse(data: bytes, path: Path) -> tuple[dict[Key, ResultRecord], int]:
    """Records by key (the one that `wins`) and the byte length of the complete part (up to the
    last good newline)."""
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    complete = data[:end]  # a partial last line (after the last newline) is not a record
    records: dict[Key, ResultRecord] = {}
    good_end = 0
    offset = 0
    lines = complete.split(b"\n")[:-1] if complete else []
    for lineno, raw in enumerate(lines, start=1):
        offset += len(raw) + 1
        if not raw.strip():
            good_end = offset
            continue
        try:
            rec = ResultRecord.from_line(raw)
        except (UnicodeDecodeError, TypeError, ValueError, RecursionError) as exc:  # a forged line too
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                path, f"line {lineno} is not a result record ({type(exc).__name__}: {first}); fix or remove that line to resume"
            ) from None
        good_end = offset
        keep_winner(records, rec.key, rec)
    return records, good_end


class ResultStore:
    """The results file of one run directory, open for appending."""

    def __init__(self, run_dir: str | Path, name: str = RESULTS) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / name  # a shard writes its own file (localfa.bench.shard)
        self._fh: Any = None
        self._syncer: Any = None
        self._lock_fh: Any = None
        self._by_key: dict[Key, Kept] = {}
        self.repaired_bytes = 0

    def items(self) -> Iterator[tuple[Key, Kept]]:
        """(key, what is kept of its record) for every key, in the order keys first appeared."""
        return iter(self._by_key.items())

    def __len__(self) -> int:
        return len(self._by_key)

    def open(self) -> "ResultStore":
        """Lock the run, read what is finished, cut a partial last line, open for append."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        own, good_end = _parse(data, self.path)
        merged: dict[Key, ResultRecord] = {}
        for f in results_files(self.run_dir):  # every file of the run (shards too): one rule decides
            for key, rec in (own if f == self.path else _parse(f.read_bytes(), f)[0]).items():
                keep_winner(merged, key, rec)
        for key, rec in own.items():  # a new file (not yet in results_files)
            merged.setdefault(key, rec)
        self._by_key = {k: Kept.of(r) for k, r in merged.items()}
        del merged, own
        if good_end < len(data):
            self.repaired_bytes = len(data) - good_end
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())
        self._fh = open(self.path, "ab")
        self._syncer = _Syncer(self._fh.fileno(), self.path)
        if created:
            fsync_dir(self.run_dir)
        return self

    def _lock(self) -> None:
        import fcntl

        self._lock_fh = open(self.run_dir / (LOCK if self.path.name == RESULTS else f".{self.path.name}.lock"), "a+")
        try:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_fh.close()
            self._lock_fh = None
            raise StoreError(self.run_dir, "another sweep is writing to this run directory; wait for it or use another --out") from None

    def __contains__(self, key: Key) -> bool:
        return key in self._by_key

    def get(self, key: Key) -> Kept | None:
        return self._by_key.get(key)

    def append(self, record: ResultRecord, replace: bool = False) -> bool:
        """Write one record durably; False (nothing written) when its key is there and not `replace`."""
        key = record.key
        if key in self._by_key and not replace:
            return False
        try:
            self._syncer.check()
            # a method asked for its transcript (``safari:transcript=true``): the sweep keeps it too
            self._fh.write(record.to_line(with_transcript=record.transcript is not None).encode("utf-8"))
            self._fh.flush()
        except OSError as exc:
            raise StoreWriteError.of(self.path, exc) from None
        self._syncer.request()
        kept = Kept.of(record)
        old = self._by_key.get(key)
        if old is None or wins(kept, old):
            self._by_key[key] = kept
        return True

    def close(self) -> None:
        try:
            if self._fh is not None:
                try:
                    self._syncer.close()  # the last fsync; raises if one failed
                except OSError as exc:
                    raise StoreWriteError.of(self.path, exc) from None
                finally:
                    try:
                        self._fh.close()  # a buffered write may still fail here
                    except OSError:
                        pass
                    self._fh = None
        finally:
            if self._lock_fh is not None:
                self._lock_fh.close()  # closing releases the flock
                self._lock_fh = None

    def __enter__(self) -> "ResultStore":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Syncer:
    """fsyncs one open file on its own thread when asked, coalescing requests (os.fsync releases
    the GIL). A failed fsync is raised by the store's next `append` or its `close`."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self._path = path
        self._wanted = threading.Event()
        self._stopping = False
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="localfa-fsync", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wanted.set()

    def check(self) -> None:
        if self._error is not None:
            raise StoreError(self._path, f"cannot write the results to disk: {self._error}")

    def close(self) -> None:
        """Wait for an fsync of everything written so far; raise if one failed."""
        self._stopping = True
        self._wanted.set()
        self._thread.join()
        self.check()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            stopping = self._stopping  # read before syncing: a write before close() is covered
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._error = self._error or exc
            if stopping:
                return
