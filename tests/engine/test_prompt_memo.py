"""The in-process vLLM engine templates and tokenizes a prompt once when a method measures it and
then sends it, and counts a text once however often it is measured (issue 26: each SAFARI turn
did both on the whole, growing prompt)."""

from __future__ import annotations

from types import SimpleNamespace

import localfa.engine.vllm_backend as vllm_backend
from localfa.engine.vllm_backend import VLLMEngine


class CountingTokenizer:
    def __init__(self) -> None:
        self.calls = 0
        self.encoded = 0
        self.batches = 0

    def encode(self, text, add_special_tokens):
        self.encoded += 1
        return text.split()

    def __call__(self, texts, add_special_tokens):
        self.batches += 1
        return {"input_ids": [t.split() for t in texts]}

    def apply_chat_template(self, messages, tokenize, add_generation_prompt, enable_thinking):
        self.calls += 1
        return [len(m["content"]) for m in messages] + [0]


def _engine() -> VLLMEngine:
    engine = object.__new__(VLLMEngine)  # no model: only the tokenizing path is exercised
    engine.tokenizer = CountingTokenizer()
    engine.settings = SimpleNamespace(enable_thinking=False)
    engine._prompt_memo = {}
    engine._count_memo = {}
    return engine


def test_a_measured_prompt_is_tokenized_once_when_sent(monkeypatch):
    engine = _engine()
    prompt = [{"role": "system", "content": "rules"}, {"role": "user", "content": "trace " * 100}]
    assert engine.count_prompt_tokens(prompt) == 3
    ids = engine._prompt_ids([dict(m) for m in prompt])  # equal messages, other objects
    ids.append(99)  # a caller's change does not reach the remembered ids
    assert engine._prompt_ids(prompt) == [5, 600, 0]
    assert engine.tokenizer.calls == 1
    engine._prompt_ids([*prompt[:1], {"role": "user", "content": "other"}])
    assert engine.tokenizer.calls == 2


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(vllm_backend, "PROMPT_MEMO", 3)
    engine = _engine()
    for i in range(10):
        engine._prompt_ids([{"role": "user", "content": f"q{i}"}])
    assert len(engine._prompt_memo) == 3


def test_counted_texts_are_remembered_and_new_ones_counted_in_one_call(monkeypatch):
    monkeypatch.setattr(vllm_backend, "COUNT_MEMO", 3)
    engine = _engine()
    history = ["a b c", "d e"]
    for _ in range(5):  # a method measuring the same messages every turn
        assert engine.count_tokens_many(history) == [3, 2]
        assert [engine.count_tokens(t) for t in history] == [3, 2]
    assert engine.tokenizer.batches == 1 and engine.tokenizer.encoded == 0
    assert engine.count_tokens_many([*history, "f", "g h", "f"]) == [3, 2, 1, 2, 1]
    assert engine.tokenizer.batches == 2 and engine.tokenizer.encoded == 0  # the two new texts, in one call
    assert len(engine._count_memo) == 3
