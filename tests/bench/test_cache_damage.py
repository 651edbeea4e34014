"""A damaged response cache never makes a run unresumable: the damaged file is moved aside with a
warning naming it, and the run goes on from its records (the cache's answers are asked again)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from localfa.engine.cache_files import MAIN, CacheFiles, damage, merge_parts
from tests.bench.test_sweep import write_whowhen

ENV = {**os.environ, "COLUMNS": "400"}


def bench(data: Path, run: Path, seeds: str) -> subprocess.CompletedProcess:
    args = [
        str(data),
        "--out",
        str(run),
        "--methods",
        "all-at-once,binary-search",
        "--seeds",
        seeds,
        "--engine",
        "scripted",
        "--no-progress",
    ]
    return subprocess.run([sys.executable, "-m", "localfa", "bench", *args], capture_output=True, text=True, timeout=300, env=ENV)


def overwrite(path: Path) -> None:
    """Bytes of `path` overwritten every 997 bytes after the header, as a disk fault would."""
    data = bytearray(path.read_bytes())
    for i in range(100, len(data), 997):
        data[i : i + 50] = b"\x00garbage" * 6 + b"xx"
    path.write_bytes(bytes(data))


def test_a_damaged_main_file_is_moved_aside_and_every_later_run_starts(tmp_path):
    data = write_whowhen(tmp_path / "data", per_subset=2)
    run = tmp_path / "run"
    assert bench(data, run, "0").returncode == 0
    main = run / "cache" / MAIN
    overwrite(main)
    assert damage(main)
    resumed = bench(data, run, "0,1")
    assert resumed.returncode == 0, resumed.stderr
    assert f"response cache file {main} is damaged" in resumed.stderr and "moved aside" in resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert [p.name for p in (run / "cache").glob("responses.sqlite.corrupt-*")]
    later = bench(data, run, "0,1,2")  # the run it once refused at engine start
    assert later.returncode == 0 and "8 new records (0 with errors)" in later.stderr, later.stderr
    assert damage(main) is None


def test_a_damaged_part_is_moved_aside_and_the_healthy_ones_merged(tmp_path):
    warnings: list[str] = []
    good = CacheFiles(tmp_path, warnings.append)
    good.put_many([("k1", {"text": "a"})])
    good.close()
    broken = CacheFiles(tmp_path, warnings.append)
    broken.put_many([(f"k{i}", {"text": "b" * 500}) for i in range(2, 60)])
    broken.close()
    part = broken.part
    db = sqlite3.connect(str(part))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    overwrite(part)
    assert damage(part)
    merge_parts(tmp_path, warnings.append)
    assert any(str(part) in w and "moved aside" in w for w in warnings), warnings
    reader = CacheFiles(tmp_path, warnings.append)
    assert reader.get("k1") == {"text": "a"}  # the healthy part was merged, not blamed
    reader.close()
