"""Helpers shared by the importers: text coercion, type names for error messages, labels checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.model import AgentInfo, Labels, Step, normalize_agent


def type_name(value: Any) -> str:
    """JSON type name of a parsed value, for messages ('an object', 'a string', ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def dumps(value: Any) -> str:
    """Compact, deterministic JSON for non-text payloads (tool arguments, structured outputs)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def parts_text(parts: list[Any]) -> str:
    """Text of a multi-part content list (OpenAI / AutoGen / OTel parts); images become <image>."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part.get("content"), str):
                out.append(part["content"])
            elif kind in ("image_url", "image", "input_image", "blob", "uri", "file"):
                out.append("<image>" if "image" in str(kind) else f"<{kind}>")
            else:
                out.append(dumps(part))
        elif part is not None:
            out.append(dumps(part))
    return "\n".join(out)


def calls_text(calls: list[dict[str, Any]]) -> str:
    """Tool calls as text, one ``name(arguments)`` per line (for steps that say nothing else)."""
    lines = []
    for c in calls:
        args = c.get("arguments")
        lines.append(f"{c.get('name')}({args if isinstance(args, str) else dumps(args)})")
    return "\n".join(lines)


def object_items(raw: Any, where: str, source: str, what: str = "an object") -> list[tuple[str, dict[str, Any]]]:
    """(``where[i]``, item) for an array of objects (None: no items); anything else, or an item
    that is not an object, is a TraceError naming it."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TraceError(source, f"{where}: must be an array, got {type_name(raw)}")
    out = []
    for j, item in enumerate(raw):
        if not isinstance(item, dict):
            raise TraceError(source, f"{where}[{j}]: expected {what}, got {type_name(item)}")
        out.append((f"{where}[{j}]", item))
    return out


def openai_tool_calls(raw: Any, where: str, source: str) -> list[dict[str, Any]]:
    """OpenAI-style ``tool_calls`` (``{id, function: {name, arguments}}``, or flat) as
    ``{id?, name, arguments}``; a malformed list is a TraceError naming `where`."""
    calls = []
    for _, call in object_items(raw, f"{where}.tool_calls", source):
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        out = {"name": fn.get("name"), "arguments": fn.get("arguments")}
        if call.get("id") is not None:
            out = {"id": call["id"], **out}
        calls.append(out)
    return calls


def content_text(value: Any) -> str:
    """Any message content (string, parts list, object) as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return parts_text(value)
    if value is None:
        return ""
    return dumps(value)


def required_content(obj: dict[str, Any], where: str, source: str, what: str) -> Any:
    """The ``content`` of a message or step object; missing or null is a TraceError."""
    if "content" not in obj:
        raise TraceError(source, f"{where}: {what} has no 'content'")
    if obj["content"] is None:
        raise TraceError(source, f"{where}: {what} 'content' is null")
    return obj["content"]


def first_line(text: str, limit: int = 80) -> str:
    """A short excerpt for error messages."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def parse_step_label(value: Any, n_steps: int, source: str, field: str) -> int:
    """A step label (Who&When stores it as a string) as an in-range 0-based int.

    A label that is not a whole number, or that points outside the trace, is a TraceError: a
    silently clamped label would corrupt every metric computed on the trace.
    """
    raw = value
    if isinstance(value, bool):
        raise TraceError(source, f"{field} must be a step number, got {raw!r}")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            raise TraceError(source, f"{field} must be a step number, got {raw!r}") from None
    elif isinstance(value, float):
        if not value.is_integer():
            raise TraceError(source, f"{field} must be a whole step number, got {raw!r}")
        value = int(value)
    elif not isinstance(value, int):
        raise TraceError(source, f"{field} must be a step number, got {type_name(raw)}")
    if not 0 <= value < n_steps:
        raise TraceError(source, f"{field} {raw!r} is outside the trace ({_steps(n_steps)}, valid 0..{n_steps - 1})")
    return value


def check_labels(labels: Labels | None, n_steps: int, source: str) -> None:
    """Every labelled step must exist in the trace."""
    if labels is None:
        return
    named = [("mistake_step", labels.mistake_step)] if labels.mistake_step is not None else []
    named += [("fault_steps", s) for s in labels.fault_steps]
    named += [("fault_spans", s) for span in labels.fault_spans for s in span]
    named += [("high_impact_steps", s) for s in labels.high_impact_steps]
    for field, step in named:
        if not 0 <= step < n_steps:
            raise TraceError(source, f"label {field} {step} is outside the trace ({_steps(n_steps)}, valid 0..{n_steps - 1})")


def agents_from_steps(steps: list[Step], known: list[AgentInfo] | None = None) -> list[AgentInfo]:
    """AgentInfo for every distinct speaker (the part before any parenthesis), first-seen order.

    `known` entries (with prompts/tools) come first in their own order and are not duplicated.
    """
    out: list[AgentInfo] = list(known or [])
    seen = {normalize_agent(a.name) for a in out}
    for s in steps:
        key = normalize_agent(s.agent)
        if key in seen:
            continue
        seen.add(key)
        speaker = s.agent.split("(", 1)[0].strip() or s.agent
        out.append(AgentInfo(name=speaker))
    return out


# Executors: they run the code the agents write and print its output. They decide nothing, so they
# are the environment: their steps are observations and no method names them (Who&When's
# CaptainAgent runs name it Computer_terminal, Magentic-One ComputerTerminal). Compared with case,
# spaces, underscores and hyphens ignored.
EXECUTORS = frozenset({"computerterminal"})


def is_executor(name: str) -> bool:
    """Whether `name` (its speaker part) is a known code executor (`EXECUTORS`)."""
    return "".join(c for c in normalize_agent(name) if c not in " _-") in EXECUTORS


def mark_executors(steps: list[Step], agents: list[AgentInfo]) -> tuple[list[Step], list[AgentInfo]]:
    """`steps` with every executor's step an observation (named ``executor``), and `agents` with
    the executors marked as environment (`AgentInfo.environment`)."""
    out = [
        s.model_copy(update={"kind": "observation", "name": s.name or "executor"}) if is_executor(s.agent) and s.kind == "action" else s
        for s in steps
    ]
    return out, [a.model_copy(update={"environment": True}) if is_executor(a.name) else a for a in agents]


TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj", ".eval")  # the files read as traces (.traj: SWE-agent; .eval: inspect_ai)


def file_stem(path: Path) -> str:
    """The id of a trace file outside any known benchmark tree: its name without extensions."""
    name = path.name
    for ext in TRACE_SUFFIXES:
        if name.lower().endswith(ext):
            return name[: -len(ext)] or name
    return path.stem or name
