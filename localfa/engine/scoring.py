"""Score, don't generate: a prompt's token log-probabilities and per-segment attention.

A `Request` with `score` set (`localfa.engine.types.Score`) is answered by one prefill, no
decoding: the answer (a JSON object, the response's `value`) holds

- ``logprobs``: one per prompt token, the log-probability of that token given the ones before
  (``null`` for the first, which nothing predicts);
- ``segments``: one per prompt token, the index of the span (`Score.spans`) it falls in, else -1
  (chat-template tokens, text between spans);
- ``attention``: where the backend computes it and `Score.layers` names layers, an S x S list:
  ``attention[i][j]`` = segment i's tokens' total attention to segment j's tokens, averaged over
  i's tokens, the heads and the chosen layers (causal: zero for j after i); else ``null``;
- ``layers``: the absolute layer indices used.

The attention is computed from each chosen layer's queries and keys after RoPE, captured as the
model's own (sdpa) attention runs, in chunks of `Score.chunk` query rows: never an L x L matrix
(at most heads x chunk x L floats at a time). Logits are also computed in chunks of rows, so an
8k-token prompt never holds an 8k x vocabulary matrix. Usage counts prompt tokens and no
completion tokens.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
from typing import Any, Iterator, Sequence

from localfa.engine.base import RawOutput
from localfa.engine.errors import EngineError
from localfa.engine.grammar import Grammar

LOGIT_ROWS = 512  # rows of hidden states turned into logits at a time


def score_grammar() -> Grammar:
    """The grammar a score request carries: any JSON object (the answer is built, not sampled)."""
    return Grammar.json({"type": "object"}, name="score")


def content_offset(prompt: str, content: str) -> int:
    """Where the last message's content starts in the templated prompt (the last occurrence)."""
    at = prompt.rfind(content)
    if at < 0:
        raise EngineError("score request: the chat template altered the content; its spans cannot be placed")
    return at


