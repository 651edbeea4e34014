"""OpenTelemetry GenAI spans (semantic conventions ``gen_ai.*``) from any span container.

Read: the GenAI semantic conventions 1.26 to 1.38 (the experimental, still "Development"
versions): messages as JSON attributes (``gen_ai.input.messages`` / ``gen_ai.output.messages``
/ ``gen_ai.system_instructions``, 1.36+), as span events (``gen_ai.client.inference.operation.
details``; ``gen_ai.system|user|assistant|tool.message`` and ``gen_ai.choice``, 1.27-1.35;
``gen_ai.content.prompt|completion``, 1.26) and in the indexed form (``gen_ai.prompt.N.role|
content``, ``gen_ai.completion.N.content|tool_calls.M.*``, as OpenLLMetry writes); and what agent
frameworks write in their own instrumentation: any-agent (``call_llm`` spans, ``gen_ai.output``,
``gen_ai.tool.args``), Pydantic AI (``tool_arguments`` / ``tool_response``, an ``events``
attribute), Google ADK (``gcp.vertex.agent.llm_request|llm_response|tool_call_args|
tool_response``), Strands (content blocks in events) and OpenLLMetry (``traceloop.entity.*``).

Spans with ``gen_ai.*`` attributes or events become steps in start-time order; the others (HTTP
client spans) only give structure and are counted in metadata. Per ``gen_ai.operation.name``:
- ``chat`` / ``text_completion`` / ``generate_content`` / ``call_llm`` (or any span with
  messages): content = the output text, tool calls from the output; input = the input messages
  new since the agent's previous call; role = the output message role.
- ``execute_tool``: name = ``gen_ai.tool.name``; content = the arguments; observation = the result.
- ``invoke_agent`` / ``create_agent`` and others: content = the input messages, observation = the
  output; a span with neither only groups others and is not a step.

The agent of a span is the nearest span, itself or above, with ``gen_ai.agent.name`` or that
invokes an agent (``invoke_agent <name>``); else the resource's ``service.name`` (not the SDK's
``unknown_service`` default); else "agent".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.chat_values import Call, bare_call, calls_text, output_text, parts, read_messages, text_of, tool_names
from localfa.traces.importers.common import type_name
from localfa.traces.importers.llm_inputs import Msg, render
from localfa.traces.importers.span_steps import GENERIC_AGENT, Attrs, Dialect, SpanRead, single, span_traces
from localfa.traces.importers.spans import Span, any_span, collect_spans, is_span_container, maybe_json, unflatten
from localfa.traces.model import Trace

NAME = "otel-genai"
LLM_OPS = {"chat", "text_completion", "generate_content", "call_llm", "generate", "completion"}
AGENT_OPS = {"invoke_agent", "create_agent"}
_ROLE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS = "gen_ai.client.inference.operation.details"
_OP_PREFIX = re.compile(r"^(invoke_agent|create_agent|execute_tool|call_llm)\s+")


def _has_genai(span: Span) -> bool:
    return any(k.startswith("gen_ai.") for k in span.attributes) or any(
        str(ev.get("name") or "").startswith("gen_ai.") for ev in span.events
    )


def sniff(data: Any) -> bool:
    """A span container where some span carries ``gen_ai.*`` attributes or events."""
    return any_span(data, _has_genai)


def _event_message(ev: dict[str, Any], role: str) -> dict[str, Any]:
    """A ``gen_ai.<role>.message`` event's attributes as a chat message."""
    return {"role": ev.get("role") or role, "content": ev.get("content"), "tool_calls": maybe_json(unflatten(ev, "tool_calls")) or []}


