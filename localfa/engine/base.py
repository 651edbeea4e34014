"""Shared behaviour of every backend: length checks, grammar validation, the truncation retry."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from localfa.engine.errors import ContextLengthError, InvalidOutputError, ScoreUnsupportedError, TruncatedOutputError
from localfa.engine.grammar import clear_interned
from localfa.engine.session import BatchSession
from localfa.engine.settings import MethodDefaults
from localfa.engine.types import Message, Request, Response, Session, Usage
from localfa.tokens import approx_tokens


@dataclass
class RawOutput:
    """What a backend produced for one request, before validation."""

    text: str
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float = 0.0


class BaseEngine(ABC):
    """Backends implement `_generate_raw`; this class turns raw text into validated responses.

    A constrained output cut by `max_tokens` is retried once, as one batch, with twice the room;
    still cut, it raises `TruncatedOutputError`. A prompt longer than the context window raises
    `ContextLengthError` before anything is sent.
    """

    name: str = "base"
    max_model_len: int | None = None
    model_info: dict[str, Any] = {}  # set per instance by the factory
    method_defaults: MethodDefaults = MethodDefaults()  # set per instance by the factory (a profile's tables)
    self_checks: dict[str, bool] = {}  # set at start by backends that check themselves
    retry_factor: int = 2
    # What a worker running this backend needs from a cluster: cores of its own (a model computed
    # in this process) and, where the cluster has them, GPUs (one per tensor-parallel rank).
    computes_locally: bool = True
    uses_gpus: bool = False
    packages: tuple[str, ...] = ()  # distributions whose versions the manifest records
    takes_params: bool = False  # whether `--engine NAME:key=value` parameters mean anything to it

    @abstractmethod
    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        """Generate one raw output per request, in order, as one batch where the backend can."""

    def _score_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        """Score each prompt (`localfa.engine.scoring`): raw text is the answer's JSON, no
        completion tokens. Backends with access to the model's probabilities override this."""
        raise ScoreUnsupportedError(self.name)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        """Prompt length after the chat template, or None when the backend cannot tell cheaply."""
        return None

    def count_tokens(self, text: str) -> int:
        """Tokens of plain text; backends with a tokenizer override this."""
        return approx_tokens(text)

    #: Counting happens in this process (a server backend pays a round trip per count call).
    counts_in_process = True

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text; backends that pay per call (a server) count them all in one."""
        return [self.count_tokens(t) for t in texts]

    def token_unit(self) -> str:
        """What the counts are: "tokens" from a tokenizer, "chars/4" where none was at hand."""
        return "chars/4" if type(self).count_tokens is BaseEngine.count_tokens else "tokens"

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "max_model_len": self.max_model_len}

    def close(self) -> None:  # noqa: B027 - a no-op by default, on purpose
        """Release the model; backends holding processes override this."""

    def attach_trace(self, trace: Any) -> None:  # noqa: B027 - a model never needs the trace
        """Told the trace a job runs on (the runner calls it for every job; requests name it in
        `route`). Only the oracle engine, which answers from the trace's labels, uses it."""

    def reset_prefix_cache(self) -> None:  # noqa: B027 - a no-op where there is no prefix cache
        """Forget cached prompt prefixes (benchmarks measure phases from a cold cache)."""

    def forget_grammars(self) -> None:
        """Forget every grammar built or compiled so far. A benchmark whose warm-up (or earlier
        phase) compiled the grammars it then measures hides a cost every fresh sweep pays: a
        per-trace grammar is built and compiled once, for its one trace. Backends that compile
        grammars themselves extend this."""
        clear_interned()

    def start_cold(self) -> None:
        """Start a measured phase as a fresh sweep starts: no cached prefix, no compiled grammar."""
        self.reset_prefix_cache()
        self.forget_grammars()

    @classmethod
    def available(cls) -> bool:
        """Whether this backend's packages are installed (local backends override this)."""
        return True

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "BaseEngine":
        """Build from `EngineOptions` (see localfa.engine.factory); every backend implements it."""
        raise NotImplementedError(f"{cls.__name__}.create")

    def run_self_checks(self) -> dict[str, tuple[bool, str]]:
        """name -> (passed, what a failure means); backends that rely on something check it here."""
        return {}

    def check_itself(self, say: Callable[[str], None]) -> None:
        """Run the self-checks at start (localfa.engine.self_check); a failure closes the engine
        and raises, unless LOCALFA_ALLOW_UNCHECKED=1 turns it into a warning."""
        from localfa.engine.errors import EngineError
        from localfa.engine.self_check import settle

        try:
            self.self_checks = settle(self.run_self_checks(), say)
        except EngineError:
            self.close()
            raise

    def session(self) -> Session:
        """Batch-at-a-time by default; backends with continuous batching override this."""
        return BatchSession(self)

    # -----------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Response]:
        requests = list(requests)
        if not requests:
            return []
        if any(r.score is not None for r in requests):
            return self._generate_and_score(requests)
        self._check_lengths(requests)
        started = time.perf_counter()
        raws = self._generate_raw(requests)
        if len(raws) != len(requests):
            raise RuntimeError(f"backend {self.name} returned {len(raws)} outputs for {len(requests)} requests")
        elapsed = time.perf_counter() - started
        responses: list[Response | None] = [None] * len(requests)
        to_retry: list[int] = []
        for i, (req, raw) in enumerate(zip(requests, raws)):
            if raw.finish_reason == "length":
                to_retry.append(i)
                continue
            responses[i] = self._validated(req, raw, elapsed)
        if to_retry:
            bigger = [self._with_more_room(requests[i]) for i in to_retry]
            started = time.perf_counter()
            retried = self._generate_raw(bigger)
            elapsed_retry = time.perf_counter() - started
            for i, req, raw in zip(to_retry, bigger, retried):
                if raw.finish_reason == "length":
                    raise TruncatedOutputError(req.grammar.name, req.sampling.max_tokens, raw.text)
                responses[i] = self._count_first_attempt(self._validated(req, raw, elapsed + elapsed_retry), raws[i])
        return [r for r in responses if r is not None]

    def _generate_and_score(self, requests: list[Request]) -> list[Response]:
        """A batch holding score requests: those are scored (one prefill each, no retry), the
        rest generated as usual; the answers come back in the batch's order."""
        scored = [i for i, r in enumerate(requests) if r.score is not None]
        rest = [i for i, r in enumerate(requests) if r.score is None]
        self._check_lengths([requests[i] for i in scored])
        started = time.perf_counter()
        raws = self._score_raw([requests[i] for i in scored])
        elapsed = time.perf_counter() - started
        out: dict[int, Response] = {i: self._validated(requests[i], raw, elapsed) for i, raw in zip(scored, raws)}
        out.update(zip(rest, self.generate([requests[i] for i in rest])))
        return [out[i] for i in range(len(requests))]

    @staticmethod
    def _count_first_attempt(resp: Response, first: RawOutput) -> Response:
        """A retried response also pays for the truncated attempt before it."""
        resp.retried = True
        resp.usage.prompt_tokens += first.prompt_tokens
        resp.usage.completion_tokens += first.completion_tokens
        resp.usage.cached_tokens += first.cached_tokens
        resp.usage.calls += 1
        resp.usage.retries += 1
        return resp

    def _with_more_room(self, req: Request) -> Request:
        room = req.sampling.max_tokens * self.retry_factor
        return replace(req, sampling=req.sampling.with_(max_tokens=room))

    def _validated(self, req: Request, raw: RawOutput, batch_latency: float) -> Response:
        try:
            value = req.grammar.parse(raw.text)
        except InvalidOutputError:
            raise
        usage = Usage(raw.prompt_tokens, raw.completion_tokens, raw.cached_tokens, calls=1)
        return Response(
            text=raw.text, value=value, finish_reason=raw.finish_reason, usage=usage, latency_s=raw.latency_s or batch_latency, key=req.key
        )

    def _check_lengths(self, requests: Sequence[Request]) -> None:
        if not self.max_model_len:
            return
        for req in requests:
            n = self.count_prompt_tokens(req.messages)
            if n is not None and n >= self.max_model_len:
                raise ContextLengthError(n, self.max_model_len)


@dataclass
class LocalModel:
    """A local model folder resolved for a backend, with what the manifest records about it."""

    path: Any
    settings: Any
    info: dict[str, Any]


def resolve_local_model(options: Any, backend: str, named: bool, say: Callable[[str], None]) -> LocalModel:
    """The model folder (embedded by default), its fingerprint, and one line saying what runs."""
    from localfa.engine.model import model_fingerprint, resolve_model

    settings = options.settings()
    model_dir = resolve_model(settings.model)
    label = "embedded " + model_dir.name if settings.model is None else str(model_dir)
    say(f"localfa: engine {backend}{'' if named else ' (best installed backend)'}, model {label}")
    return LocalModel(model_dir, settings, {**model_fingerprint(model_dir), "name": model_dir.name})
