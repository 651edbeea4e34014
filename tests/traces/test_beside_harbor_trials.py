"""A trace file beside a Harbor job's trials is read like any other (issue 55, case 4): it was
dropped with no record and no warning. The job's own config.json and result.json stay out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from localfa.cli import main
from localfa.testing.hostile import whowhen_file
from localfa.traces.load import trace_files_with_roots

JOB = Path(__file__).resolve().parents[1] / "fixtures" / "coding_runs" / "harbor_job"


def test_trace_files_beside_the_trials_are_read_and_swept(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    (job / "extra.json").write_text(json.dumps(whowhen_file(["Planner", "Coder", "Checker"])))
    (job / "notes").mkdir()
    (job / "notes" / "more.json").write_text(json.dumps(whowhen_file(["A", "B"])))
    files = [f.relative_to(job).as_posix() for _, f in trace_files_with_roots([job])]
    assert "extra.json" in files and "notes/more.json" in files
    assert "config.json" not in files and "result.json" not in files
    assert not any(f.startswith("fix-dates__A1b2C/") and not f.endswith("trajectory.json") for f in files)
    run = tmp_path / "run"
    assert main(["bench", str(job), "--methods", "random", "--engine", "scripted", "--out", str(run), "--no-progress"]) == 0
    sources = {json.loads(x)["source"] for x in (run / "results.jsonl").read_text().splitlines()}
    assert str(job / "extra.json") in sources and len(sources) == 5  # three trajectories and the two files beside them
