"""Who&When (Zhang et al., ICML 2025) failure logs, both subsets.

Quirks handled (see shared/data/whowhen/README.md):
- `mistake_step` is a string ("12"); it must parse and lie inside `history`, else TraceError.
- label agent and trace differ in case (`Websurfer` vs `WebSurfer`): kept as written; compare
  with `normalize_agent`.
- algorithm-generated (CaptainAgent) steps carry `name` (the agent) and `role` (the chat role
  "user"/"assistant", kept as Step.role); hand-crafted (Magentic-One) steps carry only `role`,
  which is the agent text ("Orchestrator (-> WebSurfer)"). For those, Step.agent is that text and
  Step.role is "user" when the speaker is the human, else "assistant".
- `is_correct` (algorithm-generated) vs `is_corrected` (hand-crafted): both become
  metadata["is_correct"].
- `system_prompt` (algorithm-generated only) gives AgentInfo.system_prompt.
- an empty `content` string is a real step (algorithm-generated/36 has one); a step with no
  `content` key at all is an error.
- the code executor (`Computer_terminal`, Magentic-One's `ComputerTerminal`) is the environment:
  its steps are observations and it is no agent a method may name (`common.mark_executors`). One
  dev label (algorithm-generated/14) puts its mistake step on such a step; the label is kept as
  written and says so in ``label_warnings``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from localfa.traces.errors import TraceError
from localfa.traces.importers.common import (
    agents_from_steps,
    content_text,
    file_stem,
    mark_executors,
    parse_step_label,
    required_content,
    type_name,
)
from localfa.traces.model import AgentInfo, Labels, Step, Trace, normalize_agent

NAME = "whowhen"
SUBSETS = ("algorithm-generated", "hand-crafted")
_HUMAN = {"human", "user"}
_FINAL_ANSWER = re.compile(r"FINAL ANSWER:[ \t]*(.*)")
_CONSUMED = {
    "history",
    "question",
    "ground_truth",
    "mistake_agent",
    "mistake_step",
    "mistake_reason",
    "system_prompt",
    "is_correct",
    "is_corrected",
    "question_ID",
}


def sniff(data: Any) -> bool:
    """A Who&When file is an object with a `history` array (labels optional)."""
    return isinstance(data, dict) and "history" in data


def folder_subset(folder: str) -> str | None:
    """The subset a folder name stands for, ignoring case and separators.

    The public repository spells them `Algorithm-Generated` / `Hand-Crafted`; copies use
    `algorithm_generated`, `handcrafted`, ...: all give the canonical lower-case name.
    """
    key = re.sub(r"[^a-z]", "", folder.lower())
    return next((s for s in SUBSETS if s.replace("-", "") == key), None)


def _subset(data: dict[str, Any], path: Path, steps_have_name: bool) -> str:
    named = folder_subset(path.parent.name)
    if named is not None:
        return named
    if "is_corrected" in data or not steps_have_name:
        return "hand-crafted"
    return "algorithm-generated"


def _opt_text(value: Any) -> str | None:
    if value is None:
        return None
    return content_text(value) if not isinstance(value, (int, float, bool)) else str(value)


def _steps(history: list[Any], source: str) -> tuple[list[Step], bool]:
    steps: list[Step] = []
    any_name = False
    for i, raw in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(raw, dict):
            raise TraceError(source, f"{where}: expected a step object, got {type_name(raw)}")
        content = required_content(raw, where, source, "step")
        if not isinstance(content, (str, list)):
            raise TraceError(source, f"{where}: step 'content' must be text, got {type_name(content)}")
        name, role = raw.get("name"), raw.get("role")
        for key, val in (("name", name), ("role", role)):
            if val is not None and not isinstance(val, str):
                raise TraceError(source, f"{where}: step '{key}' must be text, got {type_name(val)}")
        if name and name.strip():
            any_name = True
            agent, step_role = name, (role or "assistant")
        elif role and role.strip():
            agent = role
            step_role = "user" if normalize_agent(role) in _HUMAN else "assistant"
        else:
            raise TraceError(source, f"{where}: step names no agent (neither 'name' nor 'role')")
        steps.append(Step(index=i, agent=agent, role=step_role, content=content_text(content)))
    return steps, any_name


def _agents(data: dict[str, Any], steps: list[Step], source: str) -> list[AgentInfo]:
    prompts = data.get("system_prompt")
    if prompts is None:
        return agents_from_steps(steps)
    if not isinstance(prompts, dict):
        raise TraceError(source, f"'system_prompt' must map agent names to prompts, got {type_name(prompts)}")
    by_key = {normalize_agent(k): (k, content_text(v)) for k, v in prompts.items()}
    out: list[AgentInfo] = []
    seen: set[str] = set()
    for s in steps:  # speakers first, in order of first appearance
        key = normalize_agent(s.agent)
        if key in seen:
            continue
        seen.add(key)
        name, prompt = by_key.get(key, (s.agent.split("(", 1)[0].strip() or s.agent, None))
        out.append(AgentInfo(name=name, system_prompt=prompt))
    for key, (name, prompt) in by_key.items():  # then agents that have a prompt but never spoke
        if key not in seen:
            seen.add(key)
            out.append(AgentInfo(name=name, system_prompt=prompt))
    return out


def _final_output(steps: list[Step]) -> str | None:
    for s in reversed(steps):
        found = _FINAL_ANSWER.findall(s.content)
        if found:
            return found[-1].strip()
    return None


def _labels(data: dict[str, Any], steps: list[Step], source: str, warnings: list[str]) -> Labels | None:
    if not any(k in data for k in ("mistake_agent", "mistake_step", "mistake_reason")):
        return None
    agent = data.get("mistake_agent")
    if agent is not None and not isinstance(agent, str):
        raise TraceError(source, f"'mistake_agent' must be text, got {type_name(agent)}")
    raw_step = data.get("mistake_step")
    step = None
    if raw_step is not None and raw_step != "":
        step = parse_step_label(raw_step, len(steps), source, "mistake_step")
    categories: list[str] = []
    for key in ("labels", "mistake_type"):
        val = data.get(key)
        if isinstance(val, str) and val.strip():
            categories.append(val.strip())
        elif isinstance(val, list):
            categories.extend(str(v) for v in val if isinstance(v, (str, int, float)))
    if agent:
        key = normalize_agent(agent)
        if all(normalize_agent(s.agent) != key for s in steps):
            warnings.append(f"mistake_agent {agent!r} never acts in the trace")
        elif step is not None and normalize_agent(steps[step].agent) != key:
            warnings.append(f"mistake_agent {agent!r} did not act at mistake_step {step} (that step is {steps[step].agent!r})")
    if step is not None and steps[step].kind == "observation":
        warnings.append(f"mistake_step {step} is an observation ({steps[step].agent!r}, the environment): no method can answer it")
    return Labels(
        mistake_agent=agent or None,
        mistake_step=step,
        fault_steps=[step] if step is not None else [],
        reason=_opt_text(data.get("mistake_reason")),
        categories=categories,
    )


def parse(data: Any, path: Path, source: str) -> Trace:
    """A Who&When JSON object as a Trace; raises TraceError naming the field at fault."""
    if not isinstance(data, dict):
        raise TraceError(source, f"not a Who&When trace: expected an object with a 'history' array, got {type_name(data)}")
    if "history" not in data:
        raise TraceError(source, "not a Who&When trace: no 'history' array of steps")
    history = data["history"]
    if not isinstance(history, list):
        raise TraceError(source, f"'history' must be an array of steps, got {type_name(history)}")
    if not history:
        raise TraceError(source, "empty history: 'history' holds no steps")
    steps, any_name = _steps(history, source)
    subset = _subset(data, path, any_name)
    steps, agents = mark_executors(steps, _agents(data, steps, source))
    warnings: list[str] = []
    labels = _labels(data, steps, source, warnings)
    metadata: dict[str, Any] = {}
    if "question_ID" in data:
        metadata["question_id"] = data["question_ID"]
    for key in ("is_correct", "is_corrected"):
        if key in data:
            metadata["is_correct"] = data[key]
    for key, val in data.items():
        if key not in _CONSUMED:
            metadata[key] = val
    if warnings:
        metadata["label_warnings"] = warnings
    question = data.get("question")
    named = folder_subset(path.parent.name)
    trace_id = f"whowhen/{named}/{file_stem(path)}" if named else file_stem(path)
    return Trace(
        id=trace_id,
        source=source,
        format=NAME,
        subset=subset,
        task=_opt_text(question) or "",
        agents=agents,
        steps=steps,
        final_output=_final_output(steps),
        ground_truth=_opt_text(data.get("ground_truth")),
        labels=labels,
        metadata=metadata,
    )
