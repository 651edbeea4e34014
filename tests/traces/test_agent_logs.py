"""The runs developers have (issue 37): Claude Code session logs and stream-json, Codex rollouts,
OpenHands trajectories, inspect_ai logs, history-only SWE-agent trajectories and Vercel AI SDK
spans, each read from a public sample (tests/fixtures/agent_logs/README.md says where from)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from localfa.traces.errors import TraceError
from localfa.traces.load import load_trace, load_traces, trace_files_with_roots
from localfa.traces.model import Trace
from localfa.traces.runs import harness_traces

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "agent_logs"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "coding-agents"
SWE_AGENT = SHARED / "6e44b9__sweagenttestrepo-1c2844.traj"


def _kinds(trace: Trace) -> str:
    return "".join("A" if s.kind == "action" else "o" for s in trace.steps)


def _blameable(trace: Trace) -> set[str]:
    """The agents that acted somewhere: what a method may answer."""
    return {s.agent for s in trace.steps if s.kind == "action"}


def _joined(trace: Trace) -> None:
    """Every observation that names a call answers a call an earlier action made, of that tool."""
    calls = {c["id"]: c["name"] for s in trace.steps if s.kind == "action" for c in s.tool_calls if c.get("id")}
    for s in trace.steps:
        if s.kind == "observation" and s.call_id is not None:
            assert s.call_id in calls, (s.index, s.call_id)
            assert s.name == calls[s.call_id], (s.index, s.name)


def test_claude_code_session_log() -> None:
    t = load_trace(FIX / "claude_code" / "e9fb405b-169f-40eb-9396-7e75076f045d.jsonl")
    assert t.format == "claude-code" and t.task.startswith('@"solution-architect (agent)" analyze existing CLI')
    assert [a.name for a in t.agents] == ["Claude Code (claude-sonnet-4-5-20250929)"]
    # three streamed answers (thinking, text, tool use written line by line) are three steps
    assert _kinds(t) == "oAoAoA"
    assert (
        t.steps[1].content.startswith("<reasoning>\nThe user is asking") and "I'll use the solution-architect agent" in t.steps[1].content
    )
    assert [c["name"] for c in t.steps[1].tool_calls] == ["Task"] and t.steps[1].tool_calls[0]["arguments"][
        "subagent_type"
    ] == "solution-architect"
    assert (t.steps[4].call_id, t.steps[4].name) == ("toolu_bdrk_01APXZu7yB82EDMJwYR5jwSQ", "Bash") and "tech-spec" in t.steps[4].content
    assert (
        t.final_output
        == "The solution-architect agent has completed the analysis. Let me retrieve the specification document that was created."
    )
    assert t.metadata["skipped_records"] == {"file-history-snapshot": 1, "summary": 1}
    _joined(t)


def test_claude_code_sidechain_is_a_sub_agent_placed_before_its_task_result() -> None:
    t = load_trace(FIX / "claude_code" / "sidechain_integrated.jsonl")
    lead, sub = "Claude Code (claude-sonnet-4-5-20250929)", "general-purpose (claude-sonnet-4-5-20250929)"
    assert [a.name for a in t.agents] == [lead, sub]
    assert [(s.kind, s.agent) for s in t.steps if s.kind == "action"] == [("action", lead), ("action", sub), ("action", lead)]
    task_result = next(s for s in t.steps if s.name == "Task")
    sub_steps = [s.index for s in t.steps if s.agent == sub]
    assert max(sub_steps) < task_result.index < t.steps[-1].index  # the sub-agent's work, then what it returned
    assert t.steps[sub_steps[0]].tool_calls[0]["name"] == "Grep"  # one streamed answer: text and the Grep call
    assert _blameable(t) == {lead, sub}


def test_claude_code_stream_json_with_a_sub_agent() -> None:
    t = load_trace(FIX / "claude_code" / "stream.jsonl")
    assert t.format == "claude-code" and t.task.startswith("Fix the failing test")
    assert [a.name for a in t.agents] == ["Claude Code (claude-sonnet-4-5-20250929)", "Explore (claude-sonnet-4-5-20250929)"]
    assert _kinds(t) == "oAoAoAoAoAoA"  # the sub-agent's prompt (step 4) is an observation
    assert [s.agent.split(" ")[0] for s in t.steps if s.kind == "action"] == ["Claude", "Claude", "Explore", "Explore", "Claude", "Claude"]
    assert t.final_output == "Fixed: days above 30 are now rejected."
    assert t.metadata["exit_status"] == "success" and t.metadata["num_turns"] == 6
    assert _blameable(t) == {a.name for a in t.agents}
    _joined(t)


def test_claude_code_real_stream_json_with_an_explore_sub_agent() -> None:
    """A real `claude -p --output-format stream-json --verbose` capture (2.1.6): the sub-agent's
    lines carry `parent_tool_use_id`, its parallel calls come one line each under one message id."""
    t = load_trace(FIX / "claude_code" / "stream-task-explore.jsonl")
    lead, sub = "Claude Code (claude-haiku-4-5-20251001)", "Explore (claude-haiku-4-5-20251001)"
    assert t.format == "claude-code" and [a.name for a in t.agents] == [lead, sub]
    assert t.task == ""  # `claude -p PROMPT` does not print the prompt back
    assert _kinds(t) == "AoAoooooA"
    assert [(s.agent, [c["name"] for c in s.tool_calls]) for s in t.steps if s.kind == "action"] == [
        (lead, ["Task"]),
        (sub, ["Glob"] * 4),  # four tool_use lines of one streamed answer: one step
        (lead, []),
    ]
    assert t.steps[0].tool_calls[0]["arguments"]["subagent_type"] == "Explore"
    assert (t.steps[1].name, t.steps[1].agent) == ("subagent prompt", "user") and t.steps[1].content.startswith("Find all Python files")
    assert [(s.name, s.call_id) for s in t.steps[3:7]] == [
        ("Glob", "toolu_01HXknzczvdjAmJnrNXy5dya"),  # results in the order they came back, not the calls'
        ("Glob", "toolu_018CqnBNTBvvYNnksWmkRcHv"),
        ("Glob", "toolu_01R9UdtrqE7nr2MMAChwFdcY"),
        ("Glob", "toolu_01MqQjQKDRMdf7F9NPZj8GFC"),
    ]
    assert t.steps[3].content.endswith("scripts\\investigate_task_output.py")
    task_result = t.steps[7]  # what the sub-agent returned, after all its own steps
    assert (task_result.name, task_result.call_id) == ("Task", "toolu_01EMBD2Ez8pt8LWj5ovow1mU")
    assert "### Summary" in task_result.content and "agentId: ae27ebb" in task_result.content
    assert t.final_output == "Done" and t.steps[-1].agent == lead
    assert t.metadata["exit_status"] == "success" and t.metadata["num_turns"] == 2
    assert t.metadata["skipped_records"] == {"system": 1}  # the SessionStart hook_response line
    assert _blameable(t) == {lead, sub}
    _joined(t)


def test_codex_rollouts() -> None:
    real = load_trace(FIX / "codex" / "rollout-2026-06-05T04-58-20-019e9625-802f-7e91-840a-cfe88d14117a.jsonl")
    assert real.format == "codex" and [a.name for a in real.agents] == ["Codex (gpt-5.5)"]
    assert (real.task, real.final_output, _kinds(real)) == ("[REDACTED_PROMPT]", "[REDACTED_ASSISTANT_TEXT]", "oooA")
    assert [s.agent for s in real.steps[:2]] == ["system", "system"]  # developer message, environment context
    tools = load_trace(FIX / "codex" / "rollout-tools.jsonl")
    assert _kinds(tools) == "ooAoAoA" and [c["name"] for s in tools.steps for c in s.tool_calls] == ["shell", "apply_patch"]
    assert tools.steps[3].content.startswith("F\nFAILED tests/test_dates.py") and tools.steps[3].name == "shell"
    assert "+    if not 1 <= day <= 30:" in tools.steps[4].tool_calls[0]["arguments"]
    assert tools.final_output.startswith("Days above 30 are now rejected")
    _joined(tools)


def test_openhands_observations_are_never_agent_steps() -> None:
    t = load_trace(FIX / "openhands" / "basic.json")
    assert t.format == "openhands" and t.task.startswith("Please create a simple 2048 game")
    assert [a.name for a in t.agents] == ["OpenHands (claude-3-5-sonnet-20241022)"] and _blameable(t) == {t.agents[0].name}
    assert _kinds(t) == "oAoAoA"  # events 4 and 6 say source "agent" but are observations
    edit = t.steps[1].tool_calls[0]
    assert edit["name"] == "str_replace_editor" and json.loads(edit["arguments"])["file_text"].startswith("import random")
    assert t.steps[2].content.startswith("--- /workspace/game_2048.py") and t.steps[2].agent == "environment"
    assert t.final_output == "I have created the 2048 game in /workspace/game_2048.py."
    assert t.metadata["skipped_events"] == {"agent_state_changed": 2}
    _joined(t)


def test_openhands_delegate_is_an_agent_of_its_own(tmp_path: Path) -> None:
    events = json.loads((FIX / "openhands" / "basic.json").read_text())
    delegate = [
        {
            "id": 10,
            "source": "agent",
            "action": "delegate",
            "args": {"agent": "BrowsingAgent", "inputs": {"task": "look it up"}, "thought": "Delegating."},
        },
        {"id": 11, "source": "agent", "action": "browse", "args": {"url": "https://example.org", "thought": "Opening the page."}},
        {"id": 12, "source": "agent", "observation": "browse", "cause": 11, "content": "Example Domain"},
        {"id": 13, "source": "agent", "observation": "delegate", "cause": 10, "content": "BrowsingAgent finishes task with content: done"},
    ]
    p = tmp_path / "delegated.json"
    p.write_text(json.dumps(events[:3] + delegate + events[3:]))
    t = load_trace(p)
    assert [a.name for a in t.agents] == ["OpenHands (claude-3-5-sonnet-20241022)", "BrowsingAgent"]
    assert [s.agent for s in t.steps if s.kind == "action"][-3:] == [
        "BrowsingAgent",
        "OpenHands (claude-3-5-sonnet-20241022)",
        "OpenHands (claude-3-5-sonnet-20241022)",
    ]
    browse = next(s for s in t.steps if s.kind == "observation" and s.content == "Example Domain")
    assert browse.call_id == "11" and browse.name == "browse"


@pytest.mark.parametrize("name", ["sums.eval", "sums.json"])
def test_inspect_ai_logs_one_trace_per_sample_with_its_score(name: str) -> None:
    traces = load_traces(FIX / "inspect_ai" / name)
    assert [t.id for t in traces] == ["sums/sum-1", "sums/sum-2"]
    right, wrong = traces
    assert right.format == "inspect_ai" and [a.name for a in right.agents] == ["sums agent (mockllm/model)"]
    assert _kinds(wrong) == "ooAoAo" and wrong.task.startswith("What is 3 + 4?")
    assert [c["name"] for s in wrong.steps for c in s.tool_calls] == ["add", "submit"]
    assert (wrong.steps[3].content, wrong.steps[3].name, wrong.final_output, wrong.ground_truth) == ("7", "add", "10", "7")
    assert right.metadata["harness"]["failed"] is False and wrong.metadata["harness"] == {
        "harness": "inspect_ai",
        "failed": True,
        "why": "score match='I'",
        "reward": 0.0,
    }
    _joined(wrong)
    with pytest.raises(TraceError, match="holds 2 runs"):
        load_trace(FIX / "inspect_ai" / name)


def test_swe_agent_history_only_traj(tmp_path: Path) -> None:
    if not SWE_AGENT.is_file():
        pytest.skip("the shared SWE-agent sample is not on this machine")
    data = json.loads(SWE_AGENT.read_text())
    data.pop("trajectory")
    p = tmp_path / "6e44b9__sweagenttestrepo-1c2844.traj"
    p.write_text(json.dumps(data))
    t = load_trace(p)
    assert t.format == "swe-agent" and [a.name for a in t.agents] == ["SWE-agent (gpt-4o)"]
    assert t.task.startswith("SyntaxError: invalid syntax") and t.final_output.lstrip().startswith("diff --git")
    assert _kinds(t) == "ooAoAoAoAo" and [c["name"] for s in t.steps for c in s.tool_calls][:2] == ["find_file", "open"]
    assert load_trace(p, format="swe-agent").steps == t.steps
    _joined(t)


def test_vercel_ai_sdk_spans() -> None:
    t = load_trace(FIX / "vercel_ai" / "weather_spans.json")
    assert t.format == "vercel-ai" and t.task == "What should I wear in Paris today?"
    assert [a.name for a in t.agents] == ["weather-agent"]
    assert [(s.name, [c["name"] for c in s.tool_calls]) for s in t.steps] == [
        ("ai.generateText.doGenerate", ["weather"]),
        ("weather", []),
        ("ai.generateText.doGenerate", []),
    ]
    assert '"tempC": 31' in (t.steps[1].observation or "") and t.final_output == "It is cold in Paris (31°F): wear a warm coat."


def test_vercel_ai_sdk_v6_spans_as_captured_without_a_context_manager() -> None:
    """Real AI SDK 6.0.68 spans (an InMemorySpanExporter dump): with no context manager registered
    the provider call and its outer call have no `parentSpanId` and different trace ids, so they
    are two traces: nothing links them but their order in the file."""
    call, outer = load_traces(FIX / "vercel_ai" / "v6_generate_text_messages.json")
    assert (call.id, outer.id) == ("v6_generate_text_messages/edff2fc5854be617", "v6_generate_text_messages/673a889f59126f8b")
    assert call.format == "vercel-ai" and [a.name for a in call.agents] == ["test-generate-text-messages"]
    assert call.agents[0].system_prompt == "You are a helpful assistant."
    assert call.task == "What is 2 + 2?"  # the first user turn the call was sent
    assert [(s.kind, s.name, s.span_id) for s in call.steps] == [("action", "ai.generateText.doGenerate", "6c0201026326855d")]
    assert call.steps[0].agent == "test-generate-text-messages" and call.steps[0].content == "3 + 3 equals 6."
    assert "[assistant] 2 + 2 equals 4." in (call.steps[0].input or "")
    assert call.final_output == "3 + 3 equals 6." and call.metadata["traces_in_file"] == 2
    # the outer call, recorded without its provider call, is that call's one step
    assert outer.task == "What is 2 + 2?\nAnd what is 3 + 3?"  # the user turns of `ai.prompt`
    assert [(s.kind, s.name, s.content) for s in outer.steps] == [("action", "ai.generateText", "3 + 3 equals 6.")]


def test_vercel_ai_sdk_v6_capture_of_ten_unrelated_calls_is_ten_traces(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole real capture (10 spans, each its own trace id, none with a parent: the
    openinference-vercel fixture, embeddings shortened) is 10 runs, never one run of 4 "agents"."""
    traces = load_traces(FIX / "vercel_ai" / "v6_all_spans.json")
    assert len(traces) == 10 and len({t.id for t in traces}) == 10
    assert all(len(t.steps) == 1 and len(t.agents) == 1 for t in traces)
    by_name = {t.steps[0].name: t for t in traces}
    assert by_name["ai.streamText.doStream"].steps[0].content.startswith("In code’s embrace")
    embedded = by_name["ai.embed"].steps[0]
    assert (embedded.kind, embedded.content, embedded.observation) == (
        "observation",
        "The quick brown fox jumps over the lazy dog.",
        "[1 embedding vector]",
    )
    with pytest.raises(TraceError, match="holds 10 runs"):
        load_trace(FIX / "vercel_ai" / "v6_all_spans.json")
    import localfa.cli as cli

    assert cli.main(["inspect", str(FIX / "vercel_ai" / "v6_all_spans.json"), "--json"]) in (0, None)
    assert len(json.loads(capsys.readouterr().out)) == 10


