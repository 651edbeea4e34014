"""Is the imported trace worth diagnosing? A warning when an importer left something unread.

An export whose attributes an importer does not read still loads, but its steps carry nothing:
a diagnosis of such a trace is a guess. The span importers record in
``trace.metadata["unused_attributes"]`` the content-like attributes they saw on the empty steps'
spans but did not read; `inspect` and `diagnose` (unless ``-q``) print this warning only then, so
the loss is never silent and a run whose steps are empty in the source raises no alarm.
"""

from __future__ import annotations

from localfa.traces.model import Step, Trace

MAX_NAMED = 8


def step_is_empty(step: Step) -> bool:
    """`Step.is_empty`: no text, no input, no output, no tool call."""
    return step.is_empty


def empty_steps(trace: Trace) -> list[int]:
    """Indices of the empty steps."""
    return [s.index for s in trace.steps if step_is_empty(s)]


def empty_step_warning(trace: Trace) -> str | None:
    """One line when steps came out empty while their spans carry content-like attributes the
    importer did not read (``metadata["unused_attributes"]``), naming them; None otherwise.

    Steps that are empty in the source (a Harbor step that only waited, a span with nothing in
    it) are no loss and give no warning: no method offers them as an answer anyway
    (`Trace.action_steps`)."""
    unused = [str(a) for a in trace.metadata.get("unused_attributes") or []]
    empty = empty_steps(trace)
    if not unused or not empty:
        return None
    n = len(trace.steps)
    more = f" and {len(unused) - MAX_NAMED} more" if len(unused) > MAX_NAMED else ""
    return (
        f"{len(empty)} of {n} step{'s' if n != 1 else ''} have no content, and their spans carry attributes "
        f"localfa does not read (seen but not used: {', '.join(unused[:MAX_NAMED])}{more})"
    )
