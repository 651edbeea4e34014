"""Where the response cache lives on disk: one file per writer, merged when a run ends.

SQLite's WAL needs shared memory between the processes that use a file, which a shared file
system (NFS, Lustre: where RUN_DIR/cache sits for shards and Ray workers on several hosts) does
not give. So no two processes ever write one file:

- ``responses.sqlite`` is the main file. Engines only read it, opened as immutable, and only a
  merge writes it: into a copy, which then replaces it (`localfa.durable.replacing`), so a reader keeps reading
  the file it opened while another host merges.
- each engine writes its own ``responses.part-HOST-PID-TOKEN.sqlite`` (exclusive locking: no
  shared memory), holding ``….lock`` (flock) while it is open.
- `merge_parts` folds every part whose writer is gone (its lock is free) into the main file,
  under ``.merge.lock``. The sweep driver runs it when a run ends; every engine runs it when it
  opens the cache, so parts left by a killed run are merged by the next one.

A cache that cannot be read or written is that request's engine error (`CacheError`, transient:
a resume runs it again), never the sweep's. A cache file that is damaged (bytes overwritten, a
disk fault) is moved aside as ``NAME.corrupt-TIME`` with a warning naming it, and the run
goes on without its answers (they are asked again; the records are the run's state, not the
cache): the main file when a read from it fails or a merge cannot use it, a part when a merge
cannot read it.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import socket
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from localfa.durable import move_aside, replacing
from localfa.engine.errors import CacheError

MAIN = "responses.sqlite"
PART_GLOB = "responses.part-*.sqlite"
MERGE_LOCK = ".merge.lock"
_SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, body TEXT NOT NULL)"


Warn = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:40] or "host"


class CacheFiles:
    """The cache of one engine: reads its own part, then the main file; writes only its part."""

    def __init__(self, cache_dir: str | Path, warn: Warn = _stderr) -> None:
        self.dir = Path(cache_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._warn = warn
        try:
            merge_parts(self.dir, warn)  # what killed runs left behind
        except CacheError as exc:  # a part that cannot be merged stays for later: never a reason not to start
            warn(f"localfa: warning: {exc}")
        self._lock = threading.Lock()
        name = f"responses.part-{_safe(socket.gethostname())}-{os.getpid()}-{secrets.token_hex(4)}.sqlite"
        self.path = self.dir / MAIN  # what the manifest names: the run's cache
        self.part = self.dir / name
        self._held = _flock(_lock_path(self.part), block=True)
        self._part = sqlite3.connect(str(self.part), check_same_thread=False, timeout=30)
        self._part.execute("PRAGMA locking_mode=EXCLUSIVE")  # one writer, no shared memory: fine on NFS
        self._part.execute("PRAGMA journal_mode=WAL")
        self._part.execute(_SCHEMA)
        self._part.commit()
        self._main = _open_read_only(self.path) if self.path.exists() else None

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with self._lock:
                row = self._part.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
                if row is None and self._main is not None:
                    row = self._main_row(key)
            return json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError) as exc:
            raise CacheError(f"response cache {self.dir}: cannot read: {type(exc).__name__}: {exc}") from exc

    def _main_row(self, key: str) -> Any:
        """The main file's row for `key`; a main file that cannot be read is dropped (every key
        a miss from then on), said once, and moved aside by the merge at the run's end."""
        assert self._main is not None
        try:
            return self._main.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            self._main.close()
            self._main = None
            self._warn(
                f"localfa: warning: response cache {self.path} cannot be read ({exc}); going on without it (its answers are asked again)"
            )
            return None

    def put_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        try:
            with self._lock:
                self._part.executemany("INSERT OR REPLACE INTO responses (key, body) VALUES (?, ?)", [(k, json.dumps(v)) for k, v in items])
                self._part.commit()
        except (sqlite3.Error, OSError) as exc:
            raise CacheError(f"response cache {self.part}: cannot write: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            for db in (self._part, self._main):
                if db is not None:
                    db.close()
            self._main = None
            if self._held is not None:
                self._held.close()  # the part may now be merged
                self._held = None


def _lock_path(part: Path) -> Path:
    return part.with_name(part.name + ".lock")


def _flock(path: Path, block: bool) -> Any:
    """An open file holding an exclusive flock on `path`, or None (not blocking, and it is held)."""
    fh = open(path, "a+")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except OSError:
        fh.close()
        return None
    return fh


def _open_read_only(path: Path) -> sqlite3.Connection:
    """The main file as a snapshot: immutable (no locks, no shared memory); a merge replaces the
    file, never writes into it, so what this connection reads never changes under it."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def merge_parts(cache_dir: str | Path, warn: Warn = _stderr) -> int:
    """Fold every finished part (its writer's lock is free) into the main file; the number merged.

    The main file is rebuilt in a copy and swapped in (`localfa.durable.replacing`), under the merge lock, so
    two hosts merging at once, or an engine reading the main file meanwhile, are safe. When the
    merge fails, the files it used are checked: a damaged one (the main file or a part) is moved
    aside with a warning through `warn` and the merge runs again without it; a part that fails
    for another reason is left where it is and named in the error raised after the others merged.
    """
    root = Path(cache_dir)
    if not root.is_dir():
        return 0
    merge_lock = _flock(root / MERGE_LOCK, block=True)
    held: list[tuple[Path, Any]] = []
    try:
        for part in sorted(root.glob(PART_GLOB), key=lambda p: p.stat().st_mtime):  # oldest first: later answers win
            fh = _flock(_lock_path(part), block=False)
            if fh is not None:
                held.append((part, fh))
        main = root / MAIN
        legacy = main.exists() and (_is_wal(main) or main.with_name(MAIN + "-wal").exists())
        if not held and not legacy:
            return 0
        if legacy:
            try:
                _checkpoint(main)
            except sqlite3.DatabaseError:
                _set_aside_damaged([main], warn)
        parts = [part for part, _ in held]
        try:
            merged, bad = _merge_into(main, parts)
        except sqlite3.DatabaseError:  # the main file itself could not be used
            merged, bad = [], ["main"]
        if bad and _set_aside_damaged([main, *parts], warn):
            merged, bad = _merge_into(main, [p for p in parts if p.exists()])
        for part in merged:
            for leftover in (part, part.with_name(part.name + "-wal"), part.with_name(part.name + "-shm"), _lock_path(part)):
                leftover.unlink(missing_ok=True)
        if bad:
            raise CacheError(f"response cache {root}: could not merge {', '.join(bad)}; left in place")
        return len(merged)
    finally:
        for _, fh in held:
            fh.close()
        merge_lock.close()


def _merge_into(main: Path, parts: list[Path]) -> tuple[list[Path], list[str]]:
    """(parts merged, "name (why)" of each that failed): the main file rebuilt in a copy with every
    part's answers, swapped in whole. An error of the main file itself raises."""
    bad: list[str] = []
    merged: list[Path] = []
    with replacing(main) as tmp:
        if main.exists():
            shutil.copyfile(main, tmp)
        db = sqlite3.connect(str(tmp))
        try:
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute(_SCHEMA)
            db.commit()
            for part in parts:
                try:
                    db.execute("ATTACH DATABASE ? AS part", (str(part),))
                    db.execute("PRAGMA part.locking_mode=EXCLUSIVE")
                    # a part is newer than the main file: its answer replaces one that no longer validated
                    db.execute("INSERT OR REPLACE INTO main.responses SELECT key, body FROM part.responses")
                    db.commit()
                    db.execute("DETACH DATABASE part")
                    merged.append(part)
                except sqlite3.Error as exc:
                    db.rollback()
                    try:
                        db.execute("DETACH DATABASE part")
                    except sqlite3.Error:
                        pass
                    bad.append(f"{part.name} ({exc})")
        finally:
            db.close()
    return merged, bad


def damage(path: Path) -> str | None:
    """What is wrong with an SQLite cache file (SQLite's quick check), or None when it is sound
    or absent. Run only after a merge failed: it reads the whole file."""
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    problems = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return "; ".join(problems[:3]) or None


def _set_aside_damaged(paths: list[Path], warn: Warn) -> bool:
    """Move every damaged file of `paths` aside (``NAME.corrupt-TIME``), with a warning
    naming it; whether any was."""
    moved = False
    for path in paths:
        why = damage(path)
        if why is None:
            continue
        aside = move_aside(path, f"corrupt-{time.strftime('%Y%m%dT%H%M%S')}")  # NAME.corrupt-TIME: out of PART_GLOB's reach
        for extra in ("-wal", "-shm"):
            path.with_name(path.name + extra).unlink(missing_ok=True)
        warn(
            f"localfa: warning: response cache file {path} is damaged ({why}); moved aside to {aside.name}, the run goes on without its answers"
        )
        moved = True
    return moved


def _is_wal(path: Path) -> bool:
    """Whether an SQLite file is in WAL mode (a cache written before per-writer files)."""
    with open(path, "rb") as fh:
        header = fh.read(20)
    return len(header) >= 20 and header[18] == 2


def _checkpoint(path: Path) -> None:
    """Fold a WAL file into its database and leave it in rollback-journal mode."""
    db = sqlite3.connect(str(path), timeout=60)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()
