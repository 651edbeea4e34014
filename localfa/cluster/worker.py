"""The engine worker: one engine, fed whole traces by the driver, records streamed back.

The same class runs as a Ray actor (`localfa.cluster.ray_driver`) on any node. Its engine is
built by `make_engine` from the driver's engine options, inside the worker's own runner thread,
which is also the only thread that ever touches the engine. Traces arrive with `submit` (all
units of a trace at once, so its calls share this engine's prefix cache); the runner thread
feeds them to `run_jobs` with the sweep's concurrency, and finished records wait in an outbox
until the driver's next `poll`. Seeds come from the units, never from which worker ran them.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
import traceback
from typing import Any, Iterator

from localfa.cluster.plan import Unit, make_record, unit_job
from localfa.methods.registry import get_method
from localfa.methods.runner import Job, run_jobs
from localfa.results import ResultRecord, trace_digest

WorkItem = tuple[int, Unit]  # (the unit's index in the driver's plan, the unit)


class EngineWorker:
    """Runs the method programs of the traces it is handed; see the module doc."""

    def __init__(self, engine_options: dict[str, Any], env: dict[str, str] | None = None) -> None:
        for key, value in (env or {}).items():
            os.environ.setdefault(key, value)  # a value set on the node wins
        self._options = dict(engine_options)
        self._concurrency = 8
        self._inbox: queue.Queue[list[WorkItem] | None] = queue.Queue()
        self._outbox: queue.Queue[tuple[int, ResultRecord]] = queue.Queue()
        self._ready = threading.Event()
        self._failure: str | None = None
        self._messages: list[str] = []
        self._methods: dict[str, Any] = {}
        self._units: dict[int, Unit] = {}
        self._digests: dict[str, str] = {}
        self.busy_s = 0.0  # time with programs in flight: the engine's share of the wall time
        self.engine: Any = None
        self._thread = threading.Thread(target=self._main, name="localfa-engine", daemon=True)
        self._thread.start()

    # ---- called by the driver ------------------------------------------------------------------
    def info(self, timeout_s: float = 3600.0) -> dict[str, Any]:
        """Wait for the engine; what the manifest records about this worker (raises if it failed)."""
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the engine did not start within {timeout_s:.0f} s")
        if self._failure:
            raise RuntimeError(self._failure)
        return {
            "host": socket.gethostname(),
            "node_ip": _node_ip(),
            "pid": os.getpid(),
            "resources": _assigned_resources(),
            "engine": self.engine.describe(),
            "model": getattr(self.engine, "model_info", None),
            "messages": list(self._messages),
        }

    def submit(self, items: list[WorkItem], concurrency: int) -> int:
        """Queue the units of whole traces, to run with `concurrency` programs in flight."""
        self._concurrency = concurrency
        self._inbox.put(list(items))
        return len(items)

    def poll(self, timeout_s: float = 0.5) -> list[tuple[int, ResultRecord]]:
        """Finished (unit index, record) pairs: waits up to `timeout_s` for the first one."""
        out: list[tuple[int, ResultRecord]] = []
        try:
            out.append(self._outbox.get(timeout=timeout_s))
            while True:
                out.append(self._outbox.get_nowait())
        except queue.Empty:
            pass
        if not out and self._failure and self._ready.is_set():
            raise RuntimeError(self._failure)
        return out

    def stats(self) -> dict[str, float]:
        return {"busy_s": round(self.busy_s, 3)}

    def stop(self) -> None:
        """Finish the runner thread and close the engine."""
        self._inbox.put(None)
        self._thread.join(timeout=60)
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    # ---- the runner thread -------------------------------------------------------------------
    def _main(self) -> None:
        from localfa.engine.factory import make_engine

        try:
            self.engine = make_engine(**self._options, say=self._messages.append)
        except BaseException as exc:  # reported to the driver by `info`
            self._failure = f"engine start failed: {type(exc).__name__}: {exc}"
            self._ready.set()
            return
        self._ready.set()
        while True:
            first = self._inbox.get()
            if first is None:
                return
            started = time.perf_counter()
            try:
                for key, diag in run_jobs(self.engine, self._feed(first), concurrency=self._concurrency):
                    idx = int(key)
                    unit = self._units.pop(idx)
                    self._outbox.put((idx, make_record(diag, unit, self._digests.get(unit.trace.id))))
            except BaseException as exc:  # the engine itself broke: this worker is done
                self._failure = f"worker failed: {type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=3)
                return
            finally:
                self.busy_s += time.perf_counter() - started

    def _feed(self, first: list[WorkItem]) -> Iterator[Job]:
        """Jobs of the queued traces: `first`, then whatever else is queued, without waiting."""
        batch: list[WorkItem] | None = first
        while batch is not None:
            for idx, unit in batch:
                yield self._job(idx, unit)
            try:
                batch = self._inbox.get_nowait()
            except queue.Empty:
                return
            if batch is None:  # stop after this round
                self._inbox.put(None)
                return

    def _job(self, idx: int, unit: Unit) -> Job:
        method = self._methods.get(unit.spec.label)
        if method is None:
            method = self._methods[unit.spec.label] = get_method(unit.spec)
        if unit.trace.id not in self._digests:
            self._digests[unit.trace.id] = trace_digest(unit.trace)
        self._units[idx] = unit
        return unit_job(self.engine, method, unit, key=str(idx))


def _node_ip() -> str | None:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:
        return None


def _assigned_resources() -> dict[str, float]:
    try:
        import ray

        return dict(ray.get_runtime_context().get_assigned_resources())
    except Exception:
        return {}
