"""The offline audit's own judgement: loopback exactly, and a hook that really records."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netaudit import SITECUSTOMIZE, audit_this_process, is_loopback_host, is_outbound, read_events, run_audited

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "host,loopback",
    [
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("10.0.127.5", False),  # contains "127." but is a private LAN address
        ("2001:db8::1", False),  # ends in "::1" but is a routable IPv6 address
        ("128.0.0.1", False),
        ("0.0.0.0", False),
        ("::", False),
        ("example.org", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_is_decided_by_the_address_not_its_text(host, loopback):
    assert is_loopback_host(host) is loopback


def test_events_are_outbound_unless_loopback_or_local_sockets():
    inet, inet6, unix = int(socket.AF_INET), int(socket.AF_INET6), int(socket.AF_UNIX)
    cases = [
        ({"event": "socket.connect", "family": inet, "address": ["10.0.127.5", 80]}, True),
        ({"event": "socket.connect", "family": inet6, "address": ["2001:db8::1", 80, 0, 0]}, True),
        ({"event": "socket.sendto", "family": inet, "address": ["8.8.8.8", 53]}, True),
        ({"event": "socket.connect", "family": inet, "address": ["127.0.0.1", 8000]}, False),
        ({"event": "socket.connect", "family": inet6, "address": ["::1", 8000, 0, 0]}, False),
        ({"event": "socket.connect", "family": unix, "address": "/tmp/zmq.sock"}, False),
        ({"event": "socket.getaddrinfo", "host": "huggingface.co"}, True),
        ({"event": "socket.getaddrinfo", "host": "10.0.127.5"}, True),
        ({"event": "socket.getaddrinfo", "host": "127.0.0.1"}, False),
        ({"event": "socket.getaddrinfo", "host": None}, False),
    ]
    assert [is_outbound(event) for event, _ in cases] == [want for _, want in cases]


def test_the_hook_records_connects_in_a_fresh_interpreter(tmp_path):
    """A positive control: without it an audit that records nothing would pass every real test."""
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "events.jsonl"
    code = (
        "import socket\n"
        "for fam, host in ((socket.AF_INET, '10.0.127.5'), (socket.AF_INET, '127.0.0.1')):\n"
        "    s = socket.socket(fam, socket.SOCK_DGRAM)\n"
        "    try:\n"
        "        s.connect((host, 9))\n"  # UDP connect sends no packet
        "    except OSError:\n"
        "        pass\n"
        "    s.close()\n"
        "socket.getaddrinfo('127.0.0.1', 9)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LOCALFA_NET_AUDIT": str(log)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60, cwd=tmp_path)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    seen = [(e["event"], e.get("host") or e["address"][0]) for e in events]
    assert seen == [("socket.connect", "10.0.127.5"), ("socket.connect", "127.0.0.1"), ("socket.getaddrinfo", "127.0.0.1")]
    assert [is_outbound(e) for e in events] == [True, False, False]


def _udp_connect(host: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((host, 9))  # UDP connect sends no packet
    except OSError:
        pass
    s.close()


def test_the_in_process_hook_records_inside_its_blocks_only(tmp_path):
    """The positive control of the audit the real sweep runs under (its engine is in the test
    process): a connect inside a block is recorded, one between blocks is not."""
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    with audit_this_process(first):
        _udp_connect("10.0.127.5")
    _udp_connect("10.0.127.6")
    with audit_this_process(second):  # the hook is installed once; a second block reuses it
        _udp_connect("127.0.0.1")
    assert [(e["event"], e["address"][0], e["pid"]) for e in read_events(first)] == [("socket.connect", "10.0.127.5", os.getpid())]
    assert [e["address"][0] for e in read_events(second)] == ["127.0.0.1"]


def test_inspect_opens_no_socket_at_all(tmp_path):
    """The audit end to end on a command that needs no engine: not even a loopback socket."""
    proc, events = run_audited(["inspect", str(REPO / "examples" / "failed_run.json")], tmp_path, timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == "trace:        failed_run"
    assert events == []
