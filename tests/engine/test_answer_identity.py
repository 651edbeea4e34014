"""Caches and manifests know what answered (issue 25.5, 24.8): the model fingerprint covers every
file that changes answers, the response cache identity covers every answer setting, and over
HTTP the identity is what `localfa serve` reports it serves; secrets stay out of the manifest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from localfa.engine.cache import CachingEngine, ResponseCache
from localfa.engine.factory import cache_identity
from localfa.engine.model import model_fingerprint
from localfa.engine.openai_backend import OpenAIEngine
from localfa.engine.scripted import ScriptedEngine
from localfa.manifest import build_manifest
from tests.engine.http_fakes import FakeOpenAI
from tests.engine.test_servers import OK, _req


@pytest.fixture
def model(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LOCALFA_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "model"
    root.mkdir()
    for name, text in {
        "config.json": "{}",
        "model.safetensors": "w",
        "tokenizer.json": "{}",
        "merges.txt": "a b",
        "vocab.json": "{}",
        "chat_template.jinja": "{{ messages }}",
        "special_tokens_map.json": "{}",
    }.items():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("name", ["chat_template.jinja", "merges.txt", "vocab.json", "model.safetensors", "special_tokens_map.json"])
def test_the_fingerprint_changes_with_every_file_that_changes_answers(model, name):
    before = model_fingerprint(model)["sha256"]
    (model / name).write_text((model / name).read_text() + " edited")
    assert model_fingerprint(model)["sha256"] != before
    (model / "README.md").write_text("notes")  # never changes an answer
    after = model_fingerprint(model)["sha256"]
    (model / "README.md").write_text("other notes")
    assert model_fingerprint(model)["sha256"] == after


class Reported(ScriptedEngine):
    """A scripted engine that reports what in-process vLLM reports about its settings."""

    def __init__(self, **kw) -> None:
        super().__init__(lambda r: "ok", max_model_len=kw.get("max_model_len", 8192))
        self.kw = {"dtype": "bfloat16", "backend": "guidance", "vllm_version": "0.32.0", "thinking": False, "extra": {}, **kw}
        self.model_info = {"path": None, "sha256": "f" * 64, "name": "m"}

    def describe(self):
        k = self.kw
        return {
            "backend": "vllm",
            "vllm_version": k["vllm_version"],
            "max_model_len": self.max_model_len,
            "engine_args": {"dtype": k["dtype"], "structured_outputs_config": {"backend": k["backend"]}},
            "chat_template_kwargs": {"enable_thinking": k["thinking"]},
            "extra_args": k["extra"],
        }


@pytest.mark.parametrize(
    "change",
    [
        {"dtype": "float16"},
        {"backend": "xgrammar"},
        {"vllm_version": "0.33.0"},
        {"thinking": True},
        {"extra": {"kv_cache_dtype": "fp8"}},
        {"max_model_len": 4096},
    ],
    ids=lambda c: next(iter(c)),
)
def test_the_cache_identity_covers_every_answer_setting(change):
    assert cache_identity("vllm", Reported()) == cache_identity("vllm", Reported())
    assert cache_identity("vllm", Reported(**change)) != cache_identity("vllm", Reported())


def test_the_cache_identity_covers_the_trace_limits(monkeypatch):
    before = cache_identity("vllm", Reported())
    monkeypatch.setenv("LOCALFA_MAX_STEP_CHARS", "1000")
    assert cache_identity("vllm", Reported()) != before


SERVED = {
    "sha256": "a" * 64,
    "model": "m",
    "answer_settings": {
        "dtype": "bfloat16",
        "structured_outputs_backend": "guidance",
        "vllm_version": "0.32.0",
        "chat_template": "c" * 16,
        "sampling_defaults": None,
        "extra_args": {},
    },
}


def test_over_http_the_identity_is_what_localfa_serve_reports():
    edited = {**SERVED, "sha256": "b" * 64}
    with FakeOpenAI(fingerprint=SERVED) as a, FakeOpenAI(fingerprint=edited) as b:
        first, second = OpenAIEngine([a.url]), OpenAIEngine([b.url])
        assert first.model_info["sha256"] == "a" * 64
        assert cache_identity("openai", first) != cache_identity("openai", second)  # same name, root, window
        described = first.describe()
        assert described["dtype"] == "bfloat16" and described["vllm_version"] == "0.32.0"
        assert described["served_fingerprint"] == "a" * 64
        first.close()
        second.close()
        with pytest.raises(Exception, match="serve different models"):
            OpenAIEngine([a.url, b.url])
    with FakeOpenAI(fingerprint={**SERVED, "answer_settings": {**SERVED["answer_settings"], "dtype": "float16"}}) as c:
        third = OpenAIEngine([c.url])
        with FakeOpenAI(fingerprint=SERVED) as d:
            fourth = OpenAIEngine([d.url])
            assert cache_identity("openai", third) != cache_identity("openai", fourth)  # same weights, other dtype
            fourth.close()
        third.close()


def test_a_cache_entry_that_no_longer_validates_is_asked_again(tmp_path):
    engine = ScriptedEngine(lambda r: "ok")
    engine.model_info = {"name": "s"}
    cached = CachingEngine(engine, ResponseCache(tmp_path / "c.sqlite"), "id")
    req = _req("t", 0)
    assert cached.generate([req])[0].value == "ok"
    ((key,),) = cached.cache._db.execute("SELECT key FROM responses").fetchall()
    cached.cache.put_many([(key, {"text": "not ok", "finish_reason": "stop", "usage": {}, "latency_s": 0})])
    again = cached.generate([req])[0]
    assert again.value == "ok" and not again.from_cache and cached.stale == 1
    session = cached.session()
    cached.cache.put_many([(key, {"broken": True})])
    session.submit([req])
    (ticket, resp), *_ = session.wait() or session.wait()
    assert resp.value == "ok" and cached.stale == 2
    assert cached.generate([req])[0].from_cache  # overwritten with the fresh answer
    assert OK.name == "ok"


def test_the_manifest_never_records_the_api_key(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["localfa", "bench", "x", "--api-key", "sk-live-123456", "--out", "r"])
    monkeypatch.setenv("LOCALFA_API_KEY", "sk-env-abcdef")
    engine = ScriptedEngine(lambda r: "ok")
    engine.model_info = {"name": "s"}
    text = json.dumps(build_manifest(engine, seeds=[0], methods={}))
    assert "sk-live-123456" not in text and '"--api-key", "***"' in text


def test_a_run_made_before_a_setting_was_recorded_still_resumes():
    from localfa.bench.run_manifest import manifest_differences

    engine = Reported()
    new = build_manifest(engine, seeds=[0], methods={})
    old = json.loads(json.dumps(new))
    for key in ("enable_thinking", "extra_args", "limits"):
        del old["answer_settings"][key]
    assert manifest_differences(old, new) == []
    thinking = build_manifest(Reported(thinking=True), seeds=[0], methods={})
    assert manifest_differences(new, thinking) == ["enable_thinking: False -> True"]
