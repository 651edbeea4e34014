"""An output path that cannot be written is one `error:` line and a non-zero exit, said before any
work, never a traceback (issue 55, case 11). /sys stands for a folder nobody may write in (root
included, so the case runs everywhere); a read-only run folder is not told to "run the same
command again": it would fail again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.insights.sample import write_sample

LOCALFA = [sys.executable, "-m", "localfa"]
READ_ONLY = Path("/sys")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOCALFA, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("out") / "data"
    write_sample(folder, 2)
    return folder


@pytest.fixture(scope="module")
def run_dir(data) -> Path:
    out = data.parent / "run"
    p = run("bench", str(data), "--methods", "random", "--engine", "scripted", "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    return out


def one_line(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(w in errors[0] for w in words), p.stderr


@pytest.mark.parametrize(
    "where, words",
    [("missing/x.jsonl", ["does not exist"]), ("READ_ONLY", ["cannot write here"]), (".", ["is a folder"])],
    ids=["missing folder", "read-only folder", "onto a folder"],
)
def test_diagnose_out(data, tmp_path, where, words):
    target = READ_ONLY / "x.jsonl" if where == "READ_ONLY" else (tmp_path / where)
    p = run("diagnose", str(data / "1.json"), "--engine", "scripted", "--quiet", "--out", str(target))
    one_line(p, "--out", *words)
    assert p.stdout == ""  # refused before anything ran


def test_diagnose_html_into_a_missing_folder(data, tmp_path):
    one_line(run("diagnose", str(data / "1.json"), "--engine", "scripted", "--quiet", "--html", str(tmp_path / "no" / "x.html")), "--html")


def test_report_json_and_summarize_jsonl_into_a_missing_folder(run_dir, tmp_path):
    one_line(run("report", str(run_dir), "--json", str(tmp_path / "no" / "r.json")), "--json", "does not exist")
    one_line(run("summarize", str(run_dir), "--jsonl", str(tmp_path / "no" / "s.jsonl")), "--jsonl", "does not exist")


def test_a_read_only_run_folder_is_not_told_to_run_again(data):
    p = run("bench", str(data), "--methods", "random", "--engine", "scripted", "--out", str(READ_ONLY / "localfa-run"), "--no-progress")
    one_line(p, "cannot write")
    assert "run the same command again" not in p.stderr
