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
        "all-at-once:max_chars=1500:reason_chars=40",  # short prompts and answers: the fail-over is the point
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


def _yes_no(trace: str, i: int):
    from localfa.engine.grammar import Grammar
    from localfa.engine.types import Request, Sampling

    grammar = Grammar.choice(["yes", "no"], name="yes_no")
    msgs = ({"role": "user", "content": f"[{trace}] Is step {i} faulty? Answer yes or no."},)
    return Request(msgs, grammar, Sampling(max_tokens=2, seed=i), key=f"q{i}", route=trace)


def test_a_real_server_that_dies_mid_run_is_failed_over_and_readmitted(vllm_server):
    """Issue 25.1/25.10: two endpoints of one real `vllm serve`, direct and through a proxy that is
    a process of its own. The proxy is SIGKILLed with requests in flight (their connections drop,
    as when a server process dies mid-run, not at the start-up probe): every request is still
    answered, the proxied traces move to the direct endpoint; started again on its port, the
    proxy is probed back into rotation and its traces return to it."""
    import os
    import signal
    import time

    import httpx

    from localfa.engine.openai_backend import OpenAIEngine
    from localfa.serving.launch import free_port

    port = free_port()
    proxy_url = f"http://127.0.0.1:{port}"

    def start_proxy() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "tests.engine.proxy_process", str(port), vllm_server], start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{proxy_url}/v1/models", timeout=2, trust_env=False)
                return proc
            except httpx.HTTPError:
                time.sleep(0.1)
        raise TimeoutError("the proxy did not come up")

    traces = [f"trace{t}" for t in range(8)]
    proxy = start_proxy()
    said: list[str] = []
    engine = OpenAIEngine([vllm_server, proxy_url], api_key=os.environ["LOCALFA_API_KEY"], say=said.append, first_probe_s=0.5)
    try:
        via_proxy = [t for t in traces if engine._server_for(_yes_no(t, 0), engine.live()) == proxy_url + "/v1"]
        assert via_proxy and len(via_proxy) < len(traces)
        session = engine.session()
        session.submit([_long(t, i) for t in traces for i in range(2)])
        time.sleep(0.5)  # the requests are on their way or decoding
        os.killpg(proxy.pid, signal.SIGKILL)  # the proxied server dies mid-run
        proxy.wait()
        done = []
        while session.pending():
            done += session.wait()
        assert len(done) == 2 * len(traces) and all(not isinstance(r, Exception) for _, r in done), done
        out = engine.generate([_yes_no(t, 1) for t in traces])  # its traces answered by the other
        assert all(r.value in ("yes", "no") for r in out)
        proxy = start_proxy()
        deadline = time.monotonic() + 60
        while len(engine.live()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.servers_readmitted == 1 and len(engine.live()) == 2, said
        assert [t for t in traces if engine._server_for(_yes_no(t, 0), engine.live()) == proxy_url + "/v1"] == via_proxy
        assert all(r.value in ("yes", "no") for r in engine.generate([_yes_no(t, 2) for t in traces]))
        assert any(proxy_url in m and "back in rotation" in m for m in said), said
    finally:
        engine.close()
        if proxy.poll() is None:
            os.killpg(proxy.pid, signal.SIGKILL)
            proxy.wait()


def _long(trace: str, i: int):
    """A request that decodes for a while (a few dozen tokens), so a kill finds it in flight."""
    from localfa.engine.grammar import Grammar
    from localfa.engine.types import Request, Sampling

    grammar = Grammar.regex(r"[a-z ]{20,60}\.", name="sentence")
    msgs = ({"role": "user", "content": f"[{trace}] Describe step {i} of the run in one sentence."},)
    return Request(msgs, grammar, Sampling(max_tokens=48, seed=i), key=f"long{i}", route=trace)
