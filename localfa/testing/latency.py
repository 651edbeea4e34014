"""A scripted engine that takes a GPU's time: for measuring whether the harness keeps it busy.

`LatencyEngine` answers like the scripted engine (a valid example for each grammar) but runs
requests the way vLLM's in-process engine does, in steps of continuous batching: a request
joins the running batch at the next step, its prompt is prefilled in that step (the part not in
the prefix cache), then it decodes one token a step until its answer is complete. A step takes
a fixed cost plus a cost per token it processes, taken for real (slept, the last 0.3 ms spun so
a step lasts its modelled time and no oversleep), so the harness's Python between
steps shows up as engine idle time exactly as it would beside a GPU. Nothing here is random:
the schedule depends only on the order of submits, like `VLLMSession`'s.

The engine keeps a `BusyClock` (`localfa.testing.busy`: time stepping, first submit, last
answer) and `busy_share()`: the share of that span spent stepping. `--engine latency:step_ms=8:token_us=4`
selects it anywhere an engine is named (Ray workers included), with these defaults: ~50 calls a
second for a typical batch of SAFARI turns at concurrency 16.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from localfa.engine.base import RawOutput
from localfa.engine.errors import EngineError, TruncatedOutputError
from localfa.engine.scripted import ScriptedEngine, example_answer
from localfa.engine.types import Request
from localfa.testing.busy import BusyClock
from localfa.tokens import approx_tokens

PARAMS = {"step_ms": 8.0, "token_us": 4.0, "max_batch": 256}
PREFIX_MEMORY = 65536  # prompt prefixes remembered as cached (a prefix cache of bounded size)


def parse_params(spec: str | None) -> dict[str, float]:
    """``latency:step_ms=8:token_us=4:max_batch=256`` -> the three numbers, with clear errors."""
    params = dict(PARAMS)
    for part in (spec or "").split(":")[1:]:
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in params:
            raise EngineError(f"--engine {spec}: {part!r} is not one of {', '.join(k + '=NUMBER' for k in PARAMS)}")
        try:
            params[key.strip()] = float(value)
        except ValueError:
            raise EngineError(f"--engine {spec}: {key}={value!r} is not a number") from None
    if params["step_ms"] < 0 or params["token_us"] < 0 or params["max_batch"] < 1:
        raise EngineError(f"--engine {spec}: step_ms and token_us must be >= 0, max_batch >= 1")
    return params


@dataclass
class _Live:
    ticket: int
    req: Request
    first: RawOutput | None = None  # the truncated first attempt, when this is its retry
    raw: RawOutput | None = None
    left: int = 0  # decode steps still to run


class LatencyEngine(ScriptedEngine):
    """Scripted answers at a GPU's pace (see the module doc)."""

    name = "latency"
    takes_params = True

    def __init__(
        self,
        script: Any = None,
        step_s: float = PARAMS["step_ms"] / 1000,
        token_s: float = PARAMS["token_us"] / 1e6,
        max_batch: int = int(PARAMS["max_batch"]),
        max_model_len: int | None = None,
    ) -> None:
        super().__init__(script if script is not None else example_answer, max_model_len)
        self.step_s = step_s
        self.token_s = token_s
        self.max_batch = max_batch
        self.clock = BusyClock()
        self.steps = 0
        self.running_sum = 0  # requests decoding, summed over steps (mean batch = this / steps)
        self.step_cpu_s = 0.0  # CPU time of this process inside steps (the engine's own Python)
        self._prefixes: dict[int, None] = {}

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "LatencyEngine":
        p = parse_params(options.engine)
        say(f"localfa: engine latency (scripted answers, {p['step_ms']:g} ms a step + {p['token_us']:g} us a token; no model)")
        engine = cls(step_s=p["step_ms"] / 1000, token_s=p["token_us"] / 1e6, max_batch=int(p["max_batch"]))
        engine.model_info = {"path": None, "sha256": None, "name": "latency"}
        return engine

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "step_s": self.step_s, "token_s": self.token_s, "max_batch": self.max_batch}

    def session(self) -> "LatencySession":
        return LatencySession(self)

    def busy_share(self) -> float:
        """Time stepping / time from the first submit to the last answer (0 before any)."""
        return self.clock.share()

    def stats(self) -> dict[str, float]:
        return {**self.clock.stats(), "steps": self.steps, "running_sum": self.running_sum, "step_cpu_s": round(self.step_cpu_s, 4)}

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        """One batch, stepped like a session's requests (all admitted together)."""
        session = LatencySession(self, validate=False)
        tickets = session.submit(requests)
        done: dict[int, Any] = {}
        while len(done) < len(tickets):
            done.update(session.wait())
        return [done[t] for t in tickets]

    # ---- the model of one step ------------------------------------------------------------
    def _uncached_prompt_tokens(self, req: Request) -> int:
        """Prompt tokens past the longest prefix of whole messages seen before (then remembered)."""
        h, uncached, hit = 0, 0, True
        for m in req.messages:
            h = hash((h, m.get("role", ""), m.get("content", "")))
            tokens = approx_tokens(m.get("content", "")) + 4
            if hit and h in self._prefixes:
                continue
            hit = False
            uncached += tokens
            self._prefixes[h] = None
        while len(self._prefixes) > PREFIX_MEMORY:
            del self._prefixes[next(iter(self._prefixes))]
        return uncached

    def _answer(self, req: Request) -> RawOutput:
        (raw,) = super()._generate_raw([req])
        self.batches.pop()  # the scripted engine's log of batches is not kept here (sweeps are long)
        return raw


