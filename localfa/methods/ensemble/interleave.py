"""Run several method programs on one trace as one program: their batches go out together.

Each round takes every live member's pending batch, sends them as one batch (so they share the
engine's batch and the trace's cached prefix) and hands each member its own responses. A request
that fails is raised inside the member that made it only (the runner says which request failed and
what its siblings got back); a member that fails ends with its exception as its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localfa.diagnosis import Diagnosis
from localfa.engine.errors import EngineError
from localfa.engine.types import Request, Response, Usage
from localfa.methods.base import Calls, Program


@dataclass
class Outcome:
    """How one member run ended: its diagnosis or the exception that ended it, and its cost."""

    diagnosis: Diagnosis | None = None
    error: BaseException | None = None
    usage: Usage = field(default_factory=Usage)


def interleave(programs: list[Program]) -> Calls[list[Outcome]]:
    """Run `programs` to the end, batching their requests together; one Outcome each, in order."""
    outcomes = [Outcome() for _ in programs]
    pending: dict[int, list[Request]] = {}

    def advance(i: int, how: str, value: Any = None) -> None:
        program = programs[i]
        try:
            if how == "start":
                batch = next(program)
            elif how == "throw":
                batch = program.throw(value)
            else:
                batch = program.send(value)
        except StopIteration as stop:
            outcomes[i].diagnosis = stop.value
            pending.pop(i, None)
            return
        except Exception as exc:  # noqa: BLE001 - a member's failure ends that member only
            outcomes[i].error = exc
            pending.pop(i, None)
            return
        if not batch:
            outcomes[i].error = RuntimeError("a member program yielded an empty batch")
            pending.pop(i, None)
            return
        pending[i] = list(batch)

    for i in range(len(programs)):
        advance(i, "start")
    while pending:
        order = sorted(pending)
        sent = [(i, r) for i in order for r in pending[i]]
        try:
            responses: list[Response | None] = list((yield [r for _, r in sent]))
            failed: EngineError | None = None
        except EngineError as exc:
            failed = exc
            responses = list(exc.partial or [None] * len(sent))
        by_member: dict[int, list[Response | None]] = {i: [] for i in order}
        for (i, _), resp in zip(sent, responses):
            by_member[i].append(resp)
        for i in order:
            got = by_member[i]
            for resp in got:
                if resp is not None:
                    outcomes[i].usage.add(resp.usage)
            if any(resp is None for resp in got):
                keys = {r.key for r in pending[i]}
                error = failed if failed is not None and failed.request_key in keys else None
                if error is None:  # a sibling's request failed before this one was answered
                    error = EngineError(f"request of another member failed: {failed}")
                    error.transient = bool(failed is not None and failed.transient)
                advance(i, "throw", error)
            else:
                advance(i, "send", got)
    for program in programs:
        program.close()
    return outcomes
