"""The layer `localfa serve` puts in front of vLLM (issue 25.5, 25.6): with a key, every route
refuses a request without it (vLLM 0.32 guards only /v1 and a few prefixes); it reports the
served fingerprint and counts many texts in one call. A Starlette app stands in for vLLM here;
test_serve_real.py checks every route of a real server."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")

from starlette.applications import Starlette  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402
from starlette.routing import Route, WebSocketRoute  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from starlette.websockets import WebSocket, WebSocketDisconnect  # noqa: E402

from localfa.serving.guard import LocalfaGuard  # noqa: E402
from localfa.serving.launch import GUARD, server_command  # noqa: E402

KEY = "k-guard-test-0001"
ROUTES = ["/health", "/invocations", "/tokenize", "/detokenize", "/metrics", "/v1/models", "/version", "/ping", "/docs"]


async def _ok(request):
    return PlainTextResponse("open")


async def _ws(websocket: WebSocket):
    await websocket.accept()
    await websocket.send_text("open")
    await websocket.close()


def _client(monkeypatch, key: str | None, tokenizer_dir: str | None = None) -> TestClient:
    if key:
        monkeypatch.setenv("VLLM_API_KEY", key)
    else:
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("LOCALFA_SERVED", json.dumps({"sha256": "a" * 64, "model_dir": tokenizer_dir}))
    routes = [Route(p, _ok, methods=["GET", "POST"]) for p in ROUTES] + [WebSocketRoute("/v1/realtime", _ws)]
    app = Starlette(routes=routes)
    app.add_middleware(LocalfaGuard)
    return TestClient(app)


def test_every_route_refuses_a_request_without_the_key(monkeypatch):
    client = _client(monkeypatch, KEY)
    for path in ROUTES + ["/localfa/fingerprint", "/nowhere"]:
        for method in ("GET", "POST"):
            assert client.request(method, path).status_code == 401, (method, path)
            assert client.request(method, path, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert client.request(method, path, headers={"Authorization": KEY}).status_code == 401  # no scheme
    with pytest.raises(WebSocketDisconnect) as closed:
        with client.websocket_connect("/v1/realtime") as ws:
            ws.receive_text()
    assert closed.value.code == 1008
    auth = {"Authorization": f"Bearer {KEY}"}
    assert all(client.post(p, headers=auth).text == "open" for p in ROUTES)
    with client.websocket_connect("/v1/realtime", headers=auth) as ws:
        assert ws.receive_text() == "open"


def test_without_a_key_nothing_is_refused(monkeypatch):
    client = _client(monkeypatch, None)
    assert client.get("/invocations").text == "open"


def word_tokenizer(folder) -> str:
    """A model folder whose tokenizer.json counts the words a and b (anything else is [UNK])."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return str(folder)


def test_the_fingerprint_and_batched_counts(monkeypatch, tmp_path):
    client = _client(monkeypatch, KEY, word_tokenizer(tmp_path))
    auth = {"Authorization": f"Bearer {KEY}"}
    assert client.get("/localfa/fingerprint", headers=auth).json()["sha256"] == "a" * 64
    assert client.post("/localfa/count_tokens", headers=auth, json={"texts": ["a b a", "b", ""]}).json() == {"counts": [3, 1, 0]}
    assert client.post("/localfa/count_tokens", headers=auth, json={"texts": "a"}).status_code == 400


def test_the_server_command_loads_the_guard(tmp_path):
    from localfa.engine.settings import EngineSettings

    cmd = server_command(EngineSettings(), tmp_path, "0.0.0.0", 8000, True)
    assert cmd[cmd.index("--middleware") + 1] == GUARD == "localfa.serving.guard.LocalfaGuard"
