"""What the coding-agent importers (ATIF, mini-swe-agent, SWE-agent) share.

A coding run has one agent, named after the agent system and its model
(``mini-swe-agent (google/gemini-3-pro-preview)``), plus its sub-agents where the format has
them. Everything else the run records is input the agent received, not something an agent did:
the system prompt, the task, command output, tool results, the harness's format-error and timeout
nags. Those become observation steps (`Step.kind == "observation"`), which no method may answer
as the decisive step, nor their source as the responsible agent.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import calls_text, content_text, file_stem, type_name
from localfa.traces.model import Step

ENVIRONMENT = "environment"
SYSTEM = "system"
USER = "user"

# Harness nags: the agent's output broke the harness's rules, or its command timed out.
_NAGS = (
    (
        "format_error",
        re.compile(
            r"^\s*(?:<[^>]+>\s*)*(please always provide exactly one|format error|your (?:last )?(?:output|response) (?:was|did) not)", re.I
        ),
    ),
    ("timeout", re.compile(r"^\s*(?:<[^>]+>\s*)*the last command .{0,400}? timed out", re.I | re.S)),
)
_ISSUE_PATTERNS = (
    re.compile(r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)\s*</pr_description>", re.S),
    re.compile(r"<issue_description>\s*(.*?)\s*</issue_description>", re.S),
    re.compile(r"<issue>\s*(.*?)\s*</issue>", re.S),
    re.compile(r"ISSUE:\s*\n(.*?)\n\s*INSTRUCTIONS:", re.S),
)


def agent_label(system: str, model: str | None) -> str:
    """The agent's name in the trace: the agent system, then its model in parentheses."""
    system = system.strip() or "agent"
    model = (model or "").strip()
    return f"{system} ({model})" if model else system


def issue_text(prompt: str) -> str:
    """The issue or instruction inside a harness's task prompt (SWE-bench templates wrap it in
    ``<pr_description>``, ``<issue_description>`` or ``ISSUE: ... INSTRUCTIONS:``), else the prompt."""
    for pattern in _ISSUE_PATTERNS:
        m = pattern.search(prompt)
        if m and m.group(1).strip():
            return m.group(1).strip()
    return prompt.strip()


def nag_kind(text: str) -> str | None:
    """'format_error' or 'timeout' when `text` is a harness nag rather than command output."""
    for name, pattern in _NAGS:
        if pattern.search(text[:600]):
            return name
    return None


def with_reasoning(message: str, reasoning: str | None) -> str:
    """A step's text: the model's explicit reasoning (when recorded apart), then its message."""
    reasoning = (reasoning or "").strip()
    if not reasoning:
        return message
    return f"<reasoning>\n{reasoning}\n</reasoning>\n{message}" if message else f"<reasoning>\n{reasoning}\n</reasoning>"


def action(index: int, agent: str, text: str, calls: list[dict[str, Any]] | None = None, **fields: Any) -> Step:
    """An agent's turn: what it said or thought, and the tool calls it made."""
    calls = calls or []
    return Step(index=index, agent=agent, role="assistant", content=text or calls_text(calls), tool_calls=calls, kind="action", **fields)


def observation(index: int, text: str, agent: str = ENVIRONMENT, role: str = "tool", **fields: Any) -> Step:
    """Input the agent received: a prompt, command output, a tool result or a harness nag."""
    if "name" not in fields and agent == ENVIRONMENT:
        fields["name"] = nag_kind(text)
    return Step(index=index, agent=agent, role=role, content=text, kind="observation", **fields)


def text_of(value: Any, where: str, source: str, what: str = "content") -> str:
    """Message content (string, parts list, null) as text; anything else is a TraceError."""
    if value is not None and not isinstance(value, (str, list, dict)):
        raise TraceError(source, f"{where}: '{what}' must be text, got {type_name(value)}")
    return content_text(value)


def opt_str(obj: dict[str, Any], key: str, where: str, source: str) -> str | None:
    """An optional text field; a non-text value is a TraceError naming it."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TraceError(source, f"{where}: '{key}' must be text, got {type_name(value)}")
    return value


# A Harbor trial's own record of its agent, under ``<trial>/agent/``: the ATIF trajectory, else the
# agent's own log (first pattern that matches): Claude Code's stream-json capture, a Codex rollout
# or a Claude Code session (the agent's config folder is ``agent/sessions``), a mini-swe-agent
# trajectory. Patterns are matched on the path under ``agent/`` (``*`` crosses folders).
HARBOR_TRAJECTORY = "trajectory.json"
HARBOR_AGENT_LOGS = ("claude-code.txt", "sessions/*rollout-*.jsonl", "sessions/projects/*.jsonl", "*.trajectory.json")
_SUBAGENT_FILES = "/subagents/"


def harbor_log_pattern(rel: str) -> bool:
    """Whether `rel` (a path under a trial's ``agent/``, '/'-separated) is an agent log localfa reads."""
    return _SUBAGENT_FILES not in f"/{rel}" and any(fnmatchcase(rel, p) for p in HARBOR_AGENT_LOGS)


def harbor_trial_folder(path: Path) -> Path | None:
    """The Harbor trial whose agent wrote `path`, by its place: ``<trial>/agent/trajectory.json``
    or one of `HARBOR_AGENT_LOGS` under ``<trial>/agent/``; else None."""
    for agent_dir in list(path.parents)[:5]:
        if agent_dir.name != "agent" or not agent_dir.parent.name:
            continue
        rel = path.relative_to(agent_dir).as_posix()
        if rel == HARBOR_TRAJECTORY or harbor_log_pattern(rel):
            return agent_dir.parent
    return None


def run_id(path: Path) -> str:
    """A coding run's id from its file name: ``astropy__astropy-14182.traj.json`` ->
    ``astropy__astropy-14182``; a Harbor trial's trajectory or agent log (``<trial>/agent/...``)
    -> the trial's name."""
    trial = harbor_trial_folder(path)
    if trial is not None:
        return trial.name
    stem = file_stem(path)
    return stem[: -len(".traj")] if stem.endswith(".traj") and len(stem) > 5 else stem
