"""Servers come back, and one request cannot take them all down (issue 25.1).

Scripted HTTP servers on 127.0.0.1 stand in for vLLM: they can answer 5xx, 401/408/429 (with
Retry-After), hang past the read timeout, poison one request, stop listening and come back on
the same port. The real-server case (a `vllm serve` that dies mid-run) is in
test_servers_real.py.
"""

from __future__ import annotations

import time

import pytest

from localfa.engine.errors import EngineError, EngineUnavailableError, RequestFailedError
from localfa.engine.openai_backend import OpenAIEngine, RetryPolicy, retry_after_s, share_out
from localfa.engine.session import as_engine_error
from tests.engine.http_fakes import FakeOpenAI
from tests.engine.test_servers import _req


class Sleeps(list):
    """Records each backoff and waits a token amount, so tests stay fast."""

    def __call__(self, seconds: float) -> None:
        self.append(round(seconds, 3))
        time.sleep(min(seconds, 0.02))


def _engine(servers, said=None, sleeps=None, **kw) -> OpenAIEngine:
    return OpenAIEngine(
        [s.url for s in servers],
        say=(said.append if said is not None else None),
        sleep=sleeps if sleeps is not None else Sleeps(),
        first_probe_s=kw.pop("first_probe_s", 0.05),
        retry=kw.pop("retry", RetryPolicy(attempts=4, base_s=0.5)),
        **kw,
    )


def test_a_poison_request_fails_on_two_servers_and_never_reaches_a_third():
    with FakeOpenAI() as a, FakeOpenAI() as b, FakeOpenAI() as c:
        for s in (a, b, c):
            s.poison = "POISON"
        said: list[str] = []
        engine = _engine([a, b, c], said)
        poison = _req("t1", 0)
        poison = type(poison)(({"role": "user", "content": "POISON pill"},), poison.grammar, poison.sampling, key="bad", route="t1")
        with pytest.raises(RequestFailedError, match="failed on 2 servers") as info:
            engine.generate([poison])
        assert info.value.transient is False  # the request's own error: not retried on resume
        reached = [s for s in (a, b, c) if any(b_["messages"][-1]["content"] == "POISON pill" for b_ in s.seen)]
        assert len(reached) == 2  # never a third
        assert len(engine.down) <= 1
        time.sleep(0.1)  # past the first probe: the server it left comes back
        assert len(engine.live()) == 3 and engine.servers_readmitted == len([m for m in said if "taken out" in m])
        out = engine.generate([_req(f"t{i}", i) for i in range(9)])  # the others still answer
        assert [r.value for r in out] == ["ok"] * 9
        engine.close()


def test_the_poison_unit_is_its_programs_error_in_a_session():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        a.poison = b.poison = "POISON"
        engine = _engine([a, b])
        session = engine.session()
        ok, bad = _req("t0", 0), _req("t1", 1)
        bad = type(bad)(({"role": "user", "content": "POISON"},), bad.grammar, bad.sampling, key="bad", route="t1")
        session.submit([ok, bad])
        results = []
        while session.pending():
            results += session.wait()
        got = dict(results)
        assert got[0].value == "ok" and isinstance(got[1], RequestFailedError)
        assert isinstance(as_engine_error(got[1]), RequestFailedError)
        engine.close()


def test_a_server_that_dies_is_probed_and_readmitted_when_it_comes_back():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        said: list[str] = []
        engine = _engine([a, b], said)
        routes = [f"trace{i}" for i in range(12)]
        a.stop()
        out = engine.generate([_req(r, i) for i, r in enumerate(routes)])  # A's traces move to B
        assert [r.value for r in out] == ["ok"] * 12
        assert engine.live() == [b.url + "/v1"]
        a.start()
        deadline = time.monotonic() + 30  # a bound, not a wait: the loop ends as soon as A is back
        while a.url + "/v1" not in engine.live() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.live() == [a.url + "/v1", b.url + "/v1"] and engine.servers_readmitted == 1
        assert said[-1] == f"localfa: server {a.url}/v1 is back in rotation"
        a.seen.clear()
        engine.generate([_req(r, i) for i, r in enumerate(routes)])
        assert a.seen  # its traces came back to it
        engine.close()


