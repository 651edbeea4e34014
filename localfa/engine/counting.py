"""Token counts with a Hugging Face tokenizer, at the speed of its Rust core.

Methods count every new message exactly, once (SAFARI's budget, DRIFT's packets), so counting is
most of what the harness spends per call (`scripts/bench_harness.py --tokenizer embedded`). The
Python `__call__` of a fast tokenizer builds offsets, attention masks and a `BatchEncoding` only to
be measured; the Rust tokenizer behind it counts the same tokens with `encode_batch_fast` (no
offsets). That path is taken only where a self-check shows it counts as the tokenizer does (a
tokenizer that edits text in Python first, or has no Rust core, keeps its own `__call__`).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from localfa.tokens import CHECK_TEXT

BatchCounter = Callable[[list[str]], list[int]]
_FAST: "weakref.WeakKeyDictionary[Any, BatchCounter | None]" = weakref.WeakKeyDictionary()


def _rust_counter(tokenizer: Any) -> BatchCounter | None:
    """Counts from the tokenizer's Rust core, if it has one and it agrees on `CHECK_TEXT` (the
    text, and each of its lines)."""
    core = getattr(tokenizer, "backend_tokenizer", None)
    encode = getattr(core, "encode_batch_fast", None) or getattr(core, "encode_batch", None)
    if encode is None:
        return None

    def counts(texts: list[str]) -> list[int]:
        return [len(encoding) for encoding in encode(texts, add_special_tokens=False)]

    try:
        texts = [CHECK_TEXT, *CHECK_TEXT.splitlines()]
        agrees = counts(texts) == [len(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    except Exception:  # noqa: BLE001 - any failure means: use the tokenizer's own path
        return None
    return counts if agrees else None


def fast_counter(tokenizer: Any) -> BatchCounter | None:
    """The Rust-core counter for `tokenizer`, decided once per tokenizer object."""
    try:
        if tokenizer not in _FAST:
            _FAST[tokenizer] = _rust_counter(tokenizer)
        return _FAST[tokenizer]
    except TypeError:  # not weak-referenceable: decide each time
        return _rust_counter(tokenizer)


def count_with(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Tokens of each text (no special tokens), as one batch call: through the Rust core where
    it counts as the tokenizer does, else the tokenizer's own batch call, else one at a time."""
    texts = list(texts)
    if not texts:
        return []
    fast = fast_counter(tokenizer)
    if fast is not None:
        return fast(texts)
    if len(texts) > 1:
        try:
            return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        except (TypeError, KeyError, ValueError, AttributeError):
            pass
    return [len(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
