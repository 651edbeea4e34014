"""Several processes opening one response cache at once (Ray workers on a shared RUN_DIR) all
get it: switching SQLite to WAL takes a lock the busy timeout does not wait for."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

OPEN = (
    "import sys, time\n"
    "from localfa.engine.cache import ResponseCache\n"
    "while time.time() < float(sys.argv[3]): pass\n"  # every process opens at the same instant
    "ResponseCache(sys.argv[1]).put_many([(sys.argv[2], {})])\n"
)


def test_processes_opening_one_new_cache_together_all_succeed(tmp_path):
    db = tmp_path / "cache" / "responses.sqlite"
    start = str(time.time() + 3.0)
    procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(db), f"k{i}", start], stderr=subprocess.PIPE, text=True) for i in range(6)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    rows = sqlite3.connect(db).execute("SELECT key FROM responses ORDER BY key").fetchall()
    assert [r[0] for r in rows] == [f"k{i}" for i in range(6)]
