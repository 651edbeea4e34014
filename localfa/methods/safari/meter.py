"""How SAFARI measures what it sends, in the unit its budget is written in.

A budget is a hard limit only if the prompt is counted as the model sees it. Each message is
counted exactly, once, when it joins the conversation (the engine's tokenizer; a bounded memo
keeps a text counted twice from being tokenised twice), and a prompt's size is the sum of its
messages plus what the chat template adds around each message and once per prompt (measured once
per engine with the engine's own template). Within `NEAR_CAP` of the cap the whole prompt is
counted with the chat template, so nothing is cut on a sum that is off by the template's joins.
No ratio is learnt and nothing is estimated (issue 53: the estimates ran 60% over, and a quarter of
the budget went unused). When the engine's counts are only an estimate (no tokenizer, a server
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
from localfa.tokens import CHECK_TEXT, approx_tokens, line_pieces

#: Within this share of the cap a prompt is counted in full with the chat template.
NEAR_CAP = 0.05
#: Room kept beside a result shown whole, as a share of the cap (a later result and a turn).
AIM_UNDER = 0.10
#: When a prompt no longer fits, older results are summarised in one batch down to this share of
#: the cap, so the prefix up to the oldest raw result stays cached for several turns (each batch
#: re-prefills what follows it). scripts/bench_cost.py --methods safari --lengths '' --limit 6
#: (2026-12-06): uncached prefill per trace token 2.602 at 0.75, 2.118 at 0.35; hand-crafted/3
#: alone 144.6k, 115.8k, 92.1k tokens at 0.75, 0.5, 0.35.
BATCH_TO = 0.35
#: The budget is used to this share of the cap before anything already read is summarised: while
#: the last prompt sent is under it, a newest result that overflows the cap is shortened to the
#: room left (saying so) instead (issue 53.2).
FILL_BEFORE_SUMMARY = 0.90
#: Shortening rounds for that (each cuts at least a tenth; the count is near exact, so one is the rule).
FILL_TRIES = 4
#: Texts whose exact counts are remembered (a text measured again is not tokenised again).
MEMO_TEXTS = 512
#: Pieces of text (cut where the tokenizer always splits: `line_pieces`) whose counts are remembered: a tool
#: result's lines are tokenised once, not again inside the message that shows them, again when
#: the turn's tail is sealed onto it, or when a later read shows them again.
MEMO_CHUNKS = 32768
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
    template: tuple[int, int] = (TEMPLATE_TOKENS_PER_MESSAGE, 0)  # (per message, fixed) in tokens
    measured: Counter[str] = field(default_factory=Counter)  # how each prompt was measured: how -> prompts
    _memo: dict[str, int] = field(default_factory=dict, repr=False)  # text -> its exact count
    _chunks: dict[str, int] | None = field(default=None, repr=False)  # piece -> count, once checked exact

    @property
    def per_message(self) -> int:
        """What a chat template adds around each message."""
        return 0 if self.unit == "chars" else self.template[0]

    @property
    def fixed(self) -> int:
        """What a chat template adds once per prompt (the generation prompt)."""
        return 0 if self.unit == "chars" else self.template[1]

    def calibrate(self) -> None:
        """Measure, once per engine, what the chat template adds around messages; count texts by
        pieces where the engine counts in this process and that gives its counts of the whole."""
        if self.unit == "tokens":
            self.template = self._template_overhead()
            pieces = line_pieces(CHECK_TEXT)
            local = self.ctx is not None and self.ctx.counts_in_process
            if local and sum(self.count_many(pieces)) == int(self.count(CHECK_TEXT)):
                self._chunks = {}

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
        """A text's size: characters, or its exact token count (tokenised once)."""
        if self.unit == "chars":
            return len(text)
        known = self._memo.get(text)
        if known is None:
            known = self._memo[text] = int(self.count(text)) if self._chunks is None else self._by_pieces(text)
            if len(self._memo) > MEMO_TEXTS:
                del self._memo[next(iter(self._memo))]
        return known

    def fits(self, text: str, room: int) -> bool:
        """Is `text` at most `room` units? Counted piece by piece from its start, in batches of
        about `room` characters, stopping once past `room`: a run far larger than the room is
        not tokenised whole only to learn that it does not fit."""
        if self.unit == "chars" or self._chunks is None or text in self._memo:
            return self.text(text) <= room
        memo, total, batch, size = self._chunks, 0, [], 0
        for piece in [*line_pieces(text), ""]:
            if piece:
                batch.append(piece)
                size += len(piece)
            if batch and (size >= max(room, 4096) or not piece):
                new = [p for p in dict.fromkeys(batch) if p not in memo]
                if new:
                    memo.update(zip(new, map(int, self.count_many(new))))
                total += sum(memo[p] for p in batch)
                if total > room:
                    return False
                batch, size = [], 0
        self._memo[text] = total
        return True

    def _by_pieces(self, text: str) -> int:
        """The exact count of `text` as the sum of its pieces' counts, each piece tokenised once."""
        memo = self._chunks
        assert memo is not None
        pieces = line_pieces(text)
        new = [p for p in dict.fromkeys(pieces) if p not in memo]
        if new:
            memo.update(zip(new, map(int, self.count_many(new))))
        total = sum(memo[p] for p in pieces)
        while len(memo) > MEMO_CHUNKS:
            del memo[next(iter(memo))]
        return total

    def estimate(self, messages: Sequence[Message]) -> int:
        """The sum of the messages' exact counts and the template's overhead."""
        return self.fixed + sum(self.text(m.get("content", "")) + self.per_message for m in messages)

    def prompt(self, messages: Sequence[Message], cap: int | None = None, counted: int | None = None, drift: int | None = None) -> int:
        """The prompt's size as sent. Characters are exact; tokens are the sum of its messages'
        exact counts and the template's overhead (`counted` when the caller keeps that sum), plus
        `drift`, what the engine counted for the last prompt beyond the harness's own count of it
        (`usage.prompt_tokens`: the joins between messages; `None` before the engine has counted
        any). Only then, within `NEAR_CAP` of `cap`, is the whole prompt counted with the chat
        template: once the engine has counted, nothing is recounted over the whole prompt."""
        if self.unit == "chars":
            self.measured["characters"] += 1
            return sum(len(m.get("content", "")) for m in messages)
        total = self.estimate(messages) if counted is None else counted
        if drift is not None:
            self.measured["message_counts+engine_drift"] += 1
            return total + max(0, drift)
        if cap is None or not cap * (1 - NEAR_CAP) <= total <= cap * (1 + NEAR_CAP):
            self.measured["message_counts"] += 1
            return total
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
