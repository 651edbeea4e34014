"""A diagnosis or a sweep on a real engine makes no outbound connection (air-gapped users depend on it).

Each command runs in a fresh interpreter under tests/netaudit.py's hook, which also follows any
worker process it spawns; loopback is decided by the address (127.0.0.0/8, ::1), not by its text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.netaudit import outbound, run_audited

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "examples" / "failed_run.json"  # 8 steps
AGENTS = {"human", "Orchestrator", "WebSurfer", "Assistant"}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_no_outbound(proc, events) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outbound(events) == [], f"non-loopback network use: {outbound(events)}"


@pytest.mark.parametrize(
    "engine,method,extra,label",
    [("vllm", "safari", ["--max-turns", "2"], "safari:max_turns=2"), ("transformers", "all-at-once", [], "all-at-once")],
)
def test_diagnose_makes_no_outbound_connection(tmp_path, engine, method, extra, label):
    out = tmp_path / "out.jsonl"
    proc, events = run_audited(
        ["diagnose", str(TRACE), "--engine", engine, "--method", method, *extra, "--out", str(out), "--quiet"], tmp_path
    )
    _assert_no_outbound(proc, events)
    [rec] = _records(out)
    assert (rec["trace"], rec["method"], rec["method_name"], rec["error"], rec["n_steps"]) == ("failed_run", label, method, None, 8)
    assert rec["step"] in range(8) and rec["agent"] in AGENTS


def test_bench_makes_no_outbound_connection(tmp_path):
    run_dir = tmp_path / "run"
    proc, events = run_audited(
        ["bench", str(TRACE), "--engine", "transformers", "--methods", "all-at-once", "--out", str(run_dir), "--no-progress"], tmp_path
    )
    _assert_no_outbound(proc, events)
    [rec] = _records(run_dir / "results.jsonl")
    assert (rec["trace"], rec["method"], rec["error"], rec["seed"], rec["budget"]) == ("failed_run", "all-at-once", None, 0, "none")
    assert rec["step"] in range(8) and rec["agent"] in AGENTS
