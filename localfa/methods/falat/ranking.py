"""Stage 3a (paper §2.3): rank the refined candidates on a bounded suspicion scale.

The paper names three ranking signals in words and gives no formula. Ours, a pure function:

    suspicion = 3·execution + 3·deviation + 2·path + relevance + significance      (0 .. 12)

- execution: the step's local execution inconsistency (reasoning, action and output disagree:
  a wrong tool, flawed code, misused data), from its mid level;
- deviation: its prior inconsistency (it conflicts with what a correct run does, or rests on
  information the prior does not support);
- path: it lies on a typed path that reaches later steps (it is the source of a follow_up or an
  error_shift pair, or the source of a pruned follow_up chain);
- relevance (0/1) and significance (0..3, bounded by the window grammar) break ties towards
  steps that matter for the outcome.

Ties go to the earlier step (temporal precedence). The top k (3) are verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from localfa.grammars.falat import SIGNIFICANCE_MAX
from localfa.methods.falat.windows import StepSummary

SUSPICION_MAX = 3 + 3 + 2 + 1 + SIGNIFICANCE_MAX
PATH_LABELS = frozenset({"follow_up", "error_shift"})


@dataclass(frozen=True)
class Ranked:
    step: int
    suspicion: int
    path: bool


def suspicion(mid: StepSummary, on_path: bool) -> int:
    """The suspicion score of one candidate, in 0..SUSPICION_MAX."""
    score = (
        3 * mid.execution_inconsistency
        + 3 * mid.prior_inconsistency
        + 2 * on_path
        + mid.outcome_relevance
        + min(max(mid.significance, 0), SIGNIFICANCE_MAX)
    )
    return int(score)


def on_path(step: int, labels: Mapping[tuple[int, int], str], sources: Mapping[int, int]) -> bool:
    """Does a typed path lead from `step` to later candidates?"""
    return any(i == step and lab in PATH_LABELS for (i, _), lab in labels.items()) or step in sources.values()


def rank(
    survivors: Sequence[int], mids: Mapping[int, StepSummary], labels: Mapping[tuple[int, int], str], sources: Mapping[int, int]
) -> list[Ranked]:
    """Survivors by suspicion, highest first; ties to the earlier step."""
    ranked = []
    for s in survivors:
        p = on_path(s, labels, sources)
        ranked.append(Ranked(s, suspicion(mids[s], p), p))
    return sorted(ranked, key=lambda r: (-r.suspicion, r.step))


def top_k(ranked: Sequence[Ranked], k: int) -> list[Ranked]:
    """The k best (all of them when fewer survive)."""
    return list(ranked[:k])
