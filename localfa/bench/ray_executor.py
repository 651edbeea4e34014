"""The Ray executor: `localfa bench ... --ray local|auto|ADDRESS --workers N`.

It starts N engine workers (`localfa.cluster.worker.EngineWorker` actors, each running
`units.run_units` on its own engine) and hands out whole traces: the least-loaded live worker
gets the next trace while it holds fewer than `concurrency` units plus a small reserve (a quarter
of `concurrency`, at least 2); a worker takes new units while its others run, so its engine never
drains between the driver's rounds, and the traces still queued go to whichever worker frees a
place first, so no worker is left with the sweep's slow tail while the others stand idle. Records
stream back through `poll` as they finish.

Nothing waits forever: workers the cluster cannot hold are refused at once, naming what is
missing (``--workers 16 need 16 GPUs (1 each); the cluster has 12 GPUs``); workers not placed
within `place_timeout_s`, engines not up within `start_timeout_s` and a worker that stops
answering are named in the error. Workers that disagree on the model fingerprint, the window or
the engine version are refused before any unit runs.

A worker that dies (process killed, node lost) gives its unfinished units back: each gets a
strike and runs again alone on a worker that holds nothing else, so a second death names the
unit that caused it. A unit that two workers died running is recorded as that unit's (final)
error and never queued again; the sweep fails only when no worker is left.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterator

from localfa.bench.units import Unit, WorkItem, error_record, run_units
from localfa.cluster.runtime import (
    SESSION_MARKER,
    ClusterError,
    connect,
    import_ray,
    reap_session,
    resolve_paths,
    shortfall,
    worker_resources,
)
from localfa.cluster.worker import EngineWorker
from localfa.results import ResultRecord
from localfa.traces.model import Trace

POLL_S = 0.5  # how long one `poll` waits in the worker for the first finished record
MAX_STRIKES = 2  # workers a unit may take down with it before it is recorded as an error


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class RayExecutor:
    """N engine workers on a Ray cluster, fed whole traces (an `Executor` for `run_units_sweep`)."""

    def __init__(
        self,
        address: str,
        workers: int,
        engine_options: dict[str, Any],
        say: Callable[[str], None] = _say,
        start_timeout_s: float = 3600.0,
        place_timeout_s: float = 600.0,
        silent_timeout_s: float = 600.0,
    ) -> None:
        if workers < 1:
            raise ClusterError("--workers", f"must be at least 1, got {workers}")
        self.address = address
        self.workers = workers
        self.engine_options = resolve_paths(engine_options)  # workers elsewhere need absolute paths
        self.say = say
        self.start_timeout_s = start_timeout_s
        self.place_timeout_s = place_timeout_s
        self.silent_timeout_s = silent_timeout_s
        self.engine: Any = None
        self.actors: list[Any] = []
        self.infos: list[dict[str, Any]] = []
        self.cluster: dict[str, Any] = {}
        self.timing: dict[str, float] = {}
        self.busy_s: list[float] = []
        self.loop_s = self.wait_s = 0.0
        self._ray: Any = None

    # ---- start ----------------------------------------------------------------------------
    def start(self, run_dir: Path | None = None) -> None:
        t0 = time.perf_counter()
        marker = run_dir / SESSION_MARKER if run_dir is not None and self.address == "local" else None
        if marker is not None and marker.exists():
            reaped = reap_session(marker.read_text().strip())
            if reaped:
                self.say(f"localfa: stopped {len(reaped)} processes left by a killed earlier run's local Ray instance")
        self.cluster = connect(self.address, num_cpus=(os.cpu_count() or 1) if self.address == "local" else None)
        ray = self._ray = import_ray()
        if marker is not None:
            marker.write_text(self.cluster.pop("session_dir", "") + "\n")
        t1 = time.perf_counter()
        total = ray.cluster_resources()
        resources = worker_resources(self.engine_options, total, self.workers)
        lacking = shortfall(resources, self.workers, total, ray.available_resources())
        if lacking:
            raise ClusterError("--workers", lacking)
        env = {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}  # engines sharing a node: OS-scheduled, OMP_NUM_THREADS = their CPUs
        actor_cls = ray.remote(EngineWorker).options(max_concurrency=4, max_restarts=0, **resources)
        self.actors = [actor_cls.remote(self.engine_options, run_units, env) for _ in range(self.workers)]
        self._wait_placed(resources)
        live, infos = self._wait_engines()
        self.actors, self.infos = live, infos
        check_same_model(infos)
        self.engine = _EngineView(infos[0]["engine"], infos[0]["model"])
        self.timing = {"ray_start_s": round(t1 - t0, 3), "workers_start_s": round(time.perf_counter() - t1, 3)}
        self.cluster.update(
            workers=len(live),
            requested_workers=self.workers,
            resources_each=resources,
            nodes=sorted({str(i.get("node_ip") or i.get("host")) for i in infos}),
            worker_hosts=[{"host": i["host"], "pid": i["pid"], "resources": i["resources"]} for i in infos],
        )
        for n, i in enumerate(infos):
            self.say(f"localfa: worker {n + 1} ready on {i['host']} (pid {i['pid']}, {i['resources']})")

    def _wait_placed(self, resources: dict[str, float]) -> None:
        """Every worker's process is running, or a ClusterError naming how many are not and why."""
        ray = self._ray
        pings = [a.ping.remote() for a in self.actors]
        ready, waiting = ray.wait(pings, num_returns=len(pings), timeout=self.place_timeout_s)
        if waiting:
            raise ClusterError(
                "--workers",
                f"{len(waiting)} of {self.workers} engine workers could not be placed within {self.place_timeout_s:.0f} s: "
                f"each asks for {resources}; the cluster has {_free(ray.available_resources())} free of "
                f"{_free(ray.cluster_resources())}; use fewer --workers or free those resources",
            )

    def _wait_engines(self) -> tuple[list[Any], list[dict[str, Any]]]:
        """The workers whose engine started (each waited for at most `start_timeout_s`)."""
        ray = self._ray
        refs = [a.info.remote(self.start_timeout_s) for a in self.actors]
        live, infos = [], []
        for actor, ref in zip(self.actors, refs):
            try:
                infos.append(ray.get(ref, timeout=self.start_timeout_s + 60))
                live.append(actor)
            except Exception as exc:
                self.say(f"localfa: a worker did not start: {_first_line(exc)}")
                _kill(ray, actor)
        if not live:
            raise ClusterError("--ray " + self.address, "no engine worker started (see the messages above)")
        return live, infos

    def describe(self) -> dict[str, Any] | None:
        return dict(self.cluster)

    # ---- run ------------------------------------------------------------------------------
    def run(self, todo: list[Unit], concurrency: int) -> Iterator[tuple[int, ResultRecord]]:
        """Hand out whole traces (suspects alone, see the module doc); yield records as they arrive.

        `concurrency` is each worker's (every worker runs its own `run_units`); a worker is given
        traces while it holds fewer than `held_cap(concurrency)` unfinished units.
        """
        ray = self._ray
        pending: deque[list[WorkItem]] = deque(_by_trace(list(enumerate(todo))))
        suspects: deque[WorkItem] = deque()  # units a dead worker held: each runs alone
        strikes: dict[int, int] = {}
        load: dict[int, dict[int, str]] = {w: {} for w in range(len(self.actors))}  # worker -> its unit indices
        alone: set[int] = set()  # workers running one suspect unit
        live = set(load)
        polls: dict[Any, tuple[int, float]] = {}  # poll ref -> (worker, when sent)
        done: set[int] = set()
        cap = held_cap(concurrency)
        loop_started = time.perf_counter()
        while len(done) < len(todo):
            if not live:
                raise ClusterError(
                    "--ray " + self.address, "every engine worker died; finished records are kept, run the same command again to resume"
                )
            self._dispatch(pending, suspects, load, alone, live, cap, concurrency)
            now = time.perf_counter()
            for w in live - {w for w, _ in polls.values()}:
                polls[self.actors[w].poll.remote(POLL_S)] = (w, now)
            waited = time.perf_counter()
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=POLL_S * 20)
            self.wait_s += time.perf_counter() - waited
            silent = [ref for ref, (_, sent) in polls.items() if ref not in ready and time.perf_counter() - sent > self.silent_timeout_s]
            for ref in [*ready, *silent]:
                w, _ = polls.pop(ref)
                try:
                    if ref in silent:
                        raise TimeoutError(f"no answer for {self.silent_timeout_s:.0f} s")
                    items = ray.get(ref)
                except Exception as exc:  # the actor died, its engine broke, or it hangs
                    live.discard(w)
                    alone.discard(w)
                    lost = [(idx, todo[idx]) for idx in load[w] if idx not in done]
                    load[w] = {}
                    _kill(ray, self.actors[w])
                    again = []
                    for idx, unit in lost:
                        strikes[idx] = strikes.get(idx, 0) + 1
                        if strikes[idx] >= MAX_STRIKES:
                            done.add(idx)
                            yield idx, error_record(unit, _poison_message(strikes[idx], exc))
                        else:
                            again.append((idx, unit))
                    suspects.extend(again)
                    self.say(
                        f"localfa: worker {w + 1} lost ({_first_line(exc)}); {len(again)} of its unfinished units go back "
                        f"to the queue, each to run alone; {len(lost) - len(again)} recorded as errors (two workers died running them)"
                    )
                    continue
                for idx, rec in items:
                    load[w].pop(idx, None)
                    if not load[w]:
                        alone.discard(w)
                    if idx not in done:
                        done.add(idx)
                        yield idx, rec
        self.loop_s = time.perf_counter() - loop_started
        self.busy_s = [float(s["busy_s"]) for s in self.worker_stats([self.actors[w] for w in sorted(live)])]

    def _dispatch(
        self,
        pending: deque[list[WorkItem]],
        suspects: deque[WorkItem],
        load: dict[int, dict[int, str]],
        alone: set[int],
        live: set[int],
        cap: int,
        concurrency: int,
    ) -> None:
        """Give suspects to idle workers (alone), then whole traces to the least-loaded others.

        While suspects wait for an idle worker, no new trace is handed out, so one drains.
        """
        while suspects:
            idle = sorted(w for w in live if not load[w])
            if not idle:
                return
            idx, unit = suspects.popleft()
            self._submit(idle[0], [(idx, unit)], load, concurrency)
            alone.add(idle[0])
        while pending:
            open_ = live - alone
            if not open_:
                return
            w = min(open_, key=lambda k: len(load[k]))
            if load[w] and len(load[w]) >= cap:
                return
            self._submit(w, pending.popleft(), load, concurrency)

    def _submit(self, w: int, group: list[WorkItem], load: dict[int, dict[int, str]], concurrency: int) -> None:
        self.actors[w].submit.remote(group, concurrency)
        load[w].update({idx: u.trace.id for idx, u in group})

    def worker_stats(self, actors: list[Any] | None = None) -> list[dict[str, float]]:
        """Each (live) worker's engine time (busy_s); a worker that does not answer is left out."""
        out = []
        for a in self.actors if actors is None else actors:
            try:
                out.append(self._ray.get(a.stats.remote(), timeout=30))
            except Exception:
                continue
        return out

    # ---- stop -----------------------------------------------------------------------------
    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        try:
            stops = [a.stop.remote() for a in self.actors]
            ray.wait(stops, num_returns=len(stops), timeout=60)
        except Exception:
            pass
        for a in self.actors:
            _kill(ray, a)
        self.actors = []
        ray.shutdown()
        self._ray = None


