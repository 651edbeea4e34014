"""Spans: DRIFT's unit of audit, and the text the auditor reads for a range of them.

A span is an inclusive range of steps. By default every step is its own span; with segmentation
consecutive steps serving one local goal share one. Every prompt shows spans the same way, each
step's text fenced as data (`localfa.methods.fencing`)::

    Span 3 (steps 4-5):
    [4] WebSurfer:
    <<<STEP 4>>>
    ...
    <<<END STEP 4>>>
    [5] Orchestrator:
    ...

Each step is first cut to the host limit (`localfa.limits`); when the text still does not fit its
character budget, the longest step contents are cut to a common cap (shorter steps stay whole), as
the baselines do, so a view of the same spans under the same budget is always the same text (the
support checks share it as their cached prefix). What was cut is never silent: `cuts` lists each
shortened step with how much of it is shown, and `cut_note` says so in the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from localfa.limits import LimitsHit
from localfa.methods.baselines import shorten, water_fill_cap
from localfa.methods.fencing import fence, fence_overhead
from localfa.methods.names import agent_names
from localfa.traces.model import Step, Trace

HEADER_SLACK = 40  # span header and step header per step, in characters (a safe upper estimate)


@dataclass(frozen=True)
class Span:
    """Span `id` (0-based, in trace order) covering steps `first`..`last` inclusive."""

    id: int
    first: int
    last: int

    @property
    def steps(self) -> range:
        return range(self.first, self.last + 1)

    def as_range(self) -> tuple[int, int]:
        return (self.first, self.last)


@dataclass(frozen=True)
class Cut:
    """Step `step` shown as `shown` of its `total` characters (head and tail, the middle left out);
    `original`: its length before the host's per-step limit (`localfa.limits`) cut it, if it did."""

    step: int
    shown: int
    total: int
    original: int = 0

    def hidden(self, text: str) -> tuple[int, int]:
        """The [start, end) character range of `text` the cut left out (as `shorten` cuts)."""
        marker = len(f" [... {self.total - self.shown} chars cut ...] ")
        keep = max(0, self.shown - marker)
        head = (keep * 2 + 2) // 3
        return head, self.total - (keep - head)


def cut_note(cuts: list[Cut]) -> str:
    """One line for the prompt naming every shortened step and how much of it is shown."""
    if not cuts:
        return ""
    items = "; ".join(f"step {c.step}: {c.shown:,} of {max(c.total, c.original):,} characters" for c in cuts)
    return (
        f"Shortened to fit the window ({len(cuts)} step(s); the middle of each is left out where it says "
        f"[... N chars cut ...], so evidence may sit in the part not shown): {items}."
    )


def one_span_per_step(n_steps: int) -> list[Span]:
    return [Span(i, i, i) for i in range(n_steps)]


def spans_from_ranges(ranges: Iterable[tuple[int, int]], n_steps: int) -> list[Span]:
    """Spans from inclusive ranges that must be contiguous, ordered and cover 0..n_steps-1."""
    out: list[Span] = []
    expect = 0
    for k, (a, b) in enumerate(ranges):
        if a != expect or b < a or b >= n_steps:
            raise ValueError(f"span ranges must be contiguous and cover steps 0..{n_steps - 1}: got {a}-{b} at {k}")
        out.append(Span(k, a, b))
        expect = b + 1
    if expect != n_steps:
        raise ValueError(f"span ranges stop at step {expect - 1}, the trace has {n_steps} steps")
    return out


def step_text(step: Step) -> str:
    """What a step says, with the tool result it got back (support evidence often lives there)."""
    body = (step.content or "").strip()
    obs = (step.observation or "").strip()
    if obs and obs != body:
        body = f"{body}\n(result) {obs}" if body else obs
    return body


