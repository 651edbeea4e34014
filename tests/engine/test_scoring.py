"""Score requests (issue 50), logic: engines that cannot score say so, the cache keys on the
score's segments and layers, and per-segment NLL is the mean over a segment's scored tokens."""

from __future__ import annotations

import pytest

from localfa.engine.cache import request_key
from localfa.engine.scoring import ScoreUnsupportedError, score_grammar, segment_nll, token_segments
from localfa.engine.scripted import ScriptedEngine
from localfa.engine.types import Request, Sampling, Score


def _req(score: Score | None) -> Request:
    return Request(({"role": "user", "content": "abc def"},), score_grammar(), Sampling(), key="k", score=score)


def test_an_engine_without_probabilities_refuses_to_score_and_still_generates():
    engine = ScriptedEngine(lambda req: {"ok": 1})
    with pytest.raises(ScoreUnsupportedError, match="cannot score"):
        engine.generate([_req(Score(((0, 3),)))])
    assert engine.generate([_req(None)])[0].value == {"ok": 1}


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
