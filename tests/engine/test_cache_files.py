"""Issue 25.8: one cache file per writer (no SQLite WAL shared between hosts), merged when a run ends."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localfa.engine.cache_files import MAIN, CacheFiles, merge_parts
from localfa.engine.errors import CacheError

WRITER = (  # writes, says so, and keeps its cache open until told to close
    "import sys, time\n"
    "from pathlib import Path\n"
    "from localfa.engine.cache_files import CacheFiles\n"
    "c = CacheFiles(sys.argv[1])\n"
    "c.put_many([(f'{sys.argv[2]}-{i}', {'text': str(i)}) for i in range(50)])\n"
    "Path(sys.argv[1], sys.argv[2] + '.ready').touch()\n"
    "while not Path(sys.argv[1], 'go').exists():\n"
    "    time.sleep(0.05)\n"
    "c.close()\n"
)


def rows(path: Path) -> dict[str, str]:
    db = sqlite3.connect(str(path))
    try:
        return dict(db.execute("SELECT key, body FROM responses").fetchall())
    finally:
        db.close()


def test_each_writer_has_its_own_file_and_the_merge_keeps_everything(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name]) for name in ("a", "b", "c")]
    deadline = time.time() + 120
    while len(list(tmp_path.glob("*.ready"))) < 3 and time.time() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.05)
    parts = sorted(tmp_path.glob("responses.part-*.sqlite"))
    assert len(parts) == 3 and not (tmp_path / MAIN).exists()  # three writers, three files, no shared one
    assert not list(tmp_path.glob("*-shm"))  # no WAL shared memory: safe on NFS
    assert merge_parts(tmp_path) == 0  # their writers hold them
    (tmp_path / "go").touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert merge_parts(tmp_path) == 3
    assert len(rows(tmp_path / MAIN)) == 150 and not list(tmp_path.glob("responses.part-*"))
    reader = CacheFiles(tmp_path)
    try:
        assert reader.get("b-7") == {"text": "7"} and reader.get("nope") is None
    finally:
        reader.close()


def test_a_part_still_being_written_is_not_merged_and_a_newer_answer_wins(tmp_path):
    first = CacheFiles(tmp_path)
    first.put_many([("k", {"text": "old"})])
    first.close()
    merge_parts(tmp_path)
    live = CacheFiles(tmp_path)  # reads the main file, writes its own part
    try:
        assert live.get("k") == {"text": "old"}
        live.put_many([("k", {"text": "fresh"}), ("j", {"text": "1"})])  # an entry re-asked (no longer valid)
        assert live.get("k") == {"text": "fresh"}
        assert merge_parts(tmp_path) == 0  # its writer holds it
        assert rows(tmp_path / MAIN)["k"] == '{"text": "old"}'
    finally:
        live.close()
    assert merge_parts(tmp_path) == 1
    assert rows(tmp_path / MAIN) == {"k": '{"text": "fresh"}', "j": '{"text": "1"}'}


def test_a_reader_keeps_its_snapshot_while_another_merges(tmp_path):
    a = CacheFiles(tmp_path)
    a.put_many([("x", {"v": 1})])
    a.close()
    merge_parts(tmp_path)
    reader = CacheFiles(tmp_path)
    try:
        b = CacheFiles(tmp_path)
        b.put_many([("y", {"v": 2})])
        b.close()
        merge_parts(tmp_path)  # replaces the main file the reader has open
        assert reader.get("x") == {"v": 1}  # no error, no torn read
    finally:
        reader.close()
    assert rows(tmp_path / MAIN).keys() == {"x", "y"}


def test_a_legacy_shared_wal_cache_is_folded_in(tmp_path):
    db = sqlite3.connect(str(tmp_path / MAIN))
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, body TEXT NOT NULL)")
    db.execute("INSERT INTO responses VALUES ('old', '{}')")
    db.commit()
    db.close()
    c = CacheFiles(tmp_path)
    try:
        assert c.get("old") == {}
    finally:
        c.close()
    with open(tmp_path / MAIN, "rb") as fh:
        assert fh.read(20)[18] == 1  # rollback journal now, not WAL


def test_an_unreadable_cache_is_a_cache_error(tmp_path):
    c = CacheFiles(tmp_path)
    c._part.close()  # what a failed disk leaves: every use raises
    with pytest.raises(CacheError, match="cannot read"):
        c.get("k")
    with pytest.raises(CacheError, match="cannot write"):
        c.put_many([("k", {})])


def test_a_sweep_leaves_one_merged_cache_and_replays_it(tmp_path):
    from tests.bench.test_sweep import write_whowhen

    data = write_whowhen(tmp_path / "ww", per_subset=1)
    run = tmp_path / "run"
    args = [sys.executable, "-m", "localfa", "bench", str(data), "--methods", "all-at-once", "--engine", "scripted", "--no-progress"]
    p = subprocess.run([*args, "--out", str(run)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    cache = run / "cache"
    assert sorted(x.name for x in cache.iterdir() if not x.name.startswith(".")) == [MAIN]
    assert len(rows(cache / MAIN)) == 2
