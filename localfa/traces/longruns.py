"""Long labelled runs on demand: a short labelled run grown to N tokens, its fault at depth D.

Who&When runs are short; the runs people need diagnosed are not. `lengthen` inserts benign steps
written in the run's own voices (`localfa.traces.filler`) before and after the labelled fault, as
detours of a few steps each at random places, so that the steps before the mistake step hold
`depth` tokens and the whole run about `length`; every label (mistake step, fault steps and spans,
high-impact steps) is shifted with the steps. The step right before the first labelled step and
the one right after the last stay where they were (the fault keeps its cause and its effect), the
run still opens with its first step and closes with its last.
Tokens are those of each step's record as methods show it (`lineview.step_record`), counted with
the counter given (4 characters a token by default, so a run does not depend on a tokenizer).
Same trace, length, depth and seed: the same run, byte for byte.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from localfa.tokens import approx_tokens
from localfa.traces.filler import FaultText, FillerWriter, Voice, paragraphs_of, style_of, vocabulary
from localfa.traces.lineview import step_record
from localfa.traces.model import Labels, Step, Trace, normalize_agent

EPISODE_TOKENS = (600, 4000)  # a detour's size range, in tokens
MIN_STEP_CHARS = 160
MAX_STEP_CHARS = 24_000
MAX_OPENER_CHARS = 60  # a header ("Updated Ledger:"), not a sentence a detour would repeat as a claim
MAX_SAME_SPEAKER = 3  # turns in a row by one agent in a detour
_HUMAN = {"human", "user"}


class LongRunError(ValueError):
    """A run cannot be grown as asked (no labelled step, fault already deeper than asked)."""

    def __init__(self, trace_id: str, message: str) -> None:
        super().__init__(f"{trace_id}: {message}")
        self.trace_id = trace_id


@dataclass(frozen=True)
class Placement:
    """Where the labels sit in the original run and which gaps may take filler."""

    first: int  # first labelled step (mistake, fault steps, spans, high-impact)
    last: int  # last labelled step
    mistake: int


def labelled_steps(labels: Labels) -> set[int]:
    """Every step index a label names."""
    steps = set(labels.fault_steps) | set(labels.high_impact_steps)
    if labels.mistake_step is not None:
        steps.add(labels.mistake_step)
    for lo, hi in labels.fault_spans:
        steps.update(range(lo, hi + 1))
    return steps


def placement(trace: Trace) -> Placement:
    labels = trace.labels
    if labels is None or labels.mistake_step is None:
        raise LongRunError(trace.id, "no labelled mistake step to place at a depth")
    named = labelled_steps(labels)
    return Placement(min(named), max(named), labels.mistake_step)


def voices(trace: Trace, donors: list[int], fault: FaultText) -> dict[str, Voice]:
    """A voice per agent of the run, its paragraphs from the `donors` steps only."""
    out: dict[str, Voice] = {}
    for step in trace.steps:
        voice = out.get(step.agent)
        if voice is None:
            voice = out[step.agent] = Voice(step.agent, step.role, step.kind, step.name, style_of(step.agent, step.role, step.kind))
        voice.sizes.append(min(max(len(step.content), MIN_STEP_CHARS), MAX_STEP_CHARS))
    for i in donors:
        step = trace.steps[i]
        if len(step.content.strip()) < 20:  # "TERMINATE", empty turns: not worth repeating
            continue
        voice = out[step.agent]
        opener = step.content.strip().split("\n", 1)[0][:300]
        if 12 <= len(opener) <= MAX_OPENER_CHARS and not opener.startswith("```") and not fault.touches(opener):
            voice.openers.append(opener)
        voice.paragraphs += [p for p in paragraphs_of(step.content) if not fault.touches(p)]
    return out


def speakers(trace: Trace) -> list[str]:
    """Agents filler may speak as: every agent but the human who gave the task and a one-off
    closing turn (a run does not restart or end in the middle), or all when that leaves one."""
    counts: dict[str, int] = {}
    for s in trace.steps:
        counts[s.agent] = counts.get(s.agent, 0) + 1
    first, last = trace.steps[0], trace.steps[-1]

    def one_off(agent: str) -> bool:
        human = normalize_agent(agent) in _HUMAN or (agent == first.agent and first.role == "user")
        return human or (counts[agent] == 1 and agent == last.agent)

    kept = [a for a in counts if not one_off(a)]
    return kept if len(kept) >= 2 else list(counts)


def turn_taking(trace: Trace, agents: list[str]) -> dict[str, list[str]]:
    """Who speaks after whom in the run (repeated, so a choice follows the run's frequencies;
    an agent following itself counts once), plus every agent once, so a detour never loops."""
    after: dict[str, list[str]] = {a: list(agents) for a in agents}
    for prev, nxt in zip(trace.steps, trace.steps[1:]):
        if prev.agent in after and nxt.agent in after:
            after[prev.agent] += [nxt.agent] * (1 if prev.agent == nxt.agent else 3)
    return after


@dataclass
class _Growth:
    """The state of one lengthening: the voices, who follows whom, the writer, the counter."""

    trace: Trace
    voices: dict[str, Voice]
    after: dict[str, list[str]]
    writer: FillerWriter
    rng: random.Random
    count: Callable[[str], int]

    def episode(self, start_agent: str, tokens: int) -> tuple[list[Step], int]:
        """Steps of one detour holding about `tokens` tokens, and the tokens they hold."""
        steps: list[Step] = []
        used = 0
        agent = start_agent if start_agent in self.after else self.rng.choice(list(self.after))
        run = 0
        while tokens - used > 24:
            nxt = self.rng.choice(self.after[agent])
            while nxt == agent and run >= MAX_SAME_SPEAKER and len(self.after) > 1:  # a run of one agent only speaks on
                nxt = self.rng.choice(list(self.after))
            run = run + 1 if nxt == agent else 1
            agent = nxt
            voice = self.voices[agent]
            chars = int(self.rng.choice(voice.sizes) * self.rng.lognormvariate(0, 0.4))
            chars = max(MIN_STEP_CHARS, min(chars, MAX_STEP_CHARS, (tokens - used) * 4))
            step = Step(
                index=0, agent=voice.agent, role=voice.role, kind=voice.kind, name=voice.name, content=self.writer.content(voice, chars)
            )
            steps.append(step)
            used += self.count(step_record(step))
        return steps, used

    def fill(self, gaps: list[int], tokens: int) -> dict[int, list[Step]]:
        """About `tokens` tokens of detours spread over `gaps` (gap g: before original step g)."""
        out: dict[int, list[Step]] = {}
        left = tokens
        while left > 24:
            size = min(left, self.rng.randint(*EPISODE_TOKENS))
            if left - size < EPISODE_TOKENS[0] // 2:
                size = left
            gap = self.rng.choice(gaps)
            before = self.trace.steps[gap - 1].agent if gap > 0 else ""
            steps, used = self.episode(before, size)
            out.setdefault(gap, []).extend(steps)
            left -= max(used, 1)
        return out


def record_tokens(trace: Trace, count: Callable[[str], int]) -> list[int]:
    """Tokens of each step's record as methods show it."""
    return [count(step_record(s)) for s in trace.steps]


