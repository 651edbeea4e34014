"""Which steps a growing-history prompt shows when the whole history no longer fits the window.

Step-by-step asks about step i with the log up to i. On a run of thousands of steps the log
outgrows any window even with every step cut to its floor (the step headers and block markers
alone take more), so the prompt shows the latest steps that fit, from a *start* that moves in
jumps: when the log from the current start to i would not fit, the start moves on so that the
steps shown take at most half of the room. Between jumps each prompt extends the one before (the
prefix cache serves it), and each jump re-reads at most half a window, so the prefill grows with
the run, not its square.

Token counts are taken once per step (`step_tokens`), never over a whole prompt per question.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

REFILL = 0.5  # after a jump, the steps shown take at most this share of the room


@dataclass
class HistoryWindow:
    """The first step each question's prompt shows (0 while the whole log fits)."""

    step_tokens: Sequence[int]  # tokens of each step's block as the prompt renders it
    room: int  # tokens the steps may take in one prompt (the window less the rest of the prompt)
    start: int = 0
    jumps: list[int] = field(default_factory=list)  # the steps asked when the start moved

    def first_shown(self, current: int) -> int:
        """The first step to show with the log up to `current` (moving the start if needed)."""
        used = sum(self.step_tokens[self.start : current + 1])
        if used <= self.room:
            return self.start
        budget = int(self.room * REFILL)
        start, used = current, self.step_tokens[current]
        while start > self.start + 1 and used + self.step_tokens[start - 1] <= budget:
            start -= 1
            used += self.step_tokens[start]
        self.start = start
        self.jumps.append(current)
        return start

    def bound(self) -> dict[str, Any] | None:
        """What the record says when the start ever moved (None when the whole log fit)."""
        if not self.jumps:
            return None
        return {
            "room_tokens": self.room,
            "moved_at_steps": self.jumps[:20] + (["..."] if len(self.jumps) > 20 else []),
            "jumps": len(self.jumps),
            "why": "the log up to the asked step did not fit the model's window: the prompt showed the latest steps that fit",
        }
