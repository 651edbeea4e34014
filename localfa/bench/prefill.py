"""What a GPU must prefill: prompts rendered with a real chat template, replayed through a prefix cache.

`PromptTokens` renders a request's messages with the model's chat template and tokenizes them,
fast enough to replay every prompt of a sweep: the rendered text is cut at the tokenizer's added
tokens (which it never merges with their neighbours) and long pieces again at points where the
pre-tokenizer always splits (a single newline between two non-spaces, a space before a capital
after a sentence's end), so a piece or chunk seen before (the trace, a system prompt, an earlier
turn) is looked up, not tokenized again. A self-check at start compares that with tokenizing the
whole text; a tokenizer it does not hold for is run on whole texts instead (slower, same counts).

`BlockPrefixCache` is vLLM's automatic prefix caching without a size bound: the prompt is cut
into 16-token blocks, a block hits only when every block before it hit too (its hash chains
them), only full blocks are kept, and the last prompt token is always computed (vLLM caps a hit
at the prompt length minus one). `replay` runs prompts through it in the order they were sent and
returns the tokens that had to be computed.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from localfa.engine.types import Message
from localfa.tokens import safe_chunks

BLOCK_TOKENS = 16  # vLLM's default block size
_SAMPLE = [
    {"role": "system", "content": "You find the step where a run went wrong.\nAnswer in JSON."},
    {
        "role": "user",
        "content": 'Trace:\n{"step_id": 0, "agent": "Orchestrator (thought)", "content": "Plan. First, search.\\n\\nThen verify."}\n'
        "Step 1 said: The value is 42. Then it stopped.\n  indented line\n\nAfter a blank line. Ünïcode ✓ 😀 done.\n"
        "def f(x):\n    return x + 1\n<|im_start|> is not a token here? Yes. End.",
    },
]


def load_tokenizer(directory: str | Path | None = None) -> Any:
    """A Hugging Face tokenizer with a chat template: from `directory`, or the embedded model's
    (its converted folder; never a download)."""
    from transformers import AutoTokenizer

    if directory is None:
        from localfa.engine.model import embedded_model_dir

        directory = embedded_model_dir()
    tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"{directory}: the tokenizer has no chat template (tokenizer_config.json 'chat_template' or chat_template.jinja)")
    return tok


class PromptTokens:
    """Token ids of rendered prompts and token counts of texts, with per-chunk caching."""

    def __init__(self, tokenizer: Any, template_kwargs: dict[str, Any] | None = None) -> None:
        self.tok = tokenizer
        self.template_kwargs = dict(template_kwargs or {})
        self._backend = tokenizer.backend_tokenizer
        added = {t.content: i for i, t in tokenizer.added_tokens_decoder.items()}
        self._added = added
        self._split = re.compile("(" + "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)) + ")") if added else None
        self._chunks: dict[str, array] = {}
        self.exact = True
        self.exact = self.self_check()

    # ---- rendering ---------------------------------------------------------------------------
    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text the server would build (chat template, generation prompt added)."""
        return str(self.tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True, **self.template_kwargs))

    def prompt_ids(self, messages: Sequence[Message]) -> array:
        """Token ids of the rendered prompt."""
        return self.text_ids(self.render(messages))

    def count(self, text: str) -> int:
        """Tokens of plain text (no template), as a method's token counter."""
        return len(self.text_ids(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    # ---- tokenizing with caches --------------------------------------------------------------
    def text_ids(self, text: str) -> array:
        """Ids of `text`; an added token's string is that token, as a server reads a rendered
        prompt (a trace quoting ``<|im_start|>`` gets the token too)."""
        if not self.exact:
            return self._encode([text])[0]
        parts = [p for p in (self._split.split(text) if self._split else [text]) if p]
        pieces = [self._cut(p) if p not in self._added else [] for p in parts]
        self._fill([c for cut in pieces for c in cut if c not in self._chunks])
        out = array("i")
        for part, cut in zip(parts, pieces):
            if not cut:
                out.append(self._added[part])
            for c in cut:
                out.extend(self._chunks[c])
        return out

    def _cut(self, piece: str) -> list[str]:
        if piece in self._chunks:
            return [piece]
        return safe_chunks(piece)

    def _fill(self, chunks: list[str]) -> None:
        todo = list(dict.fromkeys(chunks))
        for chunk, ids in zip(todo, self._encode(todo)):
            self._chunks[chunk] = ids

    def _encode(self, texts: list[str]) -> list[array]:
        if not texts:
            return []
        return [array("i", e.ids) for e in self._backend.encode_batch(texts, add_special_tokens=False)]

    def self_check(self) -> bool:
        """Whether chunked tokenizing equals tokenizing whole texts for this tokenizer."""
        text = self.render(_SAMPLE)
        whole = list(self._encode([text])[0])
        return list(self.text_ids(text)) == whole


class BlockPrefixCache:
    """An unbounded block-level prefix cache with vLLM's hit rule (see module doc)."""

    def __init__(self, block_tokens: int = BLOCK_TOKENS) -> None:
        self.block_tokens = block_tokens
        self._blocks: set[int] = set()

    def admit(self, ids: array) -> int:
        """Serve one prompt: the number of its tokens that hit the cache; its full blocks are
        cached afterwards."""
        width = self.block_tokens * ids.itemsize
        raw = ids.tobytes()
        full = len(ids) // self.block_tokens
        may_hit = (len(ids) - 1) // self.block_tokens  # the last token is always computed
        parent = 0
        hits = 0
        missed = False
        for b in range(full):
            key = hash((parent, raw[b * width : (b + 1) * width]))
            if not missed and b < may_hit and key in self._blocks:
                hits += 1
            else:
                missed = True
                self._blocks.add(key)
            parent = key
        return hits * self.block_tokens

    def clear(self) -> None:
        self._blocks.clear()


@dataclass
class Replay:
    """Prefill of a sequence of prompts through one cache."""

    prompts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


def replay(prompts: Iterable[array], cache: BlockPrefixCache | None = None) -> Replay:
    """Run token-id prompts through `cache` (a fresh one by default) in order."""
    cache = cache or BlockPrefixCache()
    out = Replay()
    for ids in prompts:
        out.prompts += 1
        out.prompt_tokens += len(ids)
        out.cached_tokens += cache.admit(ids)
    return out
