"""A scripted engine for logic tests: canned answers, still validated against each grammar.

Never a stand-in for the real-engine tests; it lets method logic (turn rules, batching, merge
rules) be tested exactly and quickly.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from functools import lru_cache
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
        return sum(map(self.count_tokens, [m.get("content", "") for m in messages]))

    def count_tokens(self, text: str) -> int:
        return _words(text)

    def _score_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        """Score requests get the documented stand-in (`localfa.engine.scoring.stand_in_answer`):
        blind, deterministic, never a model's figure; they are recorded like any request."""
        from localfa.engine.scoring import stand_in_outputs

        self.batches.append(list(requests))
        return stand_in_outputs(requests)

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

        LOCALFA_SCRIPTED_DELAY_S adds a per-request delay (soak and concurrency tests);
        LOCALFA_SCRIPTED_EXIT_ON=TEXT ends the whole process at once on a request whose messages
        contain TEXT, as an engine that segfaults on one input would (cluster poison tests).
        """
        engine = scripted_default(float(os.environ.get("LOCALFA_SCRIPTED_DELAY_S", "0") or 0))
        poison = os.environ.get("LOCALFA_SCRIPTED_EXIT_ON")
        if poison:
            answer = engine._fn
            assert answer is not None

            def dies_on_poison(req: Request) -> Any:
                if any(poison in str(m.get("content", "")) for m in req.messages):
                    os._exit(71)
                return answer(req)

            engine._fn = dies_on_poison
        engine.model_info = {"path": None, "sha256": None, "name": "scripted"}
        from localfa.testing.faults import maybe_inject_faults  # LOCALFA_INJECT_FAULTS (soak tests only)

        return maybe_inject_faults(engine)  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def _words(text: str) -> int:
    """Words of `text`, the scripted engine's token count (prompts repeat their long parts)."""
    return len(text.split())


def scripted_default(delay_s: float = 0.0) -> ScriptedEngine:
    """A scripted engine that answers every grammar with a valid example (seeded per request)."""

    def answer(req: Request) -> str:
        if delay_s:
            time.sleep(delay_s)
        return example_answer(req)

    return ScriptedEngine(answer)


def example_answer(req: Request) -> str:
    """A valid example for the request's grammar, seeded by the request (the default script)."""
    from localfa.engine.examples import example_text

    return example_text(req.grammar, req.sampling.seed)
