"""Harbor trials as people have them (issue 54): a trial whose agent wrote no ATIF trajectory is
read from the agent's own log with its task, and every trial's verifier evidence (reward, test
output) reaches the methods and the views.

The agent logs are real public samples (tests/fixtures/agent_logs/README.md: a `claude -p
--output-format stream-json` capture and a Claude Code session); the trial around them
(result.json, verifier output, command.txt) is written here in the shapes Harbor writes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localfa.bench.sweep import load_traces
from localfa.bench.units import read_trace_file
from localfa.traces.load import load_traces as read_traces
from localfa.traces.load import trace_files_with_roots
from localfa.traces.outcome import OUTCOME_TAIL_CHARS, harbor_task, instruction_from_command, tail
from localfa.traces.runs import harness_traces, trial_trace_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
JOB = FIXTURES / "coding_runs" / "harbor_job"
STREAM = FIXTURES / "agent_logs" / "claude_code" / "stream-task-explore.jsonl"  # real: no prompt in the stream
SESSION = FIXTURES / "agent_logs" / "claude_code" / "e9fb405b-169f-40eb-9396-7e75076f045d.jsonl"  # real session log
TASK = "List the Python files of the project and summarise what each does."
PYTEST_OUT = (
    "============================= test session starts ==============================\n"
    "collected 3 items\n\ntests/test_outputs.py .F.                                                [100%]\n\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_outputs.py::test_report_exists - AssertionError: /app/report.md not found\n"
    "========================= 1 failed, 2 passed in 0.31s ==========================\n"
)
# Harbor 0.13's command line for Claude Code (the prompt quoted in it); 0.24 passes it through an
# environment variable, and then the command holds none.
COMMAND_013 = (
    'export PATH="$HOME/.local/bin:$PATH"; claude --verbose --output-format=stream-json '
    f"--permission-mode=bypassPermissions --print -- '{TASK}' 2>&1 </dev/null | tee /logs/agent/claude-code.txt"
)
COMMAND_024 = (
    'export PATH="$HOME/.local/bin:$PATH"; harbor_claude_code_instruction_0123abcd="$HARBOR_CLAUDE_CODE_INSTRUCTION_0123ABCD"; '
    'unset HARBOR_CLAUDE_CODE_INSTRUCTION_0123ABCD; printf "%s" "$harbor_claude_code_instruction_0123abcd" | '
    "claude --verbose --output-format=stream-json --settings /logs/agent/settings.json --print 2>&1 | tee /logs/agent/claude-code.txt"
)


def timed_out_trial(job: Path, name: str = "write-report__T5k9Q", command: str | None = COMMAND_013) -> Path:
    """A trial that failed with reward 0 after AgentTimeoutError, with no agent/trajectory.json:
    only Claude Code's own stream-json log (the real capture) and the verifier's output."""
    trial = job / name
    (trial / "agent").mkdir(parents=True)
    (trial / "verifier").mkdir()
    shutil.copy(STREAM, trial / "agent" / "claude-code.txt")
    if command is not None:
        (trial / "agent" / "command-1").mkdir()
        (trial / "agent" / "command-1" / "command.txt").write_text(command)
    (trial / "verifier" / "test-stdout.txt").write_text(PYTEST_OUT)
    (trial / "verifier" / "reward.txt").write_text("0")
    result = {
        "task_name": name.split("__")[0],
        "trial_name": name,
        "verifier_result": {"rewards": {"reward": 0.0}},
        "exception_info": {"exception_type": "AgentTimeoutError", "exception_message": "Agent execution timed out after 900.0 seconds"},
    }
    (trial / "result.json").write_text(json.dumps(result))
    return trial


@pytest.fixture
def job(tmp_path: Path) -> Path:
    copy = tmp_path / "job"
    shutil.copytree(JOB, copy)
    timed_out_trial(copy)
    return copy


def test_a_trial_without_a_trajectory_is_read_from_the_agents_log_with_its_task(job: Path) -> None:
    files = [f.relative_to(job).as_posix() for _, f in trace_files_with_roots([job])]
    assert "write-report__T5k9Q/agent/claude-code.txt" in files
    said: list[str] = []
    traces = load_traces([job], warn=said.append, failed_only=True)
    assert [t.id for t in traces] == ["fix-dates__A1b2C", "write-report__T5k9Q"]  # every failed trial, the log-only one included
    assert said[0].startswith("--failed-only: 2 of 4 trials kept as failed by the harness")
    log = traces[1]
    assert log.format == "claude-code" and log.task == TASK and log.metadata["task_source"] == "agent/command-N/command.txt"
    assert all(t.task.strip() for t in traces)


def test_the_verifier_output_and_reward_are_the_runs_last_step_and_its_outcome(job: Path) -> None:
    traces = {t.id: t for t in load_traces([job], warn=lambda _: None, failed_only=True)}
    log = traces["write-report__T5k9Q"]
    last = log.steps[-1]
    assert (last.agent, last.kind, last.name) == ("verifier", "observation", "verifier")
    assert last.content == log.outcome
    assert log.outcome.splitlines()[:2] == [
        "Harbor verifier: reward 0 in result.json.",
        "The trial stopped with AgentTimeoutError: Agent execution timed out after 900.0 seconds",
    ]
    assert "FAILED tests/test_outputs.py::test_report_exists" in log.outcome
    assert log.action_steps()[-1] < last.index  # shown to every method, answerable by none
    atif = traces["fix-dates__A1b2C"]  # a trial with a trajectory gets it too
    assert atif.outcome == "Harbor verifier: reward 0 in result.json.\nverifier/test-stdout.txt:\n1 failed, 2 passed"


def test_the_task_comes_from_the_trials_own_files_in_order(tmp_path: Path) -> None:
    # a newer Harbor keeps the prompt out of the command: the Claude Code session under agent/sessions has it
    trial = timed_out_trial(tmp_path / "job", command=COMMAND_024)
    own = trial / "agent" / "claude-code.txt"
    assert harbor_task(trial, own, read_traces) == (
        "Harbor task write-report (its instruction is not in the trial folder; only its name is known)",
        "result.json task_name",
    )
    sessions = trial / "agent" / "sessions" / "projects" / "-app"
    sessions.mkdir(parents=True)
    shutil.copy(SESSION, sessions / SESSION.name)
    task, where = harbor_task(trial, own, read_traces) or ("", "")
    assert where == "agent/sessions" and task.startswith('@"solution-architect (agent)" analyze existing CLI command')
    # the task folder config.json names (relative to the job) holds the instruction
    other = timed_out_trial(tmp_path / "job", name="count-lines__K2j4P", command=None)
    (tmp_path / "job" / "tasks" / "count-lines").mkdir(parents=True)
    (tmp_path / "job" / "tasks" / "count-lines" / "instruction.md").write_text("Count the lines of every log file.\n")
    (other / "config.json").write_text(json.dumps({"task": {"path": "tasks/count-lines"}, "trial_name": other.name}))
    assert harbor_task(other, other / "agent" / "claude-code.txt", read_traces) == (
        "Count the lines of every log file.",
        "the task's instruction.md",
    )


def test_the_prompt_is_read_from_harbors_command_lines() -> None:
    assert instruction_from_command(COMMAND_013) == TASK
    assert instruction_from_command("claude --verbose --output-format stream-json -p 'Fix the failing test.' --allowedTools Bash Edit") == (
        "Fix the failing test."
    )
    assert instruction_from_command(COMMAND_024) is None  # the prompt went through an environment variable
    assert instruction_from_command("claude -p 'unbalanced") is None


def test_a_trial_reads_its_trajectory_first_then_the_agents_logs(job: Path) -> None:
    trial = job / "write-report__T5k9Q"
    assert trial_trace_file(trial) == trial / "agent" / "claude-code.txt"
    sessions = trial / "agent" / "sessions" / "projects" / "-app"
    sessions.mkdir(parents=True)
    shutil.copy(SESSION, sessions / SESSION.name)
    (sessions / "e9fb405b" / "subagents").mkdir(parents=True)
    shutil.copy(SESSION, sessions / "e9fb405b" / "subagents" / "agent-1.jsonl")
    (trial / "agent" / "claude-code.txt").unlink()
    assert trial_trace_file(trial) == sessions / SESSION.name  # a sub-agent's file is never the run
    assert trial_trace_file(job / "setup-db__M3n4B") is None  # the environment never started: nothing to read


def test_a_long_verifier_output_keeps_its_end() -> None:
    text = "\n".join(f"line {i}: " + "x" * 60 for i in range(200)) + "\n=== 3 failed, 10 passed ==="
    cut = tail(text)
    assert cut.endswith("=== 3 failed, 10 passed ===") and len(cut) <= OUTCOME_TAIL_CHARS + 80
    assert cut.startswith("[... first ") and cut.splitlines()[1].startswith("line ")


def test_swe_bench_outcome_names_the_failed_tests() -> None:
    runs = FIXTURES / "coding_runs" / "swebench_run"
    traces = {t.id: t for t in load_traces([runs], warn=lambda _: None)}
    failed = traces["example__calc-101"]
    assert failed.outcome is not None and failed.steps[-1].content == failed.outcome
    assert "FAIL_TO_PASS failed (1): tests/test_stats.py::test_mean_empty" in failed.outcome
    assert traces["example__calc-202"].outcome is None  # resolved, and only a summary says so


def test_cli_bench_inspect_and_view_of_a_harbor_job(job: Path, tmp_path: Path) -> None:
    env = {"COLUMNS": "400", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cli = [sys.executable, "-m", "localfa"]
    run = tmp_path / "run"
    proc = subprocess.run(
        [*cli, "bench", str(job), "--failed-only", "--methods", "heuristic", "--engine", "scripted", "--out", str(run), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["trace"] for r in records) == ["fix-dates__A1b2C", "write-report__T5k9Q"] and not any(r["error"] for r in records)
    log = job / "write-report__T5k9Q" / "agent" / "claude-code.txt"
    shown = subprocess.run([*cli, "inspect", str(log)], capture_output=True, text=True, timeout=120, env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "trace:        write-report__T5k9Q"
    assert f"task:         {TASK} (from agent/command-N/command.txt)" in lines
    assert "harness:      harbor: failed (reward 0 in result.json)" in lines
    at = lines.index("outcome:      Harbor verifier: reward 0 in result.json.")
    assert [x.strip() for x in lines[at + 1 : at + 3]] == [
        "The trial stopped with AgentTimeoutError: Agent execution timed out after 900.0 seconds",
        "verifier/test-stdout.txt:",
    ]
    assert "FAILED tests/test_outputs.py::test_report_exists - AssertionError: /app/report.md not found" in shown.stdout
    page = tmp_path / "view.html"
    viewed = subprocess.run(
        [*cli, "view", str(run), "--out", str(page), "--traces", str(job)], capture_output=True, text=True, timeout=120, env=env
    )
    assert viewed.returncode == 0, viewed.stderr
    # several traces: an index and one page per trace (localfa.view.sweep); the outcome is on the trial's page
    html = "\n".join(p.read_text() for p in [page, *sorted((tmp_path / "view-traces").glob("*.html"))])
    assert '<div class="task outcome"><b>Outcome</b> harbor: <b>failed</b> (reward 0 in result.json)' in html
    assert "test_report_exists - AssertionError: /app/report.md not found" in html


def test_harness_traces_leaves_a_trial_without_any_log_out(job: Path) -> None:
    said: list[str] = []
    got = harness_traces(trace_files_with_roots([job]), read_trace_file, lambda *a: None, [job], True, said.append)
    assert all(t.task.strip() for _, _, t in got)
    assert said[0].endswith("1 trial without an agent log (agent/trajectory.json, agent/claude-code.txt, agent/sessions/)")
