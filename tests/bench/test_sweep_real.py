"""When a sweep's records depend on --concurrency, on the REAL embedded model (vLLM CPU build)."""

from __future__ import annotations

import pytest

from localfa.bench.store import read_records
from localfa.bench.sweep import TIMING_FIELDS, parse_methods, run_sweep
from localfa.traces.load import load_trace

pytestmark = pytest.mark.real


def answers(records) -> dict:
    """What a record says, without what legitimately varies between runs (timing, prefix-cache hits)."""
    out = {}
    for r in records:
        d = r.model_dump(exclude={*TIMING_FIELDS})
        d["usage"] = {k: v for k, v in d["usage"].items() if k != "cached_tokens"}
        out[r.key] = d
    return out


def test_records_do_not_depend_on_concurrency_when_batches_are_the_same(vllm_engine, whowhen, tmp_path):
    """--concurrency 4 and 16 put the same 4 traces in the same batches: identical records. (With
    --concurrency 1 the batches differ, which can flip a sampled token now and then, as the README
    says; that a sweep at any concurrency writes every record once is the scripted engine's test,
    tests/bench/test_sweep.py.)"""
    files = sorted((whowhen / "algorithm-generated").glob("*.json"), key=lambda f: f.stat().st_size)[:4]
    traces = [load_trace(f) for f in files]
    methods = parse_methods("all-at-once:max_chars=1000:reason_chars=40")  # short prompts and answers: the batches are the point
    runs = {}
    for concurrency in (4, 16):
        vllm_engine.reset_prefix_cache()
        run = tmp_path / f"c{concurrency}"
        res = run_sweep(run, traces, methods, [0], vllm_engine, concurrency=concurrency, progress=False)
        assert (res.written, res.errors) == (4, 0)
        runs[concurrency] = answers(read_records(run / "results.jsonl"))
    assert len(runs[4]) == 4
    assert all(r["step"] is not None and r["usage"]["calls"] == 1 for r in runs[4].values())
    assert all(0 <= r["step"] < r["n_steps"] for r in runs[4].values())
    assert runs[4] == runs[16]
