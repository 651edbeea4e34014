"""OpenInference span trees (Arize Phoenix exports, the TRAIL benchmark) linearised into steps.

Spans become steps in start-time order, keeping their ``span_id`` and parent, so labels that
point at spans (TRAIL's ``location``) land on a step. Per span kind (``openinference.span.kind``):
- LLM: content = the output messages (``llm.output_messages.N.message.content`` or ``.contents``),
  tool calls from ``message.tool_calls``; where the output messages carry only a role (smolagents,
  the OpenAI Agents SDK for some items), text and tool calls come from the JSON in
  ``output.value`` (chat message, chat completion, Responses API response, LangChain result);
  input = the input messages new since the agent's previous call; role = the output role.
- TOOL: name = ``tool.name``; content = ``input.value`` (the arguments; ``name()`` when none, as
  for the Agents SDK's handoffs); observation = ``output.value`` (a LangChain ``ToolMessage``
  gives its content); role ``tool``.
- anything else (AGENT, CHAIN, ...): content = ``input.value``, observation = ``output.value``;
  role = the kind in lower case. LangGraph state (``{"messages": [...]}``) keeps only messages no
  call or tool carries; a span with nothing left only groups others and is not a step.
Error status and recorded exceptions are appended to the observation; nested LLM spans of one
call are one step (see span_steps).

The agent of a span is the nearest ``agent.name`` attribute on it or an ancestor, or the name of
the nearest AGENT span (smolagents' ``CodeAgent.run`` gives ``CodeAgent``; the Agents SDK names
its agent spans after the agent), or a LangGraph sub-graph (the first node of
``metadata.langgraph_checkpoint_ns`` when it is nested), else "agent".

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
from localfa.traces.importers.chat_values import bare_call, output_text, read_messages, state_messages, text_of, tool_names
from localfa.traces.importers.common import type_name
from localfa.traces.importers.llm_inputs import Msg
from localfa.traces.importers.span_steps import GENERIC_AGENT, Attrs, Dialect, SpanRead, single, span_traces
from localfa.traces.importers.spans import Span, any_span, collect_spans, is_span_container, maybe_json
from localfa.traces.model import Labels, Step, Trace, step_runs

NAME = "openinference"
KIND = "openinference.span.kind"
OI_KINDS = {"LLM", "CHAIN", "TOOL", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT", "UNKNOWN"}
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
    return any_span(unwrap_row(data, "")[0], lambda s: span_kind(s) is not None)


def _oi_messages(value: Any) -> list[dict[str, Any]]:
    """Unflattened ``llm.*_messages`` (``[{message: {role, content | contents, tool_calls}}]``)
    as plain chat messages for `read_messages`."""
    out: list[dict[str, Any]] = []
    for item in value if isinstance(value, list) else []:
        m = item.get("message") if isinstance(item, dict) else None
        if not isinstance(m, dict):
            continue
        msg: dict[str, Any] = {"role": m.get("role") or "unknown", "name": m.get("name")}
        if m.get("content") is not None:
            msg["content"] = m["content"]
        elif isinstance(m.get("contents"), list):
            msg["content"] = [c.get("message_content", c) for c in m["contents"] if isinstance(c, dict)]
        calls = m.get("tool_calls")
        msg["tool_calls"] = [c.get("tool_call", c) for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        out.append(msg)
    return out


def agent_name(span: Span) -> str | None:
    """The agent `span` names: ``agent.name``, an AGENT span's name, a LangGraph sub-graph."""
    name = span.attributes.get("agent.name")
    if isinstance(name, str) and name.strip():
        return name
    if span_kind(span) == "AGENT" and span.name:
        return _RUN_SUFFIX.sub("", span.name) or span.name
    meta = maybe_json(span.attributes.get("metadata"))
    ns = meta.get("langgraph_checkpoint_ns") if isinstance(meta, dict) else None
    if isinstance(ns, str) and "|" in ns:
        return ns.split("|", 1)[0].split(":", 1)[0] or None
    return None


