"""Run many method programs at once so the engine always sees full batches.

Each round gathers the pending requests of every active program into ONE `engine.generate`
call, then hands each program its own responses. Seeds are fixed per request, so the result
of a program does not depend on which other programs shared its batches.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from localfa.diagnosis import Diagnosis
from localfa.engine.errors import EngineError
from localfa.engine.types import Engine, Request, Response, Usage
from localfa.methods.base import Program


@dataclass
class Job:
    """One program to run, with the identity the runner needs if it fails."""

    key: str
    program: Program
    on_error: Callable[[str], Diagnosis]


@dataclass
class _Active:
    job: Job
    pending: list[Request]
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)


def _advance(active: _Active, responses: list[Response] | None) -> Diagnosis | None:
    """Send responses (or start) and store the next batch; return the Diagnosis when done."""
    try:
        if responses is None:
            nxt = next(active.job.program)
        else:
            nxt = active.job.program.send(responses)
    except StopIteration as stop:
        return stop.value
    if not nxt:
        raise RuntimeError(f"{active.job.key}: a program yielded an empty batch")
    active.pending = list(nxt)
    return None


def _finish(active: _Active, diag: Diagnosis) -> Diagnosis:
    diag.usage = active.usage.as_dict()
    diag.wall_s = round(time.perf_counter() - active.started, 3)
    return diag


def run_jobs(engine: Engine, jobs: Iterable[Job], concurrency: int = 8) -> Iterator[tuple[str, Diagnosis]]:
    """Yield (job key, diagnosis) as jobs finish, keeping up to `concurrency` programs in flight.

    An engine error inside a shared batch is isolated: the batch is re-sent program by program,
    and only the program whose request fails ends, with the error recorded in its Diagnosis.
    """
    queue = list(jobs)
    queue.reverse()
    active: list[_Active] = []

    def fail(a: _Active, exc: BaseException) -> tuple[str, Diagnosis]:
        a.job.program.close()
        detail = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, EngineError):
            detail += "\n" + "".join(traceback.format_exception(exc)[-3:])
        return a.job.key, _finish(a, a.job.on_error(detail))

    while queue or active:
        while queue and len(active) < concurrency:
            a = _Active(queue.pop(), [])
            try:
                done = _advance(a, None)
            except Exception as exc:  # a method bug must not end a sweep
                yield fail(a, exc)
                continue
            if done is not None:
                yield a.job.key, _finish(a, done)
            else:
                active.append(a)
        if not active:
            continue
        batch = [r for a in active for r in a.pending]
        try:
            responses = engine.generate(batch)
            per_program: list[list[Response] | BaseException] = []
            i = 0
            for a in active:
                per_program.append(responses[i : i + len(a.pending)])
                i += len(a.pending)
        except EngineError:
            per_program = []
            for a in active:
                try:
                    per_program.append(engine.generate(a.pending))
                except EngineError as exc:
                    per_program.append(exc)
        still: list[_Active] = []
        for a, result in zip(active, per_program):
            if isinstance(result, BaseException):
                yield fail(a, result)
                continue
            for r in result:
                a.usage.add(r.usage)
            try:
                done = _advance(a, result)
            except Exception as exc:
                yield fail(a, exc)
                continue
            if done is not None:
                yield a.job.key, _finish(a, done)
            else:
                still.append(a)
        active = still
