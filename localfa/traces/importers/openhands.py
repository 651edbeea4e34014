"""OpenHands trajectories and event streams.

Shapes: a JSON array of events (``save_trajectory_path``, the GUI's trajectory download), JSON
Lines of events, or an evaluation record ``{"instance_id", "instruction", "history": [events],
"test_result", "metadata"}``. An event is an action ``{id, source, action, args, message,
tool_call_metadata?}`` or an observation ``{id, source, observation, content, extras, cause,
tool_call_metadata?}``. An observation says ``source: "agent"`` when the agent's action caused
it, but nothing an agent wrote is in it: it is always an observation step.

Steps: an agent action is an action step (its ``thought``, or its message; the tool call as the
model made it, from ``tool_call_metadata``, else the action and its arguments); its observation
is joined to it (``call_id``: the tool call id, else the action's event id named by ``cause``).
User messages are observations (the first is the task), the ``system`` action is the system
prompt. ``delegate`` hands the run to a sub-agent (``args.agent``): the agent's actions until
the delegate's observation are that sub-agent's. The final output is the ``finish`` action's
message, else the last agent message. Not read: ``agent_state_changed`` and null observations
(counted), LLM metrics, the evaluation's ``test_result`` (a harness verdict only with a report).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import content_text, object_items, type_name
from localfa.traces.model import AgentInfo, Step, Trace, normalize_agent

NAME = "openhands"
SYSTEM = "OpenHands"
_QUIET = {"agent_state_changed", "null", "change_agent_state"}
_BOOKKEEPING = {"thought", "impl_source", "wait_for_response", "translated_ipython_code", "image_urls", "security_risk"}


def _events(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and isinstance(data.get("history"), list):
        return data["history"]
    return None


def _is_event(x: Any) -> bool:
    return isinstance(x, dict) and "source" in x and ("action" in x or "observation" in x)


def sniff(data: Any) -> bool:
    """Events with ``source`` and ``action`` or ``observation``."""
    events = _events(data)
    return bool(events) and sum(1 for x in events[:30] if _is_event(x)) >= min(2, len(events))  # type: ignore[index]


def _model(event: dict[str, Any]) -> str | None:
    meta = event.get("tool_call_metadata")
    resp = meta.get("model_response") if isinstance(meta, dict) else None
    model = resp.get("model") if isinstance(resp, dict) else None
    return model if isinstance(model, str) and model else None


def _model_call(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The tool call as the model wrote it (name and JSON arguments), found by its id."""
    resp = meta.get("model_response") if isinstance(meta.get("model_response"), dict) else {}
    choices = resp.get("choices") if isinstance(resp.get("choices"), list) else []
    for choice in choices:
        msg = choice.get("message") if isinstance(choice, dict) else None
        calls = msg.get("tool_calls") if isinstance(msg, dict) else None
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and call.get("id") == meta.get("tool_call_id"):
                return {"id": call["id"], "name": fn.get("name"), "arguments": fn.get("arguments")}
    return None


def _call(event: dict[str, Any]) -> dict[str, Any]:
    meta = event.get("tool_call_metadata")
    if isinstance(meta, dict):
        found = _model_call(meta)
        if found is not None:
            return found
        args = {k: v for k, v in (event.get("args") or {}).items() if k not in _BOOKKEEPING}
        return {"id": meta.get("tool_call_id"), "name": meta.get("function_name") or event.get("action"), "arguments": args}
    args = {k: v for k, v in (event.get("args") or {}).items() if k not in _BOOKKEEPING}
    return {"id": str(event.get("id")) if event.get("id") is not None else None, "name": event.get("action"), "arguments": args}


def _action_text(event: dict[str, Any]) -> str:
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    for value in (args.get("thought"), args.get("content") if event.get("action") == "message" else None, event.get("message")):
        if isinstance(value, str) and value.strip():
            return value
    return ""


