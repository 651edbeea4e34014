"""Stage 1b (paper §2.1, tab. 1): windows of k steps, each summarised at two levels in one call.

Mid level: per step its action, decision, significance and the three candidate signals. High
level: a stage summary and the one step it points at. All windows of a trace are one batch; every
prompt opens with the same prior, and each step's raw text is clipped to a per-step token cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localfa.engine.types import Request
from localfa.grammars.falat import SIGNALS, FalatLimits, window_grammar, window_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.methods.falat.text import TraceText, prompt_room
from localfa.templates import render


def split_windows(n_steps: int, k: int) -> list[range]:
    """Consecutive, non-overlapping windows of `k` steps; the last may be shorter."""
    if n_steps < 1 or k < 1:
        raise ValueError(f"cannot window {n_steps} steps by {k}")
    return [range(lo, min(lo + k, n_steps)) for lo in range(0, n_steps, k)]


@dataclass(frozen=True)
class StepSummary:
    """One step at the mid level."""

    index: int
    agent: str
    action: str
    decision: str
    significance: int
    outcome_relevance: bool
    prior_inconsistency: bool
    execution_inconsistency: bool

    @property
    def flagged(self) -> bool:
        return self.outcome_relevance or self.prior_inconsistency or self.execution_inconsistency

    def signals(self) -> list[str]:
        return [s for s in SIGNALS if getattr(self, s)]


@dataclass(frozen=True)
class StageSummary:
    """One window at the high level."""

    window: tuple[int, int]  # first and last step, inclusive
    summary: str
    focus_step: int


def window_step_cap(g: Ground) -> int:
    """The per-step token cap: the option, lowered so a full window still fits the model."""
    ctx, view, opts, limits, system, prior_block = g.unpack()
    k = opts.window
    empty = window_messages(view, system, prior_block, range(0, 0), [], limits)
    agents = [(i, view.agent(i)) for i in range(min(k, view.n))]
    room = prompt_room(ctx, empty, window_max_tokens(agents, limits))
    per_step = room // max(1, k) - 24  # 24: each step's delimiters
    if per_step < 16:
        raise ValueError(f"falat: a window of {k} steps does not fit the model's context window; lower `window`")
    return min(opts.step_tokens, per_step)


def window_messages(
    view: TraceText, system: dict[str, str], prior_block: str, steps: range, texts: list[str], limits: FalatLimits
) -> list[dict[str, str]]:
    prompt = render(
        "falat/window.j2",
        prior_block=prior_block,
        steps=view.shown(steps, texts),
        limits=limits,
        first=steps.start if len(steps) else 0,
        last=steps[-1] if len(steps) else 0,
        n_steps=view.n,
    )
    return [system, {"role": "user", "content": prompt}]


def window_requests(g: Ground, windows: list[range], cap: int) -> list[Request]:
    ctx, view, opts, limits, system, prior_block = g.unpack()
    reqs = []
    for w, steps in enumerate(windows):
        texts = [view.clipped(i, cap) for i in steps]
        agents = [(i, view.agent(i)) for i in steps]
        reqs.append(
            ctx.request(
                f"falat/window/{w}",
                window_messages(view, system, prior_block, steps, texts, limits),
                window_grammar(agents, limits),
                opts.sampling(window_max_tokens(agents, limits)),
            )
        )
    return reqs


def parse_window(steps: range, value: dict[str, Any]) -> tuple[list[StepSummary], StageSummary]:
    mids = []
    for i in steps:
        v = value["steps"][str(i)]
        mids.append(
            StepSummary(
                index=i,
                agent=v["agent"],
                action=v["action"],
                decision=v["decision"],
                significance=int(v["significance"]),
                **{s: bool(v[s]) for s in SIGNALS},
            )
        )
    stage = value["stage"]
    return mids, StageSummary((steps.start, steps[-1]), stage["summary"], int(stage["focus_step"]))
