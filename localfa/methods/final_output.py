"""The run's final output, as methods show it beside the run: the recorded one, else the run's last
substantive message (Who&When's algorithm-generated runs record none)."""

from __future__ import annotations

from typing import Callable

from localfa.methods.baselines import shorten
from localfa.traces.model import Step, Trace

SIGN_OFF_CHARS = 16  # a last message this short (TERMINATE) is a sign-off, not the result


def final_output(trace: Trace, cap_chars: int, text_of: Callable[[Step], str]) -> tuple[str, str]:
    """(the run's final output within `cap_chars`, where it came from). With none recorded, the
    run's last substantive message (`text_of` renders a step) stands in: trailing sign-offs such as
    a bare ``TERMINATE`` say nothing about the result."""
    if trace.final_output and trace.final_output.strip():
        return shorten(trace.final_output.strip(), cap_chars), "final_output"
    last = next((s for s in reversed(trace.steps) if len(s.content.strip()) > SIGN_OFF_CHARS), trace.steps[-1])
    return shorten(text_of(last), cap_chars), f"last message (step {last.index})"
