"""`localfa bench` + `localfa report` on the REAL embedded model (vLLM CPU build).

The issue's command, with SAFARI's turns and the all-at-once prompt bounded so CI stays quick: on
the smallest run of each Who&When subset, as a tree of the same shape (on two CPU cores the 135M
model prefills ~70 tokens/s at SAFARI's 5-6k-token prompts, so the first two runs of each subset
took 9.5 minutes; these take a third of it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.real

SMALLEST = {"algorithm-generated": "21", "hand-crafted": "6"}  # 8.8 kB and 10.8 kB


def test_bench_then_report_on_real_model(whowhen, tmp_path):
    tree = tmp_path / "whowhen"
    for subset, name in SMALLEST.items():
        (tree / subset).mkdir(parents=True)
        shutil.copy(whowhen / subset / f"{name}.json", tree / subset)
    run = tmp_path / "RUN"
    cmd = [
        sys.executable,
        "-m",
        "localfa",
        "bench",
        str(tree),
        "--methods",
        "all-at-once:max_chars=6000,safari:max_turns=3",
        "--seeds",
        "0",
        "--out",
        str(run),
        "--engine",
        "vllm",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4  # 1 + 1 traces x 2 methods x 1 seed
    assert {r["subset"] for r in records} == {"algorithm-generated", "hand-crafted"}
    assert not [r for r in records if r["error"]]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["engine"]["backend"] == "vllm" and manifest["model"]["sha256"]
    assert manifest["prompts"] and manifest["grammars"]
    assert sum(r["usage"]["cached_tokens"] for r in records) > 0

    rep = subprocess.run([sys.executable, "-m", "localfa", "report", str(run)], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "safari" in rep.stdout and "all-at-once" in rep.stdout and "step acc" in rep.stdout
    html = (run / "report.html").read_text()
    assert "<svg" in html and "whowhen/hand-crafted/6" in html
