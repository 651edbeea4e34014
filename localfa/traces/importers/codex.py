"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Lines: ``{timestamp, type, payload}`` with ``type`` ``session_meta`` (id, cwd, cli_version),
``turn_context`` (model), ``response_item`` (the conversation: ``message`` with role user /
developer / assistant, ``reasoning``, ``function_call`` / ``custom_tool_call`` /
``local_shell_call`` and their ``*_output``), ``event_msg`` (UI events that repeat the items, and
``task_complete`` / ``turn_aborted``) and ``compacted``. Rollouts of 2025 before the envelope
(a first line with ``id`` and ``instructions``, then bare items, ``record_type: state`` lines)
are read too.

Steps: the agent's reasoning summary, message and tool calls up to the next input are one action
step of ``Codex (<model>)``; each call's output is an observation joined to it (``call_id``, the
call's tool name). Developer messages and ``<environment_context>`` are system observations, the
first other user message is the task, later ones are user observations. The final output is the
last ``task_complete``'s message, else the last assistant message. Not read: token counts, rate
limits, encrypted reasoning, sub-agent threads (recorded in their own rollouts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import content_text, type_name
from localfa.traces.model import AgentInfo, Step, Trace

NAME = "codex"
SYSTEM = "Codex"
_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
_ENVELOPE = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}


def _is_envelope(x: Any) -> bool:
    return isinstance(x, dict) and x.get("type") in _ENVELOPE and isinstance(x.get("payload"), dict)


def sniff(data: Any) -> bool:
    """JSON Lines of ``{type, payload}`` with a ``session_meta`` or ``response_item``, or the
    pre-envelope rollout (a header with ``instructions``, then Responses API items)."""
    if not isinstance(data, list) or not data:
        return False
    head = data[:40]
    if any(_is_envelope(x) and x["type"] in ("session_meta", "response_item") for x in head):
        return True
    first = head[0]
    return (
        isinstance(first, dict)
        and "instructions" in first
        and "id" in first
        and any(isinstance(x, dict) and (x.get("type") in _CALLS or x.get("record_type") == "state") for x in head)
    )


@dataclass
class _Turn:
    """The agent's output since its last input: one action step."""

    reasoning: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.reasoning or self.text or self.calls)


@dataclass
class _Build:
    agent: str = SYSTEM  # relabelled with the model once the rollout is read
    steps: list[Step] = field(default_factory=list)
    turn: _Turn = field(default_factory=_Turn)
    call_names: dict[str, str] = field(default_factory=dict)
    task: str | None = None
    final: str | None = None
    last_text: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def flush(self) -> None:
        if self.turn.empty():
            return
        text = coding.with_reasoning("\n\n".join(self.turn.text), "\n".join(self.turn.reasoning))
        self.steps.append(coding.action(len(self.steps), self.agent, text, self.turn.calls))
        self.turn = _Turn()

    def observe(self, text: str, **fields: Any) -> None:
        self.flush()
        self.steps.append(coding.observation(len(self.steps), text, **fields))


def _call(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        return {"id": item.get("call_id"), "name": "shell", "arguments": action}
    if kind == "web_search_call":
        return {"id": item.get("id"), "name": "web_search", "arguments": item.get("action")}
    args = item.get("arguments") if kind == "function_call" else item.get("input")
    return {"id": item.get("call_id"), "name": item.get("name"), "arguments": args}


def _output_text(value: Any) -> str:
    """A call's output: text, content parts, or the exec tools' JSON ``{output, metadata}``."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    if isinstance(value, dict):  # {"content": ..., "success": ...} or {"output": ..., "metadata": ...}
        inner = value.get("content", value.get("output"))
        return content_text(inner) if inner is not None else content_text(value)
    return content_text(value)


def _message(b: _Build, item: dict[str, Any]) -> None:
    role = item.get("role")
    text = content_text(item.get("content"))
    if role == "assistant":
        b.turn.text.append(text)
        b.last_text = text
    elif role in ("developer", "system") or text.lstrip().startswith(("<environment_context>", "<user_instructions>")):
        b.observe(text, agent=coding.SYSTEM, role="system")
    elif b.task is None:
        b.task = text
        b.observe(text, agent=coding.USER, role="user", name="task")
    else:
        b.observe(text, agent=coding.USER, role="user")


def _item(b: _Build, item: dict[str, Any]) -> None:
    kind = item.get("type") if isinstance(item.get("type"), str) else None
    if kind == "message":
        _message(b, item)
    elif kind == "reasoning":
        summary = item.get("summary")
        text = content_text(summary) if isinstance(summary, list) else ""
        b.turn.reasoning.append(text or content_text(item.get("content")))
    elif kind in _CALLS:
        call = _call(item)
        if isinstance(call["id"], str) and isinstance(call["name"], str):
            b.call_names[call["id"]] = call["name"]
        b.turn.calls.append(call)
    elif kind in _OUTPUTS:
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        b.observe(_output_text(item.get("output")), call_id=call_id, name=b.call_names.get(call_id or ""))


def _event(b: _Build, payload: dict[str, Any]) -> None:
    kind = payload.get("type") if isinstance(payload.get("type"), str) else None
    if kind == "task_complete" and isinstance(payload.get("last_agent_message"), str):
        b.final = payload["last_agent_message"]
    elif kind == "turn_aborted":
        b.meta["exit_status"] = f"turn aborted ({payload.get('reason')})"


def parse(data: Any, path: Path, source: str) -> Trace:
    """A Codex rollout as a Trace; raises TraceError naming the line at fault."""
    if not isinstance(data, list):
        raise TraceError(source, f"not a Codex rollout: expected JSON Lines records, got {type_name(data)}")
    b = _Build()
    model: str | None = None
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise TraceError(source, f"line {i + 1}: expected an object, got {type_name(rec)}")
        if "payload" in rec and not isinstance(rec["payload"], dict):
            raise TraceError(source, f"line {i + 1}: 'payload' must be an object, got {type_name(rec['payload'])}")
        kind, payload = (rec.get("type"), rec["payload"]) if "payload" in rec else ("response_item", rec)
        if kind == "session_meta" or (i == 0 and "instructions" in rec):
            b.meta.update({k: payload[k] for k in ("id", "cwd", "cli_version", "originator") if isinstance(payload.get(k), str)})
        elif kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
        elif kind == "response_item":
            _item(b, payload)
        elif kind == "event_msg":
            _event(b, payload)
    b.flush()
    if not any(s.kind == "action" for s in b.steps):
        raise TraceError(source, "the rollout has no assistant output: nothing the agent did")
    agent = coding.agent_label(SYSTEM, model)
    steps = [s.model_copy(update={"agent": agent}) if s.kind == "action" else s for s in b.steps]
    return Trace(
        id=coding.run_id(path),
        source=source,
        format=NAME,
        task=b.task or "",
        agents=[AgentInfo(name=agent)],
        steps=steps,
        final_output=b.final or b.last_text,
        metadata=b.meta,
    )
