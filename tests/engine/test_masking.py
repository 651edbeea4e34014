"""Keys never leave the openai backend unmasked: masked at its edges (`localfa.redact`), once.

The rotation masks every reason a server is out and every line it says, whatever produced the
text (a probe that returned a reason or one that raised); the engine masks what it says and every
error leaving a request. Scripted servers on 127.0.0.1 echo the key back, as a misconfigured
proxy or a verbose server would.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from localfa.engine.errors import EngineError
from localfa.engine.openai_backend import OpenAIEngine, RetryPolicy
from localfa.engine.rotation import Rotation
from localfa.redact import MASK, mask_error, masker, redact
from tests.engine.http_fakes import FakeOpenAI, _Server
from tests.engine.test_server_recovery import Sleeps, _engine
from tests.engine.test_servers import _req

KEY = "sk-test-0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_probe_that_raises_with_the_key_in_its_text_is_recorded_and_said_masked():
    said: list[str] = []
    clock = Clock()

    def probe(url: str) -> str | None:
        raise RuntimeError(f"GET {url}/models with Authorization: Bearer {KEY} refused ({KEY})")

    rot = Rotation(["http://a/v1"], probe, said.append, clock=clock, mask=masker([KEY]))
    rot.take_out("http://a/v1", f"refused for key {KEY}")
    clock.now = 5.0
    assert rot.live() == []  # the probe ran, and failed
    why = rot.down["http://a/v1"]
    assert why.startswith("probe failed (RuntimeError: GET http://a/v1/models with Authorization: Bearer ***") and KEY not in why
    assert said and all(KEY not in line for line in said)


def test_a_probes_reason_and_the_lines_said_are_masked_without_being_told_the_key(monkeypatch):
    """The rotation's default mask: the key variables and credential shapes."""
    monkeypatch.setenv("LOCALFA_API_KEY", KEY)
    said: list[str] = []
    clock = Clock()
    rot = Rotation(["http://u:hunter2-pw@a/v1"], lambda url: f"{url}/models?api_key=zz-top said {KEY}", said.append, clock=clock)
    rot.take_out("http://u:hunter2-pw@a/v1", "down")
    clock.now = 5.0
    rot.live()
    text = json.dumps([list(rot.down.values()), said])  # (the keys are the URLs as given: the rotation's names)
    assert KEY not in text and "hunter2-pw" not in text and "zz-top" not in text and MASK in rot.down["http://u:hunter2-pw@a/v1"]


@pytest.mark.parametrize("raised", [httpx.ConnectError, RuntimeError])
def test_the_engines_probe_failure_with_the_key_is_masked_in_down_said_and_describe(raised):
    said: list[str] = []
    with FakeOpenAI() as a, FakeOpenAI() as b:
        engine = _engine([a, b], said=said, api_key=KEY)
        url = engine.base_urls[0]

        def describe(u: str) -> dict[str, Any]:
            raise raised(f"{u}: refused the key {KEY}")

        engine._describe_server = describe  # type: ignore[method-assign]
        engine._take_out(url, f"HTTP 500: bad key {KEY}")
        engine.rotation._next[url] = 0.0  # the probe is due now
        assert engine.live() == [engine.base_urls[1]]
        assert "refused the key ***" in engine.down[url]
        text = json.dumps([engine.down, said, engine.describe()], default=str)
        assert KEY not in text
        engine.close()


class _EchoHandler(BaseHTTPRequestHandler):
    """Lists one model; answers every chat completion with `status` and a body that echoes the
    request's Authorization header after `pad` characters (so a cut at 200/300 halves the key)."""

    status = 400
    pad = 0

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps({"data": [{"id": "m", "root": "/m", "max_model_len": 2048}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        echo = "x" * self.pad + f"bad header {self.headers.get('Authorization')}"
        self._send(self.status, json.dumps({"error": echo}).encode())


@pytest.mark.parametrize("status,pad", [(400, 0), (400, 280), (500, 0), (500, 180), (401, 0), (429, 180), (200, 0), (200, 180)])
def test_an_error_body_echoing_the_key_is_masked_in_the_error_and_its_causes(status, pad):
    handler = type("Echo", (_EchoHandler,), {"status": status, "pad": pad})
    server = _Server(handler)
    try:
        engine = OpenAIEngine([server.url], api_key=KEY, retry=RetryPolicy(attempts=1), sleep=Sleeps())
        with pytest.raises(EngineError) as info:
            engine.generate([_req("t", 0)])
        chain, e = [], info.value
        while e is not None:
            chain.append(e)
            e = e.__cause__ or e.__context__
        text = " ".join(f"{x} {x.args} {vars(x)}" for x in chain)
        assert KEY[:8] not in text  # not even half of it
        engine.close()
    finally:
        server.close()


def test_a_password_in_a_base_url_never_shows(monkeypatch):
    said: list[str] = []
    with FakeOpenAI() as s:
        port = s.url.rsplit(":", 1)[1]
        engine = OpenAIEngine([f"http://user:pw-hunter2@127.0.0.1:{port}"], say=said.append, retry=RetryPolicy(attempts=1))
        s.stop()
        with pytest.raises(EngineError) as info:
            engine.generate([_req("t", 0)])
        engine._take_out(engine.base_urls[0], "stopped")  # a server out: describe() names it
        text = json.dumps([str(info.value), said, engine.describe()], default=str)
        assert "pw-hunter2" not in text and "user:***@127.0.0.1" in text and engine.describe()["servers_down"]
        engine.close()


def test_redact_masks_known_keys_and_credential_shapes():
    assert redact(f"bad key {KEY}", [KEY]) == "bad key ***"
    assert redact("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    assert redact('{"authorization": "Basic dXNlcjpw"}') == '{"authorization": "Basic ***"}'
    assert redact("http://u:p4ss@h:80/v1 and http://h/v1?api_key=k1&x=2") == "http://u:***@h:80/v1 and http://h/v1?api_key=***&x=2"
    plain = "model m at http://127.0.0.1:8000/v1, keyboard=1, ?monkey=2"
    assert redact(plain) == plain


def test_mask_error_masks_message_attributes_and_the_errors_it_came_from():
    err = EngineError(f"down: {KEY}")
    err.detail = f"body {KEY}"  # type: ignore[attr-defined]
    try:
        try:
            raise httpx.ConnectError(f"refused {KEY}")
        except httpx.ConnectError as low:
            raise err from low
    except EngineError:
        pass
    exc = err
    assert mask_error(exc, masker([KEY])) is exc and str(exc) == "down: ***" and exc.detail == "body ***"  # type: ignore[attr-defined]
    assert str(exc.__cause__) == "refused ***"
