"""Client for running `vllm serve` engines (OpenAI-compatible HTTP), one or several.

A batch is sent concurrently; with several servers every request of one trace goes to the same
server (chosen by a hash of the trace id), so a trace's turns reuse that server's prefix cache. A
server that refuses connections, times out or answers 5xx leaves the rotation and its requests go
to the others; the run fails only when none is left. All servers must serve the same model. Structured outputs travel in the request body
(`structured_outputs`), so the server enforces the same grammar as the in-process engine. Cached
prompt tokens are reported when the server runs with `--enable-prompt-tokens-details` (the
profiles launched by `localfa serve` do).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

import httpx

from localfa.engine.base import BaseEngine, RawOutput
from localfa.engine.errors import ContextLengthError, EngineError, EngineUnavailableError, GrammarError
from localfa.engine.session import as_engine_error
from localfa.engine.types import Message, Request
from localfa.engine.vllm_types import structured_outputs
from localfa.tokens import approx_tokens

_LEN_RE = re.compile(r"maximum context length is (\d+).*?(\d+) (?:input )?tokens", re.S)


class OpenAIEngine(BaseEngine):
    name = "openai"
    packages = ("httpx",)
    computes_locally = False  # the servers compute

    @classmethod
    def create(cls, options: Any, say: Callable[[str], None], named: bool = True) -> "OpenAIEngine":
        settings = options.settings() if options.profile else None
        engine = cls(
            options.base_urls,
            api_key=options.api_key or os.environ.get("LOCALFA_API_KEY"),
            enable_thinking=bool(settings and settings.enable_thinking),
            say=say,
        )
        say(f"localfa: engine openai at {', '.join(engine.base_urls)} (model {engine.model})")
        engine.check_itself(say)
        return engine

    def run_self_checks(self) -> dict[str, tuple[bool, str]]:
        """Every live server reports cached prompt tokens (`prompt_tokens_details`), which vLLM
        does only when started with --enable-prompt-tokens-details (`localfa serve` does)."""
        from localfa.engine.grammar import Grammar
        from localfa.engine.types import Sampling

        probe = Request(
            ({"role": "user", "content": "Say ok."},),
            Grammar.choice(["ok"], name="self_check"),
            Sampling(temperature=0.0, max_tokens=2, seed=0),
            key="self-check",
        )
        missing = []
        for url in self.live():
            try:
                resp = self.client.post(f"{url}/chat/completions", json=self._body(probe))
                usage = resp.raise_for_status().json().get("usage") or {}
            except (httpx.HTTPError, ValueError) as exc:
                self._take_out(url, f"probe request failed ({exc})")
                continue
            if "prompt_tokens_details" not in usage or usage["prompt_tokens_details"] is None:
                missing.append(url)
        return {
            "prompt_tokens_details": (
                not missing,
                f"{', '.join(missing)} reported no prompt_tokens_details: start vLLM with "
                "--enable-prompt-tokens-details (localfa serve does) or cached tokens read as 0",
            )
        }

    def __init__(
        self,
        base_urls: list[str],
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = 600.0,
        max_concurrency: int = 64,
        enable_thinking: bool = False,
        say: Callable[[str], None] | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        if not base_urls:
            raise EngineError("the openai backend needs at least one --base-url")
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.base_urls = [u if u.endswith("/v1") else u + "/v1" for u in self.base_urls]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, trust_env=False, timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s))
        self.max_concurrency = max_concurrency
        self.enable_thinking = enable_thinking
        self._say = say or (lambda _msg: None)
        self._lock = threading.Lock()
        self.down: dict[str, str] = {}  # server -> why it was taken out of rotation
        self.servers = self._probe_servers(model)
        first = self.servers[self.live()[0]]
        self.model = model or first["id"]
        self.max_model_len = first["max_model_len"]
        self.model_info = {
            "path": None,
            "sha256": None,
            "name": self.model,
            "root": first["root"],
            "max_model_len": self.max_model_len,
            "identity": f"{self.model}|{first['root']}|{self.max_model_len}",
        }

    # ---- servers -------------------------------------------------------------------------
    def _probe_servers(self, model: str | None) -> dict[str, dict[str, Any]]:
        """Model id, root and window of every server; unreachable ones start out of rotation.

        Servers that serve different models (or the same name with a different root or window)
        are refused: their answers would not be comparable within one run.
        """
        found: dict[str, dict[str, Any]] = {}
        for url in self.base_urls:
            try:
                data = self.client.get(f"{url}/models").raise_for_status().json()
                entry = (data.get("data") or [None])[0]
                if not isinstance(entry, dict) or "id" not in entry:
                    raise EngineError(f"{url}: the server serves no model")
            except (httpx.HTTPError, ValueError) as exc:
                self._take_out(url, f"cannot list models ({exc})")
                continue
            found[url] = {
                "id": entry["id"],
                "root": entry.get("root") or entry["id"],
                "max_model_len": int(entry.get("max_model_len") or 0) or None,
            }
        if not found:
            raise EngineUnavailableError("no server answered: " + "; ".join(f"{u}: {w}" for u, w in self.down.items()))
        kinds = {(v["id"], v["root"], v["max_model_len"]) for v in found.values()}
        if len(kinds) > 1:
            listing = ", ".join(f"{u} serves {v['id']} (root {v['root']}, max_model_len {v['max_model_len']})" for u, v in found.items())
            raise EngineError(f"the servers serve different models: {listing}; use servers of one model")
        if model is not None and model not in {v["id"] for v in found.values()}:
            raise EngineError(f"no server serves model {model!r}")
        return found

    def live(self) -> list[str]:
        with self._lock:
            return [u for u in self.base_urls if u not in self.down]

    def _take_out(self, url: str, why: str) -> None:
        with self._lock:
            if url in self.down:
                return
            self.down[url] = why
        self._say(f"localfa: server {url} taken out of rotation: {why}")

    def _server_for(self, req: Request, live: list[str]) -> str:
        """The server of the request's route (its trace): stable, so a trace keeps its prefix
        cache; when that server is down, the next live one in the ring."""
        if len(self.base_urls) == 1:
            return live[0]
        h = int(hashlib.sha256((req.route or req.key).encode()).hexdigest()[:12], 16)
        start = h % len(self.base_urls)
        for i in range(len(self.base_urls)):
            url = self.base_urls[(start + i) % len(self.base_urls)]
            if url in live:
                return url
        return live[0]

    def count_tokens(self, text: str) -> int:
        root = self.base_urls[0].removesuffix("/v1")
        try:
            data = self.client.post(f"{root}/tokenize", json={"model": self.model, "prompt": text, "add_special_tokens": False}).json()
            return int(data["count"])
        except Exception:
            return approx_tokens(text)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "base_urls": self.base_urls,
            "served_model": self.model,
            "model_root": self.model_info.get("root"),
            "max_model_len": self.max_model_len,
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
            "servers_down": dict(self.down),
            "self_checks": self.self_checks,
        }

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
            "structured_outputs": structured_outputs(req.grammar),
        }
        if s.seed is not None:
            body["seed"] = s.seed
        body["chat_template_kwargs"] = {"enable_thinking": self.enable_thinking}
        return body

    def _one(self, req: Request) -> RawOutput:
        """Send one request; a server that refuses, times out or fails (5xx) leaves the rotation
        and the request goes to the next live one; only when none is left does it fail."""
        while True:
            live = self.live()
            if not live:
                raise EngineUnavailableError("every server is out of rotation: " + "; ".join(f"{u}: {w}" for u, w in self.down.items()))
            url = self._server_for(req, live)
            try:
                return self._post(url, req)
            except _ServerDown as exc:
                self._take_out(url, str(exc))

    def _post(self, url: str, req: Request) -> RawOutput:
        started = time.perf_counter()
        try:
            resp = self.client.post(f"{url}/chat/completions", json=self._body(req))
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
            raise _ServerDown(f"request failed ({type(exc).__name__}: {exc})") from exc
        except httpx.TimeoutException as exc:
            raise _ServerDown(f"timed out ({exc})") from exc
        except httpx.HTTPError as exc:
            raise EngineUnavailableError(f"{url}: request failed ({exc})") from exc
        latency = time.perf_counter() - started
        if resp.status_code >= 500:
            raise _ServerDown(f"HTTP {resp.status_code}: {resp.text[:200]}")
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
        try:
            return _raw_output(resp.json(), latency)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EngineUnavailableError(f"{url}: malformed response body ({type(exc).__name__}: {exc}): {resp.text[:200]!r}") from exc

    def _generate_raw(self, requests: Sequence[Request]) -> list[RawOutput]:
        workers = max(1, min(self.max_concurrency, len(requests)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self._one, requests))

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        return None  # the server checks; a too-long prompt comes back as ContextLengthError

    def session(self) -> "HTTPSession":
        return HTTPSession(self)


class _ServerDown(Exception):
    """A server-side failure that takes the server out of rotation (refused, timeout, 5xx)."""


def _raw_output(data: dict[str, Any], latency: float) -> RawOutput:
    choice = data["choices"][0]
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    text = choice["message"].get("content") or ""
    if not isinstance(text, str):
        raise TypeError(f"content is {type(text).__name__}, not text")
    return RawOutput(
        text=text,
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        latency_s=latency,
    )


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
            except Exception as exc:  # noqa: BLE001 - one request's failure, never the sweep's
                out.append((ticket, as_engine_error(exc)))
        return sorted(out, key=lambda c: c[0])
