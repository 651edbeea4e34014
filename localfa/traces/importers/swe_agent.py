"""SWE-agent trajectories (``*.traj``).

Shape: ``{"trajectory": [{action, observation, response, thought, state?, execution_time?}],
"history": [{role, content, agent?, message_type?, tool_calls?, tool_call_ids?, is_demo?}],
"info": {submission, exit_status, model_stats, ...}, "environment"?, "replay_config"?}``.

- each ``trajectory`` entry is one agent turn (an action step: the response, or the thought and
  the action when the response lacks it) followed by what the environment returned (an
  observation step). Where ``history`` has the turn's tool calls (function-calling models), the
  action step keeps them and the observation carries the call's id.
- ``history`` also gives the system prompt and the task prompt (observation steps); its
  demonstrations (``is_demo``) are not this run's steps and are left out (counted in metadata).
- the agent is ``SWE-agent (<replay_config.agent.model.name>)``; the task is the issue
  (``replay_config.problem_statement.text``, else the issue inside the task prompt); the final
  output is ``info.submission`` (the patch), else the last response.
- a ``.traj`` that kept only ``history`` (no ``trajectory``) is read from its messages: assistant
  messages are actions (tool calls, else the ``action`` text as the call), tool results and later
  user messages are observations joined by ``tool_call_ids``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import object_items, openai_tool_calls, type_name
from localfa.traces.model import AgentInfo, Step, Trace

NAME = "swe-agent"


def _history_only(data: Any) -> bool:
    """A ``.traj`` that kept only ``history`` (SWE-agent's messages carry ``message_type`` and
    ``agent``, which Who&When histories never do)."""
    if not isinstance(data, dict) or data.get("trajectory") or not isinstance(data.get("history"), list):
        return False
    return any(isinstance(m, dict) and "message_type" in m and "agent" in m for m in data["history"][:10])


def sniff(data: Any) -> bool:
    """An object whose ``trajectory`` is a list of turns with ``action`` and ``observation``, or
    whose ``history`` holds SWE-agent's typed messages (a history-only ``.traj``)."""
    if _history_only(data):
        return True
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        return False
    first = next((t for t in data["trajectory"] if isinstance(t, dict)), None)
    if first is not None:
        return "action" in first and "observation" in first
    return isinstance(data.get("history"), list) and isinstance(data.get("info"), dict)


def _replay_config(data: dict[str, Any]) -> dict[str, Any]:
    raw = data.get("replay_config")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _model(replay: dict[str, Any]) -> str | None:
    agent = replay.get("agent")
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def _problem(replay: dict[str, Any]) -> str | None:
    problem = replay.get("problem_statement")
    text = problem.get("text") if isinstance(problem, dict) else None
    return text if isinstance(text, str) and text.strip() else None


def _history_parts(history: list[Any], source: str) -> tuple[str | None, str | None, list[dict[str, Any]], int]:
    """(system prompt, task prompt, the agent's messages in order, demonstrations skipped)."""
    system = task = None
    agent_msgs: list[dict[str, Any]] = []
    demos = 0
    for i, m in enumerate(history):
        if not isinstance(m, dict):
            raise TraceError(source, f"history[{i}]: expected a message object, got {type_name(m)}")
        if m.get("is_demo") or m.get("message_type") == "demonstration":
            demos += 1
            continue
        role = m.get("role")
        text = coding.text_of(m.get("content"), f"history[{i}]", source)
        if role == "system" and system is None:
            system = text
        elif role == "user" and task is None:
            task = text
        elif role == "assistant":
            agent_msgs.append(m)
    return system, task, agent_msgs, demos


def _turn_text(turn: dict[str, Any], where: str, source: str) -> str:
    response = coding.text_of(turn.get("response"), where, source, "response")
    action = coding.text_of(turn.get("action"), where, source, "action")
    if response.strip():
        return response if not action.strip() or action.strip() in response else f"{response}\n\n{action}"
    thought = coding.text_of(turn.get("thought"), where, source, "thought")
    return "\n\n".join(p for p in (thought, action) if p.strip())


