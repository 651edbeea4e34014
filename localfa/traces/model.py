"""The one trace model every method reads: whatever the log format, a failed run becomes a `Trace`.

Importers (``localfa.traces.importers``) fill it; the line view, the investigators, the baselines
and the metrics only ever see this shape. Original text (agent names, roles, content) is kept
as it was in the log; comparisons go through `normalize_agent` so that label/trace spelling
differences (``Websurfer`` vs ``WebSurfer``, ``Orchestrator (-> WebSurfer)``) do not matter.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from localfa.naming import PAREN_SUFFIX as _PAREN_SUFFIX  # noqa: F401  (re-exported: the oracle reads names without traces)
from localfa.naming import normalize_agent


class Step(BaseModel):
    """One turn of the run: a message, an LLM call, a tool call, or a span of work."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0, description="0-based position in Trace.steps")
    agent: str = Field(description="the agent as written in the log, e.g. 'Orchestrator (-> WebSurfer)'")
    role: str = Field(description="message role ('user', 'assistant', 'tool', ...) or span kind")
    content: str = Field(description="what the agent said / did at this step")
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    observation: str | None = Field(default=None, description="what came back (tool output, span output)")
    input: str | None = Field(
        default=None,
        description="what the agent newly received at this step (LLM spans: input messages not "
        "already seen in the agent's previous call); None where the format has no such thing",
    )
    span_id: str | None = None
    parent_span_id: str | None = None
    name: str | None = Field(default=None, description="span/operation/tool name where the format has one")
    start_time: str | None = None
    call_id: str | None = Field(
        default=None, description="observation steps: the id of the tool call (in an earlier step's tool_calls) this result answers"
    )
    kind: Literal["action", "observation"] = Field(
        default="action",
        description="'action': an agent (or a human) acted here; 'observation': environment output, a tool "
        "result or a harness nag that no agent wrote. No method may answer an observation step as where "
        "an agent went wrong, nor its source as the responsible agent.",
    )

    @property
    def is_empty(self) -> bool:
        """A step that says nothing and does nothing: no text, no input, no output, no tool call.

        An observation answering a tool call (``call_id``) may be empty: a command that printed
        nothing is a real result, not a field the importer missed. No method offers an empty step
        as an answer (`Trace.action_steps`): there is nothing in it to be wrong."""
        if self.kind == "observation" and self.call_id:
            return False
        return not (self.content.strip() or (self.observation or "").strip() or (self.input or "").strip() or self.tool_calls)


class Labels(BaseModel):
    """Ground-truth attribution where the benchmark has it.

    `mistake_step` / `fault_steps` / `high_impact_steps` are 0-based indices into Trace.steps
    (importers check they exist). `mistake_agent` keeps the label's own spelling; compare it
    with `normalize_agent` or resolve it with `Trace.resolve_agent`.
    """

    model_config = ConfigDict(extra="forbid")

    mistake_agent: str | None = None
    mistake_step: int | None = None
    fault_steps: list[int] = Field(default_factory=list)
    high_impact_steps: list[int] = Field(default_factory=list)
    fault_spans: list[tuple[int, int]] = Field(
        default_factory=list,
        description="labelled error spans as inclusive step ranges (span-level methods such as DRIFT are "
        "scored against them); derived from `fault_steps` where a format lists every faulty step",
    )
    reason: str | None = None
    categories: list[str] = Field(default_factory=list, description="error categories, e.g. TRAIL's")

    @property
    def no_fault(self) -> bool:
        """The label names no fault at all: the run has no decisive error (TELBench's no-error
        cases, a TRAIL trace with no error); the right answer is "none"."""
        return self.mistake_step is None and not self.fault_steps and not self.fault_spans and not self.mistake_agent


def step_runs(steps: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of step indices as inclusive ranges: [2, 3, 4, 7] -> [(2, 4), (7, 7)]."""
    runs: list[tuple[int, int]] = []
    for s in sorted(set(steps)):
        if runs and s == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    return runs


class AgentInfo(BaseModel):
    """An agent taking part in the run; prompt and tools where the log records them."""

    model_config = ConfigDict(extra="forbid")

    name: str
    system_prompt: str | None = None
    tools: list[str] = Field(default_factory=list)
    environment: bool = Field(
        default=False,
        description="an executor that runs what the agents write (Who&When's Computer_terminal, Magentic-One's "
        "ComputerTerminal), not an agent that decides: its steps are observations and no method names it",
    )


class Trace(BaseModel):
    """A failed multi-agent run, format-independent."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="stable id: 'whowhen/hand-crafted/12' for Who&When files, else the file stem")
    source: str = Field(description="the file path as given")
    format: str = Field(description="'whowhen' | 'messages' | 'openinference' | 'otel-genai' | 'atif' | 'mini-swe-agent' | 'swe-agent'")
    subset: str | None = Field(default=None, description="Who&When subset, else None")
    task: str = ""
    agents: list[AgentInfo] = Field(default_factory=list)
    steps: list[Step]
    final_output: str | None = None
    outcome: str | None = Field(
        default=None,
        description="what the harness's verifier reported of the run (reward, the tests' output), where a harness "
        "judged it; also the run's last step (an observation), so every method reads it as trace text",
    )
    ground_truth: str | None = None
    labels: Labels | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def agent_at(self, step: int) -> str:
        """The agent (original text) that acted at `step`."""
        if not 0 <= step < len(self.steps):
            raise IndexError(f"step {step} is outside the trace (0..{len(self.steps) - 1})")
        return self.steps[step].agent

    def action_steps(self) -> list[int]:
        """Indices of the steps an agent acted at, empty steps left out: what a method may answer
        (every step that says something when a format marks none as an action; every step when
        none does)."""
        actions = [s.index for s in self.steps if s.kind == "action" and not s.is_empty]
        return actions or [s.index for s in self.steps if not s.is_empty] or [s.index for s in self.steps]

    def label_answerable(self) -> bool:
        """Whether a method may answer the labelled decisive step (an action step, `action_steps`).
        A label on an executor's output is not (Who&When's algorithm-generated/14 labels a
        Computer_terminal step): a ceiling is measured on the labels a method can reach."""
        step = self.labels.mistake_step if self.labels is not None else None
        return step is None or step in self.action_steps()

    def environment_agents(self) -> list[str]:
        """The names of the executors the trace marks as environment (`AgentInfo.environment`)."""
        return [a.name for a in self.agents if a.environment]

    def agent_names(self) -> list[str]:
        """Distinct normalised speaker names, in order of first appearance in the steps."""
        seen: dict[str, None] = {}
        for s in self.steps:
            seen.setdefault(normalize_agent(s.agent), None)
        return list(seen)

    def resolve_agent(self, name: str) -> str | None:
        """The trace's own spelling of `name` (speaker part), or None if no step's agent matches.

        ``resolve_agent("Websurfer")`` on a Magentic-One trace gives ``"WebSurfer"``.
        """
        key = normalize_agent(name)
        for info in self.agents:
            if normalize_agent(info.name) == key:
                return info.name
        for s in self.steps:
            if normalize_agent(s.agent) == key:
                stripped = _PAREN_SUFFIX.sub("", s.agent.strip())
                return stripped or s.agent
        return None

    def steps_of(self, agent: str) -> list[int]:
        """Indices of the steps whose agent normalises like `agent`."""
        key = normalize_agent(agent)
        return [s.index for s in self.steps if normalize_agent(s.agent) == key]

    def step_of_span(self, span_id: str) -> int | None:
        """The step that carries `span_id` (span formats), or None."""
        for s in self.steps:
            if s.span_id == span_id:
                return s.index
        return None
