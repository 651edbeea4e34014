"""The part every engine wrapper shares (the response cache, fault injection): everything but
`generate` and `session` is the wrapped engine's, so a wrapper never hides a backend's counting,
window or model identity, and a method added to the Engine protocol is forwarded in one place."""

from __future__ import annotations

from typing import Any, Sequence

from localfa.engine.types import Message


class EngineWrapper:
    """Forwards the Engine protocol to `inner`; subclasses add `generate` and `session`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_model_len = inner.max_model_len
        self.model_info = inner.model_info
        self.method_defaults = inner.method_defaults

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        return list(self.inner.count_tokens_many(texts))

    @property
    def counts_in_process(self) -> bool:
        return bool(getattr(self.inner, "counts_in_process", False))

    def token_unit(self) -> str:
        return str(self.inner.token_unit())

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        counter = getattr(self.inner, "count_prompt_tokens", None)
        return counter(messages) if counter is not None else None

    def attach_trace(self, trace: Any) -> None:
        self.inner.attach_trace(trace)

    def reset_prefix_cache(self) -> None:
        self.inner.reset_prefix_cache()

    def forget_grammars(self) -> None:
        self.inner.forget_grammars()

    def start_cold(self) -> None:
        self.inner.start_cold()

    def describe(self) -> dict[str, Any]:
        return dict(self.inner.describe())

    def close(self) -> None:
        self.inner.close()
