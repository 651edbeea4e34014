"""Engine workers on a Ray cluster: `localfa bench ... --ray local|auto|ADDRESS --workers N`.

Ray is the runtime vLLM itself uses across nodes. The driver connects (``local`` starts a
private instance on this machine, bound to loopback; ``auto`` joins the cluster running here; an
address such as ``10.0.0.5:6379`` joins that one), starts N `EngineWorker` actors, each asking
for as many GPUs as the profile's tensor-parallel size (none for CPU engines, which get an
equal share of the cluster's CPUs instead), and hands out whole traces: the least-loaded live
worker gets the next trace while it has fewer than two rounds of `concurrency` units queued.
Records stream back through `poll` as they finish. A worker that dies (process killed, node
lost) gives its unfinished traces back to the queue for the others; the sweep fails only when
no worker is left.

Offline and safe: usage statistics are off (`RAY_USAGE_STATS_ENABLED=0`, set by
`localfa.offline` when localfa is imported, before Ray is), no dashboard is started, a ``local``
instance listens on 127.0.0.1 only, and every connection uses Ray's token authentication
(`RAY_AUTH_MODE=token`; a local instance makes its own token, a cluster's hosts share one).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterator

from localfa import offline
from localfa.cluster.plan import Unit
from localfa.cluster.worker import EngineWorker, WorkItem
from localfa.errors import LocatedError
from localfa.results import ResultRecord

SESSION_MARKER = ".ray-local-session"  # in RUN_DIR: the session dir of the run's own local instance
POLL_S = 0.5  # how long one `poll` waits in the worker for the first finished record
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ClusterError(LocatedError):
    """The cluster cannot run the sweep (no Ray, no worker left); str = "where: message"."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def import_ray() -> Any:
    """Ray, imported only after the offline and authentication switches are set."""
    offline.enforce()
    os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray", 'Ray is not installed: pip install -e ".[ray]"') from None
    return ray


def connect(address: str, num_cpus: int | None = None) -> dict[str, Any]:
    """Connect this process to Ray (see module doc); return what the manifest records."""
    if address == "local":
        # Ray binds its servers to the node address it picks; with cluster mode off that is
        # loopback, so nothing of a private instance listens on another interface.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        # Ray's memory monitor kills workers when the whole machine is short of memory, whoever
        # uses it; on a shared workstation that kills our engines for others' use. The kernel's
        # OOM killer still protects the machine.
        os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    ray = import_ray()
    if ray.is_initialized():
        ray.shutdown()
    kwargs: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.WARNING)
    if address == "local":
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False  # in case Ray was imported before the variable was set
        ctx = ray.init(address="local", include_dashboard=False, num_cpus=num_cpus, **kwargs)
        ip = ctx.address_info.get("node_ip_address")
        if ip not in LOOPBACK:
            ray.shutdown()
            raise ClusterError("--ray local", f"the local Ray instance bound {ip}, not loopback; refusing to run")
    else:
        ctx = ray.init(address=address, **kwargs)
    return {
        "session_dir": ctx.address_info.get("session_dir"),
        "ray_version": ray.__version__,
        "address": "local" if address == "local" else ctx.address_info.get("gcs_address"),
        "auth_mode": os.environ.get("RAY_AUTH_MODE"),
    }


def reap_session(session_dir: str) -> list[int]:
    """Stop this user's orphaned processes of a local Ray session (their parent, the driver, was killed).

    A driver killed with SIGKILL cannot stop its local instance; Ray's workers and servers follow
    it, but two agents stay. They are found by the files they hold open in the session folder.
    """
    import signal

    if not session_dir or not session_dir.startswith("/"):
        return []
    reaped = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if proc.stat().st_uid != os.getuid() or _ppid(proc) != 1:
                continue
            if any(os.readlink(fd).startswith(session_dir + "/") for fd in (proc / "fd").iterdir()):
                os.kill(int(proc.name), signal.SIGTERM)
                reaped.append(int(proc.name))
        except OSError:
            continue
    return reaped


