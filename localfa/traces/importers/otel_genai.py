"""OpenTelemetry GenAI spans (semantic conventions ``gen_ai.*``), from an OTLP JSON export.

Spans that carry ``gen_ai.*`` attributes become steps in start-time order (other spans, e.g. HTTP
client spans, only give structure and are counted in metadata). Per ``gen_ai.operation.name``:
- ``chat`` / ``text_completion`` / ``generate_content`` (or any span with messages): content =
  ``gen_ai.output.messages`` (text parts; ``tool_call`` parts become tool calls), input = the
  ``gen_ai.input.messages`` new since the agent's previous call, system prompt from
  ``gen_ai.system_instructions`` or a system message; role = the output message role.
- ``execute_tool``: name = ``gen_ai.tool.name``, content = ``gen_ai.tool.call.arguments``,
  observation = ``gen_ai.tool.call.result``; role ``tool``.
- ``invoke_agent`` / ``create_agent`` and others: content = the input messages, observation = the
  output messages; role = the operation name.
The older flat form (``gen_ai.prompt.N.role/content``, ``gen_ai.completion.N.role/content``) is
read as input/output messages too.

The agent of a span is the nearest ``gen_ai.agent.name`` on it or an ancestor, else the
resource's ``service.name``, else "agent".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import content_text, dumps, file_stem, type_name
from localfa.traces.importers.llm_inputs import InputTracker, Msg, render
from localfa.traces.importers.spans import (
    Span,
    ancestors,
    collect_spans,
    error_notes,
    is_span_container,
    maybe_json,
    ordered,
)
from localfa.traces.model import AgentInfo, Step, Trace, normalize_agent

NAME = "otel-genai"
LLM_OPS = {"chat", "text_completion", "generate_content"}
_LEGACY = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(role|content)$")


def _has_genai(span: Span) -> bool:
    return any(k.startswith("gen_ai.") for k in span.attributes)


def sniff(data: Any) -> bool:
    """A span container where some span carries ``gen_ai.*`` attributes."""
    if not is_span_container(data):
        return False
    try:
        spans, _ = collect_spans(data, "")
    except TraceError:
        return False
    return any(_has_genai(s) for s in spans)


def _parts(parts: Any) -> tuple[str, list[dict[str, Any]]]:
    """(text, tool calls) of a GenAI message's `parts`."""
    if not isinstance(parts, list):
        return content_text(parts), []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for p in parts:
        if not isinstance(p, dict):
            texts.append(content_text(p))
            continue
        kind = p.get("type")
        if kind == "text" or kind == "reasoning":
            texts.append(content_text(p.get("content")))
        elif kind == "tool_call":
            call = {"name": p.get("name"), "arguments": maybe_json(p.get("arguments"))}
            if p.get("id") is not None:
                call = {"id": p["id"], **call}
            calls.append(call)
        elif kind == "tool_call_response":
            resp = p.get("response", p.get("result"))
            texts.append(resp if isinstance(resp, str) else dumps(resp))
        else:
            texts.append(f"<{kind}>" if kind else dumps(p))
    return "\n".join(t for t in texts if t), calls


def _messages(value: Any) -> tuple[list[Msg], list[dict[str, Any]]]:
    """Messages and tool calls from a ``gen_ai.input.messages``/``output.messages`` value."""
    value = maybe_json(value)
    if value is None:
        return [], []
    if isinstance(value, str):
        return [Msg(role="unknown", text=value)], []
    if isinstance(value, dict):
        value = [value]
    msgs: list[Msg] = []
    calls: list[dict[str, Any]] = []
    for m in value if isinstance(value, list) else []:
        if not isinstance(m, dict):
            msgs.append(Msg(role="unknown", text=content_text(m)))
            continue
        if "parts" in m:
            text, c = _parts(m["parts"])
        else:
            text, c = content_text(m.get("content")), []
        calls += c
        text = text or _calls_text(c)
        name = m.get("name")
        msgs.append(Msg(role=str(m.get("role") or "unknown"), text=text, name=str(name) if name else None))
    return msgs, calls


def _calls_text(calls: list[dict[str, Any]]) -> str:
    return "\n".join(f"{c.get('name')}({_text(c.get('arguments'))})" for c in calls)


def _legacy(attrs: dict[str, Any], which: str) -> list[Msg]:
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _LEGACY.match(key)
        if m and m.group(1) == which:
            found.setdefault(int(m.group(2)), {})[m.group(3)] = value
    return [Msg(role=str(f.get("role") or "unknown"), text=content_text(f.get("content")))
            for _, f in sorted(found.items())]


