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
from localfa.heap import frozen_heap
from localfa.methods.base import BaseMethod, Method, MethodContext, Program
from localfa.methods.none_answer import allows_none


@dataclass
class Job:
    """One program to run, with the identity the runner needs if it fails."""

    key: str
    program: Program
    on_error: Callable[[str], Diagnosis]


def method_job(engine: Engine, method: Method, ctx: MethodContext, key: str | None = None, label: str | None = None) -> Job:
    """A job running `method` on `ctx`; a failure becomes a Diagnosis with `error` set.

    `ctx` gets the engine's token counter and context window when it has none yet, and the
    engine is told the trace (`Engine.attach_trace`: the oracle engine answers from its labels).
    """
    engine.attach_trace(ctx.trace)
    if ctx.count_tokens is None:
        ctx.count_tokens = engine.count_tokens
        ctx.count_tokens_many = getattr(engine, "count_tokens_many", None)
        ctx.token_unit = getattr(engine, "token_unit", None)
        ctx.count_prompt_tokens = getattr(engine, "count_prompt_tokens", None)
        ctx.counts_in_process = bool(getattr(engine, "counts_in_process", False))
    if ctx.max_model_len is None:
        ctx.max_model_len = engine.max_model_len
    if ctx.allow_none is None:  # may it answer "no decisive error" on this trace (localfa.methods.none_answer)
        ctx.allow_none = allows_none(ctx.trace, getattr(method, "allow_none", None))
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
    keys: list[str] = field(default_factory=list)  # the request keys of the pending batch
    waiting: int = 0
    failed: bool = False
    error: BaseException | None = None  # the first failed request of the pending batch
    usage: Usage = field(default_factory=Usage)
    retried: list[str] = field(default_factory=list)  # requests whose answer hit max_tokens and was asked again
    started: float = field(default_factory=time.perf_counter)

    def finish(self, diag: Diagnosis) -> tuple[str, Diagnosis]:
        diag.usage = self.usage.as_dict()
        if self.retried:  # a bound the model hit, for every method: one more call each, in `usage.retries`
            diag.details.setdefault("max_tokens_retried", self.retried)
        diag.wall_s = round(time.perf_counter() - self.started, 3)
        return self.job.key, diag

    def fail(self, exc: BaseException) -> tuple[str, Diagnosis]:
        self.failed = True
        try:
            self.job.program.close()
        except Exception:  # noqa: S110 - a program that fails while closing has failed already
            pass
        detail = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, EngineError):
            detail += "\n" + "".join(traceback.format_exception(exc)[-3:])
        diag = self.job.on_error(detail)
        diag.error_kind = "transient" if is_transient(exc) else "final"
        return self.finish(diag)


_END = object()


def run_jobs(engine: Engine, jobs: Iterable[Job | None], concurrency: int = 8) -> Iterator[tuple[str, Diagnosis]]:
    """Yield (job key, diagnosis) as jobs finish, keeping up to `concurrency` programs in flight.

    An engine error on one request ends only the program that made it, with the error recorded
    in its Diagnosis; a bug inside a method, a program that returns no Diagnosis, or a batch the
    session refuses (a cache entry that no longer validates, a template error) likewise ends only
    that program. `jobs` may yield None: "nothing to start yet, more may come" (a cluster
    worker's inbox): the programs in flight go on, and `jobs` is asked again after the next
    completions; a feed that yields None with nothing in flight must block until it has a job.
    """
    with frozen_heap():  # what lives for the whole run is never scanned while the engine waits
        yield from _run(engine, jobs, concurrency)


def _run(engine: Engine, jobs: Iterable[Job | None], concurrency: int) -> Iterator[tuple[str, Diagnosis]]:
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
                if isinstance(error, EngineError):
                    error.partial = list(a.results)
                nxt = a.job.program.throw(error)
            else:
                nxt = next(a.job.program) if responses is None else a.job.program.send(responses)
        except StopIteration as stop:
            if not isinstance(stop.value, Diagnosis):
                return a.fail(TypeError(f"{a.job.key}: the program returned {type(stop.value).__name__}, not a Diagnosis"))
            return a.finish(stop.value)
        except Exception as exc:  # a method bug must not end a sweep
            return a.fail(exc)
        if not nxt:
            return a.fail(RuntimeError(f"{a.job.key}: a program yielded an empty batch"))
        a.results = [None] * len(nxt)
        a.keys = [r.key for r in nxt]
        a.waiting = len(nxt)
        try:
            tickets = session.submit(list(nxt))
        except Exception as exc:  # a request the session cannot take (a cache entry that no longer
            return a.fail(exc)  # validates, a template error): that program's error, not the sweep's
        for pos, ticket in enumerate(tickets):
            live[ticket] = (a, pos)
        return None

    while not exhausted or running:
        while not exhausted and running < concurrency:
            job = next(queue, _END)
            if job is _END:
                exhausted = True
                break
            if not isinstance(job, Job):  # None: nothing to start yet (a feed that may get more)
                break
            done = step(_Active(job), None)
            if done is not None:
                yield done
            else:
                running += 1
        if not running:
            continue
        for ticket, result in session.wait():
            entry = live.pop(ticket, None)
            if entry is None:
                continue  # a request of a batch whose submit failed part-way (its program has ended)
            a, pos = entry
            if a.failed:
                continue  # a sibling request already ended this program
            if isinstance(result, BaseException):
                if isinstance(result, EngineError):
                    result.request_key = a.keys[pos]
                a.error = a.error or result
            else:
                a.results[pos] = result
                a.usage.add(result.usage)
                if result.retried:
                    a.retried.append(a.keys[pos])
            a.waiting -= 1
            if a.waiting == 0:
                done = step(a, list(a.results))  # type: ignore[arg-type]
                if done is not None:
                    running -= 1
                    yield done