class _Build:
    def __init__(self, lead: str) -> None:
        self.lead = lead
        self.agents = [AgentInfo(name=lead)]
        self.stack: list[str] = [lead]
        self.steps: list[Step] = []
        self.call_of_event: dict[str, dict[str, Any]] = {}
        self.task: str | None = None
        self.final: str | None = None
        self.skipped: dict[str, int] = {}

    def delegate(self, name: str) -> None:
        taken = {normalize_agent(a.name) for a in self.agents}
        label = coding.agent_label(name, None)
        if normalize_agent(label) not in taken:
            self.agents.append(AgentInfo(name=label))
        self.stack.append(label)

    def action(self, event: dict[str, Any], where: str, source: str) -> None:
        kind = event.get("action")
        who = event.get("source")
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if kind == "system":
            text = str(args.get("content") or event.get("message") or "")
            self.steps.append(coding.observation(len(self.steps), text, agent=coding.SYSTEM, role="system"))
            return
        if who != "agent":
            text = str(args.get("content") or event.get("message") or "")
            named = "task" if self.task is None and kind == "message" else None
            if named:
                self.task = text
            agent = coding.USER if who == "user" else coding.ENVIRONMENT
            self.steps.append(
                coding.observation(len(self.steps), text, agent=agent, role="user" if who == "user" else "tool", name=named or kind)
            )
            return
        calls = [] if kind in ("message", "finish", "think") else [_call(event)]
        if kind == "think":
            text = str(args.get("thought") or "")
        elif kind == "finish":
            text = str(args.get("final_thought") or args.get("outputs") or event.get("message") or "")
            self.final = text or self.final
        else:
            text = _action_text(event)
        if kind == "message":
            self.final = text or self.final
        if event.get("id") is not None and calls:
            self.call_of_event[str(event["id"])] = calls[0]
        self.steps.append(coding.action(len(self.steps), self.stack[-1], text, calls, name=str(kind) if kind else None))
        if kind == "delegate" and isinstance(args.get("agent"), str):
            self.delegate(args["agent"])

    def observation(self, event: dict[str, Any]) -> None:
        kind = str(event.get("observation"))
        if kind == "delegate" and len(self.stack) > 1:
            self.stack.pop()
        text = content_text(event.get("content"))
        if kind in _QUIET or (not text.strip() and kind not in ("run", "edit")):
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            return
        meta = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else {}
        call = self.call_of_event.get(str(event.get("cause"))) if event.get("cause") is not None else None
        call_id = meta.get("tool_call_id") or (call or {}).get("id")
        name = meta.get("function_name") or (call or {}).get("name") or kind
        self.steps.append(coding.observation(len(self.steps), text, call_id=str(call_id) if call_id else None, name=str(name)))


def parse(data: Any, path: Path, source: str) -> Trace:
    """An OpenHands trajectory (events, or an evaluation record) as a Trace."""
    events = _events(data)
    if events is None:
        raise TraceError(
            source, f"not an OpenHands trajectory: expected an array of events or an object with 'history', got {type_name(data)}"
        )
    label = "history" if isinstance(data, dict) else "events"
    items = object_items(events, label, source, "an event object")
    model = next((m for _, e in items if (m := _model(e))), None)
    b = _Build(coding.agent_label(SYSTEM, model))
    for where, event in items:
        if "observation" in event:
            b.observation(event)
        elif "action" in event:
            b.action(event, where, source)
        else:
            raise TraceError(source, f"{where}: an event has neither 'action' nor 'observation' (keys: {', '.join(sorted(event)[:8])})")
    if not any(s.kind == "action" for s in b.steps):
        raise TraceError(source, "the trajectory has no agent action: nothing the agent did")
    meta: dict[str, Any] = {"skipped_events": dict(sorted(b.skipped.items()))} if b.skipped else {}
    wrapper = data if isinstance(data, dict) else {}
    for key in ("instance_id", "test_result"):
        if key in wrapper:
            meta[key] = wrapper[key]
    instruction = wrapper.get("instruction")
    return Trace(
        id=coding.run_id(path),
        source=source,
        format=NAME,
        task=coding.issue_text(b.task or (instruction if isinstance(instruction, str) else "")),
        agents=b.agents,
        steps=b.steps,
        final_output=b.final,
        metadata=meta,
    )
