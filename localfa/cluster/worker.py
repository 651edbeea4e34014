"""The engine worker: one engine, fed work items by the driver, results streamed back.

The same class runs as a Ray actor on any node. Its engine is built by `make_engine` from the
driver's engine options, inside the worker's own runner thread, which is also the only thread
that ever touches the engine. What a work item is and how it runs is not the worker's business:
the driver hands it `run_items` (the sweep's `localfa.bench.units.run_units`), which turns an
iterator of items into (index, result) pairs on the engine.

Items arrive with `submit` and join the programs already in flight as soon as there is room: the
feed never reads as exhausted while the driver may send more (when the inbox is momentarily
empty it says "nothing yet" and the engine keeps decoding what it has), so the engine does not
drain to zero between the driver's rounds. Only `stop` ends the run. Results wait in an outbox
until the driver's next `poll`.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
import traceback
from typing import Any, Callable, Iterable, Iterator

RunItems = Callable[[Any, Iterable[Any], int], Iterator[tuple[int, Any]]]


class EngineWorker:
    """Runs the work items it is handed on its own engine; see the module doc."""

    def __init__(self, engine_options: dict[str, Any], run_items: RunItems, env: dict[str, str] | None = None) -> None:
        for key, value in (env or {}).items():
            os.environ.setdefault(key, value)  # a value set on the node wins
        self._options = dict(engine_options)
        self._run_items = run_items
        self._concurrency = 8
        self._inbox: queue.Queue[list[Any] | None] = queue.Queue()
        self._outbox: queue.Queue[tuple[int, Any]] = queue.Queue()
        self._ready = threading.Event()
        self._failure: str | None = None
        self._messages: list[str] = []
        self._in_flight = 0  # items fed to the runner whose result is not out yet (runner thread only)
        self._started: float | None = None  # when the first work arrived
        self._ended: float | None = None
        self._idle_s = 0.0  # time the runner waited for work with nothing in flight
        self._idle_since: float | None = None  # set while it waits
        self.engine: Any = None
        self._thread = threading.Thread(target=self._main, name="localfa-engine", daemon=True)
        self._thread.start()

    # ---- called by the driver ------------------------------------------------------------------
    def ping(self) -> int:
        """Answers as soon as the actor runs (it was placed), before its engine is up."""
        return os.getpid()

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
            "max_model_len": getattr(self.engine, "max_model_len", None),
            "messages": list(self._messages),
        }

    def submit(self, items: list[Any], concurrency: int) -> int:
        """Queue work items, to run with `concurrency` in flight (the first submit fixes it)."""
        self._concurrency = concurrency
        self._inbox.put(list(items))
        return len(items)

    def poll(self, timeout_s: float = 0.5) -> list[tuple[int, Any]]:
        """Finished (index, result) pairs: waits up to `timeout_s` for the first one."""
        out: list[tuple[int, Any]] = []
        try:
            out.append(self._outbox.get(timeout=timeout_s))
            while True:
                out.append(self._outbox.get_nowait())
        except queue.Empty:
            pass
        if not out and self._failure and self._ready.is_set():
            raise RuntimeError(self._failure)
        return out

    @property
    def busy_s(self) -> float:
        """Time with work in flight since the first work arrived (so far): the engine's share of the wall time."""
        if self._started is None:
            return 0.0
        now = time.perf_counter()
        waiting = now - self._idle_since if self._idle_since is not None else 0.0
        return max(0.0, (self._ended or now) - self._started - self._idle_s - waiting)

    def stats(self) -> dict[str, Any]:
        """The worker's time with work in flight, and its engine's own figures where the engine
        keeps some (`stats()`, e.g. the latency engine's time stepping: scripts/bench_engine_busy.py)."""
        out: dict[str, Any] = {"busy_s": round(self.busy_s, 3)}
        engine_stats = getattr(self.engine, "stats", None)
        if callable(engine_stats):
            out["engine"] = engine_stats()
        return out

    def stop(self) -> None:
        """The run is over: finish what is in flight, end the runner thread, close the engine."""
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
        first = self._inbox.get()  # the first submit also says how many to keep in flight
        if first is None:
            return
        self._started = time.perf_counter()
        try:
            for idx, result in self._run_items(self.engine, self._feed(first), self._concurrency):
                self._in_flight -= 1
                self._outbox.put((idx, result))
        except BaseException as exc:  # the engine itself broke: this worker is done
            self._failure = f"worker failed: {type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=3)
        finally:
            self._ended = time.perf_counter()

    def _feed(self, first: list[Any]) -> Iterator[Any]:
        """`first`, then queued items as the runner has room; None ("nothing yet") while work is
        in flight and the inbox is empty; blocks only when nothing is in flight; ends at `stop`."""
        for item in first:
            self._in_flight += 1
            yield item
        while True:
            if self._in_flight == 0:
                self._idle_since = time.perf_counter()
            try:
                batch = self._inbox.get(block=self._idle_since is not None)
            except queue.Empty:
                yield None
                continue
            finally:
                if self._idle_since is not None:
                    self._idle_s += time.perf_counter() - self._idle_since
                    self._idle_since = None
            if batch is None:
                return
            for item in batch:
                self._in_flight += 1
                yield item


def _ray() -> Any:
    """Ray, when this worker runs as an actor (never starting an instance of its own)."""
    import sys

    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def _node_ip() -> str | None:
    try:
        ray = _ray()
        return ray.util.get_node_ip_address() if ray else None
    except Exception:
        return None


def _assigned_resources() -> dict[str, float]:
    try:
        ray = _ray()
        return dict(ray.get_runtime_context().get_assigned_resources()) if ray else {}
    except Exception:
        return {}
