"""Sweeps: parsing, records, manifest checks, durable appends, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localfa.bench.store import ResultStore, StoreError, read_records, record_key
from localfa.bench.sweep import TIMING_FIELDS, MethodSpec, SweepError, load_traces, parse_budgets, parse_methods, parse_seeds, run_sweep
from localfa.engine.scripted import scripted_default
from localfa.results import ResultRecord

LOCALFA = [sys.executable, "-m", "localfa"]  # the `localfa` command (localfa/__main__.py)


def write_whowhen(root: Path, per_subset: int = 3, steps: int = 6) -> Path:
    """A small Who&When-shaped dataset: root/{algorithm-generated,hand-crafted}/N.json."""
    for subset, speaker_key in (("algorithm-generated", "name"), ("hand-crafted", "role")):
        d = root / subset
        d.mkdir(parents=True, exist_ok=True)
        for n in range(1, per_subset + 1):
            agents = ["Planner", "Coder", "Checker"]
            history = []
            for i in range(steps + n):
                step = {"content": f"step {i} of task {n}: some work by {agents[i % 3]}"}
                if speaker_key == "name":
                    step.update(name=agents[i % 3], role="assistant")
                else:
                    step["role"] = agents[i % 3]
                history.append(step)
            data = {
                "question": f"Task {n}?",
                "ground_truth": str(n),
                "history": history,
                "mistake_agent": agents[(n + 1) % 3],
                "mistake_step": str(n + 1),
                "mistake_reason": "wrong",
            }
            data["is_correct" if speaker_key == "name" else "is_corrected"] = False
            (d / f"{n}.json").write_text(json.dumps(data))
    return root


def strip_timing(rec: ResultRecord) -> dict:
    return rec.model_dump(exclude=set(TIMING_FIELDS))


def stored(trace: str, step: int | None = None, **fields) -> ResultRecord:
    """A minimal record as the store keeps it."""
    return ResultRecord(trace=trace, method="m", budget="none", seed=0, step=step, **fields)


# ---- parsing ------------------------------------------------------------------------------------


def test_parse_methods_seeds_budgets():
    specs = parse_methods("safari, all-at-once:with_ground_truth=true,binary-search:final_window=3:reason_chars=80")
    assert [s.label for s in specs] == ["safari", "all-at-once:with_ground_truth=true", "binary-search:final_window=3:reason_chars=80"]
    assert specs[1].options_dict == {"with_ground_truth": True}
    assert specs[2].options_dict == {"final_window": 3, "reason_chars": 80}
    assert MethodSpec.parse("x:b=1:a=2").label == "x:a=2:b=1"  # canonical: options sorted
    with pytest.raises(ValueError):
        parse_methods("safari,safari")
    with pytest.raises(ValueError):
        parse_methods("all-at-once:oops")
    assert parse_seeds("0,1,2") == [0, 1, 2] and parse_seeds("0-3,7") == [0, 1, 2, 3, 7]
    with pytest.raises(ValueError):
        parse_seeds("a")
    assert parse_budgets(None) == ["none"]
    assert parse_budgets("none,25k,100000c,scale:2") == ["none", "25000", "100000c", "scale:2"]
    with pytest.raises(ValueError):
        parse_budgets("lots")


def test_limit_takes_the_first_n_of_each_subset(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=3)
    traces = load_traces([data], limit=2)
    assert [t.id for t in traces] == [
        "whowhen/algorithm-generated/1",
        "whowhen/algorithm-generated/2",
        "whowhen/hand-crafted/1",
        "whowhen/hand-crafted/2",
    ]
    assert len(load_traces([data])) == 6


# ---- in-process sweeps --------------------------------------------------------------------------


def test_sweep_writes_one_record_per_unit_and_resumes(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=2)])
    methods = parse_methods("all-at-once,binary-search,random")
    run = tmp_path / "run"
    res = run_sweep(run, traces, methods, [0, 1], scripted_default(), progress=False)
    assert res.planned == res.written == 4 * 3 * 2 and res.skipped == 0
    recs = read_records(run / "results.jsonl")
    assert len(recs) == 24 and len({record_key(r) for r in recs}) == 24
    r = next(r for r in recs if r.method == "all-at-once" and r.trace == "whowhen/hand-crafted/2" and r.seed == 1)
    # the hand-crafted file 2.json: 8 steps, labelled step 3 by agent agents[(2 + 1) % 3] = "Planner"
    assert (r.label.mistake_step, r.label.mistake_agent, r.budget, r.n_steps) == (3, "Planner", "none", 8)
    assert (r.method_name, r.subset, r.error, r.error_kind) == ("all-at-once", "hand-crafted", None, None)
    assert r.usage["calls"] == 1
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["seeds"] == [0, 1] and set(manifest["methods"]) == {"all-at-once", "binary-search", "random"}
    # same command again: nothing to do, nothing duplicated
    again = run_sweep(run, traces, methods, [0, 1], scripted_default(), progress=False)
    assert again.written == 0 and again.skipped == 24
    # adding a seed and a budget extends the run
    more = run_sweep(run, traces, methods, [0, 1, 2], scripted_default(), ["none", "2k"], progress=False)
    assert more.written == 4 * 3 * (6 - 2) and more.skipped == 24
    recs = read_records(run / "results.jsonl")
    assert len(recs) == len({record_key(r) for r in recs}) == 4 * 3 * 6
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["seeds"] == [0, 1, 2] and manifest["budgets"] == ["none", "2000"] and len(manifest["resumed"]) == 2


def test_results_do_not_depend_on_concurrency(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=2)])
    methods = parse_methods("all-at-once,step-by-step,binary-search")
    a = run_sweep(tmp_path / "a", traces, methods, [0, 1], scripted_default(), concurrency=1, progress=False)
    b = run_sweep(tmp_path / "b", traces, methods, [0, 1], scripted_default(), concurrency=16, progress=False)
    key = lambda r: record_key(r)  # noqa: E731
    ra = {key(r): strip_timing(r) for r in a.records}
    rb = {key(r): strip_timing(r) for r in b.records}
    assert ra == rb


def test_resume_refuses_a_different_model_unless_forced(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    methods = parse_methods("random")
    run = tmp_path / "run"
    run_sweep(run, traces, methods, [0], scripted_default(), progress=False)
    other = scripted_default()
    other.model_info = {"path": "/models/x", "sha256": "abc", "name": "x"}
    with pytest.raises(SweepError, match="different settings.*model"):
        run_sweep(run, traces, methods, [1], other, progress=False)
    res = run_sweep(run, traces, methods, [1], other, force=True, progress=False)
    assert res.written == 2
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["resumed"][-1]["forced_differences"] == ["model: name, path, sha256 differ"]


def test_method_errors_become_error_records(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    from localfa.engine.scripted import ScriptedEngine

    eng = ScriptedEngine(lambda req: "not json")  # fails the grammar
    res = run_sweep(tmp_path / "run", traces, parse_methods("all-at-once,heuristic"), [0], eng, progress=False)
    assert res.written == 4 and res.errors == 2
    bad = [r for r in res.records if r.error]
    assert [(r.method, r.step, r.error_kind) for r in bad] == [("all-at-once", None, "final")] * 2
    assert all(r.label is not None and r.label.mistake_step is not None for r in bad)


def test_unknown_method_or_option_is_a_sweep_error(tmp_path):
    traces = load_traces([write_whowhen(tmp_path / "ww", per_subset=1)])
    with pytest.raises(SweepError, match="unknown method"):
        run_sweep(tmp_path / "r", traces, parse_methods("nope"), [0], scripted_default(), progress=False)
    with pytest.raises(SweepError, match="unknown option"):
        run_sweep(tmp_path / "r", traces, parse_methods("random:x=1"), [0], scripted_default(), progress=False)


# ---- the store ----------------------------------------------------------------------------------


def test_store_cuts_a_partial_last_line_and_never_duplicates(tmp_path):
    run = tmp_path / "run"
    with ResultStore(run) as st:
        assert st.append(stored("a", 1))
        assert st.append(stored("b", 2))
        assert not st.append(stored("a", 9))
    path = run / "results.jsonl"
    with open(path, "ab") as fh:  # what a SIGKILL in the middle of a write leaves
        fh.write(b'{"trace":"c","method":"m","bud')
    assert [(r.trace, r.step) for r in read_records(path)] == [("a", 1), ("b", 2)]
    with ResultStore(run) as st:
        assert st.repaired_bytes == len(b'{"trace":"c","method":"m","bud')
        assert ("a", "m", "none", 0) in st and len(st) == 2
        st.append(stored("c", 3))
    lines = path.read_text().splitlines()
    assert [json.loads(x)["trace"] for x in lines] == ["a", "b", "c"]


def test_store_reports_a_damaged_line_and_locks_the_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(
        '{"trace":"a","method":"m","budget":"none","seed":0}\nGARBAGE\n{"trace":"b","method":"m","budget":"none","seed":0}\n'
    )
    with pytest.raises(StoreError, match="line 2"):
        ResultStore(run).open()
    run2 = tmp_path / "run2"
    first = ResultStore(run2).open()
    try:
        with pytest.raises(StoreError, match="another sweep"):
            ResultStore(run2).open()
    finally:
        first.close()
    ResultStore(run2).open().close()  # free again once the first closed


# ---- the CLI, killed with SIGKILL and resumed ---------------------------------------------------


def _cli(args, env=None, **kw):
    return subprocess.Popen([*LOCALFA, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_sigkill_midway_then_resume(tmp_path):
    data = write_whowhen(tmp_path / "ww", per_subset=3)
    run = tmp_path / "run"
    flags = "--methods all-at-once,binary-search --seeds 0,1 --limit 2 --engine scripted --concurrency 2 --no-progress"
    args = ["bench", str(data), *flags.split(), "--out", str(run)]
    total = 4 * 2 * 2
    env = {**os.environ, "LOCALFA_SCRIPTED_DELAY_S": "0.15"}
    proc = _cli(args, env=env)
    results = run / "results.jsonl"
    deadline = time.time() + 120
    while _lines(results) < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.communicate()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before_bytes = results.read_bytes()
    before = read_records(results)
    assert 3 <= len(before) < total

    done = subprocess.run([*LOCALFA, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "already done" in done.stderr
    after = read_records(results)
    keys = [record_key(r) for r in after]
    raw_lines = results.read_text().splitlines()
    assert len(raw_lines) == total == len(after) == len(set(keys))  # complete, no duplicate line
    # the finished part is untouched: same bytes up to the last complete line of the killed run
    complete = before_bytes[: before_bytes.rfind(b"\n") + 1]
    assert results.read_bytes().startswith(complete)
    by_key = {record_key(r): r for r in after}
    for r in before:
        assert by_key[record_key(r)] == r

    # and a clean, uninterrupted run gives the same records (timing aside)
    clean = tmp_path / "clean"
    args_clean = [a if a != str(run) else str(clean) for a in args]
    ok = subprocess.run([*LOCALFA, *args_clean], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    reference = {record_key(r): strip_timing(r) for r in read_records(clean / "results.jsonl")}
    assert {record_key(r): strip_timing(r) for r in after} == reference


def test_bench_cli_bad_input_is_one_error_line(tmp_path):
    for args, needle in (
        (["bench", str(tmp_path / "missing"), "--engine", "scripted", "--out", str(tmp_path / "r")], "no such file"),
        (["bench", str(tmp_path), "--methods", "nope", "--engine", "scripted", "--out", str(tmp_path / "r")], "unknown method"),
        (["bench", str(tmp_path), "--seeds", "x", "--engine", "scripted", "--out", str(tmp_path / "r")], "--seeds"),
        (["bench", str(tmp_path), "--budgets", "lots", "--engine", "scripted", "--out", str(tmp_path / "r")], "--budgets"),
        (["bench", str(tmp_path), "--methods", "random:bogus=1", "--engine", "scripted", "--out", str(tmp_path / "r")], "unknown option"),
    ):
        p = subprocess.run([*LOCALFA, *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], (args, p.stderr)
