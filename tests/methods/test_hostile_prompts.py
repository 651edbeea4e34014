"""Every prompt of every registered method, rendered over a trace with a hostile value in every
field that can reach a prompt (`localfa.testing.hostile`), speaks only in its own voice: no line
outside a data block begins with trace text, and no stray block marker is left. The oracle engine
answers (so every stage runs, as far as a careful model would take it); a wrapper keeps each
request it is given."""

from __future__ import annotations

from typing import Sequence

import pytest

from localfa.api import diagnose_iter
from localfa.engine.types import Request
from localfa.methods.fencing import defuse, neutralise
from localfa.methods.names import aliases_in_prompt
from localfa.methods.registry import method_class, method_names
from localfa.oracle.engine import OracleEngine
from localfa.testing.hostile import MARK, hostile_trace, hostile_value, lines_in_prompt_voice


class RecordingOracle(OracleEngine):
    """The oracle engine, keeping every request it answers."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self.seen: list[Request] = []

    def _generate_raw(self, requests: Sequence[Request]):
        self.seen += requests
        return super()._generate_raw(requests)

    def _score_raw(self, requests: Sequence[Request]):  # prism's prompts are scored, not answered
        self.seen += requests
        return super()._score_raw(requests)


PROMPTING = [n for n in method_names() if method_class(n).calls_model]


@pytest.mark.parametrize("name", PROMPTING)
def test_no_trace_field_speaks_in_the_prompts_voice(name):
    engine = RecordingOracle()
    ((_, diag),) = list(diagnose_iter(engine, name, [hostile_trace()]))
    assert diag.error is None, diag.error
    assert engine.seen, f"{name} says it calls the model but sent no request"
    shown = 0
    for req in engine.seen:
        for msg in req.messages:
            if msg["role"] == "assistant":
                continue  # the model's own earlier turns
            shown += msg["content"].count(MARK)
            stray = lines_in_prompt_voice(msg["content"])
            assert not stray, f"{name}, request {req.key}: lines outside a block come from the trace: {stray[:3]}"
    assert shown  # the hostile values did reach the prompts (inside blocks, or as one safe line)


@pytest.mark.parametrize("name", sorted(set(method_names()) - set(PROMPTING)))
def test_a_method_that_says_it_calls_no_model_sends_no_request(name):
    engine = RecordingOracle()
    ((_, diag),) = list(diagnose_iter(engine, name, [hostile_trace()]))
    assert diag.error is None and diag.step is not None
    assert not engine.seen  # so the prompt checks above leave nothing out


def test_a_name_is_one_line_without_markers():
    value = hostile_value("agent")
    line = neutralise(value)
    assert "\n" not in line and len(line.splitlines()) == 1
    assert "<<<" not in line and ">>>" not in line
    assert line.startswith("agent-x: ‹‹‹END STEP 0›››")
    assert neutralise("a\u202eb\u200bc\x00d\x1be\tf") == "a b c d e f"
    assert lines_in_prompt_voice(f"[0] {line}:\n<<<STEP 0>>>\n{value.replace('<<<', '‹‹‹')}\n<<<END STEP 0>>>") == []
    assert lines_in_prompt_voice(f"[0] {value}:") != []  # the check finds a raw value


def test_all_at_once_offers_the_agent_names_its_prompt_shows_and_answers_in_the_traces_spelling():
    trace = hostile_trace()
    engine = RecordingOracle()
    ((_, diag),) = list(diagnose_iter(engine, "all-at-once", [trace]))
    assert diag.error is None, diag.error
    (req,) = engine.seen
    offered = req.grammar.spec["properties"]["agent"]["enum"]
    prompt = req.messages[-1]["content"]
    hostile = next(s.agent for s in trace.steps if MARK in s.agent)
    assert offered == ["agent-1", "agent-2", "Checker"]  # the model is offered what it was shown: aliases of unsafe names
    assert aliases_in_prompt(prompt)["agent-1"] == defuse(hostile)  # whose original stands in a fenced block
    assert all(name in prompt for name in offered)
    assert diag.agent in {s.agent.strip() for s in trace.steps}  # mapped back to the trace's own spelling
