"""`localfa diagnose` on the real embedded model, as a user runs it, for the methods' end-to-end
tests: one subprocess per call, records read back, timings stripped for same-seed comparisons."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TIMING_KEYS = {"wall_s", "finished_at"}

# One short run of each Who&When subset (5 and 6 steps), for the real sweep: on two CPU
# cores the 135M model prefills ~100 tokens/s, and two runs of two dev traces took 7-12 minutes a
# method. SAFARI on the smallest dev runs is in tests/bench/test_bench_real.py.
_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
SHORT_WHOWHEN = [_FIXTURES / "whowhen_algorithm.json", _FIXTURES / "whowhen_handcrafted.json"]


def diagnose_cli(
    traces: list[Path], out: Path, method: str, *extra: str, seed: int = 7, timeout_s: int = 1200
) -> tuple[list[dict[str, Any]], str]:
    """(records, stderr) of `localfa diagnose TRACES --method METHOD --engine vllm --seed SEED`."""
    cmd = [
        sys.executable,
        "-m",
        "localfa",
        "diagnose",
        *map(str, traces),
        "--method",
        method,
        "--engine",
        "vllm",
        "--seed",
        str(seed),
        "--out",
        str(out),
        *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in out.read_text().splitlines()], proc.stderr


def without_timing(record: dict[str, Any]) -> str:
    """The record as canonical JSON, minus what legitimately differs between two runs."""
    return json.dumps({k: v for k, v in record.items() if k not in TIMING_KEYS}, sort_keys=True)
