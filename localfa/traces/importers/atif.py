"""ATIF, the Agent Trajectory Interchange Format (Harbor's ``agent/trajectory.json``), v1.0 to v1.7.

Fields read (RFC 0001): root ``schema_version``, ``session_id``, ``trajectory_id`` (1.7),
``agent {name, version, model_name, tool_definitions (1.5)}``, ``steps``, ``notes``,
``subagent_trajectories`` (1.7, embedded sub-agents); per step ``step_id``, ``source``
(system / user / agent), ``model_name``, ``message`` (text, or content parts with images from
1.6), ``reasoning_content``, ``tool_calls [{tool_call_id, function_name, arguments}]``,
``observation.results [{source_call_id, content, subagent_trajectory_ref}]`` (system steps may
carry results from 1.2), ``is_copied_context``, ``timestamp``. Metrics, logprobs and token ids
are not read.

Steps: an agent step is one action step (reasoning, then the message; its tool calls kept), then
one observation step per result, joined to its call (``call_id``, and the call's function name).
System and user steps, and steps copied from an earlier trajectory (``is_copied_context``), are
observation steps: input the agent received. A result that delegates to a sub-agent
(``subagent_trajectory_ref``) is followed by the sub-agent's own steps, resolved by
``trajectory_id`` among the embedded ``subagent_trajectories`` (1.7) or by ``trajectory_path`` to
a file beside this one; each sub-agent is its own agent. The agent is ``<agent.name>
(<agent.model_name>)``; the task is the first user message; the final output is the lead agent's
last message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers import coding
from localfa.traces.importers.common import object_items, type_name
from localfa.traces.model import AgentInfo, Step, Trace, normalize_agent

NAME = "atif"
KNOWN_MINOR = 7
SOURCES = ("system", "user", "agent")
MAX_DEPTH = 8
_VERSION = re.compile(r"^\s*ATIF-v?(\d+)\.(\d+)", re.IGNORECASE)


def sniff(data: Any) -> bool:
    """An object with an ATIF ``schema_version``, or ``agent`` and ``steps`` carrying ``source``."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return False
    version = data.get("schema_version")
    if isinstance(version, str) and version.strip().upper().startswith("ATIF"):
        return True
    first = next((s for s in data["steps"] if isinstance(s, dict)), None)
    return isinstance(data.get("agent"), dict) and first is not None and "step_id" in first and "source" in first


@dataclass
class _Walk:
    """State of one import: the steps so far, the agents met, what could not be resolved."""

    source: str
    folder: Path
    steps: list[Step] = field(default_factory=list)
    agents: list[AgentInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)  # id() of trajectories already expanded

    def name_agent(self, agent: dict[str, Any], tid: str | None) -> str:
        """A distinct agent name: system and model, disambiguated by trajectory id if taken."""
        system = agent.get("name") if isinstance(agent.get("name"), str) else "agent"
        model = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
        taken = {normalize_agent(a.name) for a in self.agents}
        label, n = coding.agent_label(system, model), 0
        while normalize_agent(label) in taken:
            n += 1
            label = coding.agent_label(f"{system}/{tid if n == 1 and tid else f'sub{n}'}", model)
        self.agents.append(AgentInfo(name=label))
        return label


def _version(data: dict[str, Any], source: str, warnings: list[str]) -> str | None:
    raw = data.get("schema_version")
    if raw is None:
        warnings.append("no 'schema_version': read as ATIF v1.7")
        return None
    if not isinstance(raw, str):
        raise TraceError(source, f"'schema_version' must be text such as \"ATIF-v1.7\", got {type_name(raw)}")
    m = _VERSION.match(raw)
    if not m:
        raise TraceError(source, f'\'schema_version\' {raw!r} is not an ATIF version (expected "ATIF-v1.0" .. "ATIF-v1.{KNOWN_MINOR}")')
    major, minor = int(m.group(1)), int(m.group(2))
    if major != 1:
        raise TraceError(source, f"'schema_version' {raw!r}: only ATIF v1.x is read")
    if minor > KNOWN_MINOR:
        warnings.append(f"schema_version {raw}: newer than v1.{KNOWN_MINOR}; fields added since are ignored")
    return raw


def _calls(raw: Any, where: str, source: str) -> list[dict[str, Any]]:
    out = []
    for at, call in object_items(raw, f"{where}.tool_calls", source):
        name = call.get("function_name")
        if not isinstance(name, str) or not name:
            raise TraceError(source, f"{at}: 'function_name' must name the tool, got {type_name(name)}")
        call_id = call.get("tool_call_id")
        if call_id is not None and not isinstance(call_id, (str, int)):
            raise TraceError(source, f"{at}: 'tool_call_id' must be text, got {type_name(call_id)}")
        out.append({"id": None if call_id is None else str(call_id), "name": name, "arguments": call.get("arguments")})
    return out


