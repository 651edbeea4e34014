"""The local executor: this process's engine runs the units (a one-process sweep, or a shard)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from localfa.bench.units import Unit, run_units
from localfa.results import ResultRecord, trace_digest


class LocalExecutor:
    """Runs units on `engine`, or on the engine `build()` makes once the run's lock is held.

    An engine it built itself it also closes; an engine given to it stays open for the caller.
    """

    def __init__(self, engine: Any = None, build: Callable[[], Any] | None = None) -> None:
        if (engine is None) == (build is None):
            raise ValueError("give an engine or a way to build one, not both")
        self.engine = engine
        self._build = build
        self._owned = False

    def start(self, run_dir: Path | None = None) -> None:
        if self.engine is None and self._build is not None:
            self.engine = self._build()
            self._owned = True

    def describe(self) -> dict[str, Any] | None:
        return None

    def run(self, todo: list[Unit], concurrency: int) -> Iterator[tuple[int, ResultRecord]]:
        # Each trace's hash before the engine starts, not while it waits between two steps.
        digests = {u.trace.id: trace_digest(u.trace) for u in {u.trace.id: u for u in todo}.values()}
        return run_units(self.engine, enumerate(todo), concurrency, digests)

    def close(self) -> None:
        if self._owned and self.engine is not None:
            self.engine.close()
            self.engine = None
