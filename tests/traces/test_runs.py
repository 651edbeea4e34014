"""Harness runs as they come: a Harbor job folder and a SWE-bench run (fixtures written for these
tests in tests/fixtures/coding_runs), the harness's verdict per trial, and `--failed-only`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from localfa.bench.sweep import load_traces
from localfa.traces.load import trace_files_with_roots
from localfa.traces.runs import harbor_verdict, harness_traces, keep_failed, verdict_of, with_harness

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "coding_runs"
JOB = RUNS / "harbor_job"
SWE = RUNS / "swebench_run"
LOCALFA = [sys.executable, "-m", "localfa"]
ENV = {**os.environ, "COLUMNS": "400"}


def localfa(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh process, on the scripted engine."""
    proc = subprocess.run([*LOCALFA, *args, "--engine", "scripted"], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_harbor_job_folder_yields_only_the_trials_trajectories() -> None:
    files = [f.relative_to(JOB).as_posix() for _, f in trace_files_with_roots([JOB])]
    assert files == [
        "build-docs__Q7w6E/agent/trajectory.json",
        "count-errors__Z9y8X/agent/trajectory.json",
        "fix-dates__A1b2C/agent/trajectory.json",
    ]  # not config.json / result.json / verifier files; setup-db wrote no trajectory
    one_trial = [f.relative_to(JOB).as_posix() for _, f in trace_files_with_roots([JOB / "fix-dates__A1b2C"])]
    assert one_trial == ["fix-dates__A1b2C/agent/trajectory.json"]


def test_harbor_verdicts_from_result_json_and_reward_files(tmp_path: Path) -> None:
    assert harbor_verdict(JOB / "fix-dates__A1b2C").failed is True
    passed = harbor_verdict(JOB / "count-errors__Z9y8X")
    assert (passed.failed, passed.reward, passed.why) == (False, 1.0, "reward 1 in result.json")
    timeout = harbor_verdict(JOB / "build-docs__Q7w6E")
    assert timeout.failed is None and timeout.why == "no verifier reward (exception AgentTimeoutError)"
    trial = tmp_path / "t__1"
    shutil.copytree(JOB / "fix-dates__A1b2C", trial)
    (trial / "result.json").write_text(json.dumps({"task_name": "t", "trial_name": "t__1", "verifier_result": None}))
    assert harbor_verdict(trial).why == "reward 0 in verifier/reward file"  # verifier/reward.txt holds 0


def test_swe_bench_run_reads_every_report_shape() -> None:
    files = [f.relative_to(SWE).as_posix() for _, f in trace_files_with_roots([SWE])]
    assert files == ["example__calc-101/example__calc-101.traj.json", "example__calc-202/example__calc-202.traj.json"]
    failed = verdict_of(SWE, SWE / files[0])
    assert failed is not None and failed.failed is True and failed.why == "unresolved in gpt-5-mini.run1.json"
    passed = verdict_of(SWE, SWE / files[1])
    assert passed is not None and passed.failed is False and "gpt-5-mini.run1.json" in passed.why


def test_a_per_instance_report_alone_gives_the_verdict(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SWE / "example__calc-101", run / "example__calc-101")
    shutil.copytree(SWE / "logs", run / "logs")
    (f,) = [f for _, f in trace_files_with_roots([run])]
    verdict = verdict_of(run, f)
    assert verdict is not None and verdict.failed is True and verdict.why == "resolved: false in report.json"


def test_a_trajectory_outside_any_run_has_no_verdict() -> None:
    fix = RUNS.parent / "coding" / "mini_swe_agent.traj.json"
    assert verdict_of(fix.parent, fix) is None


def test_failed_only_keeps_the_failed_trials_and_says_what_it_skipped() -> None:
    said: list[str] = []
    traces = load_traces([JOB], warn=said.append, failed_only=True)
    assert [t.id for t in traces] == ["fix-dates__A1b2C"]
    assert traces[0].metadata["harness"] == {"harness": "harbor", "failed": True, "why": "reward 0 in result.json", "reward": 0.0}
    assert said == [
        "--failed-only: 1 of 3 trials kept as failed by the harness; 1 skipped as passed (reward > 0); "
        "1 skipped with no verdict (no verifier reward (exception AgentTimeoutError)); 1 trial without an agent log (agent/trajectory.json, agent/claude-code.txt, agent/sessions/)"
    ]
    everything = load_traces([JOB])
    assert [t.id for t in everything] == ["build-docs__Q7w6E", "count-errors__Z9y8X", "fix-dates__A1b2C"]


def test_failed_only_keeps_traces_from_outside_a_harness_run(tmp_path: Path) -> None:
    said: list[str] = []
    fix = RUNS.parent / "coding" / "atif_v1_2.json"
    from localfa.traces.load import load_trace

    kept = keep_failed([with_harness(load_trace(fix), fix.parent, fix)], [fix], said.append)
    assert len(kept) == 1 and "no harness verdict" in said[-1]


def test_bench_failed_only_on_a_harbor_job_prints_the_trials_skipped_as_passed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = localfa("bench", str(JOB), "--failed-only", "--methods", "random", "--out", str(out), "--no-progress")
    assert "1 skipped as passed (reward > 0)" in proc.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["trace"] for r in records] == ["fix-dates__A1b2C"]
    assert records[0]["agent"] == "terminus-2 (openai/gpt-oss-120b)"