def token_segments(tokenizer: Any, prompt: str, content: str, spans: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """The prompt's token ids and, per token, the span its first character falls in (-1: none).
    Spans are character offsets into `content`, which the templated `prompt` contains."""
    enc = tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    base = content_offset(prompt, content)
    starts = [base + a for a, _ in spans]
    segs: list[int] = []
    for start, end in enc["offset_mapping"]:
        k = bisect.bisect_right(starts, start) - 1
        inside = k >= 0 and start < base + spans[k][1] and end > start
        segs.append(k if inside else -1)
    return ids, segs


def answer(logprobs: Sequence[float | None], segments: Sequence[int], attention: Any, layers: Sequence[int]) -> dict[str, Any]:
    """The score answer's JSON object (see the module doc)."""
    return {
        "logprobs": [None if x is None else round(float(x), 6) for x in logprobs],
        "segments": list(segments),
        "attention": attention,
        "layers": list(layers),
    }


def segment_nll(value: dict[str, Any], n_segments: int) -> list[float | None]:
    """Mean token negative log-likelihood per segment (None: a segment without a scored token)."""
    total = [0.0] * n_segments
    count = [0] * n_segments
    for lp, seg in zip(value["logprobs"], value["segments"]):
        if lp is not None and 0 <= seg < n_segments:
            total[seg] -= lp
            count[seg] += 1
    return [t / c if c else None for t, c in zip(total, count)]


# ---- the transformers computation -----------------------------------------------------------


class SegmentAttention:
    """Accumulates, layer by layer, segment-to-segment attention from captured queries and keys."""

    def __init__(self, segments: Sequence[int], n_segments: int, chunk: int) -> None:
        import torch

        self.torch = torch
        seg = torch.tensor(list(segments), dtype=torch.long)
        self.rows = torch.nonzero(seg >= 0).flatten()
        self.row_seg = seg[self.rows]
        self.n = n_segments
        self.chunk = chunk
        self.onehot = torch.zeros(len(segments), n_segments)
        self.onehot[self.rows, self.row_seg] = 1.0
        self.total = torch.zeros(n_segments, n_segments, dtype=torch.float64)
        self.layers = 0

    def add(self, query: Any, key: Any, scaling: float) -> None:
        """One layer: query (1, H, L, d) and key (1, Hkv, L, d) after RoPE."""
        torch = self.torch
        q, k = query[0].float(), key[0].float()
        if k.shape[0] != q.shape[0]:
            k = k.repeat_interleave(q.shape[0] // k.shape[0], dim=0)
        positions = torch.arange(k.shape[1])
        for a in range(0, len(self.rows), self.chunk):
            probs = attention_rows(q, k, self.rows[a : a + self.chunk], scaling, positions)
            self.total.index_add_(0, self.row_seg[a : a + self.chunk], (probs.mean(0) @ self.onehot).double())
        self.layers += 1

    def matrix(self) -> list[list[float]]:
        counts = self.torch.bincount(self.row_seg, minlength=self.n).clamp(min=1).double()
        out = self.total / (counts[:, None] * max(self.layers, 1))
        return [[round(float(x), 7) for x in row] for row in out]


def attention_rows(q: Any, k: Any, rows: Any, scaling: float, positions: Any) -> Any:
    """softmax(q k^T) for the query `rows` only, causal: (heads, len(rows), L)."""
    import torch

    scores = torch.einsum("hcd,hld->hcl", q[:, rows], k) * scaling
    scores = scores.masked_fill(positions[None, None, :] > rows[None, :, None], -math.inf)
    return torch.softmax(scores, dim=-1)


@contextlib.contextmanager
def attention_probe(model: Any, layers: Sequence[int], sink: SegmentAttention) -> Iterator[None]:
    """While open, the model's attention implementation also hands `layers`' queries and keys
    (after RoPE) to `sink`; the forward itself is unchanged (sdpa)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    impl = model.config._attn_implementation
    if impl not in ALL_ATTENTION_FUNCTIONS.valid_keys():
        raise EngineError(f"score request: attention probes need a registered attention implementation (sdpa), not {impl!r}")
    original = ALL_ATTENTION_FUNCTIONS[impl]
    chosen = set(layers)

    def probed(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        if getattr(module, "layer_idx", None) in chosen:
            sink.add(query, key, float(kwargs.get("scaling") or module.scaling))
        return original(module, query, key, value, attention_mask, **kwargs)

    had_local = impl in ALL_ATTENTION_FUNCTIONS._local_mapping
    ALL_ATTENTION_FUNCTIONS[impl] = probed
    try:
        yield
    finally:
        if had_local:
            ALL_ATTENTION_FUNCTIONS[impl] = original
        else:
            del ALL_ATTENTION_FUNCTIONS[impl]


def resolve_layers(model: Any, layers: Sequence[int]) -> list[int]:
    """Absolute layer indices (negative: counted from the last), each once, in order."""
    n = int(model.config.num_hidden_layers)
    if any(not -n <= x < n for x in layers):
        raise EngineError(f"score request: layers {list(layers)} outside the model's {n}")
    return sorted({x % n for x in layers})


def token_logprobs(model: Any, hidden: Any, ids: Sequence[int], rows: int = LOGIT_ROWS) -> list[float | None]:
    """log P(token t | tokens < t) from the last hidden states, `rows` logits rows at a time."""
    import torch

    head = model.get_output_embeddings()
    target = torch.tensor(list(ids[1:]), dtype=torch.long)
    out: list[float | None] = [None]
    for a in range(0, len(target), rows):
        logits = head(hidden[a : a + rows]).float()
        lp = torch.log_softmax(logits, dim=-1).gather(1, target[a : a + rows, None])[:, 0]
        out.extend(float(x) for x in lp)
    return out


def score_forward(
    model: Any, ids: Sequence[int], segments: Sequence[int], n_segments: int, layers: Sequence[int], chunk: int
) -> dict[str, Any]:
    """One prefill of `ids` through a transformers causal LM: the score answer (module doc)."""
    import torch

    chosen = resolve_layers(model, layers) if layers else []
    sink = SegmentAttention(segments, n_segments, chunk) if chosen else None
    input_ids = torch.tensor([list(ids)], dtype=torch.long)
    with torch.inference_mode():
        probe = attention_probe(model, chosen, sink) if sink is not None else contextlib.nullcontext()
        with probe:
            hidden = model.base_model(input_ids=input_ids, use_cache=False).last_hidden_state[0]
        logprobs = token_logprobs(model, hidden, ids)
    return answer(logprobs, segments, sink.matrix() if sink is not None else None, chosen)


# ---- the stand-in of engines without a model ------------------------------------------------


def stand_in_answer(
    content: str, spans: Sequence[tuple[int, int]], layers: Sequence[int], salient: Sequence[bool] | None = None
) -> dict[str, Any]:
    """A score answer for engines without a model (scripted, oracle): one "token" per word of
    each span, its log-probability a fixed function of the word (a hash: blind, deterministic),
    attention spread evenly over earlier words. Where `salient` marks a segment (the oracle: the
    segment carries the fault's words), its words are 3 nats more surprising and every later
    segment pays it four times its share of attention: what a model that noticed it would show.
    Never a model's figure: it exercises a method's logic and measures its ceiling."""
    import zlib

    salient = list(salient or [False] * len(spans))
    logprobs: list[float | None] = [None]
    segments = [-1]
    sizes = []
    for s, (a, b) in enumerate(spans):
        words = content[a:b].split() or [""]
        sizes.append(len(words))
        for w in words:
            logprobs.append(-(0.5 + (zlib.crc32(w.encode()) % 1000) / 250.0) - (3.0 if salient[s] else 0.0))
            segments.append(s)
    attention = None
    if layers:
        weight = [n * (4.0 if salient[s] else 1.0) for s, n in enumerate(sizes)]
        attention = []
        for i in range(len(spans)):
            total = sum(weight[: i + 1])
            attention.append([round(weight[j] / total, 7) if j <= i else 0.0 for j in range(len(spans))])
    return answer(logprobs, segments, attention, [int(x) for x in layers])


def stand_in_outputs(requests: Sequence[Any], salient_of: Any = None) -> list[Any]:
    """Raw outputs of `stand_in_answer` for score requests; `salient_of(req, content, spans)`
    marks segments where given."""
    outs = []
    for req in requests:
        spec = req.score
        content = req.messages[-1].get("content", "") if req.messages else ""
        salient = salient_of(req, content, spec.spans) if salient_of is not None else None
        value = stand_in_answer(content, spec.spans, spec.layers, salient)
        outs.append(RawOutput(text=json.dumps(value), finish_reason="stop", prompt_tokens=len(value["segments"])))
    return outs
