"""The trace model: agent-name normalisation and the helpers methods rely on."""

from __future__ import annotations

import pytest

from localfa.traces.model import AgentInfo, Labels, Step, Trace, normalize_agent


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Orchestrator (-> WebSurfer)", "orchestrator"),
        ("Orchestrator (thought)", "orchestrator"),
        ("Orchestrator (termination condition)", "orchestrator"),
        ("Websurfer", "websurfer"),
        ("WebSurfer", "websurfer"),
        ("  Verification_Expert ", "verification_expert"),
        ("VerificationExpert", "verificationexpert"),
        ("Web  Surfer", "web surfer"),
        ("human", "human"),
        ("(system)", "(system)"),
    ],
)
def test_normalize_agent(raw: str, key: str) -> None:
    assert normalize_agent(raw) == key


def _trace() -> Trace:
    agents = ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer", "Orchestrator (thought)"]
    return Trace(
        id="t",
        source="t.json",
        format="messages",
        subset=None,
        task="q",
        agents=[AgentInfo(name="Orchestrator", system_prompt="plan"), AgentInfo(name="WebSurfer")],
        steps=[Step(index=i, agent=a, role="assistant", content=f"c{i}", span_id=f"s{i}") for i, a in enumerate(agents)],
        final_output=None,
        ground_truth=None,
        labels=Labels(mistake_agent="Websurfer", mistake_step=3, fault_steps=[3], reason="r"),
    )


def test_trace_helpers() -> None:
    t = _trace()
    assert t.agent_at(2) == "Orchestrator (-> WebSurfer)"
    assert t.agent_names() == ["human", "orchestrator", "websurfer"]
    assert t.resolve_agent("Websurfer") == "WebSurfer"
    assert t.resolve_agent("orchestrator (thought)") == "Orchestrator"
    assert t.resolve_agent("human") == "human"
    assert t.resolve_agent("nobody") is None
    assert t.steps_of("orchestrator") == [1, 2, 4]
    assert t.step_of_span("s3") == 3 and t.step_of_span("zz") is None
    with pytest.raises(IndexError):
        t.agent_at(5)


def test_trace_json_round_trip() -> None:
    t = _trace()
    again = Trace.model_validate_json(t.model_dump_json())
    assert again == t


def test_step_defaults_and_extra_fields_rejected() -> None:
    s = Step(index=0, agent="a", role="user", content="")
    assert s.tool_calls == [] and s.observation is None and s.span_id is None and s.input is None
    with pytest.raises(ValueError):
        Step(index=0, agent="a", role="user", content="x", unknown=1)
    with pytest.raises(ValueError):
        Step(index=-1, agent="a", role="user", content="x")
