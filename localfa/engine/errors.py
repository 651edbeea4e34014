"""Typed engine errors, so callers can tell a bad grammar from a cut answer from a long prompt."""

from __future__ import annotations

from typing import Any


class EngineError(RuntimeError):
    """Base class for every failure raised by an engine backend.

    `transient` says whether the same request may well succeed later (a server down, a timeout,
    an HTTP 5xx): a sweep retries such records on resume; other engine errors are final.
    """

    transient: bool = False
    # Set by the runner when it raises the error inside a program: which request failed, and the
    # answers its batch siblings did get (None where they failed), so a program that runs several
    # others (an ensemble) can end only the one whose request failed.
    request_key: str | None = None
    partial: "list[Any] | None" = None


class EngineUnavailableError(EngineError):
    """The engine could not be reached or did not answer in time (connection refused, timeout,
    HTTP 5xx, a malformed response body): transient."""

    transient = True


class CacheError(EngineError):
    """The response cache could not be read or written: that request's error, retried on resume."""

    transient = True


class RequestFailedError(EngineError):
    """One request failed on two servers that answer other requests: the request is at fault, not
    the servers, so it is that request's (final) error and no third server is tried."""


class GrammarError(EngineError):
    """A grammar that cannot be compiled or enforced; names the grammar."""

    def __init__(self, grammar_name: str, detail: str) -> None:
        super().__init__(f"grammar {grammar_name!r} is invalid: {detail}")
        self.grammar_name = grammar_name
        self.detail = detail


class TruncatedOutputError(EngineError):
    """A constrained answer was cut by max_tokens even after the retry with more room."""

    def __init__(self, grammar_name: str, max_tokens: int, text: str) -> None:
        super().__init__(
            f"output for grammar {grammar_name!r} was cut at max_tokens={max_tokens} "
            f"(after one retry with more room); last text: {text[-120:]!r}"
        )
        self.grammar_name = grammar_name
        self.max_tokens = max_tokens
        self.text = text


class ContextLengthError(EngineError):
    """The prompt does not fit in the model's context window."""

    def __init__(self, prompt_tokens: int, max_model_len: int) -> None:
        super().__init__(f"prompt is {prompt_tokens} tokens but the model's context holds {max_model_len}")
        self.prompt_tokens = prompt_tokens
        self.max_model_len = max_model_len


class InvalidOutputError(EngineError):
    """Text that does not satisfy its grammar (only possible from a misbehaving backend)."""

    def __init__(self, grammar_name: str, text: str, detail: str) -> None:
        super().__init__(f"output does not satisfy grammar {grammar_name!r}: {detail}; text={text[:200]!r}")
        self.grammar_name = grammar_name
        self.text = text


class ModelPathError(EngineError):
    """A model reference that is not a local folder (we never download)."""


def is_transient(exc: BaseException) -> bool:
    """Whether a failure may well pass on a later try: an engine that was unavailable, a timeout,
    a connection error (httpx's transport errors included), never a bad trace or a method bug."""
    if isinstance(exc, EngineError):
        return exc.transient
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, httpx.TransportError)


class ScoreUnsupportedError(EngineError):
    """This engine cannot score a prompt (no access to the model's probabilities)."""

    def __init__(self, engine: str) -> None:
        super().__init__(
            f"engine {engine} cannot score prompts (a 'score, don't generate' request needs the model's "
            "probabilities): use --engine transformers (log-probabilities and attention) or vllm (log-probabilities)"
        )