def _agent_of(span: Span, spans: list[Span]) -> str:
    for s in ancestors(span, spans):
        name = s.attributes.get("gen_ai.agent.name")
        if isinstance(name, str) and name.strip():
            return name
    service = span.resource.get("service.name")
    return service if isinstance(service, str) and service.strip() else "agent"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else dumps(value))


def _system(attrs: dict[str, Any]) -> str | None:
    value = attrs.get("gen_ai.system_instructions")
    if value is None:
        return None
    value = maybe_json(value)
    if isinstance(value, list):
        return _parts(value)[0] or None
    return _text(value) or None


def _tool_definitions(attrs: dict[str, Any]) -> list[str]:
    value = maybe_json(attrs.get("gen_ai.tool.definitions"))
    names = []
    for d in value if isinstance(value, list) else []:
        if isinstance(d, dict):
            fn = d.get("function") if isinstance(d.get("function"), dict) else d
            if isinstance(fn.get("name"), str):
                names.append(fn["name"])
    return names


def parse(data: Any, path: Path, source: str) -> Trace:
    """An OTLP export of GenAI spans as a Trace (one step per ``gen_ai`` span)."""
    if not is_span_container(data):
        raise TraceError(source, f"not an OTel span export: expected an object with 'resourceSpans', got {type_name(data)}")
    spans, meta = collect_spans(data, source)
    tracker = InputTracker()
    steps: list[Step] = []
    agent_order: dict[str, str] = {}
    prompts: dict[str, str] = {}
    tools: dict[str, list[str]] = {}
    skipped = 0
    task: str | None = None
    final: str | None = None
    for span in ordered(spans):
        a = span.attributes
        if not _has_genai(span):
            skipped += 1
            continue
        op = a.get("gen_ai.operation.name")
        op = op if isinstance(op, str) and op else None
        agent = _agent_of(span, spans)
        key = normalize_agent(agent)
        agent_order.setdefault(key, agent)
        tools.setdefault(key, [])
        system = _system(a)
        if system:
            prompts.setdefault(key, system)
        for t in _tool_definitions(a):
            if t not in tools[key]:
                tools[key].append(t)
        in_msgs, _ = _messages(a.get("gen_ai.input.messages"))
        out_msgs, calls = _messages(a.get("gen_ai.output.messages"))
        in_msgs = in_msgs or _legacy(a, "prompt")
        out_msgs = out_msgs or _legacy(a, "completion")
        if task is None:
            task = next((m.text for m in in_msgs if m.role == "user" and m.text.strip()), None)
        observation: str | None = None
        new_input: str | None = None
        tool_calls: list[dict[str, Any]] = []
        name = span.name or None
        out_text = "\n".join(m.text for m in out_msgs if m.text)
        if op == "execute_tool":
            role = "tool"
            tool = a.get("gen_ai.tool.name")
            name = str(tool) if tool else name
            content = _text(maybe_json(a.get("gen_ai.tool.call.arguments")))
            result = a.get("gen_ai.tool.call.result")
            observation = _text(maybe_json(result)) if result is not None else None
            if name and name not in tools[key]:
                tools[key].append(name)
        elif op in LLM_OPS or (op is None and (in_msgs or out_msgs)):
            role = out_msgs[0].role if out_msgs and out_msgs[0].role != "unknown" else "assistant"
            tool_calls = calls
            content = out_text
            if in_msgs:
                new_input = tracker.new_input(key, in_msgs)
            tracker.note_output(key, content)
            final = content or final
        else:
            role = op or "span"
            content = render([m for m in in_msgs if m.role != "system"]) if in_msgs else ""
            observation = out_text or None
            tool_calls = calls
            if op == "invoke_agent" and out_text:
                final = out_text
        notes = error_notes(span)
        if notes:
            observation = "\n".join(([observation] if observation else []) + notes)
        steps.append(Step(
            index=len(steps), agent=agent, role=role, content=content, tool_calls=tool_calls,
            observation=observation, input=new_input, span_id=span.span_id,
            parent_span_id=span.parent_id, name=name, start_time=span.start,
        ))
    if not steps:
        raise TraceError(source, f"empty history: none of the {len(spans)} spans carries gen_ai.* attributes")
    for k, p in tracker.system_prompts.items():
        prompts.setdefault(k, p)
    agents = [AgentInfo(name=agent_order[k], system_prompt=prompts.get(k), tools=tools.get(k, []))
              for k in agent_order]
    metadata: dict[str, Any] = dict(meta)
    metadata["spans"] = len(spans)
    if skipped:
        metadata["skipped_spans"] = skipped
    return Trace(
        id=file_stem(path),
        source=source,
        format=NAME,
        subset=None,
        task=task or "",
        agents=agents,
        steps=steps,
        final_output=final,
        ground_truth=None,
        labels=None,
        metadata=metadata,
    )
