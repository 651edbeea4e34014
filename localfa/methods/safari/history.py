"""The investigator's conversation: append-only (a message once sent is never rewritten, so a
prefix cache keeps it); older tool results summarised in a batch, then the oldest turns evicted,
only when it no longer fits.

The fixed head (system prompt, user prompt) always stays; so does the bootstrap read when it
shows the whole run. Past the cap, the oldest raw tool results are first replaced by their
summary line (what was called, which lines and steps it showed: the model's own analysis and STM
after it keep what mattered, as the paper's tool results arrive as summaries); the newest result
always stays raw. Only if that is not enough are the oldest turn pairs dropped. The per-turn tail
(STM, turn reminder) is appended to the newest message at call time and, once sent, sealed into
it (`seal`): the next prompt repeats that message exactly as it was sent, and carries its own tail
in its own newest message.

Each entry remembers the steps whose lines it shows, so the steps a prompt shows are known
without reading its text again. Sizes are what the budget counts (`measure` of the content plus
`per_message` for the chat template around it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

from localfa.engine.types import Message

#: What replaces a result once summarised: the text, or a function that writes it then (it may
#: keep what the model referred to by that time) with the steps its kept lines still show.
Summary = Union[str, Callable[[], tuple[str, frozenset[int]]]]


@dataclass
class _Entry:
    message: Message
    size: int
    steps: frozenset[int] = frozenset()  # steps whose lines the message shows
    summary: Summary | None = None  # what replaces it once summarised (None: it stays as it is)
    is_summary: bool = False  # it is the summary of a result, no longer the result
    sealed: bool = False  # sent with a tail appended: it is repeated as sent, never shortened


@dataclass
class History:
    measure: Callable[[str], int]  # tokens or characters of a message's content
    per_message: int = 0  # what the chat template adds around each message, in the same unit
    head: list[_Entry] = field(default_factory=list)
    turns: list[tuple[int, _Entry, _Entry]] = field(default_factory=list)  # (turn id, model, result)
    evicted: int = 0
    summarised: int = 0

    def _entry(self, role: str, content: str, steps: frozenset[int] = frozenset(), summary: Summary | None = None) -> _Entry:
        return _Entry({"role": role, "content": content}, self.measure(content) + self.per_message, steps, summary)

    def add_head(self, role: str, content: str, steps: frozenset[int] = frozenset(), summary: Summary | None = None) -> None:
        self.head.append(self._entry(role, content, steps, summary))

    def add_turn(
        self,
        model_text: str,
        observation: str,
        turn: int | None = None,
        steps: frozenset[int] = frozenset(),
        summary: Summary | None = None,
    ) -> None:
        turn_id = turn if turn is not None else (self.turns[-1][0] + 1 if self.turns else 1)
        self.turns.append((turn_id, self._entry("assistant", model_text), self._entry("user", observation, steps, summary)))

    def holds(self, turn: int) -> bool:
        """Is the raw result of `turn` still in the conversation? Turn 0 is the bootstrap read."""
        if turn == 0:
            return bool(self.head) and not self.head[-1].is_summary
        return any(t == turn and not r.is_summary for t, _, r in self.turns)

    def shown_steps(self) -> set[int]:
        """Steps whose lines the conversation shows now."""
        out: set[int] = set()
        for e in self.head:
            out |= e.steps
        for _, _, r in self.turns:
            out |= r.steps
        return out

    def head_size(self, tail: str = "") -> int:
        """The part that is never evicted (plus `tail`, which rides on the last message)."""
        return sum(e.size for e in self.head) + (self.measure("\n\n" + tail) if tail else 0)

    def size(self, tail: str = "") -> int:
        return self.head_size(tail) + sum(a.size + b.size for _, a, b in self.turns)

    def evict_to(self, limit: int | None, tail: str, target: int | None = None) -> int:
        """Only when the prompt plus `tail` is over `limit`: summarise the oldest raw results, in
        one batch, until it is at most `target` (`limit` by default), then drop the oldest turns
        until it fits `limit`; keep the latest turn (the caller measures the prompt and shrinks
        that one if it must). Returns the turns dropped."""
        if limit is None or self.size(tail) <= limit:
            return 0
        target = limit if target is None else min(target, limit)
        dropped = 0
        while self.size(tail) > target and self.summarise_oldest():
            pass
        while len(self.turns) > 1 and self.size(tail) > limit:
            dropped += self.evict_oldest()
        return dropped

    def summarise_oldest(self) -> bool:
        """Replace the oldest raw result that has a summary, except the newest result, by its
        summary; False when none is left."""
        head = self.head if self.turns else self.head[:-1]  # the bootstrap read is the newest result until a turn
        candidates = [(i, e) for i, e in enumerate(head) if e.summary is not None]
        candidates += [(len(self.head) + k, r) for k, (_, _, r) in enumerate(self.turns[:-1]) if r.summary is not None]
        if not candidates:
            return False
        i, old = candidates[0]
        if callable(old.summary):
            text, steps = old.summary()
        else:
            text, steps = old.summary or "", frozenset()
        new = self._entry(old.message["role"], text, steps)
        new.is_summary = True
        if i < len(self.head):
            self.head[i] = new
        else:
            turn_id, model, _ = self.turns[i - len(self.head)]
            self.turns[i - len(self.head)] = (turn_id, model, new)
        self.summarised += 1
        return True

    def evict_oldest(self) -> int:
        """Drop the oldest turn pair; 1 if one was dropped."""
        if not self.turns:
            return 0
        self.turns.pop(0)
        self.evicted += 1
        return 1

    def newest_observation(self) -> str | None:
        return self.turns[-1][2].message["content"] if self.turns else None

    def replace_newest_observation(self, content: str, steps: frozenset[int] = frozenset()) -> bool:
        """Put a shortened version of the newest tool result in place of the original; False
        when it was already sent (sealed): a sent message is never rewritten."""
        turn_id, model, old = self.turns[-1]
        if old.sealed:
            return False
        self.turns[-1] = (turn_id, model, self._entry("user", content, steps, old.summary))
        return True

    def _last(self) -> _Entry | None:
        if self.turns:
            return self.turns[-1][2]
        return self.head[-1] if self.head else None

    def seal(self, tail: str) -> None:
        """The prompt with `tail` on its newest message was sent: keep that message as sent."""
        last = self._last()
        if not tail or last is None:
            return
        content = last.message["content"] + "\n\n" + tail
        last.message = {"role": last.message["role"], "content": content}
        last.size = self.measure(content) + self.per_message
        last.sealed = True

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
