"""Same seed, same records: each method's own side of reproducibility, whatever the process.

The engine's side (the same batches give the same answers) is shown on the real model by
tests/bench/test_sweep_real.py and tests/engine/test_real.py. What is left is the method: given
the same answers it must send the same requests and write the same records in any process. Two
`localfa bench` processes run every spec of the real sweep (tests/realsweep.py) on the oracle at
p = 0.7 (seeded wrong answers, so sampling paths run), with different hash seeds: a method that
iterated a set of strings, read a clock or an unseeded random would differ here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.methods.real_cli import SHORT_WHOWHEN, without_timing
from tests.realsweep import SEED, SPECS


def _bench(out: Path, hash_seed: str) -> list[str]:
    cmd = [sys.executable, "-m", "localfa", "bench", *map(str, SHORT_WHOWHEN), "--methods", ",".join(SPECS.values())]
    cmd += ["--seeds", str(SEED), "--engine", "oracle:p=0.7", "--no-progress", "--out", str(out)]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sorted((out / "results.jsonl").read_text().splitlines())


def test_every_method_writes_the_same_records_in_two_processes_with_other_hash_seeds(tmp_path):
    import json

    first = _bench(tmp_path / "a", "1")
    second = _bench(tmp_path / "b", "2")
    methods = {json.loads(line)["method"].split(":")[0] for line in first}
    assert methods == {spec.split(":")[0] for spec in SPECS.values()} and len(first) == 2 * len(SPECS)
    assert all(json.loads(line).get("error") is None for line in first)
    assert [without_timing(json.loads(x)) for x in first] == [without_timing(json.loads(x)) for x in second]
