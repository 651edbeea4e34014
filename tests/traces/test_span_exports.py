"""Real span-export shapes (issue 16): each fixture is written to look like what its
instrumentation emits, and must yield the steps, agents, tool calls and results it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localfa.traces import TraceError, load_trace
from localfa.traces.importers.spans import id_keys, unflatten
from localfa.traces.model import Trace
from localfa.traces.quality import empty_step_warning, empty_steps

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
SPAN_FIXTURES = [
    "openinference_smolagents_otlp.jsonl",
    "openinference_openai_agents.jsonl",
    "openinference_langgraph.json",
    "otel_genai_any_agent.json",
    "otel_genai_dialects.json",
    "otel_console_export.json",
    "spans_parent_shapes.json",
    "openinference_trail.json",
    "openinference_phoenix.jsonl",
    "otel_genai_otlp.json",
]


def _run_cli(argv: list[str]) -> int:
    import localfa.cli as cli

    return cli.main(argv)


@pytest.mark.parametrize("name", SPAN_FIXTURES)
def test_no_step_is_empty_and_no_warning(name: str) -> None:
    t = load_trace(FIX / name)
    assert empty_steps(t) == []
    assert empty_step_warning(t) is None
    assert "unused_attributes" not in t.metadata


# 1. GenAI attribute dialects ---------------------------------------------------------------------


def test_any_agent_call_llm_tool_args_output() -> None:
    t = load_trace(FIX / "otel_genai_any_agent.json")
    assert t.format == "otel-genai"
    assert [s.name for s in t.steps] == [
        "call_llm gpt-4.1-mini",
        "search_flights",
        "call_llm gpt-4.1-mini",
        "book_flight",
        "call_llm gpt-4.1-mini",
    ]
    assert [s.role for s in t.steps] == ["assistant", "tool", "assistant", "tool", "assistant"]
    # the invoke_agent span only groups the others: it names their agent, it is no step
    assert {s.agent for s in t.steps} == {"flight_agent"} and t.metadata["grouping_spans"] == 1
    first, search, second, book, last = t.steps
    assert first.tool_calls == [{"name": "search_flights", "arguments": {"origin": "LIS", "destination": "OSL", "date": "2025-06-03"}}]
    assert first.input == "[user] Find the cheapest flight from Lisbon to Oslo on 3 June and book it."
    assert json.loads(search.content) == {"origin": "LIS", "destination": "OSL", "date": "2025-06-03"}
    assert json.loads(search.observation) == [{"flight": "TP1234", "price_eur": 189}, {"flight": "SK1801", "price_eur": 142}]
    assert second.tool_calls == [{"name": "book_flight", "arguments": {"flight": "TP1234"}}]
    assert book.observation == "Booked TP1234 for 189 EUR. Confirmation LX93Q."
    assert last.content.startswith("I booked the cheapest flight, TP1234")
    assert t.final_output == last.content  # AgentTrace.final_output
    agent = t.agents[0]
    assert (agent.name, agent.system_prompt) == ("flight_agent", "You are a flight assistant. Use tools to answer.")
    assert agent.tools == ["search_flights", "book_flight"]


def test_genai_json_attributes_events_and_indexed_form() -> None:
    t = load_trace(FIX / "otel_genai_dialects.json")
    assert [s.name for s in t.steps] == ["chat gpt-4o", "web_search", "chat gpt-4o", "openai.chat"]
    call, tool, events_chat, indexed = t.steps
    # 1.37 JSON attributes (the nested client span of the same call is merged: one step)
    assert call.tool_calls == [{"id": "call_1", "name": "web_search", "arguments": {"query": "Tay Bridge disaster date"}}]
    assert call.input == "[user] When did the Tay Bridge collapse?"
    assert t.metadata["merged_spans"] == 1 and t.metadata["skipped_spans"] == 1  # the HTTP span
    # execute_tool with gen_ai.tool.call.arguments / .result
    assert json.loads(tool.content) == {"query": "Tay Bridge disaster date"}
    assert tool.observation == "The Tay Bridge collapsed on 28 December 1879 during a storm."
    # 1.28 span events: the user/tool messages are the input, gen_ai.choice the output
    assert events_chat.content == "It collapsed on 28 December 1897."
    assert events_chat.input == "[tool] The Tay Bridge collapsed on 28 December 1879 during a storm."
    # OpenLLMetry's gen_ai.prompt.N / gen_ai.completion.N, no agent span above: the service name
    assert indexed.content == "The Tay Bridge fell in December 1897."
    assert indexed.input == "[user] Summarise: It collapsed on 28 December 1897."
    assert [s.agent for s in t.steps] == ["researcher"] * 3 + ["summary-writer"]
    prompts = {a.name: a.system_prompt for a in t.agents}
    assert prompts == {"researcher": "You research facts and cite sources.", "summary-writer": "You write one-line summaries."}


def test_genai_role_events_and_choice_blocks(tmp_path: Path) -> None:
    """Strands-style events: content blocks as JSON text in gen_ai.*.message / gen_ai.choice."""
    events = [
        {"name": "gen_ai.system.message", "attributes": {"content": json.dumps([{"text": "Be brief."}])}},
        {"name": "gen_ai.user.message", "attributes": {"content": json.dumps([{"text": "Weather in Oslo?"}])}},
        {
            "name": "gen_ai.choice",
            "attributes": {
                "finish_reason": "tool_use",
                "message": json.dumps(
                    [{"text": "Checking."}, {"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Oslo"}}}]
                ),
            },
        },
    ]
    span = {
        "name": "chat",
        "context": {"span_id": "0x01"},
        "parent_id": None,
        "start_time": "2025-01-01T00:00:00Z",
        "attributes": {"gen_ai.operation.name": "chat", "gen_ai.agent.name": "Strands Agents"},
        "events": events,
    }
    p = tmp_path / "strands.json"
    p.write_text(json.dumps([span]))
    (step,) = load_trace(p).steps
    assert step.content == "Checking." and step.input == "[user] Weather in Oslo?"
    assert step.tool_calls == [{"id": "t1", "name": "weather", "arguments": {"city": "Oslo"}}]
    assert load_trace(p).agents[0].system_prompt == "Be brief."


# 2. Parents in every shape ------------------------------------------------------------------------


def test_parents_in_every_shape() -> None:
    t = load_trace(FIX / "spans_parent_shapes.json")
    # parent_span_id bare hex -> 0x id; parentSpanId "0xA1"; parent: {span_id: 195 (decimal 0xc3)};
    # parentSpanId base64 of 0xd4 (212); a root chat span falls back to its service name
    assert [(s.agent, s.name) for s in t.steps] == [("planner", "chat"), ("coder", "chat"), ("coder", "run_tests"), ("review-bot", "chat")]
    assert t.steps[2].observation == "1 failed: test_add"
    assert t.steps[3].parent_span_id is None


def test_id_keys_match_across_notations() -> None:
    assert 0xC3 in id_keys("0xC3") and 0xC3 in id_keys("00000000000000c3") and 0xC3 in id_keys("195")
    assert 212 in id_keys("AAAAAAAAANQ=")
    assert id_keys(None) == []


def test_agent_ancestor_beats_service_name() -> None:
    t = load_trace(FIX / "otel_console_export.json")  # service.name is the SDK's unknown_service
    assert {s.agent for s in t.steps} == {"calculator"}
    assert [s.agent for s in load_trace(FIX / "otel_genai_any_agent.json").steps] == ["flight_agent"] * 5


# 3. OpenInference LLM spans whose output messages carry only a role --------------------------------


def test_smolagents_role_only_output_from_output_value() -> None:
    t = load_trace(FIX / "openinference_smolagents_otlp.jsonl")
    assert t.format == "openinference"
    llm = [s for s in t.steps if s.role == "assistant"]
    assert [s.content for s in llm] == [
        "I need the bridge length first.",
        'final_answer({"answer": "About 2.7 seconds (155 m at 58 km/h)."})',
    ]
    assert llm[0].tool_calls == [{"id": "call_a", "name": "web_search", "arguments": {"query": "Pont des Arts length"}}]
    assert llm[1].tool_calls[0]["name"] == "final_answer"
    assert {s.agent for s in t.steps} == {"ToolCallingAgent"}
    assert t.task.startswith("How many seconds would it take a leopard")
    assert t.final_output == "About 2.7 seconds (155 m at 58 km/h)."
    assert t.agents[0].tools == ["web_search", "final_answer"]


def test_openai_agents_sdk_handoff() -> None:
    t = load_trace(FIX / "openinference_openai_agents.jsonl")
    assert [(s.agent, s.role, s.name) for s in t.steps] == [
        ("Triage", "assistant", "response"),
        ("Triage", "tool", "handoff to Billing"),
        ("Billing", "assistant", "response"),
        ("Billing", "tool", "refund"),
        ("Billing", "assistant", "response"),
    ]
    assert t.steps[0].content == "transfer_to_billing()"
    assert t.steps[2].tool_calls == [{"id": "call_r1", "name": "refund", "arguments": {"order_id": "5521", "amount": 40}}]
    assert t.steps[3].observation == "refunded 40 EUR"
    assert t.steps[4].content == "Done: I refunded 40 EUR for order 5521."
    assert [a.name for a in t.agents] == ["Triage", "Billing"]  # the workflow and agent spans only group
    assert t.metadata["grouping_spans"] == 3
    assert t.agents[1].system_prompt == "Resolve billing problems. Refund duplicates."


# 4. One model call, one step; CHAIN state does not repeat the history ------------------------------


def test_langgraph_one_call_one_step_and_no_repeated_history() -> None:
    t = load_trace(FIX / "openinference_langgraph.json")
    assert [(s.role, s.name) for s in t.steps] == [
        ("assistant", "ChatOpenAI"),
        ("chain", "should_continue"),
        ("tool", "get_weather"),
        ("assistant", "ChatOpenAI"),
    ]
    assert t.metadata["merged_spans"] == 2  # the ChatCompletion spans inside ChatOpenAI
    assert t.metadata["grouping_spans"] == 4  # LangGraph, agent, tools, agent: state already in the steps
    question = "What's the weather in Porto?"
    assert sum(question in (s.content + (s.observation or "") + (s.input or "")) for s in t.steps) == 1
    assert t.steps[0].tool_calls == [{"id": "call_w", "name": "get_weather", "arguments": {"city": "Porto"}}]
    assert t.steps[2].observation == "Porto: 18 C, light rain"  # the ToolMessage's content
    assert t.steps[3].input == "[tool] Porto: 18 C, light rain"
    assert t.final_output == "It is 18 F and raining lightly in Porto."


def test_label_on_a_merged_or_grouping_span_lands_on_its_step(tmp_path: Path) -> None:
    spans = json.loads((FIX / "openinference_langgraph.json").read_text())
    row = {
        "trace": {"trace_id": "x", "spans": spans},
        "labels": {
            "errors": [
                {"location": "0000000000000b0a", "category": "Hallucination", "impact": "HIGH"},
                {"location": "0000000000000b06", "category": "Tool", "impact": "LOW"},
            ]
        },
    }
    p = tmp_path / "row.json"
    p.write_text(json.dumps(row))
    lab = load_trace(p).labels
    assert lab.fault_steps == [2, 3] and lab.high_impact_steps == [3]


# 5. The OTel Python console exporter's output ----------------------------------------------------


def test_console_exporter_output_loads() -> None:
    t = load_trace(FIX / "otel_console_export.json")
    assert [s.name for s in t.steps] == ["chat qwen2.5", "multiply", "chat qwen2.5"]  # start-time order
    assert t.steps[1].observation == "391" and t.steps[2].content == "17 * 23 = 381."
    assert t.steps[2].input == "[tool] 391"
    assert t.steps[0].parent_span_id == "0x1f2e3d4c5b6a7980"


def test_truncated_console_export_is_refused(tmp_path: Path) -> None:
    text = (FIX / "otel_console_export.json").read_text()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) - 40])
    with pytest.raises(TraceError, match="truncated JSON"):
        load_trace(p)


def test_unrelated_single_call_spans_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def http(i: int) -> str:
        return json.dumps(
            {
                "name": "GET",
                "context": {"trace_id": f"0x{i:032x}", "span_id": f"0x{i:016x}"},
                "kind": "SpanKind.CLIENT",
                "parent_id": None,
                "start_time": "2025-01-01T00:00:00Z",
                "attributes": {"http.request.method": "GET", "url.full": f"https://example.org/{i}"},
            },
            indent=4,
        )

    p = tmp_path / "http.json"
    p.write_text("\n".join(http(i) for i in range(1, 4)))
    assert _run_cli(["inspect", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "its 3 spans carry neither" in err[0]


# 6. Never silently empty --------------------------------------------------------------------------


def _unread_export(tmp_path: Path) -> Path:
    spans = [
        {
            "name": "invoke_agent shop",
            "span_id": "01",
            "start_time": 1,
            "attributes": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "shop"},
        }
    ]
    for i in range(2, 9):
        spans.append(
            {
                "name": "chat",
                "span_id": f"{i:02x}",
                "parent_span_id": "01",
                "start_time": i,
                "attributes": {
                    "gen_ai.operation.name": "chat",
                    "acme.llm.prompt": "Please find the order status for customer 42.",
                    f"acme.llm.tools.{i}.schema": json.dumps({"name": "lookup"}),
                },
            }
        )
    p = tmp_path / "acme.json"
    p.write_text(json.dumps(spans))
    return p


def test_empty_steps_warn_naming_unused_attributes(tmp_path: Path) -> None:
    t = load_trace(_unread_export(tmp_path))
    assert len(t.steps) == 7 and len(empty_steps(t)) == 7
    assert empty_step_warning(t) == (
        "7 of 7 steps have no content, and their spans carry attributes localfa does "
        "not read (seen but not used: acme.llm.prompt, acme.llm.tools.N.schema)"
    )
    assert t.metadata["unused_attributes"] == ["acme.llm.prompt", "acme.llm.tools.N.schema"]


def test_steps_empty_in_the_source_raise_no_warning_and_are_never_an_answer() -> None:
    t = load_trace(FIX / "otel_genai_any_agent.json")
    steps = [
        s.model_copy(update={"content": "", "tool_calls": [], "observation": None, "input": None}) if s.index < 2 else s for s in t.steps
    ]
    empty = t.model_copy(update={"steps": steps})
    assert "unused_attributes" not in empty.metadata and empty_step_warning(empty) is None  # nothing was skipped: no alarm
    assert set(empty.action_steps()).isdisjoint({0, 1})


def test_inspect_prints_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli(["inspect", str(_unread_export(tmp_path)), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert len(info["warnings"]) == 1 and info["warnings"][0].startswith("7 of 7 steps have no content, and their spans")


def test_unflatten_rebuilds_indexed_lists() -> None:
    attrs = {"gen_ai.prompt.1.content": "b", "gen_ai.prompt.0.content": "a", "gen_ai.prompt.0.role": "user"}
    assert unflatten(attrs, "gen_ai.prompt") == [{"content": "a", "role": "user"}, {"content": "b"}]
    assert unflatten(attrs, "gen_ai.completion") is None


def test_trace_round_trips() -> None:
    for name in SPAN_FIXTURES:
        t = load_trace(FIX / name)
        assert Trace.model_validate_json(t.model_dump_json()) == t


def test_diagnose_warns_of_unread_attributes_except_under_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = _unread_export(tmp_path)
    argv = ["diagnose", str(export), "--method", "heuristic", "--engine", "scripted"]
    assert _run_cli(argv) == 0
    assert "warning: " in capsys.readouterr().err
    assert _run_cli([*argv, "-q"]) == 0
    assert "warning" not in capsys.readouterr().err


# 7. Tools and plumbing are never an answer (issue 54) -----------------------------------------------

ANY_AGENT = FIX.parent / "agent_logs" / "any_agent" / "openai_openinference.json"  # real: see agent_logs/README.md
OPENINFERENCE = [*sorted(FIX.glob("openinference_*")), ANY_AGENT]


@pytest.mark.parametrize("path", OPENINFERENCE, ids=lambda p: p.name)
def test_no_openinference_tool_or_chain_span_is_offered_as_an_answer(path: Path) -> None:
    from localfa.methods.baselines import agent_choices

    t = load_trace(path)
    offered = {t.steps[i].role for i in t.action_steps()}
    assert offered <= {"assistant", "agent"}, offered  # model calls (and agents with no call recorded)
    assert all(s.kind == "observation" for s in t.steps if s.role in ("tool", "chain"))
    tools = {s.name for s in t.steps if s.role == "tool"}
    assert not tools & set(agent_choices(t))


def test_a_real_any_agent_openinference_export_reads_as_one_agent_with_its_tools_observed() -> None:
    """any-agent's OpenAI Agents SDK sample (mozilla-ai/any-agent, Apache-2.0): an AGENT span
    under a workflow span under the run's root; a CHAIN listing the MCP tools; TOOL spans."""
    t = load_trace(ANY_AGENT)
    assert [a.name for a in t.agents] == ["any_agent"]
    assert [(s.kind, s.name) for s in t.steps] == [
        ("observation", "mcp_tools"),
        ("action", "generation"),
        ("observation", "get_current_time"),
        ("action", "generation"),
        ("observation", "write_file"),
        ("action", "generation"),
    ]
    assert t.task == "Use the tools to find what year it is in the America/New_York timezone and write the value (single number) to a file"
    assert t.final_output == "The current year in the America/New_York timezone is 2025. I have written this value to a file."


