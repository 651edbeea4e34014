"""Importers: each fixture (written from its format's public description) loads and round-trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localfa.traces import FORMATS, TraceError, iter_trace_files, load_trace
from localfa.traces.importers import detect
from localfa.traces.importers.spans import flatten_attributes, iso_to_ns
from localfa.traces.model import Trace

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces"

EXPECTED_FORMAT = {  # file -> (format, steps)
    "whowhen_algorithm.json": ("whowhen", 5),
    "whowhen_handcrafted.json": ("whowhen", 6),
    "ag2_groupchat.json": ("messages", 5),
    "ag2_chat_result.json": ("messages", 4),
    "openai_messages.jsonl": ("messages", 5),
    "magentic_one_log.jsonl": ("messages", 5),
    "autogen_agentchat.json": ("messages", 4),
    "openinference_trail.json": ("openinference", 8),
    "openinference_trail_row.json": ("openinference", 8),
    "openinference_phoenix.jsonl": ("openinference", 4),
    "otel_genai_otlp.json": ("otel-genai", 5),
    # real span-export shapes (tests/traces/test_span_exports.py)
    "openinference_smolagents_otlp.jsonl": ("openinference", 7),
    "openinference_openai_agents.jsonl": ("openinference", 5),
    "openinference_langgraph.json": ("openinference", 4),
    "otel_genai_any_agent.json": ("otel-genai", 5),
    "otel_genai_dialects.json": ("otel-genai", 4),
    "otel_console_export.json": ("otel-genai", 3),
    "spans_parent_shapes.json": ("otel-genai", 4),
}


def test_formats_tuple() -> None:
    assert FORMATS == (
        "atif",
        "swe-agent",
        "mini-swe-agent",
        "claude-code",
        "codex",
        "openhands",
        "inspect_ai",
        "whowhen",
        "telbench",
        "vercel-ai",
        "openinference",
        "otel-genai",
        "messages",
    )


def test_every_fixture_is_covered() -> None:
    assert sorted(p.name for p in FIX.iterdir()) == sorted(EXPECTED_FORMAT)


@pytest.mark.parametrize("name", sorted(EXPECTED_FORMAT))
def test_fixture_detect_and_round_trip(name: str) -> None:
    path = FIX / name
    trace = load_trace(path)
    fmt, n_steps = EXPECTED_FORMAT[name]
    assert trace.format == fmt
    assert trace.source == str(path)
    assert [s.index for s in trace.steps] == list(range(n_steps))
    # the Trace JSON round-trips exactly
    assert Trace.model_validate_json(trace.model_dump_json()) == trace
    # loading is deterministic, and the forced format gives the same trace
    assert load_trace(path) == trace
    assert load_trace(path, format=trace.format) == trace


@pytest.mark.parametrize("name", sorted(EXPECTED_FORMAT))
def test_fixture_wrong_forced_format_is_a_clear_error(name: str) -> None:
    path = FIX / name
    actual, _ = EXPECTED_FORMAT[name]
    for fmt in FORMATS:
        if fmt == actual:
            continue
        with pytest.raises(TraceError) as info:
            load_trace(path, format=fmt)
        assert str(info.value).startswith(f"{path}: ")
        assert "\n" not in str(info.value)


def test_unknown_forced_format() -> None:
    with pytest.raises(TraceError, match="unknown format 'csv'"):
        load_trace(FIX / "ag2_groupchat.json", format="csv")


def test_whowhen_algorithm_fixture() -> None:
    raw = json.loads((FIX / "whowhen_algorithm.json").read_text())
    t = load_trace(FIX / "whowhen_algorithm.json")
    assert t.id == "whowhen_algorithm" and t.subset == "algorithm-generated"
    assert t.task == raw["question"] and t.ground_truth == raw["ground_truth"]
    assert [s.content for s in t.steps] == [h["content"] for h in raw["history"]]
    assert [s.agent for s in t.steps] == [h["name"] for h in raw["history"]]
    assert [s.role for s in t.steps] == [h["role"] for h in raw["history"]]
    assert t.steps[3].content == ""  # an empty message is a real step
    assert (t.labels.mistake_agent, t.labels.mistake_step, t.labels.fault_steps) == ("Excel_Expert", 0, [0])
    assert t.labels.reason == raw["mistake_reason"]
    prompts = {a.name: a.system_prompt for a in t.agents}
    assert prompts["Excel_Expert"].startswith("## Your role")
    assert prompts["Computer_terminal"] is None
    # has a prompt, never speaks
    assert prompts["Statistics_Expert"] == "## Your role\nStatistics_Expert: Never speaks in this run."
    assert t.agent_names() == ["excel_expert", "computer_terminal", "businesslogic_expert", "dataverification_expert"]
    assert [a.name for a in t.agents][:4] == ["Excel_Expert", "Computer_terminal", "BusinessLogic_Expert", "DataVerification_Expert"]
    assert t.metadata["is_correct"] is False and t.metadata["question_id"] == "fixture-0001"
    assert t.final_output is None


def test_whowhen_handcrafted_fixture() -> None:
    t = load_trace(FIX / "whowhen_handcrafted.json")
    assert t.subset == "hand-crafted"
    assert t.steps[2].agent == "Orchestrator (-> WebSurfer)"
    assert [s.role for s in t.steps][:3] == ["user", "assistant", "assistant"]
    assert t.agent_names() == ["human", "orchestrator", "websurfer"]
    assert t.labels.mistake_agent == "Websurfer" and t.labels.mistake_step == 3
    assert t.resolve_agent(t.labels.mistake_agent) == "WebSurfer"
    assert t.labels.categories == ["Tool failure"]
    assert t.final_output == "1080000000"
    assert t.metadata["is_correct"] is False and t.metadata["level"] == 2
    assert "label_warnings" not in t.metadata


def test_ag2_groupchat_tool_call_without_content() -> None:
    t = load_trace(FIX / "ag2_groupchat.json")
    assert t.task.startswith("Find the population of Lyon")
    call = t.steps[1]
    assert call.agent == "researcher" and call.tool_calls == [
        {"id": "call_1", "name": "web_search", "arguments": '{"query": "Lyon population 2020"}'}
    ]
    assert call.content == 'web_search({"query": "Lyon population 2020"})'  # the call, as text
    assert t.steps[2].role == "tool" and t.steps[2].agent == "executor"
    assert [a.name for a in t.agents] == ["user_proxy", "researcher", "executor", "calculator"]
    assert t.labels is None and t.final_output.endswith("TERMINATE")


def test_ag2_chat_result_wrapper() -> None:
    t = load_trace(FIX / "ag2_chat_result.json")
    assert len(t.steps) == 4 and t.final_output == "The function is done."
    assert t.task == "Write a function that returns the n-th prime."
    assert t.metadata == {
        "cost": {"usage_including_cached_inference": {"total_cost": 0}, "usage_excluding_cached_inference": {"total_cost": 0}},
        "human_input": [],
    }


def test_openai_jsonl_messages() -> None:
    t = load_trace(FIX / "openai_messages.jsonl")
    assert [s.role for s in t.steps] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.task == "Plan a two-day trip to Kyoto."
    assert t.metadata["system_prompt"] == "You are a careful travel planner."
    assert t.steps[2].tool_calls[0]["name"] == "get_weather"
    assert t.steps[4].content == "Day 1: Fushimi Inari. Day 2: Arashiyama."


def test_magentic_one_log() -> None:
    t = load_trace(FIX / "magentic_one_log.jsonl")
    assert [s.agent for s in t.steps] == [
        "human",
        "Orchestrator (thought)",
        "Orchestrator (-> WebSurfer)",
        "WebSurfer",
        "Orchestrator (final answer)",
    ]
    assert t.metadata["skipped_records"] == {"LLMCallEvent": 1, "WebSurferEvent": 1}
    assert t.steps[0].role == "user" and t.steps[0].start_time == "2024-10-01T10:00:00.000001"
    assert t.agent_names() == ["human", "orchestrator", "websurfer"]


def test_autogen_agentchat() -> None:
    t = load_trace(FIX / "autogen_agentchat.json")
    assert [s.name for s in t.steps] == ["TextMessage", "ToolCallRequestEvent", "ToolCallExecutionEvent", "ToolCallSummaryMessage"]
    assert t.steps[1].tool_calls == [{"id": "call_x", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert t.steps[2].role == "tool" and t.steps[2].content == "Rainy, 12 C"
    assert t.metadata["stop_reason"].startswith("Maximum")


def test_openinference_trail_tree() -> None:
    t = load_trace(FIX / "openinference_trail.json")
    names = [s.name for s in t.steps]
    # start-time order, though the fixture lists Step 1's children tool-first
    assert names == [
        "main",
        "CodeAgent.run",
        "Step 1",
        "LiteLLMModel.__call__",
        "web_search",
        "Step 2",
        "LiteLLMModel.__call__",
        "final_answer",
    ]
    assert [s.span_id[-1] for s in t.steps] == list("mas12t34")
    assert {s.span_id[:-1] for s in t.steps} == {"a1b2c3d4e5f6000"}
    assert t.steps[3].parent_span_id == t.steps[2].span_id
    assert t.steps[0].parent_span_id is None
    llm1, tool1, llm2 = t.steps[3], t.steps[4], t.steps[6]
    assert llm1.role == "assistant" and llm1.content.startswith("Thought: I will search")
    assert llm1.input.startswith("[user] New task:")
    # the second call repeats the history: only the new observation is kept as input
    assert llm2.input.startswith("[user] Observation:") and "New task" not in llm2.input
    assert llm2.content.startswith("Thought: The capital of Lebanon is Tripoli")  # from message.contents
    assert tool1.role == "tool" and tool1.observation == "The flag of Lebanon has a green cedar tree."
    assert t.steps[1].agent == "CodeAgent" and llm1.agent == "CodeAgent"
    agent = next(a for a in t.agents if a.name == "CodeAgent")
    assert agent.system_prompt.startswith("You are an expert assistant")
    assert agent.tools == ["web_search", "final_answer"]
    assert t.task.startswith("What is the capital") and t.final_output == "Tripoli"
    assert t.metadata["trace_id"] == "5e1a0c7f2d9b4a3c8e6f1b2d3c4a5e6f"
    assert t.labels is None


def test_openinference_trail_row_labels() -> None:
    t = load_trace(FIX / "openinference_trail_row.json")
    lab = t.labels
    # the labels name spans a1b2c3d4e5f6000s (smolagents' "Step 1" chain, the earliest) and ...0003
    # (step 6, high impact); a chain around a model call is plumbing (an observation step), so its
    # label lands on the model call below it (step 3): the decision that step recorded
    assert (t.steps[2].span_id, t.steps[6].span_id) == ("a1b2c3d4e5f6000s", "a1b2c3d4e5f60003")
    assert (t.steps[2].kind, t.steps[3].kind, t.steps[3].parent_span_id) == ("observation", "action", "a1b2c3d4e5f6000s")
    assert (lab.fault_steps, lab.high_impact_steps, lab.mistake_step) == ([3, 6], [6], 3)
    assert lab.fault_spans == [(3, 3), (6, 6)] and lab.mistake_agent == "CodeAgent"
    assert lab.categories == ["Formatting Errors", "Language-only"]


def test_openinference_phoenix_jsonl() -> None:
    t = load_trace(FIX / "openinference_phoenix.jsonl")
    assert [s.role for s in t.steps] == ["agent", "assistant", "tool", "assistant"]
    assert {s.agent for s in t.steps} == {"support_agent"}
    call = t.steps[1]
    assert call.tool_calls == [{"id": "call_9", "name": "lookup_order", "arguments": {"order_id": "1234"}}]
    assert call.content == 'lookup_order({"order_id": "1234"})'
    assert t.steps[2].observation == (
        "[status ERROR] TimeoutError: order service did not answer\n[exception] TimeoutError: order service did not answer"
    )
    assert t.steps[3].input == "[tool] error: timeout"
    assert t.agents[0].system_prompt == "You help customers with orders."
    assert t.agents[0].tools == ["lookup_order"]


def test_otel_genai_otlp() -> None:
    t = load_trace(FIX / "otel_genai_otlp.json")
    assert [s.name for s in t.steps] == [
        "invoke_agent travel_planner",
        "chat gpt-4o",
        "get_weather",
        "chat gpt-4o",
        "invoke_agent reviewer",
    ]
    assert [s.role for s in t.steps] == ["invoke_agent", "assistant", "tool", "assistant", "invoke_agent"]
    assert [s.agent for s in t.steps] == ["travel_planner"] * 4 + ["reviewer"]
    assert t.metadata["skipped_spans"] == 1  # the HTTP span
    chat1, tool, chat2 = t.steps[1], t.steps[2], t.steps[3]
    assert chat1.tool_calls[0]["name"] == "get_weather"
    assert chat1.tool_calls[0]["arguments"] == {"location": "Paris", "day": "tomorrow"}
    assert tool.observation == '{"forecast": "rain", "precipitation_mm": 12}'
    assert chat2.input == '[tool] {"forecast": "rain", "precipitation_mm": 12}'  # own tool call not repeated
    assert chat2.content == "No umbrella needed: sunny tomorrow."
    assert t.steps[4].observation == "[status ERROR] model request failed: 429 Too Many Requests"
    planner = t.agents[0]
    assert planner.name == "travel_planner" and planner.system_prompt.startswith("You plan trips")
    assert planner.tools == ["get_weather"]
    assert t.task == "Should I pack an umbrella for Paris tomorrow?"
    assert t.steps[0].start_time.startswith("2024-09-22T")


def test_detect_on_parsed_values() -> None:
    assert detect({"history": []}) == "whowhen"
    assert detect([{"role": "user", "content": "x"}]) == "messages"
    assert detect({"resourceSpans": []}) is None  # no gen_ai / OpenInference spans
    assert detect({"foo": 1}) is None


def test_flatten_and_time_helpers() -> None:
    nested = {"llm": {"input_messages": [{"message": {"role": "user", "content": "hi"}}]}, "openinference": {"span": {"kind": "LLM"}}}
    flat = flatten_attributes(nested)
    assert flat == {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
        "openinference.span.kind": "LLM",
    }
    assert iso_to_ns("1970-01-01T00:00:01Z") == 1_000_000_000
    assert iso_to_ns("1970-01-01T00:00:00.123456789+00:00") == 123_456_000
    assert iso_to_ns("not a time") is None


def test_iter_trace_files_natural_order(tmp_path: Path) -> None:
    for name in ["10.json", "2.json", "1.json", "README.md", "LICENSE", ".hidden.json", "notes.txt"]:
        (tmp_path / name).write_text("{}")
    sub = tmp_path / "b"
    sub.mkdir()
    (sub / "3.jsonl").write_text("{}")
    files = iter_trace_files([tmp_path])
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["1.json", "2.json", "10.json", "b/3.jsonl"]
    # an explicit file is kept whatever its name; duplicates are dropped
    assert iter_trace_files([tmp_path / "notes.txt", tmp_path / "1.json", tmp_path / "1.json"]) == [
        tmp_path / "notes.txt",
        tmp_path / "1.json",
    ]
    with pytest.raises(TraceError, match="no such file"):
        iter_trace_files([tmp_path / "missing"])


def test_bare_history_with_speaker_roles(tmp_path: Path) -> None:
    history = [
        {"content": "question?", "role": "human"},
        {"content": "plan", "role": "Orchestrator (thought)"},
        {"content": "go search", "role": "Orchestrator (-> WebSurfer)"},
        {"content": "results", "role": "WebSurfer"},
    ]
    p = tmp_path / "history.json"
    p.write_text(json.dumps(history))
    t = load_trace(p)
    assert t.format == "messages"
    assert [s.agent for s in t.steps] == ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer"]
    assert [s.role for s in t.steps] == ["human", "assistant", "assistant", "assistant"]
    assert t.agent_names() == ["human", "orchestrator", "websurfer"]
