"""Stage 1b (paper §2.1, tab. 1): windows of k steps, summarised at two levels.

Two batches, each holding every window of the trace:

1. stage pass: each window but the last gets its high level, a stage summary and the step it
   points at;
2. step pass: each window gets its mid level (per step: action, decision, whether it is active,
   the three candidate signals) with the stage summaries of the EARLIER windows in
   view, so "rests on information no earlier result supports" can be judged. The last window's
   stage summary comes with its mid level (no later window needs it first).

Both prompts of a window open with the prior and the window's steps, in the same words, so the
step pass reads the window from the prefix cache the stage pass filled; then the step pass shows
the stage summaries of the `EARLIER_SUMMARIES` (4) most recent earlier windows, and the question
comes last. Issue 52: showing every earlier summary after the window's own steps re-prefilled all
of them in every window, a term quadratic in the windows (7.46x the trace's tokens at 1M with
summaries at the grammar's length); moving the growing summary block before the steps made it
linear but lost the stage pass's cached steps (3.55x at 1M, 3.54x at 10k); the four most recent
summaries after the steps: 2.65x at 1M, 2.23x at 200k, 3.03x at 10k (docs/methods/falat.md).
Each step's raw text is clipped to a per-step token cap. Both passes decide which steps stay in
the search (a focus step, a flag, a passive judgement), so they run at the judge temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import SIGNALS, stage_grammar, stage_max_tokens, window_grammar, window_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.templates import render

EARLIER_SUMMARIES = 4  # the most recent earlier windows' summaries a step prompt shows (issue 52)


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
    outcome_relevance: bool
    prior_inconsistency: bool
    execution_inconsistency: bool
    active: bool = True

    @property
    def flagged(self) -> bool:
        return self.outcome_relevance or self.prior_inconsistency or self.execution_inconsistency

    @property
    def inconsistent(self) -> bool:
        """An inconsistency of its own: it conflicts with the prior or its execution disagrees."""
        return self.prior_inconsistency or self.execution_inconsistency

    def signals(self) -> list[str]:
        return [s for s in SIGNALS if getattr(self, s)]


@dataclass(frozen=True)
class StageSummary:
    """One window at the high level."""

    window: tuple[int, int]  # first and last step, inclusive
    summary: str
    focus_step: int | None  # None: the window holds no step that may be an answer


def _eligible(g: Ground, steps: range) -> list[int]:
    return [i for i in steps if i in g.eligible]


def _messages(
    g: Ground, steps: range, texts: Sequence[str], part: str, earlier: Sequence[StageSummary], with_stage: bool
) -> list[dict[str, str]]:
    prompt = render(
        "falat/window.j2",
        prior_block=g.prior_block,
        steps=g.view.shown(steps, texts),
        passive=[i for i in steps if i not in g.eligible],
        limits=g.limits,
        first=steps.start if len(steps) else 0,
        last=steps[-1] if len(steps) else 0,
        n_steps=g.view.n,
        part=part,
        earlier=earlier,
        with_stage=with_stage,
    )
    return [g.system, {"role": "user", "content": prompt}]


@dataclass(frozen=True)
class WindowFit:
    """How a window prompt fits the model: the per-step token cap and the tokens kept for the
    earlier windows' stage summaries (the oldest are left out when they hold more)."""

    step_cap: int
    earlier_tokens: int


def window_fit(g: Ground, n_windows: int) -> WindowFit:
    """The per-step cap (the option, lowered so a full window fits) and the room for the earlier
    stage summaries: what every summary at its bound needs, at most a third of the window."""
    k = g.opts.window
    empty = _messages(g, range(0, 0), [], "steps", [], True)
    agents = [(i, g.view.agent(i)) for i in range(min(k, g.view.n))]
    room = g.room(empty, window_max_tokens(agents, g.limits))
    earlier = min(n_windows * (g.limits.stage_chars + 24), room // 3)  # a summary: at most a token a character
    per_step = (room - earlier) // max(1, k) - 24  # 24: each step's delimiters
    if per_step < 16:
        raise ValueError(f"falat: a window of {k} steps does not fit the model's context window; lower `window`")
    return WindowFit(min(g.opts.step_tokens, per_step), earlier)


def recent_stages(g: Ground, stages: Sequence[StageSummary], budget: int) -> list[StageSummary]:
    """The latest stage summaries that fit `budget` tokens (all of them when they fit)."""
    kept: list[StageSummary] = []
    used = 0
    for s in reversed(stages):
        used += g.view.count(s.summary) + 12
        if used > budget:
            break
        kept.append(s)
    return kept[::-1]


def stage_requests(g: Ground, windows: list[range], fit: WindowFit) -> list[Request]:
    """The stage pass: every window but the last (the last one's summary comes with its steps)."""
    reqs = []
    for w, steps in enumerate(windows[:-1]):
        texts = [g.view.clipped(i, fit.step_cap) for i in steps]
        reqs.append(
            g.ctx.request(
                f"falat/stage/{w}",
                _messages(g, steps, texts, "stage", [], False),
                stage_grammar(_eligible(g, steps), g.limits),
                g.opts.sampling(stage_max_tokens(g.limits), judge=True),
            )
        )
    return reqs


def window_requests(g: Ground, windows: list[range], fit: WindowFit, stages: Sequence[StageSummary]) -> tuple[list[Request], int]:
    """The step pass: every window, each seeing the stage summaries of the windows before it (the
    latest that fit); also the most earlier summaries any window had to leave out."""
    reqs = []
    left_out = 0
    for w, steps in enumerate(windows):
        last = w == len(windows) - 1
        texts = [g.view.clipped(i, fit.step_cap) for i in steps]
        agents = [(i, g.view.agent(i)) for i in steps]
        earlier = recent_stages(g, stages[:w], fit.earlier_tokens)[-EARLIER_SUMMARIES:]
        left_out = max(left_out, w - len(earlier))
        reqs.append(
            g.ctx.request(
                f"falat/window/{w}",
                _messages(g, steps, texts, "steps", earlier, last),
                window_grammar(agents, _eligible(g, steps), g.limits, with_stage=last),
                g.opts.sampling(window_max_tokens(agents, g.limits), judge=True),
            )
        )
    return reqs, left_out


def parse_stage(steps: range, value: dict[str, Any]) -> StageSummary:
    stage = value["stage"]
    focus = stage["focus_step"]
    return StageSummary((steps.start, steps[-1]), stage["summary"], None if focus is None else int(focus))


def parse_window(steps: range, value: dict[str, Any], agent_of: Callable[[int], str]) -> list[StepSummary]:
    """The step summaries of one window; each carries its step's agent as the trace names it
    (`agent_of`): the answer's own field is the name the prompt showed (safe or an alias)."""
    mids = []
    for i in steps:
        v = value["steps"][str(i)]
        mids.append(
            StepSummary(
                index=i,
                agent=agent_of(i),
                action=v["action"],
                decision=v["decision"],
                active=bool(v["active"]),
                **{s: bool(v[s]) for s in SIGNALS},
            )
        )
    return mids
