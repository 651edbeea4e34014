"""An edited trace is never mixed into a run: once the run holds records of a trace, any unit of
it whose content differs (a new seed included) is refused without --force; with --force its units
run against the new content and the records left from the old one are superseded: the report
leaves them out and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localfa.bench.report import load_run, markdown_report
from localfa.bench.store import read_run_records, split_superseded
from tests.bench.test_sweep import write_whowhen

ENV = {**os.environ, "COLUMNS": "400"}


def bench(data: Path, run: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [str(data), "--out", str(run), "--methods", "all-at-once", "--engine", "scripted", "--no-progress", *extra]
    return subprocess.run([sys.executable, "-m", "localfa", "bench", *args], capture_output=True, text=True, timeout=300, env=ENV)


def edit_label(path: Path, step: int) -> None:
    data = json.loads(path.read_text())
    data["mistake_step"] = str(step)
    path.write_text(json.dumps(data))


def test_a_new_seed_of_an_edited_trace_is_refused_and_forced_records_supersede(tmp_path):
    data = write_whowhen(tmp_path / "data", per_subset=1)
    run = tmp_path / "run"
    assert bench(data, run, "--seeds", "0").returncode == 0
    edited = data / "hand-crafted" / "1.json"
    edit_label(edited, 3)
    for extra in (["--seeds", "0"], ["--seeds", "1"]):  # a resume, and a new seed on the same run
        p = bench(data, run, *extra)
        assert p.returncode == 2 and "was changed since records were written" in p.stderr and "--force" in p.stderr, (extra, p.stderr)
        assert "Traceback" not in p.stderr
    forced = bench(data, run, "--seeds", "1", "--force")
    assert forced.returncode == 0, forced.stderr
    records = read_run_records(run)
    current, superseded = split_superseded(records)
    assert [(r.trace, r.seed) for r in superseded] == [("whowhen/hand-crafted/1", 0)]  # seed 0 saw the old label
    assert all(r.label.mistake_step == 3 for r in current if r.trace == "whowhen/hand-crafted/1")
    md = markdown_report(*load_run(run), n_boot=0)
    assert "1 records are left out as superseded" in md and "whowhen/hand-crafted/1" in md
    again = bench(data, run, "--seeds", "0,1", "--force")  # seed 0 runs again on the new content
    assert again.returncode == 0 and "1 new records" in again.stderr, again.stderr
    assert split_superseded(read_run_records(run))[1] == []
