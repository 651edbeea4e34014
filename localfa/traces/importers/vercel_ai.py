"""Vercel AI SDK telemetry spans (``experimental_telemetry``), from any span container.

The SDK names its spans after the call (``ai.generateText``, ``ai.streamText``,
``ai.generateObject``), the provider call inside it (``ai.generateText.doGenerate``,
``ai.streamText.doStream``) and each tool run (``ai.toolCall``), and writes ``ai.*`` attributes:
``ai.operationId``, ``ai.telemetry.functionId`` (the name the app gave the call: the agent),
``ai.model.id``, ``ai.prompt`` (``{system?, prompt?, messages?}``), ``ai.prompt.messages``,
``ai.response.text`` / ``ai.response.object``, ``ai.response.toolCalls``, ``ai.toolCall.name |
id | args | result``.

Steps: each provider call is one step (the answer's text and tool calls; the input new since the
agent's previous call), each tool run a step with its arguments and result. The outer call span
gives the task (its prompt) and the final output (its response) and is not a step itself. The
agent is the nearest ``ai.telemetry.functionId`` above a span, else the service name, else
"agent". An outer call whose provider call was not recorded with it (no context manager: each
span its own trace) is that call's step. Embedding calls (``ai.embed``, ``ai.embedMany``) are
observations: the text embedded and the number of vectors. Not read: usage, provider metadata,
streaming timings (``ai.response.msToFirstChunk``), the vectors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.chat_values import Call, output_text, read_messages, text_of
from localfa.traces.importers.common import type_name
from localfa.traces.importers.otel_genai import fallback_agent
from localfa.traces.importers.span_steps import Attrs, Dialect, SpanRead, single, span_traces
from localfa.traces.importers.spans import Span, any_span, collect_spans, is_span_container, maybe_json
from localfa.traces.model import Trace

NAME = "vercel-ai"
_CALL_SUFFIXES = (".doGenerate", ".doStream")
_EMBED = "ai.embed"  # ai.embed, ai.embedMany and their .doEmbed


def _operation(span: Span) -> str:
    op = span.attributes.get("ai.operationId")
    return op if isinstance(op, str) and op else span.name.split(" ", 1)[0]


def _is_vercel(span: Span) -> bool:
    return _operation(span).startswith("ai.") and any(k.startswith("ai.") for k in span.attributes)


def sniff(data: Any) -> bool:
    """A span container with a span the AI SDK wrote (``ai.*`` operation and attributes)."""
    return is_span_container(data) and any_span(data, _is_vercel)


def _calls(raw: Any) -> list[Call]:
    """``ai.response.toolCalls``: ``[{toolCallId, toolName, args | input}]``."""
    value = maybe_json(raw)
    if not isinstance(value, list):
        return []
    return [
        {"id": c.get("toolCallId"), "name": c.get("toolName"), "arguments": maybe_json(c.get("args", c.get("input")))}
        for c in value
        if isinstance(c, dict)
    ]


def _prompt_text(value: Any) -> str:
    """The user's prompt inside ``ai.prompt``: its ``prompt``, else its messages."""
    prompt = maybe_json(value)
    if isinstance(prompt, dict):
        if prompt.get("prompt") is not None:
            return text_of(prompt["prompt"])
        msgs, _ = read_messages(prompt.get("messages"))
        return "\n".join(m.text for m in msgs if m.role == "user" and m.text)
    return text_of(prompt) if prompt is not None else ""


def _json_text(value: Any) -> str:
    """A value the SDK wrote as JSON (``"\\"The quick...\\""``: a string literal) as its text."""
    if isinstance(value, str) and value.strip().startswith('"'):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return text_of(maybe_json(value))


def _read_embedding(op: str, a: Attrs) -> SpanRead:
    """An embedding call: a service the app called (an observation), the text(s) it embedded and
    how many vectors came back; the vectors themselves are not read."""
    values = a.first("ai.value", "ai.values")
    vectors = maybe_json(a.first("ai.embedding", "ai.embeddings"))
    count = len(vectors) if isinstance(vectors, list) and vectors and isinstance(vectors[0], (list, str)) else (1 if vectors else 0)
    texts = [_json_text(v) for v in values] if isinstance(values, list) else ([_json_text(values)] if values else [])
    return SpanRead(
        kind="tool",
        role="tool",
        name=op,
        content="\n".join(t for t in texts if t),
        observation=f"[{count} embedding vector{'s' if count != 1 else ''}]" if count else None,
    )


def _read(span: Span, a: Attrs) -> SpanRead | None:
    if not _is_vercel(span):
        return None
    op = _operation(span)
    if op == "ai.toolCall":
        name = a.get("ai.toolCall.name")
        result = a.get("ai.toolCall.result")
        return SpanRead(
            kind="tool",
            role="tool",
            name=str(name) if name else None,
            content=text_of(maybe_json(a.get("ai.toolCall.args"))),
            observation=output_text(maybe_json(result)) if result is not None else None,
            tools=[str(name)] if name else [],
        )
    if op.startswith(_EMBED):
        return _read_embedding(op, a)
    response = a.first("ai.response.text", "ai.response.object")
    if op.endswith(_CALL_SUFFIXES):
        in_msgs, _ = read_messages(maybe_json(a.get("ai.prompt.messages")))
        system = next((m.text for m in in_msgs if m.role == "system"), None)
        return SpanRead(
            kind="llm",
            role="assistant",
            name=op,
            content=text_of(maybe_json(response)) if response is not None else "",
            tool_calls=_calls(a.get("ai.response.toolCalls")),
            in_msgs=in_msgs,
            system=system,
        )
    final = text_of(maybe_json(response)) if response is not None else None
    return SpanRead(kind="span", role=op, name=op, task=_prompt_text(a.get("ai.prompt")) or None, final=final or None)


def agent_name(span: Span) -> str | None:
    """The name the app gave the traced call (``ai.telemetry.functionId``)."""
    name = span.attributes.get("ai.telemetry.functionId")
    return name if isinstance(name, str) and name.strip() else None


DIALECT = Dialect(read=_read, agent_name=agent_name, fallback_agent=fallback_agent)


def parse_many(data: Any, path: Path, source: str) -> list[Trace]:
    """An AI SDK span export as Traces, one per trace it holds (one step per provider call and per tool run)."""
    if not is_span_container(data):
        raise TraceError(source, f"not a span export: expected spans with 'spanContext' or an OTLP object, got {type_name(data)}")
    spans, meta = collect_spans(data, source)
    return span_traces(NAME, spans, meta, DIALECT, path, source, f"none of the {len(spans)} spans is an AI SDK call or tool run")


def parse(data: Any, path: Path, source: str) -> Trace:
    """One trace of a span export (`parse_many` for several)."""
    return single(parse_many(data, path, source), source)