def _history_steps(history: list[Any], agent: str, source: str) -> tuple[list[Step], str | None, str | None, int]:
    """Steps of a history-only ``.traj``: (steps, system prompt, task prompt, demonstrations
    skipped). Each assistant message is an action (its tool calls, else its ``action`` as the
    call); tool results and later user messages (SWE-agent's observations) are observations."""
    steps: list[Step] = []
    system = task = None
    demos = 0
    names: dict[str, str] = {}
    for where, m in object_items(history, "history", source, "a message object"):
        if m.get("is_demo") or m.get("message_type") == "demonstration":
            demos += 1
            continue
        role = m.get("role")
        text = coding.text_of(m.get("content"), where, source)
        if role == "assistant":
            calls = openai_tool_calls(m.get("tool_calls"), where, source)
            action = m.get("action") if isinstance(m.get("action"), str) else ""
            if not calls and action.strip():
                calls = [{"name": action.split()[0], "arguments": action}]
            names.update({c["id"]: str(c["name"]) for c in calls if isinstance(c.get("id"), str)})
            steps.append(coding.action(len(steps), agent, text or str(m.get("thought") or ""), calls))
        elif role == "system" and system is None:
            system = text
            steps.append(coding.observation(len(steps), text, agent=coding.SYSTEM, role="system"))
        elif role == "user" and task is None:
            task = text
            steps.append(coding.observation(len(steps), text, agent=coding.USER, role="user", name="task"))
        else:
            ids = m.get("tool_call_ids") if isinstance(m.get("tool_call_ids"), list) else []
            call_id = ids[0] if len(ids) == 1 and isinstance(ids[0], str) else None
            name = names.get(call_id or "") or coding.nag_kind(text)
            steps.append(coding.observation(len(steps), text, call_id=call_id, name=name))
    return steps, system, task, demos


def parse(data: Any, path: Path, source: str) -> Trace:
    """A SWE-agent ``.traj`` as a Trace; raises TraceError naming the turn at fault."""
    if _history_only(data):
        return _parse_history_only(data, path, source)
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        raise TraceError(source, "not a SWE-agent trajectory: expected an object with a 'trajectory' array")
    history = data.get("history") if data.get("history") is not None else []
    if not isinstance(history, list):
        raise TraceError(source, f"'history' must be an array of messages, got {type_name(history)}")
    info: dict[str, Any] = data["info"] if isinstance(data.get("info"), dict) else {}
    turns = data["trajectory"]
    if not turns:
        raise TraceError(source, "empty history: 'trajectory' holds no turns")
    replay = _replay_config(data)
    agent = coding.agent_label("SWE-agent", _model(replay))
    system, task_prompt, agent_msgs, demos = _history_parts(history, source)
    steps: list[Step] = []
    if system is not None:
        steps.append(coding.observation(0, system, agent=coding.SYSTEM, role="system"))
    if task_prompt is not None:
        steps.append(coding.observation(len(steps), task_prompt, agent=coding.USER, role="user", name="task"))
    for i, turn in enumerate(turns):
        where = f"trajectory[{i}]"
        if not isinstance(turn, dict):
            raise TraceError(source, f"{where}: expected a turn object, got {type_name(turn)}")
        if "action" not in turn:
            raise TraceError(source, f"{where}: turn has no 'action'")
        msg = agent_msgs[i] if i < len(agent_msgs) else {}
        calls = openai_tool_calls(msg.get("tool_calls"), f"history (the agent's message {i})", source)
        steps.append(coding.action(len(steps), agent, _turn_text(turn, where, source), calls))
        if turn.get("observation") is not None:
            text = coding.text_of(turn.get("observation"), where, source, "observation")
            joined = calls[0] if len(calls) == 1 else {}
            call_id = joined.get("id") if isinstance(joined.get("id"), str) else None
            steps.append(coding.observation(len(steps), text, call_id=call_id, name=joined.get("name") or coding.nag_kind(text)))
    return _trace(data, info, replay, agent, system, task_prompt, steps, demos, path, source)


def _parse_history_only(data: dict[str, Any], path: Path, source: str) -> Trace:
    info: dict[str, Any] = data["info"] if isinstance(data.get("info"), dict) else {}
    replay = _replay_config(data)
    agent = coding.agent_label("SWE-agent", _model(replay))
    steps, system, task_prompt, demos = _history_steps(data["history"], agent, source)
    if not any(s.kind == "action" for s in steps):
        raise TraceError(source, "the history has no assistant message: nothing the agent did")
    return _trace(data, info, replay, agent, system, task_prompt, steps, demos, path, source)


def _trace(
    data: dict[str, Any],
    info: dict[str, Any],
    replay: dict[str, Any],
    agent: str,
    system: str | None,
    task_prompt: str | None,
    steps: list[Step],
    demos: int,
    path: Path,
    source: str,
) -> Trace:
    """The Trace around `steps`: the patch as final output, exit status, demonstrations skipped."""
    submission = info.get("submission")
    final = submission if isinstance(submission, str) and submission.strip() else None
    if final is None:
        final = next((s.content for s in reversed(steps) if s.kind == "action" and s.content.strip()), None)
    metadata: dict[str, Any] = {k: info[k] for k in ("exit_status", "model_stats") if k in info}
    if isinstance(data.get("environment"), str):
        metadata["environment"] = data["environment"]
    if demos:
        metadata["demonstrations_skipped"] = demos
    return Trace(
        id=coding.run_id(path),
        source=source,
        format=NAME,
        task=_problem(replay) or coding.issue_text(task_prompt or ""),
        agents=[AgentInfo(name=agent, system_prompt=system)],
        steps=steps,
        final_output=final,
        metadata=metadata,
    )
