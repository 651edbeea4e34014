"""One bad file never stops a sweep: a corpus holding one trace file of each kind that once did
(`localfa.testing.hostile.write_corpus`: tool-call arguments nested 256 deep, a JSON Lines file
whose second line is nested too deep, a lone surrogate with deep nesting, a truncated and a
non-UTF-8 file, hostile agent names, an NFD file name, a link to a file outside the folder) beside
good traces. `bench` and `diagnose` each give every good trace its record, one error record per
bad file (none for the skipped link), exit 1, and print no traceback; `report` and `view` of the
run hold too. The oracle engine answers, so the good records are real diagnoses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from localfa.bench.store import read_run_records
from localfa.testing.hostile import Corpus, write_corpus

LOCALFA = [sys.executable, "-m", "localfa"]
ENV = {**os.environ, "COLUMNS": "400"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOCALFA, *args], capture_output=True, text=True, timeout=300, env=ENV)


def check_records(records: list[dict], corpus: Corpus, stderr: str) -> None:
    problems = corpus.problems(records, stderr)
    assert not problems, problems


@pytest.mark.parametrize("extra", [[], ["--skip-bad"]])  # --skip-bad: kept for old scripts, skips nothing
def test_bench_over_the_hostile_corpus(tmp_path, extra):
    corpus = write_corpus(tmp_path / "data", outside=tmp_path / "outside")
    run = tmp_path / "run"
    p = cli("bench", str(corpus.folder), "--out", str(run), "--methods", "all-at-once", "--engine", "oracle", "--no-progress", *extra)
    assert p.returncode == 1, p.stderr
    check_records([r.model_dump() for r in read_run_records(run)], corpus, p.stderr)
    assert "Leaked" not in (run / "results.jsonl").read_text()  # the linked file outside was not read
    again = cli("bench", str(corpus.folder), "--out", str(run), "--methods", "all-at-once", "--engine", "oracle", "--no-progress")
    assert again.returncode == 1 and "0 new records" in again.stderr and "Traceback" not in again.stderr, again.stderr
    for command in (["report", str(run)], ["view", str(run), "--out", str(tmp_path / "v.html")]):
        shown = cli(*command)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, (command, shown.stderr)


def test_diagnose_over_the_hostile_corpus(tmp_path):
    corpus = write_corpus(tmp_path / "data", outside=tmp_path / "outside")
    out = tmp_path / "d.jsonl"
    p = cli("diagnose", str(corpus.folder), "--method", "all-at-once", "--engine", "oracle", "--quiet", "--out", str(out))
    assert p.returncode == 1, p.stderr
    check_records([json.loads(line) for line in out.read_text().split("\n") if line], corpus, p.stderr)


def test_follow_links_reads_the_linked_file(tmp_path):
    corpus = write_corpus(tmp_path / "data", outside=tmp_path / "outside")
    out = tmp_path / "d.jsonl"
    p = cli(
        "diagnose", str(corpus.folder / "link.json"), str(corpus.folder / "good.json"), "--engine", "oracle", "--quiet", "--out", str(out)
    )
    assert p.returncode == 0, p.stderr  # a link named on the command line is the user's own choice
    p = cli("diagnose", str(corpus.folder), "--method", "all-at-once", "--engine", "oracle", "--quiet", "--follow-links", "--out", str(out))
    assert "link" in {json.loads(line)["trace"] for line in out.read_text().split("\n") if line}, p.stderr


def test_the_corpus_files_are_what_they_claim(tmp_path):
    corpus = write_corpus(tmp_path / "data", outside=tmp_path / "outside")
    names = {p.name for p in corpus.folder.iterdir()}
    assert len(names) == len(corpus.good) + len(corpus.bad) + len(corpus.skipped)
    assert (corpus.folder / "link.json").is_symlink()
    assert any(n != n.encode("ascii", "ignore").decode() for n in names)  # the NFD name