def _choice(ev: dict[str, Any]) -> tuple[list[Msg], list[Call]]:
    """A ``gen_ai.choice`` event: its message (object, JSON, or a list of content blocks)."""
    message = maybe_json(unflatten(ev, "message"))
    if isinstance(message, list):
        text, calls = parts(message)
        return [Msg(role="assistant", text=text or calls_text(calls))], calls
    if isinstance(message, dict):
        return read_messages({"role": "assistant", **message})
    if message is not None:
        return [Msg(role="assistant", text=text_of(message))], []
    calls_raw = maybe_json(unflatten(ev, "tool_calls"))
    return read_messages({"role": "assistant", "tool_calls": calls_raw}) if calls_raw else ([], [])


def _events_attribute(a: Attrs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pydantic AI's ``events`` attribute: (input-message events, choice events)."""
    events = maybe_json(a.get("events"))
    if not isinstance(events, list):
        return [], []
    items = [e for e in events if isinstance(e, dict)]
    ins = [_event_message(e, _ROLE_EVENTS[e["event.name"]]) for e in items if e.get("event.name") in _ROLE_EVENTS]
    outs = [e for e in items if e.get("event.name") == "gen_ai.choice"]
    return ins, outs


def _input(a: Attrs) -> tuple[list[Msg], str | None]:
    """(input messages, system instructions) in whichever form the span holds them."""
    system = a.get("gen_ai.system_instructions")
    for value in [a.get("gen_ai.input.messages")] + [e.get("gen_ai.input.messages") for e in a.events(_DETAILS)]:
        if value is not None:
            return read_messages(value)[0], system
    for e in a.events(_DETAILS):
        system = system or e.get("gen_ai.system_instructions")
    prompt_events = a.events("gen_ai.content.prompt")
    if prompt_events:
        return read_messages(prompt_events[0].get("gen_ai.prompt"))[0], system
    role_events = [_event_message(attrs, _ROLE_EVENTS[name]) for name, attrs in a.named_events(*_ROLE_EVENTS)]
    role_events = role_events or _events_attribute(a)[0]
    if role_events:
        return read_messages(role_events)[0], system
    value = a.first("gen_ai.prompt", "traceloop.entity.input")
    if value is not None:
        return read_messages(value)[0], system
    request = maybe_json(a.get("gcp.vertex.agent.llm_request"))
    if isinstance(request, dict):
        config = request.get("config") if isinstance(request.get("config"), dict) else {}
        return read_messages(request)[0], system or config.get("system_instruction")
    return [], system


def _output(a: Attrs) -> tuple[list[Msg], list[Call]]:
    """(output messages, tool calls) in whichever form the span holds them."""
    for value in [a.get("gen_ai.output.messages")] + [e.get("gen_ai.output.messages") for e in a.events(_DETAILS)]:
        if value is not None:
            return read_messages(value)
    completion_events = a.events("gen_ai.content.completion")
    if completion_events:
        return read_messages(completion_events[0].get("gen_ai.completion"))
    choices = a.events("gen_ai.choice") or _events_attribute(a)[1]
    if choices:
        msgs: list[Msg] = []
        calls: list[Call] = []
        for ev in choices:
            m, c = _choice(ev)
            msgs, calls = msgs + m, calls + c
        return msgs, calls
    value = a.first("gen_ai.completion", "gen_ai.output", "gcp.vertex.agent.llm_response")
    return read_messages(value) if value is not None else ([], [])


def _system_text(value: Any) -> str | None:
    value = maybe_json(value)
    if value is None:
        return None
    return (parts(value)[0] if isinstance(value, list) else text_of(value)) or None


def _tool_definitions(a: Attrs) -> list[str]:
    value = maybe_json(a.get("gen_ai.tool.definitions"))
    listed = value if isinstance(value, list) else []
    functions = a.get("llm.request.functions")  # OpenLLMetry
    listed += functions if isinstance(functions, list) else []
    return tool_names(listed)


def _read_tool(span: Span, a: Attrs) -> SpanRead:
    tool = a.first("gen_ai.tool.name", "traceloop.entity.name") or _OP_PREFIX.sub("", span.name) or None
    name = str(tool) if tool else None
    args = a.first(
        "gen_ai.tool.call.arguments", "gen_ai.tool.args", "tool_arguments", "gcp.vertex.agent.tool_call_args", "traceloop.entity.input"
    )
    result = a.first(
        "gen_ai.tool.call.result", "gen_ai.output", "tool_response", "gcp.vertex.agent.tool_response", "traceloop.entity.output"
    )
    if args is None:  # Strands: the call and its result as events
        args = next((e.get("content") for e in a.events("gen_ai.tool.message") if e.get("content") is not None), None)
    if result is None:
        result = next((e.get("message") for e in a.events("gen_ai.choice") if e.get("message") is not None), None)
    content = text_of(maybe_json(args)) if args not in (None, "") else bare_call(name)
    return SpanRead(
        kind="tool",
        role="tool",
        name=name,
        content=content,
        observation=output_text(result) if result is not None else None,
        tools=[name] if name else [],
    )


def _read(span: Span, a: Attrs) -> SpanRead | None:
    """One span (see the module doc); None for spans without any ``gen_ai.*``."""
    if not _has_genai(span):
        return None
    op = a.get("gen_ai.operation.name")
    op = op if isinstance(op, str) and op else None
    entity_kind = a.get("traceloop.span.kind")
    if op == "execute_tool" or entity_kind == "tool" or (op is None and "gen_ai.tool.name" in span.attributes):
        return _read_tool(span, a)
    in_msgs, system = _input(a)
    out_msgs, calls = _output(a)
    out_text = "\n".join(m.text for m in out_msgs if m.text)
    common = dict(name=span.name or None, system=_system_text(system), tools=_tool_definitions(a))
    is_llm = op in LLM_OPS or span.name.startswith("call_llm")
    if is_llm or (op is None and entity_kind is None and (in_msgs or out_msgs)):
        role = next((m.role for m in out_msgs if m.role != "unknown"), "assistant")
        return SpanRead(kind="llm", role=role, content=out_text, tool_calls=calls, in_msgs=in_msgs, **common)
    task = next((m.text for m in in_msgs if m.role == "user" and m.text.strip()), None) if agent_name(span) else None
    return SpanRead(
        kind="span",
        task=task,
        role=op or (str(entity_kind) if entity_kind else "span"),
        content=render([m for m in in_msgs if m.role != "system"]) if in_msgs else "",
        observation=out_text or None,
        tool_calls=calls,
        final=out_text or None,
        **common,
    )


def agent_name(span: Span) -> str | None:
    """The agent `span` names: ``gen_ai.agent.name``, or the agent an ``invoke_agent`` span runs."""
    a = span.attributes
    name = a.get("gen_ai.agent.name")
    if isinstance(name, str) and name.strip():
        return name
    op = a.get("gen_ai.operation.name")
    if op in AGENT_OPS or a.get("traceloop.span.kind") == "agent":
        named = a.get("traceloop.entity.name") or _OP_PREFIX.sub("", span.name).strip("[] ")
        return str(named) if named and named != op else None
    return None


def fallback_agent(span: Span) -> str:
    """The service name where no agent span is above a step (the SDK default is no name)."""
    service = span.resource.get("service.name")
    if isinstance(service, str) and service.strip() and not service.startswith("unknown_service"):
        return service
    return GENERIC_AGENT


DIALECT = Dialect(read=_read, agent_name=agent_name, fallback_agent=fallback_agent)


def parse_many(data: Any, path: Path, source: str) -> list[Trace]:
    """A GenAI span export as Traces, one per trace it holds (one step per ``gen_ai`` span that says or does something)."""
    if not is_span_container(data):
        raise TraceError(source, f"not an OTel span export: expected an object with 'resourceSpans', got {type_name(data)}")
    spans, meta = collect_spans(data, source)
    return span_traces(NAME, spans, meta, DIALECT, path, source, f"none of the {len(spans)} spans carries gen_ai.* content")


def parse(data: Any, path: Path, source: str) -> Trace:
    """One trace of a span export (`parse_many` for several)."""
    return single(parse_many(data, path, source), source)
