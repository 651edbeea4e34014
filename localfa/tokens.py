"""Token counting without loading a model: the `tokenizers` library on a local tokenizer.json."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """A rough count (4 characters a token) for when no tokenizer is at hand."""
    return (len(text) + 3) // 4


@lru_cache(maxsize=4)
def _load(path: str) -> TokenCounter:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    return count


def token_counter(model_dir: str | Path | None = None) -> tuple[str, TokenCounter]:
    """(name, counter) for a local model folder; the embedded model's when `model_dir` is None.

    Falls back to `approx_tokens` (named "approx") when no tokenizer.json is available, e.g. the
    embedded model has not been converted yet or the `tokenizers` package is not installed.
    """
    if model_dir is None:
        from localfa.engine.model import embedded_model_dir_if_ready

        model_dir = embedded_model_dir_if_ready()
    if model_dir is not None:
        tok_file = Path(model_dir) / "tokenizer.json"
        if tok_file.is_file():
            try:
                return Path(model_dir).name, _load(str(tok_file))
            except ImportError:
                pass
    return "approx", approx_tokens
