"""mini-swe-agent trajectories (``*.traj.json``, ``trajectory_format`` mini-swe-agent-1 / 1.1).

Shape: ``{"info": {exit_status, submission, model_stats, mini_version, config: {model:
{model_name}, ...}}, "messages": [{role, content, extra?, tool_calls?, tool_call_id?}],
"trajectory_format"?, "instance_id"?}``.

- ``assistant`` messages are the agent's turns (one action step each, tool calls kept where a
  tool-calling model made them); the agent is ``mini-swe-agent (<config.model.model_name>)``.
- everything else is an observation: the system prompt, the task (first user message), each
  command's output (``user`` or ``tool`` messages; a tool message keeps its ``tool_call_id``), the
  harness's format-error and timeout nags, and the ``exit`` message when it says anything.
- the task is the issue inside the task prompt (``<pr_description>``), else the whole prompt;
  the final output is ``info.submission`` (the patch), else the last assistant message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import object_items, openai_tool_calls, type_name
from localfa.traces.model import AgentInfo, Step, Trace

NAME = "mini-swe-agent"
_INFO_KEYS = ("exit_status", "submission", "mini_version", "model_stats")


def sniff(data: Any) -> bool:
    """An object with a ``messages`` array and an ``info`` object that mini-swe-agent writes."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    fmt = data.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    info = data.get("info")
    return isinstance(info, dict) and any(k in info for k in _INFO_KEYS)


def _model(info: dict[str, Any]) -> str | None:
    config = info.get("config")
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def parse(data: Any, path: Path, source: str) -> Trace:
    """A mini-swe-agent trajectory as a Trace; raises TraceError naming the message at fault."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TraceError(source, "not a mini-swe-agent trajectory: expected an object with a 'messages' array")
    info = data.get("info") if data.get("info") is not None else {}
    if not isinstance(info, dict):
        raise TraceError(source, f"'info' must be an object, got {type_name(info)}")
    messages = data["messages"]
    if not messages:
        raise TraceError(source, "empty history: 'messages' holds no messages")
    agent = coding.agent_label(NAME, _model(info))
    steps: list[Step] = []
    task_prompt: str | None = None
    system_prompt: str | None = None
    for where, m in object_items(messages, "messages", source, "a message object"):
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise TraceError(source, f"{where}: 'role' must name the speaker (system, user, assistant, tool, exit), got {type_name(role)}")
        if "content" not in m and not m.get("tool_calls"):
            raise TraceError(source, f"{where}: message has no 'content'")
        text = coding.text_of(m.get("content"), where, source)
        k = len(steps)
        if role == "assistant":
            calls = openai_tool_calls(m.get("tool_calls"), where, source)
            reasoning = m.get("reasoning_content") if isinstance(m.get("reasoning_content"), str) else None
            steps.append(coding.action(k, agent, coding.with_reasoning(text, reasoning), calls))
        elif role == "system":
            system_prompt = system_prompt if system_prompt is not None else text
            steps.append(coding.observation(k, text, agent=coding.SYSTEM, role="system"))
        elif role == "user" and task_prompt is None:
            task_prompt = text
            steps.append(coding.observation(k, text, agent=coding.USER, role="user", name="task"))
        elif role == "exit" and not text.strip():
            continue  # the end marker; its exit status and submission are in `info`
        else:
            call_id = coding.opt_str(m, "tool_call_id", where, source)
            steps.append(coding.observation(k, text, role=role, call_id=call_id))
    if not any(s.kind == "action" for s in steps):
        raise TraceError(source, "the trajectory has no 'assistant' message: nothing the agent did")
    submission = info.get("submission")
    final = submission if isinstance(submission, str) and submission.strip() else None
    if final is None:
        final = next((s.content for s in reversed(steps) if s.kind == "action" and s.content.strip()), None)
    metadata: dict[str, Any] = {k: info[k] for k in ("exit_status", "mini_version", "model_stats") if k in info}
    for key in ("trajectory_format", "instance_id"):
        if isinstance(data.get(key), str):
            metadata[key] = data[key]
    instance = data.get("instance_id")
    return Trace(
        id=instance if isinstance(instance, str) and instance.strip() else coding.run_id(path),
        source=source,
        format=NAME,
        task=coding.issue_text(task_prompt or ""),
        agents=[AgentInfo(name=agent, system_prompt=system_prompt)],
        steps=steps,
        final_output=final,
        metadata=metadata,
    )
