"""Several servers against a REAL `vllm serve` of the embedded model (issue 12.3): the second
endpoint is a counting proxy process-thread in front of the same server, so the test sees which
endpoint each trace's requests reached; a dead port is taken out and every trace still finishes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from localfa.engine.factory import make_engine
from tests.engine.grammar_cases import mixed_batch
from tests.engine.http_fakes import CountingProxy, dead_url

pytestmark = pytest.mark.real


def test_each_trace_stays_on_one_of_two_real_endpoints(vllm_server):
    with CountingProxy(vllm_server) as proxy:
        engine = make_engine("openai", base_urls=[vllm_server, proxy.url], say=lambda _m: None)
        try:
            requests = []
            for t in range(6):
                for req in mixed_batch(3, seed_base=10 * t):
                    msgs = (*req.messages[:-1], {"role": "user", "content": f"[trace{t}] " + req.messages[-1]["content"]})
                    requests.append(type(req)(msgs, req.grammar, req.sampling, key=req.key, route=f"trace{t}"))
            out = engine.generate(requests)
            assert len(out) == 18
        finally:
            engine.close()
    via_proxy = {b["messages"][-1]["content"].split("]")[0] + "]" for b in proxy.seen if b["messages"][-1]["content"].startswith("[trace")}
    counts = {t: sum(1 for b in proxy.seen if b["messages"][-1]["content"].startswith(t)) for t in via_proxy}
    assert via_proxy and len(via_proxy) < 6  # both endpoints carried traces
    assert all(n == 3 for n in counts.values()), counts  # a trace is wholly on the proxy or not at all


def test_bench_with_a_live_and_a_dead_server_finishes_every_trace(vllm_server, whowhen, tmp_path):
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "localfa",
        "bench",
        str(whowhen / "algorithm-generated"),
        "--limit",
        "3",
        "--methods",
        "all-at-once:max_chars=3000",
        "--engine",
        "openai",
        "--base-url",
        vllm_server,
        "--base-url",
        dead_url(),
        "--out",
        str(run),
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "taken out of rotation" in proc.stderr
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3
    assert [r["error"] for r in records] == [None, None, None]