def lengthen(trace: Trace, length: int, depth: int | None = None, seed: int = 0, count: Callable[[str], int] = approx_tokens) -> Trace:
    """`trace` grown to about `length` tokens with its mistake step after `depth` tokens (default:
    half the length). Raises `LongRunError` when the run has no labelled mistake step, or when
    the steps before the fault already hold more than `depth` tokens. A run already longer than
    `length` after the fault keeps its own tail (the result is then longer than asked)."""
    where = placement(trace)
    depth = length // 2 if depth is None else depth
    if not 0 <= depth <= length:
        raise LongRunError(trace.id, f"depth {depth} must lie between 0 and the length {length}")
    tokens = record_tokens(trace, count)
    before = sum(tokens[: where.mistake])
    if before > depth:
        raise LongRunError(trace.id, f"the fault already sits {before} tokens deep, past the asked depth {depth}")
    after = max(0, length - depth - sum(tokens[where.mistake :]))
    labelled = labelled_steps(trace.labels) if trace.labels else set()
    n = len(trace.steps)
    donors_before = [i for i in range(where.first) if i not in labelled and i < n - 1]
    donors_after = [i for i in range(n - 1) if i not in labelled and i != where.last + 1]
    fault = FaultText.of(trace.steps[i].content for i in sorted(labelled))
    rng = random.Random(f"{trace.id}\x1f{length}\x1f{depth}\x1f{seed}")
    agents = speakers(trace)
    vocab = vocabulary([trace.task] + [trace.steps[i].content for i in donors_before])
    growth = _Growth(
        trace,
        {},
        turn_taking(trace, agents),
        FillerWriter(vocab, fault, rng, originals=frozenset(s.content.strip() for s in trace.steps)),
        rng,
        count,
    )
    growth.voices = voices(trace, donors_before, fault)
    # Never before the task's first step nor after the run's last (unless a label sits there).
    inserted = growth.fill(list(range(1, where.first)) or [where.first], depth - before)
    growth.voices = voices(trace, donors_after, fault)
    growth.writer.vocab = vocabulary([trace.task] + [trace.steps[i].content for i in donors_after])
    tail_gaps = list(range(where.last + 2, n)) or [min(where.last + 1, n)]
    for gap, steps in growth.fill(tail_gaps, after).items():
        inserted.setdefault(gap, []).extend(steps)
    return _assemble(trace, inserted, length=length, depth=depth, seed=seed, count=count)


