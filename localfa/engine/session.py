"""Sessions: submit requests at any time, collect responses as each one finishes.

`Engine.generate` answers a whole batch at once, so one long answer holds every other caller
back. A session lets the runner hand a method its responses as soon as they are complete and
submit that method's next requests while the others are still decoding (continuous batching).
Backends that cannot do better get `BatchSession`, which sends everything pending as one batch.
The `Session` protocol itself is part of the engine's contract, in `localfa.engine.types`.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

from localfa.engine.errors import EngineError
from localfa.engine.types import Completion, Request


class BatchSession:
    """Everything pending goes to `engine.generate` as one batch; an engine error in that batch
    is isolated by re-sending its requests one by one, so only the failing request errors."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._ids = itertools.count()
        self._queue: list[tuple[int, Request]] = []

    def submit(self, requests: Sequence[Request]) -> list[int]:
        tickets = [next(self._ids) for _ in requests]
        self._queue.extend(zip(tickets, requests))
        return tickets

    def pending(self) -> int:
        return len(self._queue)

    def wait(self) -> list[Completion]:
        batch, self._queue = self._queue, []
        if not batch:
            return []
        try:
            responses = self.engine.generate([r for _, r in batch])
            return [(t, resp) for (t, _), resp in zip(batch, responses)]
        except Exception:  # noqa: BLE001 - isolate the failing request, whatever the backend raised
            out: list[Completion] = []
            for t, req in batch:
                try:
                    out.append((t, self.engine.generate([req])[0]))
                except Exception as exc:  # noqa: BLE001
                    out.append((t, as_engine_error(exc)))
            return out


def as_engine_error(exc: BaseException) -> EngineError:
    """Any failure of one request as an EngineError, so it ends that request's program only."""
    if isinstance(exc, EngineError):
        return exc
    err = EngineError(f"{type(exc).__name__} in the backend: {exc}")
    err.__cause__ = exc
    return err
