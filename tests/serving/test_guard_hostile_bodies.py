"""`/localfa/count_tokens` answers a hostile body with a 400 and one line, never a 500 with a
traceback (issue 55, case 12): a lone surrogate (half an emoji) is counted as U+FFFD, JSON nested
too deep is refused."""

from __future__ import annotations

import pytest

from tests.serving.test_guard import KEY, _client, word_tokenizer

pytest.importorskip("starlette")


def test_count_tokens_survives_a_lone_surrogate_and_deep_json(monkeypatch, tmp_path):
    client = _client(monkeypatch, KEY, word_tokenizer(tmp_path))
    auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    half = client.post("/localfa/count_tokens", headers=auth, content=b'{"texts": ["a \\ud83d b"]}')
    assert half.status_code == 200 and half.json() == {"counts": [3]}
    deep = client.post("/localfa/count_tokens", headers=auth, content=b'{"texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]
