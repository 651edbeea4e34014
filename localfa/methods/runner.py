"""Run many method programs at once so the engine always has work from all of them.

Each program's pending requests go into one engine session. With a backend that supports it
(in-process vLLM, HTTP servers) a program gets its responses as soon as they are complete and its
next requests join the running batch while the other programs are still decoding; otherwise
every round of pending requests goes to the engine as one batch. Seeds are fixed per request,
and completions are handled in ticket order, so results do not depend on wall-clock timing.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from localfa.diagnosis import Diagnosis
from localfa.engine.errors import EngineError, is_transient
from localfa.engine.types import Engine, Response, Usage
from localfa.methods.base import BaseMethod, Method, MethodContext, Program


@dataclass
class Job:
    """One program to run, with the identity the runner needs if it fails."""

    key: str
    program: Program
    on_error: Callable[[str], Diagnosis]


def method_job(engine: Engine, method: Method, ctx: MethodContext, key: str | None = None, label: str | None = None) -> Job:
    """A job running `method` on `ctx`; a failure becomes a Diagnosis with `error` set.

    `ctx` gets the engine's token counter and context window when it has none yet.
    """
    if ctx.count_tokens is None:
        ctx.count_tokens = engine.count_tokens
    if ctx.max_model_len is None:
        ctx.max_model_len = engine.max_model_len
    name = label or method.name
    if isinstance(method, BaseMethod):  # the model's profile sizes the method's bounds
        method = method.for_model(engine.method_defaults)
        record = method.options_record()
    else:
        record = {"values": method.describe(), "profile": None, "from_profile": {}}

    def on_error(detail: str) -> Diagnosis:
        return ctx.diagnosis(name, stop_reason="error", error=detail)

    return Job(key or ctx.trace.id, _with_options(method.run(ctx), record), on_error)


def _with_options(program: Program, record: dict) -> Program:
    """The program, its Diagnosis noting the options it ran with (`details["options"]`)."""
    diag = yield from program
    if diag is not None:
        diag.details.setdefault("options", record)
    return diag


@dataclass
class _Active:
    job: Job
    results: list[Response | None] = field(default_factory=list)
    waiting: int = 0
    failed: bool = False
    error: BaseException | None = None  # the first failed request of the pending batch
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)

    def finish(self, diag: Diagnosis) -> tuple[str, Diagnosis]:
        diag.usage = self.usage.as_dict()
        diag.wall_s = round(time.perf_counter() - self.started, 3)
        return self.job.key, diag

    def fail(self, exc: BaseException) -> tuple[str, Diagnosis]:
        self.failed = True
        self.job.program.close()
        detail = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, EngineError):
            detail += "\n" + "".join(traceback.format_exception(exc)[-3:])
        diag = self.job.on_error(detail)
        diag.error_kind = "transient" if is_transient(exc) else "final"
        return self.finish(diag)


def run_jobs(engine: Engine, jobs: Iterable[Job], concurrency: int = 8) -> Iterator[tuple[str, Diagnosis]]:
    """Yield (job key, diagnosis) as jobs finish, keeping up to `concurrency` programs in flight.

    An engine error on one request ends only the program that made it, with the error recorded
    in its Diagnosis; a bug inside a method likewise ends only that program.
    """
    session = engine.session()
    queue = iter(jobs)  # read lazily: a caller may feed jobs while others run (cluster workers)
    exhausted = False
    live: dict[int, tuple[_Active, int]] = {}  # ticket -> (program, position in its batch)
    running = 0

    def step(a: _Active, responses: list[Response] | None) -> tuple[str, Diagnosis] | None:
        """Advance a program; submit its next batch, or return its result when it is done.

        A request that failed is raised inside the program (once its batch is complete), so a
        method may recover from it; a program that does not catch it ends with an error record.
        """
        try:
            if a.error is not None:
                error, a.error = a.error, None
                nxt = a.job.program.throw(error)
            else:
                nxt = next(a.job.program) if responses is None else a.job.program.send(responses)
        except StopIteration as stop:
            return a.finish(stop.value)
        except Exception as exc:  # a method bug must not end a sweep
            return a.fail(exc)
        if not nxt:
            return a.fail(RuntimeError(f"{a.job.key}: a program yielded an empty batch"))
        a.results = [None] * len(nxt)
        a.waiting = len(nxt)
        for pos, ticket in enumerate(session.submit(list(nxt))):
            live[ticket] = (a, pos)
        return None

    while not exhausted or running:
        while not exhausted and running < concurrency:
            job = next(queue, None)
            if job is None:
                exhausted = True
                break
            done = step(_Active(job), None)
            if done is not None:
                yield done
            else:
                running += 1
        if not running:
            continue
        for ticket, result in session.wait():
            a, pos = live.pop(ticket)
            if a.failed:
                continue  # a sibling request already ended this program
            if isinstance(result, BaseException):
                a.error = a.error or result
            else:
                a.results[pos] = result
                a.usage.add(result.usage)
            a.waiting -= 1
            if a.waiting == 0:
                done = step(a, list(a.results))  # type: ignore[arg-type]
                if done is not None:
                    running -= 1
                    yield done
