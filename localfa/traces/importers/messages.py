"""Chat logs as message lists: AG2/AutoGen group chats, OpenAI-style messages, Magentic-One logs.

Accepted shapes (JSON array, JSON Lines, or an object wrapping the array):
- OpenAI / AG2 messages ``{"role", "content", "name"?, "tool_calls"?, "function_call"?}``, as in
  AG2's ``ChatResult.chat_history`` / ``GroupChat.messages`` (wrapper keys ``chat_history`` or
  ``messages``; AG2's ``summary`` becomes the final output);
- AutoGen AgentChat messages ``{"source", "content", "type"}`` (``TaskResult.messages``);
- Magentic-One ``log.jsonl`` records ``{"timestamp", "source", "message", "type"}``: the
  ``OrchestrationEvent`` / ``AgentEvent`` records are the conversation; ``LLMCallEvent`` (token
  counts) and ``WebSurferEvent`` (browser actions, repeated in the conversation) are counted in
  metadata, not made steps.

Each message is one step: Step.agent is ``name`` (else ``source``, else ``role``), so Magentic-One
roles such as ``Orchestrator (-> WebSurfer)`` keep their text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import (
    agents_from_steps,
    calls_text,
    content_text,
    file_stem,
    mark_executors,
    openai_tool_calls,
    required_content,
    type_name,
)
from localfa.traces.model import AgentInfo, Step, Trace, normalize_agent

NAME = "messages"
WRAPPER_KEYS = ("chat_history", "messages")
M1_CONVERSATION = {"OrchestrationEvent", "AgentEvent"}
M1_AUXILIARY = {"LLMCallEvent", "WebSurferEvent"}
_USERS = {"human", "user"}
_CHAT_ROLES = {"system", "developer", "user", "assistant", "tool", "function", "human", "ai", "model"}


def _entries(data: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """The message array and its wrapper object (if any), or None if the shape does not fit."""
    if isinstance(data, list):
        return data, {}
    if isinstance(data, dict):
        for key in WRAPPER_KEYS:
            if isinstance(data.get(key), list):
                return data[key], data
    return None


def _is_message(entry: Any) -> bool:
    return isinstance(entry, dict) and ("role" in entry or "source" in entry or ("content" in entry and "type" not in entry))


def sniff(data: Any) -> bool:
    """A list (or wrapper object) whose first item looks like a chat message or log record."""
    got = _entries(data)
    if got is None:
        return False
    items, _ = got
    return any(_is_message(x) or (isinstance(x, dict) and str(x.get("type")) in M1_AUXILIARY) for x in items[:20])


def _openai_step(i: int, m: dict[str, Any], where: str, source: str) -> Step:
    role, name = m.get("role"), m.get("name")
    for key, val in (("role", role), ("name", name)):
        if val is not None and not isinstance(val, str):
            raise TraceError(source, f"{where}: '{key}' must be text, got {type_name(val)}")
    if not (role or name):
        raise TraceError(source, f"{where}: message names no speaker (no 'role' or 'name')")
    calls = openai_tool_calls(m.get("tool_calls"), where, source)
    if isinstance(m.get("function_call"), dict):
        calls += openai_tool_calls([m["function_call"]], where, source)
    has_calls = bool(calls) or bool(m.get("tool_responses"))
    if "content" not in m and not has_calls:
        raise TraceError(source, f"{where}: message has no 'content'")
    content = m.get("content")
    if content is None and not has_calls:
        raise TraceError(source, f"{where}: message 'content' is null and it makes no tool call")
    if content is not None and not isinstance(content, (str, list, dict)):
        raise TraceError(source, f"{where}: message 'content' must be text, got {type_name(content)}")
    if role and role.strip().lower() not in _CHAT_ROLES and not name:
        # a role that is really a speaker ("Orchestrator (-> WebSurfer)", as in Who&When
        # hand-crafted histories): it names the agent; the chat role is user/assistant
        name, role = role, ("user" if normalize_agent(role) in _USERS else "assistant")
    text = content_text(content)
    if not text and m.get("tool_responses"):
        text = content_text([r.get("content") for r in m["tool_responses"] if isinstance(r, dict)])
    if not text and calls:
        text = calls_text(calls)
    return Step(index=i, agent=name or role, role=role or "assistant", content=text, tool_calls=calls)


def _autogen_step(i: int, m: dict[str, Any], where: str, source: str) -> Step:
    """AutoGen AgentChat message (`source`, `content`, `type`)."""
    agent, kind = m.get("source"), m.get("type")
    if not isinstance(agent, str) or not agent:
        raise TraceError(source, f"{where}: 'source' must name the agent, got {type_name(agent)}")
    content = required_content(m, where, source, "message")
    role = "user" if normalize_agent(agent) in _USERS else "assistant"
    calls: list[dict[str, Any]] = []
    if kind == "ToolCallRequestEvent" and isinstance(content, list):
        calls = openai_tool_calls(content, where, source)
        text = calls_text(calls)
    elif kind == "ToolCallExecutionEvent" and isinstance(content, list):
        role = "tool"
        text = "\n".join(content_text(r.get("content")) if isinstance(r, dict) else content_text(r) for r in content)
    else:
        text = content_text(content)
    stamp = m.get("created_at") if isinstance(m.get("created_at"), str) else None
    return Step(
        index=i, agent=agent, role=role, content=text, tool_calls=calls, name=kind if isinstance(kind, str) else None, start_time=stamp
    )


def _m1_step(i: int, m: dict[str, Any], where: str, source: str) -> Step:
    """Magentic-One log record (`source`, `message`, `timestamp`)."""
    agent = m.get("source")
    if not isinstance(agent, str) or not agent:
        raise TraceError(source, f"{where}: 'source' must name the agent, got {type_name(agent)}")
    if "message" not in m:
        raise TraceError(source, f"{where}: log record has no 'message'")
    if m["message"] is None:
        raise TraceError(source, f"{where}: log record 'message' is null")
    role = "user" if normalize_agent(agent) in _USERS else "assistant"
    stamp = m.get("timestamp") if isinstance(m.get("timestamp"), str) else None
    kind = m.get("type")
    return Step(
        index=i, agent=agent, role=role, content=content_text(m["message"]), name=kind if isinstance(kind, str) else None, start_time=stamp
    )


def parse(data: Any, path: Path, source: str) -> Trace:
    """A message list as a Trace; raises TraceError naming the message at fault."""
    got = _entries(data)
    if got is None:
        keys = ", ".join(sorted(data)[:8]) if isinstance(data, dict) else ""
        hint = f" (keys: {keys})" if keys else ""
        raise TraceError(
            source,
            f"not a message list: expected an array of messages or an object with 'chat_history'/'messages', got {type_name(data)}{hint}",
        )
    items, wrapper = got
    label = "messages" if not wrapper else next(k for k in WRAPPER_KEYS if wrapper.get(k) is items)
    if not items:
        raise TraceError(source, f"empty history: '{label}' holds no messages" if wrapper else "empty history: the array holds no messages")
    steps: list[Step] = []
    skipped: dict[str, int] = {}
    system_prompts: list[AgentInfo] = []
    unnamed_system: str | None = None
    for i, m in enumerate(items):
        where = f"{label}[{i}]" if wrapper else f"item {i}"
        if not isinstance(m, dict):
            raise TraceError(source, f"{where}: expected a message object, got {type_name(m)}")
        kind = m.get("type") if isinstance(m.get("type"), str) else None
        if kind in M1_AUXILIARY:
            skipped[kind] = skipped.get(kind, 0) + 1
            continue
        idx = len(steps)
        if kind in M1_CONVERSATION or ("message" in m and "source" in m and "content" not in m):
            step = _m1_step(idx, m, where, source)
        elif "source" in m and "role" not in m:
            step = _autogen_step(idx, m, where, source)
        elif "role" in m or "content" in m or "name" in m:
            step = _openai_step(idx, m, where, source)
        else:
            keys = ", ".join(sorted(m)[:8])
            raise TraceError(source, f"{where}: not a message (no 'role'/'content' or 'source'/'message'; keys: {keys})")
        if step.role == "system":
            if m.get("name"):
                system_prompts.append(AgentInfo(name=m["name"], system_prompt=step.content))
            elif unnamed_system is None:
                unnamed_system = step.content
        steps.append(step)
    if not steps:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()))
        raise TraceError(source, f"empty history: the log holds no conversation messages (only {counts})")
    metadata: dict[str, Any] = {}
    if skipped:
        metadata["skipped_records"] = skipped
    if unnamed_system is not None:
        metadata["system_prompt"] = unnamed_system
    for key, val in wrapper.items():
        if key != label and key != "summary":
            metadata[key] = val
    # the run's opening message is its task (AG2/AutoGen/Magentic-One start with it; a leading
    # system prompt is not the task)
    task = next((s.content for s in steps if s.role != "system" and s.content.strip()), steps[0].content)
    summary = wrapper.get("summary")
    final = summary if isinstance(summary, str) and summary.strip() else None
    if final is None:
        final = next((s.content for s in reversed(steps) if s.content.strip()), None)
    steps, agents = mark_executors(steps, agents_from_steps(steps, system_prompts))  # Computer_terminal: the environment
    return Trace(
        id=file_stem(path),
        source=source,
        format=NAME,
        subset=None,
        task=task,
        agents=agents,
        steps=steps,
        final_output=final,
        ground_truth=None,
        labels=None,
        metadata=metadata,
    )
