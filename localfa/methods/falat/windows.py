"""Stage 1b (paper §2.1, tab. 1): windows of k steps, summarised at two levels, in one batch.

Each window gets its mid level (per step: action, decision, whether it is active, the three
candidate signals) and its high level (a stage summary and the step it points at) in one call.
A window's prompt shows the prior, then the run's steps from the start of its *segment* up to the
window's last step, then the question about the window's own steps: the steps before the window
are there so "rests on information no earlier result supports" can be judged against the earlier
results themselves. A segment is a run of windows whose steps fit the model's window together;
every prompt of a segment opens with the same text (prior, header, the segment's steps in order),
so window w+1's prompt reads window w's from the prefix cache and a GPU prefills each step once.

Issue 52: the project first ran a stage pass (every window's stage summary) and then a step pass
showing the earlier windows' summaries after the window's own steps: two calls per window (62-66
calls on hand-crafted/15's 26 windows, over the aim of 40) and the summaries re-prefilled in
every window. One call per window on the growing prefix halves the window calls and shows the
model the earlier raw steps instead of summaries of them (docs/methods/falat.md has the figures).
Each step's raw text is clipped to a per-step token cap. The calls decide which steps stay in the
search (a focus step, a flag, a passive judgement), so they run at the judge temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from localfa.engine.types import Request
from localfa.grammars.falat import SIGNALS, window_grammar, window_max_tokens
from localfa.methods.falat.ground import Ground
from localfa.templates import render

QUESTION_TOKENS = 64  # what a window's own question adds to the empty prompt's (its step numbers, passive steps)
STEP_DELIMITERS = 24  # each step's header and fence


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


def run_prefix(g: Ground, start: int, texts: Sequence[str]) -> str:
    """The prior, then the run's steps from `start` on (`texts`, in order): the opening every
    window prompt of a segment shares, and the links, ratings and verifications reuse."""
    return render(
        "falat/_run_steps.j2",
        prior_block=g.prior_block,
        steps=g.view.shown(range(start, start + len(texts)), texts),
        start=start,
        n_steps=g.view.n,
    )


def _messages(g: Ground, start: int, steps: range, texts: Sequence[str]) -> list[dict[str, str]]:
    """A window's prompt: `run_prefix` up to the window's last step, then the question about
    `steps` (everything before the question is the segment's shared prefix)."""
    question = render(
        "falat/window.j2",
        passive=[i for i in steps if i not in g.eligible],
        limits=g.limits,
        start=start,
        first=steps.start if len(steps) else 0,
        last=steps[-1] if len(steps) else 0,
    )
    return [g.system, {"role": "user", "content": run_prefix(g, start, texts) + "\n\n" + question}]


@dataclass(frozen=True)
class WindowFit:
    """How window prompts fit the model: the per-step token cap (a full window fits) and the
    first step of each window's segment (its steps and the segment's earlier ones fit together)."""

    step_cap: int
    starts: tuple[int, ...]  # per window: the first step its prompt shows
    room: int  # tokens a prompt's steps may take

    @property
    def segments(self) -> int:
        return len(set(self.starts))

    def last_segment(self, g: Ground) -> tuple[int, str, frozenset[int]]:
        """The last segment's first step, its prefix (every step to the run's end) and the steps
        it shows in full: the prefix the last window's prompt filled, which later stages reuse."""
        start = self.starts[-1] if self.starts else 0
        texts = [g.view.clipped(i, self.step_cap) for i in range(start, g.view.n)]
        whole = frozenset(i for i, t in zip(range(start, g.view.n), texts) if t == g.view.text(i))
        return start, run_prefix(g, start, texts), whole


def window_fit(g: Ground, windows: Sequence[range]) -> WindowFit:
    """The per-step cap (the option, lowered so a full window fits) and the segments: a window's
    prompt shows the steps since its segment's start; a new segment starts at a window whose
    steps would not fit after the segment's earlier ones."""
    k = g.opts.window
    empty = _messages(g, 0, range(0, 0), [])
    agents = [(i, g.view.agent(i)) for i in range(min(k, g.view.n))]
    room = g.room(empty, window_max_tokens(agents, g.limits)) - QUESTION_TOKENS
    per_step = room // max(1, k) - STEP_DELIMITERS
    if per_step < 16:
        raise ValueError(f"falat: a window of {k} steps does not fit the model's context window; lower `window`")
    cap = min(g.opts.step_tokens, per_step)
    starts: list[int] = []
    start, used = 0, 0
    for steps in windows:
        size = sum(g.view.count(g.view.clipped(i, cap)) + STEP_DELIMITERS for i in steps)
        if starts and used + size > room:
            start, used = steps.start, 0
        starts.append(start)
        used += size
    return WindowFit(cap, tuple(starts), room)


def window_requests(g: Ground, windows: list[range], fit: WindowFit) -> list[Request]:
    """Every window's call, each showing its segment's steps up to its own last step."""
    reqs = []
    for w, (steps, start) in enumerate(zip(windows, fit.starts)):
        texts = [g.view.clipped(i, fit.step_cap) for i in range(start, steps[-1] + 1)]
        agents = [(i, g.view.agent(i)) for i in steps]
        reqs.append(
            g.ctx.request(
                f"falat/window/{w}",
                _messages(g, start, steps, texts),
                window_grammar(agents, _eligible(g, steps), g.limits, with_stage=True),
                g.opts.sampling(window_max_tokens(agents, g.limits), judge=True),
            )
        )
    return reqs


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