def _results(step: dict[str, Any], where: str, source: str) -> list[dict[str, Any]]:
    obs = step.get("observation")
    if obs is None:
        return []
    if not isinstance(obs, dict):
        raise TraceError(source, f"{where}.observation: must be an object with 'results', got {type_name(obs)}")
    results = obs.get("results")
    if not isinstance(results, list):
        raise TraceError(source, f"{where}.observation.results: must be an array, got {type_name(results)}")
    for j, r in enumerate(results):
        if not isinstance(r, dict):
            raise TraceError(source, f"{where}.observation.results[{j}]: expected an object, got {type_name(r)}")
    return results


def _load_ref_file(ref_path: str, walk: _Walk, where: str) -> dict[str, Any] | None:
    """A sub-agent trajectory stored in a file beside this one, or None (with a warning)."""
    if "://" in ref_path:
        walk.warnings.append(f"{where}: sub-agent trajectory {ref_path!r} is not a local file; not read")
        return None
    target = (walk.folder / ref_path) if not Path(ref_path).is_absolute() else Path(ref_path)
    if not target.is_file():
        target = walk.folder / Path(ref_path).name
    if not target.is_file():
        walk.warnings.append(f"{where}: sub-agent trajectory file {ref_path!r} not found beside the trace")
        return None
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(walk.source, f"{where}: sub-agent trajectory {target}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise TraceError(walk.source, f"{where}: sub-agent trajectory {target}: expected an object, got {type_name(data)}")
    return data


def _resolve(ref: Any, embedded: list[dict[str, Any]], walk: _Walk, where: str) -> dict[str, Any] | None:
    if not isinstance(ref, dict):
        raise TraceError(walk.source, f"{where}: expected an object, got {type_name(ref)}")
    tid, sid, tpath = ref.get("trajectory_id"), ref.get("session_id"), ref.get("trajectory_path")
    for key, want in (("trajectory_id", tid), ("session_id", sid)):
        if want is not None:
            hit = next((t for t in embedded if t.get(key) == want), None)
            if hit is not None:
                return hit
    if isinstance(tpath, str) and tpath.strip():
        return _load_ref_file(tpath, walk, where)
    walk.warnings.append(f"{where}: sub-agent trajectory {tid or sid!r} is neither embedded nor in a file; not read")
    return None


def _embedded(traj: dict[str, Any], where: str, source: str) -> list[dict[str, Any]]:
    subs = traj.get("subagent_trajectories")
    if subs is None:
        return []
    if not isinstance(subs, list) or not all(isinstance(s, dict) for s in subs):
        raise TraceError(source, f"{where}subagent_trajectories: must be an array of trajectory objects")
    return subs


def _walk(traj: dict[str, Any], agent: str, walk: _Walk, prefix: str, depth: int) -> None:
    """Append the steps of `traj` (and, where referenced, its sub-agents') to `walk.steps`."""
    source = walk.source
    walk.seen.add(id(traj))
    raw_steps = traj.get("steps")
    if not isinstance(raw_steps, list):
        raise TraceError(source, f"{prefix}steps: must be an array of steps, got {type_name(raw_steps)}")
    embedded = _embedded(traj, prefix, source)
    for i, st in enumerate(raw_steps):
        where = f"{prefix}steps[{i}]"
        if not isinstance(st, dict):
            raise TraceError(source, f"{where}: expected a step object, got {type_name(st)}")
        sid = st.get("step_id")
        if isinstance(sid, bool) or not isinstance(sid, int):
            raise TraceError(source, f"{where}.step_id: must be a whole number (from 1), got {type_name(sid)}")
        kind = st.get("source")
        if kind not in SOURCES:
            raise TraceError(source, f"{where}.source: must be one of system, user, agent, got {kind!r}")
        text = coding.text_of(st.get("message"), where, source, "message")
        span = f"{prefix.rstrip('.')}:{sid}" if prefix else str(sid)
        stamp = st.get("timestamp") if isinstance(st.get("timestamp"), str) else None
        calls = _calls(st.get("tool_calls"), where, source) if kind == "agent" else []
        copied = st.get("is_copied_context") is True
        if kind == "agent" and not copied:
            reasoning = st.get("reasoning_content") if isinstance(st.get("reasoning_content"), str) else None
            walk.steps.append(
                coding.action(len(walk.steps), agent, coding.with_reasoning(text, reasoning), calls, span_id=span, start_time=stamp)
            )
        elif text.strip() or not st.get("observation"):
            who = {"system": coding.SYSTEM, "user": coding.USER}.get(kind, agent)
            role = {"system": "system", "user": "user"}.get(kind, "assistant")
            walk.steps.append(
                coding.observation(
                    len(walk.steps), text, agent=who, role=role, span_id=span, start_time=stamp, name="copied_context" if copied else None
                )
            )
        by_id = {c["id"]: c for c in calls if c["id"] is not None}
        for j, res in enumerate(_results(st, where, source)):
            at = f"{where}.observation.results[{j}]"
            call_id = res.get("source_call_id")
            call_id = None if call_id is None else str(call_id)
            call = by_id.get(call_id) if call_id is not None else None
            if call_id is not None and call is None and kind == "agent":
                walk.warnings.append(f"{at}.source_call_id {call_id!r} names no tool call of step_id {sid}")
            refs = res.get("subagent_trajectory_ref") or []
            if not isinstance(refs, list):
                refs = [refs]
            for k, ref in enumerate(refs):
                sub = _resolve(ref, embedded, walk, f"{at}.subagent_trajectory_ref[{k}]")
                if sub is None:
                    continue
                if id(sub) in walk.seen or depth >= MAX_DEPTH:
                    walk.warnings.append(f"{at}: sub-agent trajectory already read or nested too deeply; not read again")
                    continue
                _subagent(sub, walk, depth)
            content = coding.text_of(res.get("content"), at, source)
            if content.strip() or not refs:
                who = coding.SYSTEM if kind == "system" else coding.ENVIRONMENT
                name = (call or {}).get("name") or coding.nag_kind(content)
                walk.steps.append(coding.observation(len(walk.steps), content, agent=who, call_id=call_id, name=name, parent_span_id=span))
    for sub in embedded:  # embedded sub-agents no step referred to: after their parent's steps
        if id(sub) not in walk.seen and depth < MAX_DEPTH:
            walk.warnings.append(f"{prefix}subagent_trajectories: {sub.get('trajectory_id')!r} is referenced by no step; its steps follow")
            _subagent(sub, walk, depth)


def _subagent(sub: dict[str, Any], walk: _Walk, depth: int) -> None:
    tid = sub.get("trajectory_id") if isinstance(sub.get("trajectory_id"), str) else sub.get("session_id")
    agent_obj = sub.get("agent") if isinstance(sub.get("agent"), dict) else {}
    name = walk.name_agent(agent_obj, tid if isinstance(tid, str) else None)
    _walk(sub, name, walk, f"subagent[{tid or len(walk.agents) - 1}].", depth + 1)


def parse(data: Any, path: Path, source: str) -> Trace:
    """An ATIF trajectory as a Trace; raises TraceError naming the step and field at fault."""
    if not isinstance(data, dict):
        raise TraceError(source, f"not an ATIF trajectory: expected an object with 'agent' and 'steps', got {type_name(data)}")
    walk = _Walk(source=source, folder=path.parent)
    version = _version(data, source, walk.warnings)
    agent_obj = data.get("agent")
    if not isinstance(agent_obj, dict):
        raise TraceError(source, f"'agent' must be an object with 'name' and 'version', got {type_name(agent_obj)}")
    if not isinstance(agent_obj.get("name"), str) or not agent_obj["name"].strip():
        raise TraceError(source, 'agent.name: must name the agent system (e.g. "claude-code")')
    if not data.get("steps"):
        raise TraceError(
            source, "empty history: 'steps' holds no steps" if isinstance(data.get("steps"), list) else "'steps' must be an array of steps"
        )
    lead = walk.name_agent(agent_obj, None)
    _walk(data, lead, walk, "", 0)
    steps = walk.steps
    if not any(s.kind == "action" for s in steps):
        raise TraceError(source, 'the trajectory has no agent step (source "agent"): nothing an agent did')
    lead_key = normalize_agent(lead)
    task = next((s.content for s in steps if s.agent == coding.USER and s.name != "copied_context" and s.content.strip()), "")
    final = next(
        (s.content for s in reversed(steps) if s.kind == "action" and normalize_agent(s.agent) == lead_key and s.content.strip()), None
    )
    tools = agent_obj.get("tool_definitions")
    if isinstance(tools, list):
        names = [t.get("function", {}).get("name") if isinstance(t, dict) and isinstance(t.get("function"), dict) else None for t in tools]
        walk.agents[0] = walk.agents[0].model_copy(update={"tools": [n for n in names if isinstance(n, str)]})
    system = next((s.content for s in steps if s.agent == coding.SYSTEM and s.content.strip()), None)
    if system is not None:
        walk.agents[0] = walk.agents[0].model_copy(update={"system_prompt": system})
    metadata: dict[str, Any] = {"schema_version": version}
    for key in ("session_id", "trajectory_id", "notes", "continued_trajectory_ref"):
        if isinstance(data.get(key), str):
            metadata[key] = data[key]
    if isinstance(agent_obj.get("version"), str):
        metadata["agent_version"] = agent_obj["version"]
    if walk.warnings:
        metadata["import_warnings"] = walk.warnings
    return Trace(
        id=coding.run_id(path),
        source=source,
        format=NAME,
        task=task,
        agents=walk.agents,
        steps=steps,
        final_output=final,
        metadata=metadata,
    )
