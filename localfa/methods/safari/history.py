"""The investigator's conversation: append-only, with the paper's eviction of old turns.

The fixed head (system prompt, user prompt, bootstrap read) always stays. When a limit is set
and the prompt would pass it, the oldest turn pairs (model turn + tool result) are dropped. The
STM is not part of the stored history: it is appended to the last message at call time.

Sizes are what the budget counts: characters, or tokens of each message's content plus what the
chat template adds around every message (`per_message`), so a token budget is the prompt's
length as the model sees it, not the bare text's.
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
    measure: Callable[[str], int]  # tokens or characters of a message's content
    per_message: int = 0  # what the chat template adds around each message, in the same unit
    head: list[_Entry] = field(default_factory=list)
    turns: list[tuple[int, _Entry, _Entry]] = field(default_factory=list)  # (turn id, model, result)
    evicted: int = 0

    def _entry(self, role: str, content: str) -> _Entry:
        return _Entry({"role": role, "content": content}, self.measure(content) + self.per_message)

    def add_head(self, role: str, content: str) -> None:
        self.head.append(self._entry(role, content))

    def add_turn(self, model_text: str, observation: str, turn: int | None = None) -> None:
        turn_id = turn if turn is not None else (self.turns[-1][0] + 1 if self.turns else 1)
        self.turns.append((turn_id, self._entry("assistant", model_text), self._entry("user", observation)))

    def holds(self, turn: int) -> bool:
        """Is the result of `turn` still in the conversation? Turn 0 (the bootstrap) always is."""
        return turn == 0 or any(t == turn for t, _, _ in self.turns)

    def head_size(self, tail: str = "") -> int:
        """The part that is never evicted (plus `tail`, which rides on the last message)."""
        return sum(e.size for e in self.head) + (self.measure("\n\n" + tail) if tail else 0)

    def size(self, tail: str = "") -> int:
        return self.head_size(tail) + sum(a.size + b.size for _, a, b in self.turns)

    def evict_to(self, limit: int | None, tail: str) -> int:
        """Drop the oldest turns until the estimated prompt plus `tail` fits; keep the latest
        turn (the caller measures the prompt exactly and shrinks that one if it must)."""
        if limit is None:
            return 0
        dropped = 0
        while len(self.turns) > 1 and self.size(tail) > limit:
            dropped += self.evict_oldest()
        return dropped

    def evict_oldest(self) -> int:
        """Drop the oldest turn pair; 1 if one was dropped."""
        if not self.turns:
            return 0
        self.turns.pop(0)
        self.evicted += 1
        return 1

    def newest_observation(self) -> str | None:
        return self.turns[-1][2].message["content"] if self.turns else None

    def replace_newest_observation(self, content: str) -> None:
        """Put a shortened version of the newest tool result in place of the original."""
        turn_id, model, _ = self.turns[-1]
        self.turns[-1] = (turn_id, model, self._entry("user", content))

    def messages(self, tail: str = "") -> list[Message]:
        """The prompt: head, turns, and `tail` (STM etc.) appended to the last user message.

        The stored messages are shared, not copied (a request never changes its messages); only
        the last one, which carries `tail`, is a new dict."""
        msgs = [e.message for e in self.head]
        for _, a, b in self.turns:
            msgs.append(a.message)
            msgs.append(b.message)
        if tail:
            last = msgs[-1]
            msgs[-1] = {"role": last["role"], "content": last["content"] + "\n\n" + tail}
        return msgs
