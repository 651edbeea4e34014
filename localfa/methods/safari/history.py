"""The investigator's conversation: append-only, with the paper's eviction of old turns.

The fixed head (system prompt, user prompt, bootstrap read) always stays. When a budget is set
and the prompt would pass it, the oldest turn pairs (model turn + tool result) are dropped. The
STM is not part of the stored history: it is appended to the last message at call time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from localfa.engine.types import Message


@dataclass
class _Entry:
    message: Message
    size: int


@dataclass
class History:
    measure: Callable[[str], int]  # tokens or characters, whichever the budget is counted in
    head: list[_Entry] = field(default_factory=list)
    turns: list[tuple[_Entry, _Entry]] = field(default_factory=list)
    evicted: int = 0

    def add_head(self, role: str, content: str) -> None:
        self.head.append(_Entry({"role": role, "content": content}, self.measure(content)))

    def add_turn(self, model_text: str, observation: str) -> None:
        self.turns.append((
            _Entry({"role": "assistant", "content": model_text}, self.measure(model_text)),
            _Entry({"role": "user", "content": observation}, self.measure(observation)),
        ))

    def size(self, tail: str = "") -> int:
        body = sum(e.size for e in self.head) + sum(a.size + b.size for a, b in self.turns)
        return body + (self.measure(tail) if tail else 0)

    def evict_to(self, budget: int | None, tail: str) -> int:
        """Drop the oldest turns until the prompt plus `tail` fits; keep the latest turn."""
        if budget is None:
            return 0
        dropped = 0
        while len(self.turns) > 1 and self.size(tail) > budget:
            self.turns.pop(0)
            dropped += 1
        self.evicted += dropped
        return dropped

    def messages(self, tail: str = "") -> list[Message]:
        """The prompt: head, turns, and `tail` (STM etc.) appended to the last user message."""
        msgs = [dict(e.message) for e in self.head]
        for a, b in self.turns:
            msgs.append(dict(a.message))
            msgs.append(dict(b.message))
        if tail:
            msgs[-1]["content"] = msgs[-1]["content"] + "\n\n" + tail
        return msgs
