"""The one place the oracle reads a trace's labels: each trace becomes a `FaultFingerprint`.

The engine calls `fingerprint_of` once per trace it is given and hands rules only the result
(`localfa.oracle.fingerprint`): the labelled fault step's distinctive shingles (and those of every
other labelled fault step or span), the labelled agent, the labelled categories, whether the run is
labelled faultless. A step's text here is what every prompt shows of it: its content, else its
tool calls, else what came back.
"""

from __future__ import annotations

import json

from localfa.oracle.fingerprint import FaultFingerprint, FaultText, distinctive_shingles
from localfa.traces.model import Step, Trace


def step_words_text(step: Step) -> str:
    """A step's text as the fingerprint reads it (module doc)."""
    if step.content.strip():
        return step.content
    if step.tool_calls:
        return json.dumps(step.tool_calls, ensure_ascii=False, default=str)
    return step.observation or ""


def _fault_text(trace: Trace, steps: list[int]) -> FaultText:
    """The distinctive shingles of the labelled steps `steps` (one fault: a step or a span)."""
    inside = set(steps)
    text = "\n".join(step_words_text(trace.steps[i]) for i in sorted(inside))
    others = (step_words_text(s) for s in trace.steps if s.index not in inside)
    return distinctive_shingles(text, others)


def fingerprint_of(trace: Trace) -> FaultFingerprint | None:
    """The fingerprint of `trace`'s labelled faults (None: the trace has no labels at all)."""
    labels = trace.labels
    if labels is None:
        return None
    n = len(trace.steps)
    faults: list[FaultText] = []
    if labels.mistake_step is not None and 0 <= labels.mistake_step < n:
        faults.append(_fault_text(trace, [labels.mistake_step]))
    seen = {labels.mistake_step}
    for lo, hi in labels.fault_spans:
        span = [i for i in range(lo, hi + 1) if 0 <= i < n and i not in seen]
        if span:
            faults.append(_fault_text(trace, span))
            seen.update(span)
    for i in labels.fault_steps:
        if 0 <= i < n and i not in seen:
            faults.append(_fault_text(trace, [i]))
            seen.add(i)
    agent = labels.mistake_agent
    if agent:
        agent = trace.resolve_agent(agent) or agent
    elif labels.mistake_step is not None and 0 <= labels.mistake_step < n:
        agent = trace.steps[labels.mistake_step].agent
    return FaultFingerprint(tuple(f for f in faults if f.shingles), agent, tuple(labels.categories), labels.no_fault)
