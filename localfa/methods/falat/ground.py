"""What every FALAT stage's prompt stands on: the run, its text, the options, the model's window,
the prior, and the steps that may be an answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from localfa.grammars.falat import FalatLimits
from localfa.methods.base import MethodContext
from localfa.methods.falat.options import FalatOptions
from localfa.methods.falat.text import ModelWindow, TraceText


@dataclass(frozen=True)
class Ground:
    """The shared part of a trace's FALAT prompts (system prompt, then the prior block first)."""

    ctx: MethodContext
    view: TraceText
    opts: FalatOptions
    limits: FalatLimits
    system: dict[str, str]
    prior_block: str
    window: ModelWindow
    eligible: frozenset[int]  # steps that may be an answer: agents' acts, never observations or human turns

    def unpack(self) -> tuple[MethodContext, TraceText, FalatOptions, FalatLimits, dict[str, str], str]:
        return self.ctx, self.view, self.opts, self.limits, self.system, self.prior_block

    def room(self, messages: Sequence[dict[str, str]], max_tokens: int) -> int:
        """Tokens still free in the model's window once `messages` and the answer are placed."""
        return self.window.room(self.view.count, messages, max_tokens)