def _assemble(trace: Trace, inserted: dict[int, list[Step]], *, length: int, depth: int, seed: int, count: Callable[[str], int]) -> Trace:
    """The new run: filler before each gap's original step, every index and label shifted."""
    steps: list[Step] = []
    moved: dict[int, int] = {}
    for i, original in enumerate([*trace.steps, None]):
        for filler in inserted.get(i, []):
            steps.append(filler.model_copy(update={"index": len(steps)}))
        if original is not None:
            moved[i] = len(steps)
            steps.append(original.model_copy(update={"index": len(steps)}))
    labels = trace.labels
    assert labels is not None and labels.mistake_step is not None  # placement() checked it
    shifted = labels.model_copy(
        update={
            "mistake_step": moved[labels.mistake_step],
            "fault_steps": [moved[s] for s in labels.fault_steps],
            "high_impact_steps": [moved[s] for s in labels.high_impact_steps],
            "fault_spans": [(moved[lo], moved[hi]) for lo, hi in labels.fault_spans],
        }
    )
    grown = trace.model_copy(update={"id": f"{trace.id}-long-L{length}-D{depth}-s{seed}", "steps": steps, "labels": shifted})
    tokens = record_tokens(grown, count)
    grown.metadata = {
        **trace.metadata,
        "long_run": {
            "from": trace.id,
            "seed": seed,
            "asked_length": length,
            "asked_depth": depth,
            "length": sum(tokens),
            "depth": sum(tokens[: shifted.mistake_step]),
            "inserted_steps": len(steps) - len(trace.steps),
        },
    }
    return grown


def window_depths(window: int, multiples: list[float], tail: int | None = None) -> list[tuple[int, int]]:
    """(length, depth) for a fault at each multiple of `window`, followed by `tail` tokens
    (default: half a window), e.g. 32k at 1x, 2x, 5x."""
    tail = window // 2 if tail is None else tail
    return [(int(window * m) + tail, int(window * m)) for m in multiples]


def parse_tokens(text: str) -> int:
    """``32k`` -> 32000, ``1M`` -> 1000000, ``48000`` -> 48000 (a clear ValueError otherwise)."""
    raw = text.strip()
    scale = {"k": 1_000, "m": 1_000_000}.get(raw[-1:].lower(), 1)
    try:
        value = float(raw[:-1] if scale > 1 else raw) * scale
    except ValueError:
        raise ValueError(f"{text!r} is not a token count (e.g. 48000, 32k, 1M)") from None
    if value <= 0:
        raise ValueError(f"{text!r}: a token count must be positive")
    return int(value)


def growable(trace: Trace, length: int, count: Callable[[str], int] = approx_tokens) -> bool:
    """Whether `trace` fits, whole, in `length` tokens with its fault in the first half."""
    if trace.labels is None or trace.labels.mistake_step is None:
        return False
    tokens = record_tokens(trace, count)
    return sum(tokens) <= length and sum(tokens[: trace.labels.mistake_step]) <= length // 2


def long_runs(traces: list[Trace], lengths: list[int], count: int = 2, seed: int = 0) -> dict[int, list[Trace]]:
    """{length: runs}: `count` traces (taken in turn from each subset, each fitting the shortest
    length) grown to every length, the fault half-way."""
    if not lengths:
        return {}
    shortest = min(lengths)
    by_subset: dict[str, list[Trace]] = {}
    for t in traces:
        if growable(t, shortest):
            by_subset.setdefault(t.subset or "", []).append(t)
    chosen: list[Trace] = []
    while len(chosen) < count and any(by_subset.values()):
        for group in by_subset.values():
            if group and len(chosen) < count:
                chosen.append(group.pop(0))
    return {n: [lengthen(t, n, n // 2, seed=seed) for t in chosen] for n in sorted(lengths)}


def as_whowhen(trace: Trace) -> dict[str, Any]:
    """A (grown) trace as a Who&When file, which every localfa command reads back: steps as
    ``{"name", "role", "content"}``, the mistake step and agent as labels, `long_run` kept beside
    them. Who&When has no field for other labels (spans, high-impact steps) or for a step's
    kind and tool calls: those stay only in the `Trace` that `lengthen` returns."""
    labels = trace.labels or Labels()
    data: dict[str, Any] = {
        "question": trace.task,
        "history": [{"name": s.agent, "role": s.role, "content": s.content} for s in trace.steps],
        "mistake_agent": labels.mistake_agent,
        "mistake_step": None if labels.mistake_step is None else str(labels.mistake_step),
        "mistake_reason": labels.reason,
    }
    if trace.ground_truth is not None:
        data["ground_truth"] = trace.ground_truth
    if "long_run" in trace.metadata:
        data["long_run"] = trace.metadata["long_run"]
    return data
