"""What FALAT shows of a trace, cut to token caps measured with the engine's own tokenizer.

Windows see each step clipped to a per-step cap; verification and re-search see full steps,
shrunk together (the longest first) only as far as the model's window requires. The host limits
(`localfa.limits`) apply first: at most `max_steps` steps are judged, each step at most
`max_step_chars` characters, and what they cut is reported in `details["limits_hit"]`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Sequence

from localfa.limits import Limits, LimitsHit
from localfa.methods.base import MethodContext
from localfa.methods.baselines import shorten, water_fill_cap
from localfa.methods.final_output import final_output
from localfa.methods.names import agent_names
from localfa.tokens import approx_tokens
from localfa.traces.model import Step, Trace

Counter = Callable[[str], int]
MESSAGE_OVERHEAD = 8  # chat-template tokens per message
MARGIN = 64


def counter(ctx: MethodContext) -> Counter:
    return ctx.count_tokens or approx_tokens


def step_text(step: Step) -> str:
    """Everything the step holds, as a person reads it: content, tool calls, what came back."""
    parts = [step.content.strip()]
    parts += [f"tool call: {json.dumps(c, ensure_ascii=False)}" for c in step.tool_calls]
    if step.observation:
        parts.append(f"observation: {step.observation.strip()}")
    return "\n".join(p for p in parts if p) or "(empty)"


@dataclass
class TraceText:
    """The steps FALAT judges, each step's text within the host limits, and the token counter."""

    trace: Trace
    count: Counter
    hit: LimitsHit
    n: int  # steps judged: all, or the first `max_steps`
    _texts: dict[int, str] = field(default_factory=dict)
    _clipped: dict[tuple[int, int], str] = field(default_factory=dict)
    shortened: set[int] = field(default_factory=set)  # steps shown shortened where full text was due

    @classmethod
    def of(cls, ctx: MethodContext) -> "TraceText":
        hit = LimitsHit(Limits.from_env())
        return cls(ctx.trace, counter(ctx), hit, hit.steps(len(ctx.trace.steps)))

    def agent(self, i: int) -> str:
        """Step i's agent as a prompt may show it outside a fence (`localfa.methods.names`)."""
        return agent_names(self.trace).show(self.trace.steps[i].agent)

    def text(self, i: int) -> str:
        if i not in self._texts:
            self._texts[i] = self.hit.step_text(i, step_text(self.trace.steps[i]))
        return self._texts[i]

    def clipped(self, i: int, cap: int) -> str:
        """Step i's text within `cap` tokens (a step shown in several pairs is cut once)."""
        if (i, cap) not in self._clipped:
            self._clipped[(i, cap)] = clip_tokens(self.text(i), cap, self.count)
        return self._clipped[(i, cap)]

    def shown(self, steps: Sequence[int], texts: Sequence[str]) -> list[dict[str, object]]:
        """What a template needs per step: index, agent, text."""
        return [{"index": i, "agent": self.agent(i), "text": t} for i, t in zip(steps, texts)]


def clip_tokens(text: str, cap: int, count: Counter) -> str:
    """`text` cut (head and tail kept) until it holds at most `cap` tokens."""
    n = count(text)
    for _ in range(6):
        if n <= cap:
            return text
        text = shorten(text, max(24, int(len(text) * cap / n * 0.95)))
        n = count(text)
    return text


def fit_texts(texts: Sequence[str], budget: int, count: Counter) -> list[str]:
    """The texts cut to a common token cap so together they hold about `budget` tokens; short
    texts stay whole (water filling), long ones keep head and tail."""
    sizes = [count(t) for t in texts]
    cap = water_fill_cap(sizes, max(0, budget), min_cap=16)
    if cap is None:
        return list(texts)
    return [clip_tokens(t, cap, count) for t in texts]


@dataclass(frozen=True)
class ModelWindow:
    """The model's context window in tokens and where that number came from."""

    tokens: int
    source: str  # "option" | "engine" | "assumed"

    @classmethod
    def of(cls, ctx: MethodContext, option: int | None, assumed: int) -> "ModelWindow":
        if option is not None:
            return cls(option, "option")
        if ctx.max_model_len:
            return cls(int(ctx.max_model_len), "engine")
        return cls(assumed, "assumed")

    def warning(self) -> str | None:
        """What the record says when the window was not known (never a silent default)."""
        if self.source != "assumed":
            return None
        return (
            f"the engine reports no context window: {self.tokens} tokens assumed for sizing prompts and pair quotas "
            "(set falat:context_tokens=N, or start the server with --max-model-len)"
        )

    def room(self, count: Counter, messages: Sequence[dict[str, str]], max_tokens: int) -> int:
        """Tokens still free in the window once `messages` and the answer are placed."""
        used = sum(count(m["content"]) + MESSAGE_OVERHEAD for m in messages)
        return int(self.tokens * 0.97) - MARGIN - max_tokens - used


def wrong_output(trace: Trace, cap_chars: int) -> tuple[str, str]:
    """The run's wrong final output and where it came from (`localfa.methods.final_output`)."""
    return final_output(trace, cap_chars, step_text)
