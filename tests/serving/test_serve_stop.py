"""`localfa serve` stops what it started: SIGTERM, SIGHUP and Ctrl-C stop the server and its
workers; if localfa itself is killed, the server goes with it (parent-death signal).

These run the real `localfa serve` command with a fake server in place of vLLM (tests.serving.
fake_server), so the process handling is tested in seconds; tests/serving/test_serve_real.py does
the same against a real `vllm serve`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localfa.serving.launch import free_port
from tests.serving.proctree import alive, descendants
from tests.serving.proctree import children as children_of

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT's default action in the child, as a terminal's Ctrl-C finds it. A runner started in
    the background of a script (`pytest &`) ignores SIGINT and its children inherit that, so
    Python would never raise KeyboardInterrupt there (the SIGINT case then waits out its timeout)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_fake_serve() -> tuple[subprocess.Popen, set[int]]:
    """`localfa serve` over the fake server, healthy; returns it and its process tree."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.serving.fake_server", "serve", "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    line = proc.stdout.readline().strip()  # the URL, printed once healthy
    assert line == f"http://127.0.0.1:{port}", proc.stderr.read() if not line else line
    deadline = time.monotonic() + 30
    tree = descendants(proc.pid)
    while len(tree) < 2 and time.monotonic() < deadline:  # the server and its worker
        time.sleep(0.1)
        tree = descendants(proc.pid)
    assert len(tree) >= 2, tree
    return proc, tree


def wait_gone(pids: set[int], timeout_s: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_stops_the_server_and_its_workers(sig):
    proc, tree = start_fake_serve()
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        assert wait_gone(tree) == set()
        assert "stopping vllm serve" in proc.stderr.read()
    finally:
        for pid in alive(tree | {proc.pid}):
            os.kill(pid, signal.SIGKILL)


def test_the_server_dies_with_localfa_even_on_sigkill():
    proc, tree = start_fake_serve()
    try:
        proc.kill()
        proc.wait(timeout=10)
        assert wait_gone(tree) == set()
    finally:
        for pid in alive(tree):
            os.kill(pid, signal.SIGKILL)


def test_a_server_that_exits_on_its_own_takes_its_workers_with_it():
    proc, tree = start_fake_serve()
    try:
        server = next(p for p in tree if p in children_of(proc.pid))
        os.kill(server, signal.SIGKILL)  # the server dies on its own; its worker is left behind
        assert proc.wait(timeout=20) == 1
        assert wait_gone(tree) == set()
        assert "vllm serve exited with status -9" in proc.stderr.read()
    finally:
        for pid in alive(tree | {proc.pid}):
            os.kill(pid, signal.SIGKILL)