def test_smolagents_task_comes_from_the_agent_spans_input(tmp_path: Path) -> None:
    """Without ``smolagents.task`` and without the model's input messages, the root AGENT span's
    input ``{"task": ...}`` still gives the task."""
    lines = []
    for line in (FIX / "openinference_smolagents_otlp.jsonl").read_text().splitlines():
        data = json.loads(line)
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    sp["attributes"] = [
                        a for a in sp["attributes"] if a["key"] != "smolagents.task" and not a["key"].startswith("llm.input_messages")
                    ]
        lines.append(json.dumps(data))
    p = tmp_path / "smolagents.jsonl"
    p.write_text("\n".join(lines))
    t = load_trace(p)
    assert t.task == "How many seconds would it take a leopard at full speed to run through Pont des Arts?"


def test_framework_spans_outside_the_agent_span_are_that_agents(tmp_path: Path) -> None:
    """A LangChain run whose chain and model spans sit beside (not under) the one AGENT span is one
    agent, never the agent plus "agent"."""
    spans = [
        {
            "name": "any_agent",
            "context": {"trace_id": "0x1", "span_id": "0xa"},
            "parent_id": None,
            "start_time": 1,
            "attributes": {"openinference.span.kind": "AGENT", "input.value": "Book a table for two."},
        },
        {
            "name": "RunnableSequence",
            "context": {"trace_id": "0x1", "span_id": "0xb"},
            "parent_id": None,
            "start_time": 2,
            "attributes": {
                "openinference.span.kind": "CHAIN",
                "input.value": '{"question": "Book a table for two."}',
                "output.value": "ok",
            },
        },
        {
            "name": "ChatOpenAI",
            "context": {"trace_id": "0x1", "span_id": "0xc"},
            "parent_id": "0xb",
            "start_time": 3,
            "attributes": {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Booked for 8 pm.",
            },
        },
    ]
    p = tmp_path / "lc.json"
    p.write_text(json.dumps(spans))
    t = load_trace(p)
    assert {s.agent for s in t.steps} == {"any_agent"} and [a.name for a in t.agents] == ["any_agent"]
    assert t.task == "Book a table for two." and [s.name for s in t.steps if s.kind == "action"] == ["ChatOpenAI"]
