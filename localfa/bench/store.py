"""`results.jsonl`: append-only, one `ResultRecord` per line, on disk before the next one starts.

Every record is written with a single `write` of ``json + "\\n"``, flushed and fsynced. A process
killed mid-write (SIGKILL) can only leave a partial *last* line without its newline; opening the
store for writing cuts that fragment off, so the next record starts on a clean line. Records are
keyed by (trace, method, budget, seed). A key is written once, except that a sweep may write a
new record for a key whose record failed (a retried error, see `ResultRecord.is_final`); when a
key appears on several lines the last one is the record. A lock file keeps two sweeps from
appending to the same run at once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from localfa.errors import LocatedError
from localfa.results import Key, ResultRecord

RESULTS = "results.jsonl"
LOCK = ".sweep.lock"
SHARD_RESULTS = "results.shard-*-of-*.jsonl"  # `localfa bench --shard I/N` (localfa.cluster.shard)


class StoreError(LocatedError):
    """A results file that cannot be used; str = "path: message"."""


def record_key(record: ResultRecord) -> Key:
    """The identity of a record: (trace id, method label, budget label, seed)."""
    return record.key


def read_records(path: str | Path) -> list[ResultRecord]:
    """Every complete record of a results file (a partial last line is ignored).

    A damaged line anywhere else is an error naming the line. A key seen twice keeps its last
    record (a retried error supersedes the failure), at the position of its first.
    """
    p = Path(path)
    if not p.exists():
        return []
    records, _ = _parse(p.read_bytes(), p)
    return list(records.values())


def results_files(run_dir: str | Path) -> list[Path]:
    """Every results file of a run: results.jsonl first, then the shard files (`--shard I/N`) in name order."""
    run = Path(run_dir)
    main = [run / RESULTS] if (run / RESULTS).exists() else []
    return main + sorted(run.glob(SHARD_RESULTS))


def read_run_records(run_dir: str | Path) -> list[ResultRecord]:
    """The records of all results files of a run; a key in several files keeps its last record."""
    merged: dict[Key, ResultRecord] = {}
    for f in results_files(run_dir):
        merged.update(_parse(f.read_bytes(), f)[0])
    return list(merged.values())


def _parse(data: bytes, path: Path) -> tuple[dict[Key, ResultRecord], int]:
    """Records by key and the byte length of the complete part (up to the last good newline)."""
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
        except (UnicodeDecodeError, TypeError, ValueError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                path, f"line {lineno} is not a result record ({type(exc).__name__}: {first}); fix or remove that line to resume"
            ) from None
        good_end = offset
        records[rec.key] = rec
    return records, good_end


class ResultStore:
    """The results file of one run directory, open for appending."""

    def __init__(self, run_dir: str | Path, name: str = RESULTS) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / name  # a shard writes its own file (localfa.cluster.shard)
        self._fh: Any = None
        self._lock_fh: Any = None
        self._by_key: dict[Key, ResultRecord] = {}
        self.repaired_bytes = 0

    @property
    def records(self) -> list[ResultRecord]:
        """The current record of every key, in the order keys first appeared."""
        return list(self._by_key.values())

    def open(self) -> "ResultStore":
        """Lock the run, read what is finished, cut a partial last line, open for append."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        own, good_end = _parse(data, self.path)
        others = [f for f in results_files(self.run_dir) if f != self.path]  # shards of the same run
        self._by_key = {k: r for f in others for k, r in _parse(f.read_bytes(), f)[0].items()}
        self._by_key.update(own)
        if good_end < len(data):
            self.repaired_bytes = len(data) - good_end
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())
        self._fh = open(self.path, "ab")
        if created:
            _fsync_dir(self.run_dir)
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

    def get(self, key: Key) -> ResultRecord | None:
        return self._by_key.get(key)

    def append(self, record: ResultRecord, replace: bool = False) -> bool:
        """Write one record durably; False (nothing written) when its key is there and not `replace`."""
        key = record.key
        if key in self._by_key and not replace:
            return False
        self._fh.write(record.to_line().encode("utf-8"))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._by_key[key] = record
        return True

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._lock_fh is not None:
            self._lock_fh.close()  # closing releases the flock
            self._lock_fh = None

    def __enter__(self) -> "ResultStore":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[ResultRecord]:
        return iter(self.records)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
