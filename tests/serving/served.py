"""The session's one real server: `localfa serve` (vLLM's API server of the embedded model behind
localfa's API-key guard), started once by the `served` fixture in tests/conftest.py. Its own
tests (tests/serving/test_serve_real.py) check the guard and the process tree; the other
real-server tests reach it through `vllm_server`, with the key in LOCALFA_API_KEY."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from localfa.serving.launch import free_port
from tests.serving.proctree import alive, descendants

REPO = Path(__file__).resolve().parents[2]
SERVE_KEY = "k-7d2e90b4-test-only"
# The test that stops the server runs last of the server's users (tests/conftest.py orders them).
STOPS_THE_SERVER = "tests/serving/test_serve_real.py::test_sigterm_to_localfa_serve_leaves_no_process_of_its_tree"


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    tree: set[int]  # its process tree once healthy


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            return proc.stdout.readline().strip()
    return ""


@dataclass
class Launch:
    """`localfa serve` started, not yet up: it loads beside whatever runs until it is awaited."""

    proc: subprocess.Popen
    port: int
    log: Path


def launch_served(log: Path) -> Launch:
    """Start `localfa serve` with the key in its environment; return at once."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "localfa", "serve", "--port", str(port), "--log", str(log)],
        cwd=REPO,
        env={**os.environ, "LOCALFA_API_KEY": SERVE_KEY},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    return Launch(proc, port, log)


def await_served(launch: Launch, timeout_s: float = 420) -> Served:
    """Wait until the launched server says its URL; kill it and raise with the log if it never does."""
    proc, log = launch.proc, launch.log
    url = _read_line(proc, timeout_s)
    if url != f"http://127.0.0.1:{launch.port}":
        proc.kill()
        raise RuntimeError(f"localfa serve did not come up ({url!r}); log: {log.read_text()[-2000:] if log.exists() else ''}")
    return Served(proc, url, descendants(proc.pid))


def kill_served(proc: subprocess.Popen, known: Iterable[int] = ()) -> None:
    """SIGKILL what is left of a server: `known` (its tree once up) and what descends from it now."""
    for pid in alive(set(known) | descendants(proc.pid) | {proc.pid}):
        os.kill(pid, signal.SIGKILL)
