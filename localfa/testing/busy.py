"""The engine busy share, measured one way for every benchmark that prints it.

An engine is busy while it steps; it stands still while the harness works between steps. A
`BusyClock` keeps, for one engine, the time it spent stepping, its first submit and its last
answer (on the process clock for the share, on the wall clock to line up engines on several
hosts). The latency engine keeps one (scripts/bench_engine_busy.py, locally and on Ray workers);
scripts/bench_harness.py wraps the real engine's session in `BusySession`, which keeps one
around the engine's step loop (`wait`). `shares` turns the figures of several engines into the
two printed shares.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from localfa.engine.types import Request


@dataclass
class BusyClock:
    busy_s: float = 0.0
    first_s: float | None = None  # perf_counter at the first submit
    last_s: float | None = None  # perf_counter at the last answer
    first_at: float = 0.0  # the same two moments on the wall clock (to compare engines)
    last_at: float = 0.0

    def submitted(self) -> None:
        if self.first_s is None:
            self.first_s, self.first_at = time.perf_counter(), time.time()

    def stepped(self, started: float) -> None:
        """A step (or a step loop) that began at `started` (perf_counter) ended now."""
        self.last_s, self.last_at = time.perf_counter(), time.time()
        self.busy_s += self.last_s - started

    @property
    def span_s(self) -> float:
        return max(0.0, (self.last_s or 0.0) - (self.first_s or 0.0))

    def share(self) -> float:
        """Time stepping / time from the first submit to the last answer (0 before any)."""
        return self.busy_s / self.span_s if self.span_s > 0 else 0.0

    def stats(self) -> dict[str, float]:
        return {"busy_s": round(self.busy_s, 4), "span_s": round(self.span_s, 4), "first_at": self.first_at, "last_at": self.last_at}


def shares(stats: Sequence[dict[str, float]]) -> tuple[float, float]:
    """(busy share, busy share of the run) over several engines' `BusyClock.stats()`.

    The first is each engine's stepping time over its own span, summed; the second over the span
    of the whole run (the first request any engine got to the last answer any engine gave) for
    every engine, so an engine that ran dry while another still worked counts as idle."""
    busy = sum(s["busy_s"] for s in stats)
    span = sum(s["span_s"] for s in stats)
    run_span = (max(s["last_at"] for s in stats) - min(s["first_at"] for s in stats)) * len(stats) if stats else 0.0
    return (busy / span if span > 0 else 0.0), (busy / run_span if run_span > 0 else 0.0)


class BusySession:
    """An engine session whose step loop (`wait`) is timed by a `BusyClock`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.clock = BusyClock()

    def submit(self, requests: Sequence[Request]) -> list[int]:
        if requests:
            self.clock.submitted()
        return self.inner.submit(requests)

    def wait(self) -> list[Any]:
        started = time.perf_counter()
        out = self.inner.wait()
        self.clock.stepped(started)
        return out

    def pending(self) -> int:
        return self.inner.pending()
