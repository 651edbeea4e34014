"""A fault-injecting engine, for tests and benchmarks only: it wraps any engine and makes a set
share of its requests fail the way real backends fail, reproducibly from a seed.

Faults, and the engine errors they raise (`localfa.engine.errors`), so a sweep can tell what to
retry from what is final:

- ``timeout``, ``connection``: `EngineUnavailableError` before anything is generated (transient);
- ``mid_batch``: the wrapped engine answers the whole batch, then `EngineUnavailableError`
  (a connection dropped mid-batch: the work is lost, transient);
- ``slow``: the request waits `slow_s` seconds, then is answered normally;
- ``truncated``: `TruncatedOutputError` (cut by max_tokens even after the retry: final);
- ``invalid``: `InvalidOutputError` (text outside its grammar: final).

Whether a request meets a fault is a function of (seed, request, kind of fault), so a run is
reproducible. Final faults stick to their request (the same request is cut every time, as a
real cut would be); transient ones are drawn again on every attempt, so a retry may pass. A
resumed sweep that should see an outage clear uses another seed.

`LOCALFA_INJECT_FAULTS=RATE:SEED[:SLOW_S]` makes `--engine scripted` wrap itself in this engine
(`maybe_inject_faults`); `LOCALFA_FAULT_LOG=FILE` appends one JSON line per injected fault, so a
process killed with SIGKILL still leaves the count behind (scripts/soak.py reads it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from localfa.engine.errors import EngineUnavailableError, InvalidOutputError, TruncatedOutputError
from localfa.engine.session import BatchSession
from localfa.engine.types import Engine, Request, Response, Session
from localfa.engine.wrapper import EngineWrapper

ENV_FAULTS = "LOCALFA_INJECT_FAULTS"
ENV_FAULT_LOG = "LOCALFA_FAULT_LOG"
TRANSIENT = ("timeout", "connection", "mid_batch", "slow")
FINAL = ("truncated", "invalid")
KINDS = TRANSIENT + FINAL


@dataclass(frozen=True)
class FaultPlan:
    """How often, from which seed, and how slow a slow request is."""

    rate: float
    seed: int = 0
    slow_s: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be in [0, 1], got {self.rate}")
        if self.slow_s < 0:
            raise ValueError(f"slow_s must be >= 0, got {self.slow_s}")

    @classmethod
    def parse(cls, text: str) -> "FaultPlan":
        """``RATE:SEED[:SLOW_S]``, e.g. ``0.05:7``."""
        parts = text.split(":")
        try:
            if not 1 <= len(parts) <= 3:
                raise ValueError
            return cls(float(parts[0]), int(parts[1]) if len(parts) > 1 else 0, float(parts[2]) if len(parts) > 2 else 0.05)
        except ValueError as exc:
            raise ValueError(f"{ENV_FAULTS}={text!r}: use RATE:SEED[:SLOW_S], e.g. 0.05:7 ({exc})") from None


def _fingerprint(req: Request) -> str:
    """A request's identity for fault draws: its call key, trace and seed (stable across runs)."""
    return f"{req.route}\x1f{req.key}\x1f{req.sampling.seed}\x1f{req.grammar.name}"


def _draw(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(map(str, (seed, *parts))).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class FaultyEngine(EngineWrapper):
    """Any engine, with faults injected per `FaultPlan`; answers pass through untouched.

    Batches go through `generate` (its session is a `BatchSession`), so a fault hits the whole
    batch it is in, as a dropped connection would, and the session's one-by-one re-send isolates
    the failing request. `injected` counts faults by kind.
    """

    def __init__(self, inner: Engine, plan: FaultPlan, log_path: str | None = None) -> None:
        super().__init__(inner)
        self.plan = plan
        self.log_path = log_path
        self.injected: Counter[str] = Counter()
        self._attempts: Counter[str] = Counter()
        self._lock = threading.Lock()

    # ---- the Engine protocol: everything but generate is the inner engine's (describe too:
    # faults change no answer, so the manifest stays comparable) ---------------------------------
    def session(self) -> Session:
        return BatchSession(self)

    def __getattr__(self, name: str) -> Any:  # backend extras (e.g. the scripted engine's `batches`)
        return getattr(self.inner, name)

    # ---- faults ------------------------------------------------------------------------------
    def fault_for(self, req: Request, attempt: int) -> str | None:
        """The fault this attempt at `req` meets, or None. Final faults stick to the request."""
        fp = _fingerprint(req)
        share = self.plan.rate / len(KINDS)
        sticky = _draw(self.plan.seed, fp, "final")
        if sticky.random() < share * len(FINAL):
            return sticky.choice(FINAL)
        fresh = _draw(self.plan.seed, fp, "transient", attempt)
        if fresh.random() < share * len(TRANSIENT):
            return fresh.choice(TRANSIENT)
        return None

    def _record(self, kind: str, req: Request, attempt: int) -> None:
        with self._lock:
            self.injected[kind] += 1
            if self.log_path:
                line = json.dumps({"kind": kind, "key": req.key, "route": req.route, "attempt": attempt, "pid": os.getpid()}) + "\n"
                with open(self.log_path, "a", encoding="utf-8") as fh:  # one write: survives SIGKILL
                    fh.write(line)

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        requests = list(requests)
        error: Exception | None = None
        mid_batch = False
        for req in requests:
            fp = _fingerprint(req)
            with self._lock:
                attempt = self._attempts[fp]
                self._attempts[fp] += 1
            kind = self.fault_for(req, attempt)
            if kind is None:
                continue
            self._record(kind, req, attempt)
            if kind == "slow":
                time.sleep(self.plan.slow_s)
            elif error is None:
                error, mid_batch = self._error(kind, req), kind == "mid_batch"
        if error is not None and not mid_batch:
            raise error
        responses = self.inner.generate(requests)
        if error is not None:
            raise error
        return responses

    @staticmethod
    def _error(kind: str, req: Request) -> Exception:
        name = req.grammar.name
        if kind == "timeout":
            return EngineUnavailableError(f"injected fault: request {req.key!r} timed out")
        if kind == "connection":
            return EngineUnavailableError("injected fault: connection refused")
        if kind == "mid_batch":
            return EngineUnavailableError("injected fault: connection dropped in the middle of a batch")
        if kind == "truncated":
            return TruncatedOutputError(name, req.sampling.max_tokens, "injected fault: cut")
        return InvalidOutputError(name, "injected fault", "injected fault: text outside the grammar")


def maybe_inject_faults(engine: Engine) -> Engine:
    """`engine` wrapped in a `FaultyEngine` when LOCALFA_INJECT_FAULTS is set, else unchanged."""
    spec = os.environ.get(ENV_FAULTS, "").strip()
    if not spec:
        return engine
    return FaultyEngine(engine, FaultPlan.parse(spec), os.environ.get(ENV_FAULT_LOG) or None)
