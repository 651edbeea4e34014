"""`localfa bench` + `localfa report` on the REAL embedded model (vLLM CPU build).

The sweep is the shared real sweep (tests/realsweep.py): every model-calling method on one short
Who&When run, on the session's vLLM engine (`localfa bench --engine vllm` itself is the README
quick start's, tests/test_quickstart_real.py). Here: what a sweep writes (records, manifest with
the model's hash, prompts and grammars, cached prefixes) and what `localfa report` makes of a real
run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.realsweep import SPECS

pytestmark = pytest.mark.real


def test_bench_then_report_on_real_model(real_sweep):
    run = real_sweep.run
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == len(SPECS)  # 1 trace x methods x 1 seed
    assert {r["subset"] for r in records} == {"algorithm-generated"}
    assert not [r for r in records if r["error"]]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["engine"]["backend"] == "vllm" and manifest["model"]["sha256"]
    assert manifest["prompts"] and manifest["grammars"]
    assert sum(r["usage"]["cached_tokens"] for r in records) > 0

    rep = subprocess.run([sys.executable, "-m", "localfa", "report", str(run)], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "safari" in rep.stdout and "all-at-once" in rep.stdout and "step acc" in rep.stdout
    html = (run / "report.html").read_text()
    assert "<svg" in html and "whowhen_algorithm" in html
