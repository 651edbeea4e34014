"""Stage 1c (paper §2, §2.1): which steps may be an answer, the candidate set, and its regions.

A decisive step is an *active* step (§2): it makes a decision of its own. Two kinds of passive:

- structural: an observation step (environment output, a tool result: `Trace.action_steps()`
  leaves it out) or a human turn (a person's message). These never become candidates, t̂ or the
  answer;
- judged: a step its window judged to only forward earlier information (`active: false`). That is
  one model judgement and can be wrong (Who&When's CaptainAgent task message, step 0, is often the
  decisive step), so it only lowers the step's rank: a flagged judged-passive step is still a
  candidate, and the re-search may still rank it.

Each is recorded with the reason. A step is a candidate when it may be an answer and its mid
level shows at least one signal. When none is flagged, the steps the stage summaries point at
stand in, then every active step.
Adjacent candidates merge into regions whatever window they came from; a region that spans a
window boundary is verified as one neighbourhood (`verify_span`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from localfa.grammars.falat import RESEARCH_RADIUS
from localfa.traces.model import Trace, normalize_agent, step_runs

HUMAN_AGENTS = frozenset({"human", "user"})
PASSIVE_OBSERVATION = "observation: environment or tool output, no agent acted"
PASSIVE_HUMAN = "human turn: the task or a person's message, not an agent's act"
PASSIVE_JUDGED = "its window judged it passive (only forwards earlier information): kept answerable, ranked lower"
VERIFY_RADIUS = 1  # the paper's i-1, i, i+1
REGION_REACH = RESEARCH_RADIUS  # a boundary-spanning region widens it to at most i-2 .. i+2


def structural_passives(trace: Trace, n_steps: int) -> dict[int, str]:
    """Steps (of the first `n_steps`) that cannot be an answer by what they are, with why."""
    actions = set(trace.action_steps())
    out: dict[int, str] = {}
    for i in range(n_steps):
        step = trace.steps[i]
        if i not in actions:
            out[i] = PASSIVE_OBSERVATION
        elif step.role.strip().lower() == "human" or normalize_agent(step.agent) in HUMAN_AGENTS:
            out[i] = PASSIVE_HUMAN
    if len(out) == n_steps:  # a run of human turns only: its action steps stay answerable
        out = {i: why for i, why in out.items() if i not in actions}
    return out


@dataclass(frozen=True)
class Candidates:
    steps: tuple[int, ...]
    source: str  # "signals" | "stage_focus" | "active_steps"

    @property
    def regions(self) -> list[tuple[int, int]]:
        return merge_regions(self.steps)


def merge_regions(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted indices as inclusive runs of consecutive steps: [2, 3, 4, 7] -> [(2, 4), (7, 7)]."""
    return step_runs(list(indices))


def neighbourhood(step: int, n_steps: int, radius: int) -> range:
    """Steps max(0, step-radius) .. min(n-1, step+radius): the one definition verification and
    the re-search use."""
    return range(max(0, step - radius), min(n_steps - 1, step + radius) + 1)


def select_candidates(flagged: Collection[int], focus: Collection[int], active: Collection[int]) -> Candidates:
    """The flagged answerable steps; else the ones the stage summaries point at; else every
    active step. (`active` here: every step that may be an answer, judged passive or not.)"""
    live = set(active)
    picked = sorted(set(flagged) & live)
    if picked:
        return Candidates(tuple(picked), "signals")
    picked = sorted(set(focus) & live)
    if picked:
        return Candidates(tuple(picked), "stage_focus")
    return Candidates(tuple(sorted(live)), "active_steps")


def crosses(region: tuple[int, int], windows: Sequence[range]) -> bool:
    """Does the region hold steps of more than one window?"""
    return any(region[0] in w and region[1] not in w for w in windows)


def verify_span(step: int, regions: Sequence[tuple[int, int]], windows: Sequence[range], n_steps: int) -> range:
    """The raw steps a candidate is verified with: i-1..i+1, widened to its region (at most
    i-2..i+2) when that region spans a window boundary."""
    span = neighbourhood(step, n_steps, VERIFY_RADIUS)
    lo, hi = span.start, span[-1]
    for region in regions:
        if region[0] <= step <= region[1] and crosses(region, windows):
            lo = max(min(lo, region[0]), step - REGION_REACH)
            hi = min(max(hi, region[1]), step + REGION_REACH)
    return range(max(0, lo), min(n_steps - 1, hi) + 1)
