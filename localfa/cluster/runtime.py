"""Ray itself: connecting to a cluster, what one engine worker asks for, cleaning up after a kill.

Ray is the runtime vLLM itself uses across nodes. ``local`` starts a private instance on this
machine, bound to loopback; ``auto`` joins the cluster running here; an address such as
``10.0.0.5:6379`` joins that one. Each engine worker asks for as many GPUs as the profile's
tensor-parallel size (none for CPU engines, which get an equal share of the cluster's CPUs
instead). The sweep's scheduling lives with the other executors (`localfa.bench.ray_executor`).

Offline and safe: usage statistics are off (`RAY_USAGE_STATS_ENABLED=0`, set by
`localfa.offline` when localfa is imported, before Ray is), no dashboard is started, a ``local``
instance listens on 127.0.0.1 only, and every connection uses Ray's token authentication
(`RAY_AUTH_MODE=token`; a local instance makes its own token, a cluster's hosts share one).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from localfa import offline
from localfa.errors import LocatedError

SESSION_MARKER = ".ray-local-session"  # in RUN_DIR: the session dir of the run's own local instance
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ClusterError(LocatedError):
    """The cluster cannot run the sweep (no Ray, no worker left); str = "where: message"."""


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
        _no_api_server()
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


def _no_api_server() -> None:
    """Start a local instance without Ray's dashboard process.

    With the dashboard off, Ray 2.60 still starts that process with one module, usage statistics,
    which asks the cloud metadata servers which cloud it runs on (169.254.169.254,
    metadata.google.internal: outbound traffic and a DNS query) even when usage statistics are
    off. A private instance needs no API server, so none is started (found by the network audit
    of tests/cluster/test_cluster_real.py).
    """
    from ray._private import services

    if getattr(services.start_api_server, "localfa_patched", False):
        return
    original = services.start_api_server

    def start_api_server(include_dashboard: Any, *args: Any, **kwargs: Any) -> Any:
        if include_dashboard:
            return original(include_dashboard, *args, **kwargs)
        return None, None  # no URL, no process

    start_api_server.localfa_patched = True  # type: ignore[attr-defined]
    services.start_api_server = start_api_server


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


def shortfall(resources: dict[str, float], workers: int, total: dict[str, float], free: dict[str, float]) -> str | None:
    """What the cluster lacks to place `workers` workers asking `resources` each, or None.

    E.g. ``--workers 16 need 16 GPUs (1 each); the cluster has 12 GPUs (12 free)``: said at
    once, instead of Ray waiting forever for GPUs that are not there.
    """
    names = {"num_gpus": "GPU", "num_cpus": "CPU"}
    lacks = []
    for option, name in names.items():
        each = float(resources.get(option, 0) or 0)
        need = each * workers
        have = float(total.get(name, 0) or 0)
        if need > have:
            lacks.append(
                f"--workers {workers} need {need:g} {name}s ({each:g} each); the cluster has {have:g} {name}s "
                f"({float(free.get(name, 0) or 0):g} free)"
            )
    return "; ".join(lacks) or None


PATH_OPTIONS = ("model", "profile", "cache_dir")


def resolve_paths(engine_options: dict[str, Any]) -> dict[str, Any]:
    """The engine options with relative paths made absolute, as workers on other hosts (or with
    another working folder) need them: the model folder or file, a profile given as a file, the
    cache folder. Names (a profile name, a hub id the engine refuses) are left as they are."""
    out = dict(engine_options)
    for key in PATH_OPTIONS:
        value = out.get(key)
        if isinstance(value, str) and value and (key == "cache_dir" or Path(value).expanduser().exists()):
            out[key] = str(Path(value).expanduser().resolve())
    return out
