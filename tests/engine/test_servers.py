"""Several `vllm serve` endpoints done right (issue 12.3): a trace's requests reach one server,
a dead server leaves the rotation, mixed models are refused, a malformed body is one request's
engine error. Scripted HTTP servers on 127.0.0.1 stand in for vLLM here; the real-server checks
are in test_servers_real.py."""

from __future__ import annotations

import pytest

from localfa.engine.errors import EngineError, EngineUnavailableError
from localfa.engine.factory import make_engine
from localfa.engine.grammar import Grammar
from localfa.engine.openai_backend import OpenAIEngine
from localfa.engine.types import Request, Sampling
from tests.engine.http_fakes import FakeOpenAI, dead_url

OK = Grammar.choice(["ok"], name="ok")


def _req(route: str, i: int) -> Request:
    return Request(({"role": "user", "content": f"{route} call {i}"},), OK, Sampling(max_tokens=4, seed=i), key=f"call/{i}", route=route)


def _routes_by_server(servers) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in servers:
        for body in s.seen:
            if body["messages"][0]["content"] == "Say ok.":
                continue  # the start-up self-check probe
            out.setdefault(body["messages"][0]["content"].split()[0], set()).add(s.url)
    return out


def test_every_request_of_a_trace_reaches_the_same_server():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        engine = make_engine("openai", base_urls=[a.url, b.url], say=lambda _m: None)
        routes = [f"trace{i}" for i in range(12)]
        engine.generate([_req(r, i) for i in range(3) for r in routes])
        placed = _routes_by_server([a, b])
        assert all(len(urls) == 1 for urls in placed.values()), placed
        assert len(placed) == 12
        assert {u for urls in placed.values() for u in urls} == {a.url, b.url}  # both used
        engine.close()


def test_a_dead_server_leaves_the_rotation_and_the_others_answer():
    said: list[str] = []
    dead = dead_url()
    with FakeOpenAI() as live:
        engine = make_engine("openai", base_urls=[dead, live.url], say=said.append)
        out = engine.generate([_req(f"t{i}", i) for i in range(8)])
        assert [r.value for r in out] == ["ok"] * 8
        assert engine.live() == [live.url + "/v1"]
        assert said[0] == (f"localfa: server {dead}/v1 taken out of rotation: cannot list models ([Errno 111] Connection refused)")
        engine.close()


def test_a_server_that_dies_mid_run_is_taken_out():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        engine = OpenAIEngine([a.url, b.url])
        a.mode = "500"
        out = engine.generate([_req(f"t{i}", i) for i in range(30)])  # A fails every one it takes
        assert [r.value for r in out] == ["ok"] * 30
        assert engine.live() == [b.url + "/v1"]  # until a probe finds it back (test_server_recovery.py)
        engine.close()


def test_servers_of_different_models_are_refused():
    with FakeOpenAI(model="m", root="/a") as a, FakeOpenAI(model="m", root="/b") as b:
        with pytest.raises(EngineError, match="serve different models"):
            OpenAIEngine([a.url, b.url])
    with FakeOpenAI(max_model_len=2048) as a, FakeOpenAI(max_model_len=4096) as b:
        with pytest.raises(EngineError, match="serve different models"):
            OpenAIEngine([a.url, b.url])


def test_no_server_at_all_is_one_clear_error():
    with pytest.raises(EngineUnavailableError, match="no server answered"):
        OpenAIEngine([dead_url(), dead_url()])


def test_a_malformed_body_is_a_transient_engine_error_for_that_request():
    with FakeOpenAI(mode="malformed") as bad:
        engine = OpenAIEngine([bad.url])
        with pytest.raises(EngineUnavailableError, match="malformed response body") as info:
            engine.generate([_req("t", 0)])
        assert info.value.transient is True
        engine.close()


def test_the_cache_identity_includes_what_the_server_reports():
    with FakeOpenAI(root="/models/a", max_model_len=2048) as a:
        first = OpenAIEngine([a.url]).model_info["identity"]
    with FakeOpenAI(root="/models/b", max_model_len=2048) as b:
        second = OpenAIEngine([b.url]).model_info["identity"]
    assert first == "m|/models/a|2048" and second == "m|/models/b|2048"


def test_a_server_without_prompt_tokens_details_fails_the_self_check(monkeypatch):
    with FakeOpenAI(tokens_details=False) as s:
        with pytest.raises(EngineError, match="enable-prompt-tokens-details"):
            make_engine("openai", base_urls=[s.url], say=lambda _m: None)
        monkeypatch.setenv("LOCALFA_ALLOW_UNCHECKED", "1")
        said: list[str] = []
        engine = make_engine("openai", base_urls=[s.url], say=said.append)
        assert engine.self_checks == {"prompt_tokens_details": False}
        assert said[-1] == (
            f"localfa: warning: engine self-check failed (prompt_tokens_details: {s.url}/v1 reported "
            "no prompt_tokens_details: start vLLM with --enable-prompt-tokens-details (localfa serve "
            "does) or cached tokens read as 0); continuing because LOCALFA_ALLOW_UNCHECKED=1"
        )
        engine.close()


def test_the_api_key_comes_from_the_environment(monkeypatch):
    with FakeOpenAI() as s:
        monkeypatch.setenv("LOCALFA_API_KEY", "sekret")
        engine = make_engine("openai", base_urls=[s.url], say=lambda _m: None)
        assert engine.client.headers["Authorization"] == "Bearer sekret"
        engine.close()


def test_thinking_is_switched_off_in_every_request_body():
    with FakeOpenAI() as s:
        engine = OpenAIEngine([s.url])
        engine.generate([_req("t", 0)])
        assert s.seen[-1]["chat_template_kwargs"] == {"enable_thinking": False}
        assert engine.describe()["chat_template_kwargs"] == {"enable_thinking": False}
        engine.close()