def _ppid(proc: Path) -> int:
    stat = (proc / "stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def worker_resources(engine_options: dict[str, Any], cluster: dict[str, float], workers: int) -> dict[str, float]:
    """Ray resources one engine worker asks for (see module doc)."""
    from localfa.engine.factory import EngineOptions, chosen_backend, engine_class

    opts = EngineOptions(**engine_options)
    backend = engine_class(chosen_backend(opts))
    if not backend.computes_locally:
        return {"num_cpus": 0}  # waits on a script or on HTTP servers: no cores of its own
    if backend.uses_gpus and cluster.get("GPU", 0) > 0:
        return {"num_gpus": opts.settings().tensor_parallel_size, "num_cpus": 1}
    return {"num_cpus": max(1, int(cluster.get("CPU", 1) // max(1, workers)))}


class RayExecutor:
    """N engine workers on a Ray cluster, fed whole traces (an `Executor` for `run_units_sweep`)."""

    def __init__(
        self, address: str, workers: int, engine_options: dict[str, Any], say: Callable[[str], None] = _say, start_timeout_s: float = 3600.0
    ) -> None:
        if workers < 1:
            raise ClusterError("--workers", f"must be at least 1, got {workers}")
        self.address = address
        self.workers = workers
        self.engine_options = dict(engine_options)
        self.say = say
        self.start_timeout_s = start_timeout_s
        self.engine: Any = None
        self.actors: list[Any] = []
        self.infos: list[dict[str, Any]] = []
        self.cluster: dict[str, Any] = {}
        self.timing: dict[str, float] = {}
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
        resources = worker_resources(self.engine_options, ray.cluster_resources(), self.workers)
        env = {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}  # engines sharing a node: OS-scheduled, OMP_NUM_THREADS = their CPUs
        actor_cls = ray.remote(EngineWorker).options(max_concurrency=4, max_restarts=0, **resources)
        self.actors = [actor_cls.remote(self.engine_options, env) for _ in range(self.workers)]
        refs = [a.info.remote(self.start_timeout_s) for a in self.actors]
        live, infos = [], []
        for actor, ref in zip(self.actors, refs):
            try:
                infos.append(ray.get(ref))
                live.append(actor)
            except Exception as exc:
                self.say(f"localfa: a worker did not start: {_first_line(exc)}")
                _kill(ray, actor)
        if not live:
            raise ClusterError("--ray " + self.address, "no engine worker started (see the messages above)")
        self.actors, self.infos = live, infos
        self.engine = _EngineView(infos[0]["engine"], infos[0]["model"])
        self.timing = {"ray_start_s": round(t1 - t0, 3), "workers_start_s": round(time.perf_counter() - t1, 3)}
        self.cluster.update(
            workers=len(live),
            requested_workers=self.workers,
            resources_each=resources,
            nodes=sorted({i.get("node_ip") or i.get("host") for i in infos}),
            worker_hosts=[{"host": i["host"], "pid": i["pid"], "resources": i["resources"]} for i in infos],
        )
        for n, i in enumerate(infos):
            self.say(f"localfa: worker {n + 1} ready on {i['host']} (pid {i['pid']}, {i['resources']})")

    def describe(self) -> dict[str, Any] | None:
        return dict(self.cluster)

    # ---- run ------------------------------------------------------------------------------
    def run(self, todo: list[Unit], concurrency: int) -> Iterator[tuple[int, ResultRecord]]:
        """Hand whole traces to the least-loaded live worker; yield records as they arrive.

        `concurrency` is each worker's (every worker runs its own `run_jobs`); a worker is given
        traces while it holds fewer than 2 x `concurrency` unfinished units.
        """
        ray = self._ray
        pending: deque[list[WorkItem]] = deque(_by_trace(todo))
        load: dict[int, dict[int, str]] = {w: {} for w in range(len(self.actors))}  # worker -> its unit indices
        live = set(load)
        polls: dict[Any, int] = {}
        done: set[int] = set()
        cap = 2 * concurrency
        self.wait_s = 0.0
        loop_started = time.perf_counter()
        while len(done) < len(todo):
            if not live:
                raise ClusterError(
                    "--ray " + self.address, "every engine worker died; finished records are kept, run the same command again to resume"
                )
            while pending:
                w = min(live, key=lambda k: len(load[k]))
                if load[w] and len(load[w]) >= cap:
                    break
                group = pending.popleft()
                self.actors[w].submit.remote(group, concurrency)
                load[w].update({idx: u.trace.id for idx, u in group})
            for w in live - set(polls.values()):
                polls[self.actors[w].poll.remote(POLL_S)] = w
            waited = time.perf_counter()
            ready, _ = ray.wait(list(polls), num_returns=1)
            self.wait_s += time.perf_counter() - waited
            for ref in ready:
                w = polls.pop(ref)
                try:
                    items = ray.get(ref)
                except Exception as exc:  # the actor died, or its engine broke
                    live.discard(w)
                    lost = [(idx, todo[idx]) for idx in load[w] if idx not in done]
                    load[w] = {}
                    pending.extendleft(reversed(_by_trace_items(lost)))
                    self.say(
                        f"localfa: worker {w + 1} lost ({_first_line(exc)}); its {len(lost)} unfinished units "
                        f"({len({u.trace.id for _, u in lost})} traces) go back to the queue"
                    )
                    _kill(ray, self.actors[w])
                    continue
                for idx, rec in items:
                    load[w].pop(idx, None)
                    if idx not in done:
                        done.add(idx)
                        yield idx, rec
        self.loop_s = time.perf_counter() - loop_started
        self.busy_s = [float(ray.get(self.actors[w].stats.remote(), timeout=60)["busy_s"]) for w in sorted(live)]

    def worker_stats(self) -> list[dict[str, float]]:
        """Each live worker's engine time (busy_s)."""
        out = []
        for a in self.actors:
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


def _by_trace(todo: list[Unit]) -> list[list[WorkItem]]:
    return _by_trace_items(list(enumerate(todo)))


def _by_trace_items(items: list[WorkItem]) -> list[list[WorkItem]]:
    """Consecutive groups of one trace's units, in plan order (a trace's units stay together)."""
    groups: dict[str, list[WorkItem]] = {}
    for idx, unit in sorted(items, key=lambda x: x[0]):
        groups.setdefault(unit.trace.id, []).append((idx, unit))
    return list(groups.values())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"
