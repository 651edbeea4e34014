"""Token counting without loading a model: the `tokenizers` library on a local tokenizer.json."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Callable

TokenCounter = Callable[[str], int]

#: Points where byte-level (GPT-2, Llama 3) pre-tokenizers always split: a single newline between
#: two non-spaces, a space before a capital after a sentence's end. Text cut here tokenizes to the
#: tokens of the whole, so a chunk counted once is never tokenised again (check it per tokenizer:
#: `localfa.bench.prefill.PromptTokens.self_check`, `PromptMeter.calibrate`).
#: The text a counting shortcut is checked on before it is trusted for a tokenizer (counts summed
#: over `line_pieces`, the Rust core behind a Python tokenizer): leading spaces, numbered lines,
#: JSON, sentence ends, non-ASCII, a blank line, code with a tab, trailing spaces.
CHECK_TEXT = (
    '  Read the run.\n  12 (step 3)| {"step_id": 3, "agent": "Coder", "content": "x = 42. Then it stopped."}\n'
    "  13 (step 3)| Ünïcode ✓ done.\n\nNext. Step\ndef f(x):\n\treturn x  # ok\n  "
)

SAFE_CUTS = re.compile(r"(?<=\S\n)(?=\S)|(?<=[a-z0-9][.!?])(?= [A-Z])")


def safe_chunks(text: str) -> list[str]:
    """`text` cut at `SAFE_CUTS`."""
    bounds = [0, *(m.start() for m in SAFE_CUTS.finditer(text)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def line_pieces(text: str) -> list[str]:
    """`text` cut before each newline that follows a non-space: byte-level pre-tokenizers never
    join a newline to what precedes it there, and a line's leading whitespace (a numbered line's
    padding) stays with the newline in front of it. Faster than a regular expression (a split)."""
    parts = text.split("\n")
    out: list[str] = []
    cur = parts[0]
    for nxt in parts[1:]:
        if cur and not cur[-1].isspace():
            out.append(cur)
            cur = "\n" + nxt
        else:
            cur += "\n" + nxt
    if cur:
        out.append(cur)
    return out


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