IDENTITY = ("model", "window", "backend", "engine_version", "dtype", "structured_outputs")


def worker_identity(info: dict[str, Any]) -> dict[str, Any]:
    """What must be the same on every worker for their answers to belong in one run."""
    engine = info.get("engine") or {}
    args = engine.get("engine_args") or {}
    structured = args.get("structured_outputs_config") or {}
    return {
        "model": (info.get("model") or {}).get("sha256"),
        "window": info.get("max_model_len") or engine.get("max_model_len"),
        "backend": engine.get("backend"),
        "engine_version": engine.get("vllm_version") or engine.get("version"),
        "dtype": args.get("dtype"),
        "structured_outputs": structured.get("backend") if isinstance(structured, dict) else structured,
    }


def check_same_model(infos: list[dict[str, Any]]) -> None:
    """Refuse workers that serve different models, windows or engine versions (named, per worker)."""
    ids = [worker_identity(i) for i in infos]
    differ = [k for k in IDENTITY if len({repr(x[k]) for x in ids}) > 1]
    if not differ:
        return
    seen: dict[str, list[int]] = {}
    for n, x in enumerate(ids):
        seen.setdefault(repr([x[k] for k in differ]), []).append(n)
    groups = []
    for members in seen.values():
        what = ", ".join(f"{k}={ids[members[0]][k]}" for k in differ)
        hosts = sorted({str(infos[m].get("host")) for m in members})
        groups.append(f"workers {', '.join(str(m + 1) for m in members)} on {', '.join(hosts)}: {what}")
    raise ClusterError(
        "--ray",
        f"the engine workers differ in {', '.join(differ)} ({'; '.join(groups)}); "
        "every host needs the same model folder, profile and localfa/vLLM install",
    )


