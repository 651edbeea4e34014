"""`results.jsonl`: append-only, one record per line, on disk before the next one starts.

Every record is written with a single `write` of ``json + "\\n"``, flushed and fsynced. A process
killed mid-write (SIGKILL) can only leave a partial *last* line without its newline; opening the
store for writing cuts that fragment off, so the next record starts on a clean line. Records are
keyed by (trace, method, budget, seed): a key already in the file is never written again. A lock
file keeps two sweeps from appending to the same run at once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from localfa.errors import LocatedError

RESULTS = "results.jsonl"
LOCK = ".sweep.lock"

Key = tuple[str, str, str, int]


class StoreError(LocatedError):
    """A results file that cannot be used; str = "path: message"."""


def record_key(record: dict[str, Any]) -> Key:
    """The identity of a record: (trace id, method label, budget label, seed)."""
    return (str(record["trace"]), str(record["method"]), str(record.get("budget") or "none"), int(record["seed"]))


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every complete record of a results file (a partial last line is ignored).

    A damaged line anywhere else is an error naming the line. A key seen twice keeps its first
    record (the file is append-only, so the first one is the one that was finished first).
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    records, _ = _parse(data, p)
    return records


def _parse(data: bytes, path: Path) -> tuple[list[dict[str, Any]], int]:
    """Records and the byte length of the complete part (up to the last good newline)."""
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    complete = data[:end]  # a partial last line (after the last newline) is not a record
    records: list[dict[str, Any]] = []
    seen: set[Key] = set()
    good_end = 0
    offset = 0
    lines = complete.split(b"\n")[:-1] if complete else []
    for lineno, raw in enumerate(lines, start=1):
        line_end = offset + len(raw) + 1
        offset = line_end
        if not raw.strip():
            good_end = line_end
            continue
        try:
            rec = json.loads(raw)
            key = record_key(rec)
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise StoreError(path, f"line {lineno} is not a result record ({type(exc).__name__}: {exc}); "
                                   "fix or remove that line to resume") from None
        good_end = line_end
        if key in seen:
            continue
        seen.add(key)
        records.append(rec)
    return records, good_end


class ResultStore:
    """The results file of one run directory, open for appending."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / RESULTS
        self._fh: Any = None
        self._lock_fh: Any = None
        self.records: list[dict[str, Any]] = []
        self.keys: set[Key] = set()
        self.repaired_bytes = 0

    def open(self) -> "ResultStore":
        """Lock the run, read what is finished, cut a partial last line, open for append."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        self.records, good_end = _parse(data, self.path)
        self.keys = {record_key(r) for r in self.records}
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

        self._lock_fh = open(self.run_dir / LOCK, "a+")
        try:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_fh.close()
            self._lock_fh = None
            raise StoreError(self.run_dir, "another sweep is writing to this run directory; wait for it or use another --out") from None

    def __contains__(self, key: Key) -> bool:
        return key in self.keys

    def append(self, record: dict[str, Any]) -> bool:
        """Write one record durably; False (and nothing written) when its key is already there."""
        key = record_key(record)
        if key in self.keys:
            return False
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        self._fh.write(line.encode("utf-8"))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.keys.add(key)
        self.records.append(record)
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

    def __iter__(self) -> Iterator[dict[str, Any]]:
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
