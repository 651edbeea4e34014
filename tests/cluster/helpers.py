"""Shared pieces of the cluster tests: a small dataset, record comparison, a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from localfa.bench.store import read_run_records
from localfa.bench.sweep import TIMING_FIELDS
from tests.bench.test_sweep import write_whowhen  # noqa: F401 (re-exported)

LOCALFA = [sys.executable, "-m", "localfa"]


def by_key(run: Path) -> dict:
    """Every record of a run (all results files), timing fields removed, by unit key."""
    return {r.key: {k: v for k, v in r.model_dump().items() if k not in TIMING_FIELDS} for r in read_run_records(run)}


def raw_lines(run: Path) -> list[dict]:
    """Every line of every results file, duplicates included."""
    out = []
    for f in sorted(run.glob("results*.jsonl")):
        out += [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    return out


def start_cli(args: list[str], **env: str) -> subprocess.Popen:
    return subprocess.Popen([*LOCALFA, *args], env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout_s: float = 180) -> int:
    deadline = time.time() + timeout_s
    count = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            count = path.read_bytes().count(b"\n")
        except FileNotFoundError:
            count = 0
        if count >= n:
            break
        time.sleep(0.05)
    return count
