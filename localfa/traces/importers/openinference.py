"""OpenInference span trees (Arize Phoenix exports, the TRAIL benchmark) linearised into steps.

Every span becomes one step, in start-time order, keeping its ``span_id`` and parent, so labels
that point at spans (TRAIL's ``location``) land on a step. Per span kind
(``openinference.span.kind``):
- LLM: content = the output messages (``llm.output_messages.N.message.content`` or ``.contents``),
  tool calls from ``message.tool_calls``; input = the input messages new since the agent's
  previous call (see llm_inputs); role = the output message role (``assistant``).
- TOOL: name = ``tool.name``; content = ``input.value`` (the arguments); observation =
  ``output.value``; role ``tool``.
- anything else (AGENT, CHAIN, RETRIEVER, ...): content = ``input.value``, observation =
  ``output.value``; role = the kind in lower case.
Error status and recorded exceptions are appended to the observation.

The agent of a span is the nearest ``agent.name`` attribute on it or an ancestor, else the name
of the nearest AGENT span (smolagents' ``CodeAgent.run`` gives ``CodeAgent``), else "agent".

Labels: a TRAIL dataset row ``{"trace": ..., "labels": {"errors": [{category, location, impact,
description, evidence}]}}`` gives fault steps (every error location), high-impact steps
(impact HIGH), the mistake step (the earliest fault step) and its agent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import content_text, dumps, file_stem, type_name
from localfa.traces.importers.llm_inputs import InputTracker, Msg
from localfa.traces.importers.spans import (
    Span,
    ancestors,
    collect_spans,
    error_notes,
    is_span_container,
    maybe_json,
    ordered,
)
from localfa.traces.model import AgentInfo, Labels, Step, Trace, normalize_agent

NAME = "openinference"
KIND = "openinference.span.kind"
OI_KINDS = {"LLM", "CHAIN", "TOOL", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL",
            "EVALUATOR", "PROMPT", "UNKNOWN"}
_MSG_KEY = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_RUN_SUFFIX = re.compile(r"\.run$")


def unwrap_row(data: Any, source: str) -> tuple[Any, Any]:
    """(trace, labels) from a TRAIL dataset row ``{"trace", "labels"}`` (either may be JSON text)."""
    if isinstance(data, dict) and "trace" in data and "labels" in data and "spans" not in data:
        trace, labels = data["trace"], data["labels"]
        if isinstance(trace, str):
            try:
                trace = json.loads(trace)
            except ValueError as e:
                raise TraceError(source, f"'trace' holds text that is not valid JSON: {e}") from None
        if isinstance(labels, str):
            try:
                labels = json.loads(labels)
            except ValueError as e:
                raise TraceError(source, f"'labels' holds text that is not valid JSON: {e}") from None
        return trace, labels
    return data, None


def span_kind(span: Span) -> str | None:
    """The OpenInference kind of a span (attribute first, then Phoenix's `span_kind` field)."""
    kind = span.attributes.get(KIND)
    if isinstance(kind, str) and kind:
        return kind.upper()
    if span.kind and span.kind.upper() in OI_KINDS:
        return span.kind.upper()
    return None


def sniff(data: Any) -> bool:
    """A span container where some span carries an OpenInference kind."""
    data, _ = unwrap_row(data, "")
    if not is_span_container(data):
        return False
    try:
        spans, _ = collect_spans(data, "")
    except TraceError:
        return False
    return any(span_kind(s) for s in spans)


def _messages(attrs: dict[str, Any], direction: str) -> tuple[list[Msg], list[dict[str, Any]]]:
    """(messages, tool calls) from flattened ``llm.<direction>_messages.N.message.*`` attributes."""
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _MSG_KEY.match(key)
        if m and m.group(1) == direction:
            by_index.setdefault(int(m.group(2)), {})[m.group(3)] = value
    msgs: list[Msg] = []
    calls: list[dict[str, Any]] = []
    for _, fields in sorted(by_index.items()):
        text = fields.get("content")
        if text is None:
            parts: dict[int, dict[str, Any]] = {}
            for k, v in fields.items():
                pm = re.match(r"^contents\.(\d+)\.message_content\.(.+)$", k)
                if pm:
                    parts.setdefault(int(pm.group(1)), {})[pm.group(2)] = v
            texts = []
            for _, p in sorted(parts.items()):
                if p.get("text") is not None:
                    texts.append(content_text(p["text"]))
                elif p.get("type") == "image" or any(k.startswith("image") for k in p):
                    texts.append("<image>")
            text = "\n".join(texts)
        tc: dict[int, dict[str, Any]] = {}
        for k, v in fields.items():
            cm = re.match(r"^tool_calls\.(\d+)\.tool_call\.(.+)$", k)
            if cm:
                tc.setdefault(int(cm.group(1)), {})[cm.group(2)] = v
        msg_calls = []
        for _, c in sorted(tc.items()):
            call = {"name": c.get("function.name"), "arguments": maybe_json(c.get("function.arguments"))}
            if c.get("id") is not None:
                call = {"id": c["id"], **call}
            msg_calls.append(call)
        calls += msg_calls
        name = fields.get("name")
        body = content_text(text) or _calls_text(msg_calls)
        msgs.append(Msg(role=str(fields.get("role") or "unknown"), text=body, name=str(name) if name else None))
    return msgs, calls


def _agent_of(span: Span, spans: list[Span]) -> str:
    for s in ancestors(span, spans):
        name = s.attributes.get("agent.name")
        if isinstance(name, str) and name.strip():
            return name
        if span_kind(s) == "AGENT" and s.name:
            return _RUN_SUFFIX.sub("", s.name) or s.name
    return "agent"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else dumps(value))


