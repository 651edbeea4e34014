"""The one "no decisive error" answer every method may give, where the caller allows it.

A run that did not fail has no decisive error, and a method that must name a step will blame one
anyway. Where the caller allows it (`MethodContext.allow_none`: ``--allow-none``, or by default a
run its harness marked passed and nobody labelled, `allows_none`), each method may answer
`NONE` instead:

- a method whose final answer is the model's admits it in that answer's grammar, and only then
  (`step_or_none`: the step field is a step id or the string ``"none"``; `answer_or_none`: the
  whole answer object, or one that says ``"none"`` where it would name a step and an agent);
- a method whose final answer is its own rule answers it where that rule finds nothing
  (step-by-step: no step judged decisive; DRIFT: no error span marked; FALAT: no candidate passed
  the counterfactual check; an ensemble: most members answered it).

The diagnosis says so with ``no_error=True`` and no step or agent (`none_diagnosis`); the metrics
score it on the runs whose label names no fault (TELBench's no-error cases) and as a miss on every
other (`localfa.bench.metrics`).
"""

from __future__ import annotations

from typing import Any

from localfa.diagnosis import Diagnosis
from localfa.traces.model import Trace

NONE = "none"
NONE_STOP = "no_error"  # the stop reason of a "no decisive error" answer


def allows_none(trace: Trace, choice: bool | None) -> bool:
    """Whether a method may answer `NONE` on `trace`: the caller's `choice` (``--allow-none``,
    ``--no-allow-none``), else only for a run nobody labelled that its harness marked passed."""
    if choice is not None:
        return choice
    harness = trace.metadata.get("harness") if isinstance(trace.metadata, dict) else None
    return trace.labels is None and isinstance(harness, dict) and harness.get("failed") is False


def step_or_none(step: dict[str, Any], allow: bool) -> dict[str, Any]:
    """A step field's schema, admitting ``"none"`` too where `allow`."""
    return {"anyOf": [step, {"const": NONE}]} if allow else step


def answer_or_none(answer: dict[str, Any], allow: bool) -> dict[str, Any]:
    """An answer object's schema (``{"type": "object", "properties": ..., "required": ...}``), or
    where `allow` either it or the same object with ``"none"`` in each field that names a step or
    an agent (``step``, ``step_id``, ``agent``): the two agree, so no answer names an agent for a
    run it says has no error."""
    if not allow:
        return answer
    props = {k: ({"const": NONE} if k in ("step", "step_id", "agent") else v) for k, v in answer["properties"].items()}
    none = {**{k: v for k, v in answer.items() if k not in ("title", "properties")}, "properties": props}
    out: dict[str, Any] = {"anyOf": [{k: v for k, v in answer.items() if k != "title"}, none]}
    if "title" in answer:
        out["title"] = answer["title"]
    return out


def is_none(value: Any) -> bool:
    """Whether a parsed answer (a field or a whole answer object) is the `NONE` answer."""
    if isinstance(value, dict):
        return any(value.get(k) == NONE for k in ("step", "step_id"))
    return value == NONE


def none_diagnosis(ctx: Any, method: str, reasoning: str, **fields: Any) -> Diagnosis:
    """The "no decisive error" diagnosis of `method` on `ctx`'s trace."""
    fields.setdefault("stop_reason", NONE_STOP)
    diag: Diagnosis = ctx.diagnosis(method, step=None, agent=None, no_error=True, reasoning=reasoning, **fields)
    return diag
