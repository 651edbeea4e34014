"""Is the imported trace worth diagnosing? A warning when steps came out empty.

An export whose attributes an importer does not read still loads, but its steps carry nothing:
a diagnosis of such a trace is a guess. `inspect` and every diagnosis print this warning so
the loss is never silent; the importers record in ``trace.metadata["unused_attributes"]`` the
content-like attributes they saw on the empty steps' spans but did not read.
"""

from __future__ import annotations

import math

from localfa.traces.model import Step, Trace

ALLOWED_EMPTY_SHARE = 0.05  # up to one empty step, or 5% of the steps, is not worth a warning
MAX_NAMED = 8


def step_is_empty(step: Step) -> bool:
    """`Step.is_empty`: no text, no input, no output, no tool call."""
    return step.is_empty


def empty_steps(trace: Trace) -> list[int]:
    """Indices of the empty steps."""
    return [s.index for s in trace.steps if step_is_empty(s)]


def empty_step_warning(trace: Trace) -> str | None:
    """One line when more than a few steps are empty, naming the attributes seen but not used."""
    empty = empty_steps(trace)
    allowed = max(1, math.floor(len(trace.steps) * ALLOWED_EMPTY_SHARE))
    if len(empty) <= allowed:
        return None
    n = len(trace.steps)
    msg = f"{len(empty)} of {n} step{'s' if n != 1 else ''} have no content: this export may use attributes localfa does not read"
    unused = [str(a) for a in trace.metadata.get("unused_attributes") or []]
    if unused:
        more = f" and {len(unused) - MAX_NAMED} more" if len(unused) > MAX_NAMED else ""
        msg += f" (seen but not used: {', '.join(unused[:MAX_NAMED])}{more})"
    return msg