SPIN_S = 0.0003  # the end of a step is waited for on the CPU, as CUDA's default sync does


def _hold_until(deadline: float) -> None:
    """Sleep until shortly before `deadline`, then spin to it: a step lasts its modelled time, not
    that plus the timer's oversleep (~0.1 ms a step, the engine neither busy nor free)."""
    rest = deadline - time.perf_counter() - SPIN_S
    if rest > 0:
        time.sleep(rest)
    while time.perf_counter() < deadline:
        pass


class LatencySession:
    """Continuous batching with steps taken for real; completions come back in ticket order."""

    def __init__(self, engine: LatencyEngine, validate: bool = True) -> None:
        self.engine = engine
        self.validate = validate
        self._tickets = itertools.count()
        self._waiting: list[_Live] = []
        self._running: list[_Live] = []
        self._ready: list[tuple[int, Any]] = []

    def submit(self, requests: Sequence[Request]) -> list[int]:
        if requests:
            self.engine.clock.submitted()
        out = []
        for req in requests:
            t = next(self._tickets)
            self._waiting.append(_Live(t, req))
            out.append(t)
        return out

    def pending(self) -> int:
        return len(self._waiting) + len(self._running) + len(self._ready)

    def wait(self) -> list[tuple[int, Any]]:
        while not self._ready and (self._waiting or self._running):
            self._step()
        ready, self._ready = sorted(self._ready, key=lambda c: c[0]), []
        return ready

    def _step(self) -> None:
        e = self.engine
        started, cpu = time.perf_counter(), time.process_time()
        room = max(0, e.max_batch - len(self._running))
        admitted, self._waiting = self._waiting[:room], self._waiting[room:]
        tokens = 0
        for live in admitted:
            live.raw = e._answer(live.req)  # the engine's own work, inside the step's time
            live.left = max(1, approx_tokens(live.raw.text))
            tokens += e._uncached_prompt_tokens(live.req)
        self._running += admitted
        tokens += len(self._running)  # one decoded token per running request
        e.running_sum += len(self._running)
        for live in self._running:
            live.left -= 1
        finished = [x for x in self._running if x.left <= 0]
        self._running = [x for x in self._running if x.left > 0]
        _hold_until(started + e.step_s + e.token_s * tokens)
        e.steps += 1
        e.clock.stepped(started)
        e.step_cpu_s += time.process_time() - cpu
        for live in finished:  # validation is harness work: after the step, as in vLLM's session
            result = self._finish(live)
            if result is not None:
                self._ready.append((live.ticket, result))

    def _finish(self, live: _Live) -> Any:
        """The response or error for a finished request; None when it goes back for its retry."""
        raw, req, e = live.raw, live.req, self.engine
        assert raw is not None
        if not self.validate:
            return raw
        if raw.finish_reason == "length":
            if live.first is None:  # once more with twice the room, like BaseEngine.generate
                self._waiting.append(_Live(live.ticket, e._with_more_room(req), raw))
                return None
            return TruncatedOutputError(req.grammar.name, req.sampling.max_tokens, raw.text)
        try:
            resp = e._validated(req, raw, 0.0)
        except EngineError as exc:
            return exc
        return e._count_first_attempt(resp, live.first) if live.first is not None else resp
