"""How SAFARI measures what it sends, in the unit its budget is written in.

A budget is a hard limit only if the prompt is counted as the model sees it, but counting a
40k-token prompt with the chat template and tokenizer costs about 70 ms here: more than an engine
step. So a prompt is estimated per message (each message once, memoised: its characters over this
trace's characters per token, sampled once, plus what the chat template adds around a message,
measured once per engine), and counted in full (`count_prompt_tokens`, else its messages'
contents plus the template's overhead) only when the estimate comes within `NEAR_CAP` of the cap.
The engine's own count of every prompt it ran (`usage.prompt_tokens`) corrects the ratio when
an estimate fell short. When the engine's counts are only an estimate (no tokenizer, a server
that cannot count), a token limit becomes a character limit and the record says so: a budget
never changes unit mid-run.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from localfa.engine.types import Message
from localfa.methods.base import MethodContext
from localfa.methods.budget import TEMPLATE_TOKENS_PER_MESSAGE
from localfa.tokens import approx_tokens

#: Within this share of the cap a prompt is counted in full; below it the estimate decides.
NEAR_CAP = 0.05
#: Evictions aim this share under the cap, so the next prompt rarely needs the full count.
AIM_UNDER = 0.10
#: Characters sampled from a trace to learn its characters per token (three pieces).
SAMPLE_CHARS = 900
#: Estimates assume this much denser text than the sample showed (they must not fall short).
SAFETY = 0.9
_TEMPLATE_OVERHEAD: dict[Any, tuple[int, int]] = {}  # engine -> (per message, fixed), measured once


def token_unit(ctx: MethodContext) -> str:
    """What the engine's counts are: exactly "tokens" from the model's tokenizer; anything else
    ("chars/4", or several units joined by "+" after a fallback) is an estimate."""
    unit = ctx.token_unit() if callable(ctx.token_unit) else ctx.token_unit
    if isinstance(unit, str):
        return unit
    return "chars/4" if ctx.count_tokens is None or ctx.count_tokens is approx_tokens else "tokens"


@dataclass
class PromptMeter:
    """Sizes of texts and whole prompts, in `unit` ("tokens" or "chars")."""

    unit: str
    count: Callable[[str], int]
    count_many: Callable[[list[str]], list[int]]
    count_prompt: Callable[[Sequence[Message]], int | None] | None = None
    warnings: list[str] = field(default_factory=list)
    ctx: Any = None
    ratio: float = 0.0  # characters per token of estimates (0: count every text exactly)
    template: tuple[int, int] = (TEMPLATE_TOKENS_PER_MESSAGE, 0)  # (per message, fixed) in tokens
    measured: Counter[str] = field(default_factory=Counter)  # how each prompt was measured: how -> prompts
    _memo: dict[str, int] = field(default_factory=dict, repr=False)  # text -> its words

    @property
    def per_message(self) -> int:
        """What a chat template adds around each message."""
        return 0 if self.unit == "chars" else self.template[0]

    @property
    def fixed(self) -> int:
        """What a chat template adds once per prompt (the generation prompt)."""
        return 0 if self.unit == "chars" else self.template[1]

    def calibrate(self, sample: str) -> None:
        """Learn this trace's characters per token from three pieces of `sample` (start, middle,
        end) and, once per engine, the template's overhead; from then on texts are estimated."""
        if self.unit != "tokens" or not sample.strip():
            return
        n = SAMPLE_CHARS // 3
        mid = max(0, len(sample) // 2 - n // 2)
        pieces = [p for p in dict.fromkeys((sample[:n], sample[mid : mid + n], sample[-n:])) if p.strip()]
        tokens = sum(self.count_many(pieces))
        self.ratio = SAFETY * sum(map(len, pieces)) / max(1, tokens)
        self.template = self._template_overhead()

    def _template_overhead(self) -> tuple[int, int]:
        if self.count_prompt is None:
            return self.template
        key = getattr(self.count_prompt, "__self__", self.count_prompt)
        known = _TEMPLATE_OVERHEAD.get(key)
        if known is None:
            words = ["Alpha.", "Beta.", "Gamma.", "Delta."]
            roles = ["system", "user", "assistant", "user"]
            two = self.count_prompt([{"role": r, "content": w} for r, w in zip(roles[:2], words[:2])])
            four = self.count_prompt([{"role": r, "content": w} for r, w in zip(roles, words)])
            if two is None or four is None:
                return self.template
            content = self.count_many(words)
            per = max(0, math.ceil((four - two - content[2] - content[3]) / 2))
            known = (per, max(0, two - content[0] - content[1] - 2 * per))
            if len(_TEMPLATE_OVERHEAD) > 8:
                _TEMPLATE_OVERHEAD.clear()
            _TEMPLATE_OVERHEAD[key] = known
        return known

    def text(self, text: str) -> int:
        """A text's size: characters, its exact token count, or (once calibrated) its estimate."""
        if self.unit == "chars":
            return len(text)
        if not self.ratio:
            return self.count(text)
        by_chars = math.ceil(len(text) / self.ratio)
        # A word is at least a token: text far sparser than the sample ("r r r ...") is not
        # undercounted. Words are split out only where separators could outnumber that estimate.
        if text.count(" ") + text.count("\n") + text.count("\t") < by_chars:
            return by_chars
        words = self._memo.get(text)
        if words is None:
            words = self._memo[text] = len(text.split())
            if len(self._memo) > 256:
                del self._memo[next(iter(self._memo))]
        return max(by_chars, words)

    def estimate(self, messages: Sequence[Message]) -> int:
        return self.fixed + sum(self.text(m.get("content", "")) + self.per_message for m in messages)

    def prompt(self, messages: Sequence[Message], cap: int | None = None, estimate: int | None = None) -> int:
        """The prompt's size as sent. Characters are exact; tokens are the estimate (`estimate`
        when the caller has it from sizes it keeps) while it is clearly under or over `cap` (or
        with no cap), counted in full within `NEAR_CAP` of it."""
        if self.unit == "chars":
            self.measured["characters"] += 1
            return sum(len(m.get("content", "")) for m in messages)
        if self.ratio:
            guess = self.estimate(messages) if estimate is None else estimate
            if cap is None or not cap * (1 - NEAR_CAP) <= guess <= cap * (1 + NEAR_CAP):
                self.measured["estimate"] += 1
                return guess
        return self.exact(messages)

    def exact(self, messages: Sequence[Message]) -> int:
        """The prompt counted in full: chat-template tokens where the engine can tell."""
        if self.count_prompt is not None:
            n = self.count_prompt(messages)
            if n is not None:
                self.measured["chat_template"] += 1
                return int(n)
        self.measured["content+template_estimate"] += 1
        return sum(self.count_many([m.get("content", "") for m in messages])) + self.per_message * len(messages) + self.fixed

    def correct(self, estimated: int, counted: int) -> None:
        """The engine counted a prompt sent as `estimated` tokens as `counted`: where the estimate
        fell short, estimate denser text from now on (the ratio only ever falls)."""
        if self.ratio and counted > estimated > 0:
            self.ratio *= estimated / counted

    def check_unit(self, when: str) -> None:
        """A token count that fell back to an estimate mid-run is a warning in the record."""
        if self.unit == "tokens" and self.ctx is not None and token_unit(self.ctx) != "tokens":
            note = f"token counting fell back to an estimate ({when}): sizes after this point are approximate"
            if note not in self.warnings:
                self.warnings.append(note)


def meter_for(ctx: MethodContext, unit: str) -> PromptMeter:
    """The meter for a budget in `unit`: characters, or tokens of the engine's tokenizer."""
    if unit == "chars":
        return PromptMeter("chars", len, lambda texts: [len(t) for t in texts])
    count = ctx.count_tokens or approx_tokens
    many = ctx.count_tokens_many
    count_many = many if callable(many) else (lambda texts: [int(count(t)) for t in texts])
    count_prompt = ctx.count_prompt_tokens if callable(ctx.count_prompt_tokens) else None
    return PromptMeter("tokens", count, count_many, count_prompt, ctx=ctx)
