"""Network audit for the offline tests: record every socket use of a command, and judge it.

Every Python process the command starts (vLLM may spawn workers) imports `sitecustomize` from the
folder put first on PYTHONPATH, which installs an audit hook that appends each network event, as
one JSON line, to the file named by LOCALFA_NET_AUDIT. Loopback means 127.0.0.0/8 and ::1 only,
decided by `ipaddress`, never by a prefix of the text (10.0.127.5 is not loopback).
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests.loopback import loopback_only

SITECUSTOMIZE = """
import json, os, socket, sys

_PATH = os.environ.get("LOCALFA_NET_AUDIT")


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, type(None))) else repr(value)


def _write(record):
    record["pid"] = os.getpid()
    with open(_PATH, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\\n")


def _hook(event, args):
    if not _PATH:  # an in-process audit between its blocks (audit_this_process)
        return
    if event in ("socket.connect", "socket.sendto"):
        sock, address = args[0], args[-1]
        _write({"event": event, "family": int(sock.family), "address": _plain(address)})
    elif event == "socket.getaddrinfo":
        _write({"event": event, "host": _plain(args[0])})


if _PATH:
    sys.addaudithook(_hook)
"""


# The switches `localfa.offline` is meant to set, written out here so that the command under audit
# starts without them, as on a user's machine: inherited from the test process (which imported
# localfa already), they would hide a command that no longer sets them itself.
OFFLINE_SWITCHES = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "VLLM_NO_USAGE_STATS",
    "VLLM_DO_NOT_TRACK",
    "DO_NOT_TRACK",
    "RAY_USAGE_STATS_ENABLED",
    "RAY_AUTH_MODE",
    "VLLM_HOST_IP",
)


def is_loopback_host(host: str | None) -> bool:
    """True only for an IP literal in 127.0.0.0/8 or ::1 (a scope suffix like %lo allowed)."""
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_outbound(event: dict[str, Any]) -> bool:
    """Whether one recorded event can leave the machine.

    Unix-domain and netlink sockets never do; an IP connect/sendto does unless its address is
    loopback; a name look-up does unless it is of nothing (a passive bind) or of a loopback
    literal: any host name is a resolver query.
    """
    if event["event"] == "socket.getaddrinfo":
        return event["host"] not in (None, "") and not is_loopback_host(event["host"])
    if event["family"] not in (socket.AF_INET, socket.AF_INET6):
        return False
    return not is_loopback_host(event["address"][0])


def outbound(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if is_outbound(e)]


# With `run_audited(..., record_processes=True)`, every Python process that loaded the hook appends
# its pid to LOCALFA_NET_AUDIT + ".pids": a check that the audit reached processes the command
# started elsewhere (Ray workers), even ones that made no Python-level socket call.
PROCESS_MARKER = """
if _PATH and os.environ.get("LOCALFA_NET_AUDIT_PIDS"):
    with open(_PATH + ".pids", "a", encoding="utf-8") as _fh:
        _fh.write(str(os.getpid()) + "\\n")
"""


def audited_pids(workdir: Path) -> set[int]:
    """The pids that loaded the hook in `run_audited(..., record_processes=True)`."""
    path = workdir / "net_events.jsonl.pids"
    return {int(x) for x in path.read_text().split()} if path.exists() else set()


def audited_env(workdir: Path, record_processes: bool = False) -> tuple[dict[str, str], Path]:
    """The environment that puts every Python process started with it under the audit (without the
    offline switches, as on a user's machine), and the file its events go to."""
    hook_dir = workdir / "audit_site"
    hook_dir.mkdir(parents=True, exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE + (PROCESS_MARKER if record_processes else ""))
    log = workdir / "net_events.jsonl"
    repo = Path(__file__).resolve().parents[1]
    path = os.pathsep.join(p for p in (str(hook_dir), str(repo), os.environ.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_SWITCHES}
    env.update(PYTHONPATH=path, LOCALFA_NET_AUDIT=str(log))
    if record_processes:
        env["LOCALFA_NET_AUDIT_PIDS"] = "1"
    return env, log


def read_events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def run_audited(
    args: list[str], workdir: Path, timeout_s: int = 600, record_processes: bool = False, loopback: bool = False
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run `python -m localfa ARGS` under the audit (`run_command_audited`)."""
    return run_command_audited([sys.executable, "-m", "localfa", *args], workdir, timeout_s, record_processes, loopback)


def run_command_audited(
    cmd: list[str], workdir: Path, timeout_s: int = 600, record_processes: bool = False, loopback: bool = False, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run `cmd` under the audit (its files in `workdir`), without the offline switches in its
    starting environment; return the process and every event seen. With `loopback`, as on an
    air-gapped host: only loopback up, no route out (tests/loopback.py), where this host allows it."""
    env, log = audited_env(workdir, record_processes)
    proc = subprocess.run(
        loopback_only(cmd) if loopback else cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd or workdir, env=env
    )
    return proc, read_events(log)


_IN_PROCESS: dict[str, Any] = {}  # the hook's module namespace, once installed in this process


@contextmanager
def audit_this_process(log: Path) -> Iterator[None]:
    """Record this process's network events in `log` while the block runs: the same hook, for an
    engine that runs in the test process (vLLM with multiprocessing off, as localfa starts it).
    An audit hook cannot be removed, so it is installed once and writes only inside such a block."""
    if not _IN_PROCESS:
        assert "LOCALFA_NET_AUDIT" not in os.environ, "this process is audited already"
        namespace: dict[str, Any] = {"__name__": "localfa_net_audit"}
        exec(SITECUSTOMIZE, namespace)  # LOCALFA_NET_AUDIT is unset here: nothing is installed yet
        sys.addaudithook(namespace["_hook"])
        _IN_PROCESS.update(namespace=namespace)
    namespace = _IN_PROCESS["namespace"]
    namespace["_PATH"] = str(log)
    try:
        yield
    finally:
        namespace["_PATH"] = None
