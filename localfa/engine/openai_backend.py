"""Client for running `vllm serve` engines (OpenAI-compatible HTTP), one or several.

A batch is sent concurrently; with several servers each request goes to the server chosen by a
hash of its key, so placement is deterministic. Structured outputs travel in the request body
(`structured_outputs`), so the server enforces the same grammar as the in-process engine. Cached
prompt tokens are reported when the server runs with `--enable-prompt-tokens-details` (the
profiles launched by `localfa serve` do).
"""

from __future__ import annotations

import hashlib
import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Sequence

import httpx

from localfa.engine.base import BaseEngine, RawOutput
from localfa.engine.errors import ContextLengthError, EngineError, GrammarError
from localfa.tokens import approx_tokens
from localfa.engine.types import Message, Request

_LEN_RE = re.compile(r"maximum context length is (\d+).*?(\d+) (?:input )?tokens", re.S)


class OpenAIEngine(BaseEngine):
    name = "openai"

    def __init__(self, base_urls: list[str], api_key: str | None = None, model: str | None = None,
                 timeout_s: float = 600.0, max_concurrency: int = 64) -> None:
        if not base_urls:
            raise EngineError("the openai backend needs at least one --base-url")
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.base_urls = [u if u.endswith("/v1") else u + "/v1" for u in self.base_urls]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, timeout=timeout_s, trust_env=False)
        self.max_concurrency = max_concurrency
        self.model = model or self._served_model(self.base_urls[0])
        self.max_model_len = self._max_model_len(self.base_urls[0])

    # -----------------------------------------------------------------------------------
    def _served_model(self, url: str) -> str:
        try:
            data = self.client.get(f"{url}/models").raise_for_status().json()
        except httpx.HTTPError as exc:
            raise EngineError(f"{url}: cannot list models ({exc})") from exc
        models = data.get("data") or []
        if not models:
            raise EngineError(f"{url}: the server serves no model")
        return models[0]["id"]

    def _max_model_len(self, url: str) -> int | None:
        try:
            data = self.client.get(f"{url}/models").json()
            return int(data["data"][0].get("max_model_len") or 0) or None
        except Exception:
            return None

    def _server_for(self, req: Request) -> str:
        if len(self.base_urls) == 1:
            return self.base_urls[0]
        h = int(hashlib.sha256(req.key.encode() + str(req.sampling.seed).encode()).hexdigest(), 16)
        return self.base_urls[h % len(self.base_urls)]

    def count_tokens(self, text: str) -> int:
        root = self.base_urls[0].removesuffix("/v1")
        try:
            data = self.client.post(f"{root}/tokenize", json={"model": self.model, "prompt": text,
                                                              "add_special_tokens": False}).json()
            return int(data["count"])
        except Exception:
            return approx_tokens(text)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "base_urls": self.base_urls, "served_model": self.model,
                "max_model_len": self.max_model_len}

    def close(self) -> None:
        self.client.close()

    # -----------------------------------------------------------------------------------
    def _body(self, req: Request) -> dict[str, Any]:
        s = req.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(req.messages),
            "temperature": s.temperature,
            "top_p": s.top_p if s.temperature > 0 else 1.0,
            "max_tokens": s.max_tokens,
            "structured_outputs": req.grammar.structured_outputs(),
        }
        if s.seed is not None:
            body["seed"] = s.seed
        return body

    def _one(self, req: Request) -> RawOutput:
        url = self._server_for(req)
        started = time.perf_counter()
        try:
            resp = self.client.post(f"{url}/chat/completions", json=self._body(req))
        except httpx.HTTPError as exc:
            raise EngineError(f"{url}: request failed ({exc})") from exc
        latency = time.perf_counter() - started
        if resp.status_code >= 400:
            text = resp.text
            m = _LEN_RE.search(text)
            if m or "maximum context length" in text or "longer than the maximum" in text:
                limit = int(m.group(1)) if m else (self.max_model_len or -1)
                got = int(m.group(2)) if m else -1
                raise ContextLengthError(got, limit)
            if "grammar" in text.lower() or "schema" in text.lower() or "structured" in text.lower():
                raise GrammarError(req.grammar.name, f"server refused it: {text[:300]}")
            raise EngineError(f"{url}: HTTP {resp.status_code}: {text[:300]}")
        data = resp.json()
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return RawOutput(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
            latency_s=latency,
        )

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        workers = max(1, min(self.max_concurrency, len(requests)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self._one, requests))

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        return None  # the server checks; a too-long prompt comes back as ContextLengthError

    def session(self) -> "HTTPSession":
        return HTTPSession(self)


class HTTPSession:
    """Each request is its own HTTP call on a thread pool; `wait` returns as soon as any is done.

    The server batches whatever is in flight (continuous batching), so a program's next request
    joins while the others are still decoding. Retry and validation are `generate([req])`'s.
    """

    def __init__(self, engine: OpenAIEngine) -> None:
        self.engine = engine
        self.pool = ThreadPoolExecutor(max_workers=engine.max_concurrency)
        self._next = 0
        self._futures: dict[Future, int] = {}

    def pending(self) -> int:
        return len(self._futures)

    def submit(self, requests: Sequence[Request]) -> list[int]:
        tickets = []
        for req in requests:
            ticket, self._next = self._next, self._next + 1
            self._futures[self.pool.submit(self.engine.generate, [req])] = ticket
            tickets.append(ticket)
        return tickets

    def wait(self) -> list[tuple[int, Any]]:
        if not self._futures:
            return []
        done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
        out: list[tuple[int, Any]] = []
        for fut in done:
            ticket = self._futures.pop(fut)
            try:
                out.append((ticket, fut.result()[0]))
            except EngineError as exc:
                out.append((ticket, exc))
        return sorted(out, key=lambda c: c[0])
