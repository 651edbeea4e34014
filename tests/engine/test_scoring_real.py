"""Score, don't generate, on the real embedded model (issue 50): the scored log-probabilities are
a direct forward pass's, and the chunked segment attention is the full attention matrix's."""

from __future__ import annotations

from typing import Any

import pytest

from localfa.engine.scoring import score_grammar, segment_nll
from localfa.engine.types import Request, Sampling, Score

pytestmark = pytest.mark.real

CONTENT = (
    "[0] Planner: Search the web for the population of Lyon in 2020.\n"
    "[1] WebSurfer: Error: the page could not be loaded (HTTP 404).\n"
    "[2] Planner: Then the population is 42 people. FINAL ANSWER: 42"
)


def _spans() -> tuple[tuple[int, int], ...]:
    starts = [CONTENT.index(f"[{i}]") for i in range(3)]
    ends = [s - 1 for s in starts[1:]] + [len(CONTENT)]
    return tuple(zip(starts, ends))


@pytest.fixture(scope="module")
def engine() -> Any:
    from localfa.engine.model import embedded_model_dir_if_ready

    model_dir = embedded_model_dir_if_ready()
    if model_dir is None:
        pytest.skip("the embedded model is not converted yet")
    from localfa.engine.transformers_backend import TransformersEngine

    return TransformersEngine(model_dir)


def _score(engine: Any, layers: tuple[int, ...], chunk: int) -> Any:
    req = Request(({"role": "user", "content": CONTENT},), score_grammar(), Sampling(), key="s", score=Score(_spans(), layers, chunk))
    return engine.generate([req])[0]


def test_scores_are_a_direct_forward_pass(engine: Any) -> None:
    import torch

    resp = _score(engine, (), 128)
    ids = engine.tokenizer(engine._prompt([{"role": "user", "content": CONTENT}]), add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = engine.hf_model(torch.tensor([ids])).logits[0].float()
    direct = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    got = resp.value["logprobs"]
    assert got[0] is None and len(got) == len(ids)
    assert torch.allclose(torch.tensor(got[1:]), direct, atol=1e-4)
    assert resp.usage.prompt_tokens == len(ids) and resp.usage.completion_tokens == 0
    nll = segment_nll(resp.value, 3)
    assert all(x is not None and x > 0 for x in nll)
    assert resp.value["attention"] is None  # no layers asked: no attention


def test_chunked_attention_is_the_full_matrix(engine: Any) -> None:
    import torch

    layers = (-2, -1)
    resp = _score(engine, layers, 7)  # 7 query rows at a time: many chunks on a short input
    ids = engine.tokenizer(engine._prompt([{"role": "user", "content": CONTENT}]), add_special_tokens=False)["input_ids"]
    segs = torch.tensor(resp.value["segments"])
    model = engine.hf_model
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            full = model(torch.tensor([ids]), output_attentions=True).attentions
    finally:
        model.set_attn_implementation("sdpa")
    n_layers = model.config.num_hidden_layers
    mats = torch.stack([full[x % n_layers][0].mean(0) for x in layers]).mean(0)  # (L, L): heads, layers averaged
    expected = torch.zeros(3, 3, dtype=torch.float64)
    for i in range(3):
        rows = mats[segs == i]
        for j in range(3):
            expected[i, j] = rows[:, segs == j].sum(1).mean()
    got = torch.tensor(resp.value["attention"], dtype=torch.float64)
    assert torch.allclose(got, expected, atol=1e-5)
    assert got[0, 1] == 0 and got[0, 2] == 0 and got[2, 0] > 0  # causal
    assert resp.value["layers"] == [n_layers - 2, n_layers - 1]
