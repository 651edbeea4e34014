"""The engine protocol's data: what a method asks for and what it gets back."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from localfa.engine.errors import EngineError
from localfa.engine.grammar import Grammar

if TYPE_CHECKING:
    from localfa.engine.settings import MethodDefaults

Message = dict[str, str]


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one request. `seed` is per request (see `derive_seed`)."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 256
    seed: int | None = None

    def __post_init__(self) -> None:
        """Settings no engine can honour are refused here, whoever built them (a profile, the API)."""
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"sampling temperature must be a finite number >= 0, got {self.temperature}")
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise ValueError(f"sampling top_p must lie in (0, 1], got {self.top_p}")

    def with_(self, **changes: Any) -> "Sampling":
        return replace(self, **changes)


@dataclass(frozen=True)
class Score:
    """Score, don't generate: the prompt's per-token log-probabilities from one prefill, and
    (where the backend can) the attention of `layers` (negative: from the last) averaged over
    heads, summed per segment. `spans` are the segments, (start, end) character offsets into the
    last message's content, ascending and disjoint; the answer's ``attention[i][j]`` is segment i's tokens' attention to
    segment j's tokens, averaged over i's tokens (`localfa.engine.scoring`). `chunk` query rows
    are scored at a time, so memory stays bounded on long prompts."""

    spans: tuple[tuple[int, int], ...] = ()
    layers: tuple[int, ...] = ()
    chunk: int = 128

    def __post_init__(self) -> None:
        if self.chunk < 1:
            raise ValueError(f"score chunk must be at least 1, got {self.chunk}")
        if any(not (0 <= a <= b) for a, b in self.spans) or any(b > c for (_, b), (c, _) in zip(self.spans, self.spans[1:])):
            raise ValueError("score spans must be ascending, disjoint (start, end) pairs with 0 <= start <= end")

    def key(self) -> list[Any]:
        """What the response cache keys on: every field that changes the answer."""
        return [[list(s) for s in self.spans], list(self.layers)]


@dataclass(frozen=True)
class Request:
    """Chat messages + exactly one grammar + sampling. `key` names the call for logs and seeds;
    `route` groups requests that should reach the same server (a trace's id: its calls then share
    that server's prefix cache). Neither is part of the cache key. `score` set: the prompt is
    scored, not answered (`Score`; the grammar is then `localfa.engine.scoring.score_grammar()`)."""

    messages: tuple[Message, ...]
    grammar: Grammar
    sampling: Sampling = field(default_factory=Sampling)
    key: str = ""
    route: str = ""
    score: Score | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))


@dataclass
class Usage:
    """Token accounting; `cached_tokens` are prompt tokens served from the prefix cache;
    `retries`: calls (counted in `calls`) that re-asked an answer cut at its `max_tokens`."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    retries: int = 0

    def add(self, other: "Usage") -> "Usage":
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.calls += other.calls
        self.retries += other.retries
        return self

    def as_dict(self) -> dict[str, int]:
        out = {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
        }
        if self.retries:
            out["retries"] = self.retries
        return out


@dataclass
class Response:
    """One answer: raw text, the grammar-validated value, why it stopped, usage and latency."""

    text: str
    value: Any
    finish_reason: str
    usage: Usage
    latency_s: float
    key: str = ""
    from_cache: bool = False
    retried: bool = False


Completion = tuple[int, "Response | EngineError"]


class Session(Protocol):
    """Submit requests at any time, collect each response as it finishes (`localfa.engine.session`)."""

    def submit(self, requests: Sequence[Request]) -> list[int]:
        """Queue requests; return one ticket per request."""

    def wait(self) -> list[Completion]:
        """Block until at least one submitted request is done; return (ticket, response or error)."""

    def pending(self) -> int:
        """How many submitted requests have not been returned by `wait` yet."""


@runtime_checkable
class Engine(Protocol):
    """The full contract every backend meets; nothing else is asked of an engine.

    `generate` answers a whole batch; `session()` lets a caller submit requests at any time and
    collect each response as it finishes (backends without continuous batching return a session
    that sends everything pending as one batch). `max_model_len` is the context window (None
    when unknown), `model_info` what the manifest records about the model. `attach_trace` tells
    the engine the trace (a `localfa.traces.model.Trace`) a job runs on before its requests come
    (their `route` is its id); wrappers forward it; only the oracle engine uses it.
    """

    name: str
    max_model_len: int | None
    model_info: dict[str, Any]
    method_defaults: "MethodDefaults"  # a profile's method option values for this model

    def generate(self, requests: Sequence[Request]) -> list[Response]: ...

    def session(self) -> Session: ...

    def count_tokens(self, text: str) -> int: ...

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]: ...

    def token_unit(self) -> str: ...

    def reset_prefix_cache(self) -> None: ...

    def forget_grammars(self) -> None: ...

    def start_cold(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...

    def attach_trace(self, trace: Any) -> None: ...


def derive_seed(run_seed: int, trace_id: str, call_key: str) -> int:
    """A request's seed from (run seed, trace id, call key): independent of scheduling order."""
    digest = hashlib.sha256(f"{run_seed}\x1f{trace_id}\x1f{call_key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
