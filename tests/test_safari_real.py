"""SAFARI end to end on the REAL embedded model (vLLM CPU build) through `localfa diagnose`.

The 135M model cannot find real faults; what must hold is that the machinery is real: every turn
parses under the grammar, the answer is a step of the trace, and a fixed seed reproduces the run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.real

TIMING_KEYS = {"wall_s"}


def _diagnose(traces, out, *extra):
    cmd = [sys.executable, "-m", "localfa", "diagnose", *map(str, traces), "--method", "safari",
           "--engine", "vllm", "--max-turns", "3", "--seed", "7", "--transcript", "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in out.read_text().splitlines()], proc.stderr


def _strip_timing(record):
    rec = {k: v for k, v in record.items() if k not in TIMING_KEYS}
    return json.dumps(rec, sort_keys=True)


def test_diagnose_two_dev_traces_twice_same_seed(whowhen, tmp_path):
    from localfa.traces.load import load_trace

    traces = [whowhen / "algorithm-generated" / "1.json", whowhen / "hand-crafted" / "1.json"]
    first, stderr = _diagnose(traces, tmp_path / "a.jsonl")
    assert "engine vllm" in stderr
    assert len(first) == 2
    for path, rec in zip(traces, first):
        trace = load_trace(path)
        assert rec["method"] == "safari" and rec["seed"] == 7 and rec["error"] is None
        assert rec["stop_reason"] in ("submitted", "forced")
        assert 0 <= rec["step"] < len(trace.steps)
        assert rec["agent"] == trace.agent_at(rec["step"])
        assert set(rec["usage"]) >= {"calls", "prompt_tokens", "completion_tokens", "cached_tokens"}
        assert rec["usage"]["calls"] >= 3 and rec["usage"]["cached_tokens"] > 0
        turns = [t for t in rec["transcript"] if t["turn"] != "final"]
        assert 1 <= len(turns) <= 3
        for t in turns:
            assert t["output"]["tool"]["name"] in ("read", "search", "evaluate", "submit_step")
    second, _ = _diagnose(traces, tmp_path / "b.jsonl")
    assert [_strip_timing(r) for r in first] == [_strip_timing(r) for r in second]