def test_a_server_that_comes_back_serving_another_model_stays_out():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        engine = _engine([a, b])
        a.stop()
        engine.generate([_req(f"t{i}", i) for i in range(6)])
        a.root = "/models/other"
        a.start()
        time.sleep(0.1)
        assert engine.live() == [b.url + "/v1"]
        assert "now serves another model" in engine.down[a.url + "/v1"]
        engine.close()


def test_when_every_server_is_down_a_request_waits_for_one_to_come_back():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        engine = _engine([a, b], retry=RetryPolicy(attempts=6, base_s=0.05, max_s=0.5))
        a.stop()
        b.stop()
        with pytest.raises(EngineUnavailableError, match="every server is out of rotation"):
            engine.generate([_req("t", 0)])
        b.start()
        sleeps = Sleeps()
        engine._sleep = lambda s: (sleeps.append(s), time.sleep(min(s, 0.2)))  # type: ignore[func-returns-value]
        assert engine.generate([_req("t", 1)])[0].value == "ok"
        engine.close()


@pytest.mark.parametrize("status", [502, 503, 500])
def test_one_server_retries_a_5xx_with_backoff(status):
    with FakeOpenAI() as s:
        sleeps = Sleeps()
        engine = _engine([s], sleeps=sleeps)
        s.statuses = [status, status]
        assert engine.generate([_req("t", 0)])[0].value == "ok"
        assert sleeps == [0.5, 1.0] and engine.live() == [s.url + "/v1"]
        s.statuses = [status] * 4
        with pytest.raises(EngineUnavailableError, match=f"HTTP {status}.*tried 4 times"):
            engine.generate([_req("t", 1)])
        assert engine.live() == [s.url + "/v1"]  # the only server never leaves
        engine.close()


def test_one_server_retries_a_read_timeout():
    with FakeOpenAI() as s:
        sleeps = Sleeps()
        engine = _engine([s], sleeps=sleeps, timeout_s=0.3)
        s.hang_s = 1.0
        s.statuses = [0]
        assert engine.generate([_req("t", 0)])[0].value == "ok"
        assert sleeps == [0.5]
        engine.close()


@pytest.mark.parametrize("status", [401, 408, 429])
def test_401_408_429_are_retried_on_the_same_server(status):
    with FakeOpenAI() as a, FakeOpenAI() as b:
        sleeps = Sleeps()
        engine = _engine([a, b], sleeps=sleeps)
        req = _req("t", 0)
        target = a if engine._server_for(req, engine.live()) == a.url + "/v1" else b
        target.statuses = [status, status]
        assert engine.generate([req])[0].value == "ok"
        assert len(target.seen) == 3 and sleeps == [0.5, 1.0]
        assert engine.down == {}  # a busy or picky server stays in rotation
        engine.close()


def test_429_waits_as_retry_after_says():
    with FakeOpenAI() as s:
        sleeps = Sleeps()
        engine = _engine([s], sleeps=sleeps)
        s.statuses, s.retry_after = [429], "3"
        assert engine.generate([_req("t", 0)])[0].value == "ok"
        assert sleeps == [3.0]
        assert 59 <= retry_after_s(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 60))) <= 61
        assert retry_after_s(None) is None and retry_after_s("soon") is None
        engine.close()


def test_a_key_refused_every_time_is_a_final_error_naming_the_key():
    with FakeOpenAI() as s:
        engine = _engine([s], api_key="sk-very-secret-key")
        s.statuses = [401] * 4
        with pytest.raises(EngineError, match="refused the API key") as info:
            engine.generate([_req("t", 0)])
        assert info.value.transient is False and "sk-very-secret-key" not in str(info.value)
        engine.close()


def test_the_key_is_masked_in_text_and_in_a_command_line():
    """(Server error text that echoes the key, probes, reasons: tests/engine/test_masking.py.)"""
    from localfa.redact import mask_argv, redact

    assert redact("bad key sk-very-secret-key", ["sk-very-secret-key"]) == "bad key ***"
    assert mask_argv(["localfa", "bench", "--api-key", "sk-1234", "--api-key=sk-5678", "x"]) == [
        "localfa",
        "bench",
        "--api-key",
        "***",
        "--api-key=***",
        "x",
    ]


def test_share_out_keeps_the_total():
    assert share_out(10, [1, 1, 1]) == [4, 3, 3]
    assert sum(share_out(97, [5, 40, 3, 0, 12])) == 97
    assert share_out(3, [0, 0]) == [2, 1]
