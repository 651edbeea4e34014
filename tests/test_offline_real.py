"""A diagnosis or a sweep on a real engine makes no outbound connection (air-gapped users depend on it).

Each command runs in a fresh interpreter under tests/netaudit.py's hook, which also follows any
worker process it spawns; loopback is decided by the address (127.0.0.0/8, ::1), not by its text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.netaudit import audited_pids, outbound, run_audited

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "examples" / "failed_run.json"  # 8 steps
AGENTS = {"human", "Orchestrator", "WebSurfer", "Assistant"}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_no_outbound(proc, events) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outbound(events) == [], f"non-loopback network use: {outbound(events)}"


def test_diagnose_on_transformers_makes_no_outbound_connection(tmp_path):
    """Also as on an air-gapped host with no default route, where this host allows a namespace."""
    out = tmp_path / "out.jsonl"
    args = ["diagnose", str(TRACE), "--engine", "transformers", "--method", "all-at-once", "--out", str(out), "--quiet"]
    proc, events = run_audited(args, tmp_path, record_processes=True, loopback=True)
    _assert_no_outbound(proc, events)
    assert audited_pids(tmp_path), "the audit hook was loaded by no process: it did not run"
    [rec] = _records(out)
    assert (rec["trace"], rec["method"], rec["method_name"], rec["error"], rec["n_steps"]) == (
        "failed_run",
        "all-at-once",
        "all-at-once",
        None,
        8,
    )
    assert rec["step"] in range(8) and rec["agent"] in AGENTS


def test_a_vllm_sweep_of_every_method_makes_no_outbound_connection(real_sweep):
    """The shared real sweep (tests/realsweep.py) ran under the same hook, in the test process
    where its engine runs (vLLM with multiprocessing off): every method and the engine. That the
    hook records there is tests/test_netaudit.py's positive control."""
    assert real_sweep.outbound() == [], f"non-loopback network use: {real_sweep.outbound()}"
