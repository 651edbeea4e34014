"""Issue 53.1: a thinking model's profile turns thinking on with vLLM's reasoning parser, so the
grammar constrains only what follows the thinking section, within a thinking budget per request."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from localfa.engine.settings import EngineSettings, load_profile
from localfa.engine.vllm_backend import answer_after_thinking, engine_kwargs
from serving.launch import server_command


def test_the_thinking_profile_starts_vllm_with_its_reasoning_parser_and_the_grammar_after_thinking():
    settings = load_profile("gpu-single")
    assert settings.enable_thinking and settings.reasoning_parser == "qwen3" and settings.thinking_tokens > 0
    kwargs = engine_kwargs(settings, Path("/models/Qwen3-32B"), is_cpu=False)
    assert kwargs["reasoning_parser"] == "qwen3"
    # enable_in_reasoning off (vLLM's default): the grammar waits for the end of the thinking section
    assert "enable_in_reasoning" not in kwargs["structured_outputs_config"]
    cmd = server_command(settings, Path("/models/Qwen3-32B"), "127.0.0.1", 8000, is_cpu=False)
    assert cmd[cmd.index("--reasoning-parser") + 1] == "qwen3"


def test_a_thinking_server_gets_each_requests_thinking_budget_over_http():
    """`localfa serve` of a thinking profile reports its reasoning settings; the openai backend
    then sends each request's thinking budget (the answer keeps its own max_tokens after it),
    turns the template's thinking on as the server's profile says, and keeps the budget out of
    the window the methods fit their prompts in. A server without a parser gets none of it."""
    from localfa.engine.grammar import Grammar
    from localfa.engine.openai_backend import OpenAIEngine
    from localfa.engine.types import Request, Sampling
    from serving.launch import served_info
    from tests.engine.http_fakes import FakeOpenAI

    settings = load_profile("gpu-single")
    answer = served_info(settings, Path(__file__).parent)["answer_settings"]
    assert (answer["reasoning_parser"], answer["thinking_tokens"], answer["enable_thinking"]) == ("qwen3", settings.thinking_tokens, True)
    req = Request(({"role": "user", "content": "hi"},), Grammar.choice(["ok"]), Sampling(temperature=0.0, max_tokens=50, seed=1), key="k")
    thinking = {"sha256": "a" * 64, "model": "m", "answer_settings": answer}
    plain = {"sha256": "a" * 64, "model": "m", "answer_settings": {**answer, "reasoning_parser": None, "thinking_tokens": 0}}
    for served, budget in ((thinking, settings.thinking_tokens), (plain, 0)):
        with FakeOpenAI(fingerprint=served, content="ok", max_model_len=32768) as server:
            server.seen = []
            engine = OpenAIEngine([server.url])
            engine.generate([req])
            body = server.seen[-1]
            assert body["max_tokens"] == 50 + budget and body.get("thinking_token_budget") == (budget or None)
            assert body["chat_template_kwargs"] == {"enable_thinking": bool(budget)}
            assert engine.max_model_len == 32768 - budget
            engine.close()


def test_profiles_of_models_that_do_not_think_start_no_reasoning_parser():
    for name in ("cpu-embedded", "gpu-node-8x"):
        settings = load_profile(name)
        assert "reasoning_parser" not in engine_kwargs(settings, Path("/m"), is_cpu=name.startswith("cpu"))
        assert "--reasoning-parser" not in server_command(settings, Path("/m"), "127.0.0.1", 8000, is_cpu=True)
    # where the model does not think, SAFARI's written reasoning gets the room instead
    assert load_profile("gpu-node-8x").methods["safari"]["limits"]["analysis_chars"] >= 4000


class _Completion:
    def __init__(self, ids: list[int], text: str) -> None:
        self.token_ids, self.text = ids, text


class _Tok:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


def test_the_answer_is_what_follows_the_thinking_section():
    think = [ord(c) for c in "hmm, step 3"] + [7]  # 7: the end-of-thinking token
    answer = [ord(c) for c in '{"a": 1}']
    assert answer_after_thinking(_Completion(think + answer, "x"), (7,), _Tok()) == '{"a": 1}'
    assert answer_after_thinking(_Completion(answer, '{"a": 1}'), (7,), _Tok()) == '{"a": 1}'


def _think(model_dir: str) -> tuple[int, int, int, str]:
    """In a child process (a second vLLM engine closed in the test process would tear down state the
    session's shared engine still uses): (thinking budget, max_tokens, tokens before the end marker,
    the answer text)."""
    from vllm.reasoning import ReasoningParserManager
    from vllm.reasoning.basic_parsers import BaseThinkingReasoningParser

    from localfa.engine import vllm_backend
    from localfa.engine.grammar import Grammar
    from localfa.engine.types import Request, Sampling

    class _TestThink(BaseThinkingReasoningParser):
        @property
        def start_token(self) -> str:
            return "<|im_start|>"

        @property
        def end_token(self) -> str:
            return "<jupyter_code>"

    ReasoningParserManager.register_module("localfa-test-think", module=_TestThink)
    seen = []
    real = vllm_backend.answer_after_thinking
    vllm_backend.answer_after_thinking = lambda c, end, tok: seen.append((list(c.token_ids), tuple(end))) or real(c, end, tok)
    base = load_profile("cpu-embedded")
    settings = EngineSettings(**{**base.as_dict(), "reasoning_parser": "localfa-test-think", "thinking_tokens": 12, "cpu_kv_cache_gib": 1})
    engine = vllm_backend.VLLMEngine(Path(model_dir), settings)
    try:
        params = engine._sampling_params(
            Request(({"role": "user", "content": "x"},), Grammar.choice(["ok"]), Sampling(temperature=0, max_tokens=8, seed=0))
        )
        grammar = Grammar.json({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, name="n")
        req = Request(({"role": "user", "content": "Pick a number."},), grammar, Sampling(temperature=0.7, max_tokens=24, seed=1), key="k")
        (resp,) = engine.generate([req])
    finally:
        engine.close()
    (ids, end), *_ = seen
    cut = next(i for i in range(len(ids)) if tuple(ids[i : i + len(end)]) == end)
    return params.thinking_token_budget, params.max_tokens, cut, resp.text


@pytest.mark.real
def test_real_vllm_request_thinks_freely_then_answers_in_the_grammar(embedded_model_dir):
    """The embedded model does not think, so a reasoning parser is registered over two of its own
    special tokens (start: the chat template's `<|im_start|>`, which opens the assistant turn;
    end: `<jupyter_code>`): the engine's request carries the profile-style settings, the model
    writes its budget of thinking tokens unconstrained, vLLM forces the end marker, and only then
    does the grammar apply."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        budget, max_tokens, cut, text = pool.submit(_think, str(embedded_model_dir)).result()
    assert budget == 12 and max_tokens == 8 + 12
    assert cut >= 8  # it thought (the budget less the assistant header already in the prompt)
    assert isinstance(json.loads(text)["n"], int)  # after thinking: the grammar's answer


def test_a_reasoning_parser_and_thinking_budget_are_part_of_the_answer_identity():
    from localfa.engine.identity import answer_settings

    plain = answer_settings({"max_model_len": 8192}, {})
    thinking = answer_settings({"max_model_len": 8192, "reasoning_parser": "qwen3", "thinking_tokens": 4096}, {})
    assert "reasoning_parser" not in plain  # an engine without them keeps the identity it had
    assert (thinking["reasoning_parser"], thinking["thinking_tokens"]) == ("qwen3", 4096)
