"""A scripted engine for logic tests: canned answers, still validated against each grammar.

Never a stand-in for the real-engine tests; it lets method logic (turn rules, batching, merge
rules) be tested exactly and quickly.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from typing import Any, Callable, Iterable, Sequence

from localfa.engine.base import BaseEngine, RawOutput
from localfa.engine.types import Request

Script = Callable[[Request], "str | dict | list | tuple[str, str]"]


class ScriptedEngine(BaseEngine):
    """Answers from a queue of outputs or from a function of the request.

    An output may be a string, a JSON-able object (serialised compactly), or a
    `(text, finish_reason)` pair to simulate truncation.
    """

    name = "scripted"
    computes_locally = False

    def __init__(self, script: Iterable[Any] | Script, max_model_len: int | None = None) -> None:
        self._fn: Script | None = script if callable(script) else None
        self._queue: deque[Any] = deque() if callable(script) else deque(script)
        self.max_model_len = max_model_len
        self.batches: list[list[Request]] = []

    @property
    def requests(self) -> list[Request]:
        return [r for batch in self.batches for r in batch]

    def count_prompt_tokens(self, messages: Sequence[dict[str, str]]) -> int:
        return sum(self.count_tokens(m.get("content", "")) for m in messages)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        self.batches.append(list(requests))
        outs: list[RawOutput] = []
        for req in requests:
            if self._fn is not None:
                item = self._fn(req)
            elif self._queue:
                item = self._queue.popleft()
            else:
                raise RuntimeError(f"scripted engine ran out of outputs at request {req.key!r}")
            finish = "stop"
            if isinstance(item, tuple):
                item, finish = item
            text = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
            prompt = self.count_prompt_tokens(req.messages)
            outs.append(RawOutput(text, finish, prompt, self.count_tokens(text), 0, 0.0))
        return outs

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "ScriptedEngine":
        """Answers every grammar with a valid example, seeded per request (smoke tests).

        LOCALFA_SCRIPTED_DELAY_S adds a per-request delay (soak and concurrency tests).
        """
        engine = scripted_default(float(os.environ.get("LOCALFA_SCRIPTED_DELAY_S", "0") or 0))
        engine.model_info = {"path": None, "sha256": None, "name": "scripted"}
        from localfa.testing.faults import maybe_inject_faults  # LOCALFA_INJECT_FAULTS (soak tests only)

        return maybe_inject_faults(engine)  # type: ignore[return-value]


def scripted_default(delay_s: float = 0.0) -> ScriptedEngine:
    """A scripted engine that answers every grammar with a valid example (seeded per request)."""
    from localfa.engine.examples import example_text

    def answer(req: Request) -> str:
        if delay_s:
            time.sleep(delay_s)
        return example_text(req.grammar, req.sampling.seed)

    return ScriptedEngine(answer)
