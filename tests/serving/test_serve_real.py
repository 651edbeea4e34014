"""`localfa serve` with a real `vllm serve` of the embedded model, the session's one server
(`served` in tests/conftest.py; the other real-server tests use it through `vllm_server`): with an
API key, a request without it gets 401 and with it succeeds (the openai backend reading
LOCALFA_API_KEY); the key is in no process's command line; SIGTERM leaves none of its tree alive."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from localfa.engine.grammar import Grammar
from localfa.engine.types import Request, Sampling
from localfa.serving.launch import API_KEY_ENV
from tests.serving.proctree import alive, children, cmdline, descendants
from tests.serving.served import SERVE_KEY as KEY

pytestmark = [pytest.mark.real, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]


def test_a_request_without_the_key_gets_401_and_with_it_succeeds(served, monkeypatch):
    from localfa.engine.factory import make_engine

    url = served.url
    with httpx.Client(trust_env=False, timeout=30) as client:
        assert client.get(f"{url}/v1/models").status_code == 401
        body = {"model": "localfa", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert client.post(f"{url}/v1/chat/completions", json=body).status_code == 401
        wrong = client.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401
    monkeypatch.setenv("LOCALFA_API_KEY", KEY)  # the openai backend reads it when --api-key is absent
    engine = make_engine("openai", base_urls=[url])
    try:
        grammar = Grammar.choice(["yes", "no"], name="yes_no")
        (resp,) = engine.generate(
            [Request([{"role": "user", "content": "Is water wet? Answer yes or no."}], grammar, Sampling(max_tokens=4, seed=0))]
        )
        assert resp.value in ("yes", "no") and resp.usage.prompt_tokens > 0
    finally:
        engine.close()


def test_the_key_is_in_no_command_line_only_in_the_server_environment(served):
    proc, tree = served.proc, served.tree
    (server,) = children(proc.pid)  # vllm's API server
    assert tree and all(KEY not in cmdline(pid) for pid in tree | {proc.pid})
    assert "vllm.entrypoints.openai.api_server" in cmdline(server)
    environ = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
    assert f"{API_KEY_ENV}={KEY}".encode() in environ


# Routes of vLLM 0.32's API server that vLLM's own key check leaves open (beside /openapi.json's).
OPEN_IN_VLLM = ["/health", "/ping", "/version", "/metrics", "/invocations", "/tokenize", "/detokenize", "/docs", "/openapi.json"]


def test_every_route_refuses_a_request_without_the_key(served):
    """Issue 25.6: the guard in front of vLLM refuses every route without the key, each tested."""
    url = served.url
    auth = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(trust_env=False, timeout=30) as client:
        spec = client.get(f"{url}/openapi.json", headers=auth)
        paths = sorted(spec.json()["paths"]) if spec.status_code == 200 else []
        assert "/invocations" in paths or not paths
        routes = sorted({p.replace("{", "").replace("}", "") for p in paths} | set(OPEN_IN_VLLM) | {"/localfa/fingerprint"})
        let_through = []
        for path in routes:
            for method in ("GET", "POST"):
                status = client.request(method, f"{url}{path}", json={}).status_code
                if status != 401:
                    let_through.append((method, path, status))
        assert let_through == [], let_through
        assert len(routes) >= 10
        body = {"model": "localfa", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert client.post(f"{url}/invocations", json=body).status_code == 401  # chat completions without the key
        assert client.post(f"{url}/invocations", json=body, headers=auth).status_code == 200
        assert client.get(f"{url}/health", headers=auth).status_code == 200


def test_the_server_says_what_it_serves_and_counts_in_one_call(served, embedded_model_dir, monkeypatch):
    """Issue 25.5 / 24.7: the fingerprint of what `localfa serve` serves is the identity over HTTP,
    and many texts are counted with the model's tokenizer in one call."""
    from localfa.engine.factory import make_engine
    from localfa.engine.model import model_fingerprint
    from localfa.tokens import token_counter

    url = served.url
    monkeypatch.setenv("LOCALFA_API_KEY", KEY)
    engine = make_engine("openai", base_urls=[url])
    try:
        assert engine.model_info["sha256"] == model_fingerprint(embedded_model_dir)["sha256"]
        described = engine.describe()
        assert described["dtype"] and described["structured_outputs_backend"] == "guidance" and described["vllm_version"]
        texts = ["Orchestrator: search the web for the table.", "WebSurfer: found 42 rows.\n", ""]
        _, count = token_counter(embedded_model_dir)
        assert engine.count_tokens_many(texts) == [count(t) for t in texts]
        assert engine.token_unit() == "tokens"
    finally:
        engine.close()


def test_sigterm_to_localfa_serve_leaves_no_process_of_its_tree(served):
    proc, tree = served.proc, served.tree
    tree = tree | descendants(proc.pid)
    assert len(tree) >= 2  # the API server and its engine core, at least
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    deadline = time.monotonic() + 30
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(tree) == set(), {p: cmdline(p) for p in alive(tree)}