def test_diagnose_failed_only_on_a_swe_bench_run(tmp_path: Path) -> None:
    proc = localfa("diagnose", str(SWE), "--failed-only", "--method", "all-at-once", "--quiet", "--json")
    assert "1 skipped as passed (resolved: true)" in proc.stderr
    (record,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert record["trace"] == "example__calc-101" and record["agent"] == "mini-swe-agent (openai/gpt-5-mini)"


def test_harness_traces_is_the_one_loader_of_diagnose_and_bench(tmp_path: Path) -> None:
    """Read each file, attach its verdict, make ids distinct, keep the failed trials; an unreadable
    file goes to the caller's on_error with its root and nothing else changes."""
    import pytest

    from localfa.traces.errors import TraceError
    from localfa.traces.load import load_trace

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    found = [*trace_files_with_roots([JOB]), (tmp_path, bad)]
    errors: list[tuple[Path, Path, TraceError]] = []
    said: list[str] = []

    def on_error(root: Path, f: Path, exc: TraceError) -> None:
        errors.append((root, f, exc))

    every = harness_traces(found, load_trace, on_error, [JOB, bad], False, said.append)
    assert [(r, t.id) for r, _, t in every] == [(JOB, "build-docs__Q7w6E"), (JOB, "count-errors__Z9y8X"), (JOB, "fix-dates__A1b2C")]
    assert [t.metadata["harness"].get("failed") for _, _, t in every] == [None, False, True]
    assert [(r, f) for r, f, _ in errors] == [(tmp_path, bad)] and said == []  # no --failed-only: nothing said
    failed = harness_traces(found, load_trace, on_error, [JOB, bad], True, said.append)
    assert [(f, t.id) for _, f, t in failed] == [(JOB / "fix-dates__A1b2C/agent/trajectory.json", "fix-dates__A1b2C")]
    assert said[0].startswith("--failed-only: 1 of 3 trials kept as failed by the harness; 1 skipped as passed")
    assert harness_traces([(tmp_path, bad)], load_trace, on_error, [bad], True, said.append) == [] and len(said) == 1

    one = JOB / "fix-dates__A1b2C/agent/trajectory.json"
    copy = tmp_path / "fix-dates__A1b2C/agent/trajectory.json"
    copy.parent.mkdir(parents=True)
    shutil.copy(one, copy)
    with pytest.raises(TraceError, match="also the id of"):  # the same trial id from two folders
        harness_traces([(JOB, one), (tmp_path, copy)], load_trace, on_error, [JOB, tmp_path], False, said.append)


def _results_json_run(tmp_path: Path) -> Path:
    """The SWE-bench run with its reports replaced by the older ``results/results.json`` summary."""
    run = tmp_path / "run"
    shutil.copytree(SWE, run, ignore=shutil.ignore_patterns("gpt-5-mini.run1.json", "logs", "preds.json"))
    (run / "results").mkdir()
    summary = {
        "no_generation": [],
        "generated": ["example__calc-101", "example__calc-202"],
        "applied": ["example__calc-101", "example__calc-202"],
    }
    (run / "results" / "results.json").write_text(json.dumps({**summary, "resolved": ["example__calc-202"]}))
    return run


def test_a_results_json_summary_is_a_verdict(tmp_path: Path) -> None:
    run = _results_json_run(tmp_path)
    files = [f.relative_to(run).as_posix() for _, f in trace_files_with_roots([run])]
    assert files == ["example__calc-101/example__calc-101.traj.json", "example__calc-202/example__calc-202.traj.json"]  # not the summary
    failed = verdict_of(run, run / files[0])
    assert failed is not None and failed.failed is True and failed.why == "not resolved in results.json (listed as generated)"
    passed = verdict_of(run, run / files[1])
    assert passed is not None and passed.failed is False


def test_bench_failed_only_on_a_results_json_run(tmp_path: Path) -> None:
    run = _results_json_run(tmp_path)
    proc = localfa("bench", str(run), "--failed-only", "--methods", "random", "--out", str(tmp_path / "out"), "--no-progress")
    assert "--failed-only: 1 of 2 trials kept as failed by the harness; 1 skipped as passed (resolved: true)" in proc.stderr
    assert "no harness verdict" not in proc.stderr
    records = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["trace"] for r in records] == ["example__calc-101"] and not any(r.get("error") for r in records)


def test_bench_failed_only_on_inspect_ai_logs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "fixtures" / "agent_logs" / "inspect_ai" / "sums.eval", logs)
    proc = localfa("bench", str(logs), "--failed-only", "--methods", "random", "--out", str(tmp_path / "out"), "--no-progress")
    assert "1 of 2 trials kept as failed by the harness; 1 skipped as passed (full score)" in proc.stderr
    records = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["trace"] for r in records] == ["sums/sum-2"]


def test_a_trial_without_a_trajectory_is_reported_whatever_its_result_json_holds(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    (job / "crashed__X1").mkdir()
    (job / "crashed__X1" / "result.json").write_text("{not json")
    said: list[str] = []
    traces = [t for _, _, t in harness_traces(trace_files_with_roots([job]), load_traces_of, _raise, [job], True, said.append)]
    assert [t.id for t in traces] == ["fix-dates__A1b2C"]
    assert said[0].endswith("; 2 trials without an agent log (agent/trajectory.json, agent/claude-code.txt, agent/sessions/)"), (
        said
    )  # setup-db and the crashed trial


def load_traces_of(f: Path) -> list:
    from localfa.traces.load import load_traces as read

    return read(f)


def _raise(root: Path, f: Path, exc: Exception) -> None:
    raise exc
