"""Token counts over HTTP come from a live server, batched, with the unit recorded (issue 24.7):
one HTTP call for many texts, never the server that left the rotation, and a fallback to
characters is a warning, not silent. Also: HTTPSession builds no thread pool per request (25.10)."""

from __future__ import annotations

from localfa.engine import openai_backend
from localfa.engine.openai_backend import OpenAIEngine
from localfa.engine.scripted import ScriptedEngine
from localfa.methods.base import MethodContext
from localfa.methods.runner import method_job
from tests.engine.http_fakes import FakeOpenAI
from tests.engine.test_servers import _req

TEXTS = ["one two three\n", "four five\n", "six\n"]


def _count_calls(server: FakeOpenAI) -> list[str]:
    return [r for r in server.routes if r.endswith(("/count_tokens", "/tokenize"))]


def test_many_texts_are_counted_in_one_call_by_localfa_serve():
    with FakeOpenAI(counts=True) as s:
        engine = OpenAIEngine([s.url])
        assert engine.count_tokens_many(TEXTS) == [3, 2, 1]
        assert _count_calls(s) == ["/localfa/count_tokens"]
        assert engine.token_unit() == "tokens"
        engine.close()


def test_a_plain_vllm_counts_the_joined_texts_once_and_shares_them_out():
    with FakeOpenAI(counts=False) as s:
        engine = OpenAIEngine([s.url])
        counts = engine.count_tokens_many(TEXTS)
        assert sum(counts) == 6 and counts[0] >= counts[2]
        assert _count_calls(s) == ["/localfa/count_tokens", "/tokenize"]  # one count, whatever the number of texts
        assert engine.token_unit() == "tokens_shared_by_chars"
        assert engine.count_tokens("a b c d") == 4
        engine.close()


def test_counting_asks_a_live_server_not_the_first_url():
    with FakeOpenAI(counts=True) as a, FakeOpenAI(counts=True) as b:
        engine = OpenAIEngine([a.url, b.url], first_probe_s=60)
        a.stop()
        engine.generate([_req(f"t{i}", i) for i in range(6)])  # a leaves the rotation
        assert engine.live() == [b.url + "/v1"]
        assert engine.count_tokens_many(TEXTS) == [3, 2, 1]
        assert _count_calls(b) == ["/localfa/count_tokens"]
        engine.close()


def test_a_fallback_to_characters_is_a_warning_and_shows_in_the_unit():
    said: list[str] = []
    with FakeOpenAI() as s:
        engine = OpenAIEngine([s.url], say=said.append, first_probe_s=60)
        s.stop()
        engine.rotation.take_out(s.url + "/v1", "stopped")
        assert engine.count_tokens_many(["x" * 40]) == [10]
        engine.count_tokens_many(["y" * 8])
        warnings = [m for m in said if "counting 4 characters a token" in m]
        assert len(warnings) == 1  # said once, not per call
        assert engine.token_unit() == "chars/4"
        engine.close()


def test_the_runner_hands_methods_the_batched_counter_and_unit():
    from localfa.methods.registry import get_method
    from localfa.traces.model import Step, Trace

    engine = ScriptedEngine(lambda r: "ok")
    trace = Trace(id="t", source="t.json", format="messages", steps=[Step(index=0, agent="a", role="assistant", content="x")])
    ctx = MethodContext(trace)
    method_job(engine, get_method("random"), ctx)
    assert ctx.count_tokens_many(["a b", "c"]) == [2, 1]
    assert ctx.token_unit() == "tokens"


def test_an_http_session_builds_no_thread_pool_per_request(monkeypatch):
    built: list[int] = []
    real = openai_backend.ThreadPoolExecutor

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(openai_backend, "ThreadPoolExecutor", counting)
    with FakeOpenAI() as s:
        engine = OpenAIEngine([s.url])
        session = engine.session()
        session.submit([_req(f"t{i}", i) for i in range(20)])
        done = []
        while session.pending():
            done += session.wait()
        assert len(done) == 20
        engine.generate([_req(f"u{i}", i) for i in range(5)])
        engine.generate([_req(f"v{i}", i) for i in range(5)])
        assert len(built) == 2  # the session's pool and the engine's batch pool, each once
        engine.close()


def test_local_backends_count_a_batch_as_their_tokenizer_counts_each_text():
    """The in-process backends count many texts in one tokenizer call, with the same counts."""
    import pytest

    from localfa.engine.counting import count_with, fast_counter
    from localfa.engine.model import embedded_model_dir_if_ready

    model_dir = embedded_model_dir_if_ready()
    if model_dir is None:
        pytest.skip("the embedded model is not converted yet")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    texts = ["Orchestrator: search the web.\n", 'WebSurfer: {"rows": 42}\n', "", "naïve café ☕ " * 20]
    assert fast_counter(tok) is not None  # counted by the Rust core, without the Python wrapper
    assert count_with(tok, texts) == [len(tok.encode(t, add_special_tokens=False)) for t in texts]
    assert count_with(tok, texts) == [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]


def test_a_tokenizer_whose_rust_core_counts_otherwise_keeps_its_own_counts():
    """A tokenizer that edits text before its Rust core (here: upper-cases it) fails the self-check,
    so its counts stay its own; one without a Rust core is counted one text at a time."""
    from localfa.engine.counting import count_with, fast_counter

    class Core:
        def encode_batch_fast(self, texts: list[str], add_special_tokens: bool = False) -> list[list[str]]:
            return [t.split() for t in texts]

    class Editing:
        backend_tokenizer = Core()

        def encode(self, text: str, add_special_tokens: bool = False) -> list[str]:
            return list(text)  # characters: the Python side does its own thing

    class Plain:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[str]:
            return text.split()

    editing, plain = Editing(), Plain()
    assert fast_counter(editing) is None and fast_counter(plain) is None
    assert count_with(editing, ["ab cd", "e"]) == [5, 1]
    assert count_with(plain, ["ab cd", "e f g"]) == [2, 3]
    assert count_with(plain, []) == []
