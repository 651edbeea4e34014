"""No method may blame an observation step: tool output, environment output and harness nags that
no agent wrote (`Step.kind == "observation"`), nor name their source as the responsible agent.

Every registered method runs on a coding-agent trace through the scripted engine, whose script
tries to answer with an observation step: wherever a JSON answer names a step (``step``,
``step_id``, ...) or an agent, it puts an observation step's id or the environment's name, and
sends that answer whenever the request's grammar accepts it. A method honours observation steps
when its grammars refuse such answers, and in any case when its diagnosis names an agent step.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from localfa.engine.errors import InvalidOutputError
from localfa.engine.examples import example_text
from localfa.engine.scripted import ScriptedEngine
from localfa.engine.types import Request
from localfa.methods.base import MethodContext
from localfa.methods.registry import get_method, method_names
from localfa.methods.runner import method_job, run_jobs
from localfa.traces.importers import coding
from localfa.traces.model import AgentInfo, Labels, Trace, normalize_agent

AGENT = "mini-swe-agent (gpt-5-mini)"
STEP_KEYS = {"step", "step_id", "t_hat", "focus_step", "first_error_step", "final_step", "predicted_step", "decisive_step", "ranking"}
AGENT_KEYS = {"agent", "responsible_agent", "mistake_agent"}


def coding_trace() -> Trace:
    """A failed coding run: prompts, then the agent's commands, each followed by its output."""
    steps = [
        coding.observation(0, "You are a coding agent. One bash command per turn.", agent=coding.SYSTEM, role="system"),
        coding.observation(1, "mean() must return 0.0 for an empty list.", agent=coding.USER, role="user", name="task"),
    ]
    turns = [
        ("I look at the function.", "grep -n 'def mean' -A2 stats.py", "3:def mean(xs):\n4:    return sum(xs) / len(xs)"),
        ("I divide by len - 1 so it never divides by zero.", "sed -i 's/len(xs)/max(len(xs) - 1, 1)/' stats.py", ""),
        ("Running the tests.", "pytest -q", "FAILED test_mean - assert 1.5 == 2.0\n1 failed, 3 passed"),
        ("The empty case works; submitting.", "git diff", "diff --git a/stats.py b/stats.py"),
    ]
    for thought, cmd, out in turns:
        call = {"id": f"c{len(steps)}", "name": "bash", "arguments": {"command": cmd}}
        steps.append(coding.action(len(steps), AGENT, thought, [call]))
        steps.append(coding.observation(len(steps), out, call_id=call["id"], name="bash"))
    return Trace(
        id="coding/obs",
        source="coding.json",
        format="mini-swe-agent",
        task="mean() must return 0.0 for an empty list.",
        agents=[AgentInfo(name=AGENT)],  # as the importers record it: system and model
        steps=steps,
        final_output="diff --git a/stats.py b/stats.py",
        ground_truth="return 0.0 when xs is empty",
        labels=Labels(mistake_agent=AGENT, mistake_step=4, fault_steps=[4]),
    )


def _tempt(value: Any, obs: list[int], rng: random.Random, key: str = "") -> Any:
    """`value` with every step-naming int set to an observation step, every agent to 'environment'."""
    if isinstance(value, dict):
        return {k: _tempt(v, obs, rng, k) for k, v in value.items()}
    if isinstance(value, list):  # a ranking of steps: its first place goes to an observation
        return [_tempt(v, obs, rng, key) if k == 0 or key not in STEP_KEYS else v for k, v in enumerate(value)]
    if key in STEP_KEYS and isinstance(value, int) and not isinstance(value, bool):
        return rng.choice(obs)
    if key in AGENT_KEYS and isinstance(value, str):
        return coding.ENVIRONMENT
    return value


class Tempter:
    """A script that answers with observation steps whenever the grammar lets it."""

    def __init__(self, trace: Trace) -> None:
        self.obs = [s.index for s in trace.steps if s.kind == "observation"]
        self.admitted: list[str] = []  # request keys whose grammar took an observation step or source

    def __call__(self, req: Request) -> str:
        text = example_text(req.grammar, req.sampling.seed)
        if req.grammar.kind != "json":
            return text
        rng = random.Random(req.sampling.seed)
        tempting = json.dumps(_tempt(json.loads(text), self.obs, rng), separators=(",", ":"))
        if tempting == text:
            return text
        try:
            req.grammar.parse(tempting)
        except InvalidOutputError:
            return text  # refused: the grammar only admits agent steps and agents
        self.admitted.append(req.key)
        return tempting


def _run(name: str) -> tuple[Trace, Any, Tempter]:
    trace = coding_trace()
    tempter = Tempter(trace)
    engine = ScriptedEngine(tempter)
    ctx = MethodContext(trace=trace, seed=5)
    ((_, diag),) = list(run_jobs(engine, [method_job(engine, get_method(name), ctx)]))
    return trace, diag, tempter


@pytest.mark.parametrize("name", method_names())
def test_no_method_names_an_observation_step_or_its_source(name: str) -> None:
    trace, diag, _ = _run(name)
    assert diag.error is None, diag.error
    assert diag.step in trace.action_steps(), f"{name} named step {diag.step}, an observation ({trace.steps[diag.step].agent})"
    acting = {normalize_agent(trace.steps[i].agent) for i in trace.action_steps()}
    assert diag.agent is None or normalize_agent(diag.agent) in acting, f"{name} blamed {diag.agent!r}"


@pytest.mark.parametrize("name", method_names())
def test_no_answer_grammar_admits_an_observation_step(name: str) -> None:
    _, _, tempter = _run(name)
    assert tempter.admitted == [], f"{name}: these grammars accepted an observation step or its source: {tempter.admitted}"


def test_the_tempter_does_tempt() -> None:
    """Without the restriction, the same script does pick an observation step (the test can fail)."""
    from pydantic import Field, create_model

    from localfa.engine.grammar import Grammar
    from localfa.engine.types import Sampling

    trace = coding_trace()
    loose = Grammar.json(create_model("Loose", step=(int, Field(ge=0, le=len(trace.steps) - 1))), name="loose")
    tempter = Tempter(trace)
    answer = json.loads(tempter(Request((), loose, Sampling(seed=1), key="k")))
    assert answer["step"] in tempter.obs and tempter.admitted == ["k"]


@pytest.mark.real
def test_all_at_once_on_the_embedded_model_names_an_agent_step_of_a_coding_run(vllm_engine):
    """The real model under the real grammar: a step where the agent acted, and that agent."""
    from localfa.api import diagnose

    trace = coding_trace()
    diag = diagnose(trace, method="all-at-once", engine=vllm_engine, seed=3)
    assert diag.error is None, diag.error
    assert diag.step in trace.action_steps() and diag.agent == AGENT