def _tool_names(a: Attrs) -> list[str]:
    names: list[str] = []
    listed = a.get("smolagents.tools_names")
    if isinstance(listed, list):
        names += [str(x) for x in listed]
    tools = a.get("llm.tools")
    return names + tool_names(
        [t.get("tool", {}).get("json_schema") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    )


def _read_llm(span: Span, a: Attrs) -> SpanRead:
    in_msgs, _ = read_messages(_oi_messages(a.get("llm.input_messages")))
    out_msgs, calls = read_messages(_oi_messages(a.get("llm.output_messages")))
    out = a.get("output.value")
    if not any(m.text for m in out_msgs) and not calls and out is not None:
        out_msgs, calls = read_messages(out)  # messages carry only a role: the JSON output has it
        out_msgs = [m for m in out_msgs if m.role not in ("user", "system")] or [Msg(role="assistant", text=text_of(out))]
    content = "\n".join(m.text for m in out_msgs if m.text)
    inp = a.get("input.value")
    role = next((m.role for m in out_msgs if m.role != "unknown"), "assistant")
    return SpanRead(
        kind="llm",
        role=role,
        name=span.name or None,
        content=content,
        tool_calls=calls,
        in_msgs=in_msgs,
        input_text=text_of(inp) if not in_msgs and inp is not None else None,
        tools=_tool_names(a),
    )


def _agent_task(a: Attrs, inp: Any) -> str | None:
    """An AGENT span's task: ``smolagents.task``, else the ``task`` (or ``input``/``query``) its
    input object holds (smolagents' ``run(task=...)``), else its input when that is plain text."""
    task = a.get("smolagents.task")
    if isinstance(task, str) and task.strip():
        return task
    value = maybe_json(inp)
    if isinstance(value, dict):
        found = next((value[k] for k in ("task", "input", "query", "question") if isinstance(value.get(k), str) and value[k].strip()), None)
        return found
    return value.strip() if isinstance(value, str) and value.strip() else None


def _read(span: Span, a: Attrs) -> SpanRead:
    """One OpenInference span (see the module doc)."""
    kind = span_kind(span)
    a.get(KIND)
    if kind == "LLM":
        return _read_llm(span, a)
    inp, out = a.get("input.value"), a.get("output.value")
    if kind == "TOOL":
        tool = a.get("tool.name")
        name = str(tool) if tool else (span.name or None)
        content = text_of(inp) if inp not in (None, "") else bare_call(name)
        return SpanRead(
            kind="tool",
            role="tool",
            name=name,
            content=content,
            observation=output_text(out) if out is not None else None,
            tools=[name] if name else [],
        )
    state_in, state_out = state_messages(inp), state_messages(out)
    task = _agent_task(a, inp) if kind == "AGENT" else None
    final = state_out[0][-1].text if state_out and state_out[0] else (text_of(out) if out is not None else None)
    return SpanRead(
        kind="span",
        role=(kind or "span").lower(),
        name=span.name or None,
        content="" if state_in else text_of(inp),
        observation=None if state_out or out is None else text_of(out),
        state_in=state_in,
        state_out=state_out,
        tools=_tool_names(a),
        task=task if isinstance(task, str) else None,
        final=final,
    )


DIALECT = Dialect(read=_read, agent_name=agent_name, fallback_agent=lambda span: GENERIC_AGENT)


def _labels(raw: Any, steps: list[Step], by_span: dict[str, int], source: str) -> Labels | None:
    """TRAIL labels; a location at a span that is not itself a step lands on the step it joined."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("errors", []), list):
        raise TraceError(source, f"'labels' must be an object with an 'errors' array, got {type_name(raw)}")
    faults: list[tuple[int, int, dict[str, Any]]] = []
    for k, err in enumerate(raw.get("errors", [])):
        if not isinstance(err, dict):
            raise TraceError(source, f"labels.errors[{k}]: expected an object, got {type_name(err)}")
        loc = err.get("location")
        if not isinstance(loc, str):
            raise TraceError(source, f"labels.errors[{k}]: 'location' must be a span id, got {type_name(loc)}")
        if loc not in by_span:
            raise TraceError(source, f"labels.errors[{k}]: location {loc!r} is not a span in the trace ({len(by_span)} spans)")
        faults.append((by_span[loc], k, err))
    if not faults:
        return Labels()
    faults.sort(key=lambda f: (f[0], f[1]))
    first_step, _, first = faults[0]
    return Labels(
        mistake_agent=steps[first_step].agent,
        mistake_step=first_step,
        fault_steps=sorted({f[0] for f in faults}),
        fault_spans=step_runs([f[0] for f in faults]),  # TRAIL lists every faulty span: runs of them
        high_impact_steps=sorted({f[0] for f in faults if str(f[2].get("impact", "")).upper() == "HIGH"}),
        reason=text_of(first.get("description")) or None,
        categories=[str(f[2].get("category")) for f in faults if f[2].get("category")],
    )


def parse_many(data: Any, path: Path, source: str) -> list[Trace]:
    """An OpenInference span export as Traces, one per trace it holds (one step per span that
    says or does something)."""
    data, raw_labels = unwrap_row(data, source)
    if not is_span_container(data):
        raise TraceError(source, f"not an OpenInference span export: expected a 'spans' array or span objects, got {type_name(data)}")
    spans, meta = collect_spans(data, source)
    if not any(span_kind(s) for s in spans):
        raise TraceError(source, f"not an OpenInference trace: no span has '{KIND}'")
    labels = None if raw_labels is None else (lambda b: _labels(raw_labels, b.steps, b.span_step, source))
    traces = span_traces(NAME, spans, meta, DIALECT, path, source, f"none of the {len(spans)} spans says or does anything", labels)
    return [_warn_unanswerable(t) for t in traces]


def _warn_unanswerable(trace: Trace) -> Trace:
    """The trace, with a label warning for each labelled step no method can answer (a tool span:
    the environment's output)."""
    lab = trace.labels
    if lab is None:
        return trace
    lost = [i for i in lab.fault_steps if trace.steps[i].kind == "observation"]
    if not lost:
        return trace
    note = f"fault steps {lost} are tool spans (observations): no method can answer them"
    return trace.model_copy(update={"metadata": {**trace.metadata, "label_warnings": [*trace.metadata.get("label_warnings", []), note]}})


def parse(data: Any, path: Path, source: str) -> Trace:
    """An OpenInference span export of one trace as a Trace (`parse_many` for several)."""
    return single(parse_many(data, path, source), source)
