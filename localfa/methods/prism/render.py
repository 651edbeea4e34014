"""How prism shows a run to the scoring model: fenced steps, each cut to a token budget.

A step is shown as the baselines show it (``[i] agent:`` then its text fenced as ``STEP i``,
`localfa.methods.fencing`), so a step can never speak in the prompt's voice; the score request's
segments are the steps' blocks. Overflow becomes ``[...]`` (the head is kept), and the system
note says the cuts are intentional. Runs longer than the window are split into windows of
consecutive steps that overlap by a few steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from localfa.methods.fencing import DATA_NOTICE, fence
from localfa.methods.names import ShownNames, with_legend
from localfa.tokens import approx_tokens
from localfa.traces.model import Trace

CUT = " [...]"
TASK_TOKENS = 160  # the task statement's share of each prompt
CUE = "The next step looks abnormal; its cause may lie in an earlier step."
SYSTEM = (
    "Below is the log of a multi-agent AI system that failed its task, one block per step. Every step is cut "
    "to a fixed length on purpose; [...] marks a cut.\n" + DATA_NOTICE
)


@dataclass
class Shown:
    """One prompt's content and, per shown step, its block's (start, end) characters."""

    content: str
    steps: list[int]
    spans: list[tuple[int, int]]


def cut(text: str, n_tokens: int, budget: int) -> str:
    """`text` (of `n_tokens` tokens) cut to about `budget` tokens: its head, then ``[...]``."""
    if n_tokens <= budget:
        return text
    keep = max(1, len(text) * budget // max(n_tokens, 1))
    return text[:keep].rstrip() + CUT


def render(trace: Trace, names: ShownNames, texts: Sequence[str], steps: Sequence[int], task: str, cue_before: int | None = None) -> Shown:
    """The prompt content showing `steps` (in order) with their `texts`, and the blocks' spans."""
    parts = ["The task:\n" + fence(task or "(not recorded)", "TASK") + "\n\nThe log:\n"]
    pos = len(parts[0]) + 1
    spans = []
    for i in steps:
        if i == cue_before:
            parts.append(CUE)
            pos += len(CUE) + 1
        block = f"[{i}] {names.show(trace.steps[i].agent)}:\n" + fence(texts[i], f"STEP {i}")
        spans.append((pos, pos + len(block)))
        parts.append(block)
        pos += len(block) + 1
    return Shown(with_legend("\n".join(parts), names), list(steps), spans)


def windows(costs: Sequence[int], room: int, overlap: int) -> list[list[int]]:
    """Consecutive steps whose `costs` (tokens) fit `room`, each window repeating the previous
    one's last `overlap` steps (fewer where they would fill it); one window when all fit."""
    n = len(costs)
    out: list[list[int]] = []
    start = 0
    while start < n:
        used, end = 0, start
        while end < n and (end == start or used + costs[end] <= room):
            used += costs[end]
            end += 1
        out.append(list(range(start, end)))
        if end >= n:
            break
        start = max(end - overlap, start + 1)
    return out


def token_counts(count_many: Callable[[list[str]], list[int]] | None, texts: list[str]) -> list[int]:
    """Tokens of each text with the engine's tokenizer, else the project's rough count (`approx_tokens`)."""
    if count_many is not None:
        return [int(x) for x in count_many(texts)]
    return [max(1, approx_tokens(t)) for t in texts]
