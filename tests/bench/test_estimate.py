"""`localfa bench --estimate`: a per-method prediction in seconds, no model and no method run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from localfa.bench.estimate import THROUGHPUT, Estimate, cost_models, estimate, estimate_lines, trace_size
from tests.bench.test_longruns import small_run

MODELS = cost_models()["models"]

LOCALFA = [sys.executable, "-m", "localfa"]


def test_estimate_sums_the_cost_models_over_traces():
    run = small_run()
    one, two = estimate([run], ["all-at-once"])[0], estimate([run, run], ["all-at-once"])[0]
    a, b = MODELS["all-at-once"]["prompt_tokens"]
    assert one.prompt_tokens == pytest.approx(a * trace_size(run) ** b)
    assert two.prompt_tokens == pytest.approx(2 * one.prompt_tokens) and two.traces == 2


def test_gpu_time_is_a_range_from_the_profile_rates():
    est = Estimate("m", 1, uncached_tokens=9000.0, completion_tokens=300.0)
    rates = THROUGHPUT["gpu-single"]
    fast, slow = est.gpu_seconds(rates)
    assert fast == pytest.approx(9000 / rates.prefill[1] + 300 / rates.decode[1])
    assert slow == pytest.approx(9000 / rates.prefill[0] + 300 / rates.decode[0]) and slow > fast


def test_lines_name_every_method_the_rates_and_where_the_models_come_from():
    lines = estimate_lines([small_run()], ["falat", "drift:claims_per_chunk=3", "vote"], "cpu-embedded")
    assert lines[0].startswith("method=falat traces=1 calls=") and "uncached_prefill=" in lines[0] and "gpu_time=" in lines[0]
    assert "profile=cpu-embedded" in lines[0] and lines[1].startswith("method=drift:claims_per_chunk=3 ")
    assert "no cost model" in lines[2]
    assert lines[3].startswith("# cpu-embedded:") and "tok/s" in lines[3]
    assert lines[4].startswith("# cost models: ") and "scripts/bench_cost.py on " in lines[4]
    with pytest.raises(ValueError, match="no throughput figures for profile 'h100x3'"):
        estimate_lines([small_run()], ["falat"], "h100x3")


def test_cli_prints_an_estimate_fast_without_a_run_directory(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    history = [{"name": s.agent, "role": s.role, "content": s.content} for s in small_run().steps]
    for i in range(3):
        (folder / f"{i}.json").write_text(json.dumps({"history": history, "mistake_agent": "Coder", "mistake_step": "4"}))
    started = time.perf_counter()
    p = subprocess.run(
        [*LOCALFA, "bench", str(folder), "--estimate", "--methods", "safari,all-at-once"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert p.returncode == 0, p.stderr
    assert time.perf_counter() - started < 30  # interpreter start included; the estimate itself is milliseconds
    out = p.stdout.splitlines()
    assert out[0].startswith("method=safari traces=3 calls=") and "profile=gpu-single" in out[0]
    assert out[1].startswith("method=all-at-once traces=3 ")
    assert not list(tmp_path.glob("**/results.jsonl"))


def test_cli_without_out_or_estimate_is_one_error_line(tmp_path):
    p = subprocess.run([*LOCALFA, "bench", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "error: --out: give the run directory (or --estimate" in p.stderr
