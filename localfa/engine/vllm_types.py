"""The vLLM type adapter: a `Grammar` as vLLM's structured-outputs fields.

Used by both vLLM backends (in-process `SamplingParams` and the HTTP request body), so the grammar
a server enforces is the one the in-process engine enforces. The fields come from Outlines' own
vLLM type adapter; a client host without Outlines gets the same mapping by hand.
"""

from __future__ import annotations

from typing import Any

from localfa.engine.errors import GrammarError
from localfa.engine.grammar import Grammar


def structured_outputs(grammar: Grammar) -> dict[str, Any]:
    """vLLM's structured-outputs fields for `grammar` (computed once per distinct grammar)."""
    return dict(_fields(grammar.fingerprint, grammar))


_CACHE: dict[str, dict[str, Any]] = {}


def _fields(fingerprint: str, grammar: Grammar) -> dict[str, Any]:
    hit = _CACHE.get(fingerprint)
    if hit is not None:
        return hit
    try:
        from outlines.models.vllm_offline import VLLMOfflineTypeAdapter

        fields = VLLMOfflineTypeAdapter().format_output_type(grammar.output_type())
    except ImportError:  # an HTTP-only client host may lack Outlines: the same mapping by hand
        fields = _by_hand(grammar)
    except Exception as exc:
        raise GrammarError(grammar.name, f"Outlines cannot express it: {exc}") from exc
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[fingerprint] = fields
    return fields


def forget_fields() -> None:
    """Forget the fields built so far (a benchmark measuring from cold grammars)."""
    _CACHE.clear()


def _by_hand(grammar: Grammar) -> dict[str, Any]:
    if grammar.kind == "json":
        return {"json": grammar.model_spec}
    if grammar.kind == "regex":
        return {"regex": grammar.spec}
    if grammar.kind == "choice":
        return {"choice": list(grammar.spec)}
    return {"grammar": grammar.spec}
