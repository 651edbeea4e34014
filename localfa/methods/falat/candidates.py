"""Stage 1c (paper §2.1): the candidate set and its regions.

A step is a candidate when its mid level shows at least one signal. Adjacent candidates merge
into regions whatever window they came from, so a fault that straddles a window boundary stays
one region. When no window flags anything, the steps the stage summaries point at stand in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from localfa.methods.falat.windows import StageSummary, StepSummary


@dataclass(frozen=True)
class Candidates:
    steps: tuple[int, ...]
    source: str  # "signals" | "stage_focus"

    @property
    def regions(self) -> list[tuple[int, int]]:
        return merge_regions(self.steps)


def merge_regions(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted indices as inclusive runs of consecutive steps: [2, 3, 4, 7] -> [(2, 4), (7, 7)]."""
    regions: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if regions and i == regions[-1][1] + 1:
            regions[-1] = (regions[-1][0], i)
        else:
            regions.append((i, i))
    return regions


def select_candidates(mids: Sequence[StepSummary], stages: Sequence[StageSummary]) -> Candidates:
    flagged = sorted(m.index for m in mids if m.flagged)
    if flagged:
        return Candidates(tuple(flagged), "signals")
    return Candidates(tuple(sorted({s.focus_step for s in stages})), "stage_focus")
