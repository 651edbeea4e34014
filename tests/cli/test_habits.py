"""What a command line is expected to do (issue 56.5): --version, -h, help that fits 80 columns
with every example whole, and `inspect` reading a folder as `diagnose` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.cli import COMMANDS, EXAMPLES
from localfa.version import __version__

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "coding" / "harbor_job"


def localfa(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "localfa", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    proc = localfa(flag)
    assert proc.returncode == 0 and proc.stdout == f"localfa {__version__}\n"


@pytest.mark.parametrize("command", ["", *(name for name, _ in COMMANDS)])
def test_help_fits_80_columns_and_cuts_no_example(command):
    words = [command] if command else []
    short, long = localfa(*words, "-h"), localfa(*words, "--help")
    assert short.returncode == 0 and short.stdout == long.stdout, short.stderr
    lines = short.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not [line for line in lines if "…" in line]
    text = short.stdout
    if not command:
        assert all(f"    {line}" in lines for line in EXAMPLES)  # each example on one line, as written
        assert all(f"  {name:<9}  {what}" in lines for name, what in COMMANDS)
    if command in ("diagnose", "bench"):
        assert "all-at-once:with_ground_truth=true" in text  # never broken at a hyphen
    if command in ("", "diagnose", "view", "summarize", "inspect"):
        assert "Examples:" in text


def test_inspect_takes_a_trial_or_a_job_folder_as_diagnose_does(tmp_path):
    trial = localfa("inspect", str(JOB / "fix-dates__A1b2C"), "--json")
    assert trial.returncode == 0, trial.stderr
    info = json.loads(trial.stdout)
    assert info["format"] == "atif" and info["harness"]["failed"] is True
    job = localfa("inspect", str(JOB), "--json")
    assert job.returncode == 0, job.stderr
    infos = json.loads(job.stdout)
    diagnosed = localfa("diagnose", str(JOB), "--engine", "scripted", "--method", "random", "--json", "--quiet")
    assert [i["id"] for i in infos] == [json.loads(line)["trace"] for line in diagnosed.stdout.splitlines()]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = localfa("inspect", str(empty))
    assert proc.returncode == 2 and proc.stderr == f"error: {empty}: no trace file in this folder\n"