def test_inspect_ai_scores_are_the_verdict_for_failed_only(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(FIX / "inspect_ai" / "sums.eval", folder)
    said: list[str] = []

    def fail(root: Path, f: Path, exc: TraceError) -> None:
        raise exc

    kept = harness_traces(trace_files_with_roots([folder]), load_traces, fail, [folder], True, said.append)
    assert [t.id for _, _, t in kept] == ["sums/sum-2"]
    assert said == ["--failed-only: 1 of 2 trials kept as failed by the harness; 1 skipped as passed (full score)"]


def test_two_runs_of_one_instance_are_two_traces_and_ids_follow_one_rule(tmp_path: Path) -> None:
    src = SHARED / "astropy__astropy-14182.traj.json"
    if not src.is_file():
        pytest.skip("the shared mini-swe-agent sample is not on this machine")
    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        shutil.copy(src, tmp_path / run / src.name)
    (tmp_path / "trajs").mkdir()
    shutil.copy(src, tmp_path / "trajs" / "astropy__astropy-7606.traj.json")
    (tmp_path / "astropy__astropy-1.traj.json").write_bytes(src.read_bytes())
    kept = harness_traces(trace_files_with_roots([tmp_path]), load_traces, lambda r, f, e: None, [tmp_path], False, print)
    assert sorted(t.id for _, _, t in kept) == [
        "astropy__astropy-1",
        "run1/astropy__astropy-14182",
        "run2/astropy__astropy-14182",
        "trajs/astropy__astropy-7606",
    ]
    assert {t.metadata["instance_id"] for _, _, t in kept} == {"astropy__astropy-14182"}  # what the file says stays in metadata


@pytest.mark.parametrize(
    ("name", "fmt", "agents", "steps"),
    [
        ("claude_code/e9fb405b-169f-40eb-9396-7e75076f045d.jsonl", "claude-code", 1, "6 (3 action, 3 observation)"),
        ("claude_code/stream.jsonl", "claude-code", 2, "12 (6 action, 6 observation)"),
        ("codex/rollout-2026-06-05T04-58-20-019e9625-802f-7e91-840a-cfe88d14117a.jsonl", "codex", 1, "4 (1 action, 3 observation)"),
        ("openhands/basic.json", "openhands", 1, "6 (3 action, 3 observation)"),
        ("inspect_ai/sums.eval", "inspect_ai", 1, "6 (2 action, 4 observation)"),
        ("vercel_ai/weather_spans.json", "vercel-ai", 1, "3"),
        ("vercel_ai/v6_generate_text_messages.json", "vercel-ai", 1, "1 (1 action, 0 observation)"),
        ("vercel_ai/v6_all_spans.json", "vercel-ai", 1, "1 (1 action, 0 observation)"),
    ],
)
def test_localfa_inspect_detects_and_reads_each_format(
    name: str, fmt: str, agents: int, steps: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import localfa.cli as cli

    assert cli.main(["inspect", str(FIX / name), "--json"]) in (0, None)
    info = json.loads(capsys.readouterr().out)
    first = info[0] if isinstance(info, list) else info
    assert (first["format"], first["format_source"], len(first["agents"])) == (fmt, "detected", agents)
    assert first["task"] and first["final_output"]
    n, _, rest = steps.partition(" ")
    assert first["steps"] == int(n) and (
        not rest or rest == f"({first['action_steps']} action, {first['steps'] - first['action_steps']} observation)"
    )
    assert all(r["agent"] in first["agents"] for r in first["per_step"] if r["kind"] == "action")  # only real agents act


def test_bad_agent_logs_get_one_line_naming_the_field(tmp_path: Path) -> None:
    lines = (FIX / "claude_code" / "stream.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    rec["message"]["content"][1]["name"] = ["Bash"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:2], json.dumps(rec), *lines[3:]]))
    with pytest.raises(TraceError, match=r"line 3\.message\.content\[1\]\.name: must be text, got an array"):
        load_traces(bad)
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TraceError, match="not an inspect_ai .eval archive: not a zip file"):
        load_traces(broken)
    events = tmp_path / "events.json"
    events.write_text(json.dumps([{"id": 1, "source": "agent", "action": "run", "args": {}}, {"id": 2, "source": "agent", "thing": 1}]))
    with pytest.raises(TraceError, match=r"events\[1\]: an event has neither 'action' nor 'observation'"):
        load_traces(events, format="openhands")
