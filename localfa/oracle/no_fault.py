"""The oracle on a run whose label names no fault (TELBench's no-error cases, a TRAIL trace with no
error): the right answer is "no decisive error" (`localfa.methods.none_answer`).

Kept apart from the policies on purpose, as one rule: a careful model that knows the run has no
fault answers ``"none"`` wherever the request's grammar admits it (`none_value`); a wrong answer
names something the grammar admits instead, drawn with the request's random source
(`sample_value`). A request that admits no "none" (an intermediate question of a method, or a
final answer on a run where "none" is not allowed) goes to the method's policy as before, and a
policy that needs the labelled step cannot answer it (the engine says so, naming the key). In an
oracle that sees only a fingerprint of the fault's words, a no-fault run's fingerprint says "no
fault" (`FaultFingerprint.no_fault`) and this same rule answers it.
"""

from __future__ import annotations

import random
from typing import Any

from localfa.engine.grammar import Grammar
from localfa.methods.none_answer import NONE

_NAMING = ("step", "step_id", "agent")
NONE_REASON = "No step is a decisive error: nothing in the run made it fail."


def _admits_none(node: dict[str, Any]) -> bool:
    return node.get("const") == NONE or NONE in node.get("enum", []) or any(_admits_none(a) for a in node.get("anyOf", []))


def _fill(props: dict[str, Any], required: list[str], naming: Any) -> dict[str, Any]:
    """An object of `required` keys: `naming(key, node)` for the fields that name a step or an
    agent, the reason text (cut to its maxLength) for strings."""
    out: dict[str, Any] = {}
    for key in required:
        node = props[key]
        if key in _NAMING:
            out[key] = naming(key, node)
        elif node.get("type") == "string":
            limit = int(node.get("maxLength", len(NONE_REASON)))
            out[key] = NONE_REASON[: max(int(node.get("minLength", 1)), min(limit, len(NONE_REASON)))]
        elif "const" in node:
            out[key] = node["const"]
        else:
            return {}
    return out


def none_value(grammar: Grammar) -> dict[str, Any] | None:
    """The "none" answer of a JSON answer grammar that admits one (its whole answer object has an
    alternative naming ``"none"``, or its step field admits it), else None."""
    if grammar.kind != "json" or not isinstance(grammar.spec, dict):
        return None
    spec = grammar.spec
    for alt in [spec, *spec.get("anyOf", [])]:
        props = alt.get("properties") or {}
        naming = [k for k in _NAMING if k in props]
        if naming and all(_admits_none(props[k]) for k in naming):
            value = _fill(props, list(alt.get("required", props)), lambda k, n: NONE)
            if value:
                return value
    return None


def sample_value(grammar: Grammar, rng: random.Random) -> dict[str, Any] | None:
    """A wrong answer to a "none" question: the grammar's other alternative, its step and agent
    drawn from what it admits."""
    from localfa.oracle.policy import node_choices, node_ints

    spec = grammar.spec

    def naming(key: str, node: dict[str, Any]) -> Any:
        ints = node_ints(node, spec)
        if ints:
            return rng.choice(ints)
        choices = [c for c in node_choices(node, spec) if c != NONE]
        return rng.choice(choices) if choices else NONE

    for alt in [*spec.get("anyOf", []), spec]:
        props = alt.get("properties") or {}
        if any(k in props for k in _NAMING) and not all(props[k].get("const") == NONE for k in _NAMING if k in props):
            value = _fill(props, list(alt.get("required", props)), naming)
            if value and not any(value.get(k) == NONE for k in _NAMING):
                return value
    return None
