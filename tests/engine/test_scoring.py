"""Score requests (issue 50), logic: engines that cannot score say so, the cache keys on the
score's segments and layers, and per-segment NLL is the mean over a segment's scored tokens."""

from __future__ import annotations

import pytest

from localfa.engine.base import BaseEngine, RawOutput
from localfa.engine.cache import request_key
from localfa.engine.errors import ScoreUnsupportedError
from localfa.engine.scoring import score_grammar, segment_nll, token_segments
from localfa.engine.scripted import ScriptedEngine
from localfa.engine.types import Request, Sampling, Score


def _req(score: Score | None) -> Request:
    return Request(({"role": "user", "content": "abc def"},), score_grammar(), Sampling(), key="k", score=score)


class _NoModel(BaseEngine):
    """A backend with no access to probabilities (as the OpenAI-compatible client)."""

    name = "nomodel"

    def _generate_raw(self, requests):
        return [RawOutput('{"ok": 1}', "stop") for _ in requests]


def test_an_engine_without_probabilities_refuses_to_score_and_still_generates():
    engine = _NoModel()
    with pytest.raises(ScoreUnsupportedError, match="cannot score"):
        engine.generate([_req(Score(((0, 3),)))])
    assert engine.generate([_req(None)])[0].value == {"ok": 1}


def test_the_scripted_stand_in_answers_in_the_batch_order_with_no_completion_tokens():
    engine = ScriptedEngine(lambda req: {"ok": 1})
    plain, scored = engine.generate([_req(None), _req(Score(((0, 3), (4, 7)), (-1,)))])
    assert plain.value == {"ok": 1}
    assert scored.value["segments"] == [-1, 0, 1] and len(scored.value["attention"]) == 2
    assert scored.usage.completion_tokens == 0 and scored.value["attention"][0][1] == 0.0


def test_cache_key_names_the_score():
    a, b, c = _req(Score(((0, 3),))), _req(Score(((0, 3),), (-1,))), _req(None)
    keys = {request_key("m", r) for r in (a, b, c)}
    assert len(keys) == 3


def test_segment_nll_is_the_mean_of_scored_tokens():
    value = {"logprobs": [None, -1.0, -3.0, -2.0, -5.0], "segments": [0, 0, 0, -1, 1]}
    assert segment_nll(value, 3) == [2.0, 5.0, None]


class _Offsets:
    """A tokenizer stub: one token per character, with its offsets."""

    def __call__(self, text: str, add_special_tokens: bool, return_offsets_mapping: bool) -> dict:
        return {"input_ids": [ord(c) for c in text], "offset_mapping": [(i, i + 1) for i in range(len(text))]}


def test_token_segments_place_spans_inside_the_templated_prompt():
    ids, segs = token_segments(_Offsets(), "<u>ab cd</u>", "ab cd", [(0, 2), (3, 5)])
    assert len(ids) == 12
    assert segs == [-1, -1, -1, 0, 0, -1, 1, 1, -1, -1, -1, -1]


def test_score_spec_refuses_bad_spans():
    with pytest.raises(ValueError):
        Score(((3, 1),))


def test_score_spec_refuses_spans_out_of_order():
    with pytest.raises(ValueError, match="ascending"):
        Score(((4, 6), (0, 2)))
