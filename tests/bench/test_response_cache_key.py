"""The response cache replays a call only when everything that decides its answer is the same.

A key that ignored the seed, grammar, a message, a sampling field or the model would replay a
wrong answer into a sweep (and the run would look reproducible while it is not).
"""

from __future__ import annotations

import dataclasses

import pytest

from localfa.engine.cache import CachingEngine, ResponseCache, request_key
from localfa.engine.examples import example_text
from localfa.engine.grammar import Grammar
from localfa.engine.scripted import ScriptedEngine
from localfa.engine.types import Request, Sampling

MESSAGES = ({"role": "system", "content": "You judge traces."}, {"role": "user", "content": "Which step?"})
BASE = Request(MESSAGES, Grammar.choice(["1", "2", "3"], name="step"), Sampling(0.7, 0.95, 16, seed=11), key="k")
IDENTITY = "vllm:" + "a" * 64


def with_sampling(**changes) -> Request:
    return dataclasses.replace(BASE, sampling=BASE.sampling.with_(**changes))


VARIANTS = {
    "seed": with_sampling(seed=12),
    "temperature": with_sampling(temperature=0.0),
    "top_p": with_sampling(top_p=0.5),
    "max_tokens": with_sampling(max_tokens=17),
    "grammar options": dataclasses.replace(BASE, grammar=Grammar.choice(["1", "2", "4"], name="step")),
    "grammar kind": dataclasses.replace(BASE, grammar=Grammar.regex("[123]", name="step")),
    "system message": dataclasses.replace(BASE, messages=({"role": "system", "content": "You judge runs."}, MESSAGES[1])),
    "user message": dataclasses.replace(BASE, messages=(MESSAGES[0], {"role": "user", "content": "Which agent?"})),
    "role": dataclasses.replace(BASE, messages=(MESSAGES[0], {"role": "assistant", "content": "Which step?"})),
    "one message more": dataclasses.replace(BASE, messages=MESSAGES + ({"role": "user", "content": "Be brief."},)),
}


def test_the_same_request_has_the_same_key():
    again = Request(
        tuple(dict(m) for m in MESSAGES), Grammar.choice(["1", "2", "3"], name="step"), Sampling(0.7, 0.95, 16, seed=11), key="k"
    )
    assert request_key(IDENTITY, again) == request_key(IDENTITY, BASE)


@pytest.mark.parametrize("what", sorted(VARIANTS))
def test_a_difference_that_changes_the_answer_changes_the_key(what):
    assert request_key(IDENTITY, VARIANTS[what]) != request_key(IDENTITY, BASE)


def test_another_model_or_backend_changes_the_key():
    assert request_key("vllm:" + "b" * 64, BASE) != request_key(IDENTITY, BASE)
    assert request_key("openai:" + "a" * 64, BASE) != request_key(IDENTITY, BASE)


def test_a_changed_request_misses_the_cache_and_reaches_the_engine(tmp_path):
    cache = ResponseCache(tmp_path / "r.sqlite")
    first = CachingEngine(ScriptedEngine(lambda r: example_text(r.grammar, r.sampling.seed)), cache, IDENTITY)
    first.generate([BASE])
    assert (first.hits, first.misses) == (0, 1)
    calls: list[Request] = []

    def answer(req: Request) -> str:
        calls.append(req)
        return example_text(req.grammar, req.sampling.seed)

    second = CachingEngine(ScriptedEngine(answer), cache, IDENTITY)
    second.generate([BASE])
    assert (second.hits, second.misses, calls) == (1, 0, [])
    variants = [VARIANTS[w] for w in sorted(VARIANTS)]
    second.generate(variants)
    assert second.misses == len(variants) and len(calls) == len(variants)
    other_model = CachingEngine(ScriptedEngine(answer), cache, "vllm:" + "b" * 64)
    other_model.generate([BASE])
    assert other_model.misses == 1 and len(calls) == len(variants) + 1