def _calls_text(calls: list[dict[str, Any]]) -> str:
    return "\n".join(f"{c.get('name')}({_text(c.get('arguments'))})" for c in calls)


def _tool_names(span: Span) -> list[str]:
    names: list[str] = []
    listed = span.attributes.get("smolagents.tools_names")
    if isinstance(listed, list):
        names += [str(x) for x in listed]
    for key, value in span.attributes.items():
        if key.startswith("llm.tools.") and key.endswith(".tool.json_schema"):
            schema = maybe_json(value)
            if isinstance(schema, dict):
                fn = schema.get("function") if isinstance(schema.get("function"), dict) else schema
                if isinstance(fn.get("name"), str):
                    names.append(fn["name"])
    return names


def _labels(raw: Any, steps: list[Step], source: str) -> Labels | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("errors", []), list):
        raise TraceError(source, f"'labels' must be an object with an 'errors' array, got {type_name(raw)}")
    by_span = {s.span_id: s.index for s in steps if s.span_id}
    faults: list[tuple[int, int, dict[str, Any]]] = []
    for k, err in enumerate(raw.get("errors", [])):
        if not isinstance(err, dict):
            raise TraceError(source, f"labels.errors[{k}]: expected an object, got {type_name(err)}")
        loc = err.get("location")
        if not isinstance(loc, str):
            raise TraceError(source, f"labels.errors[{k}]: 'location' must be a span id, got {type_name(loc)}")
        if loc not in by_span:
            raise TraceError(
                source, f"labels.errors[{k}]: location {loc!r} is not a span in the trace ({len(by_span)} spans)"
            )
        faults.append((by_span[loc], k, err))
    if not faults:
        return Labels()
    faults.sort(key=lambda f: (f[0], f[1]))
    first_step, _, first = faults[0]
    return Labels(
        mistake_agent=steps[first_step].agent,
        mistake_step=first_step,
        fault_steps=sorted({f[0] for f in faults}),
        high_impact_steps=sorted({f[0] for f in faults if str(f[2].get("impact", "")).upper() == "HIGH"}),
        reason=_text(first.get("description")) or None,
        categories=[str(f[2].get("category")) for f in faults if f[2].get("category")],
    )


def parse(data: Any, path: Path, source: str) -> Trace:
    """An OpenInference span export as a Trace (one step per span)."""
    data, raw_labels = unwrap_row(data, source)
    if not is_span_container(data):
        raise TraceError(source, f"not an OpenInference span export: expected a 'spans' array or span objects, got {type_name(data)}")
    spans, meta = collect_spans(data, source)
    if not any(span_kind(s) for s in spans):
        raise TraceError(source, f"not an OpenInference trace: no span has '{KIND}'")
    tracker = InputTracker()
    steps: list[Step] = []
    agent_order: dict[str, str] = {}
    tools: dict[str, list[str]] = {}
    task: str | None = None
    first_user: str | None = None
    last_llm_output: str | None = None
    for span in ordered(spans):
        a = span.attributes
        kind = span_kind(span)
        agent = _agent_of(span, spans)
        key = normalize_agent(agent)
        agent_order.setdefault(key, agent)
        tools.setdefault(key, [])
        inp, out = a.get("input.value"), a.get("output.value")
        calls: list[dict[str, Any]] = []
        new_input: str | None = None
        observation: str | None = None
        name = span.name or None
        if kind == "LLM":
            in_msgs, _ = _messages(a, "input")
            out_msgs, calls = _messages(a, "output")
            content = "\n".join(m.text for m in out_msgs if m.text)
            if not content and calls:
                content = _calls_text(calls)
            if not out_msgs and out is not None:
                content = _text(out)
            role = out_msgs[0].role if out_msgs and out_msgs[0].role != "unknown" else "assistant"
            if in_msgs:
                new_input = tracker.new_input(key, in_msgs)
                if first_user is None:
                    first_user = next((m.text for m in in_msgs if m.role == "user" and m.text.strip()), None)
            elif inp is not None:
                new_input = _text(inp)
            tracker.note_output(key, content)
            last_llm_output = content or last_llm_output
        elif kind == "TOOL":
            role = "tool"
            tool = a.get("tool.name")
            name = str(tool) if tool else name
            content = _text(inp)
            observation = _text(out) if out is not None else None
            if name and name not in tools[key]:
                tools[key].append(name)
        else:
            role = (kind or "span").lower()
            content = _text(inp)
            observation = _text(out) if out is not None else None
            if kind == "AGENT" and task is None and isinstance(a.get("smolagents.task"), str):
                task = a["smolagents.task"]
        for t in _tool_names(span):
            if t not in tools[key]:
                tools[key].append(t)
        notes = error_notes(span)
        if notes:
            observation = "\n".join(([observation] if observation else []) + notes)
        steps.append(Step(
            index=len(steps), agent=agent, role=role, content=content, tool_calls=calls,
            observation=observation, input=new_input, span_id=span.span_id,
            parent_span_id=span.parent_id, name=name, start_time=span.start,
        ))
    root = next((s for s in ordered(spans) if s.parent is None), spans[0])
    root_out = root.attributes.get("output.value")
    root_in = root.attributes.get("input.value")
    agents = [
        AgentInfo(name=agent_order[k], system_prompt=tracker.system_prompts.get(k), tools=tools.get(k, []))
        for k in agent_order
    ]
    metadata: dict[str, Any] = dict(meta)
    metadata["spans"] = len(spans)
    return Trace(
        id=file_stem(path),
        source=source,
        format=NAME,
        subset=None,
        task=task or first_user or (_text(root_in) if root_in is not None else ""),
        agents=agents,
        steps=steps,
        final_output=_text(root_out) if root_out is not None else last_llm_output,
        ground_truth=None,
        labels=_labels(raw_labels, steps, source),
        metadata=metadata,
    )
