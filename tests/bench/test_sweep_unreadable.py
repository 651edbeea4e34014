"""A trace file that cannot be read never stops a sweep: each unit it would have had is an error
record naming it, which the report counts, a resume keeps without repeating, and a resume after
the file is repaired replaces by the file's own run (the rule of `localfa diagnose` too)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.bench.driver import run_units_sweep
from localfa.bench.executors import LocalExecutor
from localfa.bench.report import load_run, markdown_report
from localfa.bench.shard import Shard
from localfa.bench.store import read_records, read_run_records
from localfa.bench.sweep import SweepError, load_traces, parse_methods, run_sweep
from localfa.bench.units import Unreadable
from localfa.engine.scripted import scripted_default
from localfa.traces.errors import TraceError
from tests.bench.test_sweep import write_whowhen
from tests.bench.test_sweep_trust import messages_trace

LOCALFA = [sys.executable, "-m", "localfa"]
ENV = {**os.environ, "COLUMNS": "400"}
TRUNCATED = '{"history": [{"content": "hi", "name": "A"}, '
HARBOR_JOB = Path(__file__).resolve().parents[1] / "fixtures" / "coding_runs" / "harbor_job"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LOCALFA, "bench", *args, "--engine", "scripted", "--no-progress"], capture_output=True, text=True, timeout=300, env=ENV
    )


def sweep(run: Path, data: Path, methods: str = "random", seeds: tuple[int, ...] = (0,), **kw) -> tuple:
    """`localfa bench` through the API: (traces, unreadable files, result)."""
    bad: list[Unreadable] = []
    traces = load_traces([data], warn=lambda _: None, unreadable=bad)
    result = run_sweep(run, traces, parse_methods(methods), list(seeds), scripted_default(), progress=False, unreadable=bad, **kw)
    return traces, bad, result


def test_bench_records_every_unit_of_an_unreadable_file_and_a_resume_neither_redoes_nor_repeats_them(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=2)
    bad = data / "hand-crafted" / "9.json"
    bad.write_text(TRUNCATED)
    run = tmp_path / "run"
    args = (str(data), "--methods", "random,all-at-once", "--seeds", "0,1", "--out", str(run))
    p = bench(*args)
    assert p.returncode == 1, p.stderr  # the sweep went on with the readable files; the run holds error records
    assert "4 of 20 planned units hold an error record" in p.stderr
    assert f"error: {bad}: truncated JSON" in p.stderr
    assert "20 new records (4 with errors; 1 trace file could not be read: error records)" in p.stderr
    records = read_run_records(run)
    unread = [r for r in records if r.error]
    assert len(records) == 20 and len(unread) == 4  # 4 traces x 2 methods x 2 seeds + the bad file's 2 x 2
    assert {(r.method, r.seed) for r in unread} == {("random", 0), ("random", 1), ("all-at-once", 0), ("all-at-once", 1)}
    for r in unread:
        assert (r.trace, r.source, r.error_kind, r.step) == ("hand-crafted/9", str(bad), "unreadable", None)
        assert r.error.startswith("TraceError: truncated JSON") and r.budget == "none" and r.finished_at
    assert str(bad) in json.loads((run / "manifest.json").read_text())["trace_files"]

    records, manifest = load_run(run)
    md = markdown_report(records, manifest, n_boot=0)
    overall = [row for row in md.splitlines() if "| overall |" in row]
    assert len(overall) == 2 and all(row.rstrip(" |").endswith("| 2") for row in overall)  # errors column
    assert "2 of them are units of trace files that could not be read" in md

    lines = (run / "results.jsonl").read_text().splitlines()
    again = bench(*args, "--skip-bad")  # --skip-bad: accepted, changes nothing
    assert again.returncode == 1, again.stderr
    assert "0 new records" in again.stderr and "20 already done" in again.stderr
    assert (run / "results.jsonl").read_text().splitlines() == lines  # not redone, not repeated

    shutil.copy(data / "hand-crafted" / "2.json", bad)  # repaired (as a Who&When file its id is whowhen/...)
    fixed = bench(*args)
    assert fixed.returncode == 0, fixed.stderr
    assert "4 new records (0 with errors" in fixed.stderr
    records = read_run_records(run)
    assert len(records) == 20 and not any(r.error for r in records)  # the unreadable records gave way
    assert sum(r.trace == "whowhen/hand-crafted/9" for r in records) == 4
    assert sum(r.never_read for r in read_records(run / "results.jsonl")) == 0
    assert "could not be read" not in markdown_report(*load_run(run), n_boot=0)


def test_a_repaired_file_with_the_same_id_is_run_again_on_resume(tmp_path):
    data = tmp_path / "data"
    messages_trace(data / "a.json", "alpha")
    (data / "b.json").write_text("[")
    run = tmp_path / "run"
    traces, bad, first = sweep(run, data)
    assert [t.id for t in traces] == ["a"] and [u.id for u in bad] == ["b"]
    assert (first.written, first.errors) == (2, 1)
    messages_trace(data / "b.json", "beta")  # a messages file keeps its path id: same key as its error record
    _, bad, second = sweep(run, data)
    assert not bad and (second.written, second.retried, second.skipped) == (1, 1, 1)
    (rec,) = [r for r in read_run_records(run) if r.trace == "b"]
    assert rec.error is None and rec.trace_sha256


def test_unreadable_units_follow_the_shards(tmp_path):
    data = tmp_path / "data"
    for n in range(4):
        (data / f"bad{n}.json").parent.mkdir(parents=True, exist_ok=True)
        (data / f"bad{n}.json").write_text("{")
    messages_trace(data / "good.json", "ok")
    bad: list[Unreadable] = []
    traces = load_traces([data], warn=lambda _: None, unreadable=bad)
    run = tmp_path / "run"
    keys = []
    for i in (1, 2):
        res = run_units_sweep(
            run,
            traces,
            parse_methods("random"),
            [0, 1],
            LocalExecutor(scripted_default()),
            shard=Shard(i, 2),
            progress=False,
            unreadable=bad,
        )
        keys += [k for k in res.written_keys if k[0].startswith("bad")]
    assert sorted(keys) == sorted((f"bad{n}", "random", "none", s) for n in range(4) for s in (0, 1))  # each once


def test_an_unreadable_file_counts_toward_limit_in_its_folders_subset(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=2)
    (data / "hand-crafted" / "0.json").write_text(TRUNCATED)  # first in natural order
    bad: list[Unreadable] = []
    said: list[str] = []
    traces = load_traces([data], limit=1, warn=said.append, unreadable=bad)
    assert [t.id for t in traces] == ["whowhen/algorithm-generated/1"]  # hand-crafted's one slot went to 0.json
    assert [u.id for u in bad] == ["hand-crafted/0"]
    assert len(said) == 1 and said[0].startswith(f"error: {data / 'hand-crafted' / '0.json'}: truncated JSON")
    bad = []
    assert len(load_traces([data], limit=2, warn=lambda _: None, unreadable=bad)) == 3 and len(bad) == 1


def test_without_a_list_for_them_unreadable_files_raise_or_are_skipped(tmp_path):
    data = tmp_path / "data"
    messages_trace(data / "a.json", "alpha")
    (data / "b.json").write_text("[")
    with pytest.raises(TraceError, match="b.json"):
        load_traces([data])
    said: list[str] = []
    assert [t.id for t in load_traces([data], skip_bad=True, warn=said.append)] == ["a"]
    assert said and said[0].startswith("warning: skipping")


def test_an_unreadable_file_whose_id_is_another_files_is_refused_naming_both(tmp_path):
    data = tmp_path / "data"
    messages_trace(data / "a.json", "alpha")
    (data / "a.jsonl").write_text("{")  # same path id "a"
    with pytest.raises(SweepError, match=r"a\.jsonl.*also the id of .*a\.json"):
        sweep(tmp_path / "run", data)


def test_failed_only_records_an_unreadable_trial_only_if_its_harness_marked_it_failed(tmp_path):
    job = shutil.copytree(HARBOR_JOB, tmp_path / "job")
    for trajectory in job.glob("*/agent/trajectory.json"):
        trajectory.write_text("{")
    bad: list[Unreadable] = []
    assert load_traces([job], failed_only=True, warn=lambda _: None, unreadable=bad) == []
    assert [u.id for u in bad] == ["fix-dates__A1b2C"]  # a trial is its folder (localfa.traces.ids); passed / unjudged trials are skipped
    bad = []
    load_traces([job], warn=lambda _: None, unreadable=bad)
    assert len(bad) == 3


def test_bench_with_no_readable_file_is_bad_input(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.json").write_text("[")
    p = bench(str(data), "--methods", "random", "--out", str(tmp_path / "run"))
    assert p.returncode == 2 and f"error: {data / 'x.json'}: " in p.stderr
    assert not (tmp_path / "run").exists()


def test_the_python_api_bench_records_unreadable_files_too(tmp_path):
    import localfa

    data = tmp_path / "data"
    messages_trace(data / "a.json", "alpha")
    (data / "b.json").write_text("[")
    result = localfa.bench([data], tmp_path / "run", "random", seeds=[0], engine="scripted")
    assert [(r.trace, r.error_kind) for r in result.records] == [("b", "unreadable"), ("a", None)]
    (data / "a.json").write_text("[")
    with pytest.raises(TraceError, match="a.json"):
        localfa.bench([data], tmp_path / "run2", "random", seeds=[0], engine="scripted")


def test_a_file_broken_again_after_its_repair_adds_nothing_on_resume(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=1)
    bad = data / "hand-crafted" / "2.json"
    bad.write_text(TRUNCATED)
    run = tmp_path / "run"
    assert sweep(run, data)[2].written == 3
    shutil.copy(data / "hand-crafted" / "1.json", bad)
    assert sweep(run, data)[2].written == 1  # whowhen/hand-crafted/2, read
    lines = (run / "results.jsonl").read_text()
    bad.write_text(TRUNCATED)
    _, unread, again = sweep(run, data)
    assert len(unread) == 1 and again.written == 0 and (run / "results.jsonl").read_text() == lines
    assert [r.trace for r in read_run_records(run) if "2" in r.trace] == ["whowhen/hand-crafted/2"]
