"""Coding-agent importers (ATIF 1.0-1.7, mini-swe-agent, SWE-agent) on fixtures written for these
tests (tests/fixtures/coding), and on the real public samples in ../shared/data/coding-agents."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from localfa.traces.errors import TraceError
from localfa.traces.lineview import LineView
from localfa.traces.load import load_trace
from localfa.traces.model import Trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "coding"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "coding-agents"


def _kinds(trace: Trace) -> str:
    return "".join("A" if s.kind == "action" else "o" for s in trace.steps)


def _write(tmp_path: Path, name: str, data: object) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def _err(path: Path) -> str:
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    assert str(exc.value).startswith(f"{path}: ")
    return str(exc.value)[len(str(path)) + 2 :]


# ---- ATIF ----------------------------------------------------------------------------------------


def test_atif_1_2_two_tool_calls_in_one_step_each_result_joined_to_its_call() -> None:
    t = load_trace(FIX / "atif_v1_2.json")
    assert t.format == "atif" and t.id == "atif_v1_2"
    assert [a.name for a in t.agents] == ["terminus (qwen3-32b)"]
    assert t.task.startswith("Count the lines of /data/log.txt")
    assert t.final_output == "Done: /out/count.txt holds 0."
    assert _kinds(t) == "ooAooAooA"
    act = t.steps[2]
    assert [c["id"] for c in act.tool_calls] == ["call_head", "call_grep"]
    assert act.content.startswith("<reasoning>\nTwo independent reads") and act.content.endswith("count the matches at once.")
    # results in the order the log gives them, each naming its call and that call's tool
    grep, head = t.steps[3], t.steps[4]
    assert (grep.call_id, grep.name, grep.content) == ("call_grep", "bash", "0")
    assert (head.call_id, head.name) == ("call_head", "bash") and "ERROR disk full" in head.content
    assert grep.parent_span_id == head.parent_span_id == act.span_id == "3"
    # a v1.2 system step carrying an observation: the result is the system's, not an agent's
    assert (t.steps[7].agent, t.steps[7].kind, t.steps[7].content) == (
        "system",
        "observation",
        "context trimmed: 2 old tool outputs summarised",
    )
    assert t.action_steps() == [2, 5, 8]
    assert {t.steps[i].agent for i in t.action_steps()} == {"terminus (qwen3-32b)"}
    assert t.metadata["schema_version"] == "ATIF-v1.2" and "import_warnings" not in t.metadata


@pytest.mark.parametrize("minor", range(8))
def test_atif_every_version_1_0_to_1_7_reads(tmp_path: Path, minor: int) -> None:
    data = json.loads((FIX / "atif_v1_2.json").read_text())
    data["schema_version"] = f"ATIF-v1.{minor}"
    if minor >= 7:
        data["trajectory_id"] = "doc-1"
        del data["session_id"]  # optional from 1.7
    t = load_trace(_write(tmp_path, "t.json", data))
    assert t.format == "atif" and _kinds(t) == "ooAooAooA" and t.metadata["schema_version"] == f"ATIF-v1.{minor}"


def test_atif_1_7_embedded_subagent_steps_follow_the_delegating_call() -> None:
    t = load_trace(FIX / "atif_v1_7_subagent.json")
    lead, sub = "claude-code (claude-sonnet-4-5)", "explore (claude-haiku-4-5)"
    assert [a.name for a in t.agents] == [lead, sub]
    assert t.agents[0].tools == ["Bash", "Task"]
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("user", "observation"),  # is_copied_context: not this run's
        ("user", "observation"),  # the task
        (lead, "action"),  # delegates with a Task call
        ("user", "observation"),  # the sub-agent's own task
        (sub, "action"),
        ("environment", "observation"),
        (sub, "action"),
        ("environment", "observation"),  # the Task call's result, after the sub-agent's steps
        (lead, "action"),
        ("environment", "observation"),
        (lead, "action"),
    ]
    assert t.steps[0].name == "copied_context"
    assert t.steps[5].call_id == "toolu_s1" and t.steps[5].name == "Grep"
    assert t.steps[7].call_id == "toolu_01" and t.steps[7].name == "Task"
    assert t.task == "Fix the failing test in tests/test_dates.py; the screenshot shows the failure.\n<image>"  # 1.6 content parts
    assert t.final_output == "I changed the format string; the test should pass now."  # the lead's, not the sub-agent's
    assert t.steps[4].span_id == "subagent[explore-1]:2"


def test_atif_subagent_in_a_file_beside_the_trace_and_unresolved_refs(tmp_path: Path) -> None:
    data = json.loads((FIX / "atif_v1_7_subagent.json").read_text())
    sub = data.pop("subagent_trajectories")[0]
    data["schema_version"] = "ATIF-v1.6"
    data["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [{"session_id": "s-9", "trajectory_path": "explore.json"}]
    _write(tmp_path, "explore.json", sub)
    t = load_trace(_write(tmp_path, "parent.json", data))
    assert [a.name for a in t.agents] == ["claude-code (claude-sonnet-4-5)", "explore (claude-haiku-4-5)"]
    assert len(t.steps) == 11
    (tmp_path / "explore.json").unlink()
    t = load_trace(tmp_path / "parent.json")
    assert len(t.agents) == 1 and len(t.steps) == 7
    assert "explore.json" in t.metadata["import_warnings"][0] and "not found" in t.metadata["import_warnings"][0]


def test_atif_subagent_with_the_lead_agents_name_is_a_distinct_agent(tmp_path: Path) -> None:
    data = json.loads((FIX / "atif_v1_7_subagent.json").read_text())
    data["subagent_trajectories"][0]["agent"] = dict(data["agent"])
    t = load_trace(_write(tmp_path, "t.json", data))
    names = [a.name for a in t.agents]
    assert names == ["claude-code (claude-sonnet-4-5)", "claude-code/explore-1 (claude-sonnet-4-5)"]
    assert t.agent_names() == ["user", "claude-code", "claude-code/explore-1", "environment"]


def test_atif_unknown_source_call_id_is_kept_with_a_warning(tmp_path: Path) -> None:
    data = json.loads((FIX / "atif_v1_2.json").read_text())
    data["steps"][2]["observation"]["results"][0]["source_call_id"] = "call_nope"
    t = load_trace(_write(tmp_path, "t.json", data))
    assert t.steps[3].call_id == "call_nope" and t.steps[3].name is None
    assert "call_nope" in t.metadata["import_warnings"][0] and "step_id 3" in t.metadata["import_warnings"][0]


def test_harbor_trajectory_id_is_the_trial_name(tmp_path: Path) -> None:
    trial = tmp_path / "job" / "fix-dates__AbC12" / "agent"
    trial.mkdir(parents=True)
    (trial / "trajectory.json").write_text((FIX / "atif_v1_2.json").read_text())
    assert load_trace(trial / "trajectory.json").id == "fix-dates__AbC12"


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda d: d["steps"][2].update(source="bot"), "steps[2].source: must be one of system, user, agent, got 'bot'"),
        (lambda d: d["steps"][2].pop("step_id"), "steps[2].step_id: must be a whole number (from 1), got null"),
        (lambda d: d["steps"][2]["tool_calls"][1].pop("function_name"), "steps[2].tool_calls[1]: 'function_name' must name the tool"),
        (lambda d: d["steps"][2].update(observation=[1]), "steps[2].observation: must be an object with 'results'"),
        (lambda d: d["steps"][2]["observation"].update(results={}), "steps[2].observation.results: must be an array"),
        (lambda d: d["steps"][3].update(message=5), "steps[3]: 'message' must be text, got a number"),
        (lambda d: d.update(schema_version="ATIF-v2.0"), "'schema_version' 'ATIF-v2.0': only ATIF v1.x is read"),
        (lambda d: d.update(agent="terminus"), "'agent' must be an object"),
        (lambda d: d.update(steps=[]), "empty history: 'steps' holds no steps"),
        (lambda d: d.update(steps=[s for s in d["steps"] if s["source"] != "agent"]), "no agent step"),
    ],
)
def test_atif_bad_input_names_the_field(tmp_path: Path, mutate, expected: str) -> None:
    data = copy.deepcopy(json.loads((FIX / "atif_v1_2.json").read_text()))
    mutate(data)
    assert expected in _err(_write(tmp_path, "bad.json", data))


# ---- mini-swe-agent -----------------------------------------------------------------------------


def test_mini_swe_agent_text_trajectory() -> None:
    t = load_trace(FIX / "mini_swe_agent.traj.json")
    assert t.format == "mini-swe-agent" and t.id == "example__calc-101"
    assert [a.name for a in t.agents] == ["mini-swe-agent (openai/gpt-5-mini)"]
    assert t.agents[0].system_prompt.startswith("You are a helpful assistant")
    assert t.task == "mean() crashes on an empty list with ZeroDivisionError; it should return 0.0 for an empty list."
    assert t.final_output.startswith("diff --git a/calc/stats.py") and "max(len(xs) - 1, 1)" in t.final_output
    assert _kinds(t) == "ooAoAoAoAoAo"
    assert [s.name for s in t.steps if s.kind == "observation"] == [None, "task", None, "format_error", None, "timeout", None]
    assert {t.steps[i].agent for i in t.action_steps()} == {"mini-swe-agent (openai/gpt-5-mini)"}
    assert t.metadata["exit_status"] == "Submitted"


def test_mini_swe_agent_v2_tool_calls_join_their_results(tmp_path: Path) -> None:
    data = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"exit_status": "Submitted", "submission": "", "config": {"model": {"model_name": "m"}}},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "Fix it."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            {"role": "assistant", "content": "done"},
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
        ],
    }
    t = load_trace(_write(tmp_path, "x.traj.json", data))
    assert t.id == "x" and _kinds(t) == "ooAoA"
    assert t.steps[2].content == 'bash({"command": "ls"})' and t.steps[2].tool_calls[0]["id"] == "c1"
    assert t.steps[3].call_id == "c1" and t.steps[3].role == "tool"
    assert t.final_output == "done"  # an empty submission falls back to the last answer


def test_mini_swe_agent_bad_input(tmp_path: Path) -> None:
    base = json.loads((FIX / "mini_swe_agent.traj.json").read_text())
    bad = copy.deepcopy(base)
    del bad["messages"][3]["role"]
    assert "messages[3]: 'role' must name the speaker" in _err(_write(tmp_path, "a.traj.json", bad))
    bad = copy.deepcopy(base)
    bad["messages"][4]["content"] = 7
    assert "messages[4]: 'content' must be text, got a number" in _err(_write(tmp_path, "b.traj.json", bad))
    bad = copy.deepcopy(base)
    bad["messages"] = [m for m in bad["messages"] if m["role"] != "assistant"]
    assert "no 'assistant' message" in _err(_write(tmp_path, "c.traj.json", bad))


# ---- SWE-agent -----------------------------------------------------------------------------------


def test_swe_agent_traj() -> None:
    t = load_trace(FIX / "swe_agent.traj")
    assert t.format == "swe-agent" and t.id == "swe_agent"
    assert [a.name for a in t.agents] == ["SWE-agent (claude-3-5-sonnet-20241022)"]
    assert t.task == "parse_date(' 2024-01-05 ') raises ValueError: leading and trailing spaces should be ignored."
    assert t.final_output.lstrip().startswith("diff --git a/src/dates.py")
    assert _kinds(t) == "ooAoAoAoAo"
    assert t.metadata["demonstrations_skipped"] == 1
    assert [(t.steps[i].call_id, t.steps[i].name) for i in (3, 5, 7)] == [
        ("call_a1", "find_file"),
        ("call_a2", "open"),
        ("call_a3", "edit"),
    ]
    assert t.steps[6].content.startswith("The issue says surrounding spaces") and "end_of_edit" in t.steps[6].content


def test_swe_agent_bad_turn(tmp_path: Path) -> None:
    data = json.loads((FIX / "swe_agent.traj").read_text())
    data["trajectory"][2] = "edit"
    assert "trajectory[2]: expected a turn object, got a string" in _err(_write(tmp_path, "bad.traj", data))
    data["trajectory"][2] = {"observation": "x"}
    assert "trajectory[2]: turn has no 'action'" in _err(_write(tmp_path, "bad.traj", data))


# ---- the line view -------------------------------------------------------------------------------


def test_line_view_marks_observations_and_their_calls() -> None:
    view = LineView(load_trace(FIX / "atif_v1_2.json"))
    first, _ = view.lines_of_step(3)
    assert view.lines[first].startswith(
        '{"step_id": 3, "agent": "environment", "role": "tool", "name": "bash", "parent_span_id": "3", "kind": "observation", "call_id": "call_grep"'
    )
    assert '"kind"' not in view.lines[view.line_of_step(2)]


# ---- real public runs ------------------------------------------------------------------------------

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/coding-agents is absent")


@needs_shared
def test_real_swe_agent_traj_is_not_taken_for_who_and_when() -> None:
    t = load_trace(SHARED / "6e44b9__sweagenttestrepo-1c2844.traj")
    assert t.format == "swe-agent" and t.agents[0].name == "SWE-agent (gpt-4o)"
    assert t.task.startswith("SyntaxError: invalid syntax")
    assert t.final_output and "def division(a: float, b: float) -> float:" in t.final_output
    assert set(_kinds(t)[2:]) == {"A", "o"} and _kinds(t)[2] == "A"


@needs_shared
@pytest.mark.parametrize("name", ["astropy__astropy-14182", "astropy__astropy-7606"])
def test_real_mini_swe_agent_runs(name: str) -> None:
    t = load_trace(SHARED / f"{name}.traj.json")
    assert t.format == "mini-swe-agent" and t.id == name
    assert t.agents[0].name == "mini-swe-agent (google/gemini-3-pro-preview)"
    assert not t.task.startswith("<pr_description>") and len(t.task) > 50
    assert t.final_output and t.final_output.startswith("diff --git")
    assert all(t.steps[i].role == "assistant" for i in t.action_steps())
    assert all(s.role == "assistant" for s in t.steps if s.kind == "action")


@pytest.mark.parametrize(
    "name,fmt", [("atif_trajectory.json", "atif"), ("mini_swe_agent.traj.json", "mini-swe-agent"), ("swe_agent.traj", "swe-agent")]
)
def test_examples_load_as_their_format(name: str, fmt: str) -> None:
    t = load_trace(Path(__file__).resolve().parents[2] / "examples" / "coding" / name)
    assert t.format == fmt and t.task and t.final_output and t.action_steps() != list(range(len(t.steps)))


def test_atif_1_4_after_the_rfc_example() -> None:
    t = load_trace(FIX / "atif_v1_4_openhands.json")
    assert [a.name for a in t.agents] == ["openhands (gpt-5)"]
    assert t.task == "Create a file called hello.txt with 'Hello, world!' as the content."
    assert t.final_output == "hello.txt now contains the greeting." and _kinds(t) == "ooAoAoAo"
    assert [s.name for s in t.steps if s.call_id] == ["execute_bash", "execute_bash", "finish"]
