"""How SAFARI measures what it sends, in the unit its budget is written in.

A budget is a hard limit only if the prompt is counted as the model sees it. With the model's
tokenizer at hand the whole prompt is counted after the chat template (`count_prompt_tokens`),
else its messages' contents in one batched call plus what a template adds around each message.
When the engine's counts are only an estimate (no tokenizer, a server that cannot count), a token
limit becomes a character limit and the record says so: a budget never changes unit mid-run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from localfa.engine.types import Message
from localfa.methods.base import MethodContext
from localfa.methods.budget import TEMPLATE_TOKENS_PER_MESSAGE
from localfa.tokens import approx_tokens


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
    how: str = "characters"  # how whole prompts are measured (recorded)
    ctx: Any = None

    @property
    def per_message(self) -> int:
        """What a chat template adds around each message, when the template is not applied."""
        return 0 if self.unit == "chars" else TEMPLATE_TOKENS_PER_MESSAGE

    def text(self, text: str) -> int:
        return self.count(text)

    def prompt(self, messages: Sequence[Message]) -> int:
        """The prompt's size as sent: chat-template tokens where the engine can tell."""
        if self.count_prompt is not None:
            n = self.count_prompt(messages)
            if n is not None:
                self.how = "chat_template"
                return int(n)
        contents = [m.get("content", "") for m in messages]
        if self.unit == "tokens":
            self.how = "content+template_estimate"
        return sum(self.count_many(contents)) + self.per_message * len(messages)

    def check_unit(self, when: str) -> None:
        """A token count that fell back to an estimate mid-run is a warning in the record."""
        if self.unit == "tokens" and self.ctx is not None and token_unit(self.ctx) != "tokens":
            note = f"token counting fell back to an estimate ({when}): sizes after this point are approximate"
            if note not in self.warnings:
                self.warnings.append(note)


def meter_for(ctx: MethodContext, unit: str) -> PromptMeter:
    """The meter for a budget in `unit`: characters, or tokens of the engine's tokenizer."""
    if unit == "chars":
        return PromptMeter("chars", len, lambda texts: [len(t) for t in texts], how="characters")
    count = ctx.count_tokens or approx_tokens
    many = ctx.count_tokens_many
    count_many = many if callable(many) else (lambda texts: [int(count(t)) for t in texts])
    count_prompt = ctx.count_prompt_tokens if callable(ctx.count_prompt_tokens) else None
    return PromptMeter("tokens", count, count_many, count_prompt, how="chat_template", ctx=ctx)