class SpanView:
    """The trace's steps (the first `max_steps`, each within `max_step_chars`) rendered for prompts."""

    def __init__(self, trace: Trace, limits: LimitsHit | None = None) -> None:
        self.trace = trace
        n = len(trace.steps) if limits is None else limits.steps(len(trace.steps))
        texts = [step_text(s) for s in trace.steps[:n]]
        self.original = [len(t) for t in texts]
        self.texts = texts if limits is None else [limits.step_text(i, t) for i, t in enumerate(texts)]
        self._views: dict[tuple[object, ...], tuple[str, list[Cut]]] = {}
        # Per step, computed once: every chunk, the shared run and each fitting attempt show the
        # same steps again (beside a waiting engine), most of them uncut.
        self.names = agent_names(trace)  # agents as a prompt may show them outside a fence
        self._overheads = [len(self.names.show(trace.steps[i].agent)) + HEADER_SLACK + fence_overhead(f"STEP {i}") for i in range(n)]
        self._blocks: dict[tuple[int, int | None], str] = {}
        self._folded: dict[int, str] = {}

    @property
    def n_steps(self) -> int:
        return len(self.texts)

    def _overhead(self, i: int) -> int:
        return self._overheads[i]

    def _block(self, i: int, text: str, cap: int | None) -> str:
        """Step `i` as a prompt shows it (`text`: its text under `cap`, None when uncut)."""
        key = (i, cap)
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = f"[{i}] {self.names.show(self.trace.steps[i].agent)}:\n{fence(text, f'STEP {i}')}"
        return block

    def size(self, spans: Iterable[Span]) -> int:
        """Characters the spans take uncut (headers and fences included)."""
        return sum(len(self.texts[i]) + self._overhead(i) for sp in spans for i in sp.steps)

    def _cap(self, spans: list[Span], char_budget: int | None) -> int | None:
        if char_budget is None:
            return None
        idx = [i for sp in spans for i in sp.steps]
        overhead = sum(self._overhead(i) for i in idx)
        return water_fill_cap([len(self.texts[i]) for i in idx], max(0, char_budget - overhead))

    def cuts(self, spans: list[Span], char_budget: int | None) -> list[Cut]:
        """The steps `render` shows shortened under this budget (or the host limit already cut),
        with how much of each it shows."""
        return self.view(spans, char_budget)[1]

    def render(self, spans: list[Span], char_budget: int | None, tags: bool = True) -> str:
        """The spans as delimited blocks; step contents cut to one common cap to fit the budget.

        `tags=False` leaves out the span headers (segmentation shows bare steps: spans are its answer).
        """
        return self.view(spans, char_budget, tags)[0]

    def view(self, spans: list[Span], char_budget: int | None, tags: bool = True) -> tuple[str, list[Cut]]:
        """(`render`, `cuts`) at once, remembered per (spans, budget): fitting a prompt to the
        window renders the same view several times."""
        key = (tuple(sp.as_range() for sp in spans), char_budget, tags)
        if key not in self._views:
            if len(self._views) > 64:
                self._views.clear()
            self._views[key] = self._view(spans, char_budget, tags)
        return self._views[key]

    def _view(self, spans: list[Span], char_budget: int | None, tags: bool) -> tuple[str, list[Cut]]:
        cap = self._cap(spans, char_budget)
        parts, cuts = [], []
        for sp in spans:
            if tags:
                rng = f"step {sp.first}" if sp.first == sp.last else f"steps {sp.first}-{sp.last}"
                parts.append(f"Span {sp.id} ({rng}):")
            for i in sp.steps:
                text = self.texts[i] if cap is None else shorten(self.texts[i], cap)
                if len(text) < len(self.texts[i]) or self.original[i] > len(self.texts[i]):
                    cuts.append(Cut(i, len(text), len(self.texts[i]), self.original[i]))
                parts.append(self._block(i, text, cap if len(text) < len(self.texts[i]) else None))
        return "\n".join(parts), cuts

    def folded(self, i: int) -> str:
        """Step `i`'s text with whitespace runs folded to one space, made once per view (every
        support check looks its quote up in it)."""
        text = self._folded.get(i)
        if text is None:
            text = self._folded[i] = " ".join(self.texts[i].split())
        return text

    def span_folded(self, span: Span) -> str:
        """The uncut text of one span, folded (`folded`), for locating a verbatim quote."""
        return " ".join(self.folded(i) for i in span.steps)

    def span_text(self, span: Span) -> str:
        """The uncut text of one span (for locating a verbatim quote)."""
        return "\n".join(self.texts[i] for i in span.steps)


ChunkEnd = Literal["end of run", "token budget", "chunk_max_spans"]


def take_chunk(view: SpanView, spans: list[Span], start: int, chunk_chars: int, max_spans: int | None) -> tuple[int, ChunkEnd]:
    """The end (exclusive) of the chunk of consecutive spans from `start` that fits `chunk_chars`
    (and `max_spans`, when set), and why it ends there. A chunk holds at least one span."""
    used = 0
    end = start
    while end < len(spans):
        if max_spans is not None and end - start >= max_spans:
            return end, "chunk_max_spans"
        size = view.size([spans[end]])
        if end > start and used + size > chunk_chars:
            return end, "token budget"
        used += size
        end += 1
    return end, "end of run"