class _EngineView:
    """What the manifest needs from an engine that runs on the workers."""

    def __init__(self, described: dict[str, Any], model_info: dict[str, Any] | None) -> None:
        self._described = described
        self.model_info = model_info

    def describe(self) -> dict[str, Any]:
        return dict(self._described)


def _kill(ray: Any, actor: Any) -> None:
    try:
        ray.kill(actor)
    except Exception:
        pass


def _free(resources: dict[str, float]) -> str:
    return ", ".join(f"{resources[k]:g} {k}" for k in ("GPU", "CPU") if k in resources) or "nothing"


def held_cap(concurrency: int) -> int:
    """Units a worker may hold: its `concurrency` running plus a reserve it starts while the
    driver's next trace is on its way. Twice `concurrency` handed a 60-trace sweep out at once
    to 2 workers, and the one with the heavier traces ran alone at the end."""
    return concurrency + max(2, concurrency // 4)


def _by_trace(items: list[WorkItem]) -> list[list[WorkItem]]:
    """Groups of one trace's units (a trace's units stay together), the heaviest first.

    A unit's work grows with its trace's text, and a sweep's traces differ by 10x and more:
    handed out in plan order, the long traces of a subset listed last piled onto whichever worker
    freed places at the end, and the others stood idle (a 2-worker FALAT sweep ran one engine 9 s
    of 19 alone). Heaviest first, the last traces handed out are the short ones, and they even
    the workers out. Ties keep plan order."""
    groups: dict[str, list[WorkItem]] = {}
    for idx, unit in sorted(items, key=lambda x: x[0]):
        groups.setdefault(unit.trace.id, []).append((idx, unit))
    return sorted(groups.values(), key=lambda g: -len(g) * _trace_chars(g[0][1].trace))


def _trace_chars(trace: Trace) -> int:
    """What the steps say, in characters: the weight of a unit on that trace."""
    return sum(len(s.content or "") + len(s.observation or "") for s in trace.steps)


def _poison_message(deaths: int, exc: BaseException) -> str:
    return (
        f"WorkerLostError: {deaths} engine workers died while running this unit (the last: {_first_line(exc)}); "
        "it is not run again in this sweep (--retry-errors runs it again)"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"
