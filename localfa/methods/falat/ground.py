"""What every FALAT stage's prompt stands on: the run, its text, the options and the prior."""

from __future__ import annotations

from dataclasses import dataclass

from localfa.grammars.falat import FalatLimits
from localfa.methods.base import MethodContext
from localfa.methods.falat.options import FalatOptions
from localfa.methods.falat.text import TraceText


@dataclass(frozen=True)
class Ground:
    """The shared part of a trace's FALAT prompts (system prompt, then the prior block first)."""

    ctx: MethodContext
    view: TraceText
    opts: FalatOptions
    limits: FalatLimits
    system: dict[str, str]
    prior_block: str

    def unpack(self) -> tuple[MethodContext, TraceText, FalatOptions, FalatLimits, dict[str, str], str]:
        return self.ctx, self.view, self.opts, self.limits, self.system, self.prior_block
